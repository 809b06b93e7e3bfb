// The implicit-GEMM forward's launches for float16 (see fprop_launch.hpp).
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_FPROP_LAUNCHES(__half, false);

}  // namespace cuda
}  // namespace convt
