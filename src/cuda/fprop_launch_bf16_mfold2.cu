// The wgmma forward's channel-major tiles with 2 W taps stacked in M, for bfloat16 (see
// fprop_launch.cuh), apart from the other launches so that the kernels build in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_MFOLD(__nv_bfloat16, 2);

}  // namespace cuda
}  // namespace convt
