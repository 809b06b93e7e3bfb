// convt/problem.hpp — one transposed convolution, described by shape alone.
//
// A Problem holds everything that decides what a transposed convolution computes:
// batch, channels, groups, 1 to 3 spatial dimensions with per-dimension kernel size,
// stride, padding, output_padding and dilation, whether a bias is added, and the dtype.
// Its semantics are exactly PyTorch's conv_transpose{1,2,3}d:
//
//   y[n, g*Cog + co, o] = bias[g*Cog + co]
//       + sum_{ci < Cig, k}  x[n, g*Cig + ci, i] * w[g*Cig + ci, co, k]
//         over all (i, k) with o = i*stride - padding + k*dilation        (per dimension)
//
//   L_out = (L_in - 1)*stride - 2*padding + dilation*(kernel - 1) + output_padding + 1
//
// where Cig = C_in/groups and Cog = C_out/groups. Weight has shape (C_in, Cog, *kernel).
//
// validate() applies PyTorch's rules and raises convt::Error with PyTorch's wording.
// Kernels work on the canonical 3-D form (canonical3d()), in which a 1-D or 2-D problem
// gets leading spatial dimensions of size 1 (kernel 1, stride 1, padding 0, dilation 1).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "convt/dtype.hpp"
#include "convt/tensor.hpp"

namespace convt {

inline constexpr int kMaxSpatialDims = 3;
using Dims = std::array<int64_t, kMaxSpatialDims>;

// The convolution arguments as a user passes them (one entry per spatial dimension).
struct ConvParams {
  int spatial_dims = 2;
  Dims stride{1, 1, 1};
  Dims padding{0, 0, 0};
  Dims output_padding{0, 0, 0};
  Dims dilation{1, 1, 1};
  int64_t groups = 1;
};

struct Problem {
  int spatial_dims = 2;  // 1, 2 or 3
  int64_t batch = 1;
  int64_t in_channels = 1;
  int64_t out_channels = 1;
  int64_t groups = 1;
  Dims input_size{1, 1, 1};
  Dims kernel_size{1, 1, 1};
  Dims stride{1, 1, 1};
  Dims padding{0, 0, 0};
  Dims output_padding{0, 0, 0};
  Dims dilation{1, 1, 1};
  bool has_bias = false;
  DType dtype = DType::kFloat32;

  // Build a problem from the tensors of a call (batched input of rank spatial_dims+2,
  // weight of rank spatial_dims+2, optional 1-D bias) and the user's arguments,
  // checking every rule PyTorch checks, with its wording. Pass bias = nullptr for none.
  static Problem from_tensors(const TensorRef& input, const TensorRef& weight,
                              const TensorRef* bias, const ConvParams& params);

  // Throws convt::Error when the problem is not one PyTorch accepts.
  void validate() const;

  int64_t in_channels_per_group() const { return groups > 0 ? in_channels / groups : 0; }
  int64_t out_channels_per_group() const { return groups > 0 ? out_channels / groups : 0; }
  int64_t output_size(int dim) const;  // may be < 1 for invalid problems
  Dims output_sizes() const;

  // Shapes of the tensors the problem reads and writes (batched, rank spatial_dims+2).
  int tensor_rank() const { return spatial_dims + 2; }
  std::array<int64_t, kMaxTensorRank> input_shape() const;
  std::array<int64_t, kMaxTensorRank> weight_shape() const;
  std::array<int64_t, kMaxTensorRank> output_shape() const;

  int64_t input_numel() const;
  int64_t weight_numel() const;
  int64_t output_numel() const;
  // 2*N*C_in*(C_out/groups)*prod(kernel)*prod(input): the multiply-adds a dense
  // implementation performs, counting every tap that lands inside the output or not.
  double flops() const;

  // The same problem as a 3-D one (leading spatial dims of size 1).
  Problem canonical3d() const;

  // "conv_transpose2d N=8 C=64->64 g=1 in=[512, 512] k=[3, 3] s=[2, 2] p=[1, 1] op=[1, 1] d=[1, 1] float32"
  std::string to_string() const;
};

// "conv_transpose1d", "conv_transpose2d" or "conv_transpose3d".
const char* op_name(int spatial_dims);

}  // namespace convt
