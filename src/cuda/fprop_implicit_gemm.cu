// Host side of the implicit-GEMM forward: eligibility, workspace, weight packing, launch.
#include "fprop_implicit_gemm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "convt/cuda/direct_shapes.hpp"
#include "convt/cuda/gemm_fold_sm80.cuh"
#include "convt/cuda/implicit_gemm_fprop_halo_sm80.cuh"
#include "convt/cuda/implicit_gemm_fprop_sm80.cuh"
#include "convt/cuda/implicit_gemm_fprop_tma_sm90.cuh"
#include "convt/cuda/implicit_gemm_fprop_wgmma_sm90.cuh"
#include "cuda_util.hpp"
#include "fprop_launch.hpp"
#include "log.hpp"

// The process environment (POSIX), read for its CONVT_* entries (convt_env_fingerprint).
extern char** environ;

namespace convt {
namespace cuda {

// Output positions of the largest phase (phase 0) along each dimension.
Dims phase0_positions(const Problem& p) {
  const Dims out = p.output_sizes();
  Dims q{};
  for (int d = 0; d < 3; ++d) q[d] = (out[d] + p.stride[d] - 1) / p.stride[d];
  return q;
}

// CONVT_TMA_MMA=wgmma runs the TMA kernel on wgmma instead of mma.sync, split TF32
// (strict float32) excepted (read at every call, so that tests can switch it).
bool tma_wgmma_requested() {
  const char* v = std::getenv("CONVT_TMA_MMA");
  return v != nullptr && std::string(v) == "wgmma";
}

// The W phases of the TMA kernel's grid, into its parameters (see tma_w_phases).
// By default every W phase runs, tap-less ones writing their bias by W phase.
// CONVT_TMA_W_OWNERS=1 (read at every call, so that tests can switch it) runs only the W
// phases with taps, each writing the tap-less outputs after its own, and writes rows whose
// D or H phase has no tap whole from one block: measured slower on an H200 (kb77, kb79 and
// kb81 about 2x, docs/kernels.md), so it is off unless asked for.
bool tma_w_owners_requested() {
  const char* v = std::getenv("CONVT_TMA_W_OWNERS");
  return v != nullptr && std::string(v) == "1";
}

void set_w_owners(tma::TmaFpropParams& fp) {
  const bool on = tma_w_owners_requested();
  const TmaWPhases w = on ? tma_w_phases(fp.stride[2], fp.pad[2], fp.dil[2], fp.k[2], fp.out[2])
                          : TmaWPhases{false, fp.stride[2], {}, {}};
  fp.w_map = w.map ? 1 : 0;
  fp.bias_rows = on ? 1 : 0;
  fp.w_phases = w.phases;
  for (int i = 0; i < kTmaMaxWPhases; ++i) {
    fp.w_owner[i] = w.owner[i];
    fp.w_owned[i] = w.owned[i];
  }
}

namespace {

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// ---------------------------------------------------------------------------------------
// The TMA-fed kernel (convt/cuda/implicit_gemm_fprop_tma_sm90.cuh)
// ---------------------------------------------------------------------------------------

// cuTensorMapEncodeTiled, looked up in the driver through the runtime (so that convt does
// not link libcuda itself). Null where the driver has none.
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled_fn() {
  static const EncodeTiledFn fn = []() -> EncodeTiledFn {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
#else
    const cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
    if (err != cudaSuccess || q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// Whether `device` runs the TMA kernel: compute capability 9.0 or newer, and this build
// holds code for it (the kernel body exists only for sm_90+). Cached per device.
bool tma_supported(int device) {
  static std::atomic<int> state[64] = {};  // 0 unknown, 1 yes, 2 no
  std::atomic<int>* cached = device >= 0 && device < 64 ? &state[device] : nullptr;
  int v = cached ? cached->load(std::memory_order_relaxed) : 0;
  if (v == 0) {
    int major = 0;
    bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
                  cudaSuccess &&
              major >= 9;
    ok = ok && tma_kernel_binary_version() >= 90;
    ok = ok && encode_tiled_fn() != nullptr;
    (void)cudaGetLastError();
    v = ok ? 1 : 2;
    if (cached) cached->store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

// The tensor map of x for the TMA kernel: dims (W, H, D, channels of a group, batch x
// groups), box (one segment row of 144 bytes, 1, 1, BK, 1), no swizzle, zeros out of
// bounds. Returns false (and why) when x's layout does not suit one.
bool make_x_tensor_map(CUtensorMap* map, const Problem& p, const TensorRef& x, int bk,
                       int row_bytes, std::string* why) {
  auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  const int64_t e = dtype_size(p.dtype);
  const int64_t cig = p.in_channels_per_group();
  if (reinterpret_cast<uintptr_t>(x.data) % 16 != 0) return no("input not 16-byte aligned");
  if (x.sizes[4] > 1 && x.strides[4] != 1) return no("input W not contiguous");
  cuuint64_t dims[5] = {cuuint64_t(x.sizes[4]), cuuint64_t(x.sizes[3]), cuuint64_t(x.sizes[2]),
                        cuuint64_t(cig), 0};
  int64_t strides[4] = {x.strides[3], x.strides[2], x.strides[1], 0};
  if (p.groups == 1) {
    dims[4] = cuuint64_t(x.sizes[0]);
    strides[3] = x.strides[0];
  } else if (x.sizes[0] == 1 || x.strides[0] == p.groups * cig * x.strides[1]) {
    dims[4] = cuuint64_t(x.sizes[0] * p.groups);
    strides[3] = cig * x.strides[1];
  } else {
    return no("input batch stride does not join batch and groups");
  }
  // Dimensions of size one: any stride reads the same element; give them the extent of
  // the dimensions inside, which keeps the strides ordered.
  int64_t inner = int64_t(dims[0]) * e;
  for (int d = 0; d < 4; ++d) {
    int64_t bytes = strides[d] * e;
    if (dims[d + 1] == 1) bytes = (inner + 15) / 16 * 16;
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (int64_t(1) << 40))
      return no("input strides not multiples of 16 bytes");
    strides[d] = bytes;
    inner = bytes * int64_t(dims[d + 1]);
  }
  for (int d = 0; d < 5; ++d)
    if (dims[d] == 0 || dims[d] > (cuuint64_t(1) << 32)) return no("input dimension out of range");
  const EncodeTiledFn encode = encode_tiled_fn();
  if (encode == nullptr) return no("the driver has no cuTensorMapEncodeTiled");
  const cuuint64_t gstrides[4] = {cuuint64_t(strides[0]), cuuint64_t(strides[1]),
                                  cuuint64_t(strides[2]), cuuint64_t(strides[3])};
  const cuuint32_t box[5] = {cuuint32_t(row_bytes / e), 1, 1, cuuint32_t(bk), 1};
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  if (p.dtype == DType::kFloat16) type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (p.dtype == DType::kBFloat16) type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult r = encode(map, type, 5, const_cast<void*>(x.data), dims, gstrides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return no("cuTensorMapEncodeTiled rejected the input layout");
  return true;
}

// Stages of the TMA kernel's pipeline for a tile, box row and W taps (see tma::Smem).
template <typename T>
int tma_stages_t(int bn, int bk, int row_bytes, int w_taps) {
  if (bn == 32 && bk == 16) return tma::Smem<T, 32, 16>::stages(row_bytes, w_taps);
  if (bn == 32) return tma::Smem<T, 32, 32>::stages(row_bytes, w_taps);
  if (bk == 16) return tma::Smem<T, 64, 16>::stages(row_bytes, w_taps);
  return tma::Smem<T, 64, 32>::stages(row_bytes, w_taps);
}

}  // namespace

static_assert(kTmaMaxStages == tma::kMaxStages, "fprop_implicit_gemm.hpp names the kernel's limit");
static_assert(kTmaMaxWPhases == tma::kMaxWPhases, "fprop_implicit_gemm.hpp names the kernel's limit");

void tma_wgmma_b_element(int i, int bn, int elem_bytes, int* c, int* n) {
  tma::wgmma_b_element(i, bn, elem_bytes, *c, *n);
}

TmaWPhases tma_w_phases(int stride, int pad, int dil, int k, int out) {
  TmaWPhases w;
  w.phases = stride;
  if (stride > kTmaMaxWPhases) return w;
  int owners = 0;
  for (int rw = 0; rw < stride; ++rw)
    if (igemm::phase_taps(rw, stride, pad, dil, k).count > 0) w.owner[owners++] = rw;
  if (owners == 0 || owners == stride || w.owner[0] >= out) {
    for (int i = 0; i < kTmaMaxWPhases; ++i) w.owner[i] = 0;
    return w;
  }
  for (int i = 0; i < owners; ++i)
    w.owned[i] = (w.owner[(i + 1) % owners] - w.owner[i] - 1 + stride) % stride;
  w.map = true;
  w.phases = owners;
  return w;
}

int tma_pipeline_stages(DType dt, int bn, int bk, int row_bytes, int w_taps) {
  if (dt == DType::kFloat32) return tma_stages_t<float>(bn, bk, row_bytes, w_taps);
  return tma_stages_t<__half>(bn, bk, row_bytes, w_taps);  // same sizes for bfloat16
}

namespace {

// Stages a launch of the TMA kernel uses (tma::Smem::launch_stages).
template <typename T>
int tma_launch_stages_t(int bn, int bk, int row_bytes, int w_taps) {
  if (bn == 32 && bk == 16) return tma::Smem<T, 32, 16>::launch_stages(row_bytes, w_taps);
  if (bn == 32) return tma::Smem<T, 32, 32>::launch_stages(row_bytes, w_taps);
  if (bk == 16) return tma::Smem<T, 64, 16>::launch_stages(row_bytes, w_taps);
  return tma::Smem<T, 64, 32>::launch_stages(row_bytes, w_taps);
}

int tma_launch_stages(const ImplicitGemmFpropPlan& plan, DType dt) {
  if (dt == DType::kFloat32)
    return tma_launch_stages_t<float>(plan.tma_bn, plan.tma_bk, plan.tma_row_bytes,
                                      plan.tma_w_taps);
  return tma_launch_stages_t<__half>(plan.tma_bn, plan.tma_bk, plan.tma_row_bytes,
                                     plan.tma_w_taps);
}

}  // namespace

std::string ImplicitGemmFpropPlan::describe() const {
  if (!usable) return "not usable: " + reason;
  if (fold)
    return detail::str_cat("GEMM and fold: mma.sync", split ? " 3xTF32" : "",
                           " GEMM of every tap, tile ", igemm::kBlockM, " (channel, tap) x ",
                           igemm::kBlockN, " input positions x ", block_k, ", ",
                           fold_j_pad / igemm::kBlockM,
                           " row tiles a group, float products ", fold_prod_bytes,
                           " B, then the fold; workspace ", workspace_bytes, " B");
  if (wg_only)
    return wg_gmerge > 1
               ? detail::str_cat("implicit-GEMM wgmma", split ? " 3xTF32" : "",
                                 " only, groups merged ", wg_gmerge,
                                 " at a time (the direct kernel without wgmma)")
               : detail::str_cat("implicit-GEMM wgmma", split ? " 3xTF32" : "",
                                 " only, input channels padded to ", wg_bk,
                                 " (the direct kernel without wgmma)");
  const char* mma = split ? "mma.sync 3xTF32" : "mma.sync";
  if (kind == Kind::kHalo)
    return detail::str_cat("implicit-GEMM ", mma, " with W-tap input strips, tile ",
                           igemm::kBlockM, " channels x ", rows, "x", wt, " positions x ",
                           block_k, ", ", tw_max, " W taps, ", strip_rows, " strip rows, smem ",
                           smem_bytes, " B, workspace ", workspace_bytes, " B");
  return detail::str_cat("implicit-GEMM ", mma, ", tile ", igemm::kBlockM, "x", igemm::kBlockN,
                         "x", block_k, ", workspace ", workspace_bytes, " B");
}

namespace {

// CONVT_FORWARD_KERNEL=direct|implicit_gemm|implicit_gemm_halo|implicit_gemm_tma asks for one forward kernel
// where the options leave the choice to the dispatcher (for benchmarking and debugging).
ForwardKernel forward_kernel_from_env() {
  static const ForwardKernel kernel = [] {
    const char* v = std::getenv("CONVT_FORWARD_KERNEL");
    if (v == nullptr) return ForwardKernel::kAuto;
    const std::string s(v);
    if (s == "direct") return ForwardKernel::kDirect;
    if (s == "implicit_gemm") return ForwardKernel::kImplicitGemm;
    if (s == "implicit_gemm_halo") return ForwardKernel::kImplicitGemmHalo;
    if (s == "implicit_gemm_tma") return ForwardKernel::kImplicitGemmTma;
    if (s == "implicit_gemm_wgmma") return ForwardKernel::kImplicitGemmWgmma;
    if (s == "gemm_fold") return ForwardKernel::kGemmFold;
    return ForwardKernel::kAuto;
  }();
  return kernel;
}

// CONVT_TMA_TILE=BNxBK (32x16, 32x32, 64x16 or 64x32) asks the TMA kernel for one tile
// where it leaves two pipeline stages and fits the workspace (split TF32: 32-channel tiles
// only; a 32-channel K step only with more than 16 input channels), for measuring
// the tile heuristic (scripts/tma_tile_sweep.py). {0, 0}: none asked for.
std::array<int, 2> tma_tile_from_env() {
  static const std::array<int, 2> tile = [] {
    const char* v = std::getenv("CONVT_TMA_TILE");
    const std::string s = v ? v : "";
    for (const std::array<int, 2> t : {std::array<int, 2>{32, 16}, std::array<int, 2>{32, 32},
                                       std::array<int, 2>{64, 16}, std::array<int, 2>{64, 32}})
      if (s == std::to_string(t[0]) + "x" + std::to_string(t[1])) return t;
    return std::array<int, 2>{0, 0};
  }();
  return tile;
}

}  // namespace

// CONVT_WG_HB=h / CONVT_WG_BK=c: H taps and channels per K step of the wgmma kernel where
// they fit (for measuring its planner); 0: the planner's choice.
static int wg_env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : 0;
}
static int wg_env_int_or(const char* name, int unset) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : unset;
}

// Two consumer warpgroups over the input transposed in the kernel (ImplicitGemmFpropPlan::
// wg_coop with wg_xp): the transposer warp fills each stage's box once for the tile's 128
// channels, where one warpgroup's tiles of 64 channels transpose every input element once
// per 64-channel tile and the copy's two-warpgroup tiles pay for a copy kernel first (kb64
// in float32 on an H200: the copy kernel 1.23 of 2.85 ms, the one-warpgroup transposition
// 2.87 ms; docs/kernels.md, "Where the time goes on an H200"). Taken where the transposition
// would otherwise run on one warpgroup or the copy on two, the two warpgroups can run with
// it at the K step the plan has, and that step holds at least kXpCoopMinStepBytes of each
// position (channels x H taps x W taps x the element's bytes): a narrower step (bfloat16's
// 16 channels x one tap) leaves each K step's barrier rounds and transposition latency
// over too few MMAs, and a channel block narrowed to make room for the ring loses more than
// the copy costs. Measured on an H200 (GPU time; docs/kernels.md, "Two warpgroups over the
// input transposed in the kernel"): kb64 1.39x float32 / 1.37x bfloat16; over the 51 fuzzed
// layers whose plan the form changes when taken everywhere it can run
// (scripts/suites/xp_coop_fuzz.json), everywhere 1.035x / 1.053x, 0.69x-0.75x where the
// channel block was narrowed and 0.83x-0.99x at 32-byte steps. CONVT_WG_XP_COOP=0 never
// takes it, =1 wherever it can run (narrowing the channel block for the ring where needed).
// Not in a build without its kernels (CONVT_NO_WG_XP_COOP: see fprop_launch.cuh).
constexpr int64_t kXpCoopMinStepBytes = 64;
// The most multiply-adds per input element (output channels per group x taps) at which two
// warpgroups take the transposition (one warpgroup's bound is 768; see the transposition's
// rules in plan_wgmma_tile_capped). Two warpgroups transpose each input element once per
// 128 channels where one transposes it once per 64, so the copy they save may pay up to a
// higher bound. Measured on an H200 with two transposer warps (GPU time; docs/kernels.md,
// "Two warpgroups over the input transposed in the kernel"), over the 54 fuzzed layers the
// bound moves up to 4096 (scripts/suites/xp_coop_macs_fuzz.json): in float32 1.044x at
// 1536, 1.050x at 2304, 1.049x at 4096 (one layer 0.95x), 1.021x at 2304 on the 41 held-out
// layers (xp_coop_macs_heldout.json; none slower by more than 3%); in bfloat16 1.015x,
// 1.003x, 0.987x, with layers down to 0.59x. So 2304 in float32, 768 in 16-bit types.
// CONVT_WG_XP_COOP_MACS=M sets it for every type.
static double xp_coop_macs(int64_t elem_bytes) {
  const int v = wg_env_int("CONVT_WG_XP_COOP_MACS");
  return v > 0 ? double(v) : elem_bytes == 4 ? 2304.0 : 768.0;
}
// Two transposer warps (ImplicitGemmFpropPlan::wg_xp_warps), each transposing every other
// piece of the ring, wherever the input is transposed in the kernel for two consumer
// warpgroups or position-major tiles of 16-32 channels without W phase pairs (the kernels
// built with them, fprop_launch_*_xp_w2.cu). In float the transposer moves as many bytes per
// K step as in 16-bit types with twice the instructions per byte, and one warp bounds the
// K step where each input element is transposed more than once per tile ("The input
// transposed in the kernel" in docs/kernels.md). Measured on an H200 against one warp
// ("Two transposer warps" there): kb64 float32 2.05 -> 1.89 ms, the 51 layers of
// scripts/suites/xp_coop_fuzz.json 1.039x (float32) / 1.023x (bfloat16) with none slower
// by more than 3%, the transposition forced on 80 position-major layers 1.080x / 1.015x.
// CONVT_WG_XP_WARPS=1 asks for one. Never in a build without those kernels
// (CONVT_NO_WG_XP_W2; CONVT_NO_WG_XP_W2_16: without the 16-bit ones, as the exported
// KernelBench files are built).
static int xp_warps_wanted(int64_t elem_bytes) {
#ifdef CONVT_NO_WG_XP_W2
  (void)elem_bytes;
  return 1;
#else
#ifdef CONVT_NO_WG_XP_W2_16
  if (elem_bytes == 2) return 1;
#else
  (void)elem_bytes;
#endif
  return wg_env_int("CONVT_WG_XP_WARPS") == 1 ? 1 : 2;
#endif
}
// -1: the rule above; 0: never; 1: wherever it can run.
static int xp_coop_mode() {
#ifdef CONVT_NO_WG_XP_COOP
  return 0;
#else
  const int v = wg_env_int_or("CONVT_WG_XP_COOP", -1);
  return v == 0 || v == 1 ? v : -1;
#endif
}

// The wgmma kernel's tile for p (see ImplicitGemmFpropPlan::wg and the kernel's header);
// raw: a position-major tile that reads the input in place (float32 as TF32; see
// ImplicitGemmFpropPlan::wg_raw); wmerge: W phases merged (ImplicitGemmFpropPlan::wg_wmerge).
// n_cap > 0: channel-major tiles of at most n_cap positions (plan_wgmma_tile).
// Float32 as TF32 on the wgmma kernel with pair-aligned tile layouts where the dispatch
// would give the TMA kernel: no stride, 17-32 output channels per group (position-major tiles
// of 24 or 32 channels), a reduction K (input channels per group x taps) under 1024, an
// even-wide output, and either multiply-adds per input element (output channels per group x
// taps: the MMAs that pay for the input copy the wgmma kernel needs and the TMA kernel does
// not) at least R = 4 times the input channels per group (the TMA kernel's mma.sync tiles do
// well on deep channel loops), or, in a volume (an output deeper than 1), at least T = 4
// D x H taps (the TMA kernel reuses a box for its W taps only, and loads it again for each D
// and H tap; the wgmma kernel's box holds several H taps' rows). CONVT_WG_F32_ALIGNED=R sets R
// (a decimal; 0.001: every layer of the class), 0 turns the rule off (as does
// CONVT_WG_EVEN=0); CONVT_WG_F32_DH_TAPS=T sets T, 0 leaves that term out. Measured on an H100
// (docs/kernels.md, "Float32 on the wgmma kernel where its MMAs pay for the copy", GPU time,
// each layer on both kernels) over four draws of fuzzed layers of the class, the last of
// volumes only: all of them on wgmma 0.92x, 0.96x, 0.88x, 1.46x (1-D and 2-D layers of few
// taps and many input channels down to 0.44x, volumes of many D and H taps up to 7x); the rule
// 1.129x, 1.085x, 1.106x, 1.517x (3, 6, 3 and 3 layers slower by more than 3%, down to 0.74x,
// 0.79x, 0.73x, 0.81x); R = 4 alone 1.071x and 1.065x on the first two. Planes with 4-5 H taps
// were mostly slower on wgmma (0.63x-1.22x), volumes with 4-5 D x H taps mostly faster (0.81x-
// 6.3x). KernelBench: kb71 1.03x, kb78 0.97x.
// The class that rule decides for, whatever its terms (float32 as TF32, no stride, 17-32
// output channels per group, a reduction under 1024, an even-wide output). The dispatch's
// rules for volumes and planes leave it to this rule: over its five draws every layer of the
// class on wgmma was slower than the rule's choice.
static bool f32_aligned_class(const Problem& p, bool split) {
  if (p.dtype != DType::kFloat32 || split) return false;
  for (int d = 0; d < 3; ++d)
    if (p.stride[d] != 1) return false;
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
  return cog > 16 && cog <= 32 && cig * taps < 1024 && p.output_size(2) % 2 == 0;
}

static bool f32_aligned_wanted(const Problem& p, bool split) {
  if (!f32_aligned_class(p, split)) return false;
  const char* r_s = std::getenv("CONVT_WG_F32_ALIGNED");
  const double r = r_s != nullptr && *r_s != '\0' ? std::atof(r_s) : 4.0;
  // (CONVT_WG_EVEN=0, no aligned layouts: the TMA kernel as before.)
  if (!(r > 0) || wg_env_int_or("CONVT_WG_EVEN", -1) == 0) return false;
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const int64_t dh = p.kernel_size[0] * p.kernel_size[1], taps = dh * p.kernel_size[2];
  const int64_t t = wg_env_int_or("CONVT_WG_F32_DH_TAPS", 4);
  return double(cog * taps) >= r * double(cig) || (t > 0 && p.output_size(0) > 1 && dh >= t);
}

// Float32 as TF32 on the wgmma kernel for strided 1-D layers (one output row, a W stride)
// where multiply-adds per input element (output channels per group x W taps) are at least
// R = 2.5 times the input channels per group, whatever the reduction per phase: the wgmma
// tile's one long row (up to 256 positions of a phase) fills it, and its MMAs pay for the
// input copy. Measured on an H100 (docs/kernels.md, "Strided 1-D layers in float32 on the
// wgmma kernel", GPU time): over the 37 fuzzed 1-D layers a dispatch audit found on the TMA
// kernel (scripts/suites/dispatch_audit_wide.json) the wgmma kernel forced 0.64x-2.78x, and
// with R = 1.5 1.59x over the 28 layers that bound moved (2 slower); on 80 layers drawn after
// (scripts/suites/f32_rows_heldout.json) 1.37x (13 slower, down to 0.46x), but HiFi-GAN's
// third and fourth upsampling layers (R = 2) 1.5x-1.7x slower. R = 2.5 leaves those: 1.33x
// over the 80 (8 slower) and 1.54x over the audit's 28. CONVT_WG_F32_1D=R sets R (a
// decimal), 0 turns the rule off.
static bool f32_strided_row_wanted(const Problem& p, bool split) {
  if (p.dtype != DType::kFloat32 || split) return false;
  if (p.output_size(0) != 1 || p.output_size(1) != 1 || p.stride[2] < 2) return false;
  const char* r_s = std::getenv("CONVT_WG_F32_1D");
  const double r = r_s != nullptr && *r_s != '\0' ? std::atof(r_s) : 2.5;
  if (!(r > 0)) return false;
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  return double(cog) * double(p.kernel_size[2]) >= r * double(cig);
}

static void plan_wgmma_tile_capped(const Problem& p, ImplicitGemmFpropPlan& plan, bool raw,
                                   bool wmerge, bool wpairs, bool xp_ok, int64_t n_cap,
                                   bool coop_want, bool tsplit = false,
                                   int64_t min_rows = 0, bool no_even = false) {
  auto no = [&](std::string why) {
    plan.wg = false;
    plan.wg_reason = std::move(why);
  };
  // Strict float32 runs split TF32: the input's and the weight's rounding residuals are
  // second copies beside the first (workspace and each stage hold both).
  const int64_t copies = plan.split ? 2 : 1;
  const int64_t e = dtype_size(p.dtype), kc = 16 / e;
  if (raw && (p.dtype != DType::kFloat32 || plan.split))
    return no("the input is read in place only in float32 as TF32");
  if (wmerge && (raw || plan.split || p.stride[2] < 2))
    return no("W phases merge only for a W stride, not in split TF32");
  if (wpairs && (raw || plan.split || p.stride[2] != 2))
    return no("W phase pairs: a W stride of 2, not in split TF32");
  if (tsplit && (raw || wmerge || wpairs))
    return no("taps split: not with the input read in place, merged W phases or W phase pairs");
  // The transposition in the kernel reads the input in place through a tensor map: a
  // contiguous input whose rows, planes or channels are not 16-byte aligned (a row of 7
  // floats) is copied at run time with the plan's K step, so it is planned as the copy.
  // CONVT_WG_XP_UNALIGNED=1 (for measuring) plans the transposition whatever the input's
  // alignment, as before.
  if (xp_ok && wg_env_int_or("CONVT_WG_XP_UNALIGNED", 0) != 1) {
    const TensorRef x(reinterpret_cast<void*>(std::uintptr_t(256)), p.dtype, Device::cuda(0),
                      {p.batch, p.in_channels, p.input_size[0], p.input_size[1],
                       p.input_size[2]});
    xp_ok = wgmma_input_in_place(p, x);
  }
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const Dims q = phase0_positions(p);
  int64_t tmax[3], doff[3];
  for (int d = 0; d < 3; ++d) {
    int64_t a = p.stride[d], b = p.dilation[d];
    while (b != 0) {
      const int64_t t = a % b;
      a = b;
      b = t;
    }
    const int64_t step = p.stride[d] / a;
    tmax[d] = (p.kernel_size[d] + step - 1) / step;
    doff[d] = step * p.dilation[d] / p.stride[d];
  }
  int64_t halo_w = (tmax[2] - 1) * doff[2];
  if (halo_w > 248 && !tsplit) return no("the W taps' input window is wider than a TMA box");
  // (Taps split: each K step's box at its own W tap's offset, no halo.)
  if (tsplit) halo_w = 0;
  const int hb_env = wg_env_int("CONVT_WG_HB"), bk_env = wg_env_int("CONVT_WG_BK");
  // (For measuring the planner: CONVT_WG_WV caps a tile's output columns per row, more rows
  // a tile; CONVT_WG_N caps the positions of a channel-major tile.)
  const int wv_env = wg_env_int("CONVT_WG_WV");
  const int64_t n_env = n_cap > 0 ? n_cap : wg_env_int("CONVT_WG_N");
  // The tile's channels. wgmma's M is 64 rows: 64 channels x N positions, unless a group
  // has at most 32 output channels, where that would leave half of M or more empty: then
  // a position-major tile, 256 positions (four m64 blocks) x nc channels, nc the group's
  // channels rounded up to 8, 16, 24 or 32. CONVT_WG_NC=64 asks for the channel-major
  // tile, CONVT_WG_NC=8|16|24|32|48 for that position-major one (split TF32: up to 32,
  // its running sums take the registers).
  // Reading the input in place needs a position-major tile: nc = the group's channels
  // rounded up to 8, 16, 24, 32, 48 or 64 (64 for wider groups, several channel tiles);
  // CONVT_WG_NC picks one of those.
  int nc = 0;
  const int nc_env = wg_env_int("CONVT_WG_NC");
  if (raw) {
    nc = 64;
    for (int c : {8, 16, 24, 32, 48, 64})
      if (nc_env == c || (nc_env <= 0 && cog <= c)) {
        nc = c;
        break;
      }
  } else if (nc_env == 8 || nc_env == 16 || nc_env == 24 || nc_env == 32 ||
             (nc_env == 48 && copies == 1)) {
    nc = nc_env;
  } else if (nc_env != 64) {
    for (int c : {8, 16, 24, 32})
      if (cog <= c) {
        nc = c;
        break;
      }
  }
  // W taps stacked in M (the kernel's MF; opt-in, CONVT_WG_MFOLD=1, while it is measured):
  // for groups of at most 32 output channels, a channel-major tile whose 64 rows hold mfold
  // W taps of 64 / mfold channels (mfold 2 for up to 32 channels, 4 for up to 16 with 3 W
  // taps or more), each MMA step the box at one shift against the weights of mfold
  // consecutive W taps: the box is read once per mfold W taps by an N of up to 256
  // positions, where a position-major tile reads 64 box rows per MMA of nc columns. The
  // phase's W taps count as padded to a multiple of mfold (zero weights past them), so
  // the box's W halo is (W taps rounded up to mfold - 1) x the tap offset, and the epilogue
  // adds each output's mfold rows at their shifts ((mfold - 1) x the tap offset at most 8
  // columns: the staging's 8 spare columns). Not over zeros inserted along W, whose s times
  // the MMAs it would not save (kb72 in float32: 0.145 -> 0.455 ms with them, H100).
  // (Never in a build without those kernels, CONVT_NO_WG_MFOLD: see fprop_launch.cuh.)
#ifdef CONVT_NO_WG_MFOLD
  constexpr bool mfold_built = false;
#else
  constexpr bool mfold_built = true;
#endif
  int mfold = 1;
  if (mfold_built && wg_env_int("CONVT_WG_MFOLD") == 1 && nc > 0 && nc_env <= 0 && !raw &&
      copies == 1 && !wmerge && !wpairs && !tsplit && plan.wg_wup <= 1 && tmax[2] >= 2) {
    int f = cog <= 16 && tmax[2] >= 3 ? 4 : 2;
    if ((f - 1) * doff[2] > 8) f = 2;
    const int64_t halo = ((tmax[2] + f - 1) / f * f - 1) * doff[2];
    if ((f - 1) * doff[2] <= 8 && halo <= 248) {
      mfold = f;
      nc = 0;
      halo_w = halo;
    }
  }
  const int64_t cw = nc > 0 ? nc : wg::kM;  // a weight tile's rows (wgmma's M or N)
  if (wpairs && nc > 32) return no("W phase pairs: a position-major tile of 8 to 32 channels");
  // The W taps folded into N (position-major tiles in TF32 and 16-bit types with 2 to 7 W
  // taps in the widest phase): each MMA step multiplies the unshifted box by every W tap's
  // weights at once, nc x fold columns (fold: the taps rounded up to 2, 3, 4, 5 or 7), and
  // the epilogue sums the taps' columns at their shifts (fold rounds over the tile). The
  // MMAs then read the box once per H tap instead of once per (H tap, W tap), which saves
  // shared-memory reads in proportion to the reduction per column (input channels x D taps
  // x H taps) times the W taps, against an epilogue fold times as long and, for 24 or 32
  // channels, tiles of 128 or 64 positions instead of 256. Measured on an H200
  // (docs/kernels.md: folded wherever the tile can against nowhere, 10 runs a side), it paid
  // on kb58 (16 channels, 7 W taps, 480 per column: 1.49x in TF32, 1.34x in bfloat16) and
  // lost with shallower reductions, fewer taps or 64-position tiles (kb75 0.55x, kb73 0.47x
  // in bfloat16, kb78 0.39x; a 64 -> 32 layer with 5 x 320 on 64 positions 0.69x): the
  // planner folds where the widest phase has 5 or more W taps, the reduction per column is
  // 256 or more and the tile keeps 128 positions or more. CONVT_WG_FOLD=1 folds wherever
  // the tile can, CONVT_WG_FOLD=0 nowhere.
  int fold = 1;
  {
    const char* env = std::getenv("CONVT_WG_FOLD");
    const int fold_env = env != nullptr && *env != '\0' ? std::atoi(env) : -1;
    const int64_t k_col = cig * tmax[0] * tmax[1];
    if (nc > 0 && nc <= 32 && !raw && copies == 1 && fold_env != 0 && tmax[2] >= 2)
      for (int i = 0; i < wg::kNumFolds; ++i)
        if (wg::fold_choice(i) >= tmax[2]) {
          fold = wg::fold_choice(i);
          break;
        }
    if (fold_env != 1 && !(tmax[2] >= 5 && k_col >= 256 && nc * fold <= 128)) fold = 1;
    if (wmerge || wpairs || tsplit) fold = 1;
  }
  // The W taps scattered (position-major tiles of at most 16 channels, TF32 and 16-bit
  // types, a W stride of 2 or more and 2 to 7 W taps, where the reduction per column (input
  // channels x D taps x H taps) is 64 or more; CONVT_WG_SCATTER=1 asks for it wherever it
  // can run, CONVT_WG_SCATTER=0 nowhere):
  // every W tap of every W phase folded into N over the input's own columns, each product
  // added to the one output column it belongs to (o = i * s - pad + kw * dil), the tile's
  // outputs sc_wo = s * wv whole columns. The kernel then runs W with stride 1 and one
  // phase; the box of a segment starts sc_clo input columns from its first output column
  // divided by s, and holds wv + its halo columns.
  const int64_t sw = p.stride[2];
  int64_t sc_clo = 0, sc_max_out = 0;
  bool scatter = false;
  // Scattered W taps keep a tile's outputs in the staging area, grown up to twice its size
  // where they need it (the growth taken from the stages); long rows, a 1-D layer's, are
  // cut into segments that fit it (see layout). Measured on an H100 (docs/kernels.md,
  // "Scattered W taps in a grown staging area", GPU time) over 100 fuzzed layers whose plan
  // this changes (scripts/suites/sc_segs2_fuzz.json): 1.46x in float32, 1.43x in bfloat16
  // (1 and 4 slower by more than 3%), most of them layers that left the wgmma kernel or
  // tiles of fewer rows. CONVT_WG_SC_SEGS=0 keeps the default area and no segments (before
  // 2026-11-28), =1 segments within the default area.
  const int sc_segs_env = wg_env_int_or("CONVT_WG_SC_SEGS", 2);
  const bool sc_segs = sc_segs_env == 1 || sc_segs_env == 2;
  const int64_t sc_area = sc_segs_env == 2 ? 2 * int64_t(wg::kEpiBytes) : int64_t(wg::kEpiBytes);
  {
    // Measured on an H200 (docs/kernels.md, 10 runs a side, against the dispatch without
    // it): 1.04x-1.68x in float32 and bfloat16 on six generator-like layers (64 -> 3 with
    // kernel 4 and stride 2: 1.64x / 1.51x; reductions of 64 to 512 per column), 0.62x-0.67x
    // on kb72 and kb75 (48 and 24 per column), whose epilogue rounds the MMAs do not pay for.
    const char* sc_s = std::getenv("CONVT_WG_SCATTER");
    const int sc_env = sc_s != nullptr && *sc_s != '\0' ? std::atoi(sc_s) : -1;
    const int64_t kw = p.kernel_size[2], dil = p.dilation[2], pad = p.padding[2];
    const bool want = sc_env == 1 || (sc_env != 0 && cig * tmax[0] * tmax[1] >= 64);
    if (want && !wmerge && !wpairs && !tsplit && nc > 0 && nc <= 16 && !raw && copies == 1 &&
        sw > 1 && kw >= 2 &&
        kw <= 7) {
      auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
      sc_clo = -floor_div((kw - 1) * dil - pad, sw);  // ceil((pad - (kw - 1) dil) / s)
      const int64_t halo = floor_div(sw - 1 + pad, sw) - sc_clo;
      if (halo <= 248) {
        scatter = true;
        halo_w = halo;
        for (int i = 0; i < wg::kNumFolds; ++i)
          if (wg::fold_choice(i) >= kw) {
            fold = wg::fold_choice(i);
            break;
          }
        // Output columns of a tile's rows: nc x (rows x sc_wo rounded up to 32, + 4) floats
        // and a slot per consumer thread fit the staging area.
        // (Up to sc_area bytes: see epi_bytes below.)
        sc_max_out = ((sc_area / 4 - 128) / nc - 4) / 32 * 32;
      }
    }
  }
  // W phases merged: the buffer of a tile's outputs ([channels][rows][s x wv] of T, and a
  // slot per consumer thread) may take up to kMergeBytes of the staging area, which then
  // leaves that much less to the stages: rows x s x wv at most wm_max_out.
  constexpr int64_t kMergeBytes = 48 * 1024;
  const int64_t wm_max_out = wmerge ? (kMergeBytes / e - 128) / cw : 0;
  // (Weight tiles per H tap: one with the W taps folded, one per mfold W taps stacked.)
  const int64_t wtaps = fold > 1 ? fold : (tmax[2] + mfold - 1) / mfold;
  const int64_t step_wtaps = tsplit ? 1 : wtaps;      // those of a K step
  // (Reading in place, K steps are at least 4 kc channels: see try_step.)
  const int64_t cig_min = round_up(cig, (raw ? 4 : 2) * kc);
  // N and the box: the most valid outputs per computed position; of those within 1% of
  // the best, the largest N (fewer tiles). A row of q[2] outputs is cut into the fewest
  // column segments whose box (segment + W halo) fits N. Where the average phase's
  // reduction is deep (K = input channels x taps / phases of 512 or more), so that the
  // MMAs of computed but dropped positions cost more than shorter rows do, it may be cut
  // into more, where that fits more whole rows into a tile (a 66-output row with a
  // two-column halo fills 68 of 128 positions; two segments of 33 fill 3 rows of 35): of
  // the segment counts up to 16 past the fewest, the best by more than 2%. (Measured on
  // an H200: 1.08-1.5x on kb61, kb65, kb68, kb69, kb70; on shallow ones, kb71, kb73 and
  // kb75, up to 1.28x slower.)
  const double k_avg = double(cig) *
                       double(p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2]) /
                       double(p.stride[0] * p.stride[1] * p.stride[2]);
  // (Scattered W taps or merged W phases: also where the staging area bounds the rows x
  // output columns.)
  const int64_t extra_segs = k_avg >= 512 || scatter || wmerge || wpairs ? 16 : 0;
  // Reading in place, a box row is the flattening width itself: the segment, its W halo and
  // up to 3 columns in front (the raw box starts 16-byte aligned), rounded up to 4 columns.
  const int64_t raw_lead = raw ? 3 : 0;
  auto box_width = [&](int64_t wv) {
    return raw ? round_up(wv + halo_w + raw_lead, 4) : wv + halo_w;
  };
  // Planes stacked in a tile (see below): whether they can be, and how many planes there are
  // (a problem whose D is one position stacks samples, else D positions).
  const char* stack_s = std::getenv("CONVT_WG_STACK");
  const int64_t stack_env = stack_s != nullptr && *stack_s != '\0' ? std::atoi(stack_s) : -1;
  // Two consumer warpgroups sharing the weight tiles over twice the rows
  // (ImplicitGemmFpropPlan::wg_coop_n; opt-in, CONVT_WG_COOP_N=1, while it is measured):
  // channel-major tiles reading the copy (not split TF32, folded, scattered, merged or
  // paired W taps, not stacked or transposed in the kernel) where two warpgroups cannot
  // take 128 channels (a group of an odd count of 64-channel tiles), each warpgroup at most
  // kMaxRows / 2 rows, where a phase has two rows or more.
  const bool coop_n = !coop_want && !tsplit && wg_env_int("CONVT_WG_COOP_N") == 1 && nc == 0 &&
                      mfold == 1 &&
                      copies == 1 && !raw && fold == 1 && !scatter && !wmerge && !wpairs &&
                      ((cog + 63) / 64) % 2 == 1 && q[1] >= 2;
  const int64_t rmul = coop_n ? 2 : 1;  // the tile's rows over a warpgroup's
  const bool stack_ok =
      stack_env != 0 && !raw && fold == 1 && !scatter && !wmerge && !wpairs && !coop_n;
  const bool stack_flat_d = p.input_size[0] == 1 && p.kernel_size[0] == 1 &&
                            p.padding[0] == 0 && p.stride[0] == 1;
  const int64_t stack_planes = stack_flat_d ? p.batch : q[0];
  // (Not with W taps stacked in M, whose epilogue stores one output at a time.)
  // Pair-aligned layouts: the epilogues store two adjacent outputs at once where the first
  // sits at an even element (4 bytes in 16-bit types, 8 in float), else one at a time. With
  // W of stride 1 and an even output width every output row starts at an even element, so
  // segments of even width, in boxes of even width where a tile has several rows (the
  // positions flatten over box rows), keep every pair aligned; an odd width leaves half the
  // tiles' or rows' pairs unaligned (kb78's 3 rows x 79 of an 85-wide box). Of the segment
  // counts from the fewest up to 16 more, the aligned layout using the most positions,
  // where there is one, in 16-bit types where the layer's own W stride is 1 (not zeros
  // inserted along W). Measured on an H100 (docs/kernels.md, GPU time, against the
  // layouts without it): in bfloat16 kb71 1.22x, kb78 1.16x, kb70 1.10x, kb69 1.06x; in
  // float32 (TF32, where the MMAs weigh more than the stores) kb70 0.93x at its 83% of
  // positions used against 94%, and with zeros inserted along W kb75 0.76x, kb81 0.97x.
  // CONVT_WG_EVEN=1 asks for them wherever W runs with stride 1, =0 nowhere; =2 (opt-in,
  // not yet measured) picks N by the unaligned layouts, then the aligned layout of that N
  // (in 16-bit types without zeros along W, as the default), so that alignment does not
  // also change the tile's N and what follows from it (two warpgroups, the transposition
  // in the kernel, resident weight tiles).
  const int even_env = wg_env_int_or("CONVT_WG_EVEN", -1);
  const bool even_ok = even_env != 0 && !no_even &&
                       (even_env == 1 || (e == 2 && plan.wg_wup <= 1) ||
                        f32_aligned_wanted(p, plan.split)) &&
                       p.stride[2] == 1 && p.output_size(2) % 2 == 0 && !raw && fold == 1 &&
                       mfold == 1 && !scatter && !wmerge && !wpairs;
  bool even_now = even_ok && even_env != 2;  // (=2: aligned only once N is chosen)
  auto layout = [&](int64_t n, int64_t* wv_out, int64_t* rows_out) {
    // (Reading in place: up to 3 more columns for the rounding to 4.)
    int64_t span = n - halo_w - 2 * raw_lead;
    // (Merged W phases: a row of s x wv outputs fits the buffer. Scattered W taps: a row of
    // s x wv output columns fits the staging area, so that long rows, a 1-D layer's, are
    // cut into segments that do; with CONVT_WG_SC_SEGS=0 such rows leave no tile, and the
    // layer the wgmma kernel.)
    if (wmerge) span = std::min<int64_t>(span, wm_max_out / sw);
    if (scatter && sc_segs) span = std::min<int64_t>(span, sc_max_out / sw);
    if (wv_env > 0) span = std::min<int64_t>(span, wv_env);
    // (min_rows: columns few enough for that many rows of their box in n positions.)
    if (min_rows > 1) span = std::min<int64_t>(span, n / min_rows - (box_width(span) - span));
    if (span < 8) return 0.0;
    const int64_t seg_min = (q[2] + span - 1) / span;
    // The best layout of seg_min .. seg_min + more segments (even: pair-aligned ones only).
    auto scan = [&](bool even, int64_t more) {
      double best = 0;
      for (int64_t segs = seg_min; segs <= seg_min + more; ++segs) {
        const int64_t wv = (q[2] + segs - 1) / segs;
        if (wv < 8 && segs > seg_min) break;
        int64_t rows =
            std::min<int64_t>({n / box_width(wv), q[1], int64_t(wg::kMaxRows) / rmul});
        if (even && (wv % 2 != 0 || (rows > 1 && box_width(wv) % 2 != 0))) continue;
        if (scatter) rows = std::min<int64_t>(rows, sc_max_out / (sw * wv));
        if (wmerge) rows = std::min<int64_t>(rows, wm_max_out / (sw * wv));
        if (rows <= 0) continue;
        // (Sharing the weight tiles: a tile of rmul x rows rows, rmul x n positions.)
        const int64_t row_groups = (q[1] + rmul * rows - 1) / (rmul * rows);
        const int64_t col_segs = (q[2] + wv - 1) / wv;
        double used = double(q[1] * q[2]) / double(row_groups * col_segs * n * rmul);
        if (stack_ok && row_groups == 1 && col_segs == 1) {
          // (A whole plane: as many planes as its box, with every H tap's rows, fits N.)
          const int64_t hbox = rows + (tsplit ? 0 : (tmax[1] - 1) * doff[1]);
          int64_t st = std::min<int64_t>({n / (hbox * box_width(wv)), wg::kMaxRows / hbox,
                                          stack_planes});
          if (stack_env > 0) st = std::min(st, stack_env);
          if (st >= 2)
            used = double(q[1] * q[2]) * double(stack_planes) /
                   double((stack_planes + st - 1) / st * n);
        }
        if (used > best * 1.02) {
          best = used;
          *wv_out = wv;
          *rows_out = rows;
        }
        if (wv == 1) break;
      }
      return best;
    };
    const double best = even_now ? scan(true, 16) : 0.0;
    return best > 0 ? best : scan(false, extra_segs);
  };
  // Two consumer warpgroups (ImplicitGemmFpropPlan::wg_coop; coop_want, see
  // plan_wgmma_tile): channel-major tiles reading the copy (not split TF32, folded,
  // scattered, merged or paired W taps) of a group with an even count of 64-channel tiles.
  const bool coop = coop_want && nc == 0 && mfold == 1 && copies == 1 && !raw && fold == 1 &&
                    !scatter &&
                    !wmerge && !wpairs && ((cog + 63) / 64) % 2 == 0;
  int best_n = 0;
  int64_t best_wv = 0, best_rows = 0;
  double best_used = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const double top = best_used;
    // (Position-major tiles are built for one N each: 256 positions; reading in place, 128
    // with 48 or 64 channels, whose accumulators take twice the registers; folded, as many as
    // wg::fold_positions allows.)
    const int64_t n_pos = fold > 1 ? wg::fold_positions(int(nc), fold) : raw && nc > 32 ? 128 : 256;
    for (int i = 0; i < (nc > 0 ? 1 : wg::kNumN); ++i) {
      const int64_t n = nc > 0 ? n_pos : wg::n_choice(i);
      if (nc == 0 && n_env > 0 && n > n_env && i > 0) continue;
      // (Split TF32 keeps a second set of accumulators, the running sum: at most 128
      // positions fit the registers.)
      if (nc == 0 && copies == 2 && n > 128) continue;
      // (W phase pairs keep two sets of accumulators too: channel-major tiles of 128
      // positions.)
      if (nc == 0 && wpairs && n != 128) continue;
      // (Two consumer warpgroups are built for 128, 192 and 256 positions.)
      if ((coop || coop_n) && n != 128 && n != 192 && n != 256) continue;
      int64_t wv = 0, rows = 0;
      const double used = layout(n, &wv, &rows);
      if (used == 0) continue;
      if (pass == 0) {
        best_used = std::max(best_used, used);
      } else if (used >= 0.99 * top) {
        best_n = int(n);  // ascending n: the last one kept is the largest
        best_wv = wv;
        best_rows = rows;
        best_used = used;
      }
    }
  }
  if (best_n == 0) return no("the W taps' input window leaves no tile");
  if (even_ok && !even_now) {  // (CONVT_WG_EVEN=2: the aligned layout of the chosen N)
    even_now = true;
    int64_t wv = 0, rows = 0;
    const double used = layout(best_n, &wv, &rows);
    if (used > 0) {
      best_wv = wv;
      best_rows = rows;
      best_used = used;
    }
  }
  // The staging area: with merged phases their buffer, in place of the default area for
  // position-major tiles (where it outgrows it), after it for channel-major tiles (whose
  // epilogue stages the accumulators there first).
  const int64_t wm_bytes = wmerge ? round_up((cw * best_rows * sw * best_wv + 128) * e, 128) : 0;
  // Scattered W taps: their sums, [nc][rows x sc_wo rounded up to 32, + 4] floats, and a
  // slot per consumer thread (up to twice the default area, see sc_area).
  const int64_t sc_bytes =
      scatter ? round_up((nc * (round_up(best_rows * sw * best_wv, 32) + 4) + 128) * 4, 128) : 0;
  const int64_t epi_bytes = wmerge ? (nc > 0 ? std::max<int64_t>(wg::kEpiBytes, wm_bytes)
                                             : wg::kEpiBytes + wm_bytes)
                                   : std::max<int64_t>(wg::kEpiBytes, sc_bytes);
  const bool two_wg = coop || coop_n;
  const int64_t stage_budget = (two_wg ? wg::kCoopStageBudget : wg::kStageBudget) -
                               (epi_bytes - wg::kEpiBytes) * (two_wg ? 2 : 1);
  const int64_t wbox_min = box_width(best_wv);
  // The K step: the widest channel block (box rows of 128, 64 or 32 bytes: wider rows
  // move faster through TMA) that pads the group's channels by at most 1/8 and leaves two
  // stages; with it, as many H taps as leave three stages, else as many as leave two (the
  // box holds the rows of every H tap of the step). Measured on an H200 with
  // scripts/wg_step_sweep.py (docs/kernels.md): a wider channel block beat a narrower one
  // with more stages by up to 1.21x, and more H taps helped only while three stages were
  // left. Split TF32, whose stages are twice as large, takes a narrower channel block
  // where that leaves three stages (not measured otherwise).
  bool found = false;
  // One K step (bk channels, hb H taps): its stage layout into the plan where it leaves
  // at least min_stages stages.
  auto try_step = [&](int64_t bk, int64_t hb, int min_stages, int64_t stack = 1) {
    if (hb_env > 0 && !tsplit && hb != std::min<int64_t>(hb_env, tmax[1])) return false;
    if (tsplit && hb != 1) return false;
    const int64_t hbox = best_rows + (hb - 1) * doff[1];
    if (hbox > 256) return false;
    // Reading in place: the box's channel plane (hbox x wbox floats) an odd multiple of 8
    // where a few more columns make it so, for the A loads' banks (see the kernel).
    int64_t wbox = wbox_min;
    if (raw) {
      for (int64_t wb = wbox_min; wb <= std::min<int64_t>(wbox_min + 28, 256); wb += 4) {
        if (best_rows * wb > best_n) break;
        if ((hbox * wb) % 32 == 8 || (hbox * wb) % 32 == 24) {
          wbox = wb;
          break;
        }
      }
    }
    const int64_t box = stack * hbox * wbox * bk * e;
    const int64_t wbytes = hb * step_wtaps * cw * bk * e;
    // Stage: box, [residual box at the next 1024 bytes (its swizzle)], weight tiles,
    // [residual weight tiles]. Reading in place: the raw box, then room for the A loads of
    // the positions past the valid ones (up to N + 3 floats past the last channel's
    // plane), then the weight tiles.
    const int64_t xs_off = copies == 2 ? (box + 1023) / 1024 * 1024 : 0;
    // (Sharing the weight tiles: the second warpgroup's box at the next 1024 bytes, its
    // swizzle's alignment.)
    const int64_t box_off = coop_n ? round_up(box, 1024) : 0;
    const int64_t w_off = copies == 2 ? 2 * xs_off
                          : raw       ? round_up(box + (best_n + 4) * e, 128)
                          : coop_n    ? 2 * box_off
                                      : box;
    // (Two consumer warpgroups: the second one's weight tiles follow the first's.)
    const int64_t stage = (w_off + copies * wbytes * (coop ? 2 : 1) + 1023) / 1024 * 1024;
    const int64_t stages = std::min<int64_t>(wg::kMaxStages, stage_budget / stage);
    if (stages < min_stages) return false;
    plan.wg_hb = int(hb);
    plan.wg_bk = int(bk);
    plan.wg_hbox = int(hbox);
    plan.wg_box_bytes = int(box);
    plan.wg_stage_bytes = int(stage);
    plan.wg_stages = int(stages);
    plan.wg_xs_off = int(xs_off);
    plan.wg_w_off = int(w_off);
    plan.wg_ws_off = copies == 2 ? int(w_off + wbytes) : 0;
    plan.wg_w_half = coop ? int(wbytes) : 0;
    plan.wg_coop_box_off = int(box_off);
    plan.wg_wbox = int(wbox);
    // (A K step's largest tap shift is its first tap's: (hb - 1) H taps and the W halo;
    // the MMAs read wg_n positions from there, from the residual box too with split TF32.)
    const int64_t shift_max = (hbox - best_rows) * wbox + (wbox - best_wv);
    plan.wg_a_bytes = raw ? 0 : int(xs_off + box_off + (shift_max + best_n) * bk * e);
    return true;
  };
  auto bk_allowed = [&](int64_t bk) {
    return (cig + bk - 1) / bk * bk * 8 <= cig_min * 9 && (bk_env <= 0 || bk == bk_env);
  };
  const int64_t bks[3] = {8 * kc, 4 * kc, 2 * kc};
  if (copies == 1) {
    for (int64_t bk : bks) {
      // (Reading in place, a stage's MMA steps go in batches of 2 or 4: at least 2 MMA K
      // steps per K step; kRawBatch.)
      if (!bk_allowed(bk) || (raw && bk == 2 * kc)) continue;
      for (int min_stages : {3, 2})
        for (int64_t hb = tmax[1]; hb >= 1 && !found; --hb) found = try_step(bk, hb, min_stages);
      if (found) break;
    }
  } else {
    for (int min_stages : {3, 2}) {
      for (int64_t bk : bks) {
        if (!bk_allowed(bk)) continue;
        for (int64_t hb = tmax[1]; hb >= 1 && !found; --hb) found = try_step(bk, hb, min_stages);
        if (found) break;
      }
      if (found) break;
    }
  }
  if (!found) return no("the K step's input box and weight tiles leave no two stages");
  plan.wg_n = best_n;
  plan.wg_nc = nc;
  plan.wg_cw = int(cw / mfold);
  plan.wg_mfold = mfold;
  plan.wg_wv = int(best_wv);
  plan.wg_rows = int(best_rows);
  plan.wg_raw = raw;
  // Planes stacked (ImplicitGemmFpropPlan::wg_stack): where a tile holds a phase's whole
  // plane (one row group, one column segment) and its box of hbox x wbox positions fits
  // the tile twice or more, the box takes as many consecutive planes as fit the tile's
  // positions and kMaxRows box rows: the samples of a 1-D or 2-D problem (its D of one
  // position, one tap), else the D positions of one sample. The tile then computes the
  // outputs of several planes where it would drop most of its positions (a DCGAN layer's
  // 4 x 4 phases, 25 of 256 positions used). With the copy only (not split into pieces
  // for the transposer, not read in place, not with folded, scattered or merged W taps;
  // the transposition is not planned where planes stack).
  // CONVT_WG_STACK=0 turns it off, =S caps the planes at S.
  plan.wg_stack = 1;
  plan.wg_stack_n = false;
  // (The share of positions used with one plane a tile; best_used may count stacked planes.)
  plan.wg_used_plane =
      double(q[1] * q[2]) / double((q[1] + rmul * best_rows - 1) / (rmul * best_rows) *
                                   ((q[2] + best_wv - 1) / best_wv) * best_n * rmul);
  best_used = plan.wg_used_plane;
  {
    const bool whole = q[1] <= best_rows && q[2] <= best_wv;
    const int64_t planes = stack_planes;
    const int64_t plane_box = int64_t(plan.wg_hbox) * plan.wg_wbox;
    int64_t stack = std::min<int64_t>({best_n / plane_box, wg::kMaxRows / plan.wg_hbox, planes});
    if (stack_env > 0) stack = std::min(stack, stack_env);
    const bool can = stack_ok && whole && stack >= 2;
    if (can) {
      // Each plane's box holds the rows of the K step's H taps: of the K steps with the
      // chosen H taps or fewer, the one whose planes fill the tile best (by more than 2%;
      // the most H taps on a tie). (DCGAN's 100 -> 512 layer in bfloat16: 3 H taps a step
      // stacked 4 planes of 6 x 7 positions in 208, 31% used; 1 H tap stacks 7 of 4 x 7.)
      const ImplicitGemmFpropPlan before = plan;
      ImplicitGemmFpropPlan best_plan = before;
      int64_t best_stack = 1;
      double best_stack_used = 0;
      for (int64_t hb = before.wg_hb; hb >= 1; --hb) {
        const int64_t hbox = best_rows + (hb - 1) * doff[1];
        int64_t st = std::min<int64_t>({best_n / (hbox * before.wg_wbox), wg::kMaxRows / hbox,
                                        planes});
        if (stack_env > 0) st = std::min(st, stack_env);
        while (st >= 2 && !try_step(before.wg_bk, hb, 2, st)) --st;
        if (st < 2) continue;
        // (The last group of planes may be partial.)
        const double used = double(q[1] * q[2]) * double(planes) /
                            double((planes + st - 1) / st * best_n);
        if (used > best_stack_used * 1.02) {
          best_stack_used = used;
          best_stack = st;
          best_plan = plan;
        }
      }
      plan = best_plan;
      if (best_stack >= 2) {
        plan.wg_stack = int(best_stack);
        plan.wg_stack_n = stack_flat_d;
        best_used = best_stack_used;
      }
    }
  }
  // More H taps a K step where a tile's boxes then hold at most 70% of the rows, with a
  // channel block of at least 64 bytes and as many stages as the step above, up to 3; not
  // where planes stack. A step of hb H taps loads a box of rows + (hb - 1) x the H tap
  // offset, ceil(H taps / hb) times a channel block, so where a tile has several rows its
  // box bytes fall with hb: kb73 in float32 (11 rows, 2 H taps) 32 channels x 1 H tap ->
  // 16 x 2, 22 -> 12 rows a channel, boxes 4.8 -> 2.6 GB through L2, whose throughput bounds
  // it. Measured on an H100 (docs/kernels.md, "More H taps a K step", GPU time, against the
  // planner's step): 1.056x in float32 and 1.012x in bfloat16 over 202 fuzzed layers
  // (scripts/suites/hfirst_fuzz.json; 70 / 36 faster, 19 / 16 slower by more than 3%),
  // KernelBench 1.008x / 1.00x (kb73 1.06x), the models suites 1.00x-1.015x.
  // CONVT_WG_HFIRST=0 turns it off; =2 takes channel blocks of 32 bytes too (kb70 in float32
  // 8 channels x 3 H taps where 16 x 2 loads 12 rows a block, 7): 1.050x / 1.003x on the
  // same draw with 47 / 58 layers slower, kb70 0.91x.
  const int hfirst_env = wg_env_int_or("CONVT_WG_HFIRST", 1);
  if (copies == 1 && hb_env <= 0 && !tsplit && plan.wg_stack == 1 &&
      (hfirst_env == 1 || hfirst_env == 2)) {
    const ImplicitGemmFpropPlan chosen = plan;
    auto box_rows = [&](int64_t hbox, int64_t hb) { return (tmax[1] + hb - 1) / hb * hbox; };
    const int64_t rows_before = box_rows(chosen.wg_hbox, chosen.wg_hb);
    const int want_stages = std::min(3, chosen.wg_stages);
    bool better = false;
    for (int64_t hb = tmax[1]; hb > chosen.wg_hb && !better; --hb)
      for (int64_t bk : bks) {
        if (bk < (hfirst_env == 2 ? 2 : 4) * kc || !bk_allowed(bk) || (raw && bk == 2 * kc))
          continue;
        if (!try_step(bk, hb, want_stages)) continue;
        if (10 * box_rows(plan.wg_hbox, hb) <= 7 * rows_before) {
          better = true;
          break;
        }
      }
    if (!better) plan = chosen;
  }
  // Transposer warps where the input is transposed in the kernel (xp_warps_wanted): two
  // where the kernels have them (the plan otherwise the same: the ring's area does not
  // change).
  const int xp_warps = xp_warps_wanted(e) == 2 && fold == 1 && !wpairs && mfold == 1 &&
                               (two_wg ? coop && !coop_n : nc == 16 || nc == 24 || nc == 32)
                           ? 2
                           : 1;
  // The raw pieces the transposition's ring gets at `stages` stages of the plan's K step
  // (at most kXpMaxPieces, CONVT_WG_XP_RING or two K steps' worth).
  auto xp_pieces = [&](int64_t stages) {
    const int64_t hp = std::min<int64_t>(wg::xp_piece_rows(plan.wg_bk, int(e)), plan.wg_hbox);
    const int64_t piece = hp * plan.wg_bk * wg::kXpCols * e;
    const int64_t per_step = wg::xp_chunks(plan.wg_wbox) * ((plan.wg_hbox + hp - 1) / hp);
    const int64_t ring_env =
        std::min<int64_t>(wg_env_int("CONVT_WG_XP_RING"), wg::kXpMaxPieces);
    const int64_t ring_cap = ring_env > 0 ? ring_env : 2 * per_step;
    const int64_t left = stage_budget - stages * plan.wg_stage_bytes - wg::kXpMetaBytes - 1024;
    return std::min<int64_t>({left / piece, ring_cap, int64_t(wg::kXpMaxPieces)});
  };
  // In float32 as TF32, where the K step leaves out some H taps, a step of every H tap with a
  // channel block down to 32 bytes where the input transposed in the kernel (below) then runs (its
  // stages: see the end of this comment): the transposition keeps up in float only where each input
  // element is transposed once per tile, so an H-complete step is what removes the input copy,
  // which reads and writes the whole input once more. kb71 in float32 (32 -> 32 channels, 3 x 3,
  // 512 x 1024): 32 channels x 1 H tap with the copy -> 8 x 3 transposed in the kernel. Measured on
  // an H100 (docs/kernels.md, "The input transposed in the kernel", GPU time, against the copy):
  // 1.15x over the 49 fuzzed layers it changes in scripts/suites/xp_hfull_fuzz.json (34 faster, 8
  // slower by more than 3%), 1.146x over the 59 of a draw made after (xp_hfull_fuzz2.json; 42
  // faster, 10 slower), kb71 1.30x, the models suite unchanged. Two warpgroups with the copy, where
  // the planner takes them, stay (plan_wgmma_tile). Only where the step's box holds at most twice
  // the tile's rows: each input row is transposed by as many tiles as the box has rows per tile
  // row, and over both draws the layers of at most 2 ran 1.23x and 1.27x (58 of 64 faster, one
  // slower), those of more 1.03x and 0.99x (18 of 44 faster, 17 slower); a third draw made after
  // the bound (xp_hfull_fuzz3.json, 39 layers) ran 1.25x (37 faster, 1 slower).
  // In 16-bit types too, where the transposition runs with H-incomplete steps and so
  // transposes each input row once per H tap step: kb71 in bfloat16 32 channels x 1 H tap
  // -> 16 x 3 (boxes 824 -> 549 MB), kb78 16 x 3 x 7 with its weight tiles resident.
  // Measured on an H100 (GPU time, against float32 only): 1.108x bfloat16 / 1.112x float16
  // over the 96 fuzzed layers it changes (xp_hfull16_fuzz.json; 50 faster, 21 slower by
  // more than 3%, none below 0.91x), kb71 1.12x, kb78 1.14x, the models suites unchanged.
  // In float32 with the most stages, from the copy's down to two, at which the step and the
  // transposition's ring fit: kb78 (32 -> 32 channels, 3 x 7) 16 channels x 1 H tap at 3
  // stages with the copy -> 8 x 3 transposed at 2. Measured on an H100 (GPU time, against
  // the copy's stages only): 1.155x over the 48 layers of a fuzzed draw it changes
  // (xp_hfull_stages_fuzz.json; 37 faster, 4 slower by more than 3%, none below 0.84x),
  // 1.11x over the 31 of them that give up stages, kb78 1.19x; the other 17 had lost the
  // step to a transposition asked for at the step's most stages in place of those kept
  // (1.24x).
  // CONVT_WG_XP_HFULL=1 keeps it to float32, =0 turns it off, =3 keeps the copy's stages in
  // float32.
  const int hfull_env = wg_env_int_or("CONVT_WG_XP_HFULL", 2);
  bool hfull = false;
  int hfull_stages = 2;
  ImplicitGemmFpropPlan before_hfull = plan;
  // (In 16-bit types only where the step as planned transposes in the kernel already, with
  // at least two stages: the copy's plans, which may take two warpgroups, stay.)
  if (hfull_env != 0 &&
      (e == 4 || (hfull_env >= 2 && xp_pieces(2) >= wg::kXpMinPieces)) &&
      copies == 1 && !raw && xp_ok && fold == 1 && mfold == 1 && !two_wg && !tsplit &&
      hb_env <= 0 && plan.wg_stack == 1 && plan.wg_hb < tmax[1] && tmax[0] == 1 &&
      p.stride[0] * p.stride[1] * p.stride[2] == 1 &&
      best_rows + (tmax[1] - 1) * doff[1] <= 2 * best_rows) {
    // (16-bit types: the transposition gives up stages down to two for its ring, as below;
    // float32: the most stages from the copy's down to two.)
    const int top = e == 4 ? before_hfull.wg_stages : 2;
    const int least = e == 4 && hfull_env == 3 ? top : 2;
    for (int keep = top; keep >= least && !hfull; --keep)
      for (int64_t bk : bks) {
        if (!bk_allowed(bk) || !try_step(bk, tmax[1], keep)) continue;
        if (xp_pieces(keep) >= wg::kXpMinPieces) {
          hfull = true;
          hfull_stages = keep;
          break;
        }
      }
    if (!hfull) plan = before_hfull;
  }
  // The input transposed in the kernel (ImplicitGemmFpropPlan::wg_xp: 16-bit types and TF32,
  // unfolded tiles): the tile and K step stay the copy's, and the raw pieces' ring takes the shared
  // memory their stages leave (stages of the copy's given up for it down to two), at least
  // kXpMinPieces pieces, at most two K steps' worth. Only where the problem does at most 768
  // multiply-adds per input element, so that the copy, which moves the input twice more, is
  // a large part of the time (beyond, the transposition, which fills a stage only once the
  // raw box is in, costs the MMAs more than the copy does), and where the box's columns fill
  // 3/4 of the pieces' (narrower boxes load and transpose mostly columns they do not use).
  // Measured on an H200 in bfloat16 and float16 against the copy (docs/kernels.md):
  // 1.06x-1.36x on kb57 (576 per element), kb64 (384), kb70 (648), kb71 (288), kb74 (320) and
  // kb78 (672); 0.69x-0.91x on kb61, kb68, kb69, kb72 and kb73 (840-4800) and a 128 -> 64
  // layer with boxes of 28 columns in pieces of 64.
  // In float (TF32) the transposer warp moves as many bytes per K step as in 16-bit types
  // with twice the instructions per byte (4 x 4 blocks of 16-byte accesses, a rounding per
  // element), and the planner's float K steps hold one H tap where 16-bit ones hold three: it
  // keeps up only where every input element is transposed once per tile (stride 1, one D
  // tap, every H tap in the K step) and the copy's stages stay. Measured on an H200: kb74
  // 0.88 -> 0.63 ms; kb64 (a stage given up) 3.13 -> 3.62, and 1.5x-1.9x slower on kb61,
  // kb68 and kb70 (rows transposed again for each D and H tap). CONVT_WG_XP=0 asks for the
  // copy, CONVT_WG_XP=1 for the transposition wherever two stages and the ring fit.
  // CONVT_WG_XP_RING=P (opt-in, for measuring the supply of pieces): a ring of up to P
  // pieces (at most kXpMaxPieces) in place of two K steps' worth, giving up stages (down to
  // the least the transposition keeps) until it fits, else the most that fit there.
  plan.wg_xp = false;
  plan.wg_xp_early = false;
  plan.wg_xp_warps = 1;
  {
    const char* xp_s = std::getenv("CONVT_WG_XP");
    const int xp_env = xp_s != nullptr && *xp_s != '\0' ? std::atoi(xp_s) : -1;
    const double macs_per_elem = double(cog) *
                                 double(p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2]);
    const bool fills = 4 * plan.wg_wbox >= 3 * wg::kXpCols * wg::xp_chunks(plan.wg_wbox);
    const bool once = p.stride[0] * p.stride[1] * p.stride[2] == 1 && tmax[0] == 1 &&
                      plan.wg_hb >= tmax[1];
    // (W phase pairs transposed in the kernel are built for 16-bit position-major tiles
    // only.)
    // (Two warpgroups: sharing the box, where xp_coop_mode takes it.)
    const int xp_coop = xp_coop_mode();
    const bool coop_step =
        xp_coop == 1 || (xp_coop == -1 && plan.wg_bk * plan.wg_hb * tmax[2] * e >=
                                               kXpCoopMinStepBytes);
    const bool want = xp_ok && copies == 1 && !raw && fold == 1 && mfold == 1 && !tsplit &&
                      !(wpairs && (e == 4 || nc == 0)) &&
                      (!two_wg || (coop && !coop_n && coop_step)) &&
                      plan.wg_stack == 1 &&
                      xp_env != 0 &&
                      (xp_env == 1 ||
                       (macs_per_elem <= (two_wg ? xp_coop_macs(e) : 768) && fills &&
                        (e == 2 || once)));
    const int64_t ring_env = std::min<int64_t>(wg_env_int("CONVT_WG_XP_RING"), wg::kXpMaxPieces);
    // The ring for the plan's K step as it stands: its pieces (hp rows x bk channels x
    // kXpCols columns), the stages given up for it down to the least kept; whether it fits.
    auto fit_ring = [&]() {
      // (Float, unless asked for: the copy's stages only, or the H-complete step's.)
      const int64_t min_stages =
          e == 4 && xp_env != 1 ? (hfull ? hfull_stages : plan.wg_stages) : 2;
      const int64_t hp =
          std::min<int64_t>(wg::xp_piece_rows(plan.wg_bk, int(e)), plan.wg_hbox);
      const int64_t piece = hp * plan.wg_bk * wg::kXpCols * e;
      const int64_t per_step = wg::xp_chunks(plan.wg_wbox) * ((plan.wg_hbox + hp - 1) / hp);
      const int64_t ring_cap = ring_env > 0 ? ring_env : 2 * per_step;
      for (int64_t stages = plan.wg_stages; stages >= min_stages; --stages) {
        const int64_t left =
            stage_budget - stages * plan.wg_stage_bytes - wg::kXpMetaBytes - 1024;
        const int64_t pieces =
            std::min<int64_t>({left / piece, ring_cap, int64_t(wg::kXpMaxPieces)});
        // (CONVT_WG_XP_RING: the whole ring where stages can be given up for it.)
        if (ring_env > 0 && pieces < ring_cap && stages > min_stages) continue;
        if (pieces >= wg::kXpMinPieces) {
          plan.wg_xp = true;
          plan.wg_xp_early = wg_env_int_or("CONVT_WG_XP_EARLY", 1) != 0;
          plan.wg_xp_warps = xp_warps;
          plan.wg_stages = int(stages);
          plan.wg_xp_pieces = int(pieces);
          plan.wg_xp_rows = int(hp);
          plan.wg_xp_piece_bytes = int(piece);
          return true;
        }
      }
      return false;
    };
    if (want && !fit_ring() && two_wg && xp_coop == 1) {
      // (Two warpgroups' stages hold two sets of weight tiles: where the ring does not fit
      // beside them and CONVT_WG_XP_COOP=1 asks, a narrower channel block with the same H
      // taps, whose stages leave it room.)
      const ImplicitGemmFpropPlan before_ring = plan;
      bool fitted = false;
      for (int64_t bk : bks) {
        if (bk >= before_ring.wg_bk || !bk_allowed(bk)) continue;
        if (try_step(bk, before_ring.wg_hb, 2) && fit_ring()) {
          fitted = true;
          break;
        }
        plan = before_ring;
      }
      if (!fitted) plan = before_ring;
    }
  }
  // (The H-complete step without the transposition would be only a narrower step.)
  if (hfull && !plan.wg_xp) plan = before_hfull;
  // (16-bit types keep the transposition over two warpgroups with the copy, as without.)
  plan.wg_xp_hfull = hfull && plan.wg_xp && e == 4;
  plan.wg_fold = fold;
  plan.wg_scatter = scatter;
  plan.wg_sc_clo = int(sc_clo);
  plan.wg_wmerge = wmerge;
  plan.wg_wpairs = wpairs;
  plan.wg_tsplit = tsplit;
  // (Two consumer warpgroups: a staging area for each warp of both.)
  plan.wg_epi_bytes = int(epi_bytes * (two_wg ? 2 : 1));
  plan.wg_used = best_used;
  for (int d = 0; d < 3; ++d) plan.wg_tmax[d] = int(tmax[d]);
  plan.wg_cblocks = int((cig + plan.wg_bk - 1) / plan.wg_bk);
  // Weight tiles resident in the stages: where a tile's K steps (the widest phase's D taps
  // x H blocks x channel blocks, times the W phases a merged tile runs) are no more than
  // the stages, the stages become the fewest (at least two) that are a multiple of them, so
  // that every K step k of a block's next tile takes the stage that holds its weight tiles
  // (the same ones where the group, channel tile and phase are the same) and the producer
  // copies only the input box; more stages would only hold more boxes in flight, and fewer
  // take less shared memory, which can let more blocks share a multiprocessor (measured on
  // an H100: kb72 and kb75 17-23% faster than with the stages as chosen, which the most
  // stages that are a multiple were not; docs/kernels.md). Where a
  // tile's K steps are more than its stages, each stage is overwritten within the tile and
  // there is nothing to keep. CONVT_WG_STAGE_ALIGN=max takes the most such stages instead,
  // =0 keeps the stages and copies every weight tile.
  {
    // CONVT_WG_MAX_STAGES=S (being measured): at most S stages, at least two.
    const int64_t cap = wg_env_int("CONVT_WG_MAX_STAGES");
    if (cap >= 2 && plan.wg_stages > cap) plan.wg_stages = int(cap);
  }
  {
    const int64_t steps = tmax[0] * ((tmax[1] + plan.wg_hb - 1) / plan.wg_hb) *
                          plan.wg_cblocks * (wmerge || wpairs ? p.stride[2] : 1) *
                          (tsplit ? tmax[2] : 1);
    plan.wg_steps = int(std::min<int64_t>(steps, INT_MAX));
    const char* align_s = std::getenv("CONVT_WG_STAGE_ALIGN");
    const bool off = align_s != nullptr && align_s[0] == '0';
    const bool most = align_s != nullptr && std::strcmp(align_s, "max") == 0;
    if (!off && steps <= plan.wg_stages) {
      plan.wg_stages = most ? int(plan.wg_stages / steps * steps) : int(std::max<int64_t>(steps, 2));
      plan.wg_w_resident = true;
    }
  }
  // The MMAs' reads from the last stage (wg_a_bytes) within the block's shared memory: where
  // they are not (boxes far smaller than the tile's positions, and large stages), fewer
  // stages.
  plan.wg_coop = two_wg;
  plan.wg_coop_n = coop_n;
  const std::size_t smem_max = std::size_t(two_wg ? wg::kCoopSmem : wg::kBlockSmem);
  while (wgmma_shared_bytes(plan) > smem_max && plan.wg_stages > 2) {
    --plan.wg_stages;
    plan.wg_w_resident = plan.wg_w_resident && plan.wg_stages % plan.wg_steps == 0;
  }
  if (wgmma_shared_bytes(plan) > smem_max)
    return no("the MMAs' reads past the box leave no two stages");
  // (Tiles along the channels: of 128 with two consumer warpgroups; the packed weight's
  // tiles, pk_co_tiles, stay of cw.)
  const int64_t pk_co_tiles = (cog + cw / mfold - 1) / (cw / mfold);
  const int64_t co_tiles = coop ? pk_co_tiles / 2 : pk_co_tiles;
  // (Scattered W taps: one W phase; merged W phases: a tile runs them all.)
  const int64_t phases =
      p.stride[0] * p.stride[1] * (scatter || wmerge || wpairs ? 1 : p.stride[2]);
  const int64_t all_phases = p.stride[0] * p.stride[1] * (scatter ? 1 : p.stride[2]);
  const int64_t segs = (q[2] + best_wv - 1) / best_wv;
  const int64_t row_groups = (q[1] + rmul * best_rows - 1) / (rmul * best_rows);
  // (Stacked planes: a tile per group of wg_stack samples or D positions.)
  const int64_t batch_tiles = plan.wg_stack_n ? (p.batch + plan.wg_stack - 1) / plan.wg_stack
                                              : p.batch;
  const int64_t d_tiles = plan.wg_stack_n ? q[0] : (q[0] + plan.wg_stack - 1) / plan.wg_stack;
  const int64_t tiles = p.groups * co_tiles * phases * batch_tiles * d_tiles * row_groups * segs;
  if (tiles > INT_MAX - (int64_t(1) << 22)) return no("too many tiles");
  const int64_t chunks = int64_t(plan.wg_cblocks) * plan.wg_bk / kc;
  if (copies * p.batch * p.groups * plan.wg_cblocks >= (int64_t(1) << 31))
    return no("too many channel blocks for a tensor map");
  plan.wg_tiles = tiles;
  const int64_t wbytes = copies * p.groups * pk_co_tiles * all_phases * tmax[0] * plan.wg_cblocks *
                         tmax[1] * wtaps * cw * plan.wg_bk * e;
  // The input copy (raw: room for the padded copy of an input a tensor map cannot read as
  // it is, see wgmma_input_in_place).
  const int64_t xbytes =
      raw ? p.batch * p.in_channels * p.input_size[0] * p.input_size[1] *
                round_up(p.input_size[2], kc) * e
          : copies * p.batch * p.groups * chunks * 16 * p.input_size[0] * p.input_size[1] *
                p.input_size[2];
  plan.wg_xt_offset = std::size_t(round_up(wbytes, 256));
  plan.wg_counter_offset = std::size_t(round_up(int64_t(plan.wg_xt_offset) + xbytes, 256));
  // The copier warps' chunks: 32 KB of the copy per channel block (at least 64 positions).
  plan.wg_copy_chunk = int(std::max<int64_t>(64, 32768 / (int64_t(plan.wg_bk) * e)));
  const int64_t plane = p.input_size[0] * p.input_size[1] * p.input_size[2];
  plan.wg_chunk_done_offset = plan.wg_counter_offset + 256;
  plan.wg_chunk_done_bytes =
      raw || copies > 1
          ? 0
          : std::size_t(round_up(
                4 * p.batch * p.groups * ((plane + plan.wg_copy_chunk - 1) / plan.wg_copy_chunk),
                256));
  // The copy made by the copier warps while the tiles run (wg::Params::fused), in place of
  // the copy kernel before them: channel-major tiles reading the copy (not transposed in the
  // kernel, no W taps folded, no W phase pairs), rows of 32 columns or more (a warp's
  // loads), and at least 512 multiply-adds per input element in float as TF32, 1024 in
  // 16-bit types (twice the MMAs per second), so that the copy keeps ahead of the tiles that
  // wait for it; inputs of 64 MB or more (where it was measured: small layers' first tiles
  // would wait for the first chunks with little to overlap, not measured yet). Measured on
  // an H100 against the copy kernel (docs/kernels.md): kb57 0.82x, kb65 0.85x, kb69 0.91x,
  // kb61 0.93x of the time, kb68 0.96x in float32; slower at 384 per element (kb64 1.1x:
  // the copier warps fall behind). In 16-bit types only with 16-byte loads of 8 positions
  // (wg_copy_vec; 4-byte loads of pairs were 1.3x-4x slower than the copy kernel): on an
  // H200, bf16 kb61 0.86x, kb65 0.87x, kb69 0.95x, kb68 0.98x of the time.
  // CONVT_WG_FUSED_COPY=0 runs the copy kernel everywhere, =1 takes the copier warps
  // wherever they can run, with any load width.
  {
    const char* fc = std::getenv("CONVT_WG_FUSED_COPY");
    const int fc_env = fc != nullptr && (fc[0] == '0' || fc[0] == '1') ? fc[0] - '0' : -1;
    const double macs =
        double(cog) * double(p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2]);
    const bool can = plan.wg_chunk_done_bytes > 0 && !plan.wg_xp && nc == 0 && fold == 1 &&
                     !wpairs && !wmerge && !scatter;
    const double input_bytes = double(p.batch) * double(p.in_channels) * double(plane) * e;
    plan.wg_copy_fused =
        can && (fc_env == 1 || (fc_env != 0 && macs >= (e == 4 ? 512 : 1024) &&
                                p.input_size[2] >= 32 && input_bytes >= 64.0 * (1 << 20)));
    plan.wg_copy_vec = plan.wg_copy_fused && e == 2 && fc_env != 1;
  }
  plan.wg = true;
  plan.workspace_bytes = std::max(plan.workspace_bytes,
                                  plan.wg_chunk_done_offset + plan.wg_chunk_done_bytes);
}

// The multiprocessors of the current device (132 on H100 SXM and H200; 132 where there is
// none, for the planner's tests), kept per device.
int wgmma_planner_sms() {
  static std::atomic<int> kept[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 132;
  }
  int sms = dev >= 0 && dev < 64 ? kept[dev].load(std::memory_order_relaxed) : 0;
  if (sms > 0) return sms;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      sms <= 0) {
    (void)cudaGetLastError();
    return 132;
  }
  if (dev >= 0 && dev < 64) kept[dev].store(sms, std::memory_order_relaxed);
  return sms;
}

// The tile (plan_wgmma_tile_capped): with two consumer warpgroups where they can run and the
// input is not transposed in the kernel (which they do not do), and with fewer positions a
// channel-major tile where that fills the machine better.
//
// Two consumer warpgroups (tiles of 128 channels sharing each K step's box): the box moves
// from L2 into shared memory once per 128 output channels instead of once per 64. Measured
// on an H100 against one warpgroup (docs/kernels.md, GPU time): U-Net's 1024 -> 512 layer
// 0.135 -> 0.102 ms in float32, 0.072 -> 0.057 in bfloat16; the 3-D U-Net's 256 -> 256
// 0.106 -> 0.095; DCGAN 512 -> 256 0.098 -> 0.087 (float32), 100 -> 512 0.043 -> 0.036
// (bfloat16); kb64 3.54 -> 3.34 and kb69 2.06 -> 2.01 in float32, kb69 1.38 -> 1.32 in
// bfloat16; the video GAN's 2 x 4 x 4 layer 3% slower; kb64 in bfloat16, transposed in the
// kernel, 1.75 ms against 1.86 with the copy and two warpgroups (so the transposition
// stays). CONVT_WG_COOP=0 keeps one warpgroup, =1 takes two wherever they can run.
//
// Fewer positions: a call of few tiles takes about waves x a tile's time (waves = ceil(tiles /
// slots), slots the blocks resident at once: two per multiprocessor, as the stages are
// sized, one with two warpgroups), which a smaller N can shorten: where the tiles are fewer
// than the slots, each block runs one tile, and a smaller N shortens it as long as its
// tiles still fit; where they make a few waves, the last one partial, a smaller N may fill
// it. Of the N choices, the least waves x N (the largest N on a tie; from two waves on, only
// where it is at least 10% less, since smaller tiles move more bytes per multiply-add), up
// to CONVT_WG_FILL_WAVES waves of the largest N (default 4; 1: only plans of fewer tiles
// than slots). DCGAN's 100 -> 512 layer at batch 128 (4 x 4 planes stacked): 152 tiles of
// 208 positions or 256 of 128, measured on an H100 (docs/kernels.md): 0.050 -> 0.042 ms in
// float32, 0.046 -> 0.042 in bfloat16. Position-major tiles have one N. CONVT_WG_FILL=0
// keeps the largest N.
static void plan_wgmma_tile_as(const Problem& p, ImplicitGemmFpropPlan& plan, bool raw,
                               bool wmerge, bool wpairs, bool xp_ok, bool tsplit) {
  const ImplicitGemmFpropPlan in = plan;
  const char* ce = std::getenv("CONVT_WG_COOP");
  const int coop_env = ce != nullptr && (ce[0] == '0' || ce[0] == '1') ? ce[0] - '0' : -1;
  plan_wgmma_tile_capped(p, plan, raw, wmerge, wpairs, xp_ok, 0, coop_env == 1, tsplit);
  // (Two warpgroups with the copy beat the float32 H-complete step transposed in the
  // kernel: it ran 0.76x as fast over the 27 layers of scripts/suites/xp_hfull_fuzz.json
  // where it took their place.)
  if (coop_env == -1 && plan.wg && (!plan.wg_xp || plan.wg_xp_hfull) && plan.wg_nc == 0) {
    ImplicitGemmFpropPlan c = in;
    plan_wgmma_tile_capped(p, c, raw, wmerge, wpairs, xp_ok, 0, true, tsplit);
    if (c.wg && c.wg_coop) plan = c;
  } else if (coop_env == -1 && plan.wg && plan.wg_xp && !plan.wg_coop && plan.wg_nc == 0 &&
             xp_coop_mode() != 0) {
    // (Two warpgroups sharing the box the transposer fills, where the one-warpgroup plan
    // transposes in the kernel and they can run with it: xp_coop_mode.)
    ImplicitGemmFpropPlan c = in;
    plan_wgmma_tile_capped(p, c, raw, wmerge, wpairs, xp_ok, 0, true, tsplit);
    if (c.wg && c.wg_coop && c.wg_xp) plan = c;
  }
  // Tiles of more rows where an H-complete K step transposed in the kernel then runs: the
  // planner lays out its tiles by the positions they use, widest first, and the
  // H-complete step takes only a box of at most twice the tile's rows, so a layer of wide
  // rows with a 1-row tile loads each input row once per H tap (kb57: 1 row x 206 columns, 3
  // H taps, steps of 1 H tap; with 4 rows x 54 the box is 6 rows, every H tap a step, no
  // input copy in float32). The tile of at least (H taps - 1) x the H tap offset rows,
  // wherever the H-complete step transposed in the kernel then plans and did not. Measured
  // on an H100 (GPU time, against the widest tiles): 1.248x float32 / 1.319x bfloat16 over
  // the 82 / 55 fuzzed layers it changes (scripts/suites/xp_rows_{fp32,bf16}.json; 73 / 50
  // faster, 6 / 2 slower by more than 3%, none below 0.87x), kb57 1.21x / 1.19x.
  // CONVT_WG_XP_ROWS=0 keeps the widest tiles.
  if (wg_env_int_or("CONVT_WG_XP_ROWS", 1) != 0 && plan.wg && xp_ok && !tsplit && !raw &&
      !wmerge && plan.wg_tmax[0] == 1 && plan.wg_tmax[1] > 1 &&
      !(plan.wg_xp && plan.wg_hb >= plan.wg_tmax[1])) {
    const int64_t doff_h = p.dilation[1] / std::gcd(p.stride[1], p.dilation[1]);
    const int64_t need = (plan.wg_tmax[1] - 1) * doff_h;
    if (need > plan.wg_rows) {
      ImplicitGemmFpropPlan c = in;
      plan_wgmma_tile_capped(p, c, raw, wmerge, wpairs, xp_ok, 0, coop_env == 1, tsplit, need);
      if (c.wg && c.wg_xp && c.wg_hb >= c.wg_tmax[1]) plan = c;
    }
  }
  // The transposition in the kernel over pair-aligned layouts (CONVT_WG_XP_OVER_EVEN=1,
  // opt-in): where the aligned layout's plan copies the input and the layout without
  // alignment transposes it in the kernel (kb70 in bfloat16: 11 rows x 20 of a 13 x 22 box,
  // whose 22 columns fill too little of the pieces' 32, against 5 x 49 of 7 x 51), the
  // latter. Measured slower on an H100 (docs/kernels.md): kb70 in bfloat16 0.89x, 0.99x and
  // 1.02x over 82 fuzzed layers it changes (float32, bfloat16).
  if (wg_env_int_or("CONVT_WG_XP_OVER_EVEN", 0) == 1 && plan.wg && !plan.wg_xp && xp_ok &&
      !tsplit && !raw) {
    ImplicitGemmFpropPlan c = in;
    plan_wgmma_tile_capped(p, c, raw, wmerge, wpairs, xp_ok, 0, coop_env == 1, tsplit, 0, true);
    if (c.wg && c.wg_xp) plan = c;
  }
  const char* fill = std::getenv("CONVT_WG_FILL");
  if (!plan.wg || plan.wg_nc != 0 || wg_env_int("CONVT_WG_N") > 0 ||
      (fill != nullptr && fill[0] == '0'))
    return;
  // (Two consumer warpgroups: one block a multiprocessor.)
  const int64_t slots = (plan.wg_coop ? 1 : 2) * int64_t(wgmma_planner_sms());
  const int64_t waves_env = wg_env_int("CONVT_WG_FILL_WAVES");
  const int64_t max_waves = waves_env > 0 ? waves_env : 4;
  const int64_t waves = (plan.wg_tiles + slots - 1) / slots;
  if (plan.wg_tiles >= slots * max_waves) return;
  const int64_t n0 = plan.wg_n;
  int64_t best = waves * n0;
  for (int i = wg::kNumN - 1; i >= 0; --i) {
    const int64_t n = wg::n_choice(i);
    if (n >= n0) continue;
    ImplicitGemmFpropPlan c = in;
    plan_wgmma_tile_capped(p, c, raw, wmerge, wpairs, xp_ok, n, plan.wg_coop && !plan.wg_coop_n,
                           tsplit);
    if (!c.wg || c.wg_n > n || c.wg_coop != plan.wg_coop) continue;
    const int64_t est = (c.wg_tiles + slots - 1) / slots * c.wg_n;
    // (From two waves on: at least 10% less than the largest N's.)
    if (est < best && (waves == 1 || 10 * est <= 9 * waves * n0)) {
      best = est;
      plan = c;
    }
  }
}

// The tile as planned above, or with its taps split (ImplicitGemmFpropPlan::wg_tsplit)
// where that computes far fewer dropped positions. A K step with several taps loads one box
// for all of them, their halo included (a W tap's columns, an H tap's rows), and the tile's
// positions run over the box's flattened rows, the halo's too: where the planes are small
// (a DCGAN layer's 8 x 8 phases, 8 x 9 boxes two to a 192-position tile, 67% of the
// positions used) the halo is a large share of the MMAs, and stacked planes leave gaps.
// With the taps split the box is the tile's rows x columns exactly, loaded once per tap (a
// phase of 2 x 2 taps loads four boxes a channel block instead of two), and whole planes
// stack without gaps (four 8 x 8 planes in 256 positions, all used).
// Opt-in while it is measured: CONVT_WG_TSPLIT=1 takes it wherever it plans; =2 for
// channel-major tiles where it uses at least 1.2x the positions of the plan above (wg_used,
// stacked planes counted); unset or 0, nowhere.
static void plan_wgmma_tile(const Problem& p, ImplicitGemmFpropPlan& plan, bool raw = false,
                            bool wmerge = false, bool wpairs = false, bool xp_ok = true) {
  const ImplicitGemmFpropPlan in = plan;
  plan_wgmma_tile_as(p, plan, raw, wmerge, wpairs, xp_ok, false);
  const int ts_env = wg_env_int_or("CONVT_WG_TSPLIT", 0);
  if ((ts_env != 1 && ts_env != 2) || raw || wmerge || wpairs || (plan.wg && (plan.wg_fold > 1 || plan.wg_scatter)))
    return;
  // (Nothing to split where every phase has one tap; position-major tiles, whose box is
  // the MMAs' A operand over a few channels, would load it once per tap for a few
  // multiply-adds a byte: only where asked.)
  if (plan.wg && (plan.wg_tmax[1] * plan.wg_tmax[2] == 1 || (plan.wg_nc > 0 && ts_env != 1)))
    return;
  ImplicitGemmFpropPlan t = in;
  plan_wgmma_tile_as(p, t, raw, wmerge, wpairs, xp_ok, true);
  if (!t.wg) return;
  if (ts_env == 1 || !plan.wg || t.wg_used >= 1.2 * plan.wg_used) plan = t;
}

// Split K (ImplicitGemmFpropPlan::wg_splits): the K steps of channel-major plans of fewer
// tiles than multiprocessors in as many parts as fill them, at most 16 and at least 4 K
// steps a part; CONVT_WG_SPLIT_K=0 splits nothing, =S (2 to 16) asks for S parts wherever
// split K can run (tests). A tile's parts then run on different blocks, each storing its
// float32 sums, and the last part adds them in part order (deterministic) before the
// epilogue: layers of a few deep tiles (batch 1 at low resolution: pix2pix 1024 -> 512 at
// 4 x 4 makes 8 tiles of 64 K steps) would otherwise leave most multiprocessors idle. The
// workspace's partial sums: at most a tile of float32 sums a multiprocessor.
static void plan_wgmma_split_k(const Problem& p, ImplicitGemmFpropPlan& plan) {
  plan.wg_splits = 1;
  const char* env_s = std::getenv("CONVT_WG_SPLIT_K");
  const int env = env_s != nullptr && env_s[0] != '\0' ? std::atoi(env_s) : 1;
  if (env <= 0 || !plan.wg || plan.wg_nc != 0 || plan.split || plan.wg_wmerge ||
      plan.wg_wpairs || plan.wg_steps < 2)
    return;
  // (The multiprocessors, not the slots: two blocks sharing one run at about half speed
  // each, so that parts beyond one a multiprocessor shorten nothing.)
  const int64_t sms = int64_t(wgmma_planner_sms());
  int64_t splits = 1;
  if (env >= 2) {
    splits = std::min<int64_t>({env, 16, plan.wg_steps});
  } else if (plan.wg_tiles < sms) {
    splits = std::min<int64_t>({16, sms / std::max<int64_t>(plan.wg_tiles, 1),
                                plan.wg_steps / 4});
  }
  if (splits < 2 || plan.wg_tiles * splits > INT_MAX - (int64_t(1) << 22)) return;
  const int64_t groups = plan.wg_coop ? 2 : 1;
  plan.wg_splits = int(splits);
  plan.wg_split_done_offset = std::size_t(round_up(int64_t(plan.workspace_bytes), 256));
  plan.wg_partials_offset = std::size_t(
      round_up(int64_t(plan.wg_split_done_offset) + 4 * plan.wg_tiles * groups, 256));
  plan.workspace_bytes = plan.wg_partials_offset +
                         std::size_t(plan.wg_tiles * splits * groups * 128 * (plan.wg_n / 2) * 4);
  (void)p;
}

// p with zeros inserted along W, wup - 1 between neighbouring input columns, and W stride
// 1: output column o then reads upsampled column o + pad - k * dil for tap k, which holds
// input column (o + pad - k * dil) / s where s divides it and zero elsewhere, the strided
// convolution's terms exactly. Output sizes are unchanged.
static Problem w_upsampled(const Problem& p, int64_t wup) {
  Problem u = p;
  u.input_size[2] = (p.input_size[2] - 1) * wup + 1;
  u.stride[2] = 1;
  return u;
}

// p with m consecutive groups run as one (m divides the groups): the same tensors, the
// weight block-diagonal within a merged group (wgmma_pack_params).
static Problem groups_merged(const Problem& p, int64_t m) {
  Problem u = p;
  u.groups = p.groups / m;
  return u;
}

Problem wgmma_problem(const ImplicitGemmFpropPlan& plan, const Problem& p) {
  const Problem g = plan.wg_gmerge > 1 ? groups_merged(p, plan.wg_gmerge) : p;
  return plan.wg_wup > 1 ? w_upsampled(g, plan.wg_wup) : g;
}

// Whether p stays memory-bound with its MMAs multiplied by the W stride (zeros inserted
// along W): their count over the bytes the problem must move (input, weight, output once
// each) at most the machine balance of sm_90 (H100/H200: dense TF32 494.7 TFLOP/s,
// 16-bit 989.4, against about 4 TB/s: 120 and 240 operations per byte; split TF32 runs
// three MMAs per product: 40), scaled for position-major tiles of nc channels (nc > 0) by
// their operations per byte of shared memory against the channel-major tile's
// (nc / (64 + nc) against 128 / 192: 0.5 at 32 channels, 0.17 at 8), which bound them.
// Measured on an H200 (docs/kernels.md): 1.45x-2.76x faster on kb75, kb77, kb79 and kb81,
// slower on the position-major kb72 and kb73 that the scaling excludes.
static bool memory_bound_with_w_zeros(const Problem& p, bool split, int nc) {
  const double bytes = double(p.input_numel() + p.weight_numel() + p.output_numel()) *
                       double(dtype_size(p.dtype));
  double balance = p.dtype != DType::kFloat32 ? 240.0 : split ? 40.0 : 120.0;
  if (nc > 0) balance *= 1.5 * double(nc) / double(64 + nc);
  return p.flops() * double(p.stride[2]) <= balance * bytes;
}

std::size_t wgmma_shared_bytes(const ImplicitGemmFpropPlan& plan) {
  const int epi = std::max(plan.wg_epi_bytes, wg::kEpiBytes);
  const std::size_t layout =
      plan.wg_xp ? std::size_t(wg::xp_area_offset(plan.wg_stages, plan.wg_stage_bytes, epi,
                                                  plan.wg_coop ? 2 : 1)) +
                       std::size_t(plan.wg_xp_pieces) * plan.wg_xp_piece_bytes +
                       wg::kXpMetaBytes
                 : std::size_t(plan.wg_stages) * plan.wg_stage_bytes +
                       wg::kMaxStages * wg::kHeaderBytes + std::size_t(epi) +
                       wg::kInfoBytes * (plan.wg_coop ? 2 : 1) + wg::kBarrierBytes;
  // (The last stage's MMAs read wg_a_bytes from its start; both terms grow by stage_bytes a
  // stage, so that the launch may take stages off by stage_bytes each.) 1024: the stages'
  // alignment.
  const std::size_t reads =
      std::size_t(std::max(plan.wg_stages - 1, 0)) * plan.wg_stage_bytes + plan.wg_a_bytes;
  return std::max(layout, reads) + 1024;
}

std::size_t wgmma_max_shared_bytes(const ImplicitGemmFpropPlan& plan) {
  return plan.wg_coop ? wg::kCoopSmem : wg::kBlockSmem;
}

// The dispatcher takes the wgmma kernel only where its tile computes at least this share of
// its positions for outputs (see plan_implicit_gemm_fprop); with planes stacked in the tile,
// at least kWgmmaMinUsedStacked: measured on an H100 (docs/kernels.md, "Short rows"), the
// video GAN's 512 -> 256 layer (2 x 4 x 4 inputs, two D planes a tile, 25% used) runs 1.34x
// (float32) and 1.94x (bfloat16) faster stacked than on the gather kernel; unstacked tiles
// at 13% were 1.6x-1.9x slower than it (H200, before planes stacked). Not in strict float32,
// whose split TF32 triples the MMAs of the dropped positions: the same layer 0.583 -> 0.653
// ms stacked (H100).
static constexpr double kWgmmaMinUsed = 0.35, kWgmmaMinUsedStacked = 0.2,
                        kWgmmaMinUsedVolume = 0.18;

namespace {

ImplicitGemmFpropPlan plan_uncached(const Problem& p, const ExecOptions& options);

// The planner's inputs besides the problem: the options it reads and the CONVT_*
// variables of the environment (several are read at every call, so that tests can switch
// them), as one fingerprint: a pass over the environment for the CONVT_ entries, cheaper
// than the planner's own reads of each (a linear scan of the environment per variable,
// several dozen per plan).
struct PlanKey {
  int spatial_dims;
  int64_t batch, in_channels, out_channels, groups;
  Dims input_size, kernel_size, stride, padding, output_padding, dilation;
  bool has_bias;
  DType dtype;
  MathMode math;
  ForwardKernel kernel;
  uint64_t env;
  int sms;
  bool operator==(const PlanKey& o) const {
    return spatial_dims == o.spatial_dims && batch == o.batch && in_channels == o.in_channels &&
           out_channels == o.out_channels && groups == o.groups && input_size == o.input_size &&
           kernel_size == o.kernel_size && stride == o.stride && padding == o.padding &&
           output_padding == o.output_padding && dilation == o.dilation &&
           has_bias == o.has_bias && dtype == o.dtype && math == o.math && kernel == o.kernel &&
           env == o.env && sms == o.sms;
  }
};

uint64_t convt_env_fingerprint() {
  uint64_t h = 1469598103934665603ull;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* v = *e;
    if (std::strncmp(v, "CONVT_", 6) != 0) continue;
    for (; *v != '\0'; ++v) h = (h ^ static_cast<unsigned char>(*v)) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // (entry separator)
  }
  return h;
}

}  // namespace

bool gemm_fold_wanted(const Problem& p, MathMode math) {
  if (p.dtype == DType::kFloat64) return false;
  const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
  const int64_t cog = p.out_channels_per_group(), cig = p.in_channels_per_group();
  if (cog > 4) return false;
  // (Measured forced against off with the cp.async GEMM, H200, on the three fuzzed draws of
  // 40 layers of 1-4 output channels, docs/kernels.md "GEMM and fold".) Strict float32,
  // whose other kernels run on the CUDA cores: all 106 layers of 64 input channels a group
  // or more ran faster, 1.04-18.5x; shallower ones lost as often as they won (7 of 14).
  if (p.dtype == DType::kFloat32 && math == MathMode::kStrictFP32) return cig >= 64;
  // Float32 with TF32, 100 input channels a group or more: 85 of 95 layers faster (1.05-
  // 12.7x, geomean 1.81x), the others at 0.75-0.98x. Shallower layers lost (21 of 25, at
  // 0.31-0.95x). On a fourth draw, checked after, those of 3-4 output channels whose rows
  // fill several 64-row tiles lost as often as they won (5 of 10, at 0.44-0.98x; the wgmma
  // kernel's 8-channel tiles waste little there): gemm_fold_wanted_over decides those.
  if (p.dtype == DType::kFloat32) return cig >= 100 && (cog <= 2 || cog * taps <= 64);
  // 16-bit types, where the wgmma kernel's tiles are cheaper: the (channel, tap) rows within
  // one 64-row tile, 100 input channels or more (58 of 65 layers faster, 1.05-3.1x, the
  // others at 0.74-0.97x); over several row tiles 13 of 30 were faster
  // (gemm_fold_wanted_over takes some).
  return cig >= 100 && cog * taps <= 64;
}

bool gemm_fold_wanted_over(const Problem& p, const ImplicitGemmFpropPlan& plan) {
  if (p.dtype == DType::kFloat64 || !plan.usable) return false;
  const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
  const int64_t cog = p.out_channels_per_group(), cig = p.in_channels_per_group();
  if (cog > 4) return false;
  // The mma.sync kernels (gather or TMA) tile 64 or more output channels, of which these
  // layers fill at most 4; GEMM and fold's rows are (channel, tap) pairs, filled but for
  // the last tile's padding. Measured (H200, bfloat16): the one such layer of 100 input
  // channels or more of the few-output draws ran 10.8x faster (160 -> 1, 7 x 3 x 5 taps).
  if (!plan.wg) return cig >= 100;
  if (cig < 100 || cog * taps <= 64) return false;
  // What each side moves: the wgmma tiles' boxes (L2 -> shared memory, every K step's),
  // against the GEMM's input read once per 64-row tile plus the products' round trip.
  const double e = double(dtype_size(p.dtype));
  const double in_bytes = double(p.input_numel()) * e;
  const double boxes = double(plan.wg_tiles) * plan.wg_steps * plan.wg_box_bytes *
                       (plan.split ? 2 : 1) * (plan.wg_coop_n ? 2 : 1);
  const double plane = double(p.input_size[0] * p.input_size[1] * p.input_size[2]);
  const double fold = in_bytes * double((cog * taps + 63) / 64) +
                      2.0 * 4.0 * double(p.batch * p.out_channels * taps) * plane;
  // (Measured on the first two few-output draws, H200, docs/kernels.md "GEMM and fold":
  // every layer of several row tiles whose boxes moved at least 3.5x that, on inputs of
  // 32 MB or more, ran 1.07-9.2x faster as GEMM and fold; a smaller input lost, 0.53-0.75x.
  // On the third draw it took 4 layers in float32, 1.5-4.6x, and 4 in bfloat16, 2.2-5.8x.)
  return in_bytes >= 32e6 && boxes >= 3.5 * fold;
}

// Plans are kept per thread for the last few (problem, options, environment) they were
// made for: a call plans up to three times (its workspace, its weight re-layout, its
// launch) and a model's layers come back at every step. A plan depends on nothing else
// but the current device's multiprocessor count (plan_wgmma_tile; the launch checks the
// rest of the device).
ImplicitGemmFpropPlan plan_implicit_gemm_fprop(const Problem& p, const ExecOptions& options) {
  const PlanKey key{p.spatial_dims,   p.batch,      p.in_channels, p.out_channels,
                    p.groups,         p.input_size, p.kernel_size, p.stride,
                    p.padding,        p.output_padding, p.dilation, p.has_bias,
                    p.dtype,          options.math, options.forward_kernel,
                    convt_env_fingerprint(), wgmma_planner_sms()};
  constexpr int kKept = 16;
  thread_local std::vector<std::pair<PlanKey, ImplicitGemmFpropPlan>> kept;
  thread_local int next = 0;
  for (const auto& k : kept)
    if (k.first == key) return k.second;
  ImplicitGemmFpropPlan plan = plan_uncached(p, options);
  if (int(kept.size()) < kKept) {
    kept.emplace_back(key, plan);
  } else {
    kept[size_t(next)] = {key, plan};
    next = (next + 1) % kKept;
  }
  return plan;
}

namespace {

// few_channels: fewer than 8 input channels per group allowed (plan_uncached's padded
// plans; see there).
ImplicitGemmFpropPlan plan_as_given(const Problem& p, const ExecOptions& options,
                                    bool few_channels = false) {
  ExecOptions opt = options;
  if (opt.forward_kernel == ForwardKernel::kAuto) opt.forward_kernel = forward_kernel_from_env();
  ImplicitGemmFpropPlan plan;
  auto no = [&](const char* why) {
    plan.usable = false;
    plan.reason = why;
    return plan;
  };
  if (opt.forward_kernel == ForwardKernel::kDirect) return no("direct kernel requested");
  if (p.dtype == DType::kFloat64) return no("float64 has no tensor-core path");
  // Strict float32 runs the same kernels in split TF32 (three MMAs per step).
  plan.split = p.dtype == DType::kFloat32 && opt.math == MathMode::kStrictFP32;
  // The kernels keep spatial coordinates, strides and tap arithmetic in 32 bits.
  const Dims out = p.output_sizes();
  for (int d = 0; d < 3; ++d) {
    const int64_t limit = int64_t(1) << 30;
    if (p.input_size[d] >= limit || out[d] + p.stride[d] >= limit ||
        p.padding[d] + p.kernel_size[d] * p.dilation[d] >= limit ||
        p.stride[d] * p.dilation[d] >= limit)
      return no("spatial sizes or strides beyond 32-bit tap arithmetic");
  }
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  if (cig < 8 && !few_channels) return no("fewer than 8 input channels per group");
  plan.block_k = cig > 16 ? 32 : 16;
  plan.cig_pad = round_up(cig, plan.block_k);
  plan.cog_pad = round_up(cog, igemm::kBlockM);
  if (p.groups * (plan.cog_pad / igemm::kBlockM) > 65535) return no("too many groups");
  const Dims q = phase0_positions(p);
  int64_t phases = 1;
  for (int d = 0; d < 3; ++d) phases *= p.stride[d];
  const int64_t ptiles = (p.batch * q[0] * q[1] * q[2] + igemm::kBlockN - 1) / igemm::kBlockN;
  if (ptiles * phases > INT_MAX) return no("grid too large");
  const int64_t packed = p.groups * p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2] *
                         plan.cig_pad * plan.cog_pad;
  plan.workspace_bytes = static_cast<std::size_t>(packed) * dtype_size(p.dtype);
  plan.usable = true;
  // The dispatcher's wgmma tile was declined for the positions it would drop (below).
  bool wg_sparse = false;
  // (The stacked tile was declined for the TMA kernel's half-full W segments.)
  bool stack_declined = false;
  // (The wgmma plan was declined for its few K steps per block, and its workspace: kept for
  // where the TMA kernel cannot run the problem either.)
  bool wg_few_steps = false;
  std::size_t wg_few_steps_ws = 0;

  // The TMA-fed kernel: tile of 128 positions x BN channels x BK input channels. Its packed
  // weight (channels padded to BK and BN <= 64) never exceeds the workspace above.
  // The persistent wgmma kernel (sm_90a). Its fixed costs (the input copy, a tile's
  // producer stages and epilogue) are paid back by deep K loops, and narrow groups gain
  // from its position-major tiles (the TMA kernel's tile has at least 32 channels). With
  // K the reduction length of an average phase (input channels per group x taps /
  // phases), measured on an H200 against the TMA kernel (docs/kernels.md), it is ahead
  // in 16-bit types from K = 64 or with at most 16 output channels per group; in float32
  // as TF32 (where the copy moves twice the bytes and the TMA kernel's mma.sync does
  // well on 32 channels) from K = 384 with 48 or more output channels per group (K = 128
  // without a stride: one phase, whose stores are whole rows), from K = 1024, or with at
  // most 16 channels; in strict float32 (split TF32 on both, three MMAs
  // per step) from K = 128, from K = 96 with 48 or more channels, or with at most 16
  // channels. The dispatcher picks it there;
  // CONVT_FORWARD_KERNEL=implicit_gemm_wgmma asks for it anywhere.
  //
  // A W stride s > 1 splits every output row into s phases, each stored by its own tiles
  // at every s-th column: s partial writes per 32-byte sector, which bound the strided
  // cases by L2 store throughput (Nsight Compute on an H200: kb81, stride 5, 2.1e8 L2
  // sector writes for 2.6e7 sectors of output, L2 85% busy). Where the problem stays
  // memory-bound with s times the MMAs, the kernel runs it with zeros inserted along W
  // instead (W stride 1, whole output rows per tile; ImplicitGemmFpropPlan::wg_wup).
  // CONVT_WG_WUP=0 turns that off, CONVT_WG_WUP=1 asks for it wherever W is strided, =2
  // without the limits below on the input's size and the W phase pairs.
  if (opt.forward_kernel == ForwardKernel::kAuto ||
      opt.forward_kernel == ForwardKernel::kImplicitGemmWgmma) {
    const std::size_t mma_workspace = plan.workspace_bytes;
    const ImplicitGemmFpropPlan before_wgmma = plan;
    bool upsampled = false, scattered = false, merged = false;
    // W phases merged: CONVT_WG_WMERGE=1 asks for them in a shared buffer
    // (ImplicitGemmFpropPlan::wg_wmerge) wherever W is strided, =2 for the W phase pairs in
    // registers (wg_wpairs) wherever they can run, before anything else; =0 turns the pairs
    // off. By default the pairs take the place of the unmerged tiles (below).
    const char* wm_s = std::getenv("CONVT_WG_WMERGE");
    const int wm_env = wm_s != nullptr && *wm_s != '\0' ? std::atoi(wm_s) : -1;
    if (p.stride[2] > 1) {
      if (wm_env == 1 || wm_env == 2) {
        // (2: the W phase pairs in registers, ImplicitGemmFpropPlan::wg_wpairs.)
        ImplicitGemmFpropPlan m = plan;
        plan_wgmma_tile(p, m, false, wm_env == 1, wm_env == 2);
        if (m.wg) {
          plan = m;
          merged = true;
        }
      }
    }
    if (p.stride[2] > 1 && !merged) {
      // Scattered W taps, where the planner takes them, run before zeros inserted along W,
      // except with a W stride of 2 where the W phase pairs would transpose the input in the
      // kernel (the scattered tiles read the copy) and their boxes hold at most 4x the
      // input's bytes: the transposition then costs less than the copy it saves (a read and
      // a write of the input). Measured on an H100 (docs/kernels.md, "W phase pairs
      // transposed in the kernel over scattered W taps"), bfloat16, the pairs against the
      // scattered taps over 115 fuzzed layers: boxes of 2.0-2.8x the input (every 1-D
      // layer) 1.33x, 4 of 68 slower (0.87x-0.96x); of 4-15x (2-D) both ways, 0.59x-2.2x;
      // of 18x or more (3-D, many H taps) 0.65x. On 72 layers drawn after, the rule 1.36x
      // faster than the scattered taps. CONVT_WG_SC_XP=0 keeps the scattered taps there,
      // =1 takes the pairs whatever their boxes.
      ImplicitGemmFpropPlan sc = plan;
      plan_wgmma_tile(p, sc);
      bool pairs_xp = false;
      const int sc_xp_env = wg_env_int_or("CONVT_WG_SC_XP", -1);
      if (sc.wg && sc.wg_scatter && !sc.wg_xp && p.stride[2] == 2 && wm_env != 0 &&
          sc_xp_env != 0) {
        ImplicitGemmFpropPlan m = plan;
        plan_wgmma_tile(p, m, false, false, true);
        const double box_total =
            double(m.wg_tiles) * double(m.wg_steps) * double(m.wg_box_bytes) * (m.split ? 2 : 1);
        const double in_bytes = double(p.input_numel()) * double(dtype_size(p.dtype));
        pairs_xp = m.wg && m.wg_xp && (sc_xp_env == 1 || box_total <= 4.0 * in_bytes);
      }
      if (sc.wg && sc.wg_scatter && !pairs_xp) {
        plan = sc;
        scattered = true;
      }
    }
    const char* fold_s = std::getenv("CONVT_WG_FOLD");
    const bool fold_asked = fold_s != nullptr && std::atoi(fold_s) == 1;
    // (The W phase pairs on channel-major tiles: CONVT_WG_CMPAIRS and the reduction per
    // phase, see below.)
    const int cm_env = wg_env_int_or("CONVT_WG_CMPAIRS", -1);
    const bool f32 = p.dtype == DType::kFloat32;
    const double k_phase = double(cig) *
                           double(p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2]) /
                           double(p.stride[0] * p.stride[1] * p.stride[2]);
    const bool cm_pairs_ok = p.stride[2] == 2 && cog > 32 && !plan.split && wm_env != 0 &&
                             !fold_asked && (cm_env == 1 || (cm_env != 0 && k_phase <= 256));
    bool pairs_for_zeros = false;
    // (Every W phase exactly one tap, e.g. kernel 2 with stride 2.)
    bool one_tap_each = p.stride[2] > 1;
    for (int rw = 0; rw < p.stride[2]; ++rw)
      one_tap_each = one_tap_each && igemm::phase_taps(rw, p.stride[2], p.padding[2],
                                                       p.dilation[2], p.kernel_size[2])
                                             .count == 1;
    if (p.stride[2] > 1 && !scattered && !merged) {
      const char* env = std::getenv("CONVT_WG_WUP");
      const int wup_env = env != nullptr && *env != '\0' ? std::atoi(env) : -1;
      if (wup_env != 0) {
        ImplicitGemmFpropPlan up = plan;
        up.wg_wup = int(p.stride[2]);  // (for the tile's layout; set again below)
        // (Zeros inserted along W come with the copy: not transposed in the kernel.)
        plan_wgmma_tile(w_upsampled(p, p.stride[2]), up, false, false, false, false);
        // (Not where every W phase has exactly one tap, e.g. kernel 2 with stride 2: the
        // phases then tile each output row with no tap-less phase and no sums of taps, and
        // the s times the MMAs and the copy do not pay for whole-row stores. Measured on an
        // H100 (docs/kernels.md, GPU time, without against with the zeros): U-Net 128 -> 64
        // (k2 s2, 256 x 256) 0.30 / 0.42 ms in float32 and 0.21 / 0.25 in bfloat16, the 3-D
        // U-Net 64 -> 32 (64^3) 0.33 / 0.65 in bfloat16, every one of six such layers
        // faster without in bfloat16 (geomean 0.75 of the time) and both 2-D ones in float32;
        // float32 3-D layers, which then run the TMA kernel, went both ways (64 -> 64 at 64^3
        // 0.98 / 0.85 ms, 64 -> 32 0.72 / 0.79) and keep them unless the W phase pairs run
        // them: those of at most 32 output channels per group (stride 2, not split TF32)
        // below, 64 -> 32 at 64^3 0.79 -> 0.44 ms, 32 -> 16 at 32^3 0.123 -> 0.085; wider
        // ones here, in place of the zeros. The layers with tap-less or several-tap W phases
        // take them too (kb75, kb77, kb79, kb81 1.1x-2.7x faster with than with each phase's
        // own tiles), or with a W stride of 2 the pairs.)
        const bool float_3d =
            p.dtype == DType::kFloat32 && (p.input_size[0] > 1 || p.kernel_size[0] > 1);
        const bool narrow_pairs = p.stride[2] == 2 && cog <= 32 && !plan.split && wm_env != 0;
        const bool keep_phases = one_tap_each && (!float_3d || narrow_pairs);
        // (Nor where the copy with the zeros outweighs the output: it writes s times the
        // input and the kernel reads that back, where the layer's own tiles read the input
        // once and store the output by phases. Nor with a W stride of 2 where the W phase
        // pairs can run: they store whole rows as the zeros do, without twice the MMAs and
        // the larger copy. Measured on an H100 (docs/kernels.md, "Zeros along W against the
        // input's size", GPU time, against CONVT_WG_WUP=0) over 70 fuzzed layers planned with
        // the zeros, drawn by s x input elements / output elements: where that is 2 or more
        // the layers ran 1.51x (float32) and 1.30x (bfloat16) faster without the zeros (28
        // layers, 2 and 1 slower by more than 3%); below 1 they were 0.40x-1.5x, kb75 (0.25)
        // and kb81 (0.10) among them; stride 2 with the pairs 1.26x-1.93x in both types.
        // CONVT_WG_WUP=2 takes the zeros without these two limits, as before 2026-11-28.)
        const bool zeros_outweigh =
            wup_env != 2 && double(p.stride[2]) * double(p.input_numel()) >=
                                2.0 * double(p.output_numel());
        bool pairs_instead = false;
        if (wup_env != 2 && p.stride[2] == 2 && wm_env != 0 && !plan.split) {
          ImplicitGemmFpropPlan m = plan;
          plan_wgmma_tile(p, m, false, false, true);
          pairs_instead = m.wg && m.wg_used >= up.wg_used;
        }
        if (up.wg && (wup_env == 1 ||
                      (!keep_phases && memory_bound_with_w_zeros(p, plan.split, up.wg_nc)))) {
          // With a W stride of 2 on channel-major tiles, the W phase pairs (below) store
          // whole rows without the zeros' twice the MMAs, and run on the wgmma kernel as the
          // zeros would: measured on an H100 (docs/kernels.md, GPU time, same call) kb77
          // 0.785 -> 0.658 ms in float32 and 0.525 -> 0.467 in bfloat16, kb79 1.16 -> 0.96 and
          // 0.742 -> 0.663, the float32 3-D U-Net 64 -> 64 at 64^3 0.857 -> 0.674. (Not where
          // the zeros' tiles stack planes: the pairs' would drop most of their positions.)
          if (wup_env != 1 && cm_pairs_ok && up.wg_stack == 1) {
            ImplicitGemmFpropPlan m = plan;
            plan_wgmma_tile(p, m, false, false, true);
            if (m.wg && m.wg_nc == 0) {
              plan = m;
              merged = true;
              pairs_for_zeros = true;
            }
          }
          if (!pairs_for_zeros && (wup_env == 1 || (!zeros_outweigh && !pairs_instead))) {
            plan = up;
            plan.wg_wup = int(p.stride[2]);
            plan.wg_copy_fused = false;  // (the copy inserts the zeros)
            upsampled = true;
          }
        }
      }
    }
    // W phase pairs in registers (W stride 2, position-major tiles) where the W phases would
    // otherwise run as tiles of their own, in 16-bit types: measured on an H200 against the
    // dispatch without them (docs/kernels.md, same-call A/B, each tree twice), kb73 in
    // bfloat16 1.33x, kb72 unchanged. Float32 as TF32 takes them too, where the wgmma
    // kernel's rules (below) keep the layer on it: measured on an H100 (docs/kernels.md,
    // "W phase pairs in float32", GPU time, against each phase's own tiles) 1.13x over 60
    // fuzzed layers whose plan they change (scripts/suites/f32_pairs_fuzz.json; 41 faster,
    // 9 slower, down to 0.56x on 1-D layers of 200-300 input channels), kb73 1.14x, kb72
    // 1.17x, the models suite 1.00x (CenterNet's depthwise layer 1.16x); not on 1-D layers
    // (below). Where every W phase
    // has one tap (kernel 2, stride 2) the pairs run whatever the rules: 1.07x-1.78x against
    // zeros along W or the TMA kernel on five such layers of 16 or 32 channels, 1-D to 3-D
    // (scripts/suites/one_tap.json). Not in split TF32 where a W phase has several taps (not
    // measured). CONVT_WG_F32_PAIRS=0 leaves float32 only the one-tap pairs (before 2026-11-27
    // the dispatch). (Not where CONVT_WG_FOLD=1 asks for folded tiles.)
    // (Not where the unmerged tiles stack planes: a phase's plane is then small, and the
    // stacked tile computes several planes' outputs where the pair's would drop most of its
    // positions.)
    // Channel-major tiles (more than 32 output channels per group) take the pairs in every
    // type but split TF32 where the reduction per phase is at most 256 (input channels per
    // group x taps / phases), where the stores of a tile are a large part of its time:
    // measured on an H100 (docs/kernels.md, GPU time, pairs against the phases' own tiles)
    // 1.04x-1.20x on five layers of kernel 2, stride 2 with 64 to 256 per phase (3-D U-Net
    // 64 -> 64 at 64^3 0.66 -> 0.55 ms in bfloat16, Mask R-CNN's mask head 0.176 -> 0.156 in
    // float32), 0.6x-0.9x at 288 to 2048 per phase, where the tiles of two consumer
    // warpgroups sharing the box (or the TMA kernel) keep their MMAs fed better than tiles
    // of 128 positions a phase. CONVT_WG_CMPAIRS=0 turns them off, =1 takes them wherever
    // they can run.
    bool stacked = false;
    bool f32_pairs_ruled = false;
    if (!upsampled && !scattered && !merged && p.stride[2] == 2 && wm_env != 0 && !fold_asked) {
      ImplicitGemmFpropPlan one = plan;
      plan_wgmma_tile(p, one);
      if (one.wg && one.wg_stack > 1) {
        plan = one;
        stacked = true;
      } else {
        ImplicitGemmFpropPlan m = plan;
        plan_wgmma_tile(p, m, false, false, true);
        const bool cm = m.wg && m.wg_nc == 0;
        // (Not where CONVT_WG_RAW=1 asks for the input read in place, which the pairs do
        // not run: that opt-in keeps the tiles it ran on before. Not where the output is a
        // single row (1-D layers): measured on an H100, the phases' own tiles ran 1.53x
        // faster over 52 fuzzed 1-D layers whose plan the pairs changed
        // (scripts/suites/f32_pairs_1d.json; 37 faster, 14 slower by more than 3%).)
        const int64_t rows_out = p.output_size(0) * p.output_size(1);
        const bool f32_more = f32 && !cm && !one_tap_each && !plan.split && rows_out > 1 &&
                              wg_env_int_or("CONVT_WG_F32_PAIRS", 1) != 0 &&
                              wg_env_int_or("CONVT_WG_RAW", -1) != 1;
        const bool take = cm ? cm_pairs_ok : !f32 || one_tap_each || f32_more;
        if (m.wg && take) {
          plan = m;
          merged = true;
          f32_pairs_ruled = f32_more;
        }
      }
    }
    if (!upsampled && !scattered && !merged && !stacked) plan_wgmma_tile(p, plan);
    // The input read in place (float32 as TF32; ImplicitGemmFpropPlan::wg_raw) runs only
    // where CONVT_WG_RAW=1 asks for it (wherever it can run). Measured on an H200
    // (docs/kernels.md), it lost to the wgmma kernel with its input copy on most of the
    // suite (kb57 0.92x, kb68 0.40x, kb58 0.74x: its A loads from the raw box are bound by
    // their latency), and against the TMA kernel it won on kb71 (0.98 -> 0.75 ms) and a
    // 3-D 64 -> 32 layer with stride 2 (1.22x) but not reliably elsewhere (kb73 0.84-0.96x,
    // kb78 0.90-1.05x between sessions), so the dispatch does not take it on its own.
    const char* raw_env_s = std::getenv("CONVT_WG_RAW");
    const int raw_env = raw_env_s != nullptr && *raw_env_s != '\0' ? std::atoi(raw_env_s) : -1;
    const bool raw_ok =
        !upsampled && !merged && p.dtype == DType::kFloat32 && !plan.split && raw_env != 0;
    // 16-bit layers of at most two waves of wgmma tiles (slots: two blocks a multiprocessor,
    // one with two warpgroups) with at most 8 K steps a block, whose rows fill the TMA
    // kernel's W segments (64 positions) at least 2/3 as well as one plane fills the wgmma
    // tile: the wgmma path's fixed costs (the input's copy or transposition, each tile's
    // pipeline fill) are not paid back, and the TMA kernel runs them faster. Measured on an
    // H100 (docs/kernels.md, GPU time, bfloat16): HiFi-GAN 256 -> 128 (kernel 16, stride 8;
    // 2 waves x 4 K steps) 0.060 -> 0.049 ms, 128 -> 64 (kernel 4, stride 2; 2 x 2) 0.030 ->
    // 0.027; but rows of 16 (a quarter of a segment) 1.8x-3.2x slower on the TMA kernel
    // (scripts/suites/short_rows.json), and the layers of 3 or more waves or more K steps
    // (DCGAN's, U-Net's, CenterNet's; kb*) stay faster on wgmma.
    // (CONVT_WG_FEW_STEPS=0 keeps the wgmma kernel there.) Also W phase pairs plans, which the
    // dispatch below does not otherwise weigh: HiFi-GAN 64 -> 32 (kernel 4, stride 2) 0.035 ->
    // 0.027 ms in bfloat16 on the TMA kernel (H100, docs/kernels.md). And, whatever the
    // rows, plans whose tiles leave half the multiprocessors or more idle (the TMA kernel's
    // tiles of 128 positions spread the work wider): FCN-8s's upscore2 (21 channels, 32
    // tiles of 2 K steps with W phase pairs) 0.019 -> 0.011 ms.
    // (In float32, only for the planes and strided 1-D layers the reduction rules alone
    // would have given the TMA kernel: f32_planes_taken, below.)
    bool f32_planes_taken = false;
    auto few_k_steps = [&](const ImplicitGemmFpropPlan& pl) {
      const char* fs_env = std::getenv("CONVT_WG_FEW_STEPS");
      if ((p.dtype == DType::kFloat32 && !f32_planes_taken) ||
          (fs_env != nullptr && fs_env[0] == '0'))
        return false;
      const int64_t seg = 128 / dtype_size(p.dtype);
      const double fill = double(q[2]) / double((q[2] + seg - 1) / seg * seg);
      const int64_t slots = (pl.wg_coop ? 1 : 2) * int64_t(wgmma_planner_sms());
      const int64_t waves = (pl.wg_tiles + slots - 1) / slots;
      return waves <= 2 && waves * pl.wg_steps <= 8 &&
             (pl.wg_used_plane < 1.5 * fill || 2 * pl.wg_tiles <= int64_t(wgmma_planner_sms()));
    };
    auto decline_few_k_steps = [&](ImplicitGemmFpropPlan& pl) {
      const int64_t slots = (pl.wg_coop ? 1 : 2) * int64_t(wgmma_planner_sms());
      pl.wg = false;
      wg_few_steps = true;
      wg_few_steps_ws = pl.workspace_bytes;
      pl.workspace_bytes = mma_workspace;
      pl.wg_reason = detail::str_cat((pl.wg_tiles + slots - 1) / slots, " waves of tiles of ",
                                     pl.wg_steps, " K steps: the TMA kernel is faster");
    };
    // (Channel-major W phase pairs, and float32's position-major pairs of W phases with
    // several taps, keep the rules of the tiles they replace.)
    // (Not the pairs in place of zeros along W, which keep the wgmma kernel as the zeros
    // would.)
    const bool ruled_pairs =
        merged && plan.wg_wpairs && (plan.wg_nc == 0 || f32_pairs_ruled) && !pairs_for_zeros;
    if (plan.wg && !upsampled && (!merged || ruled_pairs) &&
        opt.forward_kernel == ForwardKernel::kAuto) {
      const double k_avg = double(cig) * double(p.kernel_size[0] * p.kernel_size[1] *
                                                p.kernel_size[2]) / double(phases);
      const int64_t e_size = dtype_size(p.dtype);
      // (The share of the TMA kernel's W segments, 128 bytes of positions each, that a
      // phase's rows fill: rows of 16 float positions fill half of each. In float32 as TF32
      // the wgmma kernel also runs where its tile, one plane a tile, fills 1.5 times that
      // share or more: measured on an H100 (docs/kernels.md, "Short rows"), 1.4x-2.2x
      // faster than the TMA kernel on layers with rows of 16 at 216-288 per phase (the
      // 3-D U-Net's 256 -> 256, kernel 2, stride 2), slower on rows of 24 at 75%.)
      const int64_t seg = 128 / e_size;
      const double tma_fill = double(q[2]) / double((q[2] + seg - 1) / seg * seg);
      // (Volumes, outputs deeper than 1, outside split TF32: the wgmma kernel down to tiles
      // that compute 18% of their positions for outputs, and whatever one stacked plane
      // fills. The kernels left to them (the TMA kernel, which loads its box again for each
      // D and H tap, and the gather kernel) lose more on small volumes than the tile drops.
      // Measured on an H100 (docs/kernels.md, "Volumes of sparse tiles on the wgmma kernel",
      // GPU time) over 88 fuzzed 3-D layers the rules below gave other kernels
      // (scripts/suites/volume_sparse_fuzz.json), the wgmma kernel forced: the float32 ones
      // of stacked planes (48%-94% used) 2.1x faster, 1.01x-3.7x, every one of 26; those of
      // 18%-34% used 1.65x in float32 and 1.83x in bfloat16 (6 of 93 slower, down to
      // 0.78x); under 18% 0.92x and 1.22x, from 0.20x to 2.3x. On 76 3-D layers drawn
      // after, the rule 1.86x (float32) and 1.48x (bfloat16) faster than the rules of planes.
      // CONVT_WG_VOLUME_USED=0 keeps the rules of planes there.)
      const bool sparse_volume = !plan.split && p.output_size(0) > 1 &&
                                 wg_env_int_or("CONVT_WG_VOLUME_USED", 1) != 0;
      const double min_used = sparse_volume                      ? kWgmmaMinUsedVolume
                              : plan.wg_stack > 1 && !plan.split ? kWgmmaMinUsedStacked
                                                                 : kWgmmaMinUsed;
      // (Volumes, outputs deeper than 1, outside split TF32: the wgmma kernel whatever the
      // reduction. The TMA kernel loads its box again for each D and H tap and runs each
      // plane's W segments apart, where the wgmma kernel's box holds several H taps' rows and
      // its tiles stack D planes. Measured on an H200 (docs/kernels.md, "Volumes on the wgmma
      // kernel whatever the reduction", GPU time) over two draws of fuzzed layers the
      // reduction rules gave the TMA kernel: 3-D layers 2.05x (10 layers, one slower, 0.71x)
      // and 1.94x (43, one slower, 0.90x) in float32 as TF32, up to 22x (a 3 x 4 x 1 kernel
      // on rows of 8); in bfloat16 the three such layers of the first draw 2.0x-7.0x.
      // CONVT_WG_VOLUMES=0 leaves volumes to the reduction rules.)
      // (Not the class of the float32 wgmma rule, f32_aligned_class: that rule decides it.)
      const bool own_rule = f32_aligned_class(p, plan.split);
      const bool volume = !plan.split && !own_rule && p.output_size(0) > 1 &&
                          wg_env_int_or("CONVT_WG_VOLUMES", 1) != 0;
      // (Planes, 2-D outputs of more than one row, in float32 as TF32: the same, measured
      // over two draws of fuzzed layers the reduction rules gave the TMA kernel, 1.18x and
      // 1.08x, and on a draw made after, 1.07x (82 layers faster, 56 slower, down to 0.62x;
      // docs/kernels.md, "Volumes on the wgmma kernel whatever the reduction"); the
      // few-K-steps rule of 16-bit types then gives small ones back to the TMA kernel.
      // A narrower form, only groups of at least 64 output channels with a reduction of at
      // least 64 per phase, was better on those three draws (1.10x / 1.09x / 1.08x, with 1 /
      // 3 / 12 layers slower against 5 / 14 / 54), but not on a fourth made to decide
      // (scripts/suites/planes_fuzz2.json, H100: 0.993x of this rule's speed over 173
      // layers). CONVT_WG_F32_PLANES=0 leaves planes to the reduction rules.)
      const bool f32_plane = p.dtype == DType::kFloat32 && !plan.split && !own_rule &&
                             p.output_size(0) == 1 && p.output_size(1) > 1 &&
                             wg_env_int_or("CONVT_WG_F32_PLANES", 1) != 0;
      // (16-bit types: the wgmma kernel whatever the reduction, the rules of sparse tiles and
      // few K steps below still giving layers to the TMA kernel. The reduction rule it
      // replaces (a reduction of at least 64 per phase on average, or at most 16 output
      // channels a group) gave the TMA kernel layers the wgmma kernel runs faster: measured
      // on an H100 (docs/kernels.md, "Volumes on the wgmma kernel whatever the reduction",
      // GPU time) over two draws of fuzzed 1-D and 2-D layers, the wgmma kernel 1.34x over
      // the 59 that rule gave the TMA kernel (scripts/suites/reduction16_fuzz.json; 44
      // faster, 11 slower, down to 0.76x) and, on a draw made to check, 1.43x in bfloat16 and
      // 1.42x in float16 over the 51 layers whose plan the change moves
      // (scripts/suites/reduction16_fuzz2.json; 36 faster, 13 slower, down to 0.66x).
      // CONVT_WG_REDUCTION16=1 restores the reduction rule.)
      const bool by_reduction =
          p.dtype != DType::kFloat32 ? wg_env_int_or("CONVT_WG_REDUCTION16", 0) == 0 ||
                                           k_avg >= 64 || cog <= 16
          : plan.split ? k_avg >= 128 || (k_avg >= 96 && cog >= 48) || cog <= 16
                       : (k_avg >= (phases == 1 ? 128 : 384) && cog >= 48) || k_avg >= 1024 ||
                             cog <= 16 || plan.wg_used_plane >= 1.5 * tma_fill ||
                             f32_aligned_wanted(p, false);
      // (Strided 1-D layers in float32 as TF32, f32_strided_row_wanted; like the planes,
      // those only it takes keep the few-K-steps rule below.)
      const bool f32_row = f32_strided_row_wanted(p, plan.split);
      f32_planes_taken = (f32_plane || f32_row) && !by_reduction;
      const bool take = volume || f32_plane || f32_row || by_reduction;
      if (!take) {
        plan.wg = false;
        plan.workspace_bytes = mma_workspace;
        plan.wg_reason = detail::str_cat("reduction of ", int64_t(k_avg + 0.5),
                                         " per phase on average and ", cog,
                                         " output channels per group: the TMA kernel is faster");
      } else if (plan.wg_used < min_used ||
                 (plan.wg_stack > 1 && !sparse_volume && plan.wg_used_plane < kWgmmaMinUsed &&
                  (k_avg < 2048 || plan.split) &&
                  2 * q[2] >= ((q[2] + 128 / e_size - 1) / (128 / e_size)) * (128 / e_size))) {
        // (Stacked planes against the TMA kernel: where one plane would use under 35% of
        // the tile and the TMA kernel's W segments (32 float or 64 16-bit positions) are at
        // least half full, the TMA kernel runs the layer. Measured on an H200
        // (docs/kernels.md): HiFi-GAN's first layer, 32 positions a phase, 0.09 ms stacked
        // in bfloat16 against 0.065 on the TMA kernel; the DCGAN layers' rows of 1 and 4
        // positions 1.4x-1.6x faster stacked than on the TMA or gather kernel. Not with a
        // reduction of 2048 or more per phase, where the wgmma tiles' MMAs outrun the TMA
        // kernel's mma.sync whatever the plane: WaveGAN's 1024 -> 512 (kernel 25, stride 4,
        // 6400 per phase, 16 positions a phase) 0.15 ms stacked against 0.36 on the TMA
        // kernel in float32 as TF32 (H100); HiFi-GAN's first layer (1024 per phase) stays,
        // and so does split TF32, not measured there.)
        stack_declined = plan.wg_used >= min_used;
        // A wgmma tile holds the rows of one (sample, D position) of a phase: where a phase
        // has few positions per sample (4 x 4 outputs of a DCGAN layer, 32 of a HiFi-GAN
        // one), most of its positions are computed and dropped. The TMA kernel's segments
        // of W positions and the gather kernel's tiles run over every sample's positions
        // instead (below). Measured on an H200 (docs/kernels.md, the models suite): the
        // gather kernel 1.6x-1.9x faster on the DCGAN 512 -> 256 and the video GAN 512 ->
        // 256 layers (13% used), the TMA kernel 2.1x-2.3x on HiFi-GAN's first (25%); a DCGAN
        // layer at 50% stays faster on wgmma.
        plan.wg = false;
        plan.workspace_bytes = mma_workspace;
        plan.wg_reason = detail::str_cat("its best tile computes ", int(plan.wg_used * 100 + 0.5),
                                         "% of its positions for outputs");
        wg_sparse = true;
      } else if (few_k_steps(plan)) {
        decline_few_k_steps(plan);
      }
    }
    if (plan.wg && merged && plan.wg_wpairs && !pairs_for_zeros &&
        opt.forward_kernel == ForwardKernel::kAuto && few_k_steps(plan))
      decline_few_k_steps(plan);
    if (raw_ok && raw_env == 1) {
      ImplicitGemmFpropPlan r = before_wgmma;
      plan_wgmma_tile(p, r, true);
      if (r.wg) plan = r;
    }
  } else {
    plan.wg_reason = "another kernel requested";
  }
  plan_wgmma_split_k(p, plan);
  if (opt.forward_kernel == ForwardKernel::kAuto ||
      opt.forward_kernel == ForwardKernel::kImplicitGemmTma ||
      opt.forward_kernel == ForwardKernel::kImplicitGemmWgmma) {
    // Split TF32 fits the kernel's 128 registers only with the 32-channel tile.
    plan.tma_bn = cog > 32 && !plan.split ? 64 : 32;
    plan.tma_bk = plan.block_k;
    // Segments of 32 (float) or 64 (16-bit) positions along W, four or two per tile.
    const int64_t seg_w = 128 / dtype_size(p.dtype);
    const int64_t segs = p.batch * q[0] * q[1] * ((q[2] + seg_w - 1) / seg_w);
    const int64_t tiles = (segs + 128 / seg_w - 1) / (128 / seg_w);
    // W taps of the busiest phase: ceil(K / step), step = s / gcd(s, dilation); consecutive
    // taps read input columns doff = step * dilation / s apart.
    int64_t w_taps = 1, w_doff = 0;
    {
      int64_t a = p.stride[2], b = p.dilation[2];
      while (b != 0) {
        const int64_t t = a % b;
        a = b;
        b = t;
      }
      const int64_t step = p.stride[2] / a;
      w_taps = (p.kernel_size[2] + step - 1) / step;
      w_doff = step * p.dilation[2] / p.stride[2];
    }
    // A box row holds the windows of every W tap of a phase; a stage holds the boxes and
    // one weight tile per W tap. The tile: the widest K step that leaves three stages,
    // else two; the 32-channel tile if that is what it takes.
    const int64_t e = dtype_size(p.dtype);
    const int64_t span = seg_w + (w_taps - 1) * w_doff;
    bool fits = false;
    if (span * e <= 4096) {
      plan.tma_row_bytes = tma::tma_row_bytes(int(span), int(e));
      plan.tma_w_taps = int(w_taps);
      for (int min_stages : {3, 2}) {
        const int cand[3][2] = {{plan.tma_bn, plan.tma_bk}, {plan.tma_bn, 16}, {32, 16}};
        for (const auto& c : cand) {
          if (tma_pipeline_stages(p.dtype, c[0], c[1], plan.tma_row_bytes, int(w_taps)) >=
              min_stages) {
            plan.tma_bn = c[0];
            plan.tma_bk = c[1];
            fits = true;
            break;
          }
        }
        if (fits) break;
      }
      const std::array<int, 2> asked = tma_tile_from_env();
      // (A K step wider than the gather plan's would outgrow the workspace.)
      if (fits && asked[0] != 0 && !(plan.split && asked[0] != 32) && asked[1] <= plan.block_k &&
          tma_pipeline_stages(p.dtype, asked[0], asked[1], plan.tma_row_bytes, int(w_taps)) >= 2) {
        plan.tma_bn = asked[0];
        plan.tma_bk = asked[1];
      }
    }
    const bool box_ok = span * e <= 4096 && plan.tma_row_bytes / e <= 256;
    // With every W tap of a phase served by one box, the TMA kernel is ahead of the gather
    // and strip kernels on every KernelBench shape, 3-D stride-1 ones with 27-105 taps
    // per phase included (H200, docs/kernels.md): it runs wherever it can.
    const int64_t co_tiles = (cog + plan.tma_bn - 1) / plan.tma_bn;
    if (p.groups > 65535)
      plan.tma_reason = "too many groups";
    else if (!box_ok)
      plan.tma_reason = "the W taps' input window is too wide for a TMA box";
    else if (!fits)
      plan.tma_reason = detail::str_cat(w_taps, " W taps leave no two pipeline stages");
    else if (tiles * phases * co_tiles > INT_MAX)
      plan.tma_reason = "grid too large";
    else if (wg_sparse && (stack_declined ? 2 : 4) * q[2] <
                              (stack_declined ? 1 : 3) * ((q[2] + seg_w - 1) / seg_w) * seg_w)
      // (Where the wgmma tile was declined for its dropped positions: the TMA kernel only
      // where its segments along W are three-quarters full (half full where a stacked tile
      // was declined for it), else the gather kernel.)
      plan.tma_reason = detail::str_cat("its segments of ", seg_w, " positions along W hold ",
                                        q[2]);
    else
      plan.tma = true;
    if (wg_few_steps && !plan.tma) {
      // (The wgmma plan declined for its few K steps, where the TMA kernel cannot run.)
      plan.wg = true;
      plan.workspace_bytes = wg_few_steps_ws;
      plan.wg_reason.clear();
    }
    if (opt.forward_kernel == ForwardKernel::kImplicitGemmTma ||
        opt.forward_kernel == ForwardKernel::kImplicitGemmWgmma)
      return plan;
  } else {
    plan.tma_reason = "another kernel requested";
  }

  // The halo variant shares each gathered input strip among the W taps of a phase. Per
  // phase the W taps are k0, k0+step, ... with step = s / gcd(s, dilation); the widest
  // phase has ceil(K / step) of them, and tap j reads input column q + off0 - j*doff with
  // doff = step * dilation / s. Measured on an H200 (docs/kernels.md), sharing pays only
  // from about six W taps on: below that the gather kernel is faster.
  if (opt.forward_kernel == ForwardKernel::kImplicitGemm) return plan;
  const int64_t s = p.stride[2], dil = p.dilation[2];
  int64_t a = s, b = dil;
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  const int64_t step = s / a, doff = step * dil / s;
  const int64_t tw_max = (p.kernel_size[2] + step - 1) / step;
  const bool forced = opt.forward_kernel == ForwardKernel::kImplicitGemmHalo;
  constexpr int64_t kHaloMinTaps = 6;
  if (tw_max < kHaloMinTaps && !forced) return plan;
  // Tile: `rows` rows of `wt` positions, so that the strips (wt + halo columns per row)
  // fit in the 128 rows a block gathers.
  const int64_t halo = (tw_max - 1) * doff;
  if (halo >= igemm::kMaxStripRows) return plan;
  const int64_t wt = std::min<int64_t>(q[2], igemm::kMaxStripRows - halo);
  const int64_t rows = igemm::kMaxStripRows / (wt + halo);
  const int64_t strip_rows = rows * (wt + halo);
  const int64_t row_groups = (p.batch * q[0] * q[1] + rows - 1) / rows;
  const int64_t col_segs = (q[2] + wt - 1) / wt;
  if (row_groups * col_segs * phases > INT_MAX) return plan;
  const bool tf32 = p.dtype == DType::kFloat32;
  for (int bk : {tf32 ? 16 : plan.block_k, 16}) {
    if (bk > plan.block_k) continue;
    const std::size_t bytes =
        2 * (std::size_t(tw_max) * bk * (igemm::kBlockM + igemm::kPad) +
             std::size_t(strip_rows) * (bk + (tf32 ? 4 : 8))) *
        dtype_size(p.dtype);
    if (bytes > kHaloSmemLimit) continue;
    plan.kind = ImplicitGemmFpropPlan::Kind::kHalo;
    plan.block_k = bk;
    plan.wt = int(wt);
    plan.rows = int(rows);
    plan.tw_max = int(tw_max);
    plan.strip_rows = int(strip_rows);
    plan.smem_bytes = bytes;
    break;
  }
  return plan;
}

// Groups merged (ImplicitGemmFpropPlan::wg_gmerge): how many consecutive groups of p run as
// one on the wgmma kernel, 1 for none. Merged, the weight block-diagonal, m groups make m
// times fewer tiles of m times the channels and K steps. Two kinds of groups gain:
// - Fewer than 8 input channels (depthwise above all): no tensor-core plan of their own
//   (a K step holds at least 8 channels), so that the direct kernel runs them; merged to 8
//   or more, the wgmma kernel does, for m times the multiply-adds in MMAs.
// - In 16-bit types, fewer than 16 (a 16-bit K step's least): a group of 8 runs half its
//   MMAs on zeros, on tiles of 8 or 16 output channels whose per-tile costs (the
//   producer's decode, the pipeline's fill, the epilogue) set their time; merged, m * cig /
//   16 times the MMAs of the padded groups.
// The largest m that divides the groups with 8 to 32 input and at most 64 output channels
// per merged group, and those MMAs within the machine balance (their operations over the
// bytes the problem must move, input, weight and output once each: 240 per byte in 16-bit
// types, dense 989.4 TFLOP/s at about 4 TB/s, 120 in TF32, 40 in split TF32's three MMAs a
// product). Measured on an H100 (docs/kernels.md, GPU time, bfloat16, against no merging):
// kb72 0.153 -> 0.136 ms, kb75 0.583 -> 0.492, narrow grouped layers of
// scripts/suites/groups.json up to 1.8x faster (8 -> 16 channels a group) and at most 6%
// slower; merging two groups instead of four lost on kb72 (0.261 ms, another tile) and on
// three of those layers. Float32 groups of 8 or more keep their groups: a TF32 K step of 8
// channels fits a group of 8, and merging only added MMAs (kb75 0.596 -> 0.680 ms, kb72
// unchanged with four, 0.296 ms with two). CONVT_WG_GMERGE=0 merges nothing, =m merges m
// groups wherever m divides them and the merged problem runs on the wgmma kernel (tests,
// every precision).
int group_merge_factor(const Problem& p, bool split) {
  const int env = wg_env_int_or("CONVT_WG_GMERGE", -1);
  if (p.groups < 2 || env == 0) return 1;
  if (env > 1) return p.groups % env == 0 ? env : 1;
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const bool f32 = p.dtype == DType::kFloat32;
  if (cig >= (f32 ? 8 : 16)) return 1;
  const double bytes = double(p.input_numel() + p.weight_numel() + p.output_numel()) *
                       double(dtype_size(p.dtype));
  const double balance = !f32 ? 240.0 : split ? 40.0 : 120.0;
  for (int64_t m = std::min<int64_t>(p.groups, 64); m >= 2; --m) {
    if (p.groups % m != 0 || m * cig > 32 || m * cog > 64 || m * cig < 8) continue;
    const double mmas = cig < 8 ? double(m) : double(m * cig) / 16.0;
    if (p.flops() * mmas > balance * bytes) continue;
    return int(m);
  }
  return 1;
}

// Whether the wgmma plan mp writes at least half of every output row segment it stores:
// W of stride 1 or 2, or its W phases stored together (zeros inserted along W, W phases
// merged or paired, W taps scattered). Separate W phases of a larger stride store every
// stride-th element of a row, a sector at a time.
bool merged_stores_dense(const Problem& p, const ImplicitGemmFpropPlan& mp) {
  return p.stride[2] <= 2 || mp.wg_wup > 1 || mp.wg_wmerge || mp.wg_wpairs || mp.wg_scatter;
}

// Whether a layer of fewer than 8 input channels (groups of one) runs faster on the wgmma
// kernel, its channels padded to the K step (fp: that plan), than on the direct kernel's
// channel chunks. The direct kernel's multiply-adds run on the CUDA cores at 2-6 TMAC/s on
// an H100, its bytes at 1.1-2.2 TB/s: with fewer than 16 multiply-adds an output (input
// channels times the taps an output sums, on average) it is bound by its bytes, and the
// wgmma kernel, whose tiles' fixed costs (the input copy, each tile's pipeline fill and
// stores) move those bytes at 0.6-2.3 TB/s, gains nothing; from 16 up its MMAs win, unless
// its tiles compute mostly dropped positions and padded channels (wg_used times the share
// of a tile's output channels that are the layer's, under 0.4: 3 output channels on a
// tile of 8, 67% of the positions used). Not in strict float32 (three MMAs a product
// against the direct kernel's exact one; unmeasured). Measured on an H100 (GPU time, 24
// fuzzed layers of scripts/suites/few_channels_fuzz.json and 8 of few_channels.json,
// docs/kernels.md): 9 of the 10 layers this takes run 1.06x-2.95x faster in float32 and
// bfloat16, one, a 2-D 3 -> 16 k3 s1 layer of 0.02 ms, 0.86x-0.90x; of the 22 it leaves on
// the direct kernel, 16 run no faster on wgmma (down to 0.28x), 6 faster in one precision
// or both (up to 1.54x). On 24 layers of another seed that played no part in it
// (scripts/suites/few_channels_heldout.json): the 4 it takes 1.3x-2.1x faster, none slower.
bool few_channels_on_wgmma(const Problem& p, const ImplicitGemmFpropPlan& fp) {
  if (p.dtype == DType::kFloat32 && fp.split) return false;
  const double macs_an_output = p.flops() / 2.0 / double(p.output_numel());
  const int64_t tile_channels = fp.wg_nc > 0 ? fp.wg_nc : fp.wg_coop ? 128 : 64;
  const int64_t co = p.out_channels;
  const double channel_share =
      double(co) / double((co + tile_channels - 1) / tile_channels * tile_channels);
  return macs_an_output >= 16.0 && fp.wg_used * channel_share >= 0.4;
}

// The plan of p as given, or (group_merge_factor) that of its groups merged, where the
// merged problem runs on the wgmma kernel and p's own plan does too (or has another
// implicit-GEMM kernel, where CONVT_WG_GMERGE asks), or p has no implicit-GEMM plan at all
// (fewer than 8 input channels per group; CONVT_WG_GMERGE_SMALL=0 keeps those on the direct
// kernel), in 2-D and 3-D problems whose merged plan's stores fill at least half of each
// output row they touch (W stride 1 or 2, zeros inserted along W, W phases merged or
// paired). Measured on an H100 in docs/kernels.md (GPU time, ms, direct kernel by rows ->
// wgmma kernel merged): 2-D and 3-D depthwise, 2- and 4-channel groups 0.086 -> 0.037 to
// 0.332 -> 0.139 in float32 (one tie, 0.112 -> 0.114), 0.088 -> 0.031 to 0.338 -> 0.089 in
// bfloat16; but 1-D depthwise layers, whose rows the direct kernel takes at about half the
// memory roofline, lost or tied: k4 s2 0.136 -> 0.205 (float32, the merged plan's input
// copy upsampled twice along W), 0.138 -> 0.133 (bfloat16); k8 s4 0.070 -> 0.200 and 0.073
// -> 0.123, its merged plan storing each W phase on its own, every 4th element of a row.
// The merged
// plan keeps p's fields for the other kernels (a device without wgmma runs p as given; the
// direct kernel where p has no plan of its own: wg_only) and a workspace for both.
// GEMM and fold (ImplicitGemmFpropPlan::fold) for p, or a plan that is not usable.
ImplicitGemmFpropPlan plan_gemm_fold(const Problem& p, const ExecOptions& options) {
  ImplicitGemmFpropPlan plan;
  auto no = [&](const char* why) {
    plan.usable = false;
    plan.reason = why;
    return plan;
  };
  if (p.dtype == DType::kFloat64) return no("float64 has no tensor-core path");
  const Dims out = p.output_sizes();
  for (int d = 0; d < 3; ++d) {
    const int64_t limit = int64_t(1) << 30;
    if (p.input_size[d] >= limit || out[d] + p.stride[d] >= limit ||
        p.padding[d] + p.kernel_size[d] * p.dilation[d] >= limit ||
        p.stride[d] * p.dilation[d] >= limit)
      return no("spatial sizes or strides beyond 32-bit tap arithmetic");
  }
  const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const int64_t plane = p.input_size[0] * p.input_size[1] * p.input_size[2];
  plan.split = p.dtype == DType::kFloat32 && options.math == MathMode::kStrictFP32;
  plan.block_k = 32;
  plan.cig_pad = round_up(cig, plan.block_k);
  plan.fold_j_pad = round_up(cog * taps, igemm::kBlockM);
  plan.cog_pad = plan.fold_j_pad;
  const double prod = double(p.batch) * double(p.out_channels) * double(taps) * double(plane);
  if (prod * 4 > double(int64_t(1) << 34)) return no("products beyond 16 GiB");
  const int64_t ptiles = (p.batch * plane + igemm::kBlockN - 1) / igemm::kBlockN;
  if (double(ptiles) * double(p.groups * (plan.cog_pad / igemm::kBlockM)) >= double(INT_MAX))
    return no("more GEMM tiles than a grid holds");
  const std::size_t packed = std::size_t(p.groups * plan.cig_pad * plan.cog_pad) *
                             dtype_size(p.dtype);
  plan.fold_prod_offset = std::size_t(round_up(int64_t(packed), 256));
  plan.fold_prod_bytes = std::size_t(prod) * 4;
  plan.workspace_bytes = plan.fold_prod_offset + plan.fold_prod_bytes;
  plan.fold = true;
  plan.usable = true;
  plan.tma_reason = "GEMM and fold";
  plan.wg_reason = "GEMM and fold";
  return plan;
}

ImplicitGemmFpropPlan plan_default(const Problem& p, const ExecOptions& options);

// GEMM and fold where it is asked for or its rules take it (gemm_fold_wanted, then, over
// the other kernels' plan, gemm_fold_wanted_over), else that plan.
ImplicitGemmFpropPlan plan_uncached(const Problem& p, const ExecOptions& options) {
  const ForwardKernel asked = options.forward_kernel == ForwardKernel::kAuto
                                  ? forward_kernel_from_env()
                                  : options.forward_kernel;
  const int env = wg_env_int_or("CONVT_GEMM_FOLD", -1);
  const bool forced =
      asked == ForwardKernel::kGemmFold || (asked == ForwardKernel::kAuto && env == 1);
  const bool ruled = asked == ForwardKernel::kAuto && env != 0;
  // (Strict float32's rule is gemm_fold_wanted's alone.)
  const bool strict = p.dtype == DType::kFloat32 && options.math == MathMode::kStrictFP32;
  if (forced || (ruled && gemm_fold_wanted(p, options.math))) {
    ImplicitGemmFpropPlan fp = plan_gemm_fold(p, options);
    if (fp.usable) return fp;
  }
  ImplicitGemmFpropPlan plan = plan_default(p, options);
  if (ruled && !strict && gemm_fold_wanted_over(p, plan)) {
    ImplicitGemmFpropPlan fp = plan_gemm_fold(p, options);
    if (fp.usable) return fp;
  }
  return plan;
}

// The plan of the output-stationary kernels (the wgmma, TMA and mma.sync implicit GEMMs,
// with groups merged and few channels padded where their rules take them).
ImplicitGemmFpropPlan plan_default(const Problem& p, const ExecOptions& options) {
  ImplicitGemmFpropPlan plan = plan_as_given(p, options);
  const bool kernel_ok = options.forward_kernel == ForwardKernel::kAuto ||
                         options.forward_kernel == ForwardKernel::kImplicitGemmWgmma;
  if (!kernel_ok || p.dtype == DType::kFloat64) return plan;
  // Fewer than 8 input channels with groups of one (an image's 3 channels, 1-7 channel
  // stems): the wgmma kernel alone where its box fits and few_channels_on_wgmma finds it
  // pays, the K step's channels (8 in float32, 16 in 16-bit types) padded with zeros past
  // the input's: the input copy and the boxes of x read in place fill them with zeros (as
  // they fill a group's last channel block), and the weight tiles hold zeros there
  // (pack_weight_wgmma_kernel). No other tensor-core kernel runs these (wg_only: the
  // direct kernel on devices without wgmma). CONVT_WG_FEW=1 takes the wgmma kernel
  // wherever its box fits, =0 nowhere.
  const ForwardKernel asked = options.forward_kernel == ForwardKernel::kAuto
                                 ? forward_kernel_from_env()
                                 : options.forward_kernel;
  const int few_env = wg_env_int_or("CONVT_WG_FEW", -1);
  if (!plan.usable && p.groups == 1 && p.in_channels < 8 && few_env != 0 &&
      (asked == ForwardKernel::kAuto || asked == ForwardKernel::kImplicitGemmWgmma)) {
    ExecOptions o = options;
    o.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    ImplicitGemmFpropPlan fp = plan_as_given(p, o, true);
    if (!fp.usable || !fp.wg || fp.wg_raw) return plan;
    if (few_env != 1 && !few_channels_on_wgmma(p, fp)) return plan;
    fp.wg_only = true;
    fp.tma = false;
    fp.tma_reason = "fewer than 8 input channels: the wgmma kernel only";
    return fp;
  }
  const bool split = p.dtype == DType::kFloat32 && options.math == MathMode::kStrictFP32;
  const int m = group_merge_factor(p, split);
  if (m <= 1) return plan;
  const bool forced = wg_env_int_or("CONVT_WG_GMERGE", -1) > 1;
  const int64_t cig = p.in_channels_per_group();
  // (Groups of fewer than 8 input channels: unless CONVT_WG_GMERGE_SMALL=0, or where
  // CONVT_WG_GMERGE asks.)
  const bool none_own = !plan.usable && cig < 8 &&
                        (forced || wg_env_int_or("CONVT_WG_GMERGE_SMALL", 1) != 0);
  // (1-D: one output row a plane.)
  const bool one_d = p.output_size(0) == 1 && p.output_size(1) == 1;
  if (!none_own && (!plan.usable || !(plan.wg || forced))) return plan;
  // Fewer groups merged where the merged problem's plan scatters its W taps (measured on an
  // H100, bfloat16, GPU time: kb72 with two groups merged took such tiles, 0.261 ms against
  // 0.153 unmerged and 0.135 with four; a 2-D layer of eight 8 -> 4 groups (k4 s2) 0.042 ms
  // with four merged, scattered, 0.033 with two, 0.040 unmerged), and, where the problem
  // has no plan of its own, where the dispatch gives the merged problem another kernel
  // than wgmma (CenterNet's depthwise layer in float32, whose 32 -> 32 groups take the TMA
  // kernel, runs 16 -> 16 on wgmma). Not where CONVT_WG_GMERGE asks for m.
  ImplicitGemmFpropPlan mp;
  int mm = m;
  for (; mm >= 2; --mm) {
    if (p.groups % mm != 0 || mm * cig < 8) continue;
    mp = plan_as_given(groups_merged(p, mm), options);
    const bool wg = mp.usable && mp.wg && !mp.wg_raw;
    if (wg && none_own && !forced && (one_d || !merged_stores_dense(p, mp))) return plan;
    if (wg && (forced || !mp.wg_scatter)) break;
    if (forced || (!none_own && !wg)) return plan;
  }
  if (mm < 2) return plan;
  mp.wg_gmerge = mm;
  if (none_own) {
    mp.wg_only = true;
    mp.tma = false;
    mp.tma_reason = "groups merged for the wgmma kernel only";
    return mp;
  }
  mp.kind = plan.kind;
  mp.block_k = plan.block_k;
  mp.cig_pad = plan.cig_pad;
  mp.cog_pad = plan.cog_pad;
  mp.wt = plan.wt;
  mp.rows = plan.rows;
  mp.tw_max = plan.tw_max;
  mp.strip_rows = plan.strip_rows;
  mp.smem_bytes = plan.smem_bytes;
  mp.tma = plan.tma;
  mp.tma_reason = plan.tma_reason;
  mp.tma_bn = plan.tma_bn;
  mp.tma_bk = plan.tma_bk;
  mp.tma_row_bytes = plan.tma_row_bytes;
  mp.tma_w_taps = plan.tma_w_taps;
  mp.workspace_bytes = std::max(mp.workspace_bytes, plan.workspace_bytes);
  return mp;
}

}  // namespace

bool wgmma_input_in_place(const Problem& p, const TensorRef& x) {
  // (Strides of dimensions of size 1 do not matter: make_raw_tensor_map replaces them.)
  const int64_t e = dtype_size(p.dtype);
  const auto aligned = [&](int64_t stride) { return (stride * e) % 16 == 0; };
  if (reinterpret_cast<uintptr_t>(x.data) % 16 != 0) return false;
  if (p.input_size[2] > 1 && x.strides[4] != 1) return false;
  if ((p.input_size[1] > 1 && !aligned(x.strides[3])) ||
      (p.input_size[0] > 1 && !aligned(x.strides[2])) ||
      (p.in_channels_per_group() > 1 && !aligned(x.strides[1])))
    return false;
  if (p.batch == 1) return true;
  return p.groups == 1 ? aligned(x.strides[0])
                       : x.strides[0] == p.groups * p.in_channels_per_group() * x.strides[1];
}

bool wgmma_channels_last_in_place(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                  const TensorRef& x) {
  if (!plan.wg || plan.wg_raw || plan.split || plan.wg_wup > 1 || plan.wg_gmerge > 1 ||
      p.input_size[0] != 1 || plan.wg_stack > 1)
    return false;
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) return false;
  const int64_t e = dtype_size(p.dtype);
  const auto aligned = [&](int64_t stride) { return (stride * e) % 16 == 0; };
  if (reinterpret_cast<uintptr_t>(x.data) % 16 != 0 || x.strides[1] != 1) return false;
  if (p.in_channels_per_group() % plan.wg_bk != 0) return false;
  // (A position's channels must not overlap the next position's.)
  if (p.input_size[2] > 1 && (!aligned(x.strides[4]) || x.strides[4] < p.in_channels)) return false;
  if (p.input_size[1] > 1 && !aligned(x.strides[3])) return false;
  return p.batch == 1 || aligned(x.strides[0]);
}

bool make_channels_last_tensor_map(CUtensorMap* map, const ImplicitGemmFpropPlan& plan,
                                   const Problem& p, const TensorRef& x) {
  if (!wgmma_channels_last_in_place(plan, p, x)) return false;
  const int64_t e = dtype_size(p.dtype);
  const int64_t row = int64_t(plan.wg_bk) * e;
  const int64_t chunks = p.in_channels / plan.wg_bk;
  // (Dimensions of size 1 get the strides of a dense tensor: only coordinate 0 is read.)
  const int64_t sw = p.input_size[2] > 1 ? x.strides[4] * e : p.in_channels * e;
  const int64_t sh = p.input_size[1] > 1 ? x.strides[3] * e : sw * p.input_size[2];
  const int64_t sn = p.batch > 1 ? x.strides[0] * e : sh * p.input_size[1];
  const cuuint64_t dims[5] = {cuuint64_t(plan.wg_bk), cuuint64_t(p.input_size[2]),
                              cuuint64_t(p.input_size[1]), cuuint64_t(chunks),
                              cuuint64_t(p.batch)};
  const cuuint64_t gstrides[4] = {cuuint64_t(sw), cuuint64_t(sh), cuuint64_t(row),
                                  cuuint64_t(sn)};
  const cuuint32_t box[5] = {cuuint32_t(plan.wg_bk), cuuint32_t(plan.wg_wbox),
                             cuuint32_t(plan.wg_hbox), 1, 1};
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  const CUtensorMapDataType type = p.dtype == DType::kFloat16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                              : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUtensorMapSwizzle swizzle = row == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : row == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                 : CU_TENSOR_MAP_SWIZZLE_32B;
  return encode_tiled_fn()(map, type, 5, const_cast<void*>(x.data), dims, gstrides, box, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool wgmma_input_transposed_in_kernel(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                      const TensorRef& x) {
  if (!plan.wg || !plan.wg_xp || plan.wg_raw || plan.split || plan.wg_wup > 1 ||
      plan.wg_fold > 1 || plan.wg_gmerge > 1)
    return false;
  if (wgmma_channels_last_in_place(plan, p, x)) return false;
  return wgmma_input_in_place(p, x);
}

bool wgmma_input_copied_in_kernel(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                  const TensorRef& x) {
  if (!plan.wg || !plan.wg_copy_fused || plan.wg_xp || plan.wg_raw || plan.split ||
      plan.wg_wup > 1 || plan.wg_gmerge > 1)
    return false;
  const int64_t iw = p.input_size[2], ih = p.input_size[1], id = p.input_size[0];
  return x.strides[4] == 1 && (ih == 1 || x.strides[3] == iw) &&
         (id == 1 || x.strides[2] == ih * iw) &&
         (!plan.wg_copy_vec || wgmma_copier_positions_per_load(plan, p, x) == 8);
}

int wgmma_copier_positions_per_load(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                    const TensorRef& x) {
  const int64_t e = dtype_size(p.dtype);
  if (e != 2) return 1;
  const int64_t plane = p.input_size[0] * p.input_size[1] * p.input_size[2];
  const auto aligned = [&](int64_t k) {
    return plane % k == 0 && x.strides[0] % k == 0 && x.strides[1] % k == 0 &&
           plan.wg_copy_chunk % k == 0 &&
           reinterpret_cast<std::uintptr_t>(x.data) % std::uintptr_t(k * e) == 0;
  };
  return aligned(8) ? 8 : aligned(2) ? 2 : 1;
}

// A tensor map over x itself (readable as wgmma_input_in_place says), dims (W, channels of
// a group, H, D, N * G), box (cols, chans, rows, 1, 1).
static bool encode_x_boxes(CUtensorMap* map, const Problem& p, const TensorRef& x, int64_t cols,
                           int64_t chans, int64_t rows, CUtensorMapSwizzle swizzle) {
  const int64_t e = dtype_size(p.dtype);
  const int64_t cig = p.in_channels_per_group();
  const cuuint64_t dims[5] = {cuuint64_t(p.input_size[2]), cuuint64_t(cig),
                              cuuint64_t(p.input_size[1]), cuuint64_t(p.input_size[0]),
                              cuuint64_t(p.batch * p.groups)};
  // (Dimensions of size 1 get the strides of a dense tensor: only coordinate 0 is read.)
  const int64_t sh = p.input_size[1] > 1 ? x.strides[3] * e : round_up(p.input_size[2] * e, 16);
  const int64_t sd = p.input_size[0] > 1 ? x.strides[2] * e : sh * p.input_size[1];
  const int64_t sc = cig > 1 ? x.strides[1] * e : sd * p.input_size[0];
  const int64_t sng = p.groups > 1 ? cig * sc : p.batch > 1 ? x.strides[0] * e : cig * sc;
  const cuuint64_t gstrides[4] = {cuuint64_t(sc), cuuint64_t(sh), cuuint64_t(sd),
                                  cuuint64_t(sng)};
  const cuuint32_t box[5] = {cuuint32_t(cols), cuuint32_t(chans), cuuint32_t(rows), 1, 1};
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  const CUtensorMapDataType type = p.dtype == DType::kFloat16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                   : p.dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  return encode_tiled_fn()(map, type, 5, const_cast<void*>(x.data), dims, gstrides, box, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool make_xp_tensor_map(CUtensorMap* map, const ImplicitGemmFpropPlan& plan, const Problem& p,
                        const TensorRef& x) {
  if (!wgmma_input_transposed_in_kernel(plan, p, x)) return false;
  // (A piece's lines are its 32 columns: 64 bytes in 16-bit types, 128 in float.)
  return encode_x_boxes(map, p, x, wg::kXpCols, plan.wg_bk, plan.wg_xp_rows,
                        dtype_size(p.dtype) == 2 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                 : CU_TENSOR_MAP_SWIZZLE_128B);
}

namespace {

// Whether the TMA kernel runs (plan, problem, input) on `device`; fills `map` when it does
// and `why` when it does not.
bool choose_tma(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                int device, CUtensorMap* map, std::string* why) {
  if (!plan.tma) {
    *why = plan.tma_reason;
    return false;
  }
  if (!tma_supported(device)) {
    *why = "device or build without sm_90 TMA";
    return false;
  }
  return make_x_tensor_map(map, p, x, plan.tma_bk, plan.tma_row_bytes, why);
}

std::string describe_tma(const ImplicitGemmFpropPlan& plan, const Problem& p) {
  const bool wgmma = !plan.split && tma_wgmma_requested();
  tma::TmaFpropParams fp{};
  fp.stride[2] = int(p.stride[2]);
  fp.pad[2] = int(p.padding[2]);
  fp.dil[2] = int(p.dilation[2]);
  fp.k[2] = int(p.kernel_size[2]);
  fp.out[2] = int(p.output_sizes()[2]);
  set_w_owners(fp);  // as the launch does
  const std::string owners =
      fp.w_map ? detail::str_cat(", ", fp.w_phases, " of ", fp.stride[2],
                                 " W phases (the rest have no tap)")
               : std::string();
  return detail::str_cat("implicit-GEMM TMA + ", wgmma ? "wgmma" : "mma.sync",
                         plan.split ? " 3xTF32" : "",
                         ", ", plan.tma_w_taps, " W taps per box, tile 128 positions x ",
                         plan.tma_bn, " channels x ", plan.tma_bk, ", ",
                         tma_launch_stages(plan, p.dtype), " stages", owners, ", workspace ",
                         plan.workspace_bytes, " B");
}

// Whether `device` runs the wgmma kernel: compute capability 9.0 exactly (its code is
// sm_90a) and a build that holds that code. Cached per device.
bool wgmma_supported(int device) {
  static std::atomic<int> state[64] = {};  // 0 unknown, 1 yes, 2 no
  std::atomic<int>* cached = device >= 0 && device < 64 ? &state[device] : nullptr;
  int v = cached ? cached->load(std::memory_order_relaxed) : 0;
  if (v == 0) {
    int major = 0, minor = 0;
    bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
                  cudaSuccess &&
              cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) ==
                  cudaSuccess &&
              major == 9 && minor == 0;
    ok = ok && wgmma_kernel_binary_version() == 90 && encode_tiled_fn() != nullptr;
    (void)cudaGetLastError();
    v = ok ? 1 : 2;
    if (cached) cached->store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

// The tensor map of the wgmma kernel's input copy xt ([N*G][cblocks][D][H][W][bk], see
// implicit_gemm_fprop_wgmma_sm90.cuh): dims (bk, W, H, D, N*G*cblocks), box (bk, wbox,
// hbox, stacked D planes, 1), or with stacked samples dims (bk, W, H, N, G*cblocks), box
// (bk, wbox, hbox, stacked samples, 1); swizzled in the row's width (32, 64 or 128 bytes),
// zeros out of bounds.
void make_xt_tensor_map(CUtensorMap* map, const ImplicitGemmFpropPlan& plan, const Problem& p,
                        void* xt) {
  const int64_t e = dtype_size(p.dtype);
  const int64_t row = int64_t(plan.wg_bk) * e;  // bytes of a position's channel block
  cuuint64_t dims[5] = {cuuint64_t(plan.wg_bk), cuuint64_t(p.input_size[2]),
                        cuuint64_t(p.input_size[1]), cuuint64_t(p.input_size[0]),
                        cuuint64_t((plan.split ? 2 : 1) * p.batch * p.groups * plan.wg_cblocks)};
  const cuuint64_t wrow = cuuint64_t(row) * cuuint64_t(p.input_size[2]);
  const cuuint64_t plane = wrow * cuuint64_t(p.input_size[1]);
  cuuint64_t gstrides[4] = {cuuint64_t(row), wrow, plane, plane * cuuint64_t(p.input_size[0])};
  if (plan.wg_stack_n) {
    // Samples stacked (a D of one position): dims (bk, W, H, N, G x channel blocks), the
    // residual copies of split TF32 as samples N .. 2N - 1.
    const cuuint64_t gcb = cuuint64_t(p.groups) * cuuint64_t(plan.wg_cblocks);
    dims[3] = cuuint64_t((plan.split ? 2 : 1) * p.batch);
    dims[4] = gcb;
    gstrides[2] = plane * gcb;
    gstrides[3] = plane;
  }
  // (Stacked planes: a box of wg_stack samples or D positions.)
  const cuuint32_t box[5] = {cuuint32_t(plan.wg_bk), cuuint32_t(plan.wg_wbox),
                             cuuint32_t(plan.wg_hbox), cuuint32_t(plan.wg_stack), 1};
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  if (p.dtype == DType::kFloat16) type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (p.dtype == DType::kBFloat16) type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUtensorMapSwizzle swizzle = row == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : row == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                 : CU_TENSOR_MAP_SWIZZLE_32B;
  const CUresult r = encode_tiled_fn()(map, type, 5, xt, dims, gstrides, box, estr,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(detail::str_cat("convt: cuTensorMapEncodeTiled rejected the wgmma input copy (",
                                int(r), ")"));
}

// The tensor map over the input (strides x_str in elements; see wgmma_input_in_place) for the
// raw boxes of the wgmma kernel reading it in place: dims (W, H, D, channels of a group,
// N * G), box (wbox, hbox, 1, bk, 1), unswizzled, zeros out of bounds (padding, and the
// channels past the group's in its last channel block).
void make_raw_tensor_map(CUtensorMap* map, const ImplicitGemmFpropPlan& plan, const Problem& p,
                         const void* x, const int64_t* x_str) {
  const int64_t e = dtype_size(p.dtype);
  const int64_t cig = p.in_channels_per_group();
  const cuuint64_t dims[5] = {cuuint64_t(p.input_size[2]), cuuint64_t(p.input_size[1]),
                              cuuint64_t(p.input_size[0]), cuuint64_t(cig),
                              cuuint64_t(p.batch * p.groups)};
  // (Dimensions of size 1 get the strides of a dense tensor: only coordinate 0 is read.)
  const int64_t sh = p.input_size[1] > 1 ? x_str[3] * e : round_up(p.input_size[2] * e, 16);
  const int64_t sd = p.input_size[0] > 1 ? x_str[2] * e : sh * p.input_size[1];
  const int64_t sc = cig > 1 ? x_str[1] * e : sd * p.input_size[0];
  const int64_t sng = p.groups > 1 ? cig * sc : p.batch > 1 ? x_str[0] * e : cig * sc;
  const cuuint64_t gstrides[4] = {cuuint64_t(sh), cuuint64_t(sd), cuuint64_t(sc),
                                  cuuint64_t(sng)};
  const cuuint32_t box[5] = {cuuint32_t(plan.wg_wbox), cuuint32_t(plan.wg_hbox), 1,
                             cuuint32_t(plan.wg_bk), 1};
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  const CUresult r = encode_tiled_fn()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 5,
                                       const_cast<void*>(x), dims, gstrides, box, estr,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(detail::str_cat("convt: cuTensorMapEncodeTiled rejected the wgmma input (",
                                int(r), ")"));
}

std::string describe_wgmma(const ImplicitGemmFpropPlan& plan, const Problem& p,
                           const TensorRef& x) {
  return detail::str_cat(
      "implicit-GEMM wgmma persistent", plan.split ? " 3xTF32" : "", ", tile ",
      plan.wg_nc > 0 ? detail::str_cat(plan.wg_n, " positions x ", plan.wg_nc, " channels (")
                     : detail::str_cat(plan.wg_coop_n ? "64 channels x 2 x "
                                       : plan.wg_coop ? "128 channels (two warpgroups) x "
                                       : plan.wg_mfold > 1
                                           ? detail::str_cat(plan.wg_mfold, " W taps x ",
                                                             plan.wg_cw, " channels x ")
                                           : std::string("64 channels x "),
                                       plan.wg_n, " positions (",
                                       plan.wg_coop_n ? "two warpgroups sharing the weight "
                                                        "tiles, each " : ""),
      plan.wg_rows, " rows x ", plan.wg_wv, " of a ", plan.wg_hbox, "x", plan.wg_wbox,
      " box, ", int(plan.wg_used * 100 + 0.5), "% used), K step ", plan.wg_bk,
      plan.wg_tsplit ? std::string(" channels x 1 tap (taps split)")
                     : detail::str_cat(" channels x ", plan.wg_hb, " H taps x ",
                                       plan.wg_tmax[2], " W taps"),
      plan.wg_fold > 1 ? detail::str_cat(" folded into N (", plan.wg_nc, " x ", plan.wg_fold,
                                         " columns)")
      : plan.wg_mfold > 1 ? detail::str_cat(" stacked in M (", plan.wg_mfold, " a row block)")
                          : std::string(),
      plan.wg_scatter ? detail::str_cat(", W taps scattered (stride ", p.stride[2], ")")
      : plan.wg_wmerge ? detail::str_cat(", W phases merged (stride ", p.stride[2], ")")
      : plan.wg_wpairs ? std::string(", W phase pairs in registers")
                      : std::string(),
      ", ", plan.wg_stages, " stages",
      plan.wg_stack > 1 ? detail::str_cat(", ", plan.wg_stack,
                                          plan.wg_stack_n ? " samples" : " D planes", " a tile")
                        : std::string(),
      plan.wg_w_resident ? detail::str_cat(" (weight tiles resident: ", plan.wg_steps,
                                           " K steps a tile)")
                         : std::string(),
      plan.wg_splits > 1 ? detail::str_cat(", K steps split in ", plan.wg_splits, " parts")
                         : std::string(),
      plan.wg_wup > 1 ? detail::str_cat(", zeros inserted along W (stride ", plan.wg_wup,
                                        " run as 1)")
                      : std::string(),
      plan.wg_gmerge > 1 ? detail::str_cat(", groups merged ", plan.wg_gmerge,
                                           " at a time (block-diagonal weight)")
                         : std::string(),
      plan.wg_only && plan.wg_gmerge == 1
          ? detail::str_cat(", ", p.in_channels_per_group(), " input channels padded to ",
                            plan.wg_bk)
          : std::string(),
      wgmma_channels_last_in_place(plan, wgmma_problem(plan, p), x)
          ? ", channels_last input read in place"
      : wgmma_input_transposed_in_kernel(plan, wgmma_problem(plan, p), x)
          ? detail::str_cat(", input transposed in the kernel (a ring of ", plan.wg_xp_pieces,
                            " pieces of ", plan.wg_xp_piece_bytes, " B",
                            plan.wg_xp_early ? ", loaded ahead of the stages" : "",
                            plan.wg_xp_warps == 2 ? ", two transposer warps" : "", ")")
      : wgmma_input_copied_in_kernel(plan, wgmma_problem(plan, p), x)
          ? ", input copied by the kernel's copier warps"
      : !plan.wg_raw               ? ""
      : wgmma_input_in_place(p, x) ? ", input read in place (A from registers)"
                                    : ", input padded, then read in place (A from registers)",
      ", workspace ", plan.workspace_bytes, " B");
}

std::string describe_fallback(const ImplicitGemmFpropPlan& plan, const std::string& why) {
  return detail::str_cat(plan.describe(), " (TMA kernel not used: ", why, ")");
}

}  // namespace

bool implicit_gemm_runs(const ImplicitGemmFpropPlan& plan, int device) {
  return plan.usable && (!plan.wg_only || wgmma_supported(device));
}

wg::PackParams wgmma_pack_params(const ImplicitGemmFpropPlan& plan, const Problem& p, bool split) {
  wg::PackParams pk{};
  pk.groups = int(p.groups);
  pk.cig = int(p.in_channels_per_group());
  pk.cog = int(p.out_channels_per_group());
  // (W taps folded: a tile's columns are its channels times the folded taps, one tile per
  // H tap.)
  const int fold = plan.wg_fold > 1 ? plan.wg_fold : 1;
  // (W taps stacked in M: 64 rows of mfold taps x wg_cw channels.)
  const int mfold = plan.wg_mfold > 1 ? plan.wg_mfold : 1;
  pk.cw = plan.wg_cw * fold * mfold;
  pk.fold = fold;
  pk.mfold = mfold > 1 ? mfold : 0;
  pk.co_tiles = int((pk.cog + plan.wg_cw - 1) / plan.wg_cw);
  pk.cblocks = plan.wg_cblocks;
  pk.bk = plan.wg_bk;
  pk.split = split ? 1 : 0;
  pk.flag_nonfinite = split || plan.wg_wup > 1 ? 1 : 0;
  if (plan.wg_gmerge > 1) {
    pk.gm_cig = pk.cig / plan.wg_gmerge;
    pk.gm_cog = pk.cog / plan.wg_gmerge;
  }
  for (int d = 0; d < 3; ++d) {
    pk.k[d] = int(p.kernel_size[d]);
    pk.stride[d] = int(p.stride[d]);
    pk.pad[d] = int(p.padding[d]);
    pk.dil[d] = int(p.dilation[d]);
    pk.tmax[d] = plan.wg_tmax[d];
  }
  if (fold > 1) pk.tmax[2] = 1;
  if (mfold > 1) pk.tmax[2] = (plan.wg_tmax[2] + mfold - 1) / mfold;
  // (W taps scattered: W runs with stride 1, every tap in one phase, tap f in column block f.)
  if (plan.wg_scatter) pk.stride[2] = 1;
  return pk;
}

std::size_t wgmma_packed_bytes(const wg::PackParams& pk, std::size_t elem) {
  return std::size_t(wg::packed_weight_elems(pk)) * elem * (pk.split ? 2 : 1);
}

tma::TmaPackParams tma_pack_params(const ImplicitGemmFpropPlan& plan, const Problem& p) {
  tma::TmaPackParams pk{};
  pk.cig = int(p.in_channels_per_group());
  pk.cog = int(p.out_channels_per_group());
  pk.groups = int(p.groups);
  pk.ci_chunks = (pk.cig + plan.tma_bk - 1) / plan.tma_bk;
  pk.co_tiles = (pk.cog + plan.tma_bn - 1) / plan.tma_bn;
  for (int d = 0; d < 3; ++d) pk.k[d] = int(p.kernel_size[d]);
  return pk;
}

igemm::PackParams mma_pack_params(const ImplicitGemmFpropPlan& plan, const Problem& p) {
  igemm::PackParams pk{};
  pk.cig = p.in_channels_per_group();
  pk.cog = p.out_channels_per_group();
  pk.groups = p.groups;
  pk.cig_pad = plan.cig_pad;
  pk.cog_pad = plan.cog_pad;
  for (int d = 0; d < 3; ++d) pk.k[d] = p.kernel_size[d];
  return pk;
}

namespace {

// FNV-1a over the bytes of trivially copyable values (zero-initialised structs: their
// padding is zero too).
struct KeyHash {
  uint64_t h = 1469598103934665603ull;
  template <typename V>
  void add(const V& v) {
    static_assert(std::is_trivially_copyable<V>::value, "hashed by its bytes");
    const unsigned char* b = reinterpret_cast<const unsigned char*>(&v);
    for (std::size_t i = 0; i < sizeof(V); ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
};

}  // namespace

WeightRelayout weight_relayout_of(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                  const TensorRef& x, int device) {
  // The kernel run_implicit_gemm_fprop runs, and its packing (the weight's strides and
  // pointers left out: the packed layout does not depend on them).
  WeightRelayout r;
  KeyHash k;
  k.add(int(p.dtype));
  k.add(plan.split);
  const std::size_t e = dtype_size(p.dtype);
  if (plan.fold) {
    // (The mma.sync kernel's parameters, cog_pad the (channel, tap) rows: fold::
    // pack_fold_weight_kernel's layout.)
    const igemm::PackParams pk = mma_pack_params(plan, p);
    k.add(4);
    k.add(pk);
    r.bytes = std::size_t(pk.groups * pk.cig_pad * pk.cog_pad) * e;
  } else if (plan.wg && wgmma_supported(device)) {
    const wg::PackParams pk = wgmma_pack_params(plan, wgmma_problem(plan, p), plan.split);
    k.add(1);
    k.add(pk);
    const std::size_t bytes = wgmma_packed_bytes(pk, e);
    r.bytes = pk.flag_nonfinite ? wgmma_cache_flag_offset(bytes) + 16 : bytes;
  } else {
    alignas(64) CUtensorMap map;
    std::string why;
    if (choose_tma(plan, p, x, device, &map, &why)) {
      const tma::TmaPackParams pk = tma_pack_params(plan, p);
      k.add(2);
      k.add(pk);
      k.add(plan.tma_bn);
      k.add(plan.tma_bk);
      k.add(!plan.split && tma_wgmma_requested());  // (the wgmma form's tile layout)
      r.bytes = std::size_t(tma::tma_packed_weight_elems(pk, plan.tma_bn, plan.tma_bk)) * e;
    } else {
      const igemm::PackParams pk = mma_pack_params(plan, p);
      k.add(3);
      k.add(pk);
      r.bytes = std::size_t(igemm::packed_weight_elems(pk)) * e;
    }
  }
  r.key = k.h;
  return r;
}

direct::DirectParams direct_problem_params(const Problem& p) {
  direct::DirectParams d{};
  d.N = p.batch;
  d.C_in = p.in_channels;
  d.C_out = p.out_channels;
  d.groups = p.groups;
  d.cig = p.in_channels_per_group();
  d.cog = p.out_channels_per_group();
  const Dims out = p.output_sizes();
  for (int i = 0; i < 3; ++i) {
    d.in[i] = p.input_size[i];
    d.k[i] = p.kernel_size[i];
    d.out[i] = out[i];
    d.stride[i] = p.stride[i];
    d.pad[i] = p.padding[i];
    d.dil[i] = p.dilation[i];
  }
  direct::finish_params(d);
  return d;
}

std::string describe_direct_forward(const Problem& p, const ImplicitGemmFpropPlan& plan,
                                    const int64_t* x_strides, int sms) {
  direct::DirectParams d = direct_problem_params(p);
  // The strides of a contiguous (-, b, sizes[0], sizes[1], sizes[2]) tensor.
  auto contiguous = [](int64_t* str, int64_t b, const int64_t* sizes) {
    str[4] = 1;
    str[3] = sizes[2];
    str[2] = sizes[1] * sizes[2];
    str[1] = sizes[0] * sizes[1] * sizes[2];
    str[0] = b * str[1];
  };
  contiguous(d.x_str, d.C_in, d.in);
  if (x_strides != nullptr) std::copy(x_strides, x_strides + 5, d.x_str);
  contiguous(d.w_str, d.cog, d.k);
  contiguous(d.y_str, d.C_out, d.out);
  d.b_str = 1;
  const int acc_bytes = p.dtype == DType::kFloat64 ? 8 : 4;
  return "direct kernel, " + direct::direct_forward_form(d, int64_t(sms) * 32, acc_bytes) +
         " (implicit GEMM " + plan.describe() + ")";
}

std::string describe_plan_without_device(const Problem& p, const ExecOptions& opt) {
  const ImplicitGemmFpropPlan plan = plan_implicit_gemm_fprop(p, opt);
  // (As describe_forward says it where the implicit GEMM cannot run.)
  if (!plan.usable) return describe_direct_forward(p, plan, nullptr, wgmma_planner_sms());
  if (plan.fold) return plan.describe();
  // (A contiguous input at a 256-byte aligned address: what the planner assumes.)
  const TensorRef x(reinterpret_cast<void*>(std::uintptr_t(256)), p.dtype, Device::cuda(0),
                    {p.batch, p.in_channels, p.input_size[0], p.input_size[1], p.input_size[2]});
  if (plan.wg) return describe_wgmma(plan, p, x);
  if (plan.tma) return describe_tma(plan, p);
  return plan.describe();
}

std::string describe_implicit_gemm_fprop(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                         const TensorRef& x, int device) {
  if (!plan.usable) return plan.describe();
  if (plan.fold)
    return plan.describe() + (fold_fused(plan, p, x)          ? " (GEMM tiles by cp.async, "
                                                                 "the fold in its epilogue)"
                              : fold_gemm_pipelined(p, x) ? " (GEMM tiles by cp.async)"
                                                          : "");
  if (plan.wg && wgmma_supported(device)) return describe_wgmma(plan, p, x);
  alignas(64) CUtensorMap map;
  std::string why;
  if (choose_tma(plan, p, x, device, &map, &why)) return describe_tma(plan, p);
  return describe_fallback(plan, why);
}

const int* wgmma_nonfinite_flag(const ImplicitGemmFpropPlan& plan, const ExecOptions& opt,
                                int device) {
  if (!(plan.usable && plan.wg && (plan.split || plan.wg_wup > 1 || plan.wg_gmerge > 1) &&
        wgmma_supported(device)))
    return nullptr;
  return reinterpret_cast<const int*>(static_cast<unsigned char*>(opt.workspace) +
                                      plan.wg_counter_offset) + 1;
}

std::string run_implicit_gemm_fprop(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                    const TensorRef& x, const TensorRef& w, const TensorRef* b,
                                    const TensorRef& y, const ExecOptions& opt, bool describe) {
  CONVT_CHECK(opt.workspace != nullptr && opt.workspace_bytes >= plan.workspace_bytes,
              "convt: forward of ", p.to_string(), " needs ", plan.workspace_bytes,
              " bytes of workspace (see convt::workspace_size), but got ", opt.workspace_bytes);
  CONVT_CHECK(reinterpret_cast<uintptr_t>(opt.workspace) % 16 == 0,
              "convt: the workspace must be 16-byte aligned");
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (plan.fold) {
    switch (p.dtype) {
      case DType::kFloat32:
        if (plan.split)
          launch_gemm_fold<float, true>(plan, p, x, w, b, y, opt);
        else
          launch_gemm_fold<float, false>(plan, p, x, w, b, y, opt);
        break;
      case DType::kFloat16: launch_gemm_fold<__half, false>(plan, p, x, w, b, y, opt); break;
      case DType::kBFloat16:
        launch_gemm_fold<__nv_bfloat16, false>(plan, p, x, w, b, y, opt);
        break;
      default: throw Error("convt: GEMM and fold called for an unsupported dtype");
    }
    return describe ? describe_implicit_gemm_fprop(plan, p, x, device) : std::string();
  }
  if (plan.wg && wgmma_supported(device)) {
    const Problem pw = wgmma_problem(plan, p);
    const WgmmaMapFn encode = [&](CUtensorMap* m, const void* data, const int64_t* str) {
      if (str == nullptr) {
        make_xt_tensor_map(m, plan, pw, const_cast<void*>(data));
      } else {
        make_raw_tensor_map(m, plan, pw, data, str);
      }
    };
    switch (p.dtype) {
      case DType::kFloat32:
        if (plan.split) {
          launch_fprop_wgmma<float, true>(plan, pw, x, w, b, y, opt, device, encode);
        } else {
          launch_fprop_wgmma<float, false>(plan, pw, x, w, b, y, opt, device, encode);
        }
        break;
      case DType::kFloat16:
        launch_fprop_wgmma<__half, false>(plan, pw, x, w, b, y, opt, device, encode);
        break;
      case DType::kBFloat16:
        launch_fprop_wgmma<__nv_bfloat16, false>(plan, pw, x, w, b, y, opt, device, encode);
        break;
      default: throw Error("convt: implicit-GEMM forward called for an unsupported dtype");
    }
    return describe ? describe_wgmma(plan, p, x) : std::string();
  }
  alignas(64) CUtensorMap map;
  std::string why;
  if (choose_tma(plan, p, x, device, &map, &why)) {
    switch (p.dtype) {
      case DType::kFloat32:
        if (plan.split)
          launch_fprop_tma<float, true>(plan, p, map, w, b, y, opt, device);
        else
          launch_fprop_tma<float, false>(plan, p, map, w, b, y, opt, device);
        break;
      case DType::kFloat16:
        launch_fprop_tma<__half, false>(plan, p, map, w, b, y, opt, device);
        break;
      case DType::kBFloat16:
        launch_fprop_tma<__nv_bfloat16, false>(plan, p, map, w, b, y, opt, device);
        break;
      default: throw Error("convt: implicit-GEMM forward called for an unsupported dtype");
    }
    return describe ? describe_tma(plan, p) : std::string();
  }
  switch (p.dtype) {
    case DType::kFloat32:
      if (plan.split)
        launch_fprop_mma<float, true>(plan, p, x, w, b, y, opt);
      else
        launch_fprop_mma<float, false>(plan, p, x, w, b, y, opt);
      break;
    case DType::kFloat16: launch_fprop_mma<__half, false>(plan, p, x, w, b, y, opt); break;
    case DType::kBFloat16: launch_fprop_mma<__nv_bfloat16, false>(plan, p, x, w, b, y, opt); break;
    default: throw Error("convt: implicit-GEMM forward called for an unsupported dtype");
  }
  return describe ? describe_fallback(plan, why) : std::string();
}

}  // namespace cuda
}  // namespace convt
