// The wgmma forward's position-major tiles for bfloat16 (see
// fprop_launch.hpp), apart from the other launches so that the kernels build in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_POS(__nv_bfloat16, false);

}  // namespace cuda
}  // namespace convt
