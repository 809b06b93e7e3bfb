// Tests of the CPU backend through the public API: every case of the parametrized sweep
// against the float64 scatter reference (all four ops), the adjoint identities, finite
// differences, the lower-precision dtypes against their error budgets (SPEC §3),
// independence of the thread count, and the errors raised for mismatched tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scatter_reference.hpp"
#include "test_util.hpp"

namespace convt {
namespace test {
namespace {

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = sweep_cases();
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<int>& info) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "case_%03d", info.param);
  return buf;
}

Shape bias_shape(const Problem& p) {
  Shape s{};
  s[0] = p.out_channels;
  return s;
}

// Error budgets of SPEC §3 (max |out - ref| / max |ref|).
double budget(DType t) {
  switch (t) {
    case DType::kFloat64: return 1e-12;
    case DType::kFloat32: return 4e-6;
    case DType::kFloat16: return 1.5e-3;
    case DType::kBFloat16: return 1e-2;
  }
  return 0;
}

int64_t count_non_finite(const HostTensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.get(i))) ++n;
  return n;
}

// Checks an output of the backend against its reference: within `tol`, every element
// finite (so every element was written), and no storage slot outside it touched.
void expect_matches(const char* what, const HostTensor& out, const HostTensor& ref, double tol) {
  EXPECT_LE(rel_error(out, ref), tol) << what;
  EXPECT_EQ(count_non_finite(out), 0) << what << ": elements not finite (or not written)";
  EXPECT_EQ(out.touched_gaps(), 0) << what << ": storage outside the tensor was written";
}

double dot(const HostTensor& a, const HostTensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.get(i) * b.get(i);
  return s;
}

double abs_dot(const HostTensor& a, const HostTensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += std::fabs(a.get(i) * b.get(i));
  return s;
}

ExecOptions threads(int n) {
  ExecOptions o;
  o.num_threads = n;
  o.math = MathMode::kStrictFP32;
  return o;
}

// Runs all four ops of a case in `dtype` on random data and compares each with the
// float64 scatter reference computed from the same (already rounded) values.
void check_case_all_ops(const Case& c, DType dtype, uint64_t seed, const ExecOptions& opt) {
  Problem p = c.problem;
  p.dtype = dtype;
  const int r = p.tensor_rank();
  std::mt19937_64 rng(seed);
  CaseTensors t(p, c.layout, dtype, rng);
  HostTensor dy(p.output_shape(), r, dtype, c.layout);
  dy.fill_uniform(rng);
  const double tol = budget(dtype);

  {
    SCOPED_TRACE("forward");
    forward(p, t.x.ref, t.w.ref, t.bias(p), t.y.ref, opt);
    HostTensor ref(p.output_shape(), r, DType::kFloat64, Layout::kContiguous);
    scatter_forward(p, t.x, t.w, p.has_bias ? &t.b : nullptr, ref);
    expect_matches("forward", t.y, ref, tol);
  }
  {
    SCOPED_TRACE("grad_input");
    HostTensor dx(p.input_shape(), r, dtype, c.layout);
    grad_input(p, dy.ref, t.w.ref, dx.ref, opt);
    HostTensor ref(p.input_shape(), r, DType::kFloat64, Layout::kContiguous);
    scatter_grad_input(p, dy, t.w, ref);
    expect_matches("grad_input", dx, ref, tol);
  }
  {
    SCOPED_TRACE("grad_weight");
    HostTensor dw(p.weight_shape(), r, dtype, c.layout);
    grad_weight(p, t.x.ref, dy.ref, dw.ref, opt);
    HostTensor ref(p.weight_shape(), r, DType::kFloat64, Layout::kContiguous);
    scatter_grad_weight(p, t.x, dy, ref);
    expect_matches("grad_weight", dw, ref, tol);
  }
  if (p.has_bias) {
    SCOPED_TRACE("grad_bias");
    HostTensor db(bias_shape(p), 1, dtype, Layout::kContiguous);
    grad_bias(p, dy.ref, db.ref, opt);
    HostTensor ref(bias_shape(p), 1, DType::kFloat64, Layout::kContiguous);
    scatter_grad_bias(p, dy, ref);
    expect_matches("grad_bias", db, ref, tol);
  }
}

// ---------------------------------------------------------------------------------------
// The sweep in float64, every case.
// ---------------------------------------------------------------------------------------
class CpuSweep : public ::testing::TestWithParam<int> {};

TEST_P(CpuSweep, Float64MatchesScatterReference) {
  const Case& c = all_cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  check_case_all_ops(c, DType::kFloat64, 1000 + static_cast<uint64_t>(GetParam()), ExecOptions{});
}

INSTANTIATE_TEST_SUITE_P(Sweep, CpuSweep,
                         ::testing::Range(0, static_cast<int>(all_cases().size())), case_name);

// ---------------------------------------------------------------------------------------
// float32, float16, bfloat16 on every 5th case of the sweep.
// ---------------------------------------------------------------------------------------
std::vector<int> every_nth_case(int step) {
  std::vector<int> v;
  for (int i = 0; i < static_cast<int>(all_cases().size()); i += step) v.push_back(i);
  return v;
}

class CpuLowPrecision : public ::testing::TestWithParam<int> {};

TEST_P(CpuLowPrecision, WithinErrorBudget) {
  const Case& c = all_cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    check_case_all_ops(c, dt, 2000 + static_cast<uint64_t>(GetParam()), threads(0));
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, CpuLowPrecision, ::testing::ValuesIn(every_nth_case(5)),
                         case_name);

// ---------------------------------------------------------------------------------------
// Adjoint identities, float64, on every 7th case:
//   <forward(x), dy> == <x, grad_input(dy)> == <w, grad_weight(x, dy)>
//   <forward_with_bias(x) - forward(x), dy> == <b, grad_bias(dy)>
// ---------------------------------------------------------------------------------------
class CpuAdjoint : public ::testing::TestWithParam<int> {};

TEST_P(CpuAdjoint, InnerProductsAgree) {
  const Case& c = all_cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  Problem p = c.problem;
  p.dtype = DType::kFloat64;
  p.has_bias = false;
  const int r = p.tensor_rank();
  std::mt19937_64 rng(3000 + static_cast<uint64_t>(GetParam()));
  CaseTensors t(p, c.layout, p.dtype, rng);
  HostTensor dy(p.output_shape(), r, p.dtype, c.layout), dx(p.input_shape(), r, p.dtype, c.layout),
      dw(p.weight_shape(), r, p.dtype, c.layout);
  dy.fill_uniform(rng);

  forward(p, t.x.ref, t.w.ref, nullptr, t.y.ref);
  grad_input(p, dy.ref, t.w.ref, dx.ref);
  grad_weight(p, t.x.ref, dy.ref, dw.ref);
  const double y_dy = t.y.numel() > 0 ? dot(t.y, dy) : 0.0;
  const double x_dx = dot(t.x, dx), w_dw = dot(t.w, dw);
  const double scale = 1.0 + std::max({t.y.numel() > 0 ? abs_dot(t.y, dy) : 0.0, abs_dot(t.x, dx),
                                       abs_dot(t.w, dw)});
  EXPECT_NEAR(y_dy, x_dx, 1e-12 * scale);
  EXPECT_NEAR(y_dy, w_dw, 1e-12 * scale);

  Problem pb = p;
  pb.has_bias = true;
  HostTensor yb(p.output_shape(), r, p.dtype, c.layout);
  HostTensor db(bias_shape(p), 1, p.dtype, Layout::kContiguous);
  forward(pb, t.x.ref, t.w.ref, &t.b.ref, yb.ref);
  grad_bias(pb, dy.ref, db.ref);
  double lhs = 0;
  for (int64_t i = 0; i < yb.numel(); ++i) lhs += (yb.get(i) - t.y.get(i)) * dy.get(i);
  EXPECT_NEAR(lhs, dot(t.b, db), 1e-12 * (1.0 + abs_dot(t.b, db)));
}

INSTANTIATE_TEST_SUITE_P(Sweep, CpuAdjoint, ::testing::ValuesIn(every_nth_case(7)), case_name);

// ---------------------------------------------------------------------------------------
// Central finite differences of L = sum(dy * forward(x, w, b)), float64, on about 20
// small cases with a non-empty batch.
// ---------------------------------------------------------------------------------------
std::vector<int> finite_difference_cases() {
  std::vector<int> v;
  const auto& cases = all_cases();
  for (int i = 0; i < static_cast<int>(cases.size()) && v.size() < 20; i += 3) {
    const Problem& p = cases[static_cast<size_t>(i)].problem;
    if (p.batch > 0 && p.input_numel() > 0 && p.output_numel() <= 3000) v.push_back(i);
  }
  return v;
}

class CpuFiniteDifferences : public ::testing::TestWithParam<int> {};

TEST_P(CpuFiniteDifferences, GradientsMatch) {
  const Case& c = all_cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  Problem p = c.problem;
  p.dtype = DType::kFloat64;
  p.has_bias = true;  // exercise grad_bias on every case
  const int r = p.tensor_rank();
  std::mt19937_64 rng(4000 + static_cast<uint64_t>(GetParam()));
  CaseTensors t(p, c.layout, p.dtype, rng);
  HostTensor dy(p.output_shape(), r, p.dtype, c.layout), dx(p.input_shape(), r, p.dtype, c.layout),
      dw(p.weight_shape(), r, p.dtype, c.layout);
  HostTensor db(bias_shape(p), 1, p.dtype, Layout::kContiguous);
  dy.fill_uniform(rng);
  grad_input(p, dy.ref, t.w.ref, dx.ref);
  grad_weight(p, t.x.ref, dy.ref, dw.ref);
  grad_bias(p, dy.ref, db.ref);

  auto loss = [&]() {
    forward(p, t.x.ref, t.w.ref, &t.b.ref, t.y.ref);
    return dot(t.y, dy);
  };
  const double h = 1e-3;
  auto check = [&](const char* what, HostTensor& param, const HostTensor& grad) {
    std::uniform_int_distribution<int64_t> pick(0, param.numel() - 1);
    for (int trial = 0; trial < 4; ++trial) {
      const int64_t i = pick(rng);
      const double v = param.get(i);
      param.set(i, v + h);
      const double up = loss();
      param.set(i, v - h);
      const double down = loss();
      param.set(i, v);
      const double fd = (up - down) / (2 * h), g = grad.get(i);
      EXPECT_NEAR(fd, g, 1e-8 * (1.0 + std::fabs(g))) << what << " element " << i;
    }
  };
  check("input", t.x, dx);
  check("weight", t.w, dw);
  check("bias", t.b, db);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CpuFiniteDifferences,
                         ::testing::ValuesIn(finite_difference_cases()), case_name);

// ---------------------------------------------------------------------------------------
// Problems large enough to be split over threads: correct against the reference, and
// bit-identical for every thread count.
// ---------------------------------------------------------------------------------------
std::vector<Case> threaded_cases() {
  std::vector<Case> v;
  Problem p;
  p.spatial_dims = 2; p.batch = 2; p.in_channels = 16; p.out_channels = 24; p.groups = 2;
  p.input_size = {19, 17, 1}; p.kernel_size = {3, 4, 1}; p.stride = {2, 3, 1};
  p.padding = {1, 2, 0}; p.output_padding = {1, 0, 0}; p.dilation = {1, 2, 1}; p.has_bias = true;
  v.push_back({p, Layout::kChannelsLast});

  p = Problem();  // 1-D, vocoder-like upsampling
  p.spatial_dims = 1; p.batch = 3; p.in_channels = 8; p.out_channels = 8;
  p.input_size = {400, 1, 1}; p.kernel_size = {8, 1, 1}; p.stride = {4, 1, 1};
  p.padding = {2, 0, 0}; p.output_padding = {2, 0, 0}; p.has_bias = true;
  v.push_back({p, Layout::kContiguous});

  p = Problem();  // 3-D depthwise with channel multiplier 2
  p.spatial_dims = 3; p.batch = 2; p.in_channels = 12; p.out_channels = 24; p.groups = 12;
  p.input_size = {9, 8, 7}; p.kernel_size = {3, 3, 3}; p.stride = {2, 2, 2};
  p.padding = {1, 1, 1}; p.output_padding = {1, 0, 1}; p.dilation = {1, 2, 1};
  v.push_back({p, Layout::kPermuted});

  p = Problem();
  p.spatial_dims = 2; p.batch = 2; p.in_channels = 8; p.out_channels = 12; p.groups = 4;
  p.input_size = {15, 13, 1}; p.kernel_size = {5, 2, 1}; p.stride = {3, 1, 1};
  p.padding = {2, 0, 0}; p.output_padding = {2, 2, 0}; p.dilation = {1, 3, 1}; p.has_bias = true;
  v.push_back({p, Layout::kGapped});
  return v;
}

class CpuThreads : public ::testing::TestWithParam<int> {};

TEST_P(CpuThreads, CorrectAndIndependentOfThreadCount) {
  const Case c = threaded_cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  check_case_all_ops(c, DType::kFloat64, 5000, threads(3));
  for (DType dt : {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Problem p = c.problem;
    p.dtype = dt;
    const int r = p.tensor_rank();
    std::mt19937_64 rng(6000);
    CaseTensors t(p, c.layout, dt, rng);
    HostTensor dy(p.output_shape(), r, dt, c.layout);
    dy.fill_uniform(rng);
    // Every output of every op, computed with n threads, as raw storage bytes.
    auto run = [&](int n) {
      const ExecOptions opt = threads(n);
      HostTensor y(p.output_shape(), r, dt, c.layout), dx(p.input_shape(), r, dt, c.layout),
          dw(p.weight_shape(), r, dt, c.layout), db(bias_shape(p), 1, dt, Layout::kContiguous);
      forward(p, t.x.ref, t.w.ref, t.bias(p), y.ref, opt);
      grad_input(p, dy.ref, t.w.ref, dx.ref, opt);
      grad_weight(p, t.x.ref, dy.ref, dw.ref, opt);
      grad_bias(p, dy.ref, db.ref, opt);
      return std::vector<std::vector<unsigned char>>{y.bytes, dx.bytes, dw.bytes, db.bytes};
    };
    const auto one = run(1);
    for (int n : {2, 3, 16}) EXPECT_TRUE(run(n) == one) << n << " threads differ from 1 thread";
  }
}

INSTANTIATE_TEST_SUITE_P(Medium, CpuThreads,
                         ::testing::Range(0, static_cast<int>(threaded_cases().size())));

// ---------------------------------------------------------------------------------------
// Edge cases the sweep does not reach.
// ---------------------------------------------------------------------------------------
TEST(CpuEdge, ZeroInputChannelsWritesBiasOrZeros) {
  Problem p;
  p.spatial_dims = 2; p.batch = 2; p.in_channels = 0; p.out_channels = 3;
  p.input_size = {3, 2, 1}; p.kernel_size = {2, 3, 1}; p.stride = {2, 1, 1};
  p.dtype = DType::kFloat64;
  for (bool with_bias : {false, true}) {
    p.has_bias = with_bias;
    std::mt19937_64 rng(7);
    CaseTensors t(p, Layout::kChannelsLast, p.dtype, rng);
    forward(p, t.x.ref, t.w.ref, t.bias(p), t.y.ref);
    HostTensor ref(p.output_shape(), p.tensor_rank(), p.dtype, Layout::kContiguous);
    scatter_forward(p, t.x, t.w, with_bias ? &t.b : nullptr, ref);
    expect_matches("forward", t.y, ref, 0.0);
  }
}

TEST(CpuEdge, ZeroOutputChannelsGradInputIsZero) {
  Problem p;
  p.spatial_dims = 1; p.batch = 2; p.in_channels = 4; p.out_channels = 0; p.groups = 2;
  p.input_size = {5, 1, 1}; p.kernel_size = {3, 1, 1}; p.stride = {2, 1, 1};
  p.dtype = DType::kFloat32;
  std::mt19937_64 rng(8);
  CaseTensors t(p, Layout::kGapped, p.dtype, rng);
  HostTensor dy(p.output_shape(), 3, p.dtype, Layout::kGapped);
  HostTensor dx(p.input_shape(), 3, p.dtype, Layout::kGapped);
  grad_input(p, dy.ref, t.w.ref, dx.ref);
  HostTensor zeros(p.input_shape(), 3, DType::kFloat64, Layout::kContiguous);
  zeros.fill(0.0);
  expect_matches("grad_input", dx, zeros, 0.0);
}

TEST(CpuEdge, EmptyBatchGradWeightAndBiasAreZero) {
  Problem p;
  p.spatial_dims = 3; p.batch = 0; p.in_channels = 2; p.out_channels = 4; p.groups = 2;
  p.input_size = {2, 3, 2}; p.kernel_size = {2, 2, 3}; p.stride = {1, 2, 3}; p.has_bias = true;
  p.dtype = DType::kBFloat16;
  std::mt19937_64 rng(9);
  CaseTensors t(p, Layout::kPermuted, p.dtype, rng);
  HostTensor dy(p.output_shape(), 5, p.dtype, Layout::kPermuted);
  HostTensor dw(p.weight_shape(), 5, p.dtype, Layout::kPermuted);
  HostTensor db(bias_shape(p), 1, p.dtype, Layout::kGapped);
  grad_weight(p, t.x.ref, dy.ref, dw.ref);
  grad_bias(p, dy.ref, db.ref);
  HostTensor zw(p.weight_shape(), 5, DType::kFloat64, Layout::kContiguous);
  HostTensor zb(bias_shape(p), 1, DType::kFloat64, Layout::kContiguous);
  zw.fill(0.0);
  zb.fill(0.0);
  expect_matches("grad_weight", dw, zw, 0.0);
  expect_matches("grad_bias", db, zb, 0.0);
}

// Bias and grad_bias with a non-unit stride; size-1 dimensions with stride 0.
TEST(CpuEdge, UnusualStrides) {
  Problem p;
  p.spatial_dims = 2; p.batch = 1; p.in_channels = 1; p.out_channels = 3;
  p.input_size = {4, 1, 1}; p.kernel_size = {3, 2, 1}; p.stride = {2, 2, 1};
  p.padding = {1, 0, 0}; p.has_bias = true; p.dtype = DType::kFloat64;
  std::mt19937_64 rng(10);
  // x: (1, 1, 4, 1) with zero strides on its size-1 dimensions.
  std::vector<double> xs(4);
  for (auto& v : xs) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  const TensorRef x(xs.data(), p.dtype, Device::cpu(), {1, 1, 4, 1}, {0, 0, 1, 0});
  HostTensor xh(p.input_shape(), 4, p.dtype, Layout::kContiguous);
  for (int i = 0; i < 4; ++i) xh.set(i, xs[static_cast<size_t>(i)]);
  HostTensor w(p.weight_shape(), 4, p.dtype, Layout::kChannelsLast);
  HostTensor b(bias_shape(p), 1, p.dtype, Layout::kGapped);
  w.fill_uniform(rng);
  b.fill_uniform(rng);
  HostTensor y(p.output_shape(), 4, p.dtype, Layout::kGapped);
  forward(p, x, w.ref, &b.ref, y.ref);
  HostTensor ref(p.output_shape(), 4, DType::kFloat64, Layout::kContiguous);
  scatter_forward(p, xh, w, &b, ref);
  expect_matches("forward", y, ref, 1e-14);

  HostTensor db(bias_shape(p), 1, p.dtype, Layout::kGapped);
  grad_bias(p, y.ref, db.ref);
  HostTensor dbr(bias_shape(p), 1, DType::kFloat64, Layout::kContiguous);
  scatter_grad_bias(p, y, dbr);
  expect_matches("grad_bias", db, dbr, 1e-14);
}

// float32 gradients that reduce over many positions stay within the strict budget.
TEST(CpuEdge, LongReductionsFloat32) {
  Problem p;
  p.spatial_dims = 1; p.batch = 2; p.in_channels = 2; p.out_channels = 3;
  p.input_size = {40000, 1, 1}; p.kernel_size = {3, 1, 1}; p.stride = {2, 1, 1};
  p.padding = {1, 0, 0}; p.has_bias = true; p.dtype = DType::kFloat32;
  std::mt19937_64 rng(12);
  CaseTensors t(p, Layout::kContiguous, p.dtype, rng);
  HostTensor dy(p.output_shape(), 3, p.dtype, Layout::kContiguous);
  dy.fill_uniform(rng, 0.0, 1.0);  // one sign: the sums grow with their length
  HostTensor dw(p.weight_shape(), 3, p.dtype, Layout::kContiguous);
  HostTensor db(bias_shape(p), 1, p.dtype, Layout::kContiguous);
  grad_weight(p, t.x.ref, dy.ref, dw.ref, threads(1));
  grad_bias(p, dy.ref, db.ref, threads(1));
  HostTensor dwr(p.weight_shape(), 3, DType::kFloat64, Layout::kContiguous);
  HostTensor dbr(bias_shape(p), 1, DType::kFloat64, Layout::kContiguous);
  scatter_grad_weight(p, t.x, dy, dwr);
  scatter_grad_bias(p, dy, dbr);
  expect_matches("grad_weight", dw, dwr, budget(DType::kFloat32));
  expect_matches("grad_bias", db, dbr, budget(DType::kFloat32));
}

// ---------------------------------------------------------------------------------------
// Errors raised through the public API.
// ---------------------------------------------------------------------------------------
void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no convt::Error thrown; expected one containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message \"" << e.what() << "\" does not contain \"" << needle << "\"";
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
  }
}

class CpuApiErrors : public ::testing::Test {
 protected:
  CpuApiErrors() {
    p.spatial_dims = 2; p.batch = 2; p.in_channels = 4; p.out_channels = 6; p.groups = 2;
    p.input_size = {5, 4, 1}; p.kernel_size = {3, 2, 1}; p.stride = {2, 1, 1};
    p.has_bias = true; p.dtype = DType::kFloat32;
    std::mt19937_64 rng(11);
    t = std::make_unique<CaseTensors>(p, Layout::kContiguous, p.dtype, rng);
    dy = HostTensor(p.output_shape(), 4, p.dtype, Layout::kContiguous);
    dy.fill(1.0);
  }
  Problem p;
  std::unique_ptr<CaseTensors> t;
  HostTensor dy;
};

TEST_F(CpuApiErrors, WrongShapes) {
  Problem q = p;
  q.input_size = {6, 4, 1};  // expects an input (2, 4, 6, 4)
  expect_error([&] { forward(q, t->x.ref, t->w.ref, &t->b.ref, t->y.ref); },
               "expected input of size [2, 4, 6, 4]");
  HostTensor small_y({2, 6, 3, 3}, 4, p.dtype, Layout::kContiguous);
  expect_error([&] { forward(p, t->x.ref, t->w.ref, &t->b.ref, small_y.ref); },
               "but got output of size [2, 6, 3, 3]");
  HostTensor bad_dw({4, 3, 3, 3}, 4, p.dtype, Layout::kContiguous);
  expect_error([&] { grad_weight(p, t->x.ref, dy.ref, bad_dw.ref); },
               "expected grad_weight of size [4, 3, 3, 2]");
  HostTensor bad_dx({2, 4, 5}, 3, p.dtype, Layout::kContiguous);
  expect_error([&] { grad_input(p, dy.ref, t->w.ref, bad_dx.ref); },
               "expected grad_input of size [2, 4, 5, 4]");
  HostTensor bad_db({5}, 1, p.dtype, Layout::kContiguous);
  expect_error([&] { grad_bias(p, dy.ref, bad_db.ref); }, "expected grad_bias of size [6]");
}

TEST_F(CpuApiErrors, WrongDtype) {
  HostTensor w64(p.weight_shape(), 4, DType::kFloat64, Layout::kContiguous);
  expect_error([&] { forward(p, t->x.ref, w64.ref, &t->b.ref, t->y.ref); },
               "expected weight of dtype float32, but got float64");
  HostTensor dy16(p.output_shape(), 4, DType::kFloat16, Layout::kContiguous);
  expect_error([&] { grad_bias(p, dy16.ref, t->b.ref); },
               "expected grad_output of dtype float32, but got float16");
}

TEST_F(CpuApiErrors, BiasPresence) {
  expect_error([&] { forward(p, t->x.ref, t->w.ref, nullptr, t->y.ref); },
               "has a bias but none was given");
  Problem q = p;
  q.has_bias = false;
  expect_error([&] { forward(q, t->x.ref, t->w.ref, &t->b.ref, t->y.ref); },
               "has no bias but one was given");
}

TEST_F(CpuApiErrors, OutputLeftUntouchedOnError) {
  HostTensor w64(p.weight_shape(), 4, DType::kFloat64, Layout::kContiguous);
  expect_error([&] { forward(p, t->x.ref, w64.ref, &t->b.ref, t->y.ref); }, "dtype");
  for (int64_t i = 0; i < t->y.numel(); ++i) ASSERT_TRUE(std::isnan(t->y.get(i)));
}

}  // namespace
}  // namespace test
}  // namespace convt
