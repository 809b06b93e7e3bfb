// The implicit-GEMM forward's launches for float32 as TF32 (see fprop_launch.hpp).
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_FPROP_LAUNCHES(float, false);
CONVT_INSTANTIATE_WGMMA_LAUNCH(float, false);

int tma_kernel_binary_version() {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, tma::fprop_tma_kernel<float, 64, 32>) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return attr.binaryVersion;
}

}  // namespace cuda
}  // namespace convt
