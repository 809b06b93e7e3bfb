// convt._C — the binding between the Python front (python/convt) and the C++ API.
//
// The module never sees a torch.Tensor and does not link libtorch. A tensor crosses as a
// descriptor, a tuple of Python ints
//
//     (data_ptr, sizes, strides, dtype, device)
//
// where sizes and strides are sequences of ints (strides in elements), dtype is the
// convt::DType code (0 float32, 1 float64, 2 float16, 3 bfloat16) and device is -1 for the
// CPU or the CUDA ordinal. Convolution arguments cross as the tuple
//
//     (spatial_dims, stride, padding, output_padding, dilation, groups).
//
// Every op takes two calls, so that the caller allocates the output and the workspace
// itself (with torch.empty, in the layout PyTorch would use):
//
//   prepare_<op>(..., math, num_threads, want_workspace)
//       -> (call, output_shape, channels_last_candidate, workspace_bytes,
//           weight_cache_bytes, weight_cache_key)
//     builds and validates the Problem (Problem::from_tensors: PyTorch's rules, PyTorch's
//     wording) without touching any data. With data_ptr 0 it serves as a shape-only check.
//     channels_last_candidate: whether an operand is channels_last (then the output may
//     be too; the Python front decides as PyTorch would). weight_cache_bytes and
//     weight_cache_key: a CUDA forward's weight re-layout (convt::weight_relayout; 0 and 0
//     for the other ops, the CPU and without want_workspace).
//   run(call, output_ptr, output_strides, stream, workspace_ptr, workspace_bytes,
//       weight_cache_ptr=0, weight_cache_valid=False)
//     runs the op with the GIL released. A CUDA forward packs its weight into the
//     caller's weight cache (weight_cache_bytes from prepare) where one is given, or takes
//     the packing it holds when weight_cache_valid.
//
// convt::Error becomes the Python exception PyTorch raises for the same mistake, chosen by
// its ErrorKind: RuntimeError, ValueError, TypeError or NotImplementedError.
#include <nanobind/nanobind.h>

#include <array>
#include <cstdint>
#include <string>

#include "convt/convt.hpp"

namespace nb = nanobind;

namespace {

using convt::Device;
using convt::DType;
using convt::ErrorKind;
using convt::kMaxTensorRank;
using convt::Op;
using convt::Problem;
using convt::TensorRef;

// ---------------------------------------------------------------------------------------
// Reading descriptors (raw CPython calls: this runs on every op call)
// ---------------------------------------------------------------------------------------

[[noreturn]] void type_error(const std::string& message) {
  throw convt::Error(ErrorKind::kType, message);
}

int64_t to_int64(PyObject* o) {
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return static_cast<int64_t>(v);
}

// Reads a sequence of at most `max_len` ints into `out`; returns its length.
int read_ints(PyObject* seq, int64_t* out, int max_len, const char* what) {
  PyObject* fast = PySequence_Fast(seq, "");
  if (!fast) {
    PyErr_Clear();
    type_error(std::string("convt: ") + what + " must be a sequence of ints");
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > max_len) {
    Py_DECREF(fast);
    type_error(std::string("convt: ") + what + " has more than " + std::to_string(max_len) +
               " entries");
  }
  PyObject** items = PySequence_Fast_ITEMS(fast);
  try {
    for (Py_ssize_t i = 0; i < n; ++i) out[i] = to_int64(items[i]);
  } catch (...) {
    Py_DECREF(fast);
    throw;
  }
  Py_DECREF(fast);
  return static_cast<int>(n);
}

DType to_dtype(int64_t code) {
  if (code < 0 || code > 3)
    type_error("convt: unsupported dtype code " + std::to_string(code) +
               " (expected float32, float64, float16 or bfloat16)");
  return static_cast<DType>(code);
}

Device to_device(int64_t code) {
  if (code == -1) return Device::cpu();
  if (code < -1 || code > INT32_MAX)
    throw convt::Error(ErrorKind::kNotImplemented,
                       "convt supports CPU and CUDA tensors only, but got device code " +
                           std::to_string(code));
  return Device::cuda(static_cast<int>(code));
}

// (data_ptr, sizes, strides, dtype, device) -> TensorRef
TensorRef read_tensor(nb::handle desc, const char* what) {
  PyObject* t = desc.ptr();
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5)
    type_error(std::string("convt: the ") + what +
               " descriptor must be a tuple (data_ptr, sizes, strides, dtype, device)");
  const int64_t ptr = to_int64(PyTuple_GET_ITEM(t, 0));
  int64_t sizes[kMaxTensorRank], strides[kMaxTensorRank];
  const int rank = read_ints(PyTuple_GET_ITEM(t, 1), sizes, kMaxTensorRank, what);
  const int srank = read_ints(PyTuple_GET_ITEM(t, 2), strides, kMaxTensorRank, what);
  if (srank != rank) type_error(std::string("convt: ") + what + " sizes and strides differ in length");
  const DType dtype = to_dtype(to_int64(PyTuple_GET_ITEM(t, 3)));
  const Device device = to_device(to_int64(PyTuple_GET_ITEM(t, 4)));
  return TensorRef::from_arrays(reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)), dtype,
                                device, rank, sizes, strides);
}

// (spatial_dims, stride, padding, output_padding, dilation, groups) -> ConvParams
convt::ConvParams read_params(nb::handle params) {
  PyObject* t = params.ptr();
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 6)
    type_error("convt: params must be a tuple "
               "(spatial_dims, stride, padding, output_padding, dilation, groups)");
  convt::ConvParams p;
  const int64_t sd = to_int64(PyTuple_GET_ITEM(t, 0));
  CONVT_CHECK(sd >= 1 && sd <= convt::kMaxSpatialDims,
              "convt supports 1, 2 or 3 spatial dimensions, but got ", sd);
  p.spatial_dims = static_cast<int>(sd);
  static const char* names[] = {"stride", "padding", "output_padding", "dilation"};
  convt::Dims* fields[] = {&p.stride, &p.padding, &p.output_padding, &p.dilation};
  for (int f = 0; f < 4; ++f) {
    int64_t v[convt::kMaxSpatialDims];
    const int n = read_ints(PyTuple_GET_ITEM(t, 1 + f), v, convt::kMaxSpatialDims, names[f]);
    CONVT_CHECK(n == sd, "expected ", names[f], " to have ", sd, " values, but got ", n);
    for (int d = 0; d < n; ++d) (*fields[f])[d] = v[d];
  }
  p.groups = to_int64(PyTuple_GET_ITEM(t, 5));
  return p;
}

// ---------------------------------------------------------------------------------------
// Output layout: the memory format PyTorch gives the result of the same call
// ---------------------------------------------------------------------------------------

// c10's is_channels_last_strides_2d_s4 / _3d_s5: whether Tensor.suggest_memory_format()
// reports channels_last (channels_last_3d) for these sizes and strides.
bool strides_like_channels_last(const TensorRef& t) {
  static constexpr int order4[] = {1, 3, 2, 0};
  static constexpr int order5[] = {1, 4, 3, 2, 0};
  if (t.rank != 4 && t.rank != 5) return false;
  if (t.strides[1] == 0) return false;  // trivial channel dimension: contiguous
  const int* order = t.rank == 4 ? order4 : order5;
  int64_t min = 0;
  for (int i = 0; i < t.rank; ++i) {
    const int d = order[i];
    if (t.sizes[d] == 0) return false;
    if (t.strides[d] < min) return false;
    if (d == 0 && min == t.strides[1]) return false;  // ambiguous: N111-like, contiguous
    min = t.strides[d];
    if (t.sizes[d] > 1) min *= t.sizes[d];
  }
  return true;
}

// Whether the output may be channels_last: PyTorch returns a channels_last result only
// when the input or the weight is channels_last (2-D and 3-D convolutions). The Python
// front makes the final choice for these candidates, the way PyTorch's backend would.
bool channels_last_candidate(const TensorRef& a, const TensorRef& b, int spatial_dims) {
  if (spatial_dims == 1) return false;
  return strides_like_channels_last(a) || strides_like_channels_last(b);
}

// ---------------------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------------------

// One prepared op: the validated problem, its input tensors (in the order of the
// convt:: entry point) and the output the caller allocates.
struct Call {
  Op op = Op::kForward;
  Problem problem;
  TensorRef in0, in1, bias;
  bool has_bias = false;
  TensorRef out;  // sizes, dtype and device; data and strides come with run()
  convt::ExecOptions options;
};

std::string sizes_str(const std::array<int64_t, kMaxTensorRank>& s, int rank) {
  TensorRef t;
  t.rank = rank;
  t.sizes = s;
  return t.sizes_string();
}

void check_shape(const char* what, const TensorRef& t, const std::array<int64_t, kMaxTensorRank>& want,
                 int rank, const Problem& p) {
  bool ok = t.rank == rank;
  for (int d = 0; ok && d < rank; ++d) ok = t.sizes[d] == want[d];
  CONVT_CHECK(ok, "convt: expected ", what, " of size ", sizes_str(want, rank), " for ",
              p.to_string(), ", but got ", what, " of size ", t.sizes_string());
}

TensorRef output_ref(const TensorRef& like, int rank, const int64_t* sizes) {
  return TensorRef::from_arrays(nullptr, like.dtype, like.device, rank, sizes, nullptr);
}

convt::ExecOptions make_options(int64_t math, int64_t num_threads) {
  convt::ExecOptions o;
  CONVT_CHECK_KIND(ErrorKind::kValue, math == 0 || math == 1,
                   "convt: math must be 0 (TF32 allowed) or 1 (strict float32), but got ", math);
  o.math = static_cast<convt::MathMode>(math);
  o.num_threads = static_cast<int>(num_threads < 0 ? 0 : num_threads);
  return o;
}

nb::tuple finish(Call&& c, bool channels_last, bool want_workspace) {
  const std::size_t ws =
      want_workspace ? convt::workspace_size(c.op, c.problem, c.out.device, c.options) : 0;
  // (A CUDA forward's weight re-layout, for a caller that keeps it: see weight_cache.)
  convt::WeightRelayout r;
  if (want_workspace && c.op == Op::kForward && c.in0.device.is_cuda())
    r = convt::weight_relayout(c.problem, c.in0, c.options);
  PyObject* shape = PyTuple_New(c.out.rank);
  if (!shape) throw nb::python_error();
  for (int d = 0; d < c.out.rank; ++d) PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(c.out.sizes[d]));
  return nb::make_tuple(std::move(c), nb::steal(shape), channels_last, ws, r.bytes, r.key);
}

nb::tuple prepare_forward(nb::handle x, nb::handle w, nb::handle b, nb::handle params,
                          int64_t math, int64_t num_threads, bool want_workspace) {
  Call c;
  c.op = Op::kForward;
  c.options = make_options(math, num_threads);
  c.in0 = read_tensor(x, "input");
  c.in1 = read_tensor(w, "weight");
  c.has_bias = !b.is_none();
  if (c.has_bias) c.bias = read_tensor(b, "bias");
  const convt::ConvParams p = read_params(params);
  c.problem = Problem::from_tensors(c.in0, c.in1, c.has_bias ? &c.bias : nullptr, p);
  const auto shape = c.problem.output_shape();
  c.out = output_ref(c.in0, c.problem.tensor_rank(), shape.data());
  const bool cl = channels_last_candidate(c.in0, c.in1, p.spatial_dims);
  return finish(std::move(c), cl, want_workspace);
}

// What the forward would run for these tensors: the dispatcher's choice and why, as
// CONVT_LOG=1 prints it. Plans only: nothing is launched and no data is read, so shape-only
// descriptors (data pointer 0) describe too; a null input pointer is taken as a 256-byte
// aligned one (alignment is all the planner looks at).
nb::str describe_forward(nb::handle x, nb::handle w, nb::handle b, nb::handle params,
                         int64_t math) {
  TensorRef in = read_tensor(x, "input");
  const TensorRef wt = read_tensor(w, "weight");
  TensorRef bias;
  if (!b.is_none()) bias = read_tensor(b, "bias");
  const convt::ConvParams p = read_params(params);
  const Problem problem = Problem::from_tensors(in, wt, b.is_none() ? nullptr : &bias, p);
  if (in.data == nullptr) in.data = reinterpret_cast<void*>(uintptr_t(256));
  const std::string what = convt::describe_forward(problem, in, make_options(math, 0));
  return nb::str(what.c_str(), what.size());
}

// grad_input: dx (of size input_size) from dy and w.
nb::tuple prepare_grad_input(nb::handle dy, nb::handle w, nb::handle input_size, nb::handle params,
                             int64_t math, int64_t num_threads, bool want_workspace) {
  Call c;
  c.op = Op::kGradInput;
  c.options = make_options(math, num_threads);
  c.in0 = read_tensor(dy, "grad_output");
  c.in1 = read_tensor(w, "weight");
  int64_t sizes[kMaxTensorRank];
  const int rank = read_ints(input_size.ptr(), sizes, kMaxTensorRank, "input_size");
  c.out = output_ref(c.in0, rank, sizes);
  const convt::ConvParams p = read_params(params);
  c.problem = Problem::from_tensors(c.out, c.in1, nullptr, p);
  check_shape("grad_output", c.in0, c.problem.output_shape(), c.problem.tensor_rank(), c.problem);
  const bool cl = channels_last_candidate(c.in0, c.in1, p.spatial_dims);
  return finish(std::move(c), cl, want_workspace);
}

// grad_weight: dw (of size weight_size) from x and dy.
nb::tuple prepare_grad_weight(nb::handle x, nb::handle dy, nb::handle weight_size, nb::handle params,
                              int64_t math, int64_t num_threads, bool want_workspace) {
  Call c;
  c.op = Op::kGradWeight;
  c.options = make_options(math, num_threads);
  c.in0 = read_tensor(x, "input");
  c.in1 = read_tensor(dy, "grad_output");
  int64_t sizes[kMaxTensorRank];
  const int rank = read_ints(weight_size.ptr(), sizes, kMaxTensorRank, "weight_size");
  c.out = output_ref(c.in0, rank, sizes);
  const convt::ConvParams p = read_params(params);
  c.problem = Problem::from_tensors(c.in0, c.out, nullptr, p);
  CONVT_CHECK(c.in1.dtype == c.in0.dtype, "Input type (", convt::dtype_name(c.in0.dtype),
              ") and grad_output type (", convt::dtype_name(c.in1.dtype), ") should be the same");
  check_shape("grad_output", c.in1, c.problem.output_shape(), c.problem.tensor_rank(), c.problem);
  const bool cl = channels_last_candidate(c.in0, c.in1, p.spatial_dims);
  return finish(std::move(c), cl, want_workspace);
}

// grad_bias: db[c] = sum of dy[:, c]. The problem is the one with dy as its output and the
// fewest taps: a depthwise, 1x1, stride-1 transposed convolution over dy's shape.
nb::tuple prepare_grad_bias(nb::handle dy, int64_t math, int64_t num_threads, bool want_workspace) {
  Call c;
  c.op = Op::kGradBias;
  c.options = make_options(math, num_threads);
  c.in0 = read_tensor(dy, "grad_output");
  const int sd = c.in0.rank - 2;
  CONVT_CHECK(sd >= 1 && sd <= convt::kMaxSpatialDims,
              "convt: expected grad_output of rank 3, 4 or 5, but got grad_output of size ",
              c.in0.sizes_string());
  Problem& p = c.problem;
  p.spatial_dims = sd;
  p.batch = c.in0.sizes[0];
  p.in_channels = p.out_channels = c.in0.sizes[1];
  p.groups = p.in_channels > 0 ? p.in_channels : 1;
  for (int d = 0; d < sd; ++d) p.input_size[d] = c.in0.sizes[2 + d];
  p.dtype = c.in0.dtype;
  p.validate();
  const int64_t channels = p.out_channels;
  c.out = output_ref(c.in0, 1, &channels);
  return finish(std::move(c), false, want_workspace);
}

void run(const Call& c, int64_t out_ptr, nb::handle out_strides, int64_t stream,
         int64_t workspace_ptr, int64_t workspace_bytes, int64_t weight_cache_ptr,
         bool weight_cache_valid) {
  TensorRef out = c.out;
  out.data = reinterpret_cast<void*>(static_cast<uintptr_t>(out_ptr));
  int64_t strides[kMaxTensorRank];
  const int n = read_ints(out_strides.ptr(), strides, kMaxTensorRank, "output strides");
  CONVT_CHECK(n == out.rank, "convt: expected ", out.rank, " output strides, but got ", n);
  for (int d = 0; d < n; ++d) out.strides[d] = strides[d];
  convt::ExecOptions options = c.options;
  options.stream = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(stream));
  options.workspace = reinterpret_cast<void*>(static_cast<uintptr_t>(workspace_ptr));
  options.workspace_bytes = static_cast<std::size_t>(workspace_bytes < 0 ? 0 : workspace_bytes);
  options.weight_cache = reinterpret_cast<void*>(static_cast<uintptr_t>(weight_cache_ptr));
  options.weight_cache_valid = weight_cache_ptr != 0 && weight_cache_valid;

  nb::gil_scoped_release release;
  switch (c.op) {
    case Op::kForward:
      convt::forward(c.problem, c.in0, c.in1, c.has_bias ? &c.bias : nullptr, out, options);
      break;
    case Op::kGradInput:
      convt::grad_input(c.problem, c.in0, c.in1, out, options);
      break;
    case Op::kGradWeight:
      convt::grad_weight(c.problem, c.in0, c.in1, out, options);
      break;
    case Op::kGradBias:
      convt::grad_bias(c.problem, c.in0, out, options);
      break;
  }
}

nb::tuple dims_tuple(const convt::Dims& v, int n) {
  nb::list l;
  for (int d = 0; d < n; ++d) l.append(v[d]);
  return nb::tuple(l);
}

nb::tuple shape_tuple(const std::array<int64_t, kMaxTensorRank>& s, int rank) {
  nb::list l;
  for (int d = 0; d < rank; ++d) l.append(s[d]);
  return nb::tuple(l);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "convt's C++ core: transposed convolution on CPU and CUDA tensors described by "
            "pointers, sizes and strides (see python/csrc/convt_ext.cpp)";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const convt::Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.kind()) {
        case ErrorKind::kRuntime: type = PyExc_RuntimeError; break;
        case ErrorKind::kValue: type = PyExc_ValueError; break;
        case ErrorKind::kType: type = PyExc_TypeError; break;
        case ErrorKind::kNotImplemented: type = PyExc_NotImplementedError; break;
      }
      PyErr_SetString(type, e.what());
    }
  });

  nb::class_<Problem>(m, "Problem", "One transposed convolution, described by shape alone")
      .def_ro("spatial_dims", &Problem::spatial_dims)
      .def_ro("batch", &Problem::batch)
      .def_ro("in_channels", &Problem::in_channels)
      .def_ro("out_channels", &Problem::out_channels)
      .def_ro("groups", &Problem::groups)
      .def_ro("has_bias", &Problem::has_bias)
      .def_prop_ro("input_size", [](const Problem& p) { return dims_tuple(p.input_size, p.spatial_dims); })
      .def_prop_ro("kernel_size", [](const Problem& p) { return dims_tuple(p.kernel_size, p.spatial_dims); })
      .def_prop_ro("stride", [](const Problem& p) { return dims_tuple(p.stride, p.spatial_dims); })
      .def_prop_ro("padding", [](const Problem& p) { return dims_tuple(p.padding, p.spatial_dims); })
      .def_prop_ro("output_padding",
                   [](const Problem& p) { return dims_tuple(p.output_padding, p.spatial_dims); })
      .def_prop_ro("dilation", [](const Problem& p) { return dims_tuple(p.dilation, p.spatial_dims); })
      .def_prop_ro("dtype", [](const Problem& p) { return convt::dtype_name(p.dtype); })
      .def_prop_ro("input_shape", [](const Problem& p) { return shape_tuple(p.input_shape(), p.tensor_rank()); })
      .def_prop_ro("weight_shape", [](const Problem& p) { return shape_tuple(p.weight_shape(), p.tensor_rank()); })
      .def_prop_ro("output_shape", [](const Problem& p) { return shape_tuple(p.output_shape(), p.tensor_rank()); })
      .def("flops", &Problem::flops, "2*N*C_in*(C_out/groups)*prod(kernel)*prod(input)")
      .def("__repr__", &Problem::to_string);

  nb::class_<Call>(m, "Call", "A validated op, ready to run once its output is allocated")
      .def_prop_ro("op", [](const Call& c) { return convt::op_to_string(c.op); })
      .def_prop_ro("problem", [](const Call& c) { return c.problem; })
      .def("__repr__", [](const Call& c) {
        return std::string("convt.Call(") + convt::op_to_string(c.op) + ", " + c.problem.to_string() + ")";
      });

  m.def("prepare_forward", &prepare_forward, nb::arg("input"), nb::arg("weight"),
        nb::arg("bias").none(), nb::arg("params"), nb::arg("math"), nb::arg("num_threads"),
        nb::arg("want_workspace"),
        "Validate y = conv_transpose(input, weight) + bias; returns "
        "(call, output_shape, channels_last_candidate, workspace_bytes, weight_cache_bytes, "
        "weight_cache_key)");
  m.def("prepare_grad_input", &prepare_grad_input, nb::arg("grad_output"), nb::arg("weight"),
        nb::arg("input_size"), nb::arg("params"), nb::arg("math"), nb::arg("num_threads"),
        nb::arg("want_workspace"), "Validate the input gradient of size input_size");
  m.def("prepare_grad_weight", &prepare_grad_weight, nb::arg("input"), nb::arg("grad_output"),
        nb::arg("weight_size"), nb::arg("params"), nb::arg("math"), nb::arg("num_threads"),
        nb::arg("want_workspace"), "Validate the weight gradient of size weight_size");
  m.def("prepare_grad_bias", &prepare_grad_bias, nb::arg("grad_output"), nb::arg("math"),
        nb::arg("num_threads"), nb::arg("want_workspace"),
        "Validate the bias gradient (the sum of grad_output over all but the channel dimension)");
  m.def("describe_forward", &describe_forward, nb::arg("input"), nb::arg("weight"),
        nb::arg("bias").none(), nb::arg("params"), nb::arg("math"),
        "What the forward runs for these tensors (kernel and why), as CONVT_LOG=1 says it; "
        "nothing is launched");
  m.def("run", &run, nb::arg("call"), nb::arg("output_ptr"), nb::arg("output_strides"),
        nb::arg("stream"), nb::arg("workspace_ptr"), nb::arg("workspace_bytes"),
        nb::arg("weight_cache_ptr") = 0, nb::arg("weight_cache_valid") = false,
        "Run a prepared op into the output at output_ptr (GIL released); a forward packs "
        "its weight into weight_cache_ptr (weight_cache_bytes from prepare_forward), or takes "
        "the packing there when weight_cache_valid");

  m.def("built_with_cuda", &convt::built_with_cuda, "Whether this build has the CUDA backend");
  m.def("cuda_available", &convt::cuda_available,
        "Whether this build has the CUDA backend and a CUDA device is visible");
  m.def("build_info", &convt::build_info, "A one-line description of the build");
  m.attr("__version__") = CONVT_VERSION_STRING;
}
