// convt/dtype.hpp — element types and devices of the tensors convt reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace convt {

enum class DType : int8_t { kFloat32 = 0, kFloat64 = 1, kFloat16 = 2, kBFloat16 = 3 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
  }
  return 0;
}

// The name PyTorch prints for the dtype ("float32", "bfloat16", ...).
constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1 };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // CUDA ordinal; ignored for the CPU

  static constexpr Device cpu() { return {DeviceType::kCPU, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  constexpr bool is_cuda() const { return type == DeviceType::kCUDA; }
  constexpr bool operator==(const Device& o) const {
    return type == o.type && (type == DeviceType::kCPU || index == o.index);
  }
  constexpr bool operator!=(const Device& o) const { return !(*this == o); }
};

// How float32 products may be computed on tensor cores (SPEC §3). float16/bfloat16
// always accumulate in float32 and float64 is always exact IEEE double arithmetic.
enum class MathMode : int8_t {
  kAllowTF32 = 0,   // float32 may use TF32 tensor cores (PyTorch's cuDNN default)
  kStrictFP32 = 1,  // float32 must meet the strict IEEE-float32 error budget
};

}  // namespace convt
