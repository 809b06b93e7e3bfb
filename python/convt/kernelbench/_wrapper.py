"""The C++ code an exported solution adds to convt's sources.

``WRAPPER_CPP`` is the torch-facing host wrapper: it turns ``at::Tensor`` arguments into
``convt::TensorRef`` views, builds the ``convt::Problem`` with PyTorch's validation
(``Problem::from_tensors``), allocates the result (and the workspace convt asks for) with
the caching allocator, runs the op on the current CUDA stream and turns ``convt::Error``
into the Python exception PyTorch would raise. It is compiled by the host compiler
together with convt's C++ translation units (``load_inline``'s ``cpp_sources``).

``CUDA_EXTRA`` goes after convt's CUDA translation units (``cuda_sources``): it reports
which forward kernel the CUDA backend's planner picks for a problem.

Both are compiled in the exported file only, where the amalgamated convt sources precede
them; ``FUNCTIONS`` lists the functions ``load_inline`` binds.
"""

from __future__ import annotations

__all__ = ["CUDA_EXTRA", "FUNCTIONS", "WRAPPER_CPP"]

#: Python name -> docstring of every function the extension exposes.
FUNCTIONS = {
    "convt_forward": "y = conv_transpose(x, w) + b (convt::forward)",
    "convt_grad_input": "dx of size input_size from dy and w (convt::grad_input)",
    "convt_grad_weight": "dw of size weight_size from x and dy (convt::grad_weight)",
    "convt_grad_bias": "db: dy summed over all but dimension 1 (convt::grad_bias)",
    "convt_forward_plan": "the kernel convt's dispatcher runs for this forward call",
    "convt_build_info": "convt's build description",
    "convt_clear_weight_cache": "forget the weight re-layouts CUDA forwards keep per weight",
}

WRAPPER_CPP = r"""
// ---- torch-facing wrapper (convt export-kernelbench) ----
#ifdef CONVT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace convt_kb {

[[noreturn]] void raise(const convt::Error& e) {
  switch (e.kind()) {
    case convt::ErrorKind::kValue: TORCH_CHECK_VALUE(false, e.what());
    case convt::ErrorKind::kType: TORCH_CHECK_TYPE(false, e.what());
    case convt::ErrorKind::kNotImplemented: TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
    case convt::ErrorKind::kRuntime: break;
  }
  TORCH_CHECK(false, e.what());
}

bool supported_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: return true;
    default: return false;
  }
}

convt::DType to_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return convt::DType::kFloat32;
    case at::kDouble: return convt::DType::kFloat64;
    case at::kHalf: return convt::DType::kFloat16;
    case at::kBFloat16: return convt::DType::kBFloat16;
    default: break;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, "convt supports float32, float64, float16 and bfloat16, but got ",
                              t.scalar_type());
  return convt::DType::kFloat32;  // not reached
}

// PyTorch's errors for tensors of unsupported or mixed dtypes, raised before any view is made.
void check_dtypes(const char* op, std::initializer_list<const at::Tensor*> tensors,
                  std::initializer_list<const char*> roles) {
  const at::Tensor& first = **tensors.begin();
  auto role = roles.begin();
  for (auto it = tensors.begin() + 1; it != tensors.end(); ++it, ++role) {
    if (*it == nullptr) continue;
    TORCH_CHECK((*it)->scalar_type() == first.scalar_type(), "Input type (",
                first.scalar_type(), ") and ", *role, " type (", (*it)->scalar_type(),
                ") should be the same");
  }
  TORCH_CHECK_NOT_IMPLEMENTED(supported_dtype(first), "\"", op, "\" not implemented for '",
                              first.scalar_type(), "'");
}

convt::Device to_device(const at::Device& d) {
  if (d.is_cpu()) return convt::Device::cpu();
#ifdef CONVT_WITH_CUDA
  if (d.is_cuda()) return convt::Device::cuda(d.index() < 0 ? 0 : d.index());
#else
  TORCH_CHECK_NOT_IMPLEMENTED(!d.is_cuda(), "this build of the convt extension has no CUDA backend "
                              "(it was compiled where PyTorch saw no CUDA device), but got a CUDA tensor");
#endif
  TORCH_CHECK_NOT_IMPLEMENTED(false, "convt supports CPU and CUDA tensors only, but got a tensor on ", d);
  return convt::Device::cpu();  // not reached
}

convt::TensorRef view(const at::Tensor& t) {
  TORCH_CHECK(t.layout() == at::kStrided, "convt supports strided (dense) tensors only");
  TORCH_CHECK(t.dim() <= convt::kMaxTensorRank, "convt supports tensors of rank at most ",
              convt::kMaxTensorRank, ", but got rank ", t.dim());
  return convt::TensorRef::from_arrays(t.numel() > 0 ? t.data_ptr() : nullptr, to_dtype(t),
                                       to_device(t.device()), static_cast<int>(t.dim()),
                                       t.sizes().data(), t.strides().data());
}

// A shape-only view (no data) of a tensor that is yet to be allocated.
convt::TensorRef shape_view(const at::Tensor& like, const std::vector<int64_t>& sizes) {
  TORCH_CHECK(sizes.size() <= static_cast<std::size_t>(convt::kMaxTensorRank),
              "convt supports tensors of rank at most ", convt::kMaxTensorRank);
  return convt::TensorRef::from_arrays(nullptr, to_dtype(like), to_device(like.device()),
                                       static_cast<int>(sizes.size()), sizes.data(), nullptr);
}

convt::ConvParams params(const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                         const std::vector<int64_t>& output_padding,
                         const std::vector<int64_t>& dilation, int64_t groups) {
  const std::size_t sd = stride.size();
  TORCH_CHECK(sd >= 1 && sd <= static_cast<std::size_t>(convt::kMaxSpatialDims),
              "convt supports 1, 2 or 3 spatial dimensions, but got ", sd);
  TORCH_CHECK(padding.size() == sd && output_padding.size() == sd && dilation.size() == sd,
              "stride, padding, output_padding and dilation must have one value per spatial dimension");
  convt::ConvParams p;
  p.spatial_dims = static_cast<int>(sd);
  for (std::size_t d = 0; d < sd; ++d) {
    p.stride[d] = stride[d];
    p.padding[d] = padding[d];
    p.output_padding[d] = output_padding[d];
    p.dilation[d] = dilation[d];
  }
  p.groups = groups;
  return p;
}

convt::ExecOptions options(const at::Tensor& like, int64_t math) {
  TORCH_CHECK_VALUE(math == 0 || math == 1, "convt: math must be 0 (TF32 allowed) or 1 (strict float32), but got ",
                    math);
  convt::ExecOptions o;
  o.math = static_cast<convt::MathMode>(math);
  o.num_threads = at::get_num_threads();
#ifdef CONVT_WITH_CUDA
  if (like.is_cuda()) o.stream = c10::cuda::getCurrentCUDAStream(like.device().index()).stream();
#else
  (void)like;
#endif
  return o;
}

// The memory format of a result: channels_last when the caller says so (1), contiguous
// (0), or (-1) cuDNN's rule: channels_last when either operand is, except in float64 on
// CUDA and for 1-D problems.
at::MemoryFormat result_format(int64_t channels_last, const at::Tensor& a, const at::Tensor& b, int rank) {
  if (rank < 4) return at::MemoryFormat::Contiguous;
  const at::MemoryFormat cl = rank == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
  bool use = channels_last == 1;
  if (channels_last < 0)
    use = !(a.is_cuda() && a.scalar_type() == at::kDouble) &&
          (a.suggest_memory_format() == cl || b.suggest_memory_format() == cl);
  return use ? cl : at::MemoryFormat::Contiguous;
}

std::vector<int64_t> shape_vector(const std::array<int64_t, convt::kMaxTensorRank>& s, int rank) {
  return std::vector<int64_t>(s.begin(), s.begin() + rank);
}

// Runs fn(options) with the workspace convt asks for (allocated on the tensors' device).
template <typename Fn>
void with_workspace(convt::Op op, const convt::Problem& p, const at::Tensor& like, convt::ExecOptions o, Fn&& fn) {
  const std::size_t bytes = convt::workspace_size(op, p, to_device(like.device()), o);
  at::Tensor workspace;
  if (bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(bytes + 256)}, like.options().dtype(at::kByte));
    const auto base = reinterpret_cast<uintptr_t>(workspace.data_ptr());
    o.workspace = reinterpret_cast<void*>((base + 255) & ~uintptr_t(255));
    o.workspace_bytes = bytes;
  }
  pybind11::gil_scoped_release no_gil;
  fn(o);
}

#ifdef CONVT_WITH_CUDA
// The forward's weight re-layout kept per weight tensor, as the convt package keeps it
// (SPEC §5): the CUDA implicit-GEMM kernels pack the weight into their tiles' layout at
// every call, and a forward whose weight is the same live tensor, with the same data
// pointer, strides and version counter, under the same re-layout key and on the same
// stream, takes the packing an earlier forward kept and skips it. An in-place change
// (optimizer step, copy_, load_state_dict) bumps the version counter; a change through
// .data is not seen (convt_clear_weight_cache forgets every entry). Never inside a CUDA-graph
// capture (a replay would not see later changes of the weight), nor for inference tensors
// (no version counter).
using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

struct KeptPacking {
  explicit KeptPacking(WeakImpl w) : weight(std::move(w)) {}
  WeakImpl weight;
  const void* data = nullptr;
  std::vector<int64_t> strides;
  uint32_t version = 0;
  uint64_t key = 0;
  cudaStream_t stream = nullptr;
  at::Tensor buffer;
  void* ptr = nullptr;
};

std::mutex& kept_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<const c10::TensorImpl*, KeptPacking>& kept_packings() {
  static std::unordered_map<const c10::TensorImpl*, KeptPacking> kept;
  return kept;
}

// Points o.weight_cache at the packing kept for w (valid: the forward skips packing) or at
// a buffer the forward packs into; in the second case `pending` is the entry to keep once
// the forward is launched (keep_packing).
void use_kept_packing(const convt::Problem& p, const convt::TensorRef& xr, const at::Tensor& w,
                      convt::ExecOptions& o, std::optional<KeptPacking>& pending) {
  if (!w.is_cuda() || w.is_inference()) return;
  // (CONVT_WEIGHT_CACHE=0 packs at every call, as the convt package does.)
  const char* env = std::getenv("CONVT_WEIGHT_CACHE");
  if (env != nullptr && std::string(env) == "0") return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(o.stream, &capture) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  if (capture != cudaStreamCaptureStatusNone) return;
  const convt::WeightRelayout r = convt::weight_relayout(p, xr, o);
  if (r.bytes == 0) return;
  const c10::TensorImpl* impl = w.unsafeGetTensorImpl();
  const uint32_t version = w._version();
  std::lock_guard<std::mutex> lock(kept_mutex());
  auto& kept = kept_packings();
  KeptPacking next(WeakImpl(w.getIntrusivePtr()));
  next.data = w.data_ptr();
  next.strides = w.strides().vec();
  next.version = version;
  next.key = r.key;
  next.stream = o.stream;
  const auto it = kept.find(impl);
  if (it != kept.end()) {
    KeptPacking& e = it->second;
    if (e.weight.lock().get() == impl) {
      if (e.data == next.data && e.strides == next.strides && e.version == version && e.key == r.key &&
          e.stream == o.stream) {
        o.weight_cache = e.ptr;
        o.weight_cache_valid = true;
        return;
      }
      // Packed again: into the kept buffer where it is large enough and was used on this
      // stream (its readers are then ordered before).
      if (e.stream == o.stream && e.buffer.numel() >= static_cast<int64_t>(r.bytes + 256)) {
        next.buffer = e.buffer;
        next.ptr = e.ptr;
      }
    }
    // (Dropped while its buffer is rewritten; kept again once the forward is launched.)
    kept.erase(it);
  }
  if (!next.buffer.defined()) {
    next.buffer = at::empty({static_cast<int64_t>(r.bytes + 256)}, w.options().dtype(at::kByte));
    next.ptr = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(next.buffer.data_ptr()) + 255) &
                                       ~uintptr_t(255));
  }
  o.weight_cache = next.ptr;
  o.weight_cache_valid = false;
  pending = std::move(next);
}

void keep_packing(const at::Tensor& w, std::optional<KeptPacking>& pending) {
  if (!pending) return;
  std::lock_guard<std::mutex> lock(kept_mutex());
  auto& kept = kept_packings();
  if (kept.size() >= 64) {  // weights come and go: drop the entries of collected ones
    for (auto it = kept.begin(); it != kept.end();)
      it = it->second.weight.expired() ? kept.erase(it) : std::next(it);
  }
  kept.insert_or_assign(w.unsafeGetTensorImpl(), std::move(*pending));
}
#endif

const char* op_name(std::size_t spatial_dims) {
  return spatial_dims == 1 ? "conv_transpose1d" : spatial_dims == 2 ? "conv_transpose2d" : "conv_transpose3d";
}

}  // namespace convt_kb

at::Tensor convt_forward(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                         std::vector<int64_t> stride, std::vector<int64_t> padding,
                         std::vector<int64_t> output_padding, std::vector<int64_t> dilation, int64_t groups,
                         int64_t channels_last, int64_t math) {
  using namespace convt_kb;
  const at::Tensor* bias = b.has_value() && b->defined() ? &*b : nullptr;
  check_dtypes(op_name(stride.size()), {&x, &w, bias}, {"weight", "bias"});
  try {
    const convt::TensorRef xr = view(x), wr = view(w);
    convt::TensorRef br;
    if (bias) br = view(*bias);
    const convt::Problem p = convt::Problem::from_tensors(
        xr, wr, bias ? &br : nullptr, params(stride, padding, output_padding, dilation, groups));
    at::Tensor y = at::empty(shape_vector(p.output_shape(), p.tensor_rank()),
                             x.options().memory_format(result_format(channels_last, x, w, p.tensor_rank())));
    const convt::TensorRef yr = view(y);
    convt::ExecOptions eo = options(x, math);
#ifdef CONVT_WITH_CUDA
    std::optional<KeptPacking> pending;
    use_kept_packing(p, xr, w, eo, pending);
#endif
    with_workspace(convt::Op::kForward, p, x, eo, [&](const convt::ExecOptions& o) {
      convt::forward(p, xr, wr, bias ? &br : nullptr, yr, o);
    });
#ifdef CONVT_WITH_CUDA
    keep_packing(w, pending);
#endif
    return y;
  } catch (const convt::Error& e) {
    raise(e);
  }
}

at::Tensor convt_grad_input(const at::Tensor& dy, const at::Tensor& w, std::vector<int64_t> input_size,
                            std::vector<int64_t> stride, std::vector<int64_t> padding,
                            std::vector<int64_t> output_padding, std::vector<int64_t> dilation, int64_t groups,
                            int64_t channels_last, int64_t math) {
  using namespace convt_kb;
  check_dtypes(op_name(stride.size()), {&dy, &w}, {"weight"});
  try {
    const convt::TensorRef dyr = view(dy), wr = view(w);
    const convt::Problem p = convt::Problem::from_tensors(
        shape_view(dy, input_size), wr, nullptr, params(stride, padding, output_padding, dilation, groups));
    at::Tensor dx = at::empty(input_size,
                              dy.options().memory_format(result_format(channels_last, dy, w, p.tensor_rank())));
    const convt::TensorRef dxr = view(dx);
    with_workspace(convt::Op::kGradInput, p, dy, options(dy, math), [&](const convt::ExecOptions& o) {
      convt::grad_input(p, dyr, wr, dxr, o);
    });
    return dx;
  } catch (const convt::Error& e) {
    raise(e);
  }
}

at::Tensor convt_grad_weight(const at::Tensor& x, const at::Tensor& dy, std::vector<int64_t> weight_size,
                             std::vector<int64_t> stride, std::vector<int64_t> padding,
                             std::vector<int64_t> output_padding, std::vector<int64_t> dilation, int64_t groups,
                             int64_t channels_last, int64_t math) {
  using namespace convt_kb;
  check_dtypes(op_name(stride.size()), {&x, &dy}, {"grad_output"});
  try {
    const convt::TensorRef xr = view(x), dyr = view(dy);
    const convt::Problem p = convt::Problem::from_tensors(
        xr, shape_view(x, weight_size), nullptr, params(stride, padding, output_padding, dilation, groups));
    at::Tensor dw = at::empty(weight_size,
                              x.options().memory_format(result_format(channels_last, x, dy, p.tensor_rank())));
    const convt::TensorRef dwr = view(dw);
    with_workspace(convt::Op::kGradWeight, p, x, options(x, math), [&](const convt::ExecOptions& o) {
      convt::grad_weight(p, xr, dyr, dwr, o);
    });
    return dw;
  } catch (const convt::Error& e) {
    raise(e);
  }
}

at::Tensor convt_grad_bias(const at::Tensor& dy, int64_t math) {
  using namespace convt_kb;
  TORCH_CHECK(dy.dim() >= 3 && dy.dim() <= 5, "convt: expected grad_output of rank 3, 4 or 5, but got rank ",
              dy.dim());
  check_dtypes(op_name(static_cast<std::size_t>(dy.dim() - 2)), {&dy}, {});
  try {
    const convt::TensorRef dyr = view(dy);
    // The problem with dy as its output and the fewest taps: depthwise, 1x1, stride 1.
    convt::Problem p;
    p.spatial_dims = static_cast<int>(dy.dim() - 2);
    p.batch = dy.size(0);
    p.in_channels = p.out_channels = dy.size(1);
    p.groups = p.in_channels > 0 ? p.in_channels : 1;
    for (int d = 0; d < p.spatial_dims; ++d) p.input_size[d] = dy.size(2 + d);
    p.dtype = dyr.dtype;
    p.validate();
    at::Tensor db = at::empty({dy.size(1)}, dy.options());
    const convt::TensorRef dbr = view(db);
    with_workspace(convt::Op::kGradBias, p, dy, options(dy, math), [&](const convt::ExecOptions& o) {
      convt::grad_bias(p, dyr, dbr, o);
    });
    return db;
  } catch (const convt::Error& e) {
    raise(e);
  }
}

#ifdef CONVT_WITH_CUDA
namespace convt_kb {
std::string cuda_forward_plan(const convt::Problem& p, int64_t math);  // in the CUDA part
}
#endif

std::string convt_forward_plan(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                               std::vector<int64_t> stride, std::vector<int64_t> padding,
                               std::vector<int64_t> output_padding, std::vector<int64_t> dilation,
                               int64_t groups, int64_t math) {
  using namespace convt_kb;
  const at::Tensor* bias = b.has_value() && b->defined() ? &*b : nullptr;
  check_dtypes(op_name(stride.size()), {&x, &w, bias}, {"weight", "bias"});
  try {
    const convt::TensorRef xr = view(x), wr = view(w);
    convt::TensorRef br;
    if (bias) br = view(*bias);
    const convt::Problem p = convt::Problem::from_tensors(
        xr, wr, bias ? &br : nullptr, params(stride, padding, output_padding, dilation, groups));
#ifdef CONVT_WITH_CUDA
    if (x.is_cuda()) return cuda_forward_plan(p, math);
#endif
    (void)math;
    return "CPU backend: direct gather loops";
  } catch (const convt::Error& e) {
    raise(e);
  }
}

std::string convt_build_info() { return convt::build_info(); }

// Forgets every kept weight re-layout (needed only after a weight changed through .data).
void convt_clear_weight_cache() {
#ifdef CONVT_WITH_CUDA
  std::lock_guard<std::mutex> lock(convt_kb::kept_mutex());
  convt_kb::kept_packings().clear();
#endif
}
"""

CUDA_EXTRA = r"""
// ---- forward plan report (convt export-kernelbench) ----
namespace convt_kb {
// What convt::cuda::forward runs for this problem with a contiguous input, in the wording
// of its CONVT_LOG=1 line and convt.describe_forward (the wgmma or TMA kernel's tiles, or
// the direct kernel's form and why the implicit GEMM cannot run), planned for a Hopper GPU
// without touching a device.
std::string cuda_forward_plan(const convt::Problem& p, int64_t math) {
  convt::ExecOptions opt;
  opt.math = static_cast<convt::MathMode>(math);
  return convt::cuda::describe_plan_without_device(p.canonical3d(), opt);
}
}  // namespace convt_kb
"""
