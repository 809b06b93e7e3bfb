// Public entry points: check the call against the problem, then hand it to the backend
// of the tensors' device in canonical rank-5 form (src/backend.hpp).
#include "convt/api.hpp"

#include <utility>
#include <sstream>

#include "backend.hpp"
#include "convt/version.hpp"

namespace convt {

namespace {

// View a batched tensor of rank spatial_dims+2 as rank 5 by inserting size-1 spatial
// dimensions after the channel dimension.
TensorRef to_rank5(const TensorRef& t, int spatial_dims) {
  TensorRef r = t;
  r.rank = 5;
  const int shift = 3 - spatial_dims;
  for (int d = 4; d >= 2; --d) {
    const int s = d - shift;
    r.sizes[d] = s >= 2 ? t.sizes[s] : 1;
    r.strides[d] = s >= 2 ? t.strides[s] : 0;
  }
  return r;
}

std::string shape_str(const std::array<int64_t, kMaxTensorRank>& s, int rank) {
  std::ostringstream os;
  os << '[';
  for (int d = 0; d < rank; ++d) os << (d ? ", " : "") << s[d];
  os << ']';
  return os.str();
}

void check_tensor(const char* what, const TensorRef& t, const std::array<int64_t, kMaxTensorRank>& shape,
                  int rank, const Problem& p, Device device) {
  bool ok = t.rank == rank;
  for (int d = 0; ok && d < rank; ++d) ok = t.sizes[d] == shape[d];
  CONVT_CHECK(ok, "convt: expected ", what, " of size ", shape_str(shape, rank), " for ",
              p.to_string(), ", but got ", what, " of size ", t.sizes_string());
  CONVT_CHECK(t.dtype == p.dtype, "convt: expected ", what, " of dtype ", dtype_name(p.dtype),
              ", but got ", dtype_name(t.dtype));
  CONVT_CHECK(t.device == device, "convt: all tensors of a call must be on one device (", what,
              " is not)");
  if (t.numel() > 0) CONVT_CHECK(t.data != nullptr, "convt: ", what, " has a null data pointer");
  for (int d = 0; d < rank; ++d)
    CONVT_CHECK(t.strides[d] >= 0, "convt: negative strides are not supported (", what, ")");
}

// Outputs must not have two elements at one address: sorted by stride, each dimension of
// size > 1 must step over everything the smaller-stride dimensions span.
void check_non_overlapping(const char* what, const TensorRef& t) {
  std::array<int, kMaxTensorRank> order{};
  int n = 0;
  for (int d = 0; d < t.rank; ++d)
    if (t.sizes[d] > 1) order[n++] = d;
  for (int i = 1; i < n; ++i)  // insertion sort by stride (at most 5 entries)
    for (int j = i; j > 0 && t.strides[order[j]] < t.strides[order[j - 1]]; --j)
      std::swap(order[j], order[j - 1]);
  int64_t span = 1;  // elements covered by the dimensions seen so far
  for (int i = 0; i < n; ++i) {
    const int d = order[i];
    CONVT_CHECK(t.strides[d] >= span, "convt: ", what,
                " has overlapping elements (sizes ", t.sizes_string(), ", stride ", t.strides[d],
                " in dimension ", d, "); outputs need distinct memory for every element");
    span = t.strides[d] * (t.sizes[d] - 1) + span;
  }
}

template <typename CpuFn, typename CudaFn>
void dispatch(Device device, CpuFn&& cpu_fn, CudaFn&& cuda_fn) {
  if (device.is_cuda()) {
#ifdef CONVT_WITH_CUDA
    cuda_fn();
#else
    (void)cuda_fn;
    throw Error(ErrorKind::kRuntime, "convt was built without CUDA support, but got CUDA tensors");
#endif
  } else {
    cpu_fn();
  }
}

}  // namespace

const char* op_to_string(Op op) {
  switch (op) {
    case Op::kForward: return "forward";
    case Op::kGradInput: return "grad_input";
    case Op::kGradWeight: return "grad_weight";
    case Op::kGradBias: return "grad_bias";
  }
  return "unknown";
}

std::size_t workspace_size(Op op, const Problem& problem, Device device, const ExecOptions& options) {
  problem.validate();
#ifdef CONVT_WITH_CUDA
  if (device.is_cuda()) return cuda::workspace_size(op, problem.canonical3d(), options);
#else
  (void)op;
  (void)options;
  (void)device;
#endif
  return 0;
}

std::string describe_forward(const Problem& p, const TensorRef& input, const ExecOptions& opt) {
  p.validate();
  check_tensor("input", input, p.input_shape(), p.tensor_rank(), p, input.device);
  std::string what = "CPU backend";
  dispatch(
      input.device, [] {},
      [&] { what = cuda::describe_forward(p.canonical3d(), to_rank5(input, p.spatial_dims), opt); });
  return what;
}

WeightRelayout weight_relayout(const Problem& p, const TensorRef& input, const ExecOptions& opt) {
  p.validate();
  check_tensor("input", input, p.input_shape(), p.tensor_rank(), p, input.device);
  WeightRelayout r;
  dispatch(
      input.device, [] {},
      [&] { r = cuda::weight_relayout(p.canonical3d(), to_rank5(input, p.spatial_dims), opt); });
  return r;
}

void forward(const Problem& p, const TensorRef& input, const TensorRef& weight, const TensorRef* bias,
             const TensorRef& output, const ExecOptions& opt) {
  p.validate();
  const int r = p.tensor_rank();
  const Device dev = output.device;
  CONVT_CHECK((bias != nullptr) == p.has_bias, "convt: the problem ",
              p.has_bias ? "has a bias but none was given" : "has no bias but one was given");
  check_tensor("input", input, p.input_shape(), r, p, dev);
  check_tensor("weight", weight, p.weight_shape(), r, p, dev);
  check_tensor("output", output, p.output_shape(), r, p, dev);
  if (bias) check_tensor("bias", *bias, {p.out_channels}, 1, p, dev);
  if (output.numel() == 0) return;
  check_non_overlapping("output", output);
  const Problem p3 = p.canonical3d();
  const TensorRef x = to_rank5(input, p.spatial_dims), w = to_rank5(weight, p.spatial_dims),
                  y = to_rank5(output, p.spatial_dims);
  dispatch(
      dev, [&] { cpu::forward(p3, x, w, bias, y, opt); },
      [&] { cuda::forward(p3, x, w, bias, y, opt); });
}

void grad_input(const Problem& p, const TensorRef& grad_output, const TensorRef& weight,
                const TensorRef& grad_in, const ExecOptions& opt) {
  p.validate();
  const int r = p.tensor_rank();
  const Device dev = grad_in.device;
  check_tensor("grad_output", grad_output, p.output_shape(), r, p, dev);
  check_tensor("weight", weight, p.weight_shape(), r, p, dev);
  check_tensor("grad_input", grad_in, p.input_shape(), r, p, dev);
  if (grad_in.numel() == 0) return;
  check_non_overlapping("grad_input", grad_in);
  const Problem p3 = p.canonical3d();
  const TensorRef dy = to_rank5(grad_output, p.spatial_dims), w = to_rank5(weight, p.spatial_dims),
                  dx = to_rank5(grad_in, p.spatial_dims);
  dispatch(
      dev, [&] { cpu::grad_input(p3, dy, w, dx, opt); },
      [&] { cuda::grad_input(p3, dy, w, dx, opt); });
}

void grad_weight(const Problem& p, const TensorRef& input, const TensorRef& grad_output,
                 const TensorRef& grad_w, const ExecOptions& opt) {
  p.validate();
  const int r = p.tensor_rank();
  const Device dev = grad_w.device;
  check_tensor("input", input, p.input_shape(), r, p, dev);
  check_tensor("grad_output", grad_output, p.output_shape(), r, p, dev);
  check_tensor("grad_weight", grad_w, p.weight_shape(), r, p, dev);
  if (grad_w.numel() == 0) return;
  check_non_overlapping("grad_weight", grad_w);
  const Problem p3 = p.canonical3d();
  const TensorRef x = to_rank5(input, p.spatial_dims), dy = to_rank5(grad_output, p.spatial_dims),
                  dw = to_rank5(grad_w, p.spatial_dims);
  dispatch(
      dev, [&] { cpu::grad_weight(p3, x, dy, dw, opt); },
      [&] { cuda::grad_weight(p3, x, dy, dw, opt); });
}

void grad_bias(const Problem& p, const TensorRef& grad_output, const TensorRef& grad_b,
               const ExecOptions& opt) {
  p.validate();
  const int r = p.tensor_rank();
  const Device dev = grad_b.device;
  check_tensor("grad_output", grad_output, p.output_shape(), r, p, dev);
  check_tensor("grad_bias", grad_b, {p.out_channels}, 1, p, dev);
  if (grad_b.numel() == 0) return;
  check_non_overlapping("grad_bias", grad_b);
  const Problem p3 = p.canonical3d();
  const TensorRef dy = to_rank5(grad_output, p.spatial_dims);
  dispatch(
      dev, [&] { cpu::grad_bias(p3, dy, grad_b, opt); },
      [&] { cuda::grad_bias(p3, dy, grad_b, opt); });
}

bool built_with_cuda() {
#ifdef CONVT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_available() {
#ifdef CONVT_WITH_CUDA
  return cuda::available();
#else
  return false;
#endif
}

const char* build_info() {
  return "convt " CONVT_VERSION_STRING
#ifdef CONVT_WITH_CUDA
         ", CUDA backend (archs " CONVT_CUDA_ARCHS_STRING ")"
#else
         ", CPU backend only"
#endif
      ;
}

}  // namespace convt
