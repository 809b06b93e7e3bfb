// Problem shape arithmetic and PyTorch's argument rules, with PyTorch's wording.
#include "convt/problem.hpp"

#include <sstream>

#include "convt/error.hpp"

namespace convt {

namespace {

// PyTorch names dimensions depth/height/width in its output_padding message.
const char* dim_name(int spatial_dims, int d) {
  static const char* names[] = {"depth", "height", "width"};
  return names[3 - spatial_dims + d];
}

std::string dims_string(const Dims& v, int n, const char* sep = ", ") {
  std::ostringstream os;
  for (int d = 0; d < n; ++d) os << (d ? sep : "") << v[d];
  return os.str();
}

std::string shape_string(const std::array<int64_t, kMaxTensorRank>& s, int rank) {
  std::ostringstream os;
  os << '[';
  for (int d = 0; d < rank; ++d) os << (d ? ", " : "") << s[d];
  os << ']';
  return os.str();
}

void check_params(const Problem& p) {
  const int sd = p.spatial_dims;
  CONVT_CHECK(sd >= 1 && sd <= 3, "convt supports 1, 2 or 3 spatial dimensions, but got ", sd);
  for (int d = 0; d < sd; ++d)
    CONVT_CHECK(p.stride[d] > 0, "non-positive stride is not supported");
  for (int d = 0; d < sd; ++d)
    CONVT_CHECK(p.padding[d] >= 0, "negative padding is not supported");
  for (int d = 0; d < sd; ++d)
    CONVT_CHECK(p.output_padding[d] >= 0, "negative output_padding is not supported");
  for (int d = 0; d < sd; ++d)
    CONVT_CHECK(p.dilation[d] > 0, "dilation should be greater than zero, but got dilation=[",
                dims_string(p.dilation, sd), "]");
  CONVT_CHECK(p.groups > 0, "non-positive groups is not supported");
}

void check_output_padding(const Problem& p) {
  const int sd = p.spatial_dims;
  bool ok = true;
  for (int d = 0; d < sd; ++d)
    ok = ok && (p.output_padding[d] < p.stride[d] || p.output_padding[d] < p.dilation[d]);
  if (ok) return;
  // PyTorch runs 1-D problems as 2-D ones of height 1 and names the height entries too.
  const int n = sd == 1 ? 2 : sd;
  const int shift = n - sd;
  auto entry = [&](const Dims& v, int d, int64_t fill) { return d < shift ? fill : v[d - shift]; };
  std::ostringstream os;
  os << "output padding must be smaller than either stride or dilation, but got";
  for (int d = 0; d < n; ++d) os << " output_padding_" << dim_name(n, d) << ": " << entry(p.output_padding, d, 0);
  for (int d = 0; d < n; ++d) os << " stride_" << dim_name(n, d) << ": " << entry(p.stride, d, 1);
  for (int d = 0; d < n; ++d) os << " dilation_" << dim_name(n, d) << ": " << entry(p.dilation, d, 1);
  throw Error(ErrorKind::kRuntime, os.str());
}

void check_output_size(const Problem& p) {
  const int sd = p.spatial_dims;
  bool ok = true;
  for (int d = 0; d < sd; ++d) ok = ok && p.output_size(d) >= 1;
  if (ok) return;
  Dims out = p.output_sizes();
  throw Error(ErrorKind::kRuntime,
              detail::str_cat("Given input size per channel: (", dims_string(p.input_size, sd, " x "),
                              "). Calculated output size per channel: (",
                              dims_string(out, sd, " x "), "). Output size is too small"));
}

}  // namespace

const char* op_name(int spatial_dims) {
  switch (spatial_dims) {
    case 1: return "conv_transpose1d";
    case 2: return "conv_transpose2d";
    case 3: return "conv_transpose3d";
  }
  return "conv_transpose";
}

int64_t Problem::output_size(int d) const {
  return (input_size[d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel_size[d] - 1) +
         output_padding[d] + 1;
}

Dims Problem::output_sizes() const {
  Dims o{1, 1, 1};
  for (int d = 0; d < spatial_dims; ++d) o[d] = output_size(d);
  return o;
}

std::array<int64_t, kMaxTensorRank> Problem::input_shape() const {
  std::array<int64_t, kMaxTensorRank> s{};
  s[0] = batch;
  s[1] = in_channels;
  for (int d = 0; d < spatial_dims; ++d) s[2 + d] = input_size[d];
  return s;
}

std::array<int64_t, kMaxTensorRank> Problem::weight_shape() const {
  std::array<int64_t, kMaxTensorRank> s{};
  s[0] = in_channels;
  s[1] = out_channels_per_group();
  for (int d = 0; d < spatial_dims; ++d) s[2 + d] = kernel_size[d];
  return s;
}

std::array<int64_t, kMaxTensorRank> Problem::output_shape() const {
  std::array<int64_t, kMaxTensorRank> s{};
  s[0] = batch;
  s[1] = out_channels;
  for (int d = 0; d < spatial_dims; ++d) s[2 + d] = output_size(d);
  return s;
}

namespace {
int64_t prod(const std::array<int64_t, kMaxTensorRank>& s, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= s[d];
  return n;
}
}  // namespace

int64_t Problem::input_numel() const { return prod(input_shape(), tensor_rank()); }
int64_t Problem::weight_numel() const { return prod(weight_shape(), tensor_rank()); }
int64_t Problem::output_numel() const { return prod(output_shape(), tensor_rank()); }

double Problem::flops() const {
  double f = 2.0 * double(batch) * double(in_channels) * double(out_channels_per_group());
  for (int d = 0; d < spatial_dims; ++d) f *= double(kernel_size[d]) * double(input_size[d]);
  return f;
}

Problem Problem::canonical3d() const {
  Problem q = *this;
  q.spatial_dims = 3;
  const int shift = 3 - spatial_dims;
  for (int d = 2; d >= 0; --d) {
    const int s = d - shift;
    const bool real = s >= 0;
    q.input_size[d] = real ? input_size[s] : 1;
    q.kernel_size[d] = real ? kernel_size[s] : 1;
    q.stride[d] = real ? stride[s] : 1;
    q.padding[d] = real ? padding[s] : 0;
    q.output_padding[d] = real ? output_padding[s] : 0;
    q.dilation[d] = real ? dilation[s] : 1;
  }
  return q;
}

void Problem::validate() const {
  check_params(*this);
  CONVT_CHECK(batch >= 0, "batch size must be non-negative, but got ", batch);
  CONVT_CHECK_KIND(ErrorKind::kValue, in_channels >= 0 && out_channels >= 0,
                   "channel counts must be non-negative, but got in_channels=", in_channels,
                   " and out_channels=", out_channels);
  CONVT_CHECK_KIND(ErrorKind::kValue, in_channels % groups == 0,
                   "in_channels must be divisible by groups, but got in_channels=", in_channels,
                   " and groups=", groups);
  CONVT_CHECK_KIND(ErrorKind::kValue, out_channels % groups == 0,
                   "out_channels must be divisible by groups, but got out_channels=",
                   out_channels, " and groups=", groups);
  for (int d = 0; d < spatial_dims; ++d)
    CONVT_CHECK(kernel_size[d] > 0, "non-positive kernel size is not supported, but got kernel_size=[",
                dims_string(kernel_size, spatial_dims), "]");
  bool any_zero = false;
  for (int d = 0; d < spatial_dims; ++d) {
    CONVT_CHECK(input_size[d] >= 0, "negative input size: ", input_size[d]);
    any_zero = any_zero || input_size[d] == 0;
  }
  if (any_zero && batch != 0 && in_channels != 0)
    throw Error(ErrorKind::kRuntime,
                "Only zero batch or zero channel inputs are supported, but got input shape: " +
                    shape_string(input_shape(), tensor_rank()));
  check_output_padding(*this);
  check_output_size(*this);
}

Problem Problem::from_tensors(const TensorRef& input, const TensorRef& weight,
                              const TensorRef* bias, const ConvParams& params) {
  const int sd = params.spatial_dims;
  CONVT_CHECK(sd >= 1 && sd <= 3, "convt supports 1, 2 or 3 spatial dimensions, but got ", sd);
  const char* name = op_name(sd);
  CONVT_CHECK(input.rank == sd + 2, "Expected ", sd + 1, "D (unbatched) or ", sd + 2,
              "D (batched) input to ", name, ", but got input of size: ", input.sizes_string());
  CONVT_CHECK(weight.rank == sd + 2, "Expected ", sd + 2, "D weight for ", name,
              ", but got weight of size: ", weight.sizes_string());
  CONVT_CHECK(input.dtype == weight.dtype, "Input type (", dtype_name(input.dtype),
              ") and weight type (", dtype_name(weight.dtype), ") should be the same");
  if (bias)
    CONVT_CHECK(input.dtype == bias->dtype, "Input type (", dtype_name(input.dtype),
                ") and bias type (", dtype_name(bias->dtype), ") should be the same");
  auto dev = [](Device d) {
    return d.is_cuda() ? detail::str_cat("cuda:", d.index) : std::string("cpu");
  };
  CONVT_CHECK(input.device == weight.device && (!bias || bias->device == input.device),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              dev(input.device), " and ",
              dev(input.device != weight.device ? weight.device : bias->device), "!");

  Problem p;
  p.spatial_dims = sd;
  p.batch = input.sizes[0];
  p.in_channels = input.sizes[1];
  p.groups = params.groups;
  p.stride = params.stride;
  p.padding = params.padding;
  p.output_padding = params.output_padding;
  p.dilation = params.dilation;
  p.has_bias = bias != nullptr;
  p.dtype = input.dtype;
  for (int d = 0; d < sd; ++d) {
    p.input_size[d] = input.sizes[2 + d];
    p.kernel_size[d] = weight.sizes[2 + d];
  }
  check_params(p);

  const int64_t g = p.groups;
  CONVT_CHECK(weight.sizes[0] >= g, "Given groups=", g, ", expected weight to be at least ", g,
              " at dimension 0, but got weight of size ", weight.sizes_string(), " instead");
  CONVT_CHECK(weight.sizes[0] % g == 0, "Given groups=", g, ", expected weight to be divisible by ",
              g, " at dimension 0, but got weight of size ", weight.sizes_string(), " instead");
  CONVT_CHECK(input.sizes[1] == weight.sizes[0], "Given transposed=1, weight of size ",
              weight.sizes_string(), ", expected input", input.sizes_string(), " to have ",
              weight.sizes[0], " channels, but got ", input.sizes[1], " channels instead");
  p.out_channels = weight.sizes[1] * g;
  if (bias)
    CONVT_CHECK(bias->rank == 1 && bias->sizes[0] == p.out_channels, "Given transposed=1, weight of size ",
                weight.sizes_string(), ", expected bias to be 1-dimensional with ", p.out_channels,
                " elements, but got bias of size ", bias->sizes_string(), " instead");
  p.validate();
  return p;
}

std::string Problem::to_string() const {
  std::ostringstream os;
  const int sd = spatial_dims;
  os << op_name(sd) << " N=" << batch << " C=" << in_channels << "->" << out_channels
     << " g=" << groups << " in=[" << dims_string(input_size, sd) << "] k=["
     << dims_string(kernel_size, sd) << "] s=[" << dims_string(stride, sd) << "] p=["
     << dims_string(padding, sd) << "] op=[" << dims_string(output_padding, sd) << "] d=["
     << dims_string(dilation, sd) << "]" << (has_bias ? " bias " : " ") << dtype_name(dtype);
  return os.str();
}

}  // namespace convt
