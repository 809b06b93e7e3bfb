// Host side of the implicit-GEMM forward: eligibility, workspace, weight packing, launch.
#include "fprop_implicit_gemm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>

#include "convt/cuda/implicit_gemm_fprop_sm80.cuh"
#include "cuda_util.hpp"

namespace convt {
namespace cuda {

namespace {

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Opts `kernel` into `bytes` of dynamic shared memory on `device`, once per device.
// `done` must be a flag set owned by this one kernel.
template <typename Kernel>
void allow_smem(Kernel kernel, std::size_t bytes, int device, std::atomic<uint64_t>& done) {
  const uint64_t bit = uint64_t(1) << (device & 63);
  if (done.load(std::memory_order_relaxed) & bit) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)),
             "cudaFuncSetAttribute");
  done.fetch_or(bit, std::memory_order_relaxed);
}

// Largest element offset of a tensor, plus one.
int64_t span(const TensorRef& t) {
  int64_t s = 1;
  for (int d = 0; d < t.rank; ++d) s += (t.sizes[d] - 1) * t.strides[d];
  return s;
}

template <typename T, int BK, typename Index>
void launch(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
            const TensorRef& w, const TensorRef* b, const TensorRef& y, const ExecOptions& opt) {
  using namespace igemm;
  PackParams pk{};
  pk.w = w.data;
  pk.wp = opt.workspace;
  pk.cig = p.in_channels_per_group();
  pk.cog = p.out_channels_per_group();
  pk.groups = p.groups;
  pk.cig_pad = plan.cig_pad;
  pk.cog_pad = plan.cog_pad;
  for (int d = 0; d < 3; ++d) pk.k[d] = p.kernel_size[d];
  for (int d = 0; d < 5; ++d) pk.w_str[d] = w.strides[d];
  const int64_t packed = packed_weight_elems(pk);
  const int64_t pack_blocks = std::min<int64_t>((packed + 255) / 256, 65535);
  pack_weight_kernel<T><<<static_cast<unsigned>(pack_blocks), 256, 0, opt.stream>>>(pk);
  check_cuda(cudaGetLastError(), "pack_weight_kernel launch");

  FpropParams fp{};
  fp.x = x.data;
  fp.wp = opt.workspace;
  fp.bias = b ? b->data : nullptr;
  fp.b_str = b ? b->strides[0] : 0;
  fp.y = y.data;
  fp.N = p.batch;
  fp.cig = pk.cig;
  fp.cog = pk.cog;
  fp.groups = p.groups;
  fp.cig_pad = plan.cig_pad;
  fp.cog_pad = plan.cog_pad;
  const Dims out = p.output_sizes();
  int64_t positions = p.batch;  // positions of the largest phase (phase 0)
  for (int d = 0; d < 3; ++d) {
    fp.in[d] = p.input_size[d];
    fp.out[d] = out[d];
    fp.k[d] = p.kernel_size[d];
    fp.stride[d] = p.stride[d];
    fp.pad[d] = p.padding[d];
    fp.dil[d] = p.dilation[d];
    positions *= (out[d] + p.stride[d] - 1) / p.stride[d];
  }
  for (int d = 0; d < 5; ++d) {
    fp.x_str[d] = x.strides[d];
    fp.y_str[d] = y.strides[d];
  }
  fp.num_phases = p.stride[0] * p.stride[1] * p.stride[2];
  fp.co_tiles = plan.cog_pad / kBlockM;
  const int64_t ptiles = (positions + kBlockN - 1) / kBlockN;
  const dim3 grid(static_cast<unsigned>(ptiles * fp.num_phases),
                  static_cast<unsigned>(p.groups * fp.co_tiles));
  const std::size_t smem = SmemLayout<T, BK>::kBytes;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  static std::atomic<uint64_t> smem_set{0};  // one flag set per kernel instantiation
  allow_smem(fprop_kernel<T, BK, Index>, smem, device, smem_set);
  fprop_kernel<T, BK, Index><<<grid, kThreads, smem, opt.stream>>>(fp);
  check_cuda(cudaGetLastError(), "implicit-GEMM forward launch");
}

template <typename T>
void launch_bk(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
               const TensorRef& w, const TensorRef* b, const TensorRef& y,
               const ExecOptions& opt) {
  const bool small = std::max(span(x), span(y)) < (int64_t(1) << 31);
  if (plan.block_k == 32) {
    if (small)
      launch<T, 32, int>(plan, p, x, w, b, y, opt);
    else
      launch<T, 32, int64_t>(plan, p, x, w, b, y, opt);
  } else {
    if (small)
      launch<T, 16, int>(plan, p, x, w, b, y, opt);
    else
      launch<T, 16, int64_t>(plan, p, x, w, b, y, opt);
  }
}

}  // namespace

std::string ImplicitGemmFpropPlan::describe() const {
  if (!usable) return "not usable: " + reason;
  return detail::str_cat("implicit-GEMM mma.sync, tile ", igemm::kBlockM, "x", igemm::kBlockN,
                         "x", block_k, ", workspace ", workspace_bytes, " B");
}

ImplicitGemmFpropPlan plan_implicit_gemm_fprop(const Problem& p, const ExecOptions& opt) {
  ImplicitGemmFpropPlan plan;
  auto no = [&](const char* why) {
    plan.usable = false;
    plan.reason = why;
    return plan;
  };
  if (p.dtype == DType::kFloat64) return no("float64 has no tensor-core path");
  if (p.dtype == DType::kFloat32 && opt.math == MathMode::kStrictFP32)
    return no("strict float32 requested (TF32 not allowed)");
  // The kernel keeps spatial coordinates, strides and tap arithmetic in 32 bits.
  const Dims out = p.output_sizes();
  for (int d = 0; d < 3; ++d) {
    const int64_t limit = int64_t(1) << 30;
    if (p.input_size[d] >= limit || out[d] + p.stride[d] >= limit ||
        p.padding[d] + p.kernel_size[d] * p.dilation[d] >= limit ||
        p.stride[d] * p.dilation[d] >= limit)
      return no("spatial sizes or strides beyond 32-bit tap arithmetic");
  }
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  if (cig < 8) return no("fewer than 8 input channels per group");
  plan.block_k = cig > 16 ? 32 : 16;
  plan.cig_pad = round_up(cig, plan.block_k);
  plan.cog_pad = round_up(cog, igemm::kBlockM);
  if (p.groups * (plan.cog_pad / igemm::kBlockM) > 65535) return no("too many groups");
  int64_t positions = p.batch, phases = 1;
  for (int d = 0; d < 3; ++d) {
    positions *= (out[d] + p.stride[d] - 1) / p.stride[d];
    phases *= p.stride[d];
  }
  const int64_t ptiles = (positions + igemm::kBlockN - 1) / igemm::kBlockN;
  if (ptiles * phases > INT_MAX) return no("grid too large");
  const int64_t packed = p.groups * p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2] *
                         plan.cig_pad * plan.cog_pad;
  plan.workspace_bytes = static_cast<std::size_t>(packed) * dtype_size(p.dtype);
  plan.usable = true;
  return plan;
}

void run_implicit_gemm_fprop(const ImplicitGemmFpropPlan& plan, const Problem& p,
                             const TensorRef& x, const TensorRef& w, const TensorRef* b,
                             const TensorRef& y, const ExecOptions& opt) {
  CONVT_CHECK(opt.workspace != nullptr && opt.workspace_bytes >= plan.workspace_bytes,
              "convt: forward of ", p.to_string(), " needs ", plan.workspace_bytes,
              " bytes of workspace (see convt::workspace_size), but got ", opt.workspace_bytes);
  CONVT_CHECK(reinterpret_cast<uintptr_t>(opt.workspace) % 16 == 0,
              "convt: the workspace must be 16-byte aligned");
  switch (p.dtype) {
    case DType::kFloat32: launch_bk<float>(plan, p, x, w, b, y, opt); break;
    case DType::kFloat16: launch_bk<__half>(plan, p, x, w, b, y, opt); break;
    case DType::kBFloat16: launch_bk<__nv_bfloat16>(plan, p, x, w, b, y, opt); break;
    default: throw Error("convt: implicit-GEMM forward called for an unsupported dtype");
  }
}

}  // namespace cuda
}  // namespace convt
