// The wgmma forward's position-major tiles of 24 channels with the W taps folded into N,
// for bfloat16 (see fprop_launch.cuh), apart from the other launches so that the kernels build
// in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_FOLD(__nv_bfloat16, 24);

}  // namespace cuda
}  // namespace convt
