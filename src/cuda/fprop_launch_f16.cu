// The implicit-GEMM forward's launches for float16 (see fprop_launch.hpp).
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

CONVT_INSTANTIATE_FPROP_LAUNCHES(__half, false);
CONVT_INSTANTIATE_WGMMA_LAUNCH(__half, false);

// 1 in device code built for sm_90a (where the wgmma kernel has its body), else 0.
__device__ int wgmma_kernel_compiled =
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    1;
#else
    0;
#endif

int wgmma_kernel_binary_version() {
  cudaFuncAttributes attr{};
  int compiled = 0;
  if (cudaFuncGetAttributes(&attr, wg::fprop_wgmma_kernel<__half, 256>) != cudaSuccess ||
      cudaMemcpyFromSymbol(&compiled, wgmma_kernel_compiled, sizeof(int)) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return compiled == 1 ? attr.binaryVersion : 0;
}

}  // namespace cuda
}  // namespace convt
