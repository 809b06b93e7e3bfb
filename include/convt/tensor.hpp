// convt/tensor.hpp — a non-owning view of a strided tensor.
//
// Tensors cross every convt API as (pointer, sizes, element strides, dtype, device):
// no framework type appears in the interface, so one build of convt serves any PyTorch
// version (or none). Strides are in elements and may describe any layout, including
// channels_last and non-contiguous views; sizes and strides are 64-bit.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "convt/dtype.hpp"

namespace convt {

inline constexpr int kMaxTensorRank = 5;  // (N, C, D, H, W)

struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Device device = Device::cpu();
  int rank = 0;
  std::array<int64_t, kMaxTensorRank> sizes{};
  std::array<int64_t, kMaxTensorRank> strides{};

  TensorRef() = default;
  // Sizes with explicit strides.
  TensorRef(void* data, DType dtype, Device device, std::initializer_list<int64_t> sizes,
            std::initializer_list<int64_t> strides);
  // Sizes only: a contiguous (row-major) tensor.
  TensorRef(void* data, DType dtype, Device device, std::initializer_list<int64_t> sizes);
  // From arrays (used by bindings).
  static TensorRef from_arrays(void* data, DType dtype, Device device, int rank,
                               const int64_t* sizes, const int64_t* strides);

  int64_t numel() const;
  int64_t size(int dim) const { return sizes[dim]; }
  int64_t stride(int dim) const { return strides[dim]; }
  bool is_contiguous() const;
  // "[2, 3, 5]" — the way PyTorch prints a size in its error messages.
  std::string sizes_string() const;
};

// Row-major strides for the given sizes.
std::array<int64_t, kMaxTensorRank> contiguous_strides(int rank, const int64_t* sizes);

}  // namespace convt
