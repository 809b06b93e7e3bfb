// The wgmma forward with two consumer warpgroups over the input transposed in the kernel,
// for bfloat16 (see fprop_launch.cuh), apart from the other launches so that the kernels
// build in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_XP_COOP(__nv_bfloat16);

}  // namespace cuda
}  // namespace convt
