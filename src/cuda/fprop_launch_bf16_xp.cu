// The wgmma forward with the input transposed in the kernel, channel-major tiles, for
// bfloat16 (see fprop_launch.cuh), apart from the other launches so that the kernels
// build in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_XP(__nv_bfloat16);

}  // namespace cuda
}  // namespace convt
