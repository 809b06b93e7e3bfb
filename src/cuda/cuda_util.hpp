// Small helpers shared by the CUDA backend's host code.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "convt/error.hpp"
#include "convt/tensor.hpp"

namespace convt {
namespace cuda {

// Throws convt::Error for a failed CUDA call, after clearing the runtime's error state so
// that no error is left pending for the caller.
inline void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(ErrorKind::kRuntime, detail::str_cat("convt: CUDA error in ", what, ": ",
                                                   cudaGetErrorString(err), " (",
                                                   cudaGetErrorName(err), ")"));
}

// Opts `kernel` into `bytes` of dynamic shared memory on `device`, once per device.
// `done` must be a flag set owned by this one kernel.
template <typename Kernel>
void allow_smem(Kernel kernel, std::size_t bytes, int device, std::atomic<uint64_t>& done) {
  const uint64_t bit = uint64_t(1) << (device & 63);
  if (done.load(std::memory_order_relaxed) & bit) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)),
             "cudaFuncSetAttribute");
  done.fetch_or(bit, std::memory_order_relaxed);
}

// Largest element offset of a tensor, plus one (the elements an index type must reach).
inline int64_t span(const TensorRef& t) {
  int64_t s = 1;
  for (int d = 0; d < t.rank; ++d) s += (t.sizes[d] - 1) * t.strides[d];
  return s;
}

}  // namespace cuda
}  // namespace convt
