// The wgmma forward with two consumer warpgroups (tiles of 128 channels) for float32 as TF32
// (see fprop_launch.cuh), apart from the other launches so that the kernels build in
// parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_WGMMA_COOP(float);

}  // namespace cuda
}  // namespace convt
