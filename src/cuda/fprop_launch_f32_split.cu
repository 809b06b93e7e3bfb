// The implicit-GEMM forward's launches for float32 as split TF32 (strict float32) (see fprop_launch.hpp).
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_FPROP_LAUNCHES(float, true);
CONVT_INSTANTIATE_WGMMA_LAUNCH(float, true);

}  // namespace cuda
}  // namespace convt
