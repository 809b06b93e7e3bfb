// The wgmma forward with the input transposed in the kernel, position-major tiles, for
// float as TF32 (see fprop_launch.cuh), apart from the other launches so that the kernels
// build in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_XP_POS(float);

}  // namespace cuda
}  // namespace convt
