// The wgmma forward's position-major tiles of 16 channels with the W taps folded into N,
// for float16 (see fprop_launch.cuh), apart from the other launches so that the kernels build
// in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_FOLD(__half, 16);

}  // namespace cuda
}  // namespace convt
