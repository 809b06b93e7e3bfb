// GEMM and fold (convt/cuda/gemm_fold_sm80.cuh): the weight's packing, the pointwise GEMM of
// every tap on the mma.sync kernel into float products, and the fold into the output.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "convt/cuda/gemm_fold_sm80.cuh"
#include "convt/cuda/implicit_gemm_fprop_sm80.cuh"
#include "cuda_util.hpp"
#include "fprop_launch.hpp"

namespace convt {
namespace cuda {

namespace {

template <typename T, bool kSplit>
void pack_fold_weight(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& w,
                      const ExecOptions& opt) {
  if (!packing_runs(opt)) return;
  igemm::PackParams pk = mma_pack_params(plan, p);  // (cog_pad: the plan's fold_j_pad)
  pk.w = w.data;
  pk.wp = packed_weight_ptr(opt);
  for (int d = 0; d < 5; ++d) pk.w_str[d] = w.strides[d];
  const int64_t packed = pk.groups * pk.cig_pad * pk.cog_pad;
  const unsigned blocks = unsigned(std::min<int64_t>((packed + 255) / 256, 65535));
  const bool small = packed < (int64_t(1) << 31) && span(w) < (int64_t(1) << 31);
  if (small)
    fold::pack_fold_weight_kernel<T, kSplit, int><<<blocks, 256, 0, opt.stream>>>(pk);
  else
    fold::pack_fold_weight_kernel<T, kSplit, int64_t><<<blocks, 256, 0, opt.stream>>>(pk);
  check_cuda(cudaGetLastError(), "GEMM and fold: weight packing launch");
}

// Launches Kernel on `blocks` blocks of igemm::kThreads threads with `smem` bytes of
// dynamic shared memory (opted into once per device).
template <auto Kernel, typename Params>
void launch_fold_kernel(const Params& params, int64_t blocks, std::size_t smem, int device,
                        cudaStream_t stream, const char* what) {
  static std::atomic<uint64_t> smem_set{0};
  allow_smem(Kernel, smem, device, smem_set);
  Kernel<<<static_cast<unsigned>(blocks), igemm::kThreads, smem, stream>>>(params);
  check_cuda(cudaGetLastError(), what);
}

}  // namespace

namespace {

// A switch that is on unless set to 0 (unset or empty: on).
bool fold_switch_off(const char* v) { return v != nullptr && *v != '\0' && std::atoi(v) == 0; }

}  // namespace

bool fold_fused(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x) {
  const char* env = std::getenv("CONVT_GEMM_FOLD_FUSED");
  if (fold_switch_off(env) || !plan.fold || !fold_gemm_pipelined(p, x))
    return false;
  const bool one_d = p.input_size[0] == 1 && p.input_size[1] == 1 && p.kernel_size[0] == 1 &&
                     p.kernel_size[1] == 1 && p.output_size(0) == 1 && p.output_size(1) == 1;
  const int v = 16 / int(dtype_size(p.dtype));
  const int owned = fold::fused_owned_outputs(int(p.stride[2]), int(p.dilation[2]),
                                              int(p.kernel_size[2]), v);
  if (!one_d || plan.fold_j_pad != igemm::kBlockM || owned <= 0) return false;
  // (The grid: a block per run of owned outputs of each sample and group.)
  const double blocks =
      double(p.batch * p.groups) * double((p.output_size(2) + owned - 1) / owned);
  return blocks < double(INT_MAX);
}

bool fold_gemm_pipelined(const Problem& p, const TensorRef& x) {
  const char* env = std::getenv("CONVT_GEMM_FOLD_PIPE");
  if (fold_switch_off(env)) return false;
  const int64_t e = int64_t(dtype_size(p.dtype));
  if (e != 4 && e != 2) return false;
  const int64_t v = 16 / e;
  // Each channel's plane contiguous (dimensions of size 1 aside).
  int64_t dense = 1;
  for (int d = 4; d >= 2; --d) {
    if (x.sizes[d] != 1 && x.strides[d] != dense) return false;
    dense *= x.sizes[d];
  }
  const int64_t plane = dense;
  return plane % v == 0 && (x.sizes[1] == 1 || x.strides[1] % v == 0) &&
         (x.sizes[0] == 1 || x.strides[0] % v == 0) && x.strides[0] >= 0 &&
         x.strides[1] >= 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
}

template <typename T, bool kSplit>
void launch_gemm_fold(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                      const TensorRef& w, const TensorRef* b, const TensorRef& y,
                      const ExecOptions& opt) {
  CONVT_CHECK(plan.fold, "convt: GEMM and fold launched for another plan");
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  pack_fold_weight<T, kSplit>(plan, p, w, opt);
  float* prod = reinterpret_cast<float*>(static_cast<unsigned char*>(opt.workspace) +
                                         plan.fold_prod_offset);
  const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
  const int64_t plane = p.input_size[0] * p.input_size[1] * p.input_size[2];
  const int64_t cog = p.out_channels_per_group();

  if (fold_fused(plan, p, x)) {
    // The fold in the GEMM's epilogue (1-D, one row tile): no products in the workspace.
    fold::FusedParams fu{};
    fu.x = x.data;
    fu.wp = packed_weight_ptr(opt);
    fu.bias = b ? b->data : nullptr;
    fu.b_str = b ? b->strides[0] : 0;
    fu.y = y.data;
    fu.x_n = x.strides[0];
    fu.x_c = x.strides[1];
    fu.y_n = y.strides[0];
    fu.y_c = y.strides[1];
    fu.y_w = y.strides[4];
    fu.cig = p.in_channels_per_group();
    fu.cig_pad = plan.cig_pad;
    fu.cog = cog;
    fu.groups = p.groups;
    fu.L = int(p.input_size[2]);
    fu.OL = int(p.output_size(2));
    fu.k = int(p.kernel_size[2]);
    fu.stride = int(p.stride[2]);
    fu.pad = int(p.padding[2]);
    fu.dil = int(p.dilation[2]);
    fu.owned = fold::fused_owned_outputs(fu.stride, fu.dil, fu.k, 16 / int(sizeof(T)));
    fu.blocks = int((fu.OL + fu.owned - 1) / fu.owned);
    launch_fold_kernel<fold::fold_fused_1d_kernel<T, kSplit>>(
        fu, p.batch * fu.groups * fu.blocks, fold::FoldSmem<T>::kBytes, device, opt.stream,
        "GEMM and fold: fused 1-D launch");
    return;
  }
  const int64_t prod_elems = p.batch * p.out_channels * taps * plane;
  const int64_t ptiles = (p.batch * plane + igemm::kBlockN - 1) / igemm::kBlockN;
  if (fold_gemm_pipelined(p, x)) {
    fold::GemmParams gp{};
    gp.x = x.data;
    gp.wp = packed_weight_ptr(opt);
    gp.prod = prod;
    gp.P = p.batch * plane;
    gp.plane = plane;
    gp.x_n = x.strides[0];
    gp.x_c = x.strides[1];
    gp.cig = p.in_channels_per_group();
    gp.cig_pad = plan.cig_pad;
    gp.j = cog * taps;
    gp.j_pad = plan.fold_j_pad;
    gp.groups = p.groups;
    gp.co_tiles = plan.fold_j_pad / igemm::kBlockM;
    launch_fold_kernel<fold::fold_gemm_kernel<T, kSplit>>(
        gp, ptiles * gp.groups * gp.co_tiles, fold::FoldSmem<T>::kBytes, device, opt.stream,
        "GEMM and fold: pipelined GEMM launch");
  } else {
    // The GEMM: the pointwise problem of cog * taps output channels a group, into prod as a
    // contiguous (N, C_out * taps, D, H, W) tensor.
    igemm::FpropParams fp{};
    fp.x = x.data;
    fp.wp = packed_weight_ptr(opt);
    fp.bias = nullptr;
    fp.y = prod;
    fp.N = p.batch;
    fp.cig = p.in_channels_per_group();
    fp.cog = cog * taps;
    fp.groups = p.groups;
    fp.cig_pad = plan.cig_pad;
    fp.cog_pad = plan.fold_j_pad;
    for (int d = 0; d < 3; ++d) {
      fp.in[d] = p.input_size[d];
      fp.out[d] = p.input_size[d];
      fp.k[d] = 1;
      fp.stride[d] = 1;
      fp.pad[d] = 0;
      fp.dil[d] = 1;
    }
    for (int d = 0; d < 5; ++d) fp.x_str[d] = x.strides[d];
    fp.y_str[4] = 1;
    fp.y_str[3] = p.input_size[2];
    fp.y_str[2] = p.input_size[1] * p.input_size[2];
    fp.y_str[1] = plane;
    fp.y_str[0] = p.out_channels * taps * plane;
    fp.num_phases = 1;
    fp.co_tiles = plan.fold_j_pad / igemm::kBlockM;
    fp.co_inner = 1;
    const bool small = std::max(span(x), prod_elems) < (int64_t(1) << 31);
    const int64_t blocks = ptiles * fp.groups * fp.co_tiles;
    const std::size_t smem = igemm::SmemLayout<T, 32>::kBytes;
    if (small)
      launch_fold_kernel<igemm::fprop_kernel<T, 32, int, kSplit, float>>(
          fp, blocks, smem, device, opt.stream, "GEMM and fold: GEMM launch");
    else
      launch_fold_kernel<igemm::fprop_kernel<T, 32, int64_t, kSplit, float>>(
          fp, blocks, smem, device, opt.stream, "GEMM and fold: GEMM launch");
  }

  // The fold.
  fold::FoldParams fd{};
  fd.prod = prod;
  fd.bias = b ? b->data : nullptr;
  fd.b_str = b ? b->strides[0] : 0;
  fd.y = y.data;
  fd.N = p.batch;
  fd.C = p.out_channels;
  const Dims out = p.output_sizes();
  for (int d = 0; d < 3; ++d) {
    fd.in[d] = p.input_size[d];
    fd.out[d] = out[d];
    fd.k[d] = p.kernel_size[d];
    fd.stride[d] = p.stride[d];
    fd.pad[d] = p.padding[d];
    fd.dil[d] = p.dilation[d];
  }
  for (int d = 0; d < 5; ++d) fd.y_str[d] = y.strides[d];
  fd.qw = (out[2] + p.stride[2] - 1) / p.stride[2];
  const int64_t threads = p.batch * p.out_channels * out[0] * out[1] * p.stride[2] * fd.qw;
  const unsigned blocks = unsigned(std::min<int64_t>((threads + 255) / 256, int64_t(1) << 20));
  const bool small = std::max({threads, prod_elems, span(y)}) < (int64_t(1) << 31);
  if (small)
    fold::fold_kernel<T, int><<<blocks, 256, 0, opt.stream>>>(fd);
  else
    fold::fold_kernel<T, int64_t><<<blocks, 256, 0, opt.stream>>>(fd);
  check_cuda(cudaGetLastError(), "GEMM and fold: fold launch");
}

template void launch_gemm_fold<float, false>(const ImplicitGemmFpropPlan&, const Problem&,
                                             const TensorRef&, const TensorRef&,
                                             const TensorRef*, const TensorRef&,
                                             const ExecOptions&);
template void launch_gemm_fold<float, true>(const ImplicitGemmFpropPlan&, const Problem&,
                                            const TensorRef&, const TensorRef&, const TensorRef*,
                                            const TensorRef&, const ExecOptions&);
template void launch_gemm_fold<__half, false>(const ImplicitGemmFpropPlan&, const Problem&,
                                              const TensorRef&, const TensorRef&,
                                              const TensorRef*, const TensorRef&,
                                              const ExecOptions&);
template void launch_gemm_fold<__nv_bfloat16, false>(const ImplicitGemmFpropPlan&,
                                                     const Problem&, const TensorRef&,
                                                     const TensorRef&, const TensorRef*,
                                                     const TensorRef&, const ExecOptions&);

}  // namespace cuda
}  // namespace convt
