// The wgmma forward with two consumer warpgroups (tiles of 128 channels) for float16
// (see fprop_launch.cuh), apart from the other launches so that the kernels build in
// parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_COOP(__half);

}  // namespace cuda
}  // namespace convt
