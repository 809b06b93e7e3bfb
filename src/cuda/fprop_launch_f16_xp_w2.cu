// The wgmma forward with two transposer warps over the input transposed in the kernel (two
// consumer warpgroups, or position-major tiles of 16-32 channels), for float16 (see
// fprop_launch.cuh), apart from the other launches so that the kernels build in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

// (Not where CONVT_NO_WG_XP_W2_16 leaves the 16-bit ones out: kXpW2Built.)
#ifndef CONVT_NO_WG_XP_W2_16
CONVT_INSTANTIATE_WGMMA_XP_W2(__half);
#endif

}  // namespace cuda
}  // namespace convt
