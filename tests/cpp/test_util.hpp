// Shared test helpers: the parametrized sweep of problems, host tensors in any layout,
// and strided element access with dtype conversion.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "convt/convt.hpp"
#include "convt/detail/host_float.hpp"

namespace convt {
namespace test {

using Shape = std::array<int64_t, kMaxTensorRank>;

// An environment variable set for a scope, and given back its value from before (or unset
// again, where it was not set) however the scope ends: a setting the whole test run was
// started with (e.g. gpu_check.sh's WG_TEST_ENV) holds again after the scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* before = std::getenv(name);
    had_ = before != nullptr;
    if (had_) before_ = before;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, before_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  const char* name_;
  bool had_ = false;
  std::string before_;
};

// A problem from its arguments (spatial arrays in the canonical (D, H, W)-first order of
// Problem: the first `dims` entries used, the rest 1 or 0).
inline Problem make_problem(int dims, int64_t batch, int64_t c_in, int64_t c_out, int64_t groups,
                            Dims in, Dims k, Dims stride, Dims pad, Dims out_pad, Dims dil,
                            bool bias) {
  Problem p;
  p.spatial_dims = dims;
  p.batch = batch;
  p.in_channels = c_in;
  p.out_channels = c_out;
  p.groups = groups;
  p.input_size = in;
  p.kernel_size = k;
  p.stride = stride;
  p.padding = pad;
  p.output_padding = out_pad;
  p.dilation = dil;
  p.has_bias = bias;
  return p;
}

// kRowPadded: row-major with 8 unused elements after every row, plane and image, as in a
// view of a larger buffer (W stays contiguous).
enum class Layout { kContiguous, kChannelsLast, kGapped, kPermuted, kRowPadded };

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kContiguous: return "contig";
    case Layout::kChannelsLast: return "chlast";
    case Layout::kGapped: return "gapped";
    case Layout::kPermuted: return "permuted";
    case Layout::kRowPadded: return "rowpad";
  }
  return "?";
}

// Element strides of a tensor of `shape` (rank r) stored in `layout`, and the number of
// elements its storage must hold.
struct StridedLayout {
  Shape strides{};
  int64_t span = 0;
};

inline StridedLayout make_layout(const Shape& shape, int r, Layout layout) {
  // order[i] = dimension that is i-th innermost
  std::vector<int> order(r);
  for (int i = 0; i < r; ++i) order[i] = r - 1 - i;  // row-major
  int64_t inner = 1, gap = 0;
  if (layout == Layout::kChannelsLast && r >= 3) {
    // C innermost, then the spatial dims from last to first, then N.
    order.clear();
    order.push_back(1);
    for (int d = r - 1; d >= 2; --d) order.push_back(d);
    order.push_back(0);
  } else if (layout == Layout::kPermuted) {
    // N innermost, spatial dims in reverse order, C outermost: nothing like a standard layout.
    order.clear();
    order.push_back(0);
    for (int d = 2; d < r; ++d) order.push_back(d);
    if (r >= 2) order.push_back(1);
  } else if (layout == Layout::kGapped) {
    inner = 2;  // every element one apart, and a gap of 3 between rows
    gap = 3;
  } else if (layout == Layout::kRowPadded) {
    gap = 8;
  }
  StridedLayout out;
  int64_t acc = inner;
  for (int i = 0; i < r; ++i) {
    const int d = order[i];
    out.strides[d] = acc;
    acc = acc * std::max<int64_t>(shape[d], 1) + gap;
  }
  int64_t span = 1;
  for (int d = 0; d < r; ++d) {
    if (shape[d] == 0) return {out.strides, 0};
    span += (shape[d] - 1) * out.strides[d];
  }
  out.span = span;
  return out;
}

inline double load(DType t, const void* base, int64_t offset) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(base)[offset];
    case DType::kFloat64: return static_cast<const double*>(base)[offset];
    case DType::kFloat16: return detail::fp16_to_float(static_cast<const uint16_t*>(base)[offset]);
    case DType::kBFloat16: return detail::bf16_to_float(static_cast<const uint16_t*>(base)[offset]);
  }
  return 0;
}

inline void store(DType t, void* base, int64_t offset, double v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(base)[offset] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(base)[offset] = v; break;
    case DType::kFloat16:
      static_cast<uint16_t*>(base)[offset] = detail::float_to_fp16(static_cast<float>(v));
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(base)[offset] = detail::float_to_bf16(static_cast<float>(v));
      break;
  }
}

// Storage offset of the element with row-major logical index `linear`.
inline int64_t offset_of(const TensorRef& t, int64_t linear) {
  int64_t off = 0;
  for (int d = t.rank - 1; d >= 0; --d) {
    const int64_t i = linear % t.sizes[d];
    linear /= t.sizes[d];
    off += i * t.strides[d];
  }
  return off;
}

// A host tensor owning its storage, in any layout. Storage slots the layout does not
// address are filled with NaN so that a test can check nothing was written there.
struct HostTensor {
  std::vector<unsigned char> bytes;
  TensorRef ref;

  HostTensor() = default;
  // Move-only: ref.data points into `bytes`, which a move keeps and a copy would not.
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;
  HostTensor(HostTensor&&) = default;
  HostTensor& operator=(HostTensor&&) = default;
  HostTensor(const Shape& shape, int rank, DType dtype, Layout layout) {
    const StridedLayout l = make_layout(shape, rank, layout);
    bytes.assign(static_cast<size_t>(std::max<int64_t>(l.span, 1)) * dtype_size(dtype), 0);
    ref = TensorRef::from_arrays(bytes.data(), dtype, Device::cpu(), rank, shape.data(),
                                 l.strides.data());
    for (int64_t i = 0; i < std::max<int64_t>(l.span, 1); ++i) store(dtype, bytes.data(), i, NAN);
  }
  int64_t numel() const { return ref.numel(); }
  double get(int64_t linear) const { return load(ref.dtype, ref.data, offset_of(ref, linear)); }
  void set(int64_t linear, double v) { store(ref.dtype, ref.data, offset_of(ref, linear), v); }
  void fill_uniform(std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < numel(); ++i) set(i, dist(rng));
  }
  void fill(double v) {
    for (int64_t i = 0; i < numel(); ++i) set(i, v);
  }
  // Number of storage slots outside the tensor's elements that are no longer NaN.
  int64_t touched_gaps() const {
    const int64_t slots = static_cast<int64_t>(bytes.size() / dtype_size(ref.dtype));
    std::vector<char> used(static_cast<size_t>(slots), 0);
    for (int64_t i = 0; i < numel(); ++i) used[static_cast<size_t>(offset_of(ref, i))] = 1;
    int64_t n = 0;
    for (int64_t s = 0; s < slots; ++s)
      if (!used[static_cast<size_t>(s)] && !std::isnan(load(ref.dtype, bytes.data(), s))) ++n;
    return n;
  }
};

// One case of the sweep: a valid problem and the layout of every tensor it touches.
struct Case {
  Problem problem;
  Layout layout = Layout::kContiguous;
  std::string name() const {
    return problem.to_string() + " " + layout_name(layout);
  }
};

// The parametrized sweep over the argument space (SPEC §1): 1-D/2-D/3-D; stride 1-5;
// padding 0-3; output_padding up to its allowed maximum (including output_padding >=
// stride where dilation allows it); dilation 1-3; groups 1/2/4 and depthwise; asymmetric
// kernels; batch 0, 1 and 2; odd and even sizes; all four layouts; with and without bias.
// Sizes stay small so that float64 references are cheap. Deterministic for a seed.
inline std::vector<Case> sweep_cases(int count = 600, uint64_t seed = 20261121) {
  std::vector<Case> cases;
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto add = [&](Problem p, Layout layout) {
    try {
      p.validate();
    } catch (const Error&) {
      return false;
    }
    cases.push_back({p, layout});
    return true;
  };

  // Hand-picked edge cases first.
  {
    Problem p;  // output_padding >= stride, allowed because it is < dilation
    p.spatial_dims = 1; p.batch = 2; p.in_channels = 3; p.out_channels = 2;
    p.input_size = {5, 1, 1}; p.kernel_size = {3, 1, 1}; p.stride = {1, 1, 1};
    p.dilation = {4, 1, 1}; p.output_padding = {3, 0, 0}; p.has_bias = true;
    add(p, Layout::kContiguous);
    p.spatial_dims = 2; p.input_size = {4, 3, 1}; p.kernel_size = {2, 3, 1};
    p.stride = {2, 1, 1}; p.dilation = {3, 3, 1}; p.output_padding = {2, 2, 0};
    add(p, Layout::kChannelsLast);
  }
  for (int s = 2; s <= 5; ++s)  // every phase of strides 2..5, with each output_padding
    for (int op = 0; op < s; ++op) {
      Problem p;
      p.spatial_dims = 2; p.batch = 1; p.in_channels = 2; p.out_channels = 3;
      p.input_size = {3, 4, 1}; p.kernel_size = {s + 1, 3, 1}; p.stride = {s, s, 1};
      p.padding = {1, 0, 0}; p.output_padding = {op, op, 0}; p.has_bias = (op % 2) == 0;
      add(p, Layout::kContiguous);
    }
  for (int dims = 1; dims <= 3; ++dims) {  // batch 0 and kernel-1 / unit-size cases
    Problem p;
    p.spatial_dims = dims; p.batch = 0; p.in_channels = 4; p.out_channels = 6; p.groups = 2;
    p.input_size = {3, 3, 3}; p.kernel_size = {2, 2, 2}; p.stride = {2, 2, 2}; p.has_bias = true;
    add(p, Layout::kContiguous);
    p.batch = 1; p.input_size = {1, 1, 1}; p.kernel_size = {1, 1, 1}; p.stride = {3, 3, 3};
    p.groups = 1; p.has_bias = false;
    add(p, Layout::kGapped);
  }
  {
    Problem p;  // depthwise with channel multiplier, large padding trimming the output
    p.spatial_dims = 2; p.batch = 2; p.in_channels = 5; p.out_channels = 10; p.groups = 5;
    p.input_size = {6, 5, 1}; p.kernel_size = {5, 4, 1}; p.stride = {1, 2, 1};
    p.padding = {3, 3, 0}; p.dilation = {2, 1, 1}; p.has_bias = true;
    add(p, Layout::kPermuted);
  }

  const Layout layouts[] = {Layout::kContiguous, Layout::kChannelsLast, Layout::kGapped,
                            Layout::kPermuted};
  while (static_cast<int>(cases.size()) < count) {
    Problem p;
    p.spatial_dims = static_cast<int>(pick(1, 3));
    const int sd = p.spatial_dims;
    const int64_t gsel = pick(0, 3);
    int64_t cig, cog;
    if (gsel == 3) {  // depthwise (channel multiplier 1 or 2)
      p.groups = pick(2, 6);
      cig = 1;
      cog = pick(1, 2);
    } else {
      p.groups = gsel == 0 ? 1 : (gsel == 1 ? 2 : 4);
      cig = pick(1, 3);
      cog = pick(1, 3);
    }
    p.in_channels = p.groups * cig;
    p.out_channels = p.groups * cog;
    const int64_t bsel = pick(0, 19);
    p.batch = bsel == 0 ? 0 : (bsel < 12 ? 1 : 2);
    const int64_t max_in = sd == 1 ? 9 : (sd == 2 ? 6 : 4);
    const int64_t max_k = sd == 3 ? 3 : 5;
    for (int d = 0; d < sd; ++d) {
      p.input_size[d] = pick(1, max_in);
      p.kernel_size[d] = pick(1, max_k);
      p.stride[d] = pick(1, 5);
      p.dilation[d] = pick(1, 3);
      p.padding[d] = pick(0, 3);
      const int64_t max_op = std::max(p.stride[d], p.dilation[d]) - 1;
      p.output_padding[d] = pick(0, max_op);
    }
    p.has_bias = pick(0, 1) == 1;
    add(p, layouts[pick(0, 3)]);
  }
  return cases;
}

// Layers of 1, 2 or 4 input channels a group (8-32 groups, 1-3 output channels a group;
// 2-D and 3-D, or from min_dims on), random kernel, stride, padding, dilation and output
// padding, every layout, with and without bias: sizes big enough that the planner merges
// many of their groups onto the wgmma kernel (CudaPlanner.SmallGroupCasesMergeOften),
// small enough for the float64 oracle. Deterministic for a seed.
inline std::vector<Case> small_group_cases(int count = 24, uint64_t seed = 20261128,
                                           int min_dims = 2) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const Layout layouts[] = {Layout::kContiguous, Layout::kChannelsLast, Layout::kGapped,
                            Layout::kPermuted};
  const int64_t group_counts[] = {8, 16, 32};
  const int64_t cigs[] = {1, 1, 2, 4};
  std::vector<Case> cases;
  while (static_cast<int>(cases.size()) < count) {
    Problem p;
    p.spatial_dims = static_cast<int>(pick(min_dims, 3));
    p.groups = group_counts[pick(0, 2)];
    p.in_channels = p.groups * cigs[pick(0, 3)];
    p.out_channels = p.groups * pick(1, 3);
    p.batch = pick(1, 2);
    for (int d = 0; d < p.spatial_dims; ++d) {
      const bool w = d + 1 == p.spatial_dims;
      p.input_size[d] = w ? pick(24, 64) : (d == 0 && p.spatial_dims == 3 ? pick(2, 6) : pick(8, 32));
      p.kernel_size[d] = pick(1, 4);
      p.stride[d] = pick(1, 3);
      p.dilation[d] = pick(1, 2);
      p.padding[d] = pick(0, p.dilation[d] * (p.kernel_size[d] - 1));
      p.output_padding[d] = pick(0, std::max(p.stride[d], p.dilation[d]) - 1);
    }
    p.has_bias = pick(0, 1) == 1;
    try {
      p.validate();
    } catch (const convt::Error&) {
      continue;
    }
    if (p.output_numel() > (int64_t(1) << 20)) continue;  // (the oracle's time)
    cases.push_back({p, layouts[pick(0, 3)]});
  }
  return cases;
}

// Tensors for one case, filled with random values in [-1, 1]. Outputs are NaN-poisoned.
struct CaseTensors {
  HostTensor x, w, b, y;
  CaseTensors(const Problem& p, Layout layout, DType dtype, std::mt19937_64& rng) {
    const int r = p.tensor_rank();
    x = HostTensor(p.input_shape(), r, dtype, layout);
    w = HostTensor(p.weight_shape(), r, dtype, layout);
    y = HostTensor(p.output_shape(), r, dtype, layout);
    Shape bs{};
    bs[0] = p.out_channels;
    b = HostTensor(bs, 1, dtype, Layout::kContiguous);
    x.fill_uniform(rng);
    w.fill_uniform(rng);
    b.fill_uniform(rng);
  }
  const TensorRef* bias(const Problem& p) const { return p.has_bias ? &b.ref : nullptr; }
};

// max |a - b| / max(max |b|, tiny): the error measure of SPEC §3.
inline double rel_error(const HostTensor& a, const HostTensor& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.get(i), v = a.get(i);
    if (std::isnan(v)) return INFINITY;
    num = std::max(num, std::fabs(v - r));
    den = std::max(den, std::fabs(r));
  }
  return num / std::max(den, 1e-30);
}

}  // namespace test
}  // namespace convt
