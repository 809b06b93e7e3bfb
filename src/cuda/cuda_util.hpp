// Small helpers shared by the CUDA backend's host code.
#pragma once

#include <cuda_runtime.h>

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

// Largest element offset of a tensor, plus one (the elements an index type must reach).
inline int64_t span(const TensorRef& t) {
  int64_t s = 1;
  for (int d = 0; d < t.rank; ++d) s += (t.sizes[d] - 1) * t.strides[d];
  return s;
}

}  // namespace cuda
}  // namespace convt
