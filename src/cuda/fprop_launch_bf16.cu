// The implicit-GEMM forward's launches for bfloat16 (see fprop_launch.hpp).
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_FPROP_LAUNCHES(__nv_bfloat16, false);
CONVT_INSTANTIATE_WGMMA_LAUNCH(__nv_bfloat16, false);

}  // namespace cuda
}  // namespace convt
