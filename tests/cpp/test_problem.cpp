// Problem model: shape arithmetic, canonical form, and every validation rule with the
// message PyTorch gives for it (oracle: PyTorch 2.x's own messages, written out here).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "convt/convt.hpp"

namespace convt {
namespace {

TensorRef T(std::initializer_list<int64_t> sizes, DType dt = DType::kFloat32,
            Device dev = Device::cpu()) {
  return TensorRef(nullptr, dt, dev, sizes);
}

ConvParams P(int sd) {
  ConvParams p;
  p.spatial_dims = sd;
  return p;
}

// Runs fn, expects a convt::Error of `kind` whose message equals `message` exactly.
void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::string& message) {
  try {
    fn();
    ADD_FAILURE() << "no error raised; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(ProblemShape, OutputSizeFormula) {
  Problem p;
  p.spatial_dims = 3;
  p.input_size = {12, 24, 48};
  p.kernel_size = {3, 5, 7};
  p.stride = {2, 2, 2};
  p.padding = {1, 2, 3};
  p.output_padding = {1, 1, 1};
  // (L-1)*s - 2p + d(k-1) + op + 1
  EXPECT_EQ(p.output_size(0), 11 * 2 - 2 + 2 + 1 + 1);
  EXPECT_EQ(p.output_size(1), 23 * 2 - 4 + 4 + 1 + 1);
  EXPECT_EQ(p.output_size(2), 47 * 2 - 6 + 6 + 1 + 1);
  p.dilation = {3, 1, 2};
  EXPECT_EQ(p.output_size(0), 22 - 2 + 6 + 1 + 1);
  EXPECT_EQ(p.output_size(2), 94 - 6 + 12 + 1 + 1);
}

TEST(ProblemShape, FromTensorsInfersEverything) {
  ConvParams cp = P(2);
  cp.groups = 4;
  cp.stride = {2, 3, 1};
  cp.padding = {1, 2, 0};
  cp.dilation = {2, 1, 1};
  TensorRef x = T({16, 32, 128, 256}), w = T({32, 16, 3, 5}), b = T({64});
  Problem p = Problem::from_tensors(x, w, &b, cp);
  EXPECT_EQ(p.batch, 16);
  EXPECT_EQ(p.in_channels, 32);
  EXPECT_EQ(p.out_channels, 64);
  EXPECT_EQ(p.groups, 4);
  EXPECT_TRUE(p.has_bias);
  EXPECT_EQ(p.output_size(0), 257);  // kb75 of the KernelBench suite
  EXPECT_EQ(p.output_size(1), 766);
  EXPECT_EQ(p.in_channels_per_group(), 8);
  EXPECT_EQ(p.out_channels_per_group(), 16);
  const auto ws = p.weight_shape();
  EXPECT_EQ(ws[0], 32);
  EXPECT_EQ(ws[1], 16);
  EXPECT_EQ(p.output_numel(), 16LL * 64 * 257 * 766);
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 16 * 32 * 16 * 3 * 5 * 128 * 256);
}

TEST(ProblemShape, Canonical3dPadsLeadingDims) {
  Problem p;
  p.spatial_dims = 1;
  p.input_size = {7, 0, 0};
  p.kernel_size = {3, 0, 0};
  p.stride = {2, 0, 0};
  p.padding = {1, 5, 5};
  p.output_padding = {1, 5, 5};
  p.dilation = {2, 0, 0};
  Problem q = p.canonical3d();
  EXPECT_EQ(q.spatial_dims, 3);
  EXPECT_EQ(q.input_size, (Dims{1, 1, 7}));
  EXPECT_EQ(q.kernel_size, (Dims{1, 1, 3}));
  EXPECT_EQ(q.stride, (Dims{1, 1, 2}));
  EXPECT_EQ(q.padding, (Dims{0, 0, 1}));
  EXPECT_EQ(q.output_padding, (Dims{0, 0, 1}));
  EXPECT_EQ(q.dilation, (Dims{1, 1, 2}));
  EXPECT_EQ(q.output_size(2), p.output_size(0));
  EXPECT_EQ(q.output_size(0), 1);
}

TEST(ProblemShape, ToString) {
  TensorRef x = T({8, 64, 5}), w = T({64, 32, 3});
  ConvParams cp = P(1);
  cp.groups = 2;
  Problem p = Problem::from_tensors(x, w, nullptr, cp);
  EXPECT_EQ(p.to_string(),
            "conv_transpose1d N=8 C=64->64 g=2 in=[5] k=[3] s=[1] p=[0] op=[0] d=[1] float32");
}

TEST(ProblemShape, ZeroBatchAndZeroOutChannelsAreValid) {
  ConvParams cp = P(2);
  EXPECT_NO_THROW(Problem::from_tensors(T({0, 4, 5, 5}), T({4, 3, 3, 3}), nullptr, cp));
  Problem p = Problem::from_tensors(T({2, 4, 5, 5}), T({4, 0, 3, 3}), nullptr, cp);
  EXPECT_EQ(p.out_channels, 0);
  EXPECT_EQ(p.output_numel(), 0);
}

// ----- one test per validation rule, with PyTorch's wording -------------------------------

TEST(Validation, NonPositiveStride) {
  ConvParams cp = P(2);
  cp.stride = {1, 0, 1};
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), nullptr, cp); },
               ErrorKind::kRuntime, "non-positive stride is not supported");
}

TEST(Validation, NegativePadding) {
  ConvParams cp = P(2);
  cp.padding = {-1, 0, 0};
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), nullptr, cp); },
               ErrorKind::kRuntime, "negative padding is not supported");
}

TEST(Validation, NegativeOutputPadding) {
  ConvParams cp = P(1);
  cp.output_padding = {-1, 0, 0};
  expect_error([&] { Problem::from_tensors(T({2, 4, 5}), T({4, 3, 3}), nullptr, cp); },
               ErrorKind::kRuntime, "negative output_padding is not supported");
}

TEST(Validation, NonPositiveDilation) {
  ConvParams cp = P(2);
  cp.dilation = {1, 0, 1};
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), nullptr, cp); },
               ErrorKind::kRuntime, "dilation should be greater than zero, but got dilation=[1, 0]");
}

TEST(Validation, NonPositiveGroups) {
  for (int64_t g : {0, -1}) {
    ConvParams cp = P(2);
    cp.groups = g;
    expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), nullptr, cp); },
                 ErrorKind::kRuntime, "non-positive groups is not supported");
  }
}

TEST(Validation, OutputPaddingMustBeSmallerThanStrideOrDilation) {
  ConvParams cp = P(2);
  cp.stride = {2, 2, 1};
  cp.output_padding = {2, 2, 0};
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), nullptr, cp); },
               ErrorKind::kRuntime,
               "output padding must be smaller than either stride or dilation, but got "
               "output_padding_height: 2 output_padding_width: 2 stride_height: 2 stride_width: 2 "
               "dilation_height: 1 dilation_width: 1");
  cp = P(3);
  cp.stride = {2, 1, 1};
  cp.output_padding = {1, 1, 0};
  expect_error(
      [&] { Problem::from_tensors(T({1, 2, 3, 3, 3}), T({2, 2, 3, 3, 3}), nullptr, cp); },
      ErrorKind::kRuntime,
      "output padding must be smaller than either stride or dilation, but got "
      "output_padding_depth: 1 output_padding_height: 1 output_padding_width: 0 stride_depth: 2 "
      "stride_height: 1 stride_width: 1 dilation_depth: 1 dilation_height: 1 dilation_width: 1");
  // 1-D: PyTorch's message also names the height entries of its 2-D implementation
  cp = P(1);
  cp.stride = {2, 1, 1};
  cp.output_padding = {2, 0, 0};
  expect_error([&] { Problem::from_tensors(T({1, 2, 5}), T({2, 2, 3}), nullptr, cp); },
               ErrorKind::kRuntime,
               "output padding must be smaller than either stride or dilation, but got "
               "output_padding_height: 0 output_padding_width: 2 stride_height: 1 "
               "stride_width: 2 dilation_height: 1 dilation_width: 1");
  // output_padding >= stride is fine while it is smaller than the dilation
  cp = P(1);
  cp.dilation = {4, 1, 1};
  cp.output_padding = {3, 0, 0};
  Problem p = Problem::from_tensors(T({1, 4, 5}), T({4, 2, 3}), nullptr, cp);
  EXPECT_EQ(p.output_size(0), 4 + 8 + 3 + 1);
}

TEST(Validation, InputRank) {
  expect_error([&] { Problem::from_tensors(T({5, 5}), T({4, 3, 3, 3}), nullptr, P(2)); },
               ErrorKind::kRuntime,
               "Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got input "
               "of size: [5, 5]");
  expect_error([&] { Problem::from_tensors(T({5}), T({4, 3, 3}), nullptr, P(1)); },
               ErrorKind::kRuntime,
               "Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, but got input "
               "of size: [5]");
}

TEST(Validation, WeightRank) {
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3}), nullptr, P(2)); },
               ErrorKind::kRuntime,
               "Expected 4D weight for conv_transpose2d, but got weight of size: [4, 3, 3]");
}

TEST(Validation, InputChannelsMustMatchWeight) {
  expect_error([&] { Problem::from_tensors(T({2, 5, 5, 5}), T({4, 3, 3, 3}), nullptr, P(2)); },
               ErrorKind::kRuntime,
               "Given transposed=1, weight of size [4, 3, 3, 3], expected input[2, 5, 5, 5] to "
               "have 4 channels, but got 5 channels instead");
}

TEST(Validation, WeightDivisibleByGroups) {
  ConvParams cp = P(2);
  cp.groups = 3;
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 2, 3, 3}), nullptr, cp); },
               ErrorKind::kRuntime,
               "Given groups=3, expected weight to be divisible by 3 at dimension 0, but got "
               "weight of size [4, 2, 3, 3] instead");
  cp.groups = 2;
  expect_error([&] { Problem::from_tensors(T({2, 0, 5, 5}), T({0, 3, 3, 3}), nullptr, cp); },
               ErrorKind::kRuntime,
               "Given groups=2, expected weight to be at least 2 at dimension 0, but got weight of "
               "size [0, 3, 3, 3] instead");
}

TEST(Validation, BiasShape) {
  TensorRef b4 = T({4}), b31 = T({3, 1});
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), &b4, P(2)); },
               ErrorKind::kRuntime,
               "Given transposed=1, weight of size [4, 3, 3, 3], expected bias to be 1-dimensional "
               "with 3 elements, but got bias of size [4] instead");
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), &b31, P(2)); },
               ErrorKind::kRuntime,
               "Given transposed=1, weight of size [4, 3, 3, 3], expected bias to be 1-dimensional "
               "with 3 elements, but got bias of size [3, 1] instead");
}

TEST(Validation, OutputSizeTooSmall) {
  ConvParams cp = P(2);
  cp.padding = {1, 1, 0};
  expect_error([&] { Problem::from_tensors(T({1, 4, 1, 1}), T({4, 3, 1, 1}), nullptr, cp); },
               ErrorKind::kRuntime,
               "Given input size per channel: (1 x 1). Calculated output size per channel: "
               "(-1 x -1). Output size is too small");
  cp = P(1);
  cp.padding = {5, 0, 0};
  expect_error([&] { Problem::from_tensors(T({1, 2, 5}), T({2, 2, 3}), nullptr, cp); },
               ErrorKind::kRuntime,
               "Given input size per channel: (5). Calculated output size per channel: (-3). "
               "Output size is too small");
}

TEST(Validation, ZeroSpatialInput) {
  expect_error([&] { Problem::from_tensors(T({2, 4, 0, 5}), T({4, 3, 3, 3}), nullptr, P(2)); },
               ErrorKind::kRuntime,
               "Only zero batch or zero channel inputs are supported, but got input shape: "
               "[2, 4, 0, 5]");
}

TEST(Validation, ZeroKernel) {
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 0, 3}), nullptr, P(2)); },
               ErrorKind::kRuntime,
               "non-positive kernel size is not supported, but got kernel_size=[0, 3]");
}

TEST(Validation, DtypesMustAgree) {
  TensorRef bd = T({3}, DType::kFloat64);
  expect_error(
      [&] {
        Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}, DType::kFloat64), nullptr, P(2));
      },
      ErrorKind::kRuntime, "Input type (float32) and weight type (float64) should be the same");
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), &bd, P(2)); },
               ErrorKind::kRuntime, "Input type (float32) and bias type (float64) should be the same");
}

TEST(Validation, DevicesMustAgree) {
  expect_error(
      [&] {
        Problem::from_tensors(T({2, 4, 5, 5}, DType::kFloat32, Device::cuda(1)), T({4, 3, 3, 3}),
                              nullptr, P(2));
      },
      ErrorKind::kRuntime,
      "Expected all tensors to be on the same device, but found at least two devices, cuda:1 and "
      "cpu!");
}

TEST(Validation, SpatialDims) {
  expect_error([&] { Problem::from_tensors(T({2, 4, 5, 5}), T({4, 3, 3, 3}), nullptr, P(4)); },
               ErrorKind::kRuntime, "convt supports 1, 2 or 3 spatial dimensions, but got 4");
}

TEST(Validation, ChannelsDivisibleByGroupsForDirectProblems) {
  Problem p;
  p.spatial_dims = 1;
  p.in_channels = 4;
  p.out_channels = 3;
  p.groups = 2;
  p.input_size = {5, 1, 1};
  p.kernel_size = {3, 1, 1};
  expect_error([&] { p.validate(); }, ErrorKind::kValue,
               "out_channels must be divisible by groups, but got out_channels=3 and groups=2");
  p.in_channels = 3;
  p.out_channels = 4;
  expect_error([&] { p.validate(); }, ErrorKind::kValue,
               "in_channels must be divisible by groups, but got in_channels=3 and groups=2");
}

// ----- the API checks the tensors of a call against the problem ----------------------------

TEST(ApiChecks, RejectsMismatchedTensors) {
  Problem p = Problem::from_tensors(T({2, 4, 5}), T({4, 3, 3}), nullptr, P(1));
  TensorRef x = T({2, 4, 5}), w = T({4, 3, 3}), y_bad = T({2, 3, 6}), b = T({3});
  std::vector<float> storage(64);
  for (TensorRef* t : {&x, &w, &y_bad, &b}) t->data = storage.data();
  expect_error([&] { forward(p, x, w, nullptr, y_bad); }, ErrorKind::kRuntime,
               "convt: expected output of size [2, 3, 7] for " + p.to_string() +
                   ", but got output of size [2, 3, 6]");
  TensorRef y = T({2, 3, 7});
  y.data = storage.data();
  expect_error([&] { forward(p, x, w, &b, y); }, ErrorKind::kRuntime,
               "convt: the problem has no bias but one was given");
  TensorRef yd = T({2, 3, 7}, DType::kFloat64);
  yd.data = storage.data();
  expect_error([&] { forward(p, x, w, nullptr, yd); }, ErrorKind::kRuntime,
               "convt: expected output of dtype float32, but got float64");
}

TEST(ApiChecks, RejectsOverlappingOutputs) {
  Problem p = Problem::from_tensors(T({2, 4, 5}), T({4, 3, 3}), nullptr, P(1));
  std::vector<float> storage(256);
  TensorRef x = T({2, 4, 5}), w = T({4, 3, 3});
  x.data = w.data = storage.data();
  // stride 0 on the batch dimension: both batch entries would share memory
  TensorRef y(storage.data(), DType::kFloat32, Device::cpu(), {2, 3, 7}, {0, 7, 1});
  expect_error([&] { forward(p, x, w, nullptr, y); }, ErrorKind::kRuntime,
               "convt: output has overlapping elements (sizes [2, 3, 7], stride 0 in dimension "
               "0); outputs need distinct memory for every element");
  // channel stride 5 < row length 7: rows overlap
  TensorRef y2(storage.data(), DType::kFloat32, Device::cpu(), {2, 3, 7}, {21, 5, 1});
  EXPECT_THROW(forward(p, x, w, nullptr, y2), Error);
  // a permuted but non-overlapping layout is fine
  TensorRef y3(storage.data(), DType::kFloat32, Device::cpu(), {2, 3, 7}, {1, 14, 2});
  EXPECT_NO_THROW(forward(p, x, w, nullptr, y3));
}

TEST(ApiChecks, CudaTensorsWithoutCudaBuild) {
  if (built_with_cuda()) GTEST_SKIP() << "this build has the CUDA backend";
  Problem p = Problem::from_tensors(T({2, 4, 5}), T({4, 3, 3}), nullptr, P(1));
  const Device d = Device::cuda(0);
  TensorRef x = T({2, 4, 5}, DType::kFloat32, d), w = T({4, 3, 3}, DType::kFloat32, d),
            y = T({2, 3, 7}, DType::kFloat32, d);
  float dummy = 0;
  x.data = w.data = y.data = &dummy;
  expect_error([&] { forward(p, x, w, nullptr, y); }, ErrorKind::kRuntime,
               "convt was built without CUDA support, but got CUDA tensors");
}

}  // namespace
}  // namespace convt
