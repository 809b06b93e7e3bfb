// Definitions of the launches declared in fprop_launch.hpp, for the translation units
// that instantiate them (fprop_launch_*.cu): weight packing, launch parameters, grids,
// shared-memory opt-ins, and the choice among a kernel's compiled tiles.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "convt/cuda/implicit_gemm_fprop_halo_sm80.cuh"
#include "convt/cuda/implicit_gemm_fprop_sm80.cuh"
#include "convt/cuda/implicit_gemm_fprop_tma_sm90.cuh"
#include "convt/cuda/implicit_gemm_fprop_wgmma_sm90.cuh"
#include "cuda_util.hpp"
#include "fprop_launch.hpp"

namespace convt {
namespace cuda {
namespace fprop_detail {

// Packs the weight into the workspace or the weight cache (Wp[g][kd][kh][kw][ci][co], see
// the kernel header), unless the cache holds it.
template <typename T, bool kSplit>
void pack_weight(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& w,
                 const ExecOptions& opt) {
  using namespace igemm;
  if (!packing_runs(opt)) return;
  PackParams pk = mma_pack_params(plan, p);
  pk.w = w.data;
  pk.wp = packed_weight_ptr(opt);
  for (int d = 0; d < 5; ++d) pk.w_str[d] = w.strides[d];
  const int64_t packed = packed_weight_elems(pk);
  const int64_t pack_blocks = std::min<int64_t>((packed + 255) / 256, 65535);
  // (32-bit indices where the packed weight and every offset of w fit.)
  bool fits = packed < (int64_t(1) << 31);
  int64_t last = 0;
  const int64_t sizes[5] = {pk.groups * pk.cig, pk.cog, pk.k[0], pk.k[1], pk.k[2]};
  for (int d = 0; d < 5; ++d) {
    fits = fits && pk.w_str[d] >= 0;
    last += (sizes[d] - 1) * pk.w_str[d];
  }
  fits = fits && last < (int64_t(1) << 31);
  if (fits) {
    pack_weight_kernel<T, kSplit, int>
        <<<static_cast<unsigned>(pack_blocks), 256, 0, opt.stream>>>(pk);
  } else {
    pack_weight_kernel<T, kSplit><<<static_cast<unsigned>(pack_blocks), 256, 0, opt.stream>>>(pk);
  }
  check_cuda(cudaGetLastError(), "pack_weight_kernel launch");
}

inline igemm::FpropParams fprop_params(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                const TensorRef& x, const TensorRef* b, const TensorRef& y,
                                const ExecOptions& opt) {
  igemm::FpropParams fp{};
  fp.x = x.data;
  fp.wp = packed_weight_ptr(opt);
  fp.bias = b ? b->data : nullptr;
  fp.b_str = b ? b->strides[0] : 0;
  fp.y = y.data;
  fp.N = p.batch;
  fp.cig = p.in_channels_per_group();
  fp.cog = p.out_channels_per_group();
  fp.groups = p.groups;
  fp.cig_pad = plan.cig_pad;
  fp.cog_pad = plan.cog_pad;
  const Dims out = p.output_sizes();
  for (int d = 0; d < 3; ++d) {
    fp.in[d] = p.input_size[d];
    fp.out[d] = out[d];
    fp.k[d] = p.kernel_size[d];
    fp.stride[d] = p.stride[d];
    fp.pad[d] = p.padding[d];
    fp.dil[d] = p.dilation[d];
  }
  for (int d = 0; d < 5; ++d) {
    fp.x_str[d] = x.strides[d];
    fp.y_str[d] = y.strides[d];
  }
  fp.num_phases = p.stride[0] * p.stride[1] * p.stride[2];
  fp.co_tiles = plan.cog_pad / igemm::kBlockM;
  return fp;
}

template <typename T, int BK, typename Index, bool kSplit>
void launch_gather(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                   const TensorRef* b, const TensorRef& y, const ExecOptions& opt, int device) {
  using namespace igemm;
  const FpropParams fp = fprop_params(plan, p, x, b, y, opt);
  const Dims q = phase0_positions(p);
  const int64_t ptiles = (p.batch * q[0] * q[1] * q[2] + kBlockN - 1) / kBlockN;
  const dim3 grid(static_cast<unsigned>(ptiles * fp.num_phases),
                  static_cast<unsigned>(p.groups * fp.co_tiles));
  const std::size_t smem = SmemLayout<T, BK>::kBytes;
  static std::atomic<uint64_t> smem_set{0};  // one flag set per kernel instantiation
  allow_smem(fprop_kernel<T, BK, Index, kSplit>, smem, device, smem_set);
  fprop_kernel<T, BK, Index, kSplit><<<grid, kThreads, smem, opt.stream>>>(fp);
  check_cuda(cudaGetLastError(), "implicit-GEMM forward launch");
}

template <typename T, int BK, typename Index, bool kSplit>
void launch_halo(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                 const TensorRef* b, const TensorRef& y, const ExecOptions& opt, int device) {
  using namespace igemm;
  HaloParams hp{};
  hp.f = fprop_params(plan, p, x, b, y, opt);
  const Dims q = phase0_positions(p);
  hp.wt = plan.wt;
  hp.rows = plan.rows;
  hp.tw_max = plan.tw_max;
  hp.strip_rows_max = plan.strip_rows;
  hp.col_segs = static_cast<int>((q[2] + plan.wt - 1) / plan.wt);
  const int64_t rows = p.batch * q[0] * q[1];
  hp.row_groups = static_cast<int>((rows + plan.rows - 1) / plan.rows);
  const dim3 grid(static_cast<unsigned>(int64_t(hp.row_groups) * hp.col_segs * hp.f.num_phases),
                  static_cast<unsigned>(p.groups * hp.f.co_tiles));
  static std::atomic<uint64_t> smem_set{0};
  allow_smem(fprop_halo_kernel<T, BK, Index, kSplit>, kHaloSmemLimit, device, smem_set);
  fprop_halo_kernel<T, BK, Index, kSplit><<<grid, kThreads, plan.smem_bytes, opt.stream>>>(hp);
  check_cuda(cudaGetLastError(), "implicit-GEMM (halo) forward launch");
}

template <typename T, int BK, bool kSplit>
void launch_bk_index(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                     const TensorRef* b, const TensorRef& y, const ExecOptions& opt, int device) {
  const bool small = std::max(span(x), span(y)) < (int64_t(1) << 31);
  const bool halo = plan.kind == ImplicitGemmFpropPlan::Kind::kHalo;  // TF32 halo: BK = 16
  if constexpr (sizeof(T) == 4 && BK == 32) {
    if (small)
      launch_gather<T, BK, int, kSplit>(plan, p, x, b, y, opt, device);
    else
      launch_gather<T, BK, int64_t, kSplit>(plan, p, x, b, y, opt, device);
  } else if (small) {
    if (halo)
      launch_halo<T, BK, int, kSplit>(plan, p, x, b, y, opt, device);
    else
      launch_gather<T, BK, int, kSplit>(plan, p, x, b, y, opt, device);
  } else {
    if (halo)
      launch_halo<T, BK, int64_t, kSplit>(plan, p, x, b, y, opt, device);
    else
      launch_gather<T, BK, int64_t, kSplit>(plan, p, x, b, y, opt, device);
  }
}

template <typename T, bool kSplit>
void launch_bk(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
               const TensorRef& w, const TensorRef* b, const TensorRef& y,
               const ExecOptions& opt) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  pack_weight<T, kSplit>(plan, p, w, opt);
  if (plan.block_k == 32)
    launch_bk_index<T, 32, kSplit>(plan, p, x, b, y, opt, device);
  else
    launch_bk_index<T, 16, kSplit>(plan, p, x, b, y, opt, device);
}

// ---------------------------------------------------------------------------------------
// The TMA-fed kernel (convt/cuda/implicit_gemm_fprop_tma_sm90.cuh)
// ---------------------------------------------------------------------------------------

template <typename T, int BN, int BK, bool kSplit, bool kWgmma = false>
void launch_tma(const ImplicitGemmFpropPlan& plan, const Problem& p, const CUtensorMap& map,
                const TensorRef& w, const TensorRef* b, const TensorRef& y,
                const ExecOptions& opt, int device) {
  using namespace tma;
  CONVT_CHECK(plan.tma_bn == BN && plan.tma_bk == BK, "convt: TMA tile ", BN, "x", BK,
              " against the plan's ", plan.tma_bn, "x", plan.tma_bk);
  TmaPackParams pk = tma_pack_params(plan, p);
  pk.w = w.data;
  pk.wp = packed_weight_ptr(opt);
  for (int d = 0; d < 5; ++d) pk.w_str[d] = w.strides[d];
  if (packing_runs(opt)) {
    const int64_t packed = tma_packed_weight_elems(pk, BN, BK);
    // (One block per tile of BN x BK elements.)
    const int64_t pack_blocks =
        std::max<int64_t>(std::min<int64_t>(packed / (BN * BK), 65535), 1);
    pack_weight_tma_kernel<T, BN, BK, kSplit, kWgmma>
        <<<static_cast<unsigned>(pack_blocks), 256, 0, opt.stream>>>(pk);
    check_cuda(cudaGetLastError(), "pack_weight_tma_kernel launch");
  }

  TmaFpropParams fp{};
  fp.wp = pk.wp;
  fp.bias = b ? b->data : nullptr;
  fp.b_str = b ? b->strides[0] : 0;
  fp.y = y.data;
  for (int d = 0; d < 5; ++d) fp.y_str[d] = y.strides[d];
  fp.N = int(p.batch);
  fp.cig = pk.cig;
  fp.cog = pk.cog;
  fp.groups = pk.groups;
  fp.ci_chunks = pk.ci_chunks;
  fp.co_tiles = pk.co_tiles;
  const Dims out = p.output_sizes();
  int64_t phases = 1;
  for (int d = 0; d < 3; ++d) {
    fp.out[d] = int(out[d]);
    fp.k[d] = int(p.kernel_size[d]);
    fp.stride[d] = int(p.stride[d]);
    fp.pad[d] = int(p.padding[d]);
    fp.dil[d] = int(p.dilation[d]);
    phases *= p.stride[d];
  }
  set_w_owners(fp);
  phases = phases / fp.stride[2] * fp.w_phases;
  fp.num_phases = int(phases);
  fp.row_bytes = plan.tma_row_bytes;
  fp.w_taps = plan.tma_w_taps;
  const Dims q = phase0_positions(p);
  const int64_t segs = p.batch * q[0] * q[1] * ((q[2] + Seg<T>::kW - 1) / Seg<T>::kW);
  const int64_t tiles = (segs + Seg<T>::kCount - 1) / Seg<T>::kCount;
  const dim3 grid(static_cast<unsigned>(tiles * phases * fp.co_tiles),
                  static_cast<unsigned>(p.groups));
  // The kernel's stages (as many as fit in the budget, at most kMaxStages) and no more:
  // small stages leave room for more blocks per multiprocessor.
  using L = Smem<T, BN, BK>;
  fp.stages = L::launch_stages(fp.row_bytes, fp.w_taps);
  // CONVT_TMA_SMEM_KB=n: a stage budget of n KB (at most 104) where it leaves two stages,
  // for measuring pipeline depth against blocks per multiprocessor.
  static const int budget_kb = [] {
    const char* v = std::getenv("CONVT_TMA_SMEM_KB");
    return v ? std::atoi(v) : 0;
  }();
  if (budget_kb > 0) {
    const int s = L::stages(fp.row_bytes, fp.w_taps, std::min(budget_kb * 1024, L::kBudget));
    if (s >= 2) fp.stages = s;
  }
  // The stages, which the mma.sync epilogue reuses to stage its accumulators, + alignment.
  const std::size_t smem =
      std::max<std::size_t>(std::size_t(fp.stages) * L::stage_bytes(fp.row_bytes, fp.w_taps),
                            kWgmma ? 0 : L::kEpiBytes) + 128;
  static std::atomic<uint64_t> smem_set{0};
  allow_smem(fprop_tma_kernel<T, BN, BK, kSplit, kWgmma>, L::kBytes, device, smem_set);
  fprop_tma_kernel<T, BN, BK, kSplit, kWgmma><<<grid, kThreads, smem, opt.stream>>>(map, fp);
  check_cuda(cudaGetLastError(), "implicit-GEMM (TMA) forward launch");
}

template <typename T, bool kSplit>
void launch_tma_tile(const ImplicitGemmFpropPlan& plan, const Problem& p,
                     const CUtensorMap& map, const TensorRef& w, const TensorRef* b,
                     const TensorRef& y, const ExecOptions& opt, int device) {
  const int bn = plan.tma_bn, bk = plan.tma_bk;
  if constexpr (kSplit) {  // the planner gives split TF32 the 32-channel tile only
    if (bk == 16) launch_tma<T, 32, 16, true>(plan, p, map, w, b, y, opt, device);
    else launch_tma<T, 32, 32, true>(plan, p, map, w, b, y, opt, device);
  } else if (tma_wgmma_requested()) {
    if (bn == 32 && bk == 16) launch_tma<T, 32, 16, false, true>(plan, p, map, w, b, y, opt, device);
    else if (bn == 32) launch_tma<T, 32, 32, false, true>(plan, p, map, w, b, y, opt, device);
    else if (bk == 16) launch_tma<T, 64, 16, false, true>(plan, p, map, w, b, y, opt, device);
    else launch_tma<T, 64, 32, false, true>(plan, p, map, w, b, y, opt, device);
  } else {
    if (bn == 32 && bk == 16) launch_tma<T, 32, 16, false>(plan, p, map, w, b, y, opt, device);
    else if (bn == 32) launch_tma<T, 32, 32, false>(plan, p, map, w, b, y, opt, device);
    else if (bk == 16) launch_tma<T, 64, 16, false>(plan, p, map, w, b, y, opt, device);
    else launch_tma<T, 64, 32, false>(plan, p, map, w, b, y, opt, device);
  }
}

// ---------------------------------------------------------------------------------------
// The persistent wgmma kernel (convt/cuda/implicit_gemm_fprop_wgmma_sm90.cuh)
// ---------------------------------------------------------------------------------------

template <typename T, int N, bool kSplit, int NC = 0, bool kRaw = false, int FOLD = 1,
          int WPH = 1, bool kXp = false, int CG = 1, int MF = 1, int XW = 1>
void launch_wgmma_n(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                    cudaStream_t stream, int device) {
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel =
      wg::fprop_wgmma_kernel<T, N, kSplit, NC, kRaw, FOLD, WPH, kXp, CG, MF, XW>;
  constexpr int threads =
      wg::block_threads(kXp, wg::has_copier(kXp, kRaw, kSplit, NC, FOLD, WPH), CG, XW);
  allow_smem(kernel, CG == 2 ? wg::kCoopSmem : wg::kBlockSmem, device, smem_set);
  // Persistent: as many blocks as are resident at once, at most one per tile.
  static std::atomic<int> cached_sms{0};
  int sms = cached_sms.load(std::memory_order_relaxed);
  if (sms == 0) {
    check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
               "cudaDeviceGetAttribute");
    cached_sms.store(sms, std::memory_order_relaxed);
  }
  // (The occupancy query costs microseconds of host time: its answers are kept per
  // (device, shared memory bytes) for this kernel.)
  static std::mutex occ_mutex;
  static std::vector<std::pair<std::pair<int, std::size_t>, int>> occ_kept;
  auto occupancy = [&](std::size_t bytes) {
    const std::pair<int, std::size_t> key{device, bytes};
    {
      std::lock_guard<std::mutex> lock(occ_mutex);
      for (const auto& k : occ_kept)
        if (k.first == key) return k.second;
    }
    int n = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, bytes),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    std::lock_guard<std::mutex> lock(occ_mutex);
    if (occ_kept.size() < 64) occ_kept.push_back({key, n});
    return n;
  };
  int per_sm = occupancy(smem);
  wg::Params q = fp;
  // Of the plan's stages, the most (at least two) that let more blocks share a
  // multiprocessor than all of them do, where the kernel's registers allow more blocks than
  // its shared memory does (the planner sizes the stages for two blocks). Measured on an
  // H200: kb72 in bfloat16 0.30 -> 0.25 ms (more blocks per multiprocessor), every other suite
  // case unchanged; CONVT_WG_OCC=0 keeps the plan's stages. Each stage is stage_bytes of the
  // block's shared memory, and the stages come first (the transposed input's ring after
  // them, xp_area_offset), so a stage fewer is stage_bytes less (and so are the MMAs'
  // reads past the last stage, wgmma_shared_bytes). A stage's weight tiles are kept only
  // where the producer's record says it holds them (Params::w_reuse), whatever the stages.
  const char* occ_env = std::getenv("CONVT_WG_OCC");
  if ((occ_env == nullptr || occ_env[0] != '0') && q.stages > 2) {
    for (int st = q.stages - 1; st >= 2; --st) {
      const std::size_t bytes = smem - std::size_t(q.stages - st) * std::size_t(q.stage_bytes);
      const int n = occupancy(bytes);
      if (n > per_sm) {
        per_sm = n;
        smem = bytes;
        q.stages = st;
        break;
      }
    }
  }
  wg::set_producer_tables(q);
  const int64_t blocks = std::min<int64_t>(q.tiles, int64_t(sms) * std::max(per_sm, 1));
  kernel<<<static_cast<unsigned>(blocks), threads, smem, stream>>>(map, q);
  check_cuda(cudaGetLastError(), "implicit-GEMM (wgmma) forward launch");
}

}  // namespace fprop_detail

// The wgmma kernel's position-major tiles (256 positions x nc channels), compiled in
// translation units of their own (fprop_launch_*_pos.cu); split TF32 up to 32 channels.
template <typename T, bool kSplit>
void launch_wgmma_pos(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                      cudaStream_t stream, int device, int nc, int wph) {
  using fprop_detail::launch_wgmma_n;
  // (W phase pairs in registers: 8 to 32 channels, not split TF32.)
  if constexpr (!kSplit) {
    if (wph == 2) {
      switch (nc) {
        case 8: launch_wgmma_n<T, 256, false, 8, false, 1, 2>(fp, map, smem, stream, device); return;
        case 16: launch_wgmma_n<T, 256, false, 16, false, 1, 2>(fp, map, smem, stream, device); return;
        case 24: launch_wgmma_n<T, 256, false, 24, false, 1, 2>(fp, map, smem, stream, device); return;
        default:
          CONVT_CHECK(nc == 32, "convt: wgmma W phase pairs of ", nc, " channels");
          launch_wgmma_n<T, 256, false, 32, false, 1, 2>(fp, map, smem, stream, device); return;
      }
    }
  }
  CONVT_CHECK(wph == 1, "convt: wgmma W phase pairs in split TF32");
  switch (nc) {
    case 8: launch_wgmma_n<T, 256, kSplit, 8>(fp, map, smem, stream, device); break;
    case 16: launch_wgmma_n<T, 256, kSplit, 16>(fp, map, smem, stream, device); break;
    case 24: launch_wgmma_n<T, 256, kSplit, 24>(fp, map, smem, stream, device); break;
    case 32: launch_wgmma_n<T, 256, kSplit, 32>(fp, map, smem, stream, device); break;
    default:
      if constexpr (!kSplit) {
        CONVT_CHECK(nc == 48, "convt: wgmma position-major tile of ", nc, " channels");
        launch_wgmma_n<T, 256, false, 48>(fp, map, smem, stream, device);
      } else {
        CONVT_CHECK(false, "convt: split TF32 wgmma position-major tile of ", nc, " channels");
      }
  }
}

// The wgmma kernel's position-major tiles of NC channels with the W taps folded into N
// (NC x fold columns, fold 2, 3, 4, 5 or 7, wg::fold_positions of them per tile), compiled
// per (T, NC) in translation units of their own (fprop_launch_*_fold*.cu).
template <typename T, int NC>
void launch_wgmma_fold(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                       cudaStream_t stream, int device, int fold) {
  using fprop_detail::launch_wgmma_n;
  using wg::fold_positions;
  switch (fold) {
    case 2: launch_wgmma_n<T, fold_positions(NC, 2), false, NC, false, 2>(fp, map, smem, stream, device); break;
    case 3: launch_wgmma_n<T, fold_positions(NC, 3), false, NC, false, 3>(fp, map, smem, stream, device); break;
    case 4: launch_wgmma_n<T, fold_positions(NC, 4), false, NC, false, 4>(fp, map, smem, stream, device); break;
    case 5: launch_wgmma_n<T, fold_positions(NC, 5), false, NC, false, 5>(fp, map, smem, stream, device); break;
    default:
      CONVT_CHECK(fold == 7, "convt: wgmma tile with ", fold, " W taps folded");
      launch_wgmma_n<T, fold_positions(NC, 7), false, NC, false, 7>(fp, map, smem, stream, device);
  }
}

// The wgmma kernel with the input transposed in the kernel (16-bit types and TF32; channel-major
// tiles of n positions, or position-major tiles of 256 positions x nc channels, with W phase
// pairs where wph is 2), in translation units of their own (fprop_launch_*_xp*.cu).
template <typename T>
void launch_wgmma_xp(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                     cudaStream_t stream, int device, int n) {
  using fprop_detail::launch_wgmma_n;
  {
    switch (n) {
      case 128: launch_wgmma_n<T, 128, false, 0, false, 1, 1, true>(fp, map, smem, stream, device); break;
      case 160: launch_wgmma_n<T, 160, false, 0, false, 1, 1, true>(fp, map, smem, stream, device); break;
      case 192: launch_wgmma_n<T, 192, false, 0, false, 1, 1, true>(fp, map, smem, stream, device); break;
      case 208: launch_wgmma_n<T, 208, false, 0, false, 1, 1, true>(fp, map, smem, stream, device); break;
      case 224: launch_wgmma_n<T, 224, false, 0, false, 1, 1, true>(fp, map, smem, stream, device); break;
      default:
        CONVT_CHECK(n == 256, "convt: wgmma tile of ", n, " positions");
        launch_wgmma_n<T, 256, false, 0, false, 1, 1, true>(fp, map, smem, stream, device);
    }
  }
}
template <typename T>
void launch_wgmma_xp_pos(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                         cudaStream_t stream, int device, int nc, int wph) {
  using fprop_detail::launch_wgmma_n;
  // (W phase pairs are for 16-bit types only: the planner gives float none.)
  CONVT_CHECK(wph == 1 || sizeof(T) == 2, "convt: wgmma W phase pairs in float");
  if constexpr (sizeof(T) == 2) {
    if (wph == 2) {
      switch (nc) {
        case 8: launch_wgmma_n<T, 256, false, 8, false, 1, 2, true>(fp, map, smem, stream, device); return;
        case 16: launch_wgmma_n<T, 256, false, 16, false, 1, 2, true>(fp, map, smem, stream, device); return;
        case 24: launch_wgmma_n<T, 256, false, 24, false, 1, 2, true>(fp, map, smem, stream, device); return;
        default:
          CONVT_CHECK(nc == 32, "convt: wgmma W phase pairs of ", nc, " channels");
          launch_wgmma_n<T, 256, false, 32, false, 1, 2, true>(fp, map, smem, stream, device); return;
      }
    }
  }
  switch (nc) {
    case 8: launch_wgmma_n<T, 256, false, 8, false, 1, 1, true>(fp, map, smem, stream, device); break;
    case 16: launch_wgmma_n<T, 256, false, 16, false, 1, 1, true>(fp, map, smem, stream, device); break;
    case 24: launch_wgmma_n<T, 256, false, 24, false, 1, 1, true>(fp, map, smem, stream, device); break;
    case 32: launch_wgmma_n<T, 256, false, 32, false, 1, 1, true>(fp, map, smem, stream, device); break;
    default:
      CONVT_CHECK(nc == 48, "convt: wgmma position-major tile of ", nc, " channels");
      launch_wgmma_n<T, 256, false, 48, false, 1, 1, true>(fp, map, smem, stream, device);
  }
}

// The wgmma kernel with two consumer warpgroups (channel-major tiles of 128 channels x n
// positions, n 128, 192 or 256; wg::Params::coop_w_half), in translation units of their own
// (fprop_launch_*_coop.cu).
template <typename T>
void launch_wgmma_coop(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                       cudaStream_t stream, int device, int n) {
  using fprop_detail::launch_wgmma_n;
  switch (n) {
    case 128: launch_wgmma_n<T, 128, false, 0, false, 1, 1, false, 2>(fp, map, smem, stream, device); break;
    case 192: launch_wgmma_n<T, 192, false, 0, false, 1, 1, false, 2>(fp, map, smem, stream, device); break;
    default:
      CONVT_CHECK(n == 256, "convt: wgmma tile of two warpgroups of ", n, " positions");
      launch_wgmma_n<T, 256, false, 0, false, 1, 1, false, 2>(fp, map, smem, stream, device);
  }
}

// The wgmma kernel with two consumer warpgroups over the input transposed in the kernel
// (channel-major tiles of 128 channels x n positions, n 128, 192 or 256; the transposer
// warp fills each stage's box once for both), in translation units of their own
// (fprop_launch_*_xp_coop.cu). Where the planner takes it: xp_coop_mode (fprop_implicit_gemm.cu).
template <typename T>
void launch_wgmma_xp_coop(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                          cudaStream_t stream, int device, int n) {
  using fprop_detail::launch_wgmma_n;
  switch (n) {
    case 128: launch_wgmma_n<T, 128, false, 0, false, 1, 1, true, 2>(fp, map, smem, stream, device); break;
    case 192: launch_wgmma_n<T, 192, false, 0, false, 1, 1, true, 2>(fp, map, smem, stream, device); break;
    default:
      CONVT_CHECK(n == 256, "convt: wgmma tile of two warpgroups of ", n,
                  " positions over the input transposed in the kernel");
      launch_wgmma_n<T, 256, false, 0, false, 1, 1, true, 2>(fp, map, smem, stream, device);
  }
}

// Whether the kernels of two transposer warps are built for T (see
// CONVT_INSTANTIATE_WGMMA_XP_W2 below).
#ifdef CONVT_NO_WG_XP_W2
template <typename T>
constexpr bool kXpW2Built = false;
#elif defined(CONVT_NO_WG_XP_W2_16)
template <typename T>
constexpr bool kXpW2Built = sizeof(T) == 4;
#else
template <typename T>
constexpr bool kXpW2Built = true;
#endif

// The input transposed in the kernel by two transposer warps (ImplicitGemmFpropPlan::
// wg_xp_warps = 2; CONVT_WG_XP_WARPS=1 asks for one): two consumer
// warpgroups (coop: n = 128, 192 or 256 positions) or position-major tiles of n = 16, 24 or
// 32 channels (256 positions), compiled per T in translation units of their own
// (fprop_launch_*_xp_w2.cu).
template <typename T>
void launch_wgmma_xp_w2(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                        cudaStream_t stream, int device, bool coop, int n) {
  using fprop_detail::launch_wgmma_n;
  if (coop) {
    switch (n) {
      case 128: launch_wgmma_n<T, 128, false, 0, false, 1, 1, true, 2, 1, 2>(fp, map, smem, stream, device); return;
      case 192: launch_wgmma_n<T, 192, false, 0, false, 1, 1, true, 2, 1, 2>(fp, map, smem, stream, device); return;
      default:
        CONVT_CHECK(n == 256, "convt: wgmma tile of two warpgroups of ", n,
                    " positions with two transposer warps");
        launch_wgmma_n<T, 256, false, 0, false, 1, 1, true, 2, 1, 2>(fp, map, smem, stream, device); return;
    }
  }
  switch (n) {
    case 16: launch_wgmma_n<T, 256, false, 16, false, 1, 1, true, 1, 1, 2>(fp, map, smem, stream, device); return;
    case 24: launch_wgmma_n<T, 256, false, 24, false, 1, 1, true, 1, 1, 2>(fp, map, smem, stream, device); return;
    default:
      CONVT_CHECK(n == 32, "convt: wgmma position-major tile of ", n,
                  " channels with two transposer warps");
      launch_wgmma_n<T, 256, false, 32, false, 1, 1, true, 1, 1, 2>(fp, map, smem, stream, device);
  }
}

// The wgmma kernel's channel-major tiles with MF W taps stacked in M (64 rows of MF taps x
// 64 / MF channels, n positions), compiled per (T, MF) in translation units of their own
// (fprop_launch_*_mfold*.cu).
template <typename T, int MF>
void launch_wgmma_mfold(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                        cudaStream_t stream, int device, int n) {
  using fprop_detail::launch_wgmma_n;
  switch (n) {
    case 128: launch_wgmma_n<T, 128, false, 0, false, 1, 1, false, 1, MF>(fp, map, smem, stream, device); break;
    case 160: launch_wgmma_n<T, 160, false, 0, false, 1, 1, false, 1, MF>(fp, map, smem, stream, device); break;
    case 192: launch_wgmma_n<T, 192, false, 0, false, 1, 1, false, 1, MF>(fp, map, smem, stream, device); break;
    case 208: launch_wgmma_n<T, 208, false, 0, false, 1, 1, false, 1, MF>(fp, map, smem, stream, device); break;
    case 224: launch_wgmma_n<T, 224, false, 0, false, 1, 1, false, 1, MF>(fp, map, smem, stream, device); break;
    default:
      CONVT_CHECK(n == 256, "convt: wgmma tile of ", n, " positions");
      launch_wgmma_n<T, 256, false, 0, false, 1, 1, false, 1, MF>(fp, map, smem, stream, device);
  }
}

// The wgmma kernel's W phase pairs on channel-major tiles (64 channels x 128 positions of
// each of the two W phases, their accumulators side by side), beside the tiles of two
// consumer warpgroups in their translation units (fprop_launch_*_coop.cu).
template <typename T>
void launch_wgmma_cm_pairs(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                           cudaStream_t stream, int device, int n) {
  CONVT_CHECK(n == 128, "convt: wgmma W phase pairs on channel-major tiles of ", n, " positions");
  fprop_detail::launch_wgmma_n<T, 128, false, 0, false, 1, 2>(fp, map, smem, stream, device);
}

// The wgmma kernel reading the input in place (float32 as TF32, position-major tiles of 256
// positions x 8..32 channels, or 128 x 48 or 64), in a translation unit of its own
// (fprop_launch_tf32_raw.cu).
void launch_wgmma_raw(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                      cudaStream_t stream, int device, int nc);

// The plan's wgmma launch: packs the weight and copies the input into the workspace (see
// wgmma_workspace), then runs the kernel on the tensor map `encode` makes of the copy.
// p: the problem as the kernel runs it (wgmma_problem: W stride 1 where the plan inserts
// zeros along W).
template <typename T, bool kSplit>
void launch_fprop_wgmma(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                        const TensorRef& w, const TensorRef* b, const TensorRef& y,
                        const ExecOptions& opt, int device, const WgmmaMapFn& encode) {
  using namespace fprop_detail;
  unsigned char* ws = static_cast<unsigned char*>(opt.workspace);
  void* wp = packed_weight_ptr(opt);
  void* xt = ws + plan.wg_xt_offset;
  int* counter = reinterpret_cast<int*>(ws + plan.wg_counter_offset);
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();

  // The tile counter, (split TF32, groups merged) the non-finite flag and the copier warps'
  // unit counter, zero before the kernels; where the plan copies with the copier warps, the
  // chunks' counts after them (wg_chunk_done_offset, 256 bytes on) in the same memset: each
  // call into the driver is a small layer's host time.
  const std::size_t zeroed =
      plan.wg_copy_fused ? plan.wg_chunk_done_offset - plan.wg_counter_offset + plan.wg_chunk_done_bytes
                         : 4 * sizeof(int);
  check_cuda(cudaMemsetAsync(counter, 0, zeroed, opt.stream), "cudaMemsetAsync");
  wg::PackParams pk = wgmma_pack_params(plan, p, kSplit);
  pk.w = w.data;
  pk.wp = wp;
  for (int d = 0; d < 5; ++d) pk.w_str[d] = w.strides[d];
  pk.nonfinite = counter + 1;
  const int64_t packed = wg::packed_weight_elems(pk);
  // (Kept in a weight cache, the packing's flag for an infinite or NaN weight stays with it,
  // 16 bytes after the packed tiles, and each call copies it into the workspace's flag.)
  int* cache_flag =
      opt.weight_cache != nullptr && pk.flag_nonfinite
          ? reinterpret_cast<int*>(static_cast<unsigned char*>(opt.weight_cache) +
                                   wgmma_cache_flag_offset(wgmma_packed_bytes(pk, sizeof(T))))
          : nullptr;
  if (packing_runs(opt)) {
    if (cache_flag != nullptr) {
      check_cuda(cudaMemsetAsync(cache_flag, 0, sizeof(int), opt.stream), "cudaMemsetAsync");
      pk.nonfinite = cache_flag;
    }
    // (One block per tile of cw x bk elements.)
    const int64_t pack_blocks =
        std::max<int64_t>(std::min<int64_t>(packed / (int64_t(pk.cw) * pk.bk), 65535), 1);
    wg::pack_weight_wgmma_kernel<T>
        <<<static_cast<unsigned>(pack_blocks), 256, 0, opt.stream>>>(pk);
    check_cuda(cudaGetLastError(), "pack_weight_wgmma_kernel launch");
  }
  if (cache_flag != nullptr)
    check_cuda(cudaMemcpyAsync(counter + 1, cache_flag, sizeof(int), cudaMemcpyDeviceToDevice,
                               opt.stream),
               "cudaMemcpyAsync");

  alignas(64) CUtensorMap map;
  int cl_chunks = 0;
  bool xp = false;  // the input transposed in the kernel
  bool fused = false;  // the input copied by the kernel's copier warps
  if (plan.wg_raw) {
    // The kernel reads x itself where a tensor map can (wgmma_input_in_place); else x is
    // first copied into the workspace as a contiguous tensor with W padded to 16 bytes.
    if (wgmma_input_in_place(p, x)) {
      encode(&map, x.data, x.strides.data());
    } else {
      constexpr int kc = wg::Kc<T>::value;
      wg::PadParams pp{};
      pp.x = x.data;
      pp.xp = xt;
      for (int d = 0; d < 5; ++d) pp.x_str[d] = x.strides[d];
      pp.n = p.batch;
      pp.c = p.in_channels;
      for (int d = 0; d < 3; ++d) pp.in[d] = int(p.input_size[d]);
      pp.wp = int((p.input_size[2] + kc - 1) / kc * kc);
      const int64_t total = pp.n * pp.c * pp.in[0] * pp.in[1] * pp.in[2];
      const int64_t blocks = std::min<int64_t>((total + 255) / 256, int64_t(1) << 20);
      wg::pad_input_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, opt.stream>>>(pp);
      check_cuda(cudaGetLastError(), "pad_input_kernel launch");
      const int64_t plane = int64_t(pp.wp) * pp.in[1];
      const int64_t str[5] = {pp.c * pp.in[0] * plane, pp.in[0] * plane, plane, pp.wp, 1};
      encode(&map, xt, str);
    }
  } else if (make_channels_last_tensor_map(&map, plan, p, x)) {
    // A channels_last 16-bit input: read in place, no copy.
    cl_chunks = int(p.groups * plan.wg_cblocks);
  } else if (!kSplit && make_xp_tensor_map(&map, plan, p, x)) {
    // An NC... input: raw boxes of x, transposed in the kernel, no copy.
    xp = true;
  } else {
    wg::TransposeParams tp{};
    tp.x = x.data;
    tp.xt = xt;
    for (int d = 0; d < 5; ++d) tp.x_str[d] = x.strides[d];
    tp.batch = int(p.batch);
    tp.groups = int(p.groups);
    tp.cig = int(cig);
    tp.cblocks = plan.wg_cblocks;
    tp.bk = plan.wg_bk;
    // With zeros inserted along W (plan.wg_wup > 1), p is the problem the kernel runs: the
    // input's W there is (W - 1) * wup + 1 and its W stride 1.
    for (int d = 0; d < 3; ++d) tp.in[d] = int(p.input_size[d]);
    tp.wup = plan.wg_wup;
    tp.wout = tp.in[2];
    tp.in[2] = (tp.wout - 1) / tp.wup + 1;
    // Rows of the input contiguous (W stride 1, H stride W) and no zeros inserted: the copy
    // runs over each (H, W) plane as one row of H x W positions, the same layout of xt, so
    // that narrow rows (4 x 4 planes) still fill its tiles.
    if (tp.wup == 1 && tp.x_str[4] == 1 && (tp.in[1] == 1 || tp.x_str[3] == tp.in[2])) {
      tp.in[2] *= tp.in[1];
      tp.wout = tp.in[2];
      tp.in[1] = 1;
      tp.x_str[3] = 0;  // (unused: one row)
    }
    tp.split = kSplit ? 1 : 0;
    tp.flag_nonfinite = kSplit || plan.wg_gmerge > 1 ? 1 : 0;
    tp.nonfinite = counter + 1;
    tp.small_off = int64_t(tp.batch) * tp.groups * tp.cblocks * (tp.bk / wg::Kc<T>::value) *
                   tp.in[0] * tp.in[1] * tp.wout;
    // The copy made by the forward kernel's copier warps while its tiles run
    // (Params::fused), where the plan asks for it and x's layout allows.
    // (The chunks' counts were zeroed with the counter above: wgmma_input_copied_in_kernel
    // holds only where plan.wg_copy_fused does.)
    fused = !kSplit && wgmma_input_copied_in_kernel(plan, p, x);
    if (!fused && tp.x_str[4] == 1) {
      // Rows of the input contiguous: the tiled copy, with 16-byte loads where every row
      // starts 16-byte aligned and holds whole 16-byte chunks.
      constexpr int kc = wg::Kc<T>::value;
      bool vec = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && tp.in[2] % kc == 0;
      for (int d = 0; d < 4; ++d) vec = vec && tp.x_str[d] % kc == 0;
      const int64_t tiles = int64_t(tp.batch) * tp.groups * tp.cblocks * tp.in[0] * tp.in[1] *
                            ((tp.in[2] + wg::kTransposeW - 1) / wg::kTransposeW);
      const unsigned tblocks = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t(1) << 20));
      if (vec) {
        wg::transpose_input_tiled_kernel<T, true><<<tblocks, 256, 0, opt.stream>>>(tp);
      } else {
        wg::transpose_input_tiled_kernel<T, false><<<tblocks, 256, 0, opt.stream>>>(tp);
      }
    } else if (!fused) {
      const int64_t vecs = int64_t(tp.batch) * tp.groups * tp.cblocks *
                           (tp.bk / wg::Kc<T>::value) * tp.in[0] * tp.in[1] * tp.wout;
      const int64_t tblocks = std::min<int64_t>((vecs + 255) / 256, int64_t(1) << 20);
      wg::transpose_input_kernel<T><<<static_cast<unsigned>(tblocks), 256, 0, opt.stream>>>(tp);
    }
    if (!fused) check_cuda(cudaGetLastError(), "transpose_input_kernel launch");
    encode(&map, xt, nullptr);
  }

  wg::Params fp{};
  fp.wp = wp;
  fp.bias = b ? b->data : nullptr;
  fp.b_str = b ? b->strides[0] : 0;
  fp.y = y.data;
  for (int d = 0; d < 5; ++d) fp.y_str[d] = y.strides[d];
  fp.counter = counter;
  if (fused) {
    fp.fused = 1;
    fp.x = x.data;
    for (int d = 0; d < 5; ++d) fp.x_str[d] = x.strides[d];
    fp.xt = xt;
    fp.copy_counter = counter + 2;
    fp.chunk_done = reinterpret_cast<int*>(ws + plan.wg_chunk_done_offset);
    fp.copy_chunk = plan.wg_copy_chunk;
    const int64_t plane = p.input_size[0] * p.input_size[1] * p.input_size[2];
    fp.copy_chunks = int((plane + plan.wg_copy_chunk - 1) / plan.wg_copy_chunk);
    // (16-bit types: eight positions per 16-byte load where every such run is aligned, else
    // two per 4-byte load where every such pair is.)
    const int per_load = wgmma_copier_positions_per_load(plan, p, x);
    fp.copy_pairs = per_load == 8 ? 2 : per_load == 2 ? 1 : 0;
  }
  for (int d = 0; d < 3; ++d) fp.in[d] = int(p.input_size[d]);
  fp.batch = int(p.batch);
  fp.groups = int(p.groups);
  fp.cig = int(cig);
  fp.cog = int(cog);
  // (Two consumer warpgroups: tiles of 128 channels, two of the packing's 64; sharing the
  // weight tiles (wg_coop_n), tiles of the packing's 64 channels and twice the rows, each
  // warpgroup with a box of its own.)
  const bool coop_m = plan.wg_coop && !plan.wg_coop_n;
  fp.cw = coop_m ? 2 * plan.wg_cw : plan.wg_cw;
  fp.co_tiles = coop_m ? pk.co_tiles / 2 : pk.co_tiles;
  fp.coop_w_half = coop_m ? plan.wg_w_half : 0;
  fp.coop_n = plan.wg_coop_n ? 1 : 0;
  fp.coop_rows = plan.wg_coop_n ? plan.wg_rows : 0;
  fp.coop_box_off = plan.wg_coop_n ? plan.wg_coop_box_off : 0;
  fp.cblocks = plan.wg_cblocks;
  fp.bk = plan.wg_bk;
  const Dims out = p.output_sizes();
  const Dims q = phase0_positions(p);
  fp.phases = 1;
  for (int d = 0; d < 3; ++d) {
    fp.out[d] = int(out[d]);
    fp.k[d] = pk.k[d];
    fp.stride[d] = pk.stride[d];
    fp.pad[d] = pk.pad[d];
    fp.dil[d] = pk.dil[d];
    fp.tmax[d] = plan.wg_tmax[d];
    fp.q[d] = int(q[d]);
    // (W taps stacked in M: the packing's W tiles of mfold taps.)
    if (d == 2 && plan.wg_mfold > 1) fp.tmax[d] = pk.tmax[d];
    fp.phases *= fp.stride[d];
  }
  // (W phases merged: the tiles count the D and H phases, each runs every W phase.)
  if (plan.wg_wmerge || plan.wg_wpairs) {
    fp.phases /= fp.stride[2];
    fp.wm = 1;
    fp.wm_wo = plan.wg_wv * fp.stride[2];
  }
  fp.epi_bytes = std::max(plan.wg_epi_bytes, wg::kEpiBytes);
  fp.cl_chunks = cl_chunks;
  fp.wbox = plan.wg_wbox;
  fp.hbox = plan.wg_hbox;
  if (plan.wg_scatter) {
    fp.sc = 1;
    fp.sc_s = int(p.stride[2]);
    fp.sc_clo = plan.wg_sc_clo;
    fp.sc_e0 = plan.wg_sc_clo * fp.sc_s - int(p.padding[2]);
    fp.sc_dil = int(p.dilation[2]);
    fp.sc_wo = plan.wg_wv * fp.sc_s;
    fp.sc_pitch = (plan.wg_rows * fp.sc_wo + 31) / 32 * 32 + 4;
  }
  fp.rows = plan.wg_rows * (plan.wg_coop_n ? 2 : 1);
  fp.wv = plan.wg_wv;
  fp.hb = plan.wg_hb;
  fp.tsplit = plan.wg_tsplit ? 1 : 0;
  fp.stack = plan.wg_stack;
  fp.stack_n = plan.wg_stack_n ? 1 : 0;
  fp.n_tiles = int(plan.wg_stack_n ? (p.batch + plan.wg_stack - 1) / plan.wg_stack : p.batch);
  fp.d_tiles = int(plan.wg_stack_n ? q[0] : (q[0] + plan.wg_stack - 1) / plan.wg_stack);
  fp.row_groups = int((q[1] + fp.rows - 1) / fp.rows);
  fp.col_segs = int((q[2] + plan.wg_wv - 1) / plan.wg_wv);
  fp.tiles = int(plan.wg_tiles * plan.wg_splits);
  fp.splits = plan.wg_splits;
  if (plan.wg_splits > 1) {
    // (Split K: the parts' counts per (tile, warpgroup), zero before the kernel.)
    const int64_t groups = plan.wg_coop ? 2 : 1;
    fp.split_done = reinterpret_cast<int*>(ws + plan.wg_split_done_offset);
    fp.partials = reinterpret_cast<float*>(ws + plan.wg_partials_offset);
    check_cuda(cudaMemsetAsync(fp.split_done, 0, std::size_t(4 * plan.wg_tiles * groups),
                               opt.stream),
               "cudaMemsetAsync");
  }
  fp.stages = plan.wg_stages;
  fp.stage_bytes = plan.wg_stage_bytes;
  fp.box_bytes = plan.wg_box_bytes;
  fp.tile_bytes = pk.cw * plan.wg_bk * int(sizeof(T));
  fp.row_bytes = plan.wg_bk * int(sizeof(T));
  fp.w_off = plan.wg_w_off;
  fp.xs_off = plan.wg_xs_off;
  fp.ws_off = plan.wg_ws_off;
  fp.split_ngc = fp.batch * fp.groups * fp.cblocks;
  fp.w_small = packed * int64_t(sizeof(T));
  fp.xp_chunks = wg::xp_chunks(plan.wg_wbox);
  fp.xp_pieces = plan.wg_xp_pieces;
  fp.xp_rows = plan.wg_xp_rows;
  fp.xp_piece_bytes = plan.wg_xp_piece_bytes;
  fp.xp_early = plan.wg_xp && plan.wg_xp_early ? 1 : 0;
  {
    // K steps keep the weight tiles their stage still holds (Params::w_reuse): where the
    // planner made them resident; CONVT_WG_WREUSE=0 or =1 turns the check off or on
    // everywhere (tests), =2 is the measuring probe that never copies a stage's weight tiles
    // twice (wrong results: timing only).
    const char* wr = std::getenv("CONVT_WG_WREUSE");
    fp.w_reuse = wr != nullptr && (wr[0] == '0' || wr[0] == '1' || wr[0] == '2')
                     ? wr[0] - '0'
                     : int(plan.wg_w_resident);
    // CONVT_WG_BOXPROBE=1: the measuring probe that never copies a stage's box twice (wrong
    // results: timing only; Params::box_probe).
    const char* bp = std::getenv("CONVT_WG_BOXPROBE");
    fp.box_probe = bp != nullptr && bp[0] == '1' ? 1 : 0;
    // CONVT_WG_STORE4=1: channel-major tiles' epilogue stores four outputs a lane
    // (Params::store4; opt-in until measured).
    const char* s4 = std::getenv("CONVT_WG_STORE4");
    fp.store4 = s4 != nullptr && s4[0] == '1' ? 1 : 0;
  }
  const std::size_t smem = wgmma_shared_bytes(plan);
  if (xp) {
    if constexpr (!kSplit) {
      CONVT_CHECK(plan.wg_fold == 1, "convt: the input transposed in the kernel with W taps folded");
      if (plan.wg_xp_warps == 2) {
        if constexpr (kXpW2Built<T>) {
          CONVT_CHECK(!plan.wg_wpairs && !plan.wg_coop_n && (plan.wg_coop || plan.wg_n == 256),
                      "convt: two transposer warps for this tile");
          launch_wgmma_xp_w2<T>(fp, map, smem, opt.stream, device, plan.wg_coop,
                                plan.wg_coop ? plan.wg_n : plan.wg_nc);
        } else {
          CONVT_CHECK(false, "convt: built without the wgmma kernels of two transposer warps");
        }
      } else if (plan.wg_nc > 0) {
        CONVT_CHECK(plan.wg_n == 256, "convt: wgmma position-major tile of ", plan.wg_n,
                    " positions");
        launch_wgmma_xp_pos<T>(fp, map, smem, opt.stream, device, plan.wg_nc,
                               plan.wg_wpairs ? 2 : 1);
      } else if (plan.wg_coop) {
#ifdef CONVT_NO_WG_XP_COOP
        CONVT_CHECK(false, "convt: built without the wgmma tiles of two warpgroups over the "
                           "input transposed in the kernel");
#else
        CONVT_CHECK(!plan.wg_coop_n, "convt: the input transposed in the kernel for two "
                                     "warpgroups sharing the weight tiles");
        launch_wgmma_xp_coop<T>(fp, map, smem, opt.stream, device, plan.wg_n);
#endif
      } else {
        launch_wgmma_xp<T>(fp, map, smem, opt.stream, device, plan.wg_n);
      }
    }
  } else if (plan.wg_raw) {
    if constexpr (std::is_same<T, float>::value && !kSplit) {
      launch_wgmma_raw(fp, map, smem, opt.stream, device, plan.wg_nc);
    } else {
      CONVT_CHECK(false, "convt: the wgmma kernel reads the input in place in TF32 only");
    }
  } else if (plan.wg_fold > 1) {
    if constexpr (!kSplit) {
      CONVT_CHECK(plan.wg_n == wg::fold_positions(plan.wg_nc, plan.wg_fold),
                  "convt: wgmma tile with W taps folded of ", plan.wg_n, " positions");
      switch (plan.wg_nc) {
        case 8: launch_wgmma_fold<T, 8>(fp, map, smem, opt.stream, device, plan.wg_fold); break;
        case 16: launch_wgmma_fold<T, 16>(fp, map, smem, opt.stream, device, plan.wg_fold); break;
        case 24: launch_wgmma_fold<T, 24>(fp, map, smem, opt.stream, device, plan.wg_fold); break;
        default:
          CONVT_CHECK(plan.wg_nc == 32, "convt: wgmma tile with W taps folded of ", plan.wg_nc,
                      " channels");
          launch_wgmma_fold<T, 32>(fp, map, smem, opt.stream, device, plan.wg_fold);
      }
    } else {
      CONVT_CHECK(false, "convt: split TF32 has no wgmma tile with W taps folded");
    }
  } else if (plan.wg_nc > 0) {
    CONVT_CHECK(plan.wg_n == 256, "convt: wgmma position-major tile of ", plan.wg_n,
                " positions");
    launch_wgmma_pos<T, kSplit>(fp, map, smem, opt.stream, device, plan.wg_nc,
                                plan.wg_wpairs ? 2 : 1);
  } else if (plan.wg_wpairs) {
    if constexpr (!kSplit) {
      launch_wgmma_cm_pairs<T>(fp, map, smem, opt.stream, device, plan.wg_n);
    } else {
      CONVT_CHECK(false, "convt: split TF32 has no wgmma W phase pairs");
    }
  } else if (plan.wg_coop) {
    if constexpr (!kSplit) {
      launch_wgmma_coop<T>(fp, map, smem, opt.stream, device, plan.wg_n);
    } else {
      CONVT_CHECK(false, "convt: split TF32 has no wgmma tile of two warpgroups");
    }
  } else if (plan.wg_mfold > 1) {
#ifdef CONVT_NO_WG_MFOLD
    CONVT_CHECK(false, "convt: built without the wgmma tiles of W taps stacked in M");
#else
    if constexpr (!kSplit) {
      if (plan.wg_mfold == 2) {
        launch_wgmma_mfold<T, 2>(fp, map, smem, opt.stream, device, plan.wg_n);
      } else {
        CONVT_CHECK(plan.wg_mfold == 4, "convt: wgmma tile of ", plan.wg_mfold,
                    " W taps stacked in M");
        launch_wgmma_mfold<T, 4>(fp, map, smem, opt.stream, device, plan.wg_n);
      }
    } else {
      CONVT_CHECK(false, "convt: split TF32 has no wgmma tile of W taps stacked in M");
    }
#endif
  } else if constexpr (kSplit) {
    // (The planner gives split TF32 128 positions: not built for more.)
    CONVT_CHECK(plan.wg_n == 128, "convt: split TF32 wgmma tile of ", plan.wg_n, " positions");
    launch_wgmma_n<T, 128, true>(fp, map, smem, opt.stream, device);
  } else {
    switch (plan.wg_n) {
      case 128: launch_wgmma_n<T, 128, false>(fp, map, smem, opt.stream, device); break;
      case 160: launch_wgmma_n<T, 160, false>(fp, map, smem, opt.stream, device); break;
      case 192: launch_wgmma_n<T, 192, false>(fp, map, smem, opt.stream, device); break;
      case 208: launch_wgmma_n<T, 208, false>(fp, map, smem, opt.stream, device); break;
      case 224: launch_wgmma_n<T, 224, false>(fp, map, smem, opt.stream, device); break;
      default: launch_wgmma_n<T, 256, false>(fp, map, smem, opt.stream, device); break;
    }
  }
}


template <typename T, bool kSplit>
void launch_fprop_tma(const ImplicitGemmFpropPlan& plan, const Problem& p, const CUtensorMap& map,
                      const TensorRef& w, const TensorRef* b, const TensorRef& y,
                      const ExecOptions& opt, int device) {
  fprop_detail::launch_tma_tile<T, kSplit>(plan, p, map, w, b, y, opt, device);
}

template <typename T, bool kSplit>
void launch_fprop_mma(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                      const TensorRef& w, const TensorRef* b, const TensorRef& y,
                      const ExecOptions& opt) {
  fprop_detail::launch_bk<T, kSplit>(plan, p, x, w, b, y, opt);
}

}  // namespace cuda
}  // namespace convt

// The explicit instantiations of one translation unit (fprop_launch_*.cu), in namespace
// convt::cuda.
#define CONVT_INSTANTIATE_FPROP_LAUNCHES(T, kSplit)                                        \
  template void launch_fprop_tma<T, kSplit>(const ImplicitGemmFpropPlan&, const Problem&,  \
                                            const CUtensorMap&, const TensorRef&,          \
                                            const TensorRef*, const TensorRef&,            \
                                            const ExecOptions&, int);                      \
  template void launch_fprop_mma<T, kSplit>(const ImplicitGemmFpropPlan&, const Problem&,  \
                                            const TensorRef&, const TensorRef&,            \
                                            const TensorRef*, const TensorRef&,            \
                                            const ExecOptions&)

// The wgmma kernel's launch for T (float as TF32 or split TF32, __half, __nv_bfloat16), in
// one unit each, and its position-major tiles in another (the first unit declares them
// extern).
#define CONVT_INSTANTIATE_WGMMA_LAUNCH(T, kSplit)                                          \
  extern template void launch_wgmma_pos<T, kSplit>(const wg::Params&, const CUtensorMap&,  \
                                                   std::size_t, cudaStream_t, int, int, int); \
  CONVT_EXTERN_WGMMA_FOLD(T, 8);                                                           \
  CONVT_EXTERN_WGMMA_FOLD(T, 16);                                                          \
  CONVT_EXTERN_WGMMA_FOLD(T, 24);                                                          \
  CONVT_EXTERN_WGMMA_FOLD(T, 32);                                                          \
  CONVT_EXTERN_WGMMA_XP(T);                                                                \
  CONVT_EXTERN_WGMMA_XP_COOP(T);                                                           \
  CONVT_EXTERN_WGMMA_XP_W2(T);                                                             \
  CONVT_EXTERN_WGMMA_COOP(T);                                                              \
  CONVT_EXTERN_WGMMA_MFOLD(T, 2);                                                          \
  CONVT_EXTERN_WGMMA_MFOLD(T, 4);                                                          \
  template void launch_fprop_wgmma<T, kSplit>(const ImplicitGemmFpropPlan&, const Problem&,\
                                      const TensorRef&, const TensorRef&, const TensorRef*,  \
                                      const TensorRef&, const ExecOptions&, int,             \
                                      const WgmmaMapFn&)
// The kernels transposing the input (fprop_launch_*_xp*.cu; split TF32 declares them too,
// never launched).
#define CONVT_EXTERN_WGMMA_XP(T)                                                            \
  extern template void launch_wgmma_xp<T>(const wg::Params&, const CUtensorMap&,           \
                                          std::size_t, cudaStream_t, int, int);            \
  extern template void launch_wgmma_xp_pos<T>(const wg::Params&, const CUtensorMap&,       \
                                              std::size_t, cudaStream_t, int, int, int)
// The tiles of two consumer warpgroups (fprop_launch_*_coop.cu; split TF32 declares them
// too, never launched).
// (With them the channel-major W phase pairs.)
#define CONVT_EXTERN_WGMMA_COOP(T)                                                          \
  extern template void launch_wgmma_coop<T>(const wg::Params&, const CUtensorMap&,         \
                                            std::size_t, cudaStream_t, int, int);          \
  extern template void launch_wgmma_cm_pairs<T>(const wg::Params&, const CUtensorMap&,     \
                                                std::size_t, cudaStream_t, int, int)
#define CONVT_INSTANTIATE_WGMMA_COOP(T)                                                     \
  template void launch_wgmma_coop<T>(const wg::Params&, const CUtensorMap&, std::size_t,     \
                                     cudaStream_t, int, int);                              \
  template void launch_wgmma_cm_pairs<T>(const wg::Params&, const CUtensorMap&, std::size_t, \
                                         cudaStream_t, int, int)
// The tiles of MF W taps stacked in M, one unit per (T, MF) (fprop_launch_*_mfold*.cu);
// none where CONVT_NO_WG_MFOLD is defined (the exported KernelBench files: an opt-in form
// whose kernels would lengthen their one-unit build; the planner then never takes it).
#ifdef CONVT_NO_WG_MFOLD
#define CONVT_EXTERN_WGMMA_MFOLD(T, MF) static_assert(true, "")
#define CONVT_INSTANTIATE_WGMMA_MFOLD(T, MF) static_assert(true, "")
#else
#define CONVT_EXTERN_WGMMA_MFOLD(T, MF)                                                     \
  extern template void launch_wgmma_mfold<T, MF>(const wg::Params&, const CUtensorMap&,    \
                                                 std::size_t, cudaStream_t, int, int)
#define CONVT_INSTANTIATE_WGMMA_MFOLD(T, MF)                                                \
  template void launch_wgmma_mfold<T, MF>(const wg::Params&, const CUtensorMap&,           \
                                          std::size_t, cudaStream_t, int, int)
#endif
// The tiles of two warpgroups over the input transposed in the kernel, one unit per T
// (fprop_launch_*_xp_coop.cu); none where CONVT_NO_WG_XP_COOP is defined (a build that
// leaves them out; the planner then never takes the form).
#ifdef CONVT_NO_WG_XP_COOP
#define CONVT_EXTERN_WGMMA_XP_COOP(T) static_assert(true, "")
#define CONVT_INSTANTIATE_WGMMA_XP_COOP(T) static_assert(true, "")
#else
#define CONVT_EXTERN_WGMMA_XP_COOP(T)                                                       \
  extern template void launch_wgmma_xp_coop<T>(const wg::Params&, const CUtensorMap&,      \
                                               std::size_t, cudaStream_t, int, int)
#define CONVT_INSTANTIATE_WGMMA_XP_COOP(T)                                                  \
  template void launch_wgmma_xp_coop<T>(const wg::Params&, const CUtensorMap&, std::size_t,  \
                                        cudaStream_t, int, int)
#endif
// The tiles transposed by two transposer warps, one unit per T (fprop_launch_*_xp_w2.cu);
// none where CONVT_NO_WG_XP_W2 is defined, float's only where CONVT_NO_WG_XP_W2_16 is (the
// exported KernelBench files, built as one unit: the 16-bit ones gain least; kXpW2Built);
// the planner then takes one transposer warp in their place (xp_warps_wanted).
#ifdef CONVT_NO_WG_XP_W2
#define CONVT_EXTERN_WGMMA_XP_W2(T) static_assert(true, "")
#define CONVT_INSTANTIATE_WGMMA_XP_W2(T) static_assert(true, "")
#else
#define CONVT_EXTERN_WGMMA_XP_W2(T)                                                         \
  extern template void launch_wgmma_xp_w2<T>(const wg::Params&, const CUtensorMap&,        \
                                             std::size_t, cudaStream_t, int, bool, int)
#define CONVT_INSTANTIATE_WGMMA_XP_W2(T)                                                    \
  template void launch_wgmma_xp_w2<T>(const wg::Params&, const CUtensorMap&, std::size_t,    \
                                      cudaStream_t, int, bool, int)
#endif
// The folded tiles of NC channels, one unit per (T, NC) (fprop_launch_*_fold*.cu).
#define CONVT_EXTERN_WGMMA_FOLD(T, NC)                                                      \
  extern template void launch_wgmma_fold<T, NC>(const wg::Params&, const CUtensorMap&,     \
                                                std::size_t, cudaStream_t, int, int)
#define CONVT_INSTANTIATE_WGMMA_FOLD(T, NC)                                                 \
  template void launch_wgmma_fold<T, NC>(const wg::Params&, const CUtensorMap&,            \
                                         std::size_t, cudaStream_t, int, int)
#define CONVT_INSTANTIATE_WGMMA_XP(T)                                                       \
  template void launch_wgmma_xp<T>(const wg::Params&, const CUtensorMap&, std::size_t,       \
                                   cudaStream_t, int, int)
#define CONVT_INSTANTIATE_WGMMA_XP_POS(T)                                                   \
  template void launch_wgmma_xp_pos<T>(const wg::Params&, const CUtensorMap&, std::size_t,   \
                                       cudaStream_t, int, int, int)
#define CONVT_INSTANTIATE_WGMMA_POS(T, kSplit)                                              \
  template void launch_wgmma_pos<T, kSplit>(const wg::Params&, const CUtensorMap&,         \
                                            std::size_t, cudaStream_t, int, int, int)
