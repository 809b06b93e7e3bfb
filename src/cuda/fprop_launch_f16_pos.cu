// The wgmma forward's position-major tiles for float16 (see
// fprop_launch.hpp), apart from the other launches so that the kernels build in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_POS(__half, false);

}  // namespace cuda
}  // namespace convt
