// Small helpers shared by the CUDA backend's host code.
#pragma once

#include <cuda_runtime.h>

#include "convt/error.hpp"

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

}  // namespace cuda
}  // namespace convt
