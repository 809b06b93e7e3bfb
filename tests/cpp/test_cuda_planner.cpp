// The CUDA forward planner (src/cuda/fprop_implicit_gemm.cu), host side only: no device is
// needed, so these run wherever the CUDA backend is built.
//
// For a fuzzed sweep of problems, every plan that picks the TMA-fed kernel must hold the
// invariants its kernel relies on, checked here against quantities computed independently
// by brute force from the problem: the W taps of the widest phase and the column step
// between consecutive taps, a box row that holds every W tap's window after an alignment
// lead of up to 15 bytes, rows an odd multiple of 16 bytes (conflict-free fragment loads),
// at most 256 elements per row (a TMA box limit), at least two pipeline stages, and tiles
// that exist as kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "convt/convt.hpp"
#include "convt/cuda/direct_shapes.hpp"
#include "convt/cuda/fast_divmod.hpp"
#include "cuda/fprop_implicit_gemm.hpp"
#include "test_util.hpp"

namespace {

using convt::Dims;
using convt::DType;
using convt::ExecOptions;
using convt::ForwardKernel;
using convt::MathMode;
using convt::Problem;
using Plan = convt::cuda::ImplicitGemmFpropPlan;
using convt::test::ScopedEnv;
using convt::Device;
using convt::TensorRef;

// The ranges a rule's test draws its problems from: 1-3 dimensions, channels, batch, sizes
// (the 1-D ones longer), kernels; strides 1 to stride_hi, or with rare_stride 2 one time in
// six and else 1; bfloat16 one time in four, else float32.
struct DrawRanges {
  int64_t cin_hi, cout_hi, batch_hi, size_lo, size_hi, size_hi_1d, kernel_hi, stride_hi;
  bool rare_stride;
};

// A problem drawn from r, or none where PyTorch would reject it.
std::optional<Problem> draw_problem(std::mt19937_64& rng, const DrawRanges& r) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Problem given;
  given.spatial_dims = static_cast<int>(pick(1, 3));
  given.in_channels = pick(8, r.cin_hi);
  given.out_channels = pick(8, r.cout_hi);
  given.batch = pick(1, r.batch_hi);
  for (int d = 0; d < given.spatial_dims; ++d) {
    given.input_size[d] = pick(r.size_lo, given.spatial_dims == 1 ? r.size_hi_1d : r.size_hi);
    given.kernel_size[d] = pick(1, r.kernel_hi);
    given.stride[d] = r.rare_stride ? (pick(0, 5) == 0 ? 2 : 1) : pick(1, r.stride_hi);
    given.padding[d] = pick(0, (given.kernel_size[d] - 1) / 2);
  }
  given.dtype = pick(0, 3) == 0 ? DType::kBFloat16 : DType::kFloat32;
  try {
    given.validate();
  } catch (const convt::Error&) {
    return std::nullopt;
  }
  return given;
}

// fn(p, o) for each of `count` draws from r (seeded) that PyTorch accepts, p in its 3-D form,
// under a trace of the problem as drawn; float32 ones once with TF32 and once in strict
// float32 (o.math says which).
template <class Fn>
void for_each_drawn(uint64_t seed, const DrawRanges& r, int count, Fn fn) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; ++i) {
    const auto drawn = draw_problem(rng, r);
    if (!drawn) continue;
    const Problem p = drawn->canonical3d();
    SCOPED_TRACE(drawn->to_string());
    for (MathMode math : {MathMode::kAllowTF32, MathMode::kStrictFP32}) {
      if (math == MathMode::kStrictFP32 && p.dtype != DType::kFloat32) continue;
      ExecOptions o;
      o.math = math;
      fn(p, o);
    }
  }
}

// The plan and its description with one setting of an environment variable.
struct PlanUnder {
  Plan plan;
  std::string text;
};
PlanUnder plan_under(const char* name, const char* value, const Problem& p,
                     const ExecOptions& o) {
  const ScopedEnv env(name, value);
  return {convt::cuda::plan_implicit_gemm_fprop(p, o),
          convt::cuda::describe_plan_without_device(p, o)};
}

// W taps of the widest phase and the input-column step between a phase's consecutive
// taps, by enumerating every phase and tap: tap k reaches output phase r when
// (r + pad - k*dil) is divisible by the stride, and reads input column (r + pad - k*dil)/s
// (up to the phase's own position).
struct WTaps {
  int64_t max_count = 0;
  int64_t doff = 0;  // 0 when no phase has two taps
};

WTaps brute_force_w_taps(int64_t s, int64_t pad, int64_t dil, int64_t k) {
  WTaps t;
  for (int64_t r = 0; r < s; ++r) {
    std::vector<int64_t> cols;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int64_t v = r + pad - kk * dil;
      if (((v % s) + s) % s == 0) cols.push_back(v >= 0 ? v / s : -((-v) / s));
    }
    if (int64_t(cols.size()) > t.max_count) t.max_count = int64_t(cols.size());
    for (size_t i = 1; i < cols.size(); ++i) {
      const int64_t d = cols[i - 1] - cols[i];
      EXPECT_TRUE(t.doff == 0 || t.doff == d) << "taps of a phase must be evenly spaced";
      t.doff = d;
    }
  }
  return t;
}

std::vector<Problem> fuzzed_problems() {
  std::vector<Problem> v;
  std::mt19937_64 rng(20261121);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  while (v.size() < 600) {
    Problem p;
    p.spatial_dims = static_cast<int>(pick(1, 3));
    p.groups = pick(1, 4);
    p.in_channels = p.groups * pick(1, 80);
    p.out_channels = p.groups * pick(1, 160);
    p.batch = pick(1, 4);
    for (int d = 0; d < p.spatial_dims; ++d) {
      p.input_size[d] = pick(1, 300);
      p.kernel_size[d] = pick(1, 15);
      p.stride[d] = pick(1, 6);
      p.dilation[d] = pick(1, d + 1 == p.spatial_dims ? 60 : 4);
      p.padding[d] = pick(0, 8);
      p.output_padding[d] = pick(0, std::max(p.stride[d], p.dilation[d]) - 1);
    }
    p.has_bias = pick(0, 1) == 1;
    const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
    p.dtype = dtypes[pick(0, 2)];
    try {
      p.validate();
    } catch (const convt::Error&) {
      continue;
    }
    v.push_back(p);
  }
  return v;
}

// Calls fn(p, math, plan) for every fuzzed problem p (canonical, 3-D) in each math mode of
// its dtype (strict float32 for float32 only), with `kernel` asked for.
template <typename Fn>
void for_each_fuzzed_plan(ForwardKernel kernel, Fn fn) {
  for (const Problem& problem : fuzzed_problems()) {
    for (MathMode math : {MathMode::kAllowTF32, MathMode::kStrictFP32}) {
      if (math == MathMode::kStrictFP32 && problem.dtype != DType::kFloat32) continue;
      const Problem p = problem.canonical3d();
      SCOPED_TRACE(problem.to_string());
      ExecOptions opt;
      opt.math = math;
      opt.forward_kernel = kernel;
      fn(p, math, convt::cuda::plan_implicit_gemm_fprop(p, opt));
    }
  }
}

// fn(p, dflt, dflt_text, other, other_text) for every fuzzed wgmma-kernel plan: the default
// plan and the plan with one setting, with their descriptions.
template <class Fn>
void for_each_fuzzed_plan_pair(const char* name, const char* value, Fn fn) {
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode math,
                                                             const Plan& dflt) {
    ExecOptions o;
    o.math = math;
    o.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const std::string dflt_d = convt::cuda::describe_plan_without_device(p, o);
    const auto [other, other_d] = plan_under(name, value, p, o);
    fn(p, dflt, dflt_d, other, other_d);
  });
}

TEST(CudaPlanner, TmaPlansHoldTheirKernelsInvariants) {
  int tma_plans = 0, narrowed = 0, declined_wide = 0;
  for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem& p, MathMode math,
                                                  const Plan& plan) {
    if (!plan.usable) return;
    const bool split = p.dtype == DType::kFloat32 && math == MathMode::kStrictFP32;
    EXPECT_EQ(plan.split, split);
    EXPECT_EQ(plan.describe().find("3xTF32") != std::string::npos, split) << plan.describe();
    if (!plan.tma) {
      if (plan.tma_reason.find("too wide for a TMA box") != std::string::npos) ++declined_wide;
      EXPECT_FALSE(plan.tma_reason.empty());
      return;
    }
    ++tma_plans;
    const int e = static_cast<int>(convt::dtype_size(p.dtype));
    const int seg_w = 128 / e, align = 16 / e;
    const WTaps w = brute_force_w_taps(p.stride[2], p.padding[2], p.dilation[2], p.kernel_size[2]);
    ASSERT_GE(w.max_count, 1);
    EXPECT_EQ(plan.tma_w_taps, w.max_count);
    const int64_t row = plan.tma_row_bytes;
    EXPECT_EQ(row % 32, 16) << "box rows must be an odd multiple of 16 bytes";
    EXPECT_GE(row / e, seg_w + (w.max_count - 1) * w.doff + align - 1)
        << "every W tap's window, after the alignment lead, must fit the box row";
    EXPECT_LE(row / e, 256) << "a TMA box is at most 256 elements wide";
    EXPECT_TRUE(plan.tma_bn == 32 || plan.tma_bn == 64);
    EXPECT_TRUE(plan.tma_bk == 16 || plan.tma_bk == 32);
    if (split) EXPECT_EQ(plan.tma_bn, 32) << "split TF32 has the 32-channel tile only";
    const int stages = convt::cuda::tma_pipeline_stages(p.dtype, plan.tma_bn, plan.tma_bk,
                                                        plan.tma_row_bytes, plan.tma_w_taps);
    EXPECT_GE(stages, 2);
    EXPECT_LE(stages, convt::cuda::kTmaMaxStages);
    // The TMA kernel packs its weight into the workspace sized for the plan.
    const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
    const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
    const int64_t packed = p.groups * taps * ((cig + plan.tma_bk - 1) / plan.tma_bk) *
                           plan.tma_bk * ((cog + plan.tma_bn - 1) / plan.tma_bn) * plan.tma_bn;
    EXPECT_LE(packed * e, int64_t(plan.workspace_bytes));
    if (plan.tma_bk == 16 && plan.block_k == 32) ++narrowed;
  });
  // The sweep must reach the paths it is meant to check.
  EXPECT_GT(tma_plans, 200);
  EXPECT_GT(narrowed, 0);
  EXPECT_GT(declined_wide, 0);
}

// The widest plans: a 13-tap W kernel leaves the 64-channel tile with fewer than two
// stages, so the planner narrows to 32 channels x 16; windows past 256 elements decline.
TEST(CudaPlanner, NarrowsTheTileForManyWTapsAndDeclinesTooWideWindows) {
  Problem p;
  p.spatial_dims = 2;
  p.batch = 1;
  p.in_channels = 64;
  p.out_channels = 128;
  p.input_size = {3, 40, 1};
  p.kernel_size = {1, 13, 1};
  p.padding = {0, 6, 0};
  p.dtype = DType::kFloat32;
  p.validate();
  auto plan = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), ExecOptions{});
  ASSERT_TRUE(plan.usable && plan.tma) << plan.describe() << " / " << plan.tma_reason;
  EXPECT_EQ(plan.tma_w_taps, 13);
  EXPECT_EQ(plan.tma_row_bytes, 208);  // 32 + 12 columns (+3 lead) of float: 188 -> 208 bytes
  EXPECT_EQ(plan.tma_bn, 32);
  EXPECT_EQ(plan.tma_bk, 16);

  p.kernel_size = {1, 3, 1};
  p.padding = {0, 0, 0};
  p.dilation = {1, 120, 1};
  p.validate();
  plan = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), ExecOptions{});
  ASSERT_TRUE(plan.usable);
  EXPECT_FALSE(plan.tma);
  EXPECT_EQ(plan.tma_reason, "the W taps' input window is too wide for a TMA box");
}

// The W phases of the TMA kernel's grid: with the owner map, every output W index of a
// row must be written exactly once (by its own phase's block, or as a tap-less output
// after an owner's output, or ahead of the first owner's first output), owners must be
// exactly the phases with taps, and without the map every phase runs. Simulated here
// the way the kernel's epilogue walks it, over a fuzzed sweep checked by brute force.
TEST(CudaPlanner, TmaWPhaseOwnersWriteEveryOutputOnce) {
  std::mt19937_64 rng(977);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int mapped = 0, wrapped = 0, leading = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int s = pick(1, 20), dil = pick(1, 6), k = pick(1, 7), len = pick(1, 40);
    const int pad = pick(0, dil * (k - 1)), op = pick(0, std::max(s, dil) - 1);
    const int out = (len - 1) * s - 2 * pad + dil * (k - 1) + op + 1;
    if (out <= 0) continue;
    SCOPED_TRACE("s=" + std::to_string(s) + " dil=" + std::to_string(dil) + " k=" +
                 std::to_string(k) + " pad=" + std::to_string(pad) + " out=" + std::to_string(out));
    std::vector<bool> has_taps(size_t(s), false);
    for (int r = 0; r < s; ++r)
      for (int kk = 0; kk < k; ++kk)
        if ((((r + pad - kk * dil) % s) + s) % s == 0) has_taps[size_t(r)] = true;
    const convt::cuda::TmaWPhases w = convt::cuda::tma_w_phases(s, pad, dil, k, out);
    if (!w.map) {
      EXPECT_EQ(w.phases, s);
      continue;
    }
    ++mapped;
    ASSERT_LE(s, convt::cuda::kTmaMaxWPhases);
    std::vector<int> writes(size_t(out), 0);
    int owners = 0;
    for (int r = 0; r < s; ++r) owners += has_taps[size_t(r)] ? 1 : 0;
    ASSERT_EQ(w.phases, owners);
    for (int i = 0; i < w.phases; ++i) {
      const int r = w.owner[i];
      ASSERT_TRUE(has_taps[size_t(r)]) << "owner " << r << " has no W tap";
      if (i > 0) ASSERT_GT(r, w.owner[i - 1]);
      const int before = i == 0 ? r : 0;
      for (int o = r; o < out; o += s) {
        ++writes[size_t(o)];
        for (int j = 1; j <= w.owned[i] && o + j < out; ++j) ++writes[size_t(o + j)];
        if (o == before)
          for (int j = 1; j <= before; ++j) ++writes[size_t(o - j)];
      }
      if (r + w.owned[i] >= s) ++wrapped;
      if (before > 0) ++leading;
    }
    for (int o = 0; o < out; ++o) ASSERT_EQ(writes[size_t(o)], 1) << "output " << o;
  }
  EXPECT_GT(mapped, 1000);
  EXPECT_GT(wrapped, 100);
  EXPECT_GT(leading, 100);
}

// The wgmma weight packing against the layout its descriptor describes, computed
// independently: canonical K-major without swizzle, ((8, m), (T, 2)) : ((1T, SBO), (1,
// LBO)) in elements with T = 16 bytes of elements, LBO = 128 and SBO = 256 bytes, and one
// MMA K step (16 channels of a 16-bit type, 8 of TF32) after another, BN * 32 bytes each.
// Element (MMA k index kk, column n) of K step ks must hold channel ks * K + ch(kk) of
// column n, ch being the order the A fragments use: the identity for 16-bit types; for
// TF32 k index t is channel 2t and t + 4 is 2t + 1.
TEST(CudaPlanner, WgmmaWeightPackingMatchesItsDescriptor) {
  for (int elem : {2, 4}) {
    const int kk_per_step = elem == 2 ? 16 : 8, t = 16 / elem;
    for (int bn : {32, 64}) {
      for (int bk : {16, 32}) {
        SCOPED_TRACE("elem " + std::to_string(elem) + " bn " + std::to_string(bn) + " bk " +
                     std::to_string(bk));
        // What the packing put at each byte of the tile.
        std::vector<int> chan(size_t(bn * bk), -1), col(size_t(bn * bk), -1);
        for (int i = 0; i < bn * bk; ++i) {
          int c = -1, n = -1;
          convt::cuda::tma_wgmma_b_element(i, bn, elem, &c, &n);
          ASSERT_TRUE(c >= 0 && c < bk && n >= 0 && n < bn) << "element " << i;
          chan[size_t(i)] = c;
          col[size_t(i)] = n;
        }
        std::vector<int> seen(size_t(bn * bk), 0);
        for (int ks = 0; ks < bk / kk_per_step; ++ks) {
          for (int kk = 0; kk < kk_per_step; ++kk) {
            for (int n = 0; n < bn; ++n) {
              const int byte = ks * bn * 32 + (n / 8) * 256 + (kk / t) * 128 + (n % 8) * 16 +
                               (kk % t) * elem;
              ASSERT_EQ(byte % elem, 0);
              const size_t i = size_t(byte / elem);
              ASSERT_LT(i, chan.size());
              const int ch = elem == 2 ? kk : (kk < 4 ? 2 * kk : 2 * (kk - 4) + 1);
              EXPECT_EQ(chan[i], ks * kk_per_step + ch) << "k step " << ks << " k " << kk
                                                        << " n " << n;
              EXPECT_EQ(col[i], n) << "k step " << ks << " k " << kk << " n " << n;
              ++seen[i];
            }
          }
        }
        for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "element " << i;
      }
    }
  }
}

// The positions of a position-major tile of nc channels with `fold` W taps folded into N:
// 256 while the accumulators (positions x nc x fold / 128 threads) stay at 128 registers a
// thread and the epilogue's sums (nc x positions floats) at 16 KB, else 128 or 64.
int64_t folded_positions(int64_t nc, int64_t fold) {
  for (int64_t n : {256, 128})
    if (n * nc * fold <= 128 * 128 && nc * n <= 4096) return n;
  return 64;
}

// Every wgmma plan (strict float32's split TF32 too) lays out its stages as the kernel
// reads them and fits two blocks per multiprocessor, and its tile's rows and box fit N.
// Groups of at most 32 output channels get position-major tiles of 256 positions x the
// group's channels rounded up to 8, 16, 24 or 32 (with the W taps folded into N, as many
// positions as folded_positions allows); wider ones 64 channels x N positions.
TEST(CudaPlanner, WgmmaPlansLayOutTheirStagesAndFitTwoBlocks) {
  // (One consumer warpgroup: two blocks a multiprocessor; TwoWarpgroupTilesShareTheBox
  // checks the tiles of two.)
  setenv("CONVT_WG_COOP", "0", 1);
  int plans = 0, split_plans = 0, position_major = 0, deep = 0, resegmented = 0, pair_aligned = 0;
  int transposed = 0, copied = 0;  // transposable unfolded plans without zeros inserted
  int transposed_f32 = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    ++plans;
    // (The groups the kernel runs: merged ones where the plan merges them.)
    const int64_t cog = convt::cuda::wgmma_problem(plan, p).out_channels_per_group();
    if (cog <= 32) {
      ++position_major;
      const int64_t nc = cog <= 8 ? 8 : cog <= 16 ? 16 : cog <= 24 ? 24 : 32;
      EXPECT_EQ(plan.wg_nc, nc) << cog << " output channels per group";
      EXPECT_EQ(plan.wg_cw, nc);
      EXPECT_EQ(plan.wg_n, plan.wg_fold > 1 ? folded_positions(nc, plan.wg_fold) : 256);
    } else {
      EXPECT_EQ(plan.wg_nc, 0) << cog << " output channels per group";
      EXPECT_EQ(plan.wg_cw, 64);
    }
    // Stage layout: box, weight tiles; split TF32 adds the residual box at the next
    // 1024 bytes (its swizzle) and the residual weight tiles, on the 128-position tile
    // (channel-major tiles).
    // (W taps folded: per H tap one tile of wg_fold x wg_cw columns.)
    const int64_t wtaps = plan.wg_fold > 1 ? plan.wg_fold : plan.wg_tmax[2];
    const int64_t wtiles = int64_t(plan.wg_hb) * wtaps * plan.wg_cw * plan.wg_bk *
                           static_cast<int64_t>(convt::dtype_size(p.dtype));
    if (plan.split) {
      ++split_plans;
      EXPECT_EQ(plan.wg_n, plan.wg_nc > 0 ? 256 : 128);
      EXPECT_EQ(plan.wg_xs_off % 1024, 0);
      EXPECT_GE(plan.wg_xs_off, plan.wg_box_bytes);
      EXPECT_EQ(plan.wg_w_off, 2 * plan.wg_xs_off);
      EXPECT_EQ(plan.wg_ws_off, plan.wg_w_off + wtiles);
      EXPECT_GE(plan.wg_stage_bytes, plan.wg_ws_off + wtiles);
    } else {
      EXPECT_EQ(plan.wg_w_off, plan.wg_box_bytes);
      EXPECT_GE(plan.wg_stage_bytes, plan.wg_w_off + wtiles);
    }
    EXPECT_EQ(plan.wg_stage_bytes % 1024, 0);
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
    EXPECT_GE(plan.wg_stages, 2);
    // The MMAs of a stage read wg_n positions (rows of bk channels) from its box at each tap's
    // shift, whatever the box holds: from the last stage too, within the block's shared memory
    // (after up to 1023 bytes of alignment).
    if (!plan.wg_raw) {
      const int64_t row = int64_t(plan.wg_bk) * convt::dtype_size(p.dtype);
      EXPECT_GE(int64_t(convt::cuda::wgmma_shared_bytes(plan)),
                int64_t(plan.wg_stages - 1) * plan.wg_stage_bytes + plan.wg_xs_off +
                    plan.wg_n * row + 1023)
          << p.to_string();
    }
    // The input transposed in the kernel: 16-bit types and TF32 (not split), unfolded tiles,
    // no zeros inserted (W phase pairs only in 16-bit types); its raw box (32 columns x bk
    // channels x hbox rows) a TMA box, its slots within the block's shared memory (above).
    const bool sixteen = p.dtype == DType::kBFloat16 || p.dtype == DType::kFloat16;
    const bool transposable = (sixteen || (p.dtype == DType::kFloat32 && !plan.split)) &&
                              (sixteen || !plan.wg_wpairs);
    // Only where the problem does at most 768 multiply-adds per input element and the box
    // fills 3/4 of its pieces' columns (32 each, from up to 7 before the box).
    const int64_t macs = p.out_channels_per_group() * p.kernel_size[0] * p.kernel_size[1] *
                         p.kernel_size[2];
    // Only where a contiguous input is read in place (rows, planes and channels 16-byte
    // aligned): elsewhere the copy runs, and the plan is the copy's.
    const int64_t row_bytes = p.input_size[2] * int64_t(convt::dtype_size(p.dtype));
    const bool aligned =
        (p.input_size[1] == 1 || row_bytes % 16 == 0) &&
        (p.input_size[0] == 1 || p.input_size[1] * row_bytes % 16 == 0) &&
        p.input_size[0] * p.input_size[1] * row_bytes % 16 == 0;
    if (plan.wg_xp) {
      ++transposed;
      EXPECT_TRUE(aligned) << p.to_string();
      EXPECT_LE(macs, 768);
      EXPECT_GE(4 * plan.wg_wbox, 3 * 32 * ((plan.wg_wbox + 7 + 31) / 32));
      EXPECT_TRUE(transposable && plan.wg_fold == 1 && plan.wg_wup == 1 && !plan.wg_raw);
      EXPECT_LE(plan.wg_hbox, 256);
      const int e = static_cast<int>(convt::dtype_size(p.dtype));
      EXPECT_LE(plan.wg_bk * e, 128);
      EXPECT_GE(plan.wg_bk, 8);
      // Pieces of 4 KB (32 columns x bk channels x rows), fewer rows where the box has
      // fewer, 4 to 16 of them.
      EXPECT_EQ(plan.wg_xp_rows, std::min(4096 / (32 * plan.wg_bk * e), plan.wg_hbox));
      EXPECT_EQ(plan.wg_xp_piece_bytes, 32 * plan.wg_bk * e * plan.wg_xp_rows);
      EXPECT_GE(plan.wg_xp_pieces, 4);
      EXPECT_LE(plan.wg_xp_pieces, 16);
      if (e == 4) {
        // Float: only where every input element is transposed once per tile (stride 1,
        // one D tap, every H tap in the K step).
        ++transposed_f32;
        EXPECT_EQ(p.stride[0] * p.stride[1] * p.stride[2], 1);
        EXPECT_EQ(plan.wg_tmax[0], 1);
        EXPECT_GE(plan.wg_hb, plan.wg_tmax[1]);
      }
    } else if (transposable && plan.wg_fold == 1 && plan.wg_wup == 1) {
      ++copied;
    }
    EXPECT_LE(plan.wg_rows * plan.wg_wbox, plan.wg_n);
    EXPECT_LE(plan.wg_rows, 32);
    // (Scattered W taps size their segments by the staging area too:
    // CudaPlanner.ScatteredWTapsCoverTheirOutputsAndFitTheStaging.)
    // (W phase pairs cut rows into more segments too: CudaPlanner.PairedWPhasesRunStride2.)
    if (plan.wg_scatter || plan.wg_wpairs) return;
    // Column segments: the fewest whose box fits N, unless the average phase's reduction
    // is 512 or more, where more segments may fit more rows (then at least as many of the
    // computed positions are outputs as with the fewest).
    // (Of the problem the kernel runs: with zeros inserted along W, W stride 1.)
    const Problem pk = convt::cuda::wgmma_problem(plan, p);
    const int64_t q1 = (pk.output_sizes()[1] + pk.stride[1] - 1) / pk.stride[1];
    const int64_t q2 = (pk.output_sizes()[2] + pk.stride[2] - 1) / pk.stride[2];
    const int64_t halo = plan.wg_wbox - plan.wg_wv;
    const int64_t fewest = (q2 + plan.wg_n - halo - 1) / (plan.wg_n - halo);
    const int64_t segs = (q2 + plan.wg_wv - 1) / plan.wg_wv;
    const double k = double(pk.in_channels_per_group()) *
                     double(pk.kernel_size[0] * pk.kernel_size[1] * pk.kernel_size[2]) /
                     double(pk.stride[0] * pk.stride[1] * pk.stride[2]);
    // (16-bit types with W of stride 1 and an even-wide output take the pair-aligned layout
    // of the fewest up to 16 more segments where there is one:
    // CudaPlanner.PairAlignedLayoutsIn16BitTypes.)
    const bool pair_rule = p.dtype != DType::kFloat32 && plan.wg_wup == 1 && p.stride[2] == 1 &&
                           p.output_size(2) % 2 == 0 && !plan.wg_raw && plan.wg_fold == 1 &&
                           !plan.wg_wmerge;
    if (pair_rule && plan.wg_wv % 2 == 0 && (plan.wg_rows == 1 || plan.wg_wbox % 2 == 0)) {
      ++pair_aligned;
      EXPECT_GE(segs, fewest);
      EXPECT_LE(segs, fewest + 16);
    } else if (k < 512) {
      EXPECT_EQ(segs, fewest) << "K " << k;
    } else {
      ++deep;
      EXPECT_GE(segs, fewest) << "K " << k;
      const int64_t wv0 = (q2 + fewest - 1) / fewest;
      const int64_t rows0 = std::min<int64_t>({plan.wg_n / (wv0 + halo), q1, 32});
      const double used0 = double(q1 * q2) / double((q1 + rows0 - 1) / rows0 * fewest * plan.wg_n);
      EXPECT_GE(plan.wg_used, used0 * 0.99) << "K " << k;
      if (segs > fewest) ++resegmented;
    }
  });
  EXPECT_GT(plans, 200);
  EXPECT_GT(split_plans, 50);
  EXPECT_GT(deep, 20);
  EXPECT_GT(resegmented, 5);
  EXPECT_GT(pair_aligned, 20);
  EXPECT_GT(position_major, 50);
  EXPECT_GT(transposed, 5) << transposed << " transposed, " << copied << " copied";
  EXPECT_GE(transposed_f32, 2) << transposed_f32 << " transposed in float";
  unsetenv("CONVT_WG_COOP");
}

// Whether p, with its multiply-adds counted by brute force over every (input position,
// tap) and multiplied by the W stride, does at most `balance` operations per byte of input,
// weight and output, that balance scaled for position-major tiles (groups of at most 32
// output channels, nc of them rounded up to 8) by 1.5 nc / (64 + nc).
bool memory_bound_with_w_zeros(const Problem& p, double balance) {
  const int64_t cog = p.out_channels_per_group();
  if (cog <= 32) {
    const double nc = double((cog + 7) / 8 * 8);
    balance *= 1.5 * nc / (64 + nc);
  }
  double taps = 1, in = 1, out = 1;
  for (int d = 0; d < 3; ++d) {
    taps *= double(p.kernel_size[d]);
    in *= double(p.input_size[d]);
    out *= double(p.output_sizes()[d]);
  }
  const double macs = double(p.batch) * double(p.in_channels) *
                      double(p.out_channels_per_group()) * taps * in;
  const double e = double(convt::dtype_size(p.dtype));
  const double bytes = e * (double(p.batch) * double(p.in_channels) * in +
                            double(p.in_channels) * double(p.out_channels_per_group()) * taps +
                            double(p.batch) * double(p.out_channels) * out);
  return 2 * macs * double(p.stride[2]) <= balance * bytes;
}

// A plan of two consumer warpgroups sharing each stage's box (ImplicitGemmFpropPlan::wg_coop,
// not wg_coop_n): N one they are built for, a stage of the box and then each warpgroup's
// weight tiles, a staging area for each of their eight warps, at least two stages.
void expect_two_warpgroups_share_the_box(const Problem& p, const Plan& plan) {
  EXPECT_TRUE(plan.wg_n == 128 || plan.wg_n == 192 || plan.wg_n == 256) << plan.wg_n;
  const int64_t wtiles = int64_t(plan.wg_hb) * plan.wg_tmax[2] * plan.wg_cw * plan.wg_bk *
                         static_cast<int64_t>(convt::dtype_size(p.dtype));
  EXPECT_EQ(plan.wg_w_half, wtiles);
  EXPECT_EQ(plan.wg_w_off, plan.wg_box_bytes);
  EXPECT_GE(plan.wg_stage_bytes, plan.wg_w_off + 2 * wtiles);
  EXPECT_GE(plan.wg_epi_bytes, 8 * 16 * 72 * 4);  // (8 warps' staging: 16 x 72 floats each)
  EXPECT_GE(plan.wg_stages, 2);
}

// A tile far larger than its box (24 of 256 positions valid, two stages holding its two K
// steps' weight tiles): the MMAs of the last stage read 256 positions past its start, well
// beyond the stage, and the block's shared memory still holds them (an H100 reported
// out-of-range shared reads here when it did not).
// Two consumer warpgroups (CONVT_WG_COOP=1, ImplicitGemmFpropPlan::wg_coop): taken exactly
// where a channel-major tile reads the copy (not split TF32, folded, scattered, merged or
// paired W taps) of a group with an even count of 64-channel tiles; a stage then holds the
// box and two warpgroups' weight tiles, N is one the kernel is built for, the block's shared
// memory fits one block a multiprocessor, and the tiles count channel tiles of 128. (Here
// with CONVT_WG_XP_COOP=0: the two warpgroups over the copy only; the transposition over
// them has its own test below.)
TEST(CudaPlanner, TwoWarpgroupTilesShareTheBox) {
  const ScopedEnv no_xp_coop("CONVT_WG_XP_COOP", "0");
  setenv("CONVT_WG_COOP", "1", 1);
  int coop = 0, eligible_not = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    const int64_t cog = p.out_channels_per_group();
    const bool can = plan.wg_nc == 0 && !plan.split && !plan.wg_raw && plan.wg_fold == 1 &&
                     !plan.wg_scatter && !plan.wg_wmerge && !plan.wg_wpairs &&
                     ((cog + 63) / 64) % 2 == 0;
    EXPECT_EQ(plan.wg_coop, can) << cog << " output channels per group";
    if (!plan.wg_coop) {
      EXPECT_EQ(plan.wg_w_half, 0);
      if (plan.wg_nc == 0 && !plan.split) ++eligible_not;
      return;
    }
    ++coop;
    EXPECT_FALSE(plan.wg_xp);
    expect_two_warpgroups_share_the_box(p, plan);
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
    EXPECT_LE(convt::cuda::wgmma_max_shared_bytes(plan), std::size_t(227 * 1024));
    // (Tiles: groups x channel tiles of 128 x the rest, a multiple of those.)
    EXPECT_EQ(plan.wg_tiles % (p.groups * ((cog + 127) / 128)), 0);
  });
  unsetenv("CONVT_WG_COOP");
  EXPECT_GT(coop, 20);
  EXPECT_GT(eligible_not, 20);  // (one 64-channel tile, or an odd count of them)
  // By default (without the transposition over them): wherever they can run and the input
  // is not transposed in the kernel.
  int by_default = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg || !plan.wg_coop) return;
    ++by_default;
    EXPECT_FALSE(plan.wg_xp);
    EXPECT_EQ(((p.out_channels_per_group() + 63) / 64) % 2, 0);
  });
  EXPECT_GT(by_default, 10);
  ExecOptions opt;
  // U-Net's 1024 -> 512 layer (kernel 2, stride 2) takes them; kb64 in bfloat16 (128 -> 128,
  // transposed in the kernel) does not.
  const Plan unet = convt::cuda::plan_implicit_gemm_fprop(
      convt::test::make_problem(2, 4, 1024, 512, 1, {32, 32, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true)
          .canonical3d(),
      opt);
  EXPECT_TRUE(unet.wg && unet.wg_coop) << unet.describe();
  Problem kb64 = convt::test::make_problem(1, 64, 128, 128, 1, {65536, 1, 1}, {3, 1, 1}, {1, 1, 1},
                              {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  kb64.dtype = DType::kBFloat16;
  const Plan k = convt::cuda::plan_implicit_gemm_fprop(kb64.canonical3d(), opt);
  EXPECT_TRUE(k.wg && k.wg_xp && !k.wg_coop) << k.describe();
}

// Two consumer warpgroups over the input transposed in the kernel (ImplicitGemmFpropPlan::
// wg_coop with wg_xp). CONVT_WG_XP_COOP=0: never. =1: only on channel-major tiles of a group
// with an even count of 64-channel tiles (not sharing the weight tiles, split TF32, read in
// place, folded, scattered, merged or paired W taps), with the two warpgroups' stage layout
// (the box, then each one's weight tiles), N one they are built for, a ring of at least four
// pieces, and the block's shared memory within one block a multiprocessor. By default: a
// subset of those, each the same plan as with =1, whose K step holds at least 64 bytes of
// each position, and none where =1 narrowed the channel block to fit the ring; some layers
// the setting takes are left out on each count. kb64 takes them in float32, bfloat16 and
// float16 by default (the copy's two warpgroups in float32 and one warpgroup transposing in
// 16-bit types without).
TEST(CudaPlanner, TwoWarpgroupsOverTheInputTransposedInTheKernel) {
  {
    const ScopedEnv off("CONVT_WG_XP_COOP", "0");
    for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma,
                         [&](const Problem&, MathMode, const Plan& plan) {
                           EXPECT_FALSE(plan.wg && plan.wg_coop && plan.wg_xp) << plan.describe();
                         });
  }
  int both = 0, by_default = 0, short_step = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode math,
                                                             const Plan& dflt) {
    ExecOptions o;
    o.math = math;
    o.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const auto [plan, plan_d] = plan_under("CONVT_WG_XP_COOP", "1", p, o);
    const auto [off, off_d] = plan_under("CONVT_WG_XP_COOP", "0", p, o);
    const int64_t e = static_cast<int64_t>(convt::dtype_size(p.dtype));
    if (dflt.usable && dflt.wg && dflt.wg_coop && dflt.wg_xp) {
      ++by_default;
      EXPECT_EQ(dflt.describe(), plan.describe());
      EXPECT_GE(int64_t(dflt.wg_bk) * dflt.wg_hb * dflt.wg_tmax[2] * e, 64) << dflt.describe();
    }
    if (!plan.usable || !plan.wg || !plan.wg_coop || !plan.wg_xp) return;
    ++both;
    const bool taken = dflt.wg && dflt.wg_coop && dflt.wg_xp;
    if (int64_t(plan.wg_bk) * plan.wg_hb * plan.wg_tmax[2] * e < 64) {
      ++short_step;
      EXPECT_FALSE(taken) << plan.describe();
    }
    if (off.wg && off.wg_coop && plan.wg_bk < off.wg_bk) EXPECT_FALSE(taken) << plan.describe();
    const int64_t cog = p.out_channels_per_group();
    EXPECT_EQ(((cog + 63) / 64) % 2, 0) << cog;
    EXPECT_TRUE(plan.wg_nc == 0 && !plan.wg_coop_n && !plan.split && !plan.wg_raw &&
                plan.wg_fold == 1 && !plan.wg_scatter && !plan.wg_wmerge && !plan.wg_wpairs &&
                plan.wg_mfold == 1 && plan.wg_stack == 1)
        << plan.describe();
    expect_two_warpgroups_share_the_box(p, plan);
    EXPECT_GE(plan.wg_xp_pieces, 4);
    EXPECT_LE(plan.wg_xp_pieces, 16);
    EXPECT_EQ(convt::cuda::wgmma_max_shared_bytes(plan), std::size_t(227 * 1024));
    // (The ring after the stages, headers, both warpgroups' staging and EpiInfo and the
    // barriers, then its pieces and their 1024 bytes of metadata; 1024 more for the
    // alignment of the block's shared memory.)
    const std::size_t before_ring = std::size_t(plan.wg_stages) * plan.wg_stage_bytes +
                                    8 * 384 + std::size_t(plan.wg_epi_bytes) + 2 * 640 + 128;
    EXPECT_GE(convt::cuda::wgmma_shared_bytes(plan),
              before_ring + std::size_t(plan.wg_xp_pieces) * plan.wg_xp_piece_bytes + 2048)
        << plan.describe();
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), std::size_t(227 * 1024));
    EXPECT_EQ(plan.wg_tiles % (p.groups * ((cog + 127) / 128)), 0);
  });
  EXPECT_GT(both, by_default);
  EXPECT_GT(by_default, 0);
  EXPECT_GT(short_step, 0);
  // A layer where =1 narrows the channel block for the ring (179 -> 218, kernel 2, float32:
  // steps of 32 channels with the copy, 16 transposed), which the default leaves to the copy.
  {
    Problem p = convt::test::make_problem(1, 64, 179, 218, 1, {2636, 1, 1}, {2, 1, 1},
                                          {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
    p = p.canonical3d();
    const ExecOptions opt;
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(p, opt);
    const auto [plan, plan_d] = plan_under("CONVT_WG_XP_COOP", "1", p, opt);
    EXPECT_TRUE(plan.wg && plan.wg_coop && plan.wg_xp && plan.wg_bk < dflt.wg_bk)
        << plan.describe();
    EXPECT_TRUE(dflt.wg && dflt.wg_coop && !dflt.wg_xp) << dflt.describe();
  }
  // kb64 (128 -> 128, kernel 3, 65536 positions, batch 64).
  Problem kb64 = convt::test::make_problem(1, 64, 128, 128, 1, {65536, 1, 1}, {3, 1, 1},
                                           {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    kb64.dtype = dt;
    SCOPED_TRACE(convt::dtype_name(dt));
    const ExecOptions opt;
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(kb64.canonical3d(), opt);
    EXPECT_TRUE(dflt.wg && dflt.wg_coop && dflt.wg_xp) << dflt.describe();
    {
      const ScopedEnv off("CONVT_WG_XP_COOP", "0");
      const Plan o = convt::cuda::plan_implicit_gemm_fprop(kb64.canonical3d(), opt);
      if (dt == DType::kFloat32)
        EXPECT_TRUE(o.wg && o.wg_coop && !o.wg_xp) << o.describe();
      else
        EXPECT_TRUE(o.wg && o.wg_xp && !o.wg_coop) << o.describe();
    }
    // (As an sm_90 device would run it: without one the planner's choice is described.)
    ExecOptions wg_opt;
    wg_opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const std::string what =
        convt::cuda::describe_plan_without_device(kb64.canonical3d(), wg_opt);
    EXPECT_NE(what.find("128 channels (two warpgroups)"), std::string::npos) << what;
    EXPECT_NE(what.find("input transposed in the kernel"), std::string::npos) << what;
  }
  // CONVT_WG_XP_COOP_MACS: kb69 in bfloat16 (64 -> 128, 3 x 5 taps: 1920 multiply-adds per
  // input element) takes the copy's two warpgroups by default and transposes in the kernel
  // with a bound of 2048.
  Problem kb69 = convt::test::make_problem(2, 64, 64, 128, 1, {128, 256, 1}, {3, 5, 1},
                                           {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  kb69.dtype = DType::kBFloat16;
  {
    const ExecOptions opt;
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(kb69.canonical3d(), opt);
    EXPECT_TRUE(dflt.wg && dflt.wg_coop && !dflt.wg_xp) << dflt.describe();
    const auto [low, low_d] = plan_under("CONVT_WG_XP_COOP_MACS", "1900", kb69.canonical3d(), opt);
    EXPECT_EQ(low.describe(), dflt.describe());
    const auto [high, high_d] =
        plan_under("CONVT_WG_XP_COOP_MACS", "2048", kb69.canonical3d(), opt);
    EXPECT_TRUE(high.wg && high.wg_coop && high.wg_xp) << high.describe();
  }
  // The float32 bound, 2304: a layer of 920 multiply-adds per input element (2 groups of
  // 105 -> 230, kernel 4, dilation 2) transposes for two warpgroups in float32, not with the
  // bound at 768, and takes the copy in bfloat16.
  Problem mid = convt::test::make_problem(1, 8, 210, 460, 2, {16748, 1, 1}, {4, 1, 1},
                                          {1, 1, 1}, {2, 0, 0}, {1, 0, 0}, {2, 1, 1}, true);
  {
    const ExecOptions opt;
    const Plan f32 = convt::cuda::plan_implicit_gemm_fprop(mid.canonical3d(), opt);
    EXPECT_TRUE(f32.wg && f32.wg_coop && f32.wg_xp) << f32.describe();
    const auto [low, low_d] = plan_under("CONVT_WG_XP_COOP_MACS", "768", mid.canonical3d(), opt);
    EXPECT_TRUE(low.wg && low.wg_coop && !low.wg_xp) << low.describe();
    mid.dtype = DType::kBFloat16;
    const Plan b16 = convt::cuda::plan_implicit_gemm_fprop(mid.canonical3d(), opt);
    EXPECT_TRUE(b16.wg && !(b16.wg_coop && b16.wg_xp)) << b16.describe();
  }
}

// Two transposer warps (ImplicitGemmFpropPlan::wg_xp_warps): never with CONVT_WG_XP_WARPS=1;
// by default every plan the same as with one but for the warps, two exactly on the plans
// that transpose in the kernel for two consumer warpgroups or position-major tiles of 16-32
// channels without W phase pairs or folded taps, with the same shared memory; some of each
// kind take them. kb64 (two warpgroups, in every type) does.
TEST(CudaPlanner, TwoTransposerWarpsWhereTheKernelsHaveThem) {
  int coop = 0, pos = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode math,
                                                             const Plan&) {
    ExecOptions o;
    o.math = math;
    o.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    for (const char* xp : {"", "1"}) {
      const ScopedEnv xp_env("CONVT_WG_XP", xp);
      const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p, o);
      const std::string text = convt::cuda::describe_plan_without_device(p, o);
      const auto [one, one_text] = plan_under("CONVT_WG_XP_WARPS", "1", p, o);
      EXPECT_EQ(one.wg_xp_warps, 1) << one.describe();
      std::string same_text = text;
      const std::string mark = ", two transposer warps";
      const std::size_t at = same_text.find(mark);
      if (at != std::string::npos) same_text.erase(at, mark.size());
      EXPECT_EQ(same_text, one_text);
      EXPECT_EQ(plan.describe(), one.describe());
      EXPECT_TRUE(plan.wg_stages == one.wg_stages && plan.wg_xp_pieces == one.wg_xp_pieces &&
                  plan.wg_xp == one.wg_xp && plan.wg_bk == one.wg_bk && plan.wg_n == one.wg_n)
          << text;
      if (!plan.usable || !plan.wg) continue;
      const bool kernels = plan.wg_xp && !plan.wg_wpairs && plan.wg_fold == 1 &&
                           plan.wg_mfold == 1 &&
                           ((plan.wg_coop && !plan.wg_coop_n) ||
                            (!plan.wg_coop &&
                             (plan.wg_nc == 16 || plan.wg_nc == 24 || plan.wg_nc == 32)));
      EXPECT_EQ(plan.wg_xp_warps, kernels ? 2 : 1) << plan.describe();
      EXPECT_EQ(text.find("two transposer warps") != std::string::npos, kernels) << text;
      if (!kernels) continue;
      (plan.wg_coop ? coop : pos) += 1;
      EXPECT_EQ(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_shared_bytes(one))
          << plan.describe();
    }
  });
  EXPECT_GT(coop, 0);
  EXPECT_GT(pos, 0);
  Problem kb64 = convt::test::make_problem(1, 64, 128, 128, 1, {65536, 1, 1}, {3, 1, 1},
                                           {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    kb64.dtype = dt;
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(kb64.canonical3d(), ExecOptions{});
    EXPECT_TRUE(plan.wg && plan.wg_coop && plan.wg_xp && plan.wg_xp_warps == 2)
        << plan.describe();
  }
}

// Two consumer warpgroups sharing the weight tiles (CONVT_WG_COOP_N=1,
// ImplicitGemmFpropPlan::wg_coop_n): only where a channel-major tile reads the copy (not
// split TF32, folded, scattered, merged or paired W taps, not stacked or transposed in the
// kernel) of a group with an odd count of 64-channel tiles; a stage then holds two boxes,
// the second at the first 1024-byte boundary past the first, and one set of weight tiles
// after them, the MMAs' reads from the second box within the shared memory; each
// warpgroup's rows at most half of kMaxRows; the tiles count channel tiles of 64. Not
// without the setting.
TEST(CudaPlanner, TwoWarpgroupsShareTheWeightTilesWhereAsked) {
  setenv("CONVT_WG_COOP_N", "1", 1);
  int shared = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg || !plan.wg_coop_n) return;
    ++shared;
    const int64_t cog = p.out_channels_per_group();
    EXPECT_TRUE(plan.wg_coop);
    EXPECT_EQ(((cog + 63) / 64) % 2, 1) << cog;
    EXPECT_TRUE(plan.wg_nc == 0 && !plan.split && !plan.wg_raw && plan.wg_fold == 1 &&
                !plan.wg_scatter && !plan.wg_wmerge && !plan.wg_wpairs && !plan.wg_xp)
        << plan.describe();
    EXPECT_EQ(plan.wg_stack, 1);
    EXPECT_TRUE(plan.wg_n == 128 || plan.wg_n == 192 || plan.wg_n == 256) << plan.wg_n;
    EXPECT_LE(plan.wg_rows, 16);
    EXPECT_EQ(plan.wg_w_half, 0);
    EXPECT_EQ(plan.wg_coop_box_off % 1024, 0);
    EXPECT_GE(plan.wg_coop_box_off, plan.wg_box_bytes);
    EXPECT_LT(plan.wg_coop_box_off, plan.wg_box_bytes + 1024);
    EXPECT_EQ(plan.wg_w_off, 2 * plan.wg_coop_box_off);
    const int64_t wtiles = int64_t(plan.wg_hb) * plan.wg_tmax[2] * plan.wg_cw * plan.wg_bk *
                           static_cast<int64_t>(convt::dtype_size(p.dtype));
    EXPECT_GE(plan.wg_stage_bytes, plan.wg_w_off + wtiles);
    EXPECT_GE(plan.wg_a_bytes, plan.wg_coop_box_off + plan.wg_n * plan.wg_bk *
                                   static_cast<int64_t>(convt::dtype_size(p.dtype)));
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
    EXPECT_LE(convt::cuda::wgmma_max_shared_bytes(plan), std::size_t(227 * 1024));
    EXPECT_EQ(plan.wg_tiles % (p.groups * ((cog + 63) / 64)), 0);
  });
  unsetenv("CONVT_WG_COOP_N");
  EXPECT_GT(shared, 20);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma,
                       [&](const Problem&, MathMode, const Plan& plan) {
                         EXPECT_FALSE(plan.wg_coop_n);
                         EXPECT_EQ(plan.wg_coop_box_off, 0);
                       });
  // A kb57-like layer (64 -> 64, kernel 3) takes them when asked, over rows of two.
  setenv("CONVT_WG_COOP_N", "1", 1);
  ExecOptions opt;
  const Plan k = convt::cuda::plan_implicit_gemm_fprop(
      convt::test::make_problem(2, 2, 64, 64, 1, {96, 96, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0},
                                {0, 0, 0}, {1, 1, 1}, true)
          .canonical3d(),
      opt);
  unsetenv("CONVT_WG_COOP_N");
  EXPECT_TRUE(k.wg && k.wg_coop_n) << k.describe();
}

// Split K (CONVT_WG_SPLIT_K): by default (unset or =1) channel-major plans of fewer tiles
// than multiprocessors are split into at most 16 parts of at least 4 K steps, as many as
// fill the multiprocessors; =S asks for S parts (at most the K steps) wherever it can run;
// =0 splits nothing; never split TF32, position-major tiles or merged / paired W phases.
// The workspace holds the parts' counts and sums after everything else.
TEST(CudaPlanner, SplitKPartsFillTheMachineAndTheirWorkspace) {
  int split = 0;
  for (const char* env : {"", "1", "0", "5"}) {
    SCOPED_TRACE(std::string("CONVT_WG_SPLIT_K=") + env);
    setenv("CONVT_WG_SPLIT_K", env, 1);
    for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem&, MathMode,
                                                               const Plan& plan) {
      if (!plan.usable || !plan.wg) return;
      const bool can = plan.wg_nc == 0 && !plan.split && !plan.wg_wmerge && !plan.wg_wpairs &&
                       plan.wg_steps >= 2;
      const int64_t sms = int64_t(convt::cuda::wgmma_planner_sms());
      if (env[0] == '0' || !can) {
        EXPECT_EQ(plan.wg_splits, 1);
        return;
      }
      if (env[0] == '5') {
        EXPECT_EQ(plan.wg_splits, std::min<int64_t>(5, plan.wg_steps));
      } else {
        const int64_t want = plan.wg_tiles < sms
                                 ? std::min<int64_t>({16, sms / plan.wg_tiles, plan.wg_steps / 4})
                                 : 1;
        EXPECT_EQ(plan.wg_splits, want >= 2 ? want : 1);
      }
      if (plan.wg_splits == 1) return;
      ++split;
      const int64_t groups = plan.wg_coop ? 2 : 1;
      EXPECT_EQ(plan.wg_split_done_offset % 256, 0u);
      EXPECT_GE(plan.wg_split_done_offset, plan.wg_chunk_done_offset + plan.wg_chunk_done_bytes);
      EXPECT_GE(plan.wg_partials_offset, plan.wg_split_done_offset + 4 * plan.wg_tiles * groups);
      EXPECT_EQ(plan.wg_partials_offset % 256, 0u);
      EXPECT_EQ(plan.workspace_bytes,
                plan.wg_partials_offset +
                    std::size_t(plan.wg_tiles * plan.wg_splits * groups * 128 * (plan.wg_n / 2) * 4));
    });
  }
  unsetenv("CONVT_WG_SPLIT_K");
  EXPECT_GT(split, 20);
}

TEST(CudaPlanner, SharedMemoryHoldsTheMmaReadsPastASmallBox) {
  Problem p;
  p.spatial_dims = 3;
  p.batch = 2;
  p.in_channels = 128;
  p.out_channels = 2;
  p.groups = 2;
  p.input_size = {1, 3, 11};
  p.kernel_size = {1, 3, 3};
  p.stride = {1, 3, 2};
  p.padding = {0, 3, 1};
  p.output_padding = {0, 2, 0};
  p.dilation = {1, 1, 2};
  p.has_bias = true;
  p.dtype = DType::kFloat32;
  ASSERT_NO_THROW(p.validate());
  ExecOptions opt;
  opt.math = MathMode::kAllowTF32;
  opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
  setenv("CONVT_WG_STACK", "0", 1);  // (one plane a tile: the box far smaller than it)
  const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), opt);
  unsetenv("CONVT_WG_STACK");
  ASSERT_TRUE(plan.usable && plan.wg) << plan.wg_reason;
  EXPECT_EQ(plan.wg_stack, 1);
  EXPECT_LT(plan.wg_used, 0.2);
  const int64_t row = int64_t(plan.wg_bk) * 4;
  EXPECT_LT(plan.wg_box_bytes + plan.wg_n * row / 2, plan.wg_n * row);
  EXPECT_GE(int64_t(convt::cuda::wgmma_shared_bytes(plan)),
            int64_t(plan.wg_stages - 1) * plan.wg_stage_bytes + plan.wg_n * row + 1023);
  EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
}

// Planes stacked in a tile: wherever a tile holds a phase's whole plane (one row group, one
// column segment) and the box of that plane fits the tile's positions twice or more, the
// box takes as many consecutive planes as fit them and 32 box rows (samples where D is one
// position, else D positions), the stage holds the whole box, and the share of computed
// positions that are outputs counts every plane; never with folded, scattered or merged W
// taps, the input read in place or transposed in the kernel. CONVT_WG_STACK=0: one plane.
TEST(CudaPlanner, SmallPlanesStackInATile) {
  // (One consumer warpgroup: two blocks a multiprocessor; TwoWarpgroupTilesShareTheBox
  // checks the tiles of two.)
  setenv("CONVT_WG_COOP", "0", 1);
  int stacked = 0, stacked_n = 0, stacked_d = 0;
  auto check = [&](const Problem& p, MathMode, const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    const Problem pk = convt::cuda::wgmma_problem(plan, p);
    const int64_t q0 = (pk.output_sizes()[0] + pk.stride[0] - 1) / pk.stride[0];
    const int64_t q1 = (pk.output_sizes()[1] + pk.stride[1] - 1) / pk.stride[1];
    const int64_t q2 = (pk.output_sizes()[2] + pk.stride[2] - 1) / pk.stride[2];
    const int64_t e = convt::dtype_size(p.dtype);
    const int64_t plane_box = int64_t(plan.wg_hbox) * plan.wg_wbox;
    const bool flat_d = pk.input_size[0] == 1 && pk.kernel_size[0] == 1 &&
                        pk.padding[0] == 0 && pk.stride[0] == 1;
    const int64_t planes = flat_d ? pk.batch : q0;
    const int64_t copies = plan.split ? 2 : 1;
    EXPECT_EQ(plan.wg_box_bytes, plan.wg_stack * plane_box * plan.wg_bk * e);
    if (plan.wg_stack == 1) return;
    ++stacked;
    (plan.wg_stack_n ? stacked_n : stacked_d)++;
    EXPECT_EQ(plan.wg_stack_n, flat_d);
    EXPECT_LE(q1, plan.wg_rows);
    EXPECT_LE(q2, plan.wg_wv);
    EXPECT_LE(plan.wg_stack * plane_box, plan.wg_n);
    EXPECT_LE(plan.wg_stack * plan.wg_hbox, 32);
    EXPECT_LE(plan.wg_stack, planes);
    EXPECT_TRUE(plan.wg_fold == 1 && !plan.wg_scatter && !plan.wg_wmerge && !plan.wg_wpairs &&
                !plan.wg_raw && !plan.wg_xp);
    EXPECT_GE(plan.wg_stage_bytes, copies * plan.wg_box_bytes);
    const int64_t groups_of = (planes + plan.wg_stack - 1) / plan.wg_stack;
    EXPECT_NEAR(plan.wg_used, double(q1 * q2 * planes) / double(groups_of * plan.wg_n), 1e-9);
    setenv("CONVT_WG_STACK", "0", 1);
    ExecOptions opt;
    opt.math = plan.split ? MathMode::kStrictFP32 : MathMode::kAllowTF32;
    opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const Plan one = convt::cuda::plan_implicit_gemm_fprop(p, opt);
    unsetenv("CONVT_WG_STACK");
    EXPECT_EQ(one.wg_stack, 1);
    if (one.wg && one.wg_n == plan.wg_n) EXPECT_GT(plan.wg_used, one.wg_used);
  };
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, check);
  EXPECT_GT(stacked_n, 3) << stacked << " stacked";
  // A DCGAN layer (4 x 4 inputs, 512 -> 256 channels, kernel 4, stride 2, 128 samples: 6
  // samples of 4 x 5 box positions a tile, 96 of 128 outputs) and a 3-D layer (6 x 3 x 3
  // inputs, stride 2: D planes), in each precision.
  auto layer = [](int dims, int64_t batch, int64_t c_in, int64_t c_out, Dims in, Dims k,
                  Dims stride, Dims pad, Dims out_pad) {
    return convt::test::make_problem(dims, batch, c_in, c_out, 1, in, k, stride, pad, out_pad,
                                     {1, 1, 1}, false);
  };
  const Problem layers[2] = {
      layer(2, 128, 512, 256, {4, 4, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0}),
      layer(3, 2, 32, 64, {6, 3, 3}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1})};
  for (Problem p : layers) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (MathMode math : {MathMode::kAllowTF32, MathMode::kStrictFP32}) {
        if (math == MathMode::kStrictFP32 && dtype != DType::kFloat32) continue;
        p.dtype = dtype;
        SCOPED_TRACE(p.to_string());
        ExecOptions opt;
        opt.math = math;
        const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), opt);
        const int before = stacked;
        ASSERT_TRUE(plan.usable);
        if (!plan.wg) {
          // (The dispatcher may prefer another kernel: ask for this one.)
          opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
          const Plan forced = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), opt);
          ASSERT_TRUE(forced.wg) << forced.wg_reason;
          check(p.canonical3d(), math, forced);
        } else {
          check(p.canonical3d(), math, plan);
        }
        EXPECT_EQ(stacked, before + 1);
      }
    }
  }
  EXPECT_GT(stacked_d, 2);
  // The tile's positions are chosen counting the planes they stack: a DCGAN 256 -> 128 layer
  // (8 x 8 inputs, 8 x 8 positions a phase in a 9 x 9 box) stacks 3 samples in 256 positions
  // (75% used) where one in 128 would use half. (With the largest N: on 132 multiprocessors
  // its 344 tiles make two waves, which 2 samples in 192 positions make shorter;
  // FewTilesTakeTheNThatFillsTheMachine.)
  Problem d3 = layer(2, 128, 256, 128, {8, 8, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0});
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    d3.dtype = dtype;
    SCOPED_TRACE(d3.to_string());
    setenv("CONVT_WG_FILL", "0", 1);
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(d3.canonical3d(), ExecOptions{});
    unsetenv("CONVT_WG_FILL");
    ASSERT_TRUE(plan.wg) << plan.wg_reason;
    EXPECT_EQ(plan.wg_n, 256);
    EXPECT_EQ(plan.wg_stack, 3);
    EXPECT_NEAR(plan.wg_used, 64.0 * 128 / (43 * 256), 1e-9);  // (43 groups of 3 samples)
    EXPECT_NEAR(plan.wg_used_plane, 0.25, 1e-9);
  }
  // Each stacked plane's box holds the rows of the K step's H taps, so stacking takes the
  // H taps that fill the tile best: DCGAN's 100 -> 512 layer (1 x 1 inputs, kernel 4,
  // stride 1: a 4 x 4 phase, 4 x 7 box positions with one H tap a step, 6 x 7 with three)
  // stacks 7 samples of one H tap in 208 positions (52% used) in both types, and the
  // dispatcher keeps it. (With the largest N: on 132 multiprocessors the planner then takes
  // 4 samples in 128 positions, which fill the machine; FewTilesTakeTheNThatFillsTheMachine.)
  Problem d1 = layer(2, 128, 100, 512, {1, 1, 1}, {4, 4, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0});
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    d1.dtype = dtype;
    SCOPED_TRACE(d1.to_string());
    setenv("CONVT_WG_FILL", "0", 1);
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(d1.canonical3d(), ExecOptions{});
    unsetenv("CONVT_WG_FILL");
    ASSERT_TRUE(plan.wg) << plan.wg_reason;
    EXPECT_EQ(plan.wg_hb, 1);
    EXPECT_EQ(plan.wg_hbox, 4);
    EXPECT_EQ(plan.wg_stack, 7);
    check(d1.canonical3d(), MathMode::kAllowTF32, plan);
  }
  // A HiFi-GAN-like layer (1-D, 32 inputs, kernel 16, stride 8: 32 positions a phase): the
  // wgmma tile stacks 3 samples or more, but one would use a quarter of it or less and the TMA kernel's W
  // segments are at least half full, so the dispatcher takes the TMA kernel.
  Problem h = layer(1, 16, 512, 256, {32, 1, 1}, {16, 1, 1}, {8, 1, 1}, {4, 0, 0}, {0, 0, 0});
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    h.dtype = dtype;
    SCOPED_TRACE(h.to_string());
    ExecOptions opt;
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(h.canonical3d(), opt);
    EXPECT_FALSE(plan.wg);
    EXPECT_TRUE(plan.tma) << plan.tma_reason;
    opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const Plan forced = convt::cuda::plan_implicit_gemm_fprop(h.canonical3d(), opt);
    EXPECT_GE(forced.wg_stack, 3);
    EXPECT_LT(forced.wg_used_plane, 0.35);
  }
  unsetenv("CONVT_WG_COOP");
}

// Taps split (ImplicitGemmFpropPlan::wg_tsplit, CONVT_WG_TSPLIT): every K step one tap and
// channel block, the box the tile's rows x columns exactly (no halo), one weight tile a
// step, the stages laid out for it; stacked planes without gaps. =1 wherever it plans
// (never with the input read in place, folded, scattered or merged W taps, W phase pairs
// or the transposition in the kernel); =2 only channel-major tiles that use 1.2x the
// positions; unset, nowhere. A DCGAN layer (8 x 8 inputs, kernel 4, stride 2) takes four
// whole planes in 256 positions with =2.
TEST(CudaPlanner, TapsSplitBoxesHoldTheirTilesExactly) {
  int split_plans = 0, stacked = 0;
  setenv("CONVT_WG_TSPLIT", "1", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg || !plan.wg_tsplit) return;
    ++split_plans;
    if (plan.wg_stack > 1) ++stacked;
    const int64_t e = convt::dtype_size(p.dtype), copies = plan.split ? 2 : 1;
    EXPECT_EQ(plan.wg_hb, 1);
    EXPECT_EQ(plan.wg_wbox, plan.wg_wv);
    EXPECT_EQ(plan.wg_hbox, plan.wg_rows);
    EXPECT_TRUE(plan.wg_fold == 1 && !plan.wg_scatter && !plan.wg_wmerge && !plan.wg_wpairs &&
                !plan.wg_raw && !plan.wg_xp);
    EXPECT_EQ(plan.wg_box_bytes, int64_t(plan.wg_stack) * plan.wg_hbox * plan.wg_wbox *
                                     plan.wg_bk * e);
    EXPECT_LE(int64_t(plan.wg_stack) * plan.wg_hbox * plan.wg_wbox, plan.wg_n);
    // (One weight tile a step: cw x bk, per warpgroup with two.)
    const int64_t wtile = int64_t(plan.wg_cw) * plan.wg_bk * e;
    EXPECT_GE(plan.wg_stage_bytes,
              plan.wg_w_off + copies * wtile * (plan.wg_coop && !plan.wg_coop_n ? 2 : 1));
    EXPECT_EQ(plan.wg_steps, int64_t(plan.wg_tmax[0]) * plan.wg_tmax[1] * plan.wg_tmax[2] *
                                 plan.wg_cblocks);
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
    // (The MMAs read wg_n positions of each box, past the box too, within shared memory.)
    const int64_t row = int64_t(plan.wg_bk) * e;
    EXPECT_GE(int64_t(convt::cuda::wgmma_shared_bytes(plan)),
              int64_t(plan.wg_stages - 1) * plan.wg_stage_bytes + plan.wg_xs_off +
                  plan.wg_n * row + 1023)
        << p.to_string();
  });
  EXPECT_GT(split_plans, 100);
  EXPECT_GT(stacked, 5);
  const Problem g3 = convt::test::make_problem(2, 128, 256, 128, 1, {8, 8, 1}, {4, 4, 1},
                                               {2, 2, 1}, {1, 1, 0}, {0, 0, 0}, {1, 1, 1}, false);
  ExecOptions opt;
  opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    Problem q = g3;
    q.dtype = dt;
    setenv("CONVT_WG_TSPLIT", "2", 1);
    const Plan two = convt::cuda::plan_implicit_gemm_fprop(q.canonical3d(), opt);
    EXPECT_TRUE(two.wg && two.wg_tsplit);
    EXPECT_EQ(two.wg_n, 256);
    EXPECT_EQ(two.wg_stack, 4);
    EXPECT_DOUBLE_EQ(two.wg_used, 1.0);
    unsetenv("CONVT_WG_TSPLIT");
    const Plan none = convt::cuda::plan_implicit_gemm_fprop(q.canonical3d(), opt);
    EXPECT_TRUE(none.wg && !none.wg_tsplit);
    EXPECT_LT(none.wg_used, 0.8);
    // (=2 leaves position-major tiles: 256 -> 16 channels.)
    Problem narrow = q;
    narrow.out_channels = 16;
    setenv("CONVT_WG_TSPLIT", "2", 1);
    const Plan pm = convt::cuda::plan_implicit_gemm_fprop(narrow.canonical3d(), opt);
    EXPECT_TRUE(pm.wg && pm.wg_nc > 0 && !pm.wg_tsplit);
    unsetenv("CONVT_WG_TSPLIT");
  }
}

// The dispatcher's choice between the wgmma kernel and the TMA kernel (where the wgmma
// kernel can run): with a W stride and memory-bound even with that many times the MMAs
// (120 operations per byte in TF32, 40 in split TF32, 240 in 16-bit types, less for
// position-major tiles), the wgmma
// kernel with zeros inserted along W; else by the average phase's reduction length
// K = input channels per group x taps / phases, the output channels per group and the
// precision (see plan_implicit_gemm_fprop); where it declines, the reason names both.
// Channel-major plans of fewer than four waves of tiles (slots: the blocks resident at once,
// two per multiprocessor) take the N whose waves x N is least (ceil(tiles / slots) x
// positions a tile; from two waves on, at least 10% less than the largest N's): against the
// plan with the largest N (CONVT_WG_FILL=0), the same plan where that makes four waves or
// more or the tile is position-major, else one no longer, of more tiles and that estimate.
TEST(CudaPlanner, FewTilesTakeTheNThatFillsTheMachine) {
  // (One consumer warpgroup: two blocks a multiprocessor; TwoWarpgroupTilesShareTheBox
  // checks the tiles of two.)
  setenv("CONVT_WG_COOP", "0", 1);
  const int64_t slots = 2 * int64_t(convt::cuda::wgmma_planner_sms());
  int smaller = 0;
  auto check = [&](const Problem& p, MathMode math, const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    setenv("CONVT_WG_FILL", "0", 1);
    ExecOptions opt;
    opt.math = math;
    opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const Plan full = convt::cuda::plan_implicit_gemm_fprop(p, opt);
    unsetenv("CONVT_WG_FILL");
    ASSERT_TRUE(full.wg);
    if (full.wg_nc != 0 || full.wg_tiles >= 4 * slots) {
      EXPECT_EQ(plan.wg_n, full.wg_n);
      EXPECT_EQ(plan.wg_tiles, full.wg_tiles);
      return;
    }
    const int64_t waves = (plan.wg_tiles + slots - 1) / slots;
    const int64_t full_waves = (full.wg_tiles + slots - 1) / slots;
    EXPECT_LE(waves * plan.wg_n, full_waves * full.wg_n);
    EXPECT_LE(plan.wg_n, full.wg_n);
    EXPECT_EQ(plan.wg_nc, 0);
    if (plan.wg_n < full.wg_n) {
      ++smaller;
      if (full_waves == 1)
        EXPECT_LT(waves * plan.wg_n, full.wg_n);
      else
        EXPECT_LE(10 * waves * plan.wg_n, 9 * full_waves * full.wg_n);
      EXPECT_GT(plan.wg_tiles, full.wg_tiles);
    } else {
      EXPECT_EQ(plan.wg_tiles, full.wg_tiles);
    }
  };
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, check);
  // DCGAN's first layer (1 x 1 inputs, 100 -> 512 channels, kernel 4, 128 samples): 7 of
  // its 4 x 4 planes a tile of 208 positions make 152 tiles; with 132 multiprocessors, 4 a
  // tile of 128 make 256, one wave.
  Problem g1 = convt::test::make_problem(2, 128, 100, 512, 1, {1, 1, 1}, {4, 4, 1},
                                         {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    g1.dtype = dtype;
    SCOPED_TRACE(g1.to_string());
    ExecOptions opt;
    opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(g1.canonical3d(), opt);
    ASSERT_TRUE(plan.wg) << plan.wg_reason;
    check(g1.canonical3d(), MathMode::kAllowTF32, plan);
    if (slots == 264) {
      EXPECT_EQ(plan.wg_n, 128);
      EXPECT_EQ(plan.wg_tiles, 256);
      EXPECT_EQ(plan.wg_stack, 4);
    }
  }
  if (slots == 264) EXPECT_GE(smaller, 2);
  unsetenv("CONVT_WG_COOP");
}

// Whether every W phase of p has exactly one tap (kernel 2 with stride 2, say), counted by
// brute force.
bool every_w_phase_has_one_tap(const Problem& p) {
  const int64_t s = p.stride[2];
  for (int64_t r = 0; r < s; ++r) {
    int count = 0;
    for (int64_t k = 0; k < p.kernel_size[2]; ++k) {
      const int64_t v = r + p.padding[2] - k * p.dilation[2];
      if (((v % s) + s) % s == 0) ++count;
    }
    if (count != 1) return false;
  }
  return true;
}

// Zeros inserted along W: not where every W phase has one tap (the phases tile the output
// rows exactly), but for float32 3-D problems; kept where a W phase has no tap or several.
// Layers from the suites: U-Net's 128 -> 64 (k2 s2), the 3-D U-Net's 64 -> 32, kb81 and kb79.
TEST(CudaPlanner, ZerosAlongWOnlyWhereAWPhaseHasNoTapOrSeveral) {
  ExecOptions opt;
  auto plan_of = [&](Problem p, DType t) {
    p.dtype = t;
    return convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), opt);
  };
  const Problem unet = convt::test::make_problem(2, 4, 128, 64, 1, {256, 256, 1}, {2, 2, 1},
                                                 {2, 2, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
  const Problem unet3d = convt::test::make_problem(3, 2, 64, 32, 1, {64, 64, 64}, {2, 2, 2},
                                                   {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
  const Problem kb81 = convt::test::make_problem(2, 16, 32, 64, 1, {64, 128, 1}, {3, 3, 1},
                                                 {5, 5, 1}, {1, 1, 0}, {0, 0, 0}, {2, 2, 1}, false);
  const Problem kb79 = convt::test::make_problem(1, 16, 32, 64, 1, {131072, 1, 1}, {3, 1, 1},
                                                 {2, 1, 1}, {1, 0, 0}, {0, 0, 0}, {2, 1, 1}, false);
  EXPECT_TRUE(every_w_phase_has_one_tap(unet.canonical3d()));
  EXPECT_TRUE(every_w_phase_has_one_tap(unet3d.canonical3d()));
  EXPECT_FALSE(every_w_phase_has_one_tap(kb81.canonical3d()));
  EXPECT_FALSE(every_w_phase_has_one_tap(kb79.canonical3d()));
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const Plan u = plan_of(unet, t), u3 = plan_of(unet3d, t), a = plan_of(kb81, t),
               b = plan_of(kb79, t);
    EXPECT_EQ(u.wg_wup, 1) << u.describe();
    // (Float32 3-D: the W phase pairs, position-major for this one, channel-major for 64
    // output channels, where the zeros ran before.)
    EXPECT_EQ(u3.wg_wup, 1) << u3.describe();
    EXPECT_TRUE(u3.wg && u3.wg_wpairs) << u3.describe();
    Problem wide3d = unet3d;
    wide3d.out_channels = 64;
    const Plan w3 = plan_of(wide3d, t);
    EXPECT_TRUE(w3.wg && w3.wg_wup == 1 && w3.wg_wpairs && w3.wg_nc == 0) << w3.describe();
    EXPECT_TRUE(a.wg && a.wg_wup == 5) << a.describe();
    // (A W stride of 2 on channel-major tiles: the W phase pairs in place of the zeros.)
    EXPECT_TRUE(b.wg && b.wg_wup == 1 && b.wg_wpairs && b.wg_nc == 0) << b.describe();
  }
  // Strict float32 (split TF32, no pairs) keeps the zeros on kb79 where the wgmma kernel
  // runs it.
  ExecOptions strict;
  strict.math = MathMode::kStrictFP32;
  Problem p79 = kb79;
  p79.dtype = DType::kFloat32;
  const Plan s79 = convt::cuda::plan_implicit_gemm_fprop(p79.canonical3d(), strict);
  EXPECT_TRUE(!s79.wg_wpairs && (!s79.wg || s79.wg_wup == 2)) << s79.describe();
}

// Zeros inserted along W: not where s x the input's elements are twice the output's or more
// (the copy with the zeros outweighs the output), nor with a W stride of 2 where the W phase
// pairs can run; CONVT_WG_WUP=2 takes them there as before. Fuzzed layers of
// scripts/suites/wup_fuzz.json: 86 -> 40 (1-D, 7192 columns, k4 s3: 2.15 x the output) and
// 22 -> 11 (2-D 98 x 32, k 1 x 5, s 3 x 2: 0.67).
TEST(CudaPlanner, ZerosAlongWNotWhereTheInputOutweighsOrThePairsRun) {
  ExecOptions opt;
  const Problem heavy = convt::test::make_problem(1, 64, 86, 40, 1, {7192, 1, 1}, {4, 1, 1},
                                                  {3, 1, 1}, {1, 0, 0}, {2, 0, 0}, {1, 1, 1}, true);
  const Problem paired = convt::test::make_problem(2, 128, 22, 11, 1, {98, 32, 1}, {1, 5, 1},
                                                   {3, 2, 1}, {0, 2, 0}, {1, 1, 0}, {1, 1, 1}, false);
  EXPECT_GE(3.0 * double(heavy.input_numel()), 2.0 * double(heavy.output_numel()));
  EXPECT_LT(2.0 * double(paired.input_numel()), 2.0 * double(paired.output_numel()));
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (const Problem* q : {&heavy, &paired}) {
      Problem p = *q;
      p.dtype = t;
      const Problem c = p.canonical3d();
      const Plan plan = convt::cuda::plan_implicit_gemm_fprop(c, opt);
      const auto [before, before_d] = plan_under("CONVT_WG_WUP", "2", c, opt);
      EXPECT_TRUE(before.wg && before.wg_wup == int(c.stride[2])) << before_d;
      EXPECT_EQ(plan.wg_wup, 1) << plan.describe();
      if (q == &paired) EXPECT_TRUE(plan.wg && plan.wg_wpairs) << plan.describe();
    }
  }
}

// Stacked planes whose single plane would use little of the tile go to the TMA kernel where
// its W segments are at least half full, but not with a reduction of 2048 or more per phase
// (float32 as TF32 and 16-bit types): WaveGAN's 1024 -> 512 (kernel 25, stride 4, 16
// positions a phase) stays stacked on the wgmma kernel, HiFi-GAN's 512 -> 256 (kernel 16,
// stride 8, a reduction of 1024 per phase) runs the TMA kernel in float32.
TEST(CudaPlanner, DeepReductionsKeepTheirStackedTiles) {
  ExecOptions opt;
  Problem wavegan = convt::test::make_problem(1, 64, 1024, 512, 1, {16, 1, 1}, {25, 1, 1},
                                              {4, 1, 1}, {11, 0, 0}, {1, 0, 0}, {1, 1, 1}, true);
  Problem hifigan = convt::test::make_problem(1, 16, 512, 256, 1, {32, 1, 1}, {16, 1, 1},
                                              {8, 1, 1}, {4, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
  const Plan w = convt::cuda::plan_implicit_gemm_fprop(wavegan.canonical3d(), opt);
  EXPECT_TRUE(w.wg && w.wg_stack > 1) << w.describe();
  const Plan h = convt::cuda::plan_implicit_gemm_fprop(hifigan.canonical3d(), opt);
  EXPECT_FALSE(h.wg) << h.describe();
}

TEST(CudaPlanner, DispatchTakesTheWgmmaKernelForDeepReductionsAndNarrowGroups) {
  int taken = 0, declined = 0, upsampled = 0, sparse = 0, stack_declined = 0, few_steps = 0,
      one_tap_layers = 0, paired_for_zeros = 0;
  for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem& p, MathMode math,
                                                  const Plan& plan) {
    // (Merged groups: the rules below are those of the problem's own groups;
    // NarrowGroupsMergedWithinTheMachineBalance checks the merges.)
    if (!plan.usable || plan.wg_gmerge > 1) return;
    // Whether the wgmma kernel could run, from a plan that asks for it.
    ExecOptions opt;
    opt.math = math;
    opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const Plan forced = convt::cuda::plan_implicit_gemm_fprop(p, opt);
    if (!forced.wg) {
      EXPECT_FALSE(plan.wg);
      return;
    }
    const double balance = p.dtype != DType::kFloat32       ? 240
                           : math == MathMode::kStrictFP32 ? 40
                                                           : 120;
    const bool one_tap = p.stride[2] > 1 && every_w_phase_has_one_tap(p) &&
                         (p.dtype != DType::kFloat32 ||
                          (p.input_size[0] == 1 && p.kernel_size[0] == 1) ||
                          (p.stride[2] == 2 && p.out_channels_per_group() <= 32 &&
                           math != MathMode::kStrictFP32));
    if (one_tap) {
      EXPECT_EQ(forced.wg_wup, 1);
      ++one_tap_layers;
    }
    // (With a W stride of 2 on channel-major tiles, where the reduction per phase is at most
    // 256 and not in split TF32, the W phase pairs take the zeros' place, on the wgmma
    // kernel as the zeros would be.)
    if (p.stride[2] == 2 && !one_tap && memory_bound_with_w_zeros(p, balance) &&
        forced.wg_wpairs && forced.wg_nc == 0) {
      EXPECT_TRUE(plan.wg && plan.wg_wpairs && plan.wg_nc == 0 && plan.wg_wup == 1)
          << plan.describe();
      ++paired_for_zeros;
      return;
    }
    if (p.stride[2] > 1 && memory_bound_with_w_zeros(p, balance) && forced.wg_wup > 1) {
      EXPECT_TRUE(plan.wg);
      EXPECT_EQ(plan.wg_wup, p.stride[2]);
      ++upsampled;
      return;
    }
    EXPECT_EQ(plan.wg_wup, 1);
    const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
    const double k = double(cig) * double(p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2]) /
                     double(p.stride[0] * p.stride[1] * p.stride[2]);
    bool want;
    bool few = false;
    // (Volumes, outputs deeper than 1, take the wgmma kernel whatever the reduction, outside
    // split TF32; so do planes, 2-D outputs of several rows, in float32 as TF32, and every
    // layer in 16-bit types; neither rule for the class of the float32 wgmma rule,
    // Float32AlignedWgmmaWhereTheMmasPayForTheCopy.)
    const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
    const bool own = p.dtype == DType::kFloat32 && math != MathMode::kStrictFP32 &&
                     p.stride[0] == 1 && p.stride[1] == 1 && p.stride[2] == 1 && cog > 16 &&
                     cog <= 32 && cig * taps < 1024 && p.output_sizes()[2] % 2 == 0;
    const bool volume = math != MathMode::kStrictFP32 && !own && p.output_sizes()[0] > 1;
    const bool plane = p.dtype == DType::kFloat32 && math != MathMode::kStrictFP32 && !own &&
                       p.output_sizes()[0] == 1 && p.output_sizes()[1] > 1;
    // (Strided 1-D layers in float32 as TF32 where output channels per group x W taps are at
    // least 2.5 times the input channels per group: StridedRowsInFloat32OnTheWgmmaKernel.)
    const bool row = p.dtype == DType::kFloat32 && math != MathMode::kStrictFP32 &&
                     p.output_sizes()[0] == 1 && p.output_sizes()[1] == 1 && p.stride[2] > 1 &&
                     double(cog) * double(p.kernel_size[2]) >= 2.5 * double(cig);
    // (At most two waves of tiles with at most 8 K steps a block, whose rows fill the TMA
    // kernel's W segments 2/3 as well as one plane fills the tile or whose tiles leave half
    // the multiprocessors idle: the TMA kernel, where it can run the problem; in 16-bit types,
    // and in float32 for the planes taken whatever their reduction.)
    auto declined_for_few_steps = [&]() {
      const int64_t slots = (forced.wg_coop ? 1 : 2) * int64_t(convt::cuda::wgmma_planner_sms());
      const int64_t waves = (forced.wg_tiles + slots - 1) / slots;
      const int64_t seg = 128 / convt::dtype_size(p.dtype);
      const int64_t q2 = (p.output_sizes()[2] + p.stride[2] - 1) / p.stride[2];
      const double fill = double(q2) / double((q2 + seg - 1) / seg * seg);
      return !forced.wg_wmerge && waves <= 2 && waves * forced.wg_steps <= 8 &&
             (forced.wg_used_plane < 1.5 * fill ||
              2 * forced.wg_tiles <= int64_t(convt::cuda::wgmma_planner_sms()));
    };
    if (p.dtype != DType::kFloat32) {
      // (16-bit types: whatever the reduction; SixteenBitLayersOnWgmmaWhateverTheReduction.)
      want = true;
      few = declined_for_few_steps();
    } else if (math == MathMode::kStrictFP32) {
      want = k >= 128 || (k >= 96 && cog >= 48) || cog <= 16;
    } else {
      // (Also where one plane a tile fills 1.5 times the share of the TMA kernel's W
      // segments of 32 positions that phase 0's rows fill.)
      const bool strided = p.stride[0] * p.stride[1] * p.stride[2] > 1;
      const int64_t q2 = (p.output_sizes()[2] + p.stride[2] - 1) / p.stride[2];
      const double fill = double(q2) / double((q2 + 31) / 32 * 32);
      const bool by_reduction = (k >= (strided ? 384 : 128) && cog >= 48) || k >= 1024 ||
                                cog <= 16 || forced.wg_used_plane >= 1.5 * fill;
      want = volume || plane || row || by_reduction;
      few = (plane || row) && !by_reduction && declined_for_few_steps();
    }
    EXPECT_FALSE(plan.wg_raw);  // (only where CONVT_WG_RAW=1 asks for it)
    // Where the tile would compute under 35% of its positions for outputs (few positions per
    // sample and phase; 20% with planes stacked, but in strict float32), the TMA kernel
    // where its segments of 32 (float) or 64 (16-bit) positions along W are three-quarters
    // full, else the gather kernel.
    // Volumes (outputs deeper than 1) down to 18% and whatever one stacked plane fills, but
    // in strict float32.
    const bool split = p.dtype == DType::kFloat32 && math == MathMode::kStrictFP32;
    const bool sparse_volume = !split && p.output_sizes()[0] > 1;
    const double min_used = sparse_volume                    ? 0.18
                            : forced.wg_stack > 1 && !split ? 0.2
                                                            : 0.35;
    // (Channel-major W phase pairs keep the rules of the tiles they replace.)
    if (want && !forced.wg_wmerge && !(forced.wg_wpairs && forced.wg_nc > 0) &&
        forced.wg_used < min_used) {
      EXPECT_FALSE(plan.wg);
      EXPECT_NE(plan.wg_reason.find("% of its positions for outputs"), std::string::npos)
          << plan.wg_reason;
      const int64_t seg = 128 / convt::dtype_size(p.dtype);
      const int64_t q2 = (p.output_sizes()[2] + p.stride[2] - 1) / p.stride[2];  // phase 0's
      if (4 * q2 < 3 * ((q2 + seg - 1) / seg) * seg) EXPECT_FALSE(plan.tma);
      ++sparse;
      return;
    }
    // Stacked planes where one plane would use under 35% of the tile: the TMA kernel where
    // its W segments are at least half full, unless the reduction is 2048 or more per phase
    // (not in split TF32).
    if (want && forced.wg_stack > 1 && !sparse_volume && forced.wg_used_plane < 0.35) {
      const int64_t seg = 128 / convt::dtype_size(p.dtype);
      const int64_t q2 = (p.output_sizes()[2] + p.stride[2] - 1) / p.stride[2];
      if (2 * q2 >= (q2 + seg - 1) / seg * seg &&
          (k < 2048 || math == MathMode::kStrictFP32)) {
        EXPECT_FALSE(plan.wg);
        ++stack_declined;
        return;
      }
      if (!few) {
        EXPECT_TRUE(plan.wg);
        EXPECT_EQ(plan.wg_stack, forced.wg_stack);
      }
    }
    if (want && few) {
      EXPECT_EQ(plan.wg, !plan.tma) << plan.wg_reason;
      if (!plan.wg)
        EXPECT_NE(plan.wg_reason.find(" K steps: the TMA kernel is faster"), std::string::npos)
            << plan.wg_reason;
      ++few_steps;
      return;
    }
    EXPECT_EQ(plan.wg, want) << "K " << k << ", " << cog << " output channels per group";
    if (plan.wg) {
      ++taken;
    } else {
      ++declined;
      EXPECT_NE(plan.wg_reason.find("output channels per group: the TMA kernel is faster"),
                std::string::npos)
          << plan.wg_reason;
    }
  });
  EXPECT_GT(taken, 50);
  EXPECT_GT(declined, 50);
  EXPECT_GT(upsampled, 20);
  EXPECT_GT(paired_for_zeros, 3);
  EXPECT_GT(sparse, 5);
  EXPECT_GT(few_steps, 3);
  (void)stack_declined;  // (none among the fuzzed problems: CudaPlanner.SmallPlanesStackInATile)
  EXPECT_GT(one_tap_layers, 5);
}

// Zeros inserted along W (CONVT_WG_WUP=1 asks for them wherever W is strided): the plan is
// the wgmma kernel's for the same convolution with W stride 1 over an input whose W is
// (W - 1) * stride + 1: every W tap in one phase, outputs unchanged, and a workspace that
// holds the upsampled copy; CONVT_WG_WUP=0 never inserts them.
TEST(CudaPlanner, ZerosAlongWRunTheStridedProblemAsUnstrided) {
  int plans = 0;
  setenv("CONVT_WG_WUP", "1", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    if (p.stride[2] == 1) {
      EXPECT_EQ(plan.wg_wup, 1);
      return;
    }
    // (Where the upsampled problem has no plan, the strided one runs.)
    if (plan.wg_wup == 1) return;
    ++plans;
    EXPECT_EQ(plan.wg_wup, p.stride[2]);
    const Problem u = convt::cuda::wgmma_problem(plan, p);
    EXPECT_EQ(u.stride[2], 1);
    EXPECT_EQ(u.stride[1], p.stride[1]);
    EXPECT_EQ(u.input_size[2], (p.input_size[2] - 1) * p.stride[2] + 1);
    EXPECT_EQ(u.output_sizes(), p.output_sizes());
    EXPECT_EQ(plan.wg_tmax[2], p.kernel_size[2]);
    const int64_t e = static_cast<int64_t>(convt::dtype_size(p.dtype));
    const int64_t copy = (plan.split ? 2 : 1) * p.batch * u.groups * plan.wg_cblocks *
                         plan.wg_bk * e * p.input_size[0] * p.input_size[1] * u.input_size[2];
    EXPECT_GE(int64_t(plan.wg_counter_offset) - int64_t(plan.wg_xt_offset), copy);
    EXPECT_GE(int64_t(plan.workspace_bytes), int64_t(plan.wg_counter_offset) + 8);
  });
  setenv("CONVT_WG_WUP", "0", 1);
  for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem&, MathMode, const Plan& plan) {
    EXPECT_EQ(plan.wg_wup, 1);
  });
  unsetenv("CONVT_WG_WUP");
  EXPECT_GT(plans, 100);
}

// The copy made by the kernel's copier warps (ImplicitGemmFpropPlan::wg_copy_fused): only on
// channel-major tiles that read the copy (not transposed in the kernel, not read in place,
// not split TF32, no folded, scattered, merged or paired W taps, no zeros inserted along W,
// which the copy kernel writes), with room for a count per
// chunk of positions; by default float32 as TF32 with at least 512 multiply-adds per input
// element, rows of 32 columns or more and inputs of 64 MB or more. CONVT_WG_FUSED_COPY=0 turns it off,
// =1 takes it wherever it can run.
TEST(CudaPlanner, CopierWarpsCopyWhereTheTilesOutlastTheCopy) {
  int fused = 0, fused16 = 0, forced = 0;
  auto can = [](const Plan& plan) {
    return plan.wg && !plan.wg_xp && !plan.wg_raw && !plan.split && plan.wg_nc == 0 &&
           plan.wg_fold == 1 && !plan.wg_scatter && !plan.wg_wmerge && !plan.wg_wpairs &&
           plan.wg_wup == 1;
  };
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    if (!plan.wg_copy_fused) return;
    ++fused;
    fused16 += p.dtype != DType::kFloat32 ? 1 : 0;
    EXPECT_TRUE(can(plan));
    // (Twice the multiply-adds per input element in 16-bit types, and only with 16-byte
    // loads of 8 positions.)
    const int64_t e = convt::dtype_size(p.dtype);
    EXPECT_GE(p.out_channels_per_group() * p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2],
              e == 4 ? 512 : 1024);
    EXPECT_EQ(plan.wg_copy_vec, e == 2);
    EXPECT_GE(p.input_size[2], 32);
    EXPECT_GE(p.batch * p.in_channels * p.input_size[0] * p.input_size[1] * p.input_size[2] * e,
              int64_t(64) << 20);
    // (A count per chunk of wg_copy_chunk positions of each sample and group, in the
    // workspace after the tile counter.)
    const int64_t plane = p.input_size[0] * p.input_size[1] * p.input_size[2];
    EXPECT_GT(plan.wg_copy_chunk, 0);
    EXPECT_GE(int64_t(plan.wg_chunk_done_bytes),
              4 * p.batch * p.groups * ((plane + plan.wg_copy_chunk - 1) / plan.wg_copy_chunk));
    EXPECT_GE(plan.wg_chunk_done_offset, plan.wg_counter_offset + 16);
    EXPECT_GE(plan.workspace_bytes, plan.wg_chunk_done_offset + plan.wg_chunk_done_bytes);
  });
  setenv("CONVT_WG_FUSED_COPY", "1", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem&, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    EXPECT_EQ(plan.wg_copy_fused, can(plan));
    EXPECT_FALSE(plan.wg_copy_vec);  // (asked for: any load width)
    forced += plan.wg_copy_fused ? 1 : 0;
  });
  setenv("CONVT_WG_FUSED_COPY", "0", 1);
  for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem&, MathMode, const Plan& plan) {
    EXPECT_FALSE(plan.wg_copy_fused);
  });
  unsetenv("CONVT_WG_FUSED_COPY");
  EXPECT_GT(fused, 10);
  EXPECT_GT(fused16, 0);
  EXPECT_GT(forced, fused);
}

// The input read in place (CONVT_WG_RAW=1 asks for it wherever it can run: float32 as TF32,
// without zeros along W): position-major tiles of the group's channels rounded up to 8, 16,
// 24, 32, 48 or 64 (64 for wider groups), 256 positions up to 32 channels and 128 above;
// box rows a multiple of 4 floats (TMA boxes start at a multiple of 16 bytes) that hold the
// segment, its W halo (from brute_force_w_taps) and a lead of up to 3 columns; K steps of
// 16 or 32 channels (2 or 4 MMA K steps, the kernel's batches); and every A load of the kernel, up
// to N - 1 positions past the box's first plus the lead plus the largest tap shift, in
// every channel of the box, inside the stage before its weight tiles. Most channel planes
// are an odd multiple of 8 floats (conflict-free loads), and most TF32 plans read in place
// (the others' W halos are too wide for 128 positions, or leave no two stages). Elsewhere no plan reads in
// place, and CONVT_WG_RAW=0 turns it off.
// W taps folded into N: with CONVT_WG_FOLD=1, every position-major plan in TF32 and the
// 16-bit types whose widest phase has 2 to 7 W taps (brute force) folds them, rounded up to
// 2, 3, 4, 5 or 7, into at most 256 columns; its box rows fit its positions, its stages hold
// a (fold x nc)-column weight tile per H tap, and the epilogue's sums (nc x (positions + 4)
// floats, plus a slot per thread) fit the 18 KB staging area. Split TF32, channel-major
// tiles and more W taps do not fold. By default only plans with 5 or more W taps, a
// reduction per column (input channels x D taps x H taps of the widest phases) of 256 or
// more and at most 128 columns (128 positions or more) fold; CONVT_WG_FOLD=0 turns it off.
TEST(CudaPlanner, FoldedWTapsFitTheirTileAndEpilogue) {
  int folded = 0, widths[8] = {}, by_default = 0;
  setenv("CONVT_WG_FOLD", "1", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    // (Scattered W taps fold every W tap: CudaPlanner.ScatteredWTapsCoverTheirOutputsAndFitTheStaging.)
    if (!plan.usable || !plan.wg || plan.wg_scatter) return;
    const Problem pk = convt::cuda::wgmma_problem(plan, p);
    const WTaps w = brute_force_w_taps(pk.stride[2], pk.padding[2], pk.dilation[2],
                                       pk.kernel_size[2]);
    int64_t fold = 1;
    if (plan.wg_nc > 0 && plan.wg_nc <= 32 && !plan.split && !plan.wg_raw)
      for (int64_t f : {2, 3, 4, 5, 7})
        if (w.max_count >= 2 && f >= w.max_count) {
          fold = f;
          break;
        }
    ASSERT_EQ(plan.wg_fold, fold) << w.max_count << " W taps, " << plan.wg_nc << " channels";
    if (fold == 1) return;
    ++folded;
    ++widths[std::min<int64_t>(7, plan.wg_nc * fold / 32)];
    EXPECT_LE(plan.wg_nc * fold, 256);
    EXPECT_EQ(plan.wg_n, folded_positions(plan.wg_nc, fold));
    EXPECT_LE(plan.wg_rows * plan.wg_wbox, plan.wg_n);
    EXPECT_LE((plan.wg_nc * (plan.wg_n + 4) + 128) * 4, 18432);
    const int64_t e = static_cast<int64_t>(convt::dtype_size(p.dtype));
    EXPECT_GE(plan.wg_stage_bytes,
              plan.wg_box_bytes + int64_t(plan.wg_hb) * fold * plan.wg_nc * plan.wg_bk * e);
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
  });
  EXPECT_GT(folded, 30);
  // (Tiles of 16-24, 32-56, 64-80, 96-120 and 128 columns; the wider ones, 24 or 32 channels
  // x 5 or 7 taps, are rare in the sweep: the GPU tests run them.)
  for (int i : {0, 1, 2, 3, 4})
    EXPECT_GT(widths[i], 0) << "no folded tile of " << 32 * i << "+ columns";
  setenv("CONVT_WG_FOLD", "0", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem&, MathMode,
                                                             const Plan& plan) {
    EXPECT_TRUE(plan.wg_fold == 1 || plan.wg_scatter);  // (CONVT_WG_SCATTER=0 turns those off)
  });
  unsetenv("CONVT_WG_FOLD");
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg || plan.wg_fold == 1 || plan.wg_scatter) return;
    ++by_default;
    const Problem pk = convt::cuda::wgmma_problem(plan, p);
    int64_t k_col = pk.in_channels_per_group();
    for (int d = 0; d < 2; ++d)
      k_col *= brute_force_w_taps(pk.stride[d], pk.padding[d], pk.dilation[d],
                                  pk.kernel_size[d]).max_count;
    EXPECT_GE(plan.wg_fold, 5);
    EXPECT_GE(k_col, 256);
    EXPECT_LE(plan.wg_nc * plan.wg_fold, 128);
    EXPECT_GE(plan.wg_n, 128);
  });
  EXPECT_GT(by_default, 0);
}

// W taps stacked in M (CONVT_WG_MFOLD=1): plans of at most 32 output channels per group
// whose widest W phase has 2 or more taps, TF32 or 16-bit (not split TF32), run
// channel-major tiles of 64 rows = mfold taps x 64 / mfold channels, 4 taps a block for up
// to 16 channels with 3 or more taps, else 2, so that (mfold - 1) x the tap offset stays
// within 8 columns; the box holds the W taps rounded up to mfold and the stage a weight tile
// of 64 rows per mfold taps; never over zeros inserted along W. Position-major plans left
// under it are those it cannot take. Unset, no plan stacks.
// Unset, no plan stacks.
TEST(CudaPlanner, WTapsStackedInMFitTheirTiles) {
  int stacked = 0, by_mf[5] = {}, left = 0;
  setenv("CONVT_WG_MFOLD", "1", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    const Problem pk = convt::cuda::wgmma_problem(plan, p);
    const WTaps w = brute_force_w_taps(pk.stride[2], pk.padding[2], pk.dilation[2],
                                       pk.kernel_size[2]);
    const int64_t cog = pk.out_channels_per_group();
    const int64_t e = static_cast<int64_t>(convt::dtype_size(p.dtype));
    if (plan.wg_mfold == 1) {
      if (plan.wg_nc > 0 && !plan.split && !plan.wg_raw && !plan.wg_wmerge &&
          !plan.wg_wpairs && !plan.wg_tsplit && plan.wg_wup == 1) {
        ++left;
        EXPECT_TRUE(w.max_count < 2 || w.doff > 8) << p.to_string();
      }
      return;
    }
    ++stacked;
    const int64_t mf = plan.wg_mfold;
    ASSERT_TRUE(mf == 2 || mf == 4) << mf;
    ++by_mf[mf];
    EXPECT_EQ(mf, cog <= 16 && w.max_count >= 3 && 3 * w.doff <= 8 ? 4 : 2) << p.to_string();
    EXPECT_FALSE(plan.split || plan.wg_raw || plan.wg_xp || plan.wg_coop || plan.wg_wmerge ||
                 plan.wg_wpairs || plan.wg_tsplit || plan.wg_scatter || plan.wg_wup > 1);
    EXPECT_EQ(plan.wg_fold, 1);
    EXPECT_EQ(plan.wg_nc, 0);
    EXPECT_EQ(plan.wg_cw * mf, 64);
    EXPECT_LE(cog, 32);
    EXPECT_GE(w.max_count, 2);
    EXPECT_LE((mf - 1) * w.doff, 8);
    // (The halo of the taps rounded up to mf, the box the tile's columns and that halo.)
    EXPECT_EQ(plan.wg_wbox - plan.wg_wv, ((w.max_count + mf - 1) / mf * mf - 1) * w.doff)
        << p.to_string();
    EXPECT_LE(plan.wg_rows * plan.wg_wbox, plan.wg_n);
    EXPECT_GE(plan.wg_stage_bytes,
              plan.wg_box_bytes +
                  int64_t(plan.wg_hb) * ((w.max_count + mf - 1) / mf) * 64 * plan.wg_bk * e);
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
  });
  EXPECT_GT(stacked, 8);
  EXPECT_GT(by_mf[2], 0);
  EXPECT_GT(by_mf[4], 0);
  (void)left;
  unsetenv("CONVT_WG_MFOLD");
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem&, MathMode,
                                                             const Plan& plan) {
    EXPECT_EQ(plan.wg_mfold, 1);
  });
}

// W taps scattered (CONVT_WG_SCATTER=1: wherever they can run; by default where the
// reduction per column, input channels x D taps x H taps of the widest phases, is 64 or
// more): plans of at most 16 channels per group, TF32 or 16-bit, with a W stride of 2 or
// more and 2 to 7 W taps scatter, folding every W tap; a
// segment's box, from its first input column (brute force: the least input column any of
// its output columns reads) on, holds every input column its outputs read; the sums (nc x
// (rows x output columns rounded up to 32, + 4) floats and a slot per thread) fit the 18 KB
// staging area. CONVT_WG_SCATTER=0: no plan scatters.
TEST(CudaPlanner, ScatteredWTapsCoverTheirOutputsAndFitTheStaging) {
  int scattered = 0, by_default = 0;
  setenv("CONVT_WG_SCATTER", "1", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg || !plan.wg_scatter) return;
    ++scattered;
    const int64_t s = p.stride[2], k = p.kernel_size[2], dil = p.dilation[2], pad = p.padding[2];
    EXPECT_LE(plan.wg_nc, 16);
    EXPECT_FALSE(plan.split);
    EXPECT_GT(s, 1);
    EXPECT_GE(k, 2);
    EXPECT_LE(k, 7);
    EXPECT_GE(plan.wg_fold, k);
    const int64_t wo = plan.wg_wv * s;  // output columns of a segment (segment 0: 0 .. wo - 1)
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int64_t o = 0; o < wo; ++o)
      for (int64_t kw = 0; kw < k; ++kw) {
        const int64_t v = o + pad - kw * dil;
        if (((v % s) + s) % s != 0) continue;
        const int64_t i = v >= 0 ? v / s : -((-v) / s);
        lo = std::min(lo, i);
        hi = std::max(hi, i);
      }
    EXPECT_EQ(plan.wg_sc_clo, lo);
    EXPECT_LE(hi - lo + 1, plan.wg_wbox);
    EXPECT_LE(plan.wg_rows * plan.wg_wbox, plan.wg_n);
    const int64_t pitch = (plan.wg_rows * wo + 31) / 32 * 32 + 4;
    // (The sums and a slot per consumer thread fit the plan's staging area, which grows up
    // to twice the default 18432 bytes for them.)
    EXPECT_LE((plan.wg_nc * pitch + 128) * 4, plan.wg_epi_bytes);
    EXPECT_LE(plan.wg_epi_bytes, 2 * 18432);
  });
  setenv("CONVT_WG_SCATTER", "0", 1);
  EXPECT_GT(scattered, 10);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem&, MathMode,
                                                             const Plan& plan) {
    EXPECT_FALSE(plan.wg_scatter);
  });
  unsetenv("CONVT_WG_SCATTER");
  for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem& p, MathMode, const Plan& plan) {
    if (!plan.usable || !plan.wg || !plan.wg_scatter) return;
    ++by_default;
    int64_t k_col = p.in_channels_per_group();
    for (int d = 0; d < 2; ++d)
      k_col *= brute_force_w_taps(p.stride[d], p.padding[d], p.dilation[d], p.kernel_size[d])
                   .max_count;
    EXPECT_GE(k_col, 64);
    EXPECT_EQ(plan.wg_wup, 1);
  });
  EXPECT_GT(by_default, 0);
}

// W phases merged (CONVT_WG_WMERGE=1): only with a W stride, not in split TF32, unfolded
// and unscattered tiles over the problem itself (no zeros inserted); the buffer of a tile's outputs
// ([channels][rows][stride x wv] of T and a slot per consumer thread) fits the staging area
// the plan sizes, and the stages what is left. Without the setting, nothing merges.
TEST(CudaPlanner, MergedWPhasesFitTheirBuffer) {
  int merged = 0, channel_major = 0;
  setenv("CONVT_WG_WMERGE", "1", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg || !plan.wg_wmerge) return;
    ++merged;
    if (plan.wg_nc == 0) ++channel_major;
    EXPECT_GT(p.stride[2], 1);
    EXPECT_EQ(plan.wg_fold, 1);
    EXPECT_FALSE(plan.wg_scatter);
    EXPECT_FALSE(plan.wg_raw);
    EXPECT_FALSE(plan.split);
    EXPECT_EQ(plan.wg_wup, 1);
    const int64_t e = static_cast<int64_t>(convt::dtype_size(p.dtype));
    const int64_t buffer =
        (int64_t(plan.wg_cw) * plan.wg_rows * p.stride[2] * plan.wg_wv + 128) * e;
    // (Channel-major tiles keep the default staging area, 18432 bytes, before the buffer.)
    const int64_t staging = plan.wg_nc > 0 ? 0 : 18432;
    EXPECT_LE(buffer + staging, plan.wg_epi_bytes);
    EXPECT_GE(plan.wg_epi_bytes, 18432);
    EXPECT_LE(plan.wg_epi_bytes, staging + 48 * 1024 + 128);
    EXPECT_LE(plan.wg_rows * plan.wg_wbox, plan.wg_n);
    EXPECT_GE(plan.wg_stages, 2);
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
  });
  EXPECT_GT(merged, 20);
  EXPECT_GT(channel_major, 5);
  unsetenv("CONVT_WG_WMERGE");
  for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem&, MathMode, const Plan& plan) {
    EXPECT_FALSE(plan.wg_wmerge);
  });
}

// Pair-aligned layouts (CONVT_WG_EVEN=1, opt-in): with W of stride 1 and an even output
// width, segments of even width in boxes of even width where a tile has several rows, the
// most positions used among them (up to 16 segments past the fewest); where none exists,
// the default layout. KernelBench's kb71 (1026 columns: 1 x 206 by default, 2 x 114 of a
// 116-wide box aligned) and kb78 (1024: 3 x 79 of 85, 2 x 114 of 120); unset, no change.
// Pair-aligned wgmma tile layouts (even segments, and even boxes where a tile has several
// rows): by default in 16-bit types where the layer's W stride is 1 and its output is
// even-wide; CONVT_WG_EVEN=1 also in float32 and with zeros inserted along W, =0 nowhere.
TEST(CudaPlanner, PairAlignedLayoutsIn16BitTypes) {
  using convt::test::make_problem;
  struct Want {
    Problem p;
    int64_t rows, wv, wbox;  // the aligned layout
    int64_t off_rows, off_wv;  // the layout without alignment
  };
  Problem kb71 = make_problem(2, 8, 32, 32, 1, {512, 1024, 1}, {3, 3, 1}, {1, 1, 1},
                              {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  Problem kb78 = make_problem(2, 8, 32, 32, 1, {512, 1024, 1}, {3, 7, 1}, {1, 1, 1},
                              {1, 3, 0}, {0, 0, 0}, {1, 1, 1}, false);
  ExecOptions opt;
  opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    kb71.dtype = kb78.dtype = dtype;
    for (const Want& want : {Want{kb71, 2, 114, 116, 1, 206}, Want{kb78, 2, 114, 120, 3, 79}}) {
      const Problem c = want.p.canonical3d();
      SCOPED_TRACE(want.p.to_string());
      // (The layout without alignment: the widest tiles, CONVT_WG_XP_ROWS=0, not those of
      // more rows for an H-complete step transposed in the kernel.)
      auto plan_with = [&](const char* even) {
        const ScopedEnv env("CONVT_WG_EVEN", even);
        const ScopedEnv rows("CONVT_WG_XP_ROWS", even[0] == '0' ? "0" : "1");
        return convt::cuda::plan_implicit_gemm_fprop(c, opt);
      };
      const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, opt);
      const Plan off = plan_with("0"), on = plan_with("1");
      ASSERT_TRUE(dflt.usable && dflt.wg && off.wg && on.wg) << dflt.describe();
      if (dtype != DType::kFloat32) {
        EXPECT_EQ(off.wg_rows, want.off_rows) << off.describe();
        EXPECT_EQ(off.wg_wv, want.off_wv) << off.describe();
      }
      EXPECT_EQ(on.wg_rows, want.rows) << on.describe();
      EXPECT_EQ(on.wg_wv, want.wv) << on.describe();
      EXPECT_EQ(on.wg_wbox, want.wbox) << on.describe();
      // (float32: kb71 and kb78 are of the class that takes the aligned layouts there too,
      // CudaPlanner.Float32AlignedWgmmaWhereTheMmasPayForTheCopy.)
      const Plan& expect = on;
      EXPECT_EQ(dflt.wg_rows, expect.wg_rows) << dflt.describe();
      EXPECT_EQ(dflt.wg_wv, expect.wg_wv) << dflt.describe();
      EXPECT_EQ(dflt.wg_wbox, expect.wg_wbox) << dflt.describe();
    }
  }
  // Fuzzed layers: a plan that alignment changes is pair-aligned and eligible (W of stride
  // 1, or with CONVT_WG_EVEN=1 strided with zeros inserted along W; an even-wide output; a
  // tile of the plain kind); by default only in 16-bit types without zeros inserted.
  int aligned = 0, changed_on = 0, changed_dflt = 0, changed_two = 0;
  auto tile = [](const Plan& pl) {  // (the wgmma tile's layout and K step)
    return std::to_string(pl.wg) + " " + std::to_string(pl.wg_n) + " " +
           std::to_string(pl.wg_nc) + " " + std::to_string(pl.wg_rows) + "x" +
           std::to_string(pl.wg_wv) + " of " + std::to_string(pl.wg_hbox) + "x" +
           std::to_string(pl.wg_wbox) + " stack " + std::to_string(pl.wg_stack) + " bk " +
           std::to_string(pl.wg_bk) + " hb " + std::to_string(pl.wg_hb);
  };
  auto pair_aligned = [](const Plan& pl) {
    return pl.wg_wv % 2 == 0 && (pl.wg_rows == 1 || pl.wg_wbox % 2 == 0);
  };
  auto eligible = [](const Problem& p, const Plan& pl) {
    // (W of stride 1, or strided with zeros inserted along W: run as stride 1.)
    return (p.stride[2] == 1 || pl.wg_wup > 1) && p.output_size(2) % 2 == 0 && !pl.wg_raw &&
           pl.wg_fold == 1 && !pl.wg_scatter && !pl.wg_wmerge && !pl.wg_wpairs;
  };
  // (Float32 as TF32 without a stride, 17-32 output channels, a reduction under 1024 and
  // multiply-adds per input element at least 4 times the input channels or at least 6 D x H
  // taps: aligned by default too.)
  auto f32_class = [](const Problem& p, MathMode math) {
    const int64_t cog = p.out_channels_per_group();
    const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
    return p.dtype == DType::kFloat32 && math == MathMode::kAllowTF32 && p.stride[0] == 1 &&
           p.stride[1] == 1 && p.stride[2] == 1 && cog > 16 && cog <= 32 &&
           p.in_channels_per_group() * taps < 1024 &&
           (cog * taps >= 4 * p.in_channels_per_group() ||
            p.kernel_size[0] * p.kernel_size[1] >= 6) &&
           p.output_size(2) % 2 == 0;
  };
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode math,
                                                             const Plan& dflt) {
    auto plan_with = [&](const char* even) {
      const ScopedEnv env("CONVT_WG_EVEN", even);
      ExecOptions o;
      o.math = math;
      o.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
      return convt::cuda::plan_implicit_gemm_fprop(p, o);
    };
    const Plan on = plan_with("1"), off = plan_with("0"), two = plan_with("2");
    if (!on.usable || !on.wg || !off.usable || !off.wg || !dflt.usable || !dflt.wg) return;
    // (CONVT_WG_EVEN=2: the unaligned plan's N, and where that N has an aligned layout,
    // the default's eligibility, that layout.)
    if (two.usable && two.wg && tile(two) != tile(off)) {
      ++changed_two;
      EXPECT_EQ(two.wg_n, off.wg_n) << tile(two) << " | " << tile(off);
      EXPECT_TRUE(((p.dtype != DType::kFloat32 && two.wg_wup <= 1) || f32_class(p, math)) &&
                  eligible(p, two) && pair_aligned(two))
          << tile(two) << " | " << tile(off);
    }
    if (eligible(p, on) && pair_aligned(on)) ++aligned;
    if (tile(on) != tile(off)) {
      ++changed_on;
      EXPECT_TRUE(eligible(p, on) && pair_aligned(on)) << tile(on) << " | " << tile(off);
    }
    const bool by_default =
        (p.dtype != DType::kFloat32 && dflt.wg_wup <= 1) || f32_class(p, math);
    EXPECT_EQ(tile(dflt), tile(by_default ? on : off));
    if (tile(dflt) != tile(off)) ++changed_dflt;
  });
  EXPECT_GT(aligned, 20);
  EXPECT_GT(changed_on, changed_dflt);
  EXPECT_GT(changed_dflt, 3);
  EXPECT_GT(changed_two, 3);
}

// CONVT_WG_XP_RING=P: the transposition's ring of up to P pieces (at most 16), stages given
// up for it down to the least the transposition keeps (two; in float the copy's stages),
// the tile and K step unchanged, the block's shared memory within its limit.
TEST(CudaPlanner, TranspositionRingWhereAsked) {
  // (The transposition planned whatever the input's alignment, for more plans to check:
  // the fuzzed sizes are mostly not 16-byte aligned; see XpOnlyWhereTheInputIsReadInPlace.)
  const ScopedEnv unaligned("CONVT_WG_XP_UNALIGNED", "1");
  int deeper = 0, fewer_stages = 0, xp_plans = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode math,
                                                             const Plan& dflt) {
    if (!dflt.usable || !dflt.wg || !dflt.wg_xp) return;
    ++xp_plans;
    const ScopedEnv ring("CONVT_WG_XP_RING", "16");
    ExecOptions o;
    o.math = math;
    o.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p, o);
    ASSERT_TRUE(plan.usable && plan.wg && plan.wg_xp) << plan.describe();
    EXPECT_EQ(plan.wg_n, dflt.wg_n);
    EXPECT_EQ(plan.wg_rows, dflt.wg_rows);
    EXPECT_EQ(plan.wg_wv, dflt.wg_wv);
    EXPECT_EQ(plan.wg_bk, dflt.wg_bk);
    EXPECT_EQ(plan.wg_hb, dflt.wg_hb);
    EXPECT_EQ(plan.wg_xp_piece_bytes, dflt.wg_xp_piece_bytes);
    EXPECT_GE(plan.wg_xp_pieces, 4);
    EXPECT_LE(plan.wg_xp_pieces, 16);
    EXPECT_LE(plan.wg_stages, dflt.wg_stages);
    EXPECT_GE(plan.wg_stages, 2);
    // (The whole ring, or the least stages: then at least the default's pieces.)
    const bool least = plan.wg_stages == 2 || (p.dtype == DType::kFloat32 &&
                                               plan.wg_stages == dflt.wg_stages);
    EXPECT_TRUE(plan.wg_xp_pieces == 16 || least) << plan.describe();
    if (least) EXPECT_GE(plan.wg_xp_pieces, std::min(dflt.wg_xp_pieces, 16)) << plan.describe();
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
    if (plan.wg_xp_pieces > dflt.wg_xp_pieces) ++deeper;
    if (plan.wg_stages < dflt.wg_stages) ++fewer_stages;
  });
  EXPECT_GT(xp_plans, 20);
  EXPECT_GT(deeper, 5);
  EXPECT_GT(fewer_stages, 3);
}

// Float32 planes on the wgmma kernel whatever the reduction (CONVT_WG_F32_PLANES, 1 by
// default, 0: the reduction rules): only float32 planes (2-D outputs of several rows) plan
// differently, and where they do the default takes the wgmma kernel; 1-D layers, volumes and
// 16-bit types plan alike under both.
TEST(CudaPlanner, Float32PlanesWhateverTheReduction) {
  std::mt19937_64 rng(20261128);
  int moved = 0;
  for (int i = 0; i < 300; ++i) {
    const auto drawn = draw_problem(rng, {128, 128, 8, 4, 64, 4000, 5, 3, false});
    if (!drawn) continue;
    const Problem& given = *drawn;
    const Problem p = given.canonical3d();
    SCOPED_TRACE(given.to_string());
    ExecOptions o;
    std::string d[2];
    for (int v = 0; v < 2; ++v) {
      const ScopedEnv env("CONVT_WG_F32_PLANES", std::to_string(v).c_str());
      d[v] = convt::cuda::describe_plan_without_device(p, o);
    }
    const bool plane = p.dtype == DType::kFloat32 && p.output_size(0) == 1 && p.output_size(1) > 1;
    if (!plane) {
      EXPECT_EQ(d[1], d[0]);
      continue;
    }
    if (d[1] != d[0]) {
      ++moved;
      EXPECT_NE(d[1].find("wgmma"), std::string::npos) << d[1];
    }
  }
  EXPECT_GT(moved, 10);
}

// 16-bit types on the wgmma kernel whatever the reduction (CONVT_WG_REDUCTION16, 0 by default,
// 1: the reduction rule of at least 64 per phase or at most 16 output channels a group): the
// plans differ only in 16-bit layers that the rule gives the TMA kernel, and there the default
// runs the wgmma kernel unless a rule of sparse tiles or few K steps gives the layer back;
// no 16-bit plan is declined for its reduction, and float32 plans do not move.
TEST(CudaPlanner, SixteenBitLayersOnWgmmaWhateverTheReduction) {
  std::mt19937_64 rng(20261129);
  int moved = 0, kept_back = 0;
  for (int i = 0; i < 1000; ++i) {
    auto drawn = draw_problem(rng, {64, 128, 8, 16, 96, 8000, 3, 3, false});
    if (!drawn) continue;
    Problem given = *drawn;
    if (i % 3 != 0) given.dtype = i % 2 == 0 ? DType::kBFloat16 : DType::kFloat16;
    const Problem p = given.canonical3d();
    SCOPED_TRACE(given.to_string());
    ExecOptions o;
    const auto now = convt::cuda::plan_implicit_gemm_fprop(p, o);
    const std::string now_d = convt::cuda::describe_plan_without_device(p, o);
    Plan rule;
    std::string rule_d;
    {
      const ScopedEnv env("CONVT_WG_REDUCTION16", "1");
      rule = convt::cuda::plan_implicit_gemm_fprop(p, o);
      rule_d = convt::cuda::describe_plan_without_device(p, o);
    }
    if (!now.usable) continue;
    const bool sixteen = p.dtype != DType::kFloat32;
    if (sixteen) EXPECT_EQ(now.wg_reason.find("reduction of"), std::string::npos) << now.wg_reason;
    if (now_d == rule_d) continue;
    EXPECT_TRUE(sixteen) << now_d;
    EXPECT_FALSE(rule.wg) << rule_d;
    EXPECT_EQ(rule.wg_reason.rfind("reduction of", 0), 0u) << rule.wg_reason;
    if (now.wg) {
      ++moved;
    } else {
      ++kept_back;
      EXPECT_TRUE(now.wg_reason.find("K steps") != std::string::npos ||
                  now.wg_reason.find("of its positions") != std::string::npos)
          << now.wg_reason;
    }
  }
  EXPECT_GT(moved, 10);
  std::printf("16-bit layers moved to the wgmma kernel: %d, kept on the TMA kernel by other rules: %d\n",
              moved, kept_back);
}

// Float32 as TF32 on the W phase pairs of position-major tiles (at most 32 output channels a
// group, W stride 2) wherever they can run (CONVT_WG_F32_PAIRS, 1 by default, 0: only where
// every W phase has one tap): the plans differ only in such layers with an output of several
// rows (not 1-D ones), where the default's wgmma plans run the pairs and split TF32 and 16-bit
// types do not move; with the input read in place asked for (CONVT_WG_RAW=1), the rule
// changes no plan.
TEST(CudaPlanner, Float32PairsWhereverTheyRun) {
  int paired = 0;
  for_each_drawn(20261130, {96, 40, 8, 4, 64, 4000, 5, 2, false}, 400,
                 [&](const Problem& p, const ExecOptions& o) {
    const auto now = convt::cuda::plan_implicit_gemm_fprop(p, o);
    const std::string now_d = convt::cuda::describe_plan_without_device(p, o);
    std::string old_d;
    {
      const ScopedEnv env("CONVT_WG_F32_PAIRS", "0");
      old_d = convt::cuda::describe_plan_without_device(p, o);
    }
    {
      // (The input read in place, asked for, keeps the tiles it ran on without the rule.)
      const ScopedEnv raw("CONVT_WG_RAW", "1");
      const std::string raw_now = convt::cuda::describe_plan_without_device(p, o);
      const ScopedEnv env("CONVT_WG_F32_PAIRS", "0");
      EXPECT_EQ(raw_now, convt::cuda::describe_plan_without_device(p, o));
    }
    if (now_d == old_d) return;
    EXPECT_EQ(p.dtype, DType::kFloat32);
    EXPECT_EQ(o.math, MathMode::kAllowTF32);
    EXPECT_EQ(p.stride[2], 2);
    EXPECT_LE(p.out_channels_per_group(), 32);
    EXPECT_EQ(old_d.find("W phase pairs"), std::string::npos) << old_d;
    // (Not where the output is a single row: 1-D layers keep the phases' own tiles.)
    EXPECT_GT(p.output_size(0) * p.output_size(1), 1) << now_d;
    if (now.wg) {
      EXPECT_TRUE(now.wg_wpairs) << now_d;
      ++paired;
    }
  });
  EXPECT_GT(paired, 5);
}

// More H taps a K step where the boxes shrink (CONVT_WG_HFIRST=1, the default, or 2): a plan it
// changes keeps its tile (positions, rows, no stacked planes, not split TF32) and takes more
// H taps with a channel block of at least 64 bytes (=2: 32), its boxes loading at most 70%
// of the rows they did (ceil(H taps / H taps a step) x box rows a channel block), or goes
// to the TMA kernel for its fewer K steps; kb73 in float32 takes 16 channels x 2 H taps,
// kb70 8 x 3 with =2 only.
TEST(CudaPlanner, MoreHTapsWhereTheBoxesShrink) {
  using convt::test::make_problem;
  int changed = 0, narrow = 0;
  for_each_drawn(20261131, {192, 192, 4, 8, 64, 4000, 5, 3, false}, 500,
                 [&](const Problem& p, const ExecOptions& o) {
    Plan dflt;
    std::string dflt_d;
    {
      const ScopedEnv off("CONVT_WG_HFIRST", "0");
      dflt = convt::cuda::plan_implicit_gemm_fprop(p, o);
      dflt_d = convt::cuda::describe_plan_without_device(p, o);
    }
    if (std::getenv("CONVT_WG_HFIRST") == nullptr) {
      // (=1 is the default.)
      const std::string unset_d = convt::cuda::describe_plan_without_device(p, o);
      const ScopedEnv on("CONVT_WG_HFIRST", "1");
      EXPECT_EQ(unset_d, convt::cuda::describe_plan_without_device(p, o));
    }
    for (const int v : {1, 2}) {
      const ScopedEnv env("CONVT_WG_HFIRST", std::to_string(v).c_str());
      const Plan hf = convt::cuda::plan_implicit_gemm_fprop(p, o);
      const std::string hf_d = convt::cuda::describe_plan_without_device(p, o);
      if (hf_d == dflt_d) continue;
      ++changed;
      ASSERT_TRUE(dflt.wg) << dflt_d << " -> " << hf_d;
      EXPECT_FALSE(dflt.split);
      EXPECT_EQ(dflt.wg_stack, 1);
      if (!hf.wg) {
        EXPECT_NE(hf.wg_reason.find(" K steps: the TMA kernel is faster"), std::string::npos)
            << hf.wg_reason;
        continue;
      }
      EXPECT_EQ(hf.wg_n, dflt.wg_n);
      EXPECT_EQ(hf.wg_rows, dflt.wg_rows);
      EXPECT_EQ(hf.wg_stack, 1);
      EXPECT_GT(hf.wg_hb, dflt.wg_hb) << hf_d;
      const int64_t bytes = int64_t(hf.wg_bk) * convt::dtype_size(p.dtype);
      EXPECT_GE(bytes, v == 1 ? 64 : 32) << hf_d;
      narrow += bytes < 64 ? 1 : 0;
      const int64_t t = hf.wg_tmax[1];
      EXPECT_LE(10 * ((t + hf.wg_hb - 1) / hf.wg_hb) * hf.wg_hbox,
                7 * ((t + dflt.wg_hb - 1) / dflt.wg_hb) * dflt.wg_hbox)
          << dflt_d << " -> " << hf_d;
    }
  });
  EXPECT_GT(changed, 10);
  EXPECT_GT(narrow, 3);
  // kb73 in float32 (2 H taps, 11 rows): 16 channels x 2 H taps with either; kb70 (3 H taps,
  // 5 rows, 16 x 2 by default) 8 x 3 with =2 only.
  Problem kb73 = make_problem(3, 4, 32, 32, 1, {32, 64, 128}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1},
                              {0, 0, 0}, {1, 1, 1}, false);
  Problem kb70 = make_problem(3, 8, 48, 24, 1, {96, 96, 96}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0},
                              {0, 0, 0}, {1, 1, 1}, false);
  kb73.dtype = kb70.dtype = DType::kFloat32;
  const Problem c73 = kb73.canonical3d(), c70 = kb70.canonical3d();
  const ExecOptions o;
  int hb[3][2], bk[3][2];
  for (int v = 0; v < 3; ++v) {
    const ScopedEnv env("CONVT_WG_HFIRST", std::to_string(v).c_str());
    int i = 0;
    for (const Problem* c : {&c73, &c70}) {
      const Plan plan = convt::cuda::plan_implicit_gemm_fprop(*c, o);
      EXPECT_TRUE(plan.wg);
      hb[v][i] = plan.wg_hb;
      bk[v][i] = plan.wg_bk;
      ++i;
    }
  }
  EXPECT_EQ(hb[0][0], 1);
  EXPECT_EQ(bk[0][0], 32);
  for (int v : {1, 2}) {
    EXPECT_EQ(hb[v][0], 2);
    EXPECT_EQ(bk[v][0], 16);
  }
  EXPECT_EQ(hb[0][1], 2);
  EXPECT_EQ(hb[1][1], 2);
  EXPECT_EQ(bk[1][1], bk[0][1]);
  EXPECT_EQ(hb[2][1], 3);
  EXPECT_EQ(bk[2][1], 8);
}

// An H-complete K step transposed in the kernel (CONVT_WG_XP_HFULL, 2 by default, 1: float32
// only, 0: off, 3: the copy's stages in float32): a plan =1 changes is float32 as TF32 on an
// unstrided layer with one D tap, keeps its tile, takes every H tap with a channel block of
// at least 32 bytes and at least two stages, with a box of at most twice the tile's rows, and
// transposes the input in the kernel where the step without it copied it; kb71 in float32
// takes 8 channels x 3 H taps, kb78 8 x 3 at 2 stages (=3: the copy's 16 x 1 at 3).
TEST(CudaPlanner, HCompleteStepsWhereTheKernelTransposes) {
  // (The transposition planned whatever the input's alignment, for more plans to check:
  // the fuzzed sizes are mostly not 16-byte aligned; see XpOnlyWhereTheInputIsReadInPlace.)
  const ScopedEnv unaligned("CONVT_WG_XP_UNALIGNED", "1");
  using convt::test::make_problem;
  int changed = 0, transposed = 0;
  for_each_drawn(20261132, {256, 96, 4, 8, 64, 4000, 5, 1, false}, 3000,
                 [&](const Problem& p, const ExecOptions& o) {
    if (std::getenv("CONVT_WG_XP_HFULL") == nullptr) {
      // (=2 is the default.)
      const std::string unset_d = convt::cuda::describe_plan_without_device(p, o);
      const ScopedEnv on("CONVT_WG_XP_HFULL", "2");
      EXPECT_EQ(unset_d, convt::cuda::describe_plan_without_device(p, o));
    }
    Plan dflt;
    std::string dflt_d;
    {
      const ScopedEnv off("CONVT_WG_XP_HFULL", "0");
      dflt = convt::cuda::plan_implicit_gemm_fprop(p, o);
      dflt_d = convt::cuda::describe_plan_without_device(p, o);
    }
    const ScopedEnv env("CONVT_WG_XP_HFULL", "1");
    const Plan hf = convt::cuda::plan_implicit_gemm_fprop(p, o);
    const std::string hf_d = convt::cuda::describe_plan_without_device(p, o);
    if (hf_d == dflt_d) return;
    ++changed;
    EXPECT_EQ(p.dtype, DType::kFloat32);
    EXPECT_EQ(o.math, MathMode::kAllowTF32);
    EXPECT_EQ(p.stride[0] * p.stride[1] * p.stride[2], 1);
    ASSERT_TRUE(dflt.wg && hf.wg) << dflt_d << " -> " << hf_d;
    EXPECT_FALSE(dflt.wg_xp) << dflt_d;
    if (!hf.wg_xp) {
      // (Layers of few tiles: the one-warpgroup tile the step let transpose in the kernel
      // kept the planner from two warpgroups, and a smaller N that fills the machine, on
      // which the step does not fit, then replaced it.)
      EXPECT_LT(hf.wg_n * (hf.wg_coop ? 2 : 1), dflt.wg_n * (dflt.wg_coop ? 2 : 1))
          << dflt_d << " -> " << hf_d;
      EXPECT_EQ(hf.wg_hb, dflt.wg_hb) << hf_d;
      return;
    }
    EXPECT_EQ(hf.wg_tmax[0], 1);
    EXPECT_EQ(hf.wg_hb, hf.wg_tmax[1]) << hf_d;
    EXPECT_LT(dflt.wg_hb, dflt.wg_tmax[1]) << dflt_d;
    EXPECT_GE(hf.wg_bk * 4, 32) << hf_d;
    EXPECT_LE(hf.wg_hbox, 2 * hf.wg_rows) << hf_d;
    EXPECT_GE(hf.wg_stages, std::min(dflt.wg_stages, 2)) << hf_d;
    EXPECT_EQ(hf.wg_n, dflt.wg_n);
    EXPECT_EQ(hf.wg_rows, dflt.wg_rows);
    ++transposed;
  });
  EXPECT_GT(transposed, 5);
  EXPECT_GE(changed, transposed);
  Problem kb71 = make_problem(2, 8, 32, 32, 1, {512, 1024, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0},
                              {0, 0, 0}, {1, 1, 1}, false);
  kb71.dtype = DType::kFloat32;
  const Problem c71 = kb71.canonical3d();
  const ExecOptions o;
  Plan before;
  {
    const ScopedEnv off("CONVT_WG_XP_HFULL", "0");
    before = convt::cuda::plan_implicit_gemm_fprop(c71, o);
  }
  EXPECT_FALSE(before.wg_xp);
  const ScopedEnv env("CONVT_WG_XP_HFULL", "1");
  const Plan after = convt::cuda::plan_implicit_gemm_fprop(c71, o);
  EXPECT_TRUE(after.wg_xp);
  EXPECT_EQ(after.wg_hb, 3);
  EXPECT_EQ(after.wg_bk, 8);
  {
    Problem kb78 = make_problem(2, 8, 32, 32, 1, {512, 1024, 1}, {3, 7, 1}, {1, 1, 1},
                                {1, 3, 0}, {0, 0, 0}, {1, 1, 1}, false);
    kb78.dtype = DType::kFloat32;
    const Problem c78 = kb78.canonical3d();
    const Plan dflt78 = convt::cuda::plan_implicit_gemm_fprop(c78, o);
    EXPECT_TRUE(dflt78.wg_xp);
    EXPECT_EQ(dflt78.wg_hb, 3);
    EXPECT_EQ(dflt78.wg_bk, 8);
    EXPECT_EQ(dflt78.wg_stages, 2);
    const ScopedEnv three("CONVT_WG_XP_HFULL", "3");
    const Plan copy78 = convt::cuda::plan_implicit_gemm_fprop(c78, o);
    EXPECT_FALSE(copy78.wg_xp);
    EXPECT_EQ(copy78.wg_hb, 1);
    EXPECT_EQ(copy78.wg_stages, 3);
  }
  // =2 against =3: only float32 plans change, to H-complete steps of two stages or more
  // where transposed; some of them give up stages that =3 keeps with the copy.
  int fewer = 0;
  for_each_drawn(20261134, {256, 96, 4, 8, 64, 4000, 5, 1, false}, 3000,
                 [&](const Problem& p, const ExecOptions& o) {
    const auto [two, two_d] = plan_under("CONVT_WG_XP_HFULL", "2", p, o);
    const auto [three, three_d] = plan_under("CONVT_WG_XP_HFULL", "3", p, o);
    if (two_d == three_d) return;
    EXPECT_EQ(p.dtype, DType::kFloat32) << two_d;
    ASSERT_TRUE(two.wg && three.wg) << three_d << " -> " << two_d;
    if (!two.wg_xp) return;  // (a smaller N that fills the machine, as above)
    EXPECT_EQ(two.wg_hb, two.wg_tmax[1]) << two_d;
    EXPECT_GE(two.wg_stages, 2) << two_d;
    if (!three.wg_xp && two.wg_stages < three.wg_stages) ++fewer;
  });
  EXPECT_GE(fewer, 1);
  // =2 (the default): 16-bit types too; a plan it changes against =1 is a 16-bit one that
  // transposed in the kernel with an H-incomplete step and now does so with every H tap.
  int sixteen = 0;
  for_each_drawn(20261133, {256, 96, 4, 8, 64, 4000, 5, 1, false}, 3000,
                 [&](const Problem& p, const ExecOptions& o) {
    const auto [one, one_d] = plan_under("CONVT_WG_XP_HFULL", "1", p, o);
    const auto [two, two_d] = plan_under("CONVT_WG_XP_HFULL", "2", p, o);
    if (one_d == two_d) return;
    EXPECT_EQ(p.dtype, DType::kBFloat16);
    ASSERT_TRUE(one.wg) << one_d << " -> " << two_d;
    if (!two.wg) {
      // (Fewer K steps: the dispatch's rule gives such layers the TMA kernel.)
      EXPECT_NE(two.wg_reason.find(" K steps: the TMA kernel is faster"), std::string::npos)
          << two.wg_reason;
      return;
    }
    if (!two.wg_xp) {
      // (As with float: a smaller N that fills the machine took its place.)
      EXPECT_LT(two.wg_n, one.wg_n) << one_d << " -> " << two_d;
      return;
    }
    EXPECT_TRUE(one.wg_xp) << one_d;
    EXPECT_LT(one.wg_hb, one.wg_tmax[1]) << one_d;
    EXPECT_EQ(two.wg_hb, two.wg_tmax[1]) << two_d;
    EXPECT_LE(two.wg_hbox, 2 * two.wg_rows) << two_d;
    EXPECT_GE(two.wg_bk * 2, 32) << two_d;
    ++sixteen;
  });
  EXPECT_GE(sixteen, 2);
  // kb71 in bfloat16: 32 channels x 1 H tap -> 16 x 3, both transposed in the kernel.
  Problem kb71h = kb71;
  kb71h.dtype = DType::kBFloat16;
  const Problem c71h = kb71h.canonical3d();
  for (const char* v : {"1", "2"}) {
    const ScopedEnv e2("CONVT_WG_XP_HFULL", v);
    const Plan h = convt::cuda::plan_implicit_gemm_fprop(c71h, o);
    EXPECT_TRUE(h.wg_xp) << v;
    EXPECT_EQ(h.wg_hb, v[0] == '2' ? 3 : 1) << v;
    EXPECT_EQ(h.wg_bk, v[0] == '2' ? 16 : 32) << v;
  }
}

// Float32 as TF32 on the wgmma kernel with pair-aligned layouts (CONVT_WG_F32_ALIGNED=R, by
// default 4, 0: off; 0.001: every layer of the class; CONVT_WG_F32_DH_TAPS=T, by default 4,
// 0: without), exactly where the dispatch gives the TMA kernel to an unstrided layer of 17-32
// output channels per group with a reduction under 1024 and an even-wide output, with
// multiply-adds per input element (output channels x taps) at least R times the input
// channels or, in a volume (an output deeper than 1), at least T D x H taps; kb71 and kb78 take the plan of the wgmma kernel asked
// for with CONVT_WG_EVEN=1; strict float32, 16-bit types and every other layer keep their
// plans.
TEST(CudaPlanner, Float32AlignedWgmmaWhereTheMmasPayForTheCopy) {
  using convt::test::make_problem;
  // (Layers near the rule's edges: mostly unstrided, 8-48 output channels, both types.)
  int changed = 0, in_class = 0, by_default = 0;
  for_each_drawn(20261127, {96, 48, 4, 8, 90, 4000, 7, 2, true}, 400,
                 [&](const Problem& p, const ExecOptions& o) {
    const MathMode math = o.math;
    Plan off;
    std::string was;
    {
      const ScopedEnv env("CONVT_WG_F32_ALIGNED", "0");
      off = convt::cuda::plan_implicit_gemm_fprop(p, o);
      was = convt::cuda::describe_plan_without_device(p, o);
    }
    if (!off.usable) return;
    const int64_t cog = p.out_channels_per_group();
    const int64_t taps = p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2];
    const int64_t dh = p.kernel_size[0] * p.kernel_size[1];
    for (double m : {0.001, 1.5, 4.0, 8.0, -1.0, -2.0}) {  // (-1: the default; -2: R 4, no T)
      const bool set = m > 0;
      std::unique_ptr<ScopedEnv> env, no_dh;
      if (set) env = std::make_unique<ScopedEnv>("CONVT_WG_F32_ALIGNED", std::to_string(m).c_str());
      if (m == -2.0) no_dh = std::make_unique<ScopedEnv>("CONVT_WG_F32_DH_TAPS", "0");
      const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p, o);
      ASSERT_TRUE(plan.usable);
      const bool cls = p.dtype == DType::kFloat32 && math == MathMode::kAllowTF32 &&
                       p.stride[0] == 1 && p.stride[1] == 1 && p.stride[2] == 1 && cog > 16 &&
                       cog <= 32 && p.in_channels_per_group() * taps < 1024 &&
                       (double(cog * taps) >= (set ? m : 4.0) * double(p.in_channels_per_group()) ||
                        (m != -2.0 && p.output_size(0) > 1 && dh >= 4)) &&
                       p.output_size(2) % 2 == 0;
      const std::string now = convt::cuda::describe_plan_without_device(p, o);
      // (In the class, the TMA kernel's layers move; those on another kernel stay.)
      if (cls && off.tma) {
        ++in_class;
        EXPECT_TRUE(plan.wg ||
                    plan.wg_reason.find("positions for outputs") != std::string::npos)
            << was << " -> " << now;
      }
      if (now == was) continue;
      ++changed;
      by_default += m == -1.0 ? 1 : 0;
      EXPECT_TRUE(cls) << m << ": " << was << " -> " << now;
      EXPECT_TRUE(plan.wg) << now;
      EXPECT_GT(plan.wg_nc, 0) << now;  // (position-major)
    }
  });
  EXPECT_GT(in_class, 20);
  EXPECT_GT(changed, 10);
  EXPECT_GT(by_default, 2);
  // Volumes taken for their D x H taps alone (17 x 8 and 18 x 4 multiply-adds per input
  // element, under 4 x 71 and 4 x 74): the wgmma kernel by default, the TMA kernel without
  // that term; a plane of 5 H taps under the ratio (20 x 5 < 4 x 67) and a volume of depth 1
  // with 2 x 3 D x H taps keep the TMA kernel.
  {
    ExecOptions o;
    for (const Problem& q :
         {make_problem(3, 8, 71, 17, 1, {64, 4, 64}, {2, 4, 1}, {1, 1, 1}, {1, 0, 0},
                       {0, 0, 0}, {1, 1, 1}, false),
          make_problem(3, 16, 74, 18, 1, {32, 16, 16}, {2, 2, 1}, {1, 1, 1}, {0, 0, 0},
                       {0, 0, 0}, {1, 1, 1}, false)}) {
      Problem dh = q;
      dh.dtype = DType::kFloat32;
      const Problem c = dh.canonical3d();
      SCOPED_TRACE(c.to_string());
      EXPECT_TRUE(convt::cuda::plan_implicit_gemm_fprop(c, o).wg);
      const ScopedEnv env("CONVT_WG_F32_DH_TAPS", "0");
      EXPECT_TRUE(convt::cuda::plan_implicit_gemm_fprop(c, o).tma);
    }
    for (const Problem& q :
         {make_problem(2, 32, 67, 20, 1, {128, 256, 1}, {5, 1, 1}, {1, 1, 1}, {0, 0, 0},
                       {0, 0, 0}, {1, 1, 1}, false),
          make_problem(3, 16, 74, 18, 1, {1, 16, 64}, {3, 2, 1}, {1, 1, 1}, {1, 0, 0},
                       {0, 0, 0}, {1, 1, 1}, false)}) {
      Problem plane = q;
      plane.dtype = DType::kFloat32;
      const Problem c = plane.canonical3d();
      SCOPED_TRACE(c.to_string());
      EXPECT_TRUE(convt::cuda::plan_implicit_gemm_fprop(c, o).tma);
    }
  }
  Problem kb71 = make_problem(2, 8, 32, 32, 1, {512, 1024, 1}, {3, 3, 1}, {1, 1, 1},
                              {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  Problem kb78 = make_problem(2, 8, 32, 32, 1, {512, 1024, 1}, {3, 7, 1}, {1, 1, 1},
                              {1, 3, 0}, {0, 0, 0}, {1, 1, 1}, false);
  for (Problem q : {kb71, kb78}) {
    q.dtype = DType::kFloat32;
    const Problem c = q.canonical3d();
    SCOPED_TRACE(q.to_string());
    ExecOptions o;
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, o);
    const std::string dflt_what = convt::cuda::describe_plan_without_device(c, o);
    {
      const ScopedEnv env("CONVT_WG_F32_ALIGNED", "0");
      EXPECT_TRUE(convt::cuda::plan_implicit_gemm_fprop(c, o).tma);
    }
    {
      const ScopedEnv env("CONVT_WG_EVEN", "0");  // (no aligned layouts: not this rule)
      EXPECT_TRUE(convt::cuda::plan_implicit_gemm_fprop(c, o).tma);
    }
    std::string forced_what;
    {
      const ScopedEnv env("CONVT_WG_EVEN", "1");
      ExecOptions f;
      f.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
      forced_what = convt::cuda::describe_plan_without_device(c, f);
    }
    EXPECT_TRUE(dflt.wg) << dflt_what;
    EXPECT_EQ(dflt.wg_rows, 2);
    EXPECT_EQ(dflt.wg_wv, 114);
    EXPECT_EQ(dflt_what, forced_what);
  }
}

// Tiles of more rows where an H-complete K step transposed in the kernel then runs
// (CONVT_WG_XP_ROWS, on by default, 0: the widest tiles): a plan it changes takes at least
// (H taps - 1) x the H tap offset rows, every H tap a K step and the transposition, which
// the widest tile's plan did not; kb57 takes 4 rows x 54 columns for 1 x 206.
TEST(CudaPlanner, TilesOfMoreRowsForHCompleteSteps) {
  // (The transposition planned whatever the input's alignment, for more plans to check.)
  const ScopedEnv unaligned("CONVT_WG_XP_UNALIGNED", "1");
  int changed = 0;
  for_each_drawn(20261135, {128, 128, 4, 16, 700, 4000, 5, 2, true}, 3000,
                 [&](const Problem& p, const ExecOptions& o) {
    const auto [rows, rows_d] = plan_under("CONVT_WG_XP_ROWS", "1", p, o);
    const auto [wide, wide_d] = plan_under("CONVT_WG_XP_ROWS", "0", p, o);
    EXPECT_EQ(rows_d, convt::cuda::describe_plan_without_device(p, o));
    if (rows_d == wide_d) return;
    ++changed;
    ASSERT_TRUE(wide.wg) << wide_d << " -> " << rows_d;
    if (!rows.wg) {
      // (Fewer K steps: the dispatch's rule gives such layers the TMA kernel.)
      EXPECT_NE(rows.wg_reason.find(" K steps: the TMA kernel is faster"), std::string::npos)
          << rows.wg_reason;
      return;
    }
    EXPECT_TRUE(rows.wg_xp) << rows_d;
    EXPECT_EQ(rows.wg_hb, rows.wg_tmax[1]) << rows_d;
    EXPECT_EQ(rows.wg_tmax[0], 1);
    const int64_t doff_h = p.dilation[1] / std::gcd(p.stride[1], p.dilation[1]);
    const int64_t need = (rows.wg_tmax[1] - 1) * doff_h;
    EXPECT_GE(rows.wg_rows, need) << rows_d;
    EXPECT_LT(wide.wg_rows, need) << wide_d;
    EXPECT_FALSE(wide.wg_xp && wide.wg_hb >= wide.wg_tmax[1]) << wide_d;
  });
  EXPECT_GE(changed, 5);
  Problem kb57 = convt::test::make_problem(2, 8, 64, 64, 1, {1024, 1024, 1}, {3, 3, 1},
                                           {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    kb57.dtype = dtype;
    const Problem c = kb57.canonical3d();
    const ExecOptions o;
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, o);
    EXPECT_TRUE(dflt.wg_xp);
    EXPECT_EQ(dflt.wg_rows, 4);
    EXPECT_EQ(dflt.wg_wv, 54);
    EXPECT_EQ(dflt.wg_hb, 3);
    const auto [wide, wide_d] = plan_under("CONVT_WG_XP_ROWS", "0", c, o);
    EXPECT_EQ(wide.wg_rows, 1) << wide_d;
    EXPECT_EQ(wide.wg_wv, 206) << wide_d;
    EXPECT_EQ(wide.wg_hb, 1) << wide_d;
  }
}

// Scattered W taps on rows longer than the segments the layout scans fit: a 1-D layer of
// 13403 columns at stride 3 leaves the wgmma kernel without segments (CONVT_WG_SC_SEGS=0:
// "the W taps' input window leaves no tile") and scatters with them, in segments whose
// s x wv output columns fit the default staging area (=1) or one grown up to twice it (=2,
// the default).
TEST(CudaPlanner, ScatteredTapsInSegmentsOfLongRows) {
  constexpr int kDefaultStaging = 18432;  // (the wgmma kernel's staging area, wg::kEpiBytes)
  // (72 input channels: a reduction per column of 64 or more, where the planner scatters.)
  Problem p = convt::test::make_problem(1, 2, 72, 8, 1, {13403, 1, 1}, {4, 1, 1}, {3, 1, 1},
                                        {1, 0, 0}, {1, 0, 0}, {1, 1, 1}, true);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    p.dtype = dtype;
    const Problem c = p.canonical3d();
    ExecOptions o;
    o.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const ScopedEnv fill("CONVT_WG_FILL", "0");
    const auto [without, without_d] = plan_under("CONVT_WG_SC_SEGS", "0", c, o);
    EXPECT_FALSE(without.wg) << without_d;
    EXPECT_NE(without.wg_reason.find("the W taps' input window leaves no tile"),
              std::string::npos)
        << without.wg_reason;
    const auto [with, with_d] = plan_under("CONVT_WG_SC_SEGS", "1", c, o);
    ASSERT_TRUE(with.wg) << with.wg_reason;
    EXPECT_TRUE(with.wg_scatter) << with_d;
    // (The staging area's output columns for 8 channels: ((wg::kEpiBytes / 4 - 128) / 8 - 4)
    // rounded down to 32, 544.)
    EXPECT_LE(3 * with.wg_wv, 544) << with_d;
    EXPECT_EQ(with.wg_epi_bytes, kDefaultStaging) << with_d;
    // (=2: an area of up to twice the default, 1120 output columns, taken from the stages:
    // here segments of a whole 256-position tile, 253 columns and their 3 of halo.)
    const auto [grown, grown_d] = plan_under("CONVT_WG_SC_SEGS", "2", c, o);
    EXPECT_EQ(grown_d, convt::cuda::describe_plan_without_device(c, o));  // (the default)
    ASSERT_TRUE(grown.wg) << grown.wg_reason;
    EXPECT_TRUE(grown.wg_scatter) << grown_d;
    EXPECT_GT(3 * grown.wg_wv, 544) << grown_d;
    EXPECT_LE(3 * grown.wg_wv, 1120) << grown_d;
    EXPECT_GT(grown.wg_epi_bytes, kDefaultStaging) << grown_d;
    EXPECT_LE(grown.wg_epi_bytes, 2 * kDefaultStaging) << grown_d;
    EXPECT_GT(grown.wg_used, with.wg_used) << grown_d;
  }
}

// Strided 1-D layers in float32 as TF32 on the wgmma kernel where output channels per group
// x W taps are at least 2.5 times the input channels per group (CONVT_WG_F32_1D=0 leaves
// them to the reduction rules): 206 -> 288 channels in 2 groups, kernel 7, stride 2
// (scripts/suites/dispatch_audit_wide.json, f97; reduction 360 per phase). Not at 1.15
// times (f114), nor at 2 (HiFi-GAN's 128 -> 64, kernel 4, stride 2, faster on the TMA
// kernel), nor without a stride (f176), nor in strict float32 or bfloat16.
TEST(CudaPlanner, StridedRowsInFloat32OnTheWgmmaKernel) {
  Problem wide = convt::test::make_problem(1, 16, 206, 288, 2, {5190, 1, 1}, {7, 1, 1},
                                           {2, 1, 1}, {6, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
  Problem shallow = convt::test::make_problem(1, 64, 426, 164, 2, {2216, 1, 1}, {3, 1, 1},
                                              {2, 1, 1}, {1, 0, 0}, {0, 0, 0}, {2, 1, 1}, true);
  Problem unstrided = convt::test::make_problem(1, 64, 89, 43, 1, {22928, 1, 1}, {3, 1, 1},
                                                {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {2, 1, 1}, true);
  Problem hifigan = convt::test::make_problem(1, 16, 128, 64, 1, {2048, 1, 1}, {4, 1, 1},
                                              {2, 1, 1}, {1, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
  ExecOptions o;
  {
    const Problem c = wide.canonical3d();
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, o);
    EXPECT_TRUE(dflt.wg) << dflt.describe();
    const auto [off, off_d] = plan_under("CONVT_WG_F32_1D", "0", c, o);
    EXPECT_FALSE(off.wg) << off_d;
    EXPECT_TRUE(off.tma) << off_d;
    EXPECT_NE(off.wg_reason.find("output channels per group: the TMA kernel is faster"),
              std::string::npos)
        << off.wg_reason;
    // (A higher bound leaves it too: 288 / 2 x 7 = 1008 < 5 x 103.)
    EXPECT_FALSE(plan_under("CONVT_WG_F32_1D", "10", c, o).plan.wg);
  }
  for (const Problem* pp : {&shallow, &unstrided, &hifigan}) {
    const Problem c = pp->canonical3d();
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, o);
    EXPECT_FALSE(dflt.wg) << dflt.describe();
    EXPECT_EQ(plan_under("CONVT_WG_F32_1D", "0", c, o).text,
              convt::cuda::describe_plan_without_device(c, o));
  }
  ExecOptions strict;
  strict.math = MathMode::kStrictFP32;
  const Problem cw = wide.canonical3d();
  EXPECT_EQ(plan_under("CONVT_WG_F32_1D", "0", cw, strict).text,
            convt::cuda::describe_plan_without_device(cw, strict));
  wide.dtype = DType::kBFloat16;
  const Problem cb = wide.canonical3d();
  EXPECT_EQ(plan_under("CONVT_WG_F32_1D", "0", cb, o).text,
            convt::cuda::describe_plan_without_device(cb, o));
}

// Volumes of sparse tiles stay on the wgmma kernel (CONVT_WG_VOLUME_USED=0 restores the
// rules of planes): a 3-D layer of 3 x 19 outputs a plane, stacked 4 planes a tile (88%
// used, 29% for one plane), and one of 25% used (scripts/suites/dispatch_audit_any.json,
// f03 and f42). Strict float32 keeps the rules of planes. A layer of 2% used stays off it.
TEST(CudaPlanner, SparseVolumesOnTheWgmmaKernel) {
  Problem stacked = convt::test::make_problem(3, 128, 103, 29, 1, {67, 3, 19}, {5, 3, 3},
                                              {1, 3, 1}, {0, 0, 1}, {0, 0, 0}, {1, 1, 1}, true);
  Problem sparse = convt::test::make_problem(3, 128, 71, 30, 1, {41, 19, 3}, {3, 4, 5},
                                             {2, 1, 3}, {1, 0, 2}, {0, 0, 0}, {1, 1, 1}, true);
  for (Problem* pp : {&stacked, &sparse})
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      pp->dtype = dtype;
      const Problem c = pp->canonical3d();
      ExecOptions o;
      const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, o);
      EXPECT_TRUE(dflt.wg) << dflt.describe();
      EXPECT_GE(dflt.wg_used, 0.18) << dflt.describe();
      const auto [old, old_d] = plan_under("CONVT_WG_VOLUME_USED", "0", c, o);
      if (pp == &sparse || dtype == DType::kFloat32) {
        EXPECT_FALSE(old.wg) << old_d;
        EXPECT_NE(old.wg_reason.find("% of its positions for outputs"), std::string::npos)
            << old.wg_reason;
      }
      if (dtype == DType::kFloat32) {
        o.math = MathMode::kStrictFP32;
        EXPECT_EQ(convt::cuda::describe_plan_without_device(c, o),
                  plan_under("CONVT_WG_VOLUME_USED", "0", c, o).text);
      }
    }
  // 2% of its positions in float32 (volume_sparse_fuzz.json, s4900_f328: 1.6 x 3 outputs
  // a phase plane), 5x slower on the wgmma kernel.
  Problem few = convt::test::make_problem(3, 64, 282, 330, 2, {12, 2, 8}, {4, 4, 5}, {2, 2, 1},
                                          {0, 1, 7}, {0, 0, 1}, {1, 1, 2}, true);
  const Problem cf = few.canonical3d();
  const Plan pf = convt::cuda::plan_implicit_gemm_fprop(cf, ExecOptions{});
  ExecOptions forced;
  forced.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
  const Plan ff = convt::cuda::plan_implicit_gemm_fprop(cf, forced);
  const std::string ff_d = ff.describe();
  ASSERT_TRUE(ff.wg) << ff_d;
  EXPECT_LT(ff.wg_used, 0.18) << ff_d;
  EXPECT_FALSE(pf.wg) << pf.describe();
  EXPECT_NE(pf.wg_reason.find("% of its positions for outputs"), std::string::npos)
      << pf.wg_reason;
}

// The W phase pairs transposed in the kernel taken over scattered W taps on the copy where
// the pairs' boxes hold at most 4x the input's bytes (CONVT_WG_SC_XP: =0 never, =1 whatever
// the boxes): a bfloat16 1-D layer of 114 -> 13 channels, kernel 2, stride 2
// (scripts/suites/sc_segs_fuzz.json), and a 3-D layer of 5 x 5 taps a phase
// (scripts/suites/sc_xp_fuzz.json, s4891_f683). The float32 plan (the pairs there read the
// copy too) stays.
TEST(CudaPlanner, PairsTransposedInTheKernelOverScatteredTapsWhereTheirBoxesAreFew) {
  // A 1-D layer (boxes about twice the input): the pairs by default, the scattered taps
  // under CONVT_WG_SC_XP=0. No float32 plan changes.
  Problem p = convt::test::make_problem(1, 8, 114, 13, 1, {131072, 1, 1}, {2, 1, 1}, {2, 1, 1},
                                        {1, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
  ExecOptions o;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    p.dtype = dtype;
    const Problem c = p.canonical3d();
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, o);
    EXPECT_TRUE(dflt.wg && dflt.wg_wpairs && dflt.wg_xp && !dflt.wg_scatter) << dflt.describe();
    const auto [off, off_d] = plan_under("CONVT_WG_SC_XP", "0", c, o);
    EXPECT_TRUE(off.wg && off.wg_scatter && !off.wg_xp) << off_d;
  }
  p.dtype = DType::kFloat32;
  {
    const Problem c = p.canonical3d();
    EXPECT_EQ(plan_under("CONVT_WG_SC_XP", "0", c, o).text,
              convt::cuda::describe_plan_without_device(c, o));
  }
  // A 3-D layer of many H taps (the pairs' boxes 36x the input): the scattered taps by
  // default, the pairs under CONVT_WG_SC_XP=1.
  Problem v = convt::test::make_problem(3, 128, 164, 2, 2, {19, 28, 96}, {3, 5, 5}, {2, 1, 2},
                                        {0, 0, 3}, {0, 0, 0}, {1, 1, 1}, true);
  v.dtype = DType::kBFloat16;
  const Problem cv = v.canonical3d();
  const Plan vd = convt::cuda::plan_implicit_gemm_fprop(cv, o);
  EXPECT_TRUE(vd.wg && vd.wg_scatter && !vd.wg_xp) << vd.describe();
  const auto [vx, vx_d] = plan_under("CONVT_WG_SC_XP", "1", cv, o);
  EXPECT_TRUE(vx.wg && vx.wg_wpairs && vx.wg_xp && !vx.wg_scatter) << vx_d;
  // Over a grid of narrow W-stride-2 layers: every plan the default takes over the
  // scattered taps is of W phase pairs transposed in the kernel whose boxes hold at most 4x
  // the input's bytes, and some scattered plans stay.
  int changed = 0, kept = 0;
  for (int dims : {1, 2, 3})
    for (int64_t cin : {66, 114})
      for (int64_t cout : {3, 9, 14})
        for (int64_t k : {2, 3, 5}) {
          const Dims in = dims == 1   ? Dims{20000, 1, 1}
                          : dims == 2 ? Dims{64, 160, 1}
                                      : Dims{12, 20, 48};
          const Dims kk = dims == 1 ? Dims{k, 1, 1} : dims == 2 ? Dims{k, k, 1} : Dims{k, k, k};
          const Dims st = dims == 1 ? Dims{2, 1, 1} : dims == 2 ? Dims{2, 2, 1} : Dims{1, 2, 2};
          Problem q = convt::test::make_problem(dims, 16, cin, cout, 1, in, kk, st, {0, 0, 0},
                                                {0, 0, 0}, {1, 1, 1}, false);
          q.dtype = DType::kBFloat16;
          const Problem cq = q.canonical3d();
          const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(cq, o);
          const std::string before = convt::cuda::describe_plan_without_device(cq, o);
          const auto [sc, sc_d] = plan_under("CONVT_WG_SC_XP", "0", cq, o);
          if (sc_d == before) {
            kept += sc.wg && sc.wg_scatter;
            continue;
          }
          ++changed;
          ASSERT_TRUE(dflt.wg && sc.wg) << before << " -> " << sc_d;
          EXPECT_TRUE(dflt.wg_wpairs && dflt.wg_xp && !dflt.wg_scatter) << before;
          EXPECT_TRUE(sc.wg_scatter && !sc.wg_xp) << sc_d;
          const double boxes = double(dflt.wg_tiles) * dflt.wg_steps * dflt.wg_box_bytes;
          EXPECT_LE(boxes, 4.0 * double(cq.input_numel()) * 2.0) << before;
        }
  EXPECT_GE(changed, 1);
  EXPECT_GE(kept, 1);
}

// The transposition in the kernel over pair-aligned layouts (CONVT_WG_XP_OVER_EVEN=1,
// opt-in): a plan it changes copied its input on an aligned layout and transposes it in the
// kernel on another; kb70 in bfloat16 5 rows x 49 in place of 11 x 20.
TEST(CudaPlanner, XpOverPairAlignedLayoutsWhereAsked) {
  int changed = 0;
  for_each_fuzzed_plan_pair("CONVT_WG_XP_OVER_EVEN", "1",
                            [&](const Problem&, const Plan& dflt, const std::string& before,
                                const Plan& xe, const std::string& xe_d) {
    if (xe_d == before) return;
    ++changed;
    ASSERT_TRUE(dflt.wg && xe.wg) << before << " -> " << xe_d;
    EXPECT_FALSE(dflt.wg_xp) << before;
    EXPECT_TRUE(xe.wg_xp) << xe_d;
  });
  EXPECT_GE(changed, 1);
  Problem kb70 = convt::test::make_problem(3, 8, 48, 24, 1, {96, 96, 96}, {3, 3, 3}, {1, 1, 1},
                                           {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  kb70.dtype = DType::kBFloat16;
  const Problem c = kb70.canonical3d();
  const ExecOptions o;
  const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, o);
  EXPECT_FALSE(dflt.wg_xp);
  EXPECT_EQ(dflt.wg_rows, 11);
  const auto [xe, xe_d] = plan_under("CONVT_WG_XP_OVER_EVEN", "1", c, o);
  EXPECT_TRUE(xe.wg_xp) << xe_d;
  EXPECT_EQ(xe.wg_rows, 5) << xe_d;
  EXPECT_EQ(xe.wg_wv, 49) << xe_d;
}

// The transposition in the kernel planned only where a contiguous input is read in place
// (rows, planes and channels 16-byte aligned), as it runs: elsewhere the copy's plan.
// CONVT_WG_XP_UNALIGNED=1 plans it whatever the alignment (then copied with its K step);
// the plans it changes are of unaligned inputs, which it gives the transposition.
TEST(CudaPlanner, XpOnlyWhereTheInputIsReadInPlace) {
  int changed = 0;
  for_each_fuzzed_plan_pair("CONVT_WG_XP_UNALIGNED", "1",
                            [&](const Problem& p, const Plan& dflt, const std::string& before,
                                const Plan& old, const std::string& old_d) {
    const TensorRef x(reinterpret_cast<void*>(std::uintptr_t(256)), p.dtype, Device::cuda(0),
                      {p.batch, p.in_channels, p.input_size[0], p.input_size[1],
                       p.input_size[2]});
    const bool in_place = convt::cuda::wgmma_input_in_place(p, x);
    if (dflt.usable && dflt.wg && dflt.wg_xp) EXPECT_TRUE(in_place) << p.to_string();
    if (old_d == before && old.wg_xp == dflt.wg_xp) return;
    ++changed;
    EXPECT_FALSE(in_place) << p.to_string();
    EXPECT_TRUE(old.wg_xp) << old_d;
  });
  EXPECT_GE(changed, 3);
  // kb78 in float32 with rows of 1022 floats (4088 bytes): the copy's 16 channels x 1 H tap.
  Problem p = convt::test::make_problem(2, 8, 32, 32, 1, {512, 1022, 1}, {3, 7, 1}, {1, 1, 1},
                                        {1, 3, 0}, {0, 0, 0}, {1, 1, 1}, false);
  p.dtype = DType::kFloat32;
  const Problem c = p.canonical3d();
  const ExecOptions o;
  const Plan copy = convt::cuda::plan_implicit_gemm_fprop(c, o);
  EXPECT_FALSE(copy.wg_xp);
  EXPECT_EQ(copy.wg_hb, 1);
  const auto [xp, xp_d] = plan_under("CONVT_WG_XP_UNALIGNED", "1", c, o);
  EXPECT_TRUE(xp.wg_xp) << xp_d;
  EXPECT_EQ(xp.wg_hb, 3) << xp_d;
}

// The transposition's pieces loaded ahead of the stages by default, on exactly the plans that
// transpose in the kernel; CONVT_WG_XP_EARLY=0 turns it off and changes nothing else.
TEST(CudaPlanner, TranspositionPiecesAheadByDefault) {
  // (The transposition planned whatever the input's alignment, for more plans to check:
  // the fuzzed sizes are mostly not 16-byte aligned; see XpOnlyWhereTheInputIsReadInPlace.)
  const ScopedEnv unaligned("CONVT_WG_XP_UNALIGNED", "1");
  int early = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode math,
                                                             const Plan& dflt) {
    if (!dflt.usable || !dflt.wg) return;
    EXPECT_EQ(dflt.wg_xp_early, dflt.wg_xp);
    early += dflt.wg_xp_early ? 1 : 0;
    const ScopedEnv after("CONVT_WG_XP_EARLY", "0");
    ExecOptions o;
    o.math = math;
    o.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p, o);
    ASSERT_TRUE(plan.usable && plan.wg);
    EXPECT_FALSE(plan.wg_xp_early);
    EXPECT_EQ(plan.wg_xp, dflt.wg_xp);
    EXPECT_EQ(plan.wg_xp_pieces, dflt.wg_xp_pieces);
    EXPECT_EQ(plan.wg_stages, dflt.wg_stages);
    EXPECT_EQ(plan.wg_n, dflt.wg_n);
  });
  EXPECT_GT(early, 20);
}

// W phase pairs in registers: by default only in 16-bit types with a W stride of 2,
// position-major tiles of 8 to 32 channels, unfolded and unscattered, not with zeros
// inserted; CONVT_WG_WMERGE=0 turns them off.
TEST(CudaPlanner, PairedWPhasesRunStride2) {
  // Position-major tiles (8 to 32 channels) in 16-bit types take the pairs by default;
  // channel-major ones (64 channels x 128 positions a phase) in every type where the
  // reduction per phase is at most 256 (CONVT_WG_CMPAIRS=1: wherever they can run, =0:
  // nowhere); never with split TF32, two consumer warpgroups, split K or the transposition
  // in the kernel of a channel-major tile.
  auto check = [](int cm_env, int* pos, int* cm, int* cm_f32) {
    for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem& given, MathMode math,
                                                  const Plan& plan) {
      if (!plan.usable || !plan.wg || !plan.wg_wpairs) return;
      // (The problem the kernel runs: its groups merged where the plan merges them.)
      const Problem p = convt::cuda::wgmma_problem(plan, given);
      EXPECT_EQ(p.stride[2], 2);
      EXPECT_NE(math, MathMode::kStrictFP32);
      EXPECT_EQ(plan.wg_fold, 1);
      EXPECT_FALSE(plan.wg_scatter);
      EXPECT_FALSE(plan.wg_wmerge);
      EXPECT_EQ(plan.wg_wup, 1);
      EXPECT_EQ(plan.wg_splits, 1);
      EXPECT_EQ(plan.wg_stack, 1);
      EXPECT_LE(plan.wg_rows * plan.wg_wbox, plan.wg_n);
      EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
      if (plan.wg_nc > 0) {
        ++*pos;
        EXPECT_LE(plan.wg_nc, 32);
        EXPECT_LE(p.out_channels_per_group(), 32);
        // (Float32: where every W phase has one tap.)
        if (p.dtype == DType::kFloat32) EXPECT_TRUE(every_w_phase_has_one_tap(p));
        EXPECT_EQ(plan.wg_n, 256);
      } else {
        ++*cm;
        if (p.dtype == DType::kFloat32) ++*cm_f32;
        EXPECT_NE(cm_env, 0);
        const double k_phase = double(p.in_channels_per_group()) *
                               double(p.kernel_size[0] * p.kernel_size[1] * p.kernel_size[2]) /
                               double(p.stride[0] * p.stride[1] * p.stride[2]);
        if (cm_env != 1) EXPECT_LE(k_phase, 256) << p.to_string();
        EXPECT_GT(p.out_channels_per_group(), 32);
        EXPECT_EQ(plan.wg_n, 128);
        EXPECT_FALSE(plan.wg_coop);
        EXPECT_FALSE(plan.wg_xp);
      }
    });
  };
  int pos = 0, cm = 0, cm_f32 = 0;
  check(-1, &pos, &cm, &cm_f32);
  EXPECT_GT(pos, 2);
  EXPECT_GT(cm, 2);
  // Mask R-CNN's mask head (256 -> 256, kernel 2, stride 2, 14 x 14, 100 regions; 256 per
  // phase) takes them in float32 as TF32 and in bfloat16, U-Net's 1024 -> 512 (1024 per
  // phase) keeps its tiles of two consumer warpgroups.
  ExecOptions opt;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    Problem mask = convt::test::make_problem(2, 100, 256, 256, 1, {14, 14, 1}, {2, 2, 1},
                                             {2, 2, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
    mask.dtype = dt;
    const Plan m = convt::cuda::plan_implicit_gemm_fprop(mask.canonical3d(), opt);
    EXPECT_TRUE(m.wg && m.wg_wpairs && m.wg_nc == 0) << m.describe();
    Problem unet = convt::test::make_problem(2, 4, 1024, 512, 1, {32, 32, 1}, {2, 2, 1},
                                             {2, 2, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
    unet.dtype = dt;
    const Plan u = convt::cuda::plan_implicit_gemm_fprop(unet.canonical3d(), opt);
    EXPECT_TRUE(u.wg && !u.wg_wpairs && u.wg_coop) << u.describe();
  }
  setenv("CONVT_WG_CMPAIRS", "1", 1);
  int pos1 = 0, cm1 = 0, cm1_f32 = 0;
  check(1, &pos1, &cm1, &cm1_f32);
  EXPECT_EQ(pos1, pos);
  EXPECT_GT(cm1, cm);
  setenv("CONVT_WG_CMPAIRS", "0", 1);
  int pos0 = 0, cm0 = 0, cm0_f32 = 0;
  check(0, &pos0, &cm0, &cm0_f32);
  EXPECT_EQ(pos0, pos);
  EXPECT_EQ(cm0, 0);
  unsetenv("CONVT_WG_CMPAIRS");
  setenv("CONVT_WG_WMERGE", "0", 1);
  for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem&, MathMode, const Plan& plan) {
    EXPECT_FALSE(plan.wg_wpairs);
  });
  unsetenv("CONVT_WG_WMERGE");
}

TEST(CudaPlanner, InputReadInPlaceStaysWithinItsStage) {
  int plans = 0, tf32_plans = 0, conflict_free = 0;
  setenv("CONVT_WG_RAW", "1", 1);
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p, MathMode math,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    const bool tf32 = p.dtype == DType::kFloat32 && math == MathMode::kAllowTF32;
    if (!tf32 || plan.wg_wup > 1) {
      EXPECT_FALSE(plan.wg_raw);
      return;
    }
    ++tf32_plans;
    if (!plan.wg_raw) return;  // (W halos too wide for the tile, or no two stages)
    ++plans;
    const int64_t cog = p.out_channels_per_group();
    int64_t nc = 64;
    for (int64_t c : {8, 16, 24, 32, 48, 64})
      if (cog <= c) {
        nc = c;
        break;
      }
    EXPECT_EQ(plan.wg_nc, nc);
    EXPECT_EQ(plan.wg_cw, nc);
    EXPECT_EQ(plan.wg_n, nc > 32 ? 128 : 256);
    // (MMA K steps per K step: 2 or 4, the kernel's batches.)
    EXPECT_TRUE(plan.wg_bk == 32 || plan.wg_bk == 16) << plan.wg_bk;
    const WTaps w = brute_force_w_taps(p.stride[2], p.padding[2], p.dilation[2],
                                       p.kernel_size[2]);
    const WTaps h = brute_force_w_taps(p.stride[1], p.padding[1], p.dilation[1],
                                       p.kernel_size[1]);
    const int64_t halo_w = (w.max_count - 1) * w.doff;
    EXPECT_EQ(plan.wg_wbox % 4, 0);
    EXPECT_LE(plan.wg_wbox, 256);
    EXPECT_GE(plan.wg_wbox, plan.wg_wv + halo_w + 3);
    EXPECT_LE(plan.wg_rows * plan.wg_wbox, plan.wg_n);
    EXPECT_EQ(plan.wg_hbox, plan.wg_rows + (plan.wg_hb - 1) * h.doff);
    const int64_t plane = int64_t(plan.wg_hbox) * plan.wg_wbox;  // floats
    EXPECT_EQ(plan.wg_box_bytes, plane * plan.wg_bk * 4);
    const int64_t max_shift = (plan.wg_hb - 1) * h.doff * plan.wg_wbox + halo_w;
    const int64_t last_read = (plan.wg_bk - 1) * plane + (plan.wg_n - 1) + 3 + max_shift;
    EXPECT_LE((last_read + 1) * 4, plan.wg_w_off);
    EXPECT_EQ(plan.wg_w_off % 128, 0);
    const int64_t wtiles = int64_t(plan.wg_hb) * plan.wg_tmax[2] * nc * plan.wg_bk * 4;
    EXPECT_GE(plan.wg_stage_bytes, plan.wg_w_off + wtiles);
    EXPECT_EQ(plan.wg_stage_bytes % 1024, 0);
    EXPECT_GE(plan.wg_stages, 2);
    EXPECT_LE(convt::cuda::wgmma_shared_bytes(plan), convt::cuda::wgmma_max_shared_bytes(plan));
    if (plane % 32 == 8 || plane % 32 == 24) ++conflict_free;
    // Room for the padded copy of an input a tensor map cannot read.
    const int64_t padded = p.batch * p.in_channels * p.input_size[0] * p.input_size[1] *
                           ((p.input_size[2] + 3) / 4 * 4) * 4;
    EXPECT_GE(int64_t(plan.wg_counter_offset) - int64_t(plan.wg_xt_offset), padded);
  });
  setenv("CONVT_WG_RAW", "0", 1);
  for_each_fuzzed_plan(ForwardKernel::kAuto, [&](const Problem&, MathMode, const Plan& plan) {
    EXPECT_FALSE(plan.wg_raw);
  });
  unsetenv("CONVT_WG_RAW");
  EXPECT_GT(plans, 50);
  EXPECT_GT(plans * 10, tf32_plans * 7) << plans << " of " << tf32_plans;
  EXPECT_GT(conflict_free * 2, plans);
}

// Weight tiles resident in the stages: where a tile's K steps (the widest phase's D taps x
// H blocks x channel blocks, x the W phases of a merged tile) are no more than the stages
// chosen for the K step (CONVT_WG_STAGE_ALIGN=0 plans), the default plan takes the fewest
// stages (at least two) that are a multiple of them and marks the weight tiles resident;
// =max takes the most. Tile, K step, stage layout and input path (the input transposed in
// the kernel too, with its ring) stay, and so do the stages of every other plan.
TEST(CudaPlanner, WeightTilesResidentWhereTheKStepsFitTheStages) {
  auto plans_with = [](const char* align) {
    setenv("CONVT_WG_STAGE_ALIGN", align, 1);
    std::vector<std::pair<Problem, Plan>> v;
    for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma,
                         [&](const Problem& p, MathMode, const Plan& plan) {
                           v.emplace_back(p, plan);
                         });
    return v;
  };
  const auto before = plans_with("0");
  const auto most = plans_with("max");
  unsetenv("CONVT_WG_STAGE_ALIGN");
  std::vector<std::pair<Problem, Plan>> plans;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma,
                       [&](const Problem& p, MathMode, const Plan& plan) {
                         plans.emplace_back(p, plan);
                       });
  ASSERT_EQ(plans.size(), before.size());
  ASSERT_EQ(plans.size(), most.size());
  int resident = 0, fewer = 0, xp_resident = 0, kept = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Problem& p = plans[i].first;
    const Plan& plan = plans[i].second;
    const Plan& b = before[i].second;
    const Plan& f = most[i].second;
    EXPECT_EQ(plan.usable, b.usable);
    EXPECT_EQ(plan.wg, b.wg);
    if (!plan.usable || !plan.wg) continue;
    SCOPED_TRACE(p.to_string());
    for (const Plan* q : {&plan, &f}) {
      EXPECT_EQ(q->wg_n, b.wg_n);
      EXPECT_EQ(q->wg_nc, b.wg_nc);
      EXPECT_EQ(q->wg_bk, b.wg_bk);
      EXPECT_EQ(q->wg_hb, b.wg_hb);
      EXPECT_EQ(q->wg_stage_bytes, b.wg_stage_bytes);
      EXPECT_EQ(q->wg_xp, b.wg_xp);
      EXPECT_EQ(q->wg_xp_pieces, b.wg_xp_pieces);
      EXPECT_LE(q->wg_stages, b.wg_stages);
      EXPECT_GE(q->wg_stages, 2);
      EXPECT_LE(convt::cuda::wgmma_shared_bytes(*q), convt::cuda::wgmma_max_shared_bytes(*q));
    }
    EXPECT_FALSE(b.wg_w_resident);
    const int64_t steps = int64_t(plan.wg_tmax[0]) *
                          ((plan.wg_tmax[1] + plan.wg_hb - 1) / plan.wg_hb) * plan.wg_cblocks *
                          (plan.wg_wmerge || plan.wg_wpairs ? p.stride[2] : 1);
    EXPECT_EQ(plan.wg_steps, steps);
    if (steps > b.wg_stages) {
      EXPECT_FALSE(plan.wg_w_resident);
      EXPECT_FALSE(f.wg_w_resident);
      EXPECT_EQ(plan.wg_stages, b.wg_stages);
      EXPECT_EQ(f.wg_stages, b.wg_stages);
      ++kept;
      continue;
    }
    EXPECT_TRUE(plan.wg_w_resident);
    EXPECT_TRUE(f.wg_w_resident);
    EXPECT_EQ(plan.wg_stages, std::max<int64_t>(steps, 2)) << steps << " K steps";
    EXPECT_EQ(f.wg_stages % steps, 0) << steps << " K steps";
    EXPECT_GT(f.wg_stages + steps, b.wg_stages) << steps << " K steps";  // the most
    ++resident;
    if (plan.wg_xp) ++xp_resident;
    if (plan.wg_stages < b.wg_stages) ++fewer;
  }
  EXPECT_GT(resident, 50);
  EXPECT_GT(kept, 50);
  EXPECT_GT(fewer, 5);
  EXPECT_GT(xp_resident, 3);
}

// A 16-byte-aligned (never dereferenced) input of p's shape, contiguous (NC...) or
// channels_last.
convt::TensorRef fake_input(const Problem& p, bool channels_last) {
  const int64_t n = p.batch, c = p.in_channels, d = p.input_size[0], h = p.input_size[1],
                w = p.input_size[2];
  void* aligned = reinterpret_cast<void*>(uintptr_t(1) << 20);
  if (channels_last)
    return convt::TensorRef(aligned, p.dtype, convt::Device::cuda(0), {n, c, d, h, w},
                            {d * h * w * c, 1, h * w * c, w * c, c});
  return convt::TensorRef(aligned, p.dtype, convt::Device::cuda(0), {n, c, d, h, w},
                          {c * d * h * w, d * h * w, h * w, w, 1});
}

// A channels_last input is read in place (no copy) only where its layout is the copy's: 16-bit
// elements (float32 needs the copy's TF32 rounding), a 1-D or 2-D problem (the tensor map has
// no dimension to spare for D), no zeros inserted along W, every group's channels a whole
// number of K steps (then a sample's channel blocks, which the kernel indexes as
// groups x channel blocks of a group, are the input's channels / bk), and 16-byte-aligned
// strides and address. Contiguous (NC...) inputs never are.
TEST(CudaPlanner, ChannelsLastInputsReadInPlaceWhereTheLayoutIsTheCopys) {
  int in_place = 0, declined = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p0, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    const Problem p = convt::cuda::wgmma_problem(plan, p0);
    const int64_t n = p.batch, c = p.in_channels, d = p.input_size[0], h = p.input_size[1],
                  w = p.input_size[2];
    const int64_t e = convt::dtype_size(p.dtype);
    const convt::TensorRef cl = fake_input(p, true), nc = fake_input(p, false);
    void* aligned = cl.data;
    const bool sixteen = p.dtype == DType::kBFloat16 || p.dtype == DType::kFloat16;
    const bool expect = sixteen && !plan.split && !plan.wg_raw && plan.wg_wup == 1 && d == 1 &&
                        p.in_channels_per_group() % plan.wg_bk == 0 && (c * e) % 16 == 0 &&
                        (h == 1 || (w * c * e) % 16 == 0) &&
                        (n == 1 || (h * w * c * e) % 16 == 0);
    EXPECT_EQ(convt::cuda::wgmma_channels_last_in_place(plan, p, cl), expect);
    EXPECT_FALSE(convt::cuda::wgmma_channels_last_in_place(plan, p, nc) && (w > 1 || h > 1));
    if (expect) {
      ++in_place;
      EXPECT_EQ(c / plan.wg_bk, p.groups * plan.wg_cblocks);
      // (Not at an address that is not 16-byte aligned.)
      const convt::TensorRef off(static_cast<char*>(aligned) + e, p.dtype, convt::Device::cuda(0),
                                 {n, c, d, h, w}, {d * h * w * c, 1, h * w * c, w * c, c});
      EXPECT_FALSE(convt::cuda::wgmma_channels_last_in_place(plan, p, off));
    } else if (sixteen) {
      ++declined;
    }
  });
  // (The fuzzed sweep holds 13 such plans and more declined ones; the counts guard the
  // sweep itself.)
  EXPECT_GE(in_place, 10);
  EXPECT_GE(declined, 10) << declined;
}

// The copier warps make the copy (wgmma_input_copied_in_kernel) only on plans that take them
// and inputs whose samples' D x H x W positions are contiguous (chunks of them are runs of
// x): contiguous NC... inputs, not channels_last ones (but with one channel), not rows padded
// apart.
TEST(CudaPlanner, CopierWarpsReadOnlyContiguousSamplePlanes) {
  int copied = 0, copied16 = 0;
  for_each_fuzzed_plan(ForwardKernel::kImplicitGemmWgmma, [&](const Problem& p0, MathMode,
                                                             const Plan& plan) {
    if (!plan.usable || !plan.wg) return;
    const Problem p = convt::cuda::wgmma_problem(plan, p0);
    const int64_t n = p.batch, c = p.in_channels, d = p.input_size[0], h = p.input_size[1],
                  w = p.input_size[2];
    const convt::TensorRef nc = fake_input(p, false), cl = fake_input(p, true);
    const convt::TensorRef padded(nc.data, p.dtype, convt::Device::cuda(0), {n, c, d, h, w},
                                  {c * d * h * (w + 4), d * h * (w + 4), h * (w + 4), w + 4, 1});
    const bool fused = plan.wg_copy_fused && plan.wg_wup == 1;
    // (16-bit types by the rule: only where every 8 positions of a channel are one aligned
    // 16-byte load; an input one element off its alignment takes the copy kernel.)
    const bool vec = !plan.wg_copy_vec || (d * h * w) % 8 == 0;
    EXPECT_EQ(convt::cuda::wgmma_input_copied_in_kernel(plan, p, nc), fused && vec);
    EXPECT_EQ(convt::cuda::wgmma_input_copied_in_kernel(plan, p, cl), fused && vec && c == 1);
    EXPECT_EQ(convt::cuda::wgmma_input_copied_in_kernel(plan, p, padded),
              fused && vec && h == 1 && d == 1);
    convt::TensorRef off = nc;
    off.data = static_cast<char*>(nc.data) + convt::dtype_size(p.dtype);
    EXPECT_EQ(convt::cuda::wgmma_input_copied_in_kernel(plan, p, off),
              fused && !plan.wg_copy_vec);
    if (p.dtype != DType::kFloat32) {
      EXPECT_EQ(convt::cuda::wgmma_copier_positions_per_load(plan, p, nc),
                (d * h * w) % 8 == 0 && plan.wg_copy_chunk % 8 == 0 ? 8
                : (d * h * w) % 2 == 0                               ? 2
                                                                      : 1);
      EXPECT_EQ(convt::cuda::wgmma_copier_positions_per_load(plan, p, off), 1);
    } else {
      EXPECT_EQ(convt::cuda::wgmma_copier_positions_per_load(plan, p, nc), 1);
    }
    copied += fused ? 1 : 0;
    copied16 += fused && plan.wg_copy_vec && vec ? 1 : 0;
  });
  EXPECT_GT(copied, 10);
  EXPECT_GT(copied16, 0);
}

// Narrow groups merged (ImplicitGemmFpropPlan::wg_gmerge): groups of fewer than 8 input
// channels (no implicit-GEMM plan of their own: the merged plan runs on the wgmma kernel
// only, wg_only), and in 16-bit types of fewer than 16 (a K step's least). The largest m
// that divides the groups with 8 to 32 input and at most 64 output channels per merged
// group and its MMAs within the machine balance (m times the multiply-adds below 8 input
// channels, else m * cig / 16 times; 240 operations per byte in 16-bit types, 120 in TF32,
// 40 in split TF32), counted here from the problem's sizes; the merged plan runs on the
// wgmma kernel the problem with groups / m (wgmma_problem) and keeps the given problem's
// fields for the other kernels and a workspace for both. Float32 groups of 8 or more,
// 16-bit ones of 16 or more and CONVT_WG_GMERGE=0 keep their groups; CONVT_WG_GMERGE=m asks
// for m wherever it divides the groups.
TEST(CudaPlanner, NarrowGroupsMergedWithinTheMachineBalance) {
  using convt::test::make_problem;
  auto expected_m = [](const Problem& p, bool split) {
    const int64_t cig = p.in_channels / p.groups, cog = p.out_channels / p.groups;
    const bool f32 = p.dtype == DType::kFloat32;
    if (cig >= (f32 ? 8 : 16)) return int64_t(1);
    int64_t in = p.batch * p.in_channels, out = p.batch * p.out_channels, taps = 1;
    for (int d = 0; d < 3; ++d) {
      in *= p.input_size[d];
      out *= (p.input_size[d] - 1) * p.stride[d] - 2 * p.padding[d] +
             p.dilation[d] * (p.kernel_size[d] - 1) + p.output_padding[d] + 1;
      taps *= p.kernel_size[d];
    }
    const double bytes = (f32 ? 4.0 : 2.0) * double(in + out + p.in_channels * cog * taps);
    const double macs = double(in) * double(cog) * double(taps);
    const double balance = !f32 ? 240 : split ? 40 : 120;
    for (int64_t m = std::min<int64_t>(p.groups, 64); m >= 2; --m) {
      const double mmas = cig < 8 ? double(m) : double(m * cig) / 16;
      if (p.groups % m == 0 && m * cig <= 32 && m * cog <= 64 && m * cig >= 8 &&
          2 * macs * mmas <= balance * bytes)
        return m;
    }
    return int64_t(1);
  };
  // kb72, kb75, a 1-D layer of six groups of 8 -> 4, a 2-D layer of 8 -> 8 groups whose
  // multiply-adds allow two (kernel 7 x 7), groups of 16 input channels, and CenterNet's
  // depthwise up-convolution (64 groups of 1 -> 1, kernel 4, stride 2).
  const Problem kb72 = make_problem(3, 8, 32, 32, 4, {12, 24, 48}, {3, 5, 7}, {2, 2, 2},
                                    {1, 2, 3}, {1, 1, 1}, {1, 1, 1}, false);
  const Problem kb75 = make_problem(2, 16, 32, 64, 4, {128, 256, 1}, {3, 5, 1}, {2, 3, 1},
                                    {1, 2, 0}, {0, 0, 0}, {2, 1, 1}, false);
  const Problem six = make_problem(1, 4, 48, 24, 6, {4096, 1, 1}, {5, 1, 1}, {1, 1, 1},
                                   {2, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
  const Problem dense = make_problem(2, 8, 64, 64, 8, {256, 256, 1}, {7, 7, 1}, {1, 1, 1},
                                     {3, 3, 0}, {0, 0, 0}, {1, 1, 1}, false);
  const Problem wide = make_problem(2, 4, 64, 128, 4, {64, 64, 1}, {3, 3, 1}, {2, 2, 1},
                                    {1, 1, 0}, {1, 1, 0}, {1, 1, 1}, true);
  const Problem dw = make_problem(2, 16, 64, 64, 64, {64, 64, 1}, {4, 4, 1}, {2, 2, 1},
                                  {1, 1, 0}, {0, 0, 0}, {1, 1, 1}, false);
  // Eight groups of 8 -> 4 (k4 s2): four merged would scatter their W taps, two do not.
  const Problem narrow = make_problem(2, 8, 64, 32, 8, {64, 64, 1}, {4, 4, 1}, {2, 2, 1},
                                      {1, 1, 0}, {0, 0, 0}, {1, 1, 1}, true);
  // 1-D depthwise layers keep the direct kernel: of stride 4 (kernel 8), whose merged plan
  // would store each W phase on its own, every 4th element of a row, and of stride 2
  // (kernel 4), whose merged plan stores whole rows (zeros inserted along W).
  const Problem dw1d = make_problem(1, 8, 128, 128, 128, {4096, 1, 1}, {8, 1, 1},
                                    {4, 1, 1}, {2, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  const Problem dw1d_s2 = make_problem(1, 8, 256, 256, 256, {8192, 1, 1}, {4, 1, 1},
                                       {2, 1, 1}, {1, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  int merged = 0, wg_only = 0;
  // (Groups of fewer than 8 input channels: merged by default.)
  unsetenv("CONVT_WG_GMERGE_SMALL");
  for (const bool strict : {false, true}) {
    for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      if (strict && t != DType::kFloat32) continue;
      ExecOptions opt;
      if (strict) opt.math = MathMode::kStrictFP32;
      for (Problem p : {kb72, kb75, six, dense, wide, dw, narrow, dw1d, dw1d_s2}) {
        p.dtype = t;
        p = p.canonical3d();
        SCOPED_TRACE(p.to_string() + (strict ? " strict" : ""));
        const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p, opt);
        int64_t m = expected_m(p, strict);
        setenv("CONVT_WG_GMERGE", "0", 1);
        const Plan own = convt::cuda::plan_implicit_gemm_fprop(p, opt);
        unsetenv("CONVT_WG_GMERGE");
        EXPECT_EQ(own.wg_gmerge, 1);
        // (Merged only where the problem's own plan runs wgmma, or where it has none.)
        const bool none_own = !own.usable && p.in_channels_per_group() < 8;
        if (!own.wg && !none_own) m = 1;
        if (none_own) {
          // (Groups without a plan of their own: merged only in 2-D and 3-D problems where
          // the merged plan's stores fill at least half of each output row they touch.)
          setenv("CONVT_WG_GMERGE", std::to_string(m).c_str(), 1);
          const Plan full = convt::cuda::plan_implicit_gemm_fprop(p, opt);
          unsetenv("CONVT_WG_GMERGE");
          const bool dense_stores = p.stride[2] <= 2 || full.wg_wup > 1 || full.wg_wmerge ||
                                    full.wg_wpairs;
          const bool one_d = p.output_size(0) == 1 && p.output_size(1) == 1;
          if (full.wg && (one_d || !dense_stores))
            EXPECT_EQ(plan.wg_gmerge, 1) << full.describe();
        }
        if (plan.wg_gmerge == 1) {
          // (The merged problem's plan may not run on the wgmma kernel.)
          EXPECT_TRUE(m == 1 || plan.describe() == own.describe()) << plan.describe();
          continue;
        }
        ++merged;
        // (Fewer merged where the merged problem's plan would scatter its W taps, or, without
        // a plan of its own, would take another kernel than wgmma.)
        EXPECT_FALSE(plan.wg_scatter);
        EXPECT_LE(plan.wg_gmerge, m) << plan.describe();
        EXPECT_EQ(p.groups % plan.wg_gmerge, 0);
        EXPECT_GE(plan.wg_gmerge * p.in_channels_per_group(), 8);
        if (plan.wg_gmerge < m) {
          setenv("CONVT_WG_GMERGE", std::to_string(m).c_str(), 1);
          const Plan full = convt::cuda::plan_implicit_gemm_fprop(p, opt);
          unsetenv("CONVT_WG_GMERGE");
          EXPECT_TRUE(!full.wg || full.wg_scatter || (none_own && full.wg_gmerge == 1))
              << full.describe();
        }
        EXPECT_TRUE(plan.wg);
        const Problem pw = convt::cuda::wgmma_problem(plan, p);
        EXPECT_EQ(pw.groups, p.groups / plan.wg_gmerge);
        EXPECT_EQ(pw.in_channels, p.in_channels);
        EXPECT_EQ(pw.out_channels, p.out_channels);
        EXPECT_EQ(plan.wg_only, none_own);
        if (none_own) {
          ++wg_only;
          EXPECT_FALSE(plan.tma);
          continue;
        }
        // (The other kernels' fields are the given problem's; the workspace holds both.)
        EXPECT_EQ(plan.block_k, own.block_k);
        EXPECT_EQ(plan.cig_pad, own.cig_pad);
        EXPECT_EQ(plan.cog_pad, own.cog_pad);
        EXPECT_EQ(plan.tma, own.tma);
        EXPECT_EQ(plan.tma_bn, own.tma_bn);
        EXPECT_EQ(plan.tma_bk, own.tma_bk);
        EXPECT_GE(plan.workspace_bytes, own.workspace_bytes);
        EXPECT_FALSE(plan.wg_raw);
      }
    }
  }
  // kb72 and kb75 merge their four groups in 16-bit types, the 1-D layer three, the
  // 7 x 7 layer two, the groups of 16 input channels none; float32 merges only the
  // depthwise layer's, 32 at a time (its merged problem, a plane, runs wgmma whatever its
  // reduction; with CONVT_WG_F32_PLANES=0, 16 at a time: 32 -> 32 groups would take the TMA
  // kernel).
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const bool f32 = t == DType::kFloat32;
    for (const auto& [q, m] : std::vector<std::pair<Problem, int>>{
             {kb72, 4}, {kb75, 4}, {six, 3}, {dense, 2}, {wide, 1}, {dw, 32}, {narrow, 4}}) {
      Problem p = q;
      p.dtype = t;
      const int want = f32 && q.groups != dw.groups ? 1 : m;
      EXPECT_EQ(expected_m(p, false), want) << p.to_string();
      const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), ExecOptions{});
      // (Float32 depthwise: 32, whose merged problem runs wgmma; the 8 -> 4 groups: 2.)
      const bool is_narrow = q.groups == narrow.groups && q.out_channels == narrow.out_channels;
      const int runs = f32 && q.groups == dw.groups ? 32 : is_narrow && !f32 ? 2 : want;
      EXPECT_EQ(plan.wg_gmerge, !plan.wg ? 1 : runs) << p.to_string() << ": " << plan.describe();
      if (f32 && q.groups == dw.groups) {
        const ScopedEnv env("CONVT_WG_F32_PLANES", "0");
        const Plan old = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), ExecOptions{});
        EXPECT_EQ(old.wg_gmerge, !old.wg ? 1 : 16) << old.describe();
      }
    }
  }
  // The 1-D depthwise layers keep the direct kernel (their merges, forced, run wgmma: with
  // separate W phases at stride 4, with zeros inserted along W at stride 2); with
  // CONVT_WG_GMERGE_SMALL=0, so does the 2-D one.
  for (const Problem& q : {dw1d, dw1d_s2}) {
    for (DType t : {DType::kFloat32, DType::kBFloat16}) {
      Problem p = q;
      p.dtype = t;
      p = p.canonical3d();
      SCOPED_TRACE(p.to_string());
      Plan plan = convt::cuda::plan_implicit_gemm_fprop(p, ExecOptions{});
      EXPECT_FALSE(plan.usable) << plan.describe();
      EXPECT_EQ(plan.wg_gmerge, 1);
      setenv("CONVT_WG_GMERGE", t == DType::kFloat32 ? "16" : "32", 1);
      plan = convt::cuda::plan_implicit_gemm_fprop(p, ExecOptions{});
      unsetenv("CONVT_WG_GMERGE");
      EXPECT_TRUE(plan.wg) << plan.describe();
      if (q.stride[0] == 4) {
        EXPECT_EQ(plan.wg_wup, 1);
        EXPECT_FALSE(plan.wg_wmerge || plan.wg_wpairs || plan.wg_scatter) << plan.describe();
      } else {
        EXPECT_EQ(plan.wg_wup, 2) << plan.describe();
      }
    }
  }
  setenv("CONVT_WG_GMERGE_SMALL", "0", 1);
  for (DType t : {DType::kFloat32, DType::kBFloat16}) {
    Problem p = dw;
    p.dtype = t;
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), ExecOptions{});
    EXPECT_FALSE(plan.usable) << plan.describe();
    EXPECT_EQ(plan.wg_gmerge, 1);
  }
  unsetenv("CONVT_WG_GMERGE_SMALL");
  EXPECT_GE(merged, 8);
  EXPECT_GE(wg_only, 3);
  // CONVT_WG_GMERGE=m: m groups wherever m divides them and the merged plan runs wgmma.
  Problem p = kb72;
  p.dtype = DType::kBFloat16;
  for (const char* m : {"2", "4", "3"}) {
    setenv("CONVT_WG_GMERGE", m, 1);
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), ExecOptions{});
    EXPECT_EQ(plan.wg_gmerge, m[0] == '3' ? 1 : m[0] - '0') << m << ": " << plan.describe();
  }
  unsetenv("CONVT_WG_GMERGE");
}

// The wgmma kernel's producer decodes tile indices with FastDiv (multiply-high, add,
// shift): it must equal integer division for every divisor and every index below 2^31.
// Fuzzed layers of 1, 2 or 4 input channels a group (small_group_cases from 1-D on, every
// dtype and math mode): a merged plan divides the groups, reaches 8-32 input and at most 64
// output channels a merged group, runs on the wgmma kernel only (the direct kernel without
// it), keeps its W taps unscattered and its stores whole-row, and describes a problem of
// that many fewer groups; 1-D layers are never merged; a good part of the 2-D and 3-D
// ones are (the test is not vacuous); CONVT_WG_GMERGE_SMALL=0 merges none.
TEST(CudaPlanner, SmallGroupMergesHoldTheirInvariantsOnFuzzedLayers) {
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  int merged_2d3d = 0, plans_2d3d = 0, i = 0;
  for (const convt::test::Case& fuzzed : convt::test::small_group_cases(400, 20261127, 1)) {
    Problem p = fuzzed.problem;
    p.dtype = dtypes[i++ % 3];
    const Problem c = p.canonical3d();
    const int64_t cig = c.in_channels_per_group(), cog = c.out_channels_per_group();
    const bool one_d = c.output_size(0) == 1 && c.output_size(1) == 1;
    for (MathMode math : {MathMode::kAllowTF32, MathMode::kStrictFP32}) {
      if (math == MathMode::kStrictFP32 && c.dtype != DType::kFloat32) continue;
      SCOPED_TRACE(p.to_string() + (math == MathMode::kStrictFP32 ? " strict" : ""));
      ExecOptions opt;
      opt.math = math;
      const Plan plan = convt::cuda::plan_implicit_gemm_fprop(c, opt);
      if (!one_d) ++plans_2d3d;
      if (plan.wg_gmerge == 1) {
        EXPECT_FALSE(plan.usable) << plan.describe();  // (no plan of its own: cig < 8)
        continue;
      }
      const int64_t m = plan.wg_gmerge;
      EXPECT_FALSE(one_d) << plan.describe();
      if (!one_d) ++merged_2d3d;
      EXPECT_EQ(c.groups % m, 0);
      EXPECT_GE(m * cig, 8);
      EXPECT_LE(m * cig, 32);
      EXPECT_LE(m * cog, 64);
      EXPECT_TRUE(plan.usable && plan.wg && plan.wg_only) << plan.describe();
      EXPECT_FALSE(plan.tma || plan.wg_scatter || plan.wg_raw) << plan.describe();
      EXPECT_TRUE(c.stride[2] <= 2 || plan.wg_wup > 1 || plan.wg_wmerge || plan.wg_wpairs)
          << plan.describe();
      const Problem pw = convt::cuda::wgmma_problem(plan, c);
      EXPECT_EQ(pw.groups, c.groups / m);
      EXPECT_EQ(pw.in_channels, c.in_channels);
      EXPECT_EQ(pw.out_channels, c.out_channels);
      EXPECT_EQ(pw.output_sizes(), c.output_sizes());
      setenv("CONVT_WG_GMERGE_SMALL", "0", 1);
      const Plan off = convt::cuda::plan_implicit_gemm_fprop(c, opt);
      unsetenv("CONVT_WG_GMERGE_SMALL");
      EXPECT_EQ(off.wg_gmerge, 1);
      EXPECT_FALSE(off.usable) << off.describe();
    }
  }
  // (Two thirds of the 2-D and 3-D plans in this draw: 210 of 326.)
  EXPECT_GE(merged_2d3d * 4, plans_2d3d) << merged_2d3d << " of " << plans_2d3d;
}

// The layers of CudaSmallGroupsDispatched (small_group_cases) do exercise the merged
// plans: in every dtype, a third at least of them plan their groups merged on the wgmma
// kernel (on an sm_90a device; in this draw 20 of 24 in float32, 13 in 16-bit types, whose
// smaller merged problems take the mma.sync kernel's rule and so stay unmerged), the
// others the direct kernel.
TEST(CudaPlanner, SmallGroupCasesMergeOften) {
  const std::vector<convt::test::Case> cases = convt::test::small_group_cases();
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    int merged = 0;
    for (const convt::test::Case& c : cases) {
      Problem p = c.problem;
      p.dtype = t;
      const Plan plan = convt::cuda::plan_implicit_gemm_fprop(p.canonical3d(), ExecOptions{});
      EXPECT_TRUE(plan.wg_gmerge > 1 || !plan.usable) << p.to_string() << ": " << plan.describe();
      merged += plan.wg_gmerge > 1;
    }
    EXPECT_GE(3 * merged, int(cases.size())) << merged << " of " << cases.size();
  }
}

// The direct forward's parameters for a contiguous canonical problem (D, H, W; 1 for the
// dimensions a 1-D or 2-D layer lacks).
convt::cuda::direct::DirectParams direct_params(int64_t n, int64_t c_in, int64_t c_out,
                                                int64_t groups, std::array<int64_t, 3> in,
                                                std::array<int64_t, 3> k,
                                                std::array<int64_t, 3> s,
                                                std::array<int64_t, 3> pad) {
  convt::cuda::direct::DirectParams p{};
  p.N = n;
  p.C_in = c_in;
  p.C_out = c_out;
  p.groups = groups;
  p.cig = c_in / groups;
  p.cog = c_out / groups;
  for (int d = 0; d < 3; ++d) {
    p.in[d] = in[d];
    p.k[d] = k[d];
    p.stride[d] = s[d];
    p.pad[d] = pad[d];
    p.dil[d] = 1;
    p.out[d] = (in[d] - 1) * s[d] - 2 * pad[d] + (k[d] - 1) + 1;
  }
  auto strides = [](int64_t* str, int64_t a, int64_t b, const int64_t* sp) {
    str[4] = 1;
    str[3] = sp[2];
    str[2] = sp[1] * sp[2];
    str[1] = sp[0] * sp[1] * sp[2];
    str[0] = b * str[1];
    (void)a;
  };
  strides(p.x_str, n, c_in, p.in);
  strides(p.w_str, c_in, p.cog, p.k);
  strides(p.y_str, n, c_out, p.out);
  p.b_str = 1;
  convt::cuda::direct::finish_params(p);
  return p;
}

// The direct forward's several output channels a thread (forward_channels_shape): groups of
// three output channels or more, kCo 16 / 8 / 4 by the group's channels, the wave of blocks
// and the weight table's bound, its caps (8 with more than 4 input channels a group, 4 in
// float64), and the settings that ask for a kCo or for the kernels by rows.
TEST(CudaPlanner, DirectChannelsKernelTakesTheWidestChunkThatFillsTheMachine) {
  using convt::cuda::direct::ChannelsShape;
  using convt::cuda::direct::forward_channels_shape;
  const int64_t max_blocks = 132 * 32;  // an H100's multiprocessors, as the backend passes
  auto total = [](const convt::cuda::direct::DirectParams& p) {
    return p.N * p.C_out * p.out[0] * p.out[1] * p.out[2];
  };
  auto shape = [&](const convt::cuda::direct::DirectParams& p, int acc_bytes, ChannelsShape& cs) {
    return forward_channels_shape(p, total(p), max_blocks, acc_bytes, cs);
  };
  ChannelsShape cs{};
  // A batch of 128 RGB volumes into 16 channels: 16 channels a thread, one chunk.
  const auto rgb3d = direct_params(128, 3, 16, 1, {16, 32, 32}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1});
  ASSERT_TRUE(shape(rgb3d, 4, cs));
  EXPECT_EQ(cs.kco, 16);
  EXPECT_EQ(cs.co_chunks, 1);
  EXPECT_EQ(cs.taps, 27);
  EXPECT_EQ(cs.smem_bytes, 27 * 3 * 16 * 4);
  EXPECT_EQ(cs.rows, 128 * 31 * 63);
  EXPECT_EQ(cs.tw, 63);  // one tile of the 63 columns, 4 rows at once
  EXPECT_EQ(cs.rows_per_pass, 4);
  EXPECT_EQ(cs.w_tiles, 1);
  // float64: 4 channels a thread, 4 chunks.
  ASSERT_TRUE(shape(rgb3d, 8, cs));
  EXPECT_EQ(cs.kco, 4);
  EXPECT_EQ(cs.co_chunks, 4);
  // Groups of 2 or 1 output channels: the kernel by rows; of 3: one chunk of 4.
  EXPECT_FALSE(shape(direct_params(8, 256, 256, 128, {1, 1, 4096}, {1, 1, 4}, {1, 1, 2},
                                   {0, 0, 1}), 4, cs));
  EXPECT_FALSE(shape(direct_params(8, 64, 64, 64, {1, 64, 64}, {1, 4, 4}, {1, 2, 2},
                                   {0, 1, 1}), 4, cs));
  ASSERT_TRUE(shape(direct_params(8, 64, 96, 32, {1, 64, 64}, {1, 3, 3}, {1, 1, 1},
                                  {0, 1, 1}), 4, cs));
  EXPECT_EQ(cs.kco, 4);
  EXPECT_EQ(cs.co_chunks, 1);
  // 8 to 11 channels: 8 a thread; 6 input channels a group cap 16 at 8.
  ASSERT_TRUE(shape(direct_params(64, 4, 10, 1, {1, 64, 64}, {1, 4, 4}, {1, 2, 2}, {0, 1, 1}),
                    4, cs));
  EXPECT_EQ(cs.kco, 8);
  EXPECT_EQ(cs.co_chunks, 2);
  ASSERT_TRUE(shape(direct_params(64, 6, 64, 1, {1, 64, 64}, {1, 4, 4}, {1, 2, 2}, {0, 1, 1}),
                    4, cs));
  EXPECT_EQ(cs.kco, 8);
  // A small layer (one 8 x 8 image into 64 channels, 18 x 18 outputs): chunks of 4, so that
  // the blocks still fill a wave; 16 where asked.
  const auto small = direct_params(1, 3, 64, 1, {1, 8, 8}, {1, 4, 4}, {1, 2, 2}, {0, 0, 0});
  ASSERT_TRUE(shape(small, 4, cs));
  EXPECT_EQ(cs.kco, 4);
  {
    const ScopedEnv env("CONVT_DIRECT_CHANNELS", "16");
    ASSERT_TRUE(shape(small, 4, cs));
    EXPECT_EQ(cs.kco, 16);
    ASSERT_TRUE(shape(small, 8, cs));  // (float64: at most 4)
    EXPECT_EQ(cs.kco, 4);
  }
  {
    const ScopedEnv env("CONVT_DIRECT_CHANNELS", "0");
    EXPECT_FALSE(shape(rgb3d, 4, cs));
  }
  for (const char* rows : {"0", "1"}) {
    const ScopedEnv env("CONVT_DIRECT_ROWS", rows);
    EXPECT_FALSE(shape(rgb3d, 4, cs)) << "CONVT_DIRECT_ROWS=" << rows;
  }
  {
    const ScopedEnv env("CONVT_DIRECT_ROWS", "");
    EXPECT_TRUE(shape(rgb3d, 4, cs));
  }
  // The weight table, at most 48 KB less the kernel's static tables (40832 bytes): 4
  // channels a group, 7 x 5 x 5 taps, 16 channels: 44800 bytes at 16, 22400 at 8; 7 x 7 x 7
  // taps: 87808 at 16, 43904 at 8, 21952 at 4; 8 channels and 7 x 7 x 6 taps: 37632 bytes
  // at 4; 7 x 7 x 7: 43904, the kernel by rows.
  EXPECT_EQ(convt::cuda::direct::kChannelsSmemBytes, 40832);
  ASSERT_TRUE(shape(direct_params(128, 4, 16, 1, {8, 16, 16}, {7, 5, 5}, {1, 1, 1}, {3, 2, 2}),
                    4, cs));
  EXPECT_EQ(cs.kco, 8);
  EXPECT_EQ(cs.smem_bytes, 175 * 4 * 8 * 4);
  ASSERT_TRUE(shape(direct_params(128, 4, 16, 1, {8, 16, 16}, {7, 7, 7}, {1, 1, 1}, {3, 3, 3}),
                    4, cs));
  EXPECT_EQ(cs.kco, 4);
  EXPECT_EQ(cs.smem_bytes, 343 * 4 * 4 * 4);
  ASSERT_TRUE(shape(direct_params(1, 8, 4, 1, {2, 2, 3}, {7, 7, 6}, {1, 1, 1}, {3, 3, 3}), 4,
                    cs));
  EXPECT_EQ(cs.smem_bytes, 37632);
  EXPECT_FALSE(shape(direct_params(1, 8, 4, 1, {2, 2, 3}, {7, 7, 7}, {1, 1, 1}, {3, 3, 3}), 4,
                     cs));
}

// Over fuzzed layers, a shape forward_channels_shape takes holds what the kernel relies on:
// kCo of 4, 8 or 16 within its caps and the group's channels (16 from 12, 8 from 6), chunks
// that cover the group's channels, the weight table's bytes within its bound, column tiles
// covering W, row chunks a multiple of the rows a pass at most 256.
TEST(CudaPlanner, DirectChannelsShapesHoldTheirKernelsInvariants) {
  using convt::cuda::direct::ChannelsShape;
  std::mt19937_64 rng(2027);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int taken = 0, by_kco[17] = {};
  for (int i = 0; i < 2000; ++i) {
    const int dims = int(pick(1, 3));
    const int64_t groups = pick(1, 4), cig = pick(1, 9), cog = pick(1, 40);
    std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, pad{0, 0, 0};
    for (int d = 3 - dims; d < 3; ++d) {
      in[d] = pick(1, dims == 1 ? 3000 : dims == 2 ? 80 : 20);
      k[d] = pick(1, 7);
      s[d] = pick(1, 4);
      pad[d] = pick(0, k[d] - 1);
      if ((in[d] - 1) * s[d] - 2 * pad[d] + k[d] < 1) pad[d] = 0;
    }
    const auto p = direct_params(pick(1, 64), groups * cig, groups * cog, groups, in, k, s, pad);
    const int acc_bytes = pick(0, 3) == 0 ? 8 : 4;
    ChannelsShape cs{};
    const int64_t total = p.N * p.C_out * p.out[0] * p.out[1] * p.out[2];
    const bool ok = convt::cuda::direct::forward_channels_shape(p, total, 132 * 32, acc_bytes, cs);
    SCOPED_TRACE(::testing::Message() << "cig " << cig << " cog " << cog << " groups " << groups
                                      << " taps " << k[0] * k[1] * k[2] << " acc " << acc_bytes);
    const int64_t table4 = k[0] * k[1] * k[2] * cig * 4 * acc_bytes;
    if (cog < 3 || table4 > convt::cuda::direct::kChannelsSmemBytes ||
        !convt::cuda::direct::forward_fits_int32(p, total, int64_t(256) * 65535)) {
      EXPECT_FALSE(ok);
      continue;
    }
    ASSERT_TRUE(ok);
    ++taken;
    ++by_kco[cs.kco];
    EXPECT_TRUE(cs.kco == 4 || cs.kco == 8 || cs.kco == 16);
    EXPECT_LE(cs.kco, acc_bytes > 4 ? 4 : cig <= 4 ? 16 : 8);
    EXPECT_LE(cs.kco, cog >= 12 ? 16 : cog >= 6 ? 8 : 4);
    EXPECT_GE(int64_t(cs.co_chunks) * cs.kco, cog);
    EXPECT_LT(int64_t(cs.co_chunks - 1) * cs.kco, cog);
    EXPECT_EQ(cs.smem_bytes, k[0] * k[1] * k[2] * cig * cs.kco * acc_bytes);
    EXPECT_LE(cs.smem_bytes, convt::cuda::direct::kChannelsSmemBytes);
    EXPECT_GE(cs.tw, 1);
    EXPECT_LE(cs.tw, 256);
    EXPECT_EQ(cs.rows_per_pass, 256 / cs.tw);
    EXPECT_EQ(cs.w_tiles, (p.out[2] + cs.tw - 1) / cs.tw);
    EXPECT_EQ(cs.rows, p.N * p.out[0] * p.out[1]);
    EXPECT_EQ(cs.chunk_rows % cs.rows_per_pass, 0);
    EXPECT_LE(cs.chunk_rows, 256);
  }
  EXPECT_GT(taken, 1000);
  EXPECT_GT(by_kco[4], 50);
  EXPECT_GT(by_kco[8], 50);
  EXPECT_GT(by_kco[16], 50);
}

// Fewer than 8 input channels with groups of one: with CONVT_WG_FEW=1 a wgmma-only plan
// whose K step holds the input's channels padded with zeros (8 in float32, 16 in 16-bit
// types, one channel block), in every precision; by default that plan only for layers of
// 16 or more multiply-adds an output (3 -> 16 k3 s1 in 3-D: 81; 4 -> 64 k4 s2: 16) outside
// strict float32, the direct kernel's channel chunks for the others (k3 s2: 6.75, 1 -> 32
// k4 s2: 4, 2 -> 64 k8 s4: 4) and with CONVT_WG_FEW=0; layers with groups keep their own
// plans (merged or not) either way, and float64 none.
// GEMM and fold: the dispatcher's rule (at most 4 output channels a group; in strict
// float32 64 input channels a group or more, with TF32 100 or more, in 16-bit types 100 or
// more and output channels times taps within one 64-row tile), its switch and the forced
// kernel, and the plan's workspace: the packed weight, then the float products at a
// 256-byte offset.
TEST(CudaPlanner, FewOutputChannelsRunAsGemmAndFold) {
  using convt::test::make_problem;
  struct Layer {
    Problem p;
    bool tf32, half, strict;  // taken in float32 with TF32, in 16-bit types, strict float32
  };
  const std::vector<Layer> layers = {
      // Conv-TasNet's decoder (512 -> 1, kernel 16, stride 8), pix2pix's last layer.
      {make_problem(1, 4, 512, 1, 1, {3999, 1, 1}, {16, 1, 1}, {8, 1, 1}, {0, 0, 0},
                    {0, 0, 0}, {1, 1, 1}, false),
       true, true, true},
      {make_problem(2, 1, 128, 3, 1, {128, 128, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0},
                    {0, 0, 0}, {1, 1, 1}, true),
       true, true, true},
      // Two groups of 200 -> 2, 3-D taps 2 x 2 x 4 (2 x 16 = 32 rows).
      {make_problem(3, 2, 400, 4, 2, {6, 8, 10}, {2, 2, 4}, {2, 2, 2}, {0, 0, 1}, {0, 0, 1},
                    {1, 1, 1}, true),
       true, true, true},
      // One tap: with a stride, and without.
      {make_problem(1, 8, 346, 2, 1, {2000, 1, 1}, {1, 1, 1}, {4, 1, 1}, {0, 0, 0}, {1, 0, 0},
                    {1, 1, 1}, false),
       true, true, true},
      {make_problem(1, 8, 262, 1, 1, {2000, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                    {1, 1, 1}, true),
       true, true, true},
      // DCGAN's last layer (64 -> 3): too few input channels but in strict float32.
      {make_problem(2, 128, 64, 3, 1, {32, 32, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0},
                    {0, 0, 0}, {1, 1, 1}, false),
       false, false, true},
      // 48 -> 1: too few input channels.
      {make_problem(2, 4, 48, 1, 1, {64, 64, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                    {1, 1, 1}, true),
       false, false, false},
      // 8 output channels; 4 x 25 = 100 rows (two tiles: strict float32 only); 2 x 36 = 72
      // rows (two tiles: float32).
      {make_problem(2, 8, 256, 8, 1, {32, 32, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                    {1, 1, 1}, true),
       false, false, false},
      {make_problem(2, 8, 200, 4, 1, {32, 32, 1}, {5, 5, 1}, {2, 2, 1}, {2, 2, 0}, {1, 1, 0},
                    {1, 1, 1}, true),
       false, false, true},
      {make_problem(2, 8, 150, 2, 1, {32, 32, 1}, {6, 6, 1}, {2, 2, 1}, {2, 2, 0}, {0, 0, 0},
                    {1, 1, 1}, false),
       true, false, true},
  };
  const DType dtypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
  for (const Layer& l : layers) {
    for (DType dt : dtypes) {
      for (MathMode math : {MathMode::kAllowTF32, MathMode::kStrictFP32}) {
        if (dt != DType::kFloat32 && math == MathMode::kStrictFP32) continue;
        Problem p = l.p;
        p.dtype = dt;
        const Problem c = p.canonical3d();
        SCOPED_TRACE(p.to_string() + (math == MathMode::kStrictFP32 ? " strict" : ""));
        ExecOptions o;
        o.math = math;
        const bool fold = dt != DType::kFloat32 ? l.half
                          : math == MathMode::kStrictFP32 ? l.strict
                                                          : l.tf32;
        EXPECT_EQ(convt::cuda::gemm_fold_wanted(c, math), fold);
        const PlanUnder dflt = plan_under("CONVT_GEMM_FOLD", "", c, o);
        EXPECT_EQ(dflt.plan.fold, fold) << dflt.text;
        EXPECT_EQ(dflt.text.find("GEMM and fold") != std::string::npos, fold) << dflt.text;
        const PlanUnder off = plan_under("CONVT_GEMM_FOLD", "0", c, o);
        EXPECT_FALSE(off.plan.fold) << off.text;
        const PlanUnder on = plan_under("CONVT_GEMM_FOLD", "1", c, o);
        ASSERT_TRUE(on.plan.usable && on.plan.fold) << on.text;
        EXPECT_EQ(on.text.find("3xTF32") != std::string::npos,
                  math == MathMode::kStrictFP32)
            << on.text;
        const Plan& f = on.plan;
        const int64_t taps = c.kernel_size[0] * c.kernel_size[1] * c.kernel_size[2];
        const int64_t plane = c.input_size[0] * c.input_size[1] * c.input_size[2];
        EXPECT_EQ(f.fold_j_pad % 64, 0);
        EXPECT_GE(f.fold_j_pad, c.out_channels_per_group() * taps);
        EXPECT_LT(f.fold_j_pad, c.out_channels_per_group() * taps + 64);
        EXPECT_EQ(f.cig_pad % 32, 0);
        const std::size_t packed = std::size_t(c.groups * f.cig_pad * f.fold_j_pad) *
                                   convt::dtype_size(dt);
        EXPECT_EQ(f.fold_prod_offset % 256, 0u);
        EXPECT_GE(f.fold_prod_offset, packed);
        EXPECT_EQ(f.fold_prod_bytes,
                  std::size_t(c.batch * c.out_channels * taps * plane) * sizeof(float));
        EXPECT_EQ(f.workspace_bytes, f.fold_prod_offset + f.fold_prod_bytes);
      }
    }
  }
  // Several 64-row tiles of (channel, tap) rows in 16-bit types: taken over a wgmma plan
  // whose boxes move at least 3.5x the GEMM's input reads and products (a 3-D 279 -> 1 layer
  // of 8 x 3 x 9 taps, 8.8 ms on the wgmma kernel against 1.5 as GEMM and fold in bfloat16
  // on an H200), not where they move about as much (a 2-D 320 -> 4 layer of 8 x 5 taps,
  // stride 1 x 3), and over an mma.sync plan (a 3-D 160 -> 1 layer of 7 x 3 x 5 taps,
  // 1.08 ms against 0.10). Float32 with TF32 takes the two of one output channel by
  // gemm_fold_wanted.
  {
    Problem many = make_problem(3, 64, 279, 1, 1, {22, 46, 7}, {8, 3, 9}, {1, 2, 2},
                                {2, 2, 0}, {0, 1, 0}, {1, 1, 1}, false);
    Problem even = make_problem(2, 128, 320, 4, 1, {40, 32, 1}, {8, 5, 1}, {1, 3, 1},
                                {3, 3, 0}, {0, 0, 0}, {2, 1, 1}, true);
    Problem sync = make_problem(3, 128, 160, 1, 1, {10, 6, 8}, {7, 3, 5}, {2, 4, 3},
                                {3, 2, 3}, {1, 0, 1}, {1, 1, 1}, true);
    for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
      many.dtype = even.dtype = sync.dtype = dt;
      const bool half = dt != DType::kFloat32;
      const Problem cm = many.canonical3d(), ce = even.canonical3d(), cs = sync.canonical3d();
      for (const Problem* q : {&cm, &ce, &cs})
        EXPECT_EQ(convt::cuda::gemm_fold_wanted(*q, MathMode::kAllowTF32), !half && q != &ce)
            << q->to_string();
      SCOPED_TRACE(many.to_string());
      const PlanUnder on = plan_under("CONVT_GEMM_FOLD", "", cm, ExecOptions{});
      EXPECT_TRUE(on.plan.fold) << on.text;
      EXPECT_GT(on.plan.fold_j_pad, 64);
      const PlanUnder off = plan_under("CONVT_GEMM_FOLD", "0", cm, ExecOptions{});
      ASSERT_TRUE(off.plan.usable && off.plan.wg) << off.text;
      EXPECT_TRUE(convt::cuda::gemm_fold_wanted_over(cm, off.plan));
      const PlanUnder other = plan_under("CONVT_GEMM_FOLD", "", ce, ExecOptions{});
      EXPECT_FALSE(other.plan.fold) << other.text;
      const PlanUnder sync_off = plan_under("CONVT_GEMM_FOLD", "0", cs, ExecOptions{});
      ASSERT_TRUE(sync_off.plan.usable && !sync_off.plan.wg) << sync_off.text;
      EXPECT_TRUE(convt::cuda::gemm_fold_wanted_over(cs, sync_off.plan));
      EXPECT_TRUE(plan_under("CONVT_GEMM_FOLD", "", cs, ExecOptions{}).plan.fold);
    }
  }
  // Asked for by the options: wherever it runs, however many output channels; not in
  // float64, and not where another kernel is asked for.
  Problem wide = make_problem(2, 2, 64, 64, 1, {16, 16, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0},
                              {1, 1, 0}, {1, 1, 1}, true);
  ExecOptions asked;
  asked.forward_kernel = convt::ForwardKernel::kGemmFold;
  EXPECT_TRUE(convt::cuda::plan_implicit_gemm_fprop(wide.canonical3d(), asked).fold);
  wide.dtype = DType::kFloat64;
  EXPECT_FALSE(convt::cuda::plan_implicit_gemm_fprop(wide.canonical3d(), asked).fold);
  Problem tasnet = layers[0].p;
  ExecOptions direct;
  direct.forward_kernel = convt::ForwardKernel::kDirect;
  const ScopedEnv on("CONVT_GEMM_FOLD", "1");
  EXPECT_FALSE(convt::cuda::plan_implicit_gemm_fprop(tasnet.canonical3d(), direct).usable);
}

TEST(CudaPlanner, FewInputChannelsRunOnWgmmaWhereAsked) {
  using convt::test::make_problem;
  const std::vector<Problem> layers = {
      make_problem(2, 128, 3, 16, 1, {32, 32, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, true),
      make_problem(3, 128, 3, 16, 1, {16, 32, 32}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      make_problem(2, 64, 1, 32, 1, {64, 64, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      make_problem(2, 32, 4, 64, 1, {64, 64, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      make_problem(1, 32, 2, 64, 1, {8192, 1, 1}, {8, 1, 1}, {4, 1, 1}, {2, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
  };
  struct Mode {
    DType dtype;
    MathMode math;
  };
  const Mode modes[] = {{DType::kFloat32, MathMode::kAllowTF32},
                        {DType::kFloat32, MathMode::kStrictFP32},
                        {DType::kBFloat16, MathMode::kAllowTF32},
                        {DType::kFloat16, MathMode::kAllowTF32}};
  for (Problem p : layers) {
    for (const Mode& mode : modes) {
      p.dtype = mode.dtype;
      const Problem c = p.canonical3d();
      SCOPED_TRACE(p.to_string() + (mode.math == MathMode::kStrictFP32 ? " strict" : ""));
      ExecOptions opt;
      opt.math = mode.math;
      const double macs = p.flops() / 2.0 / double(p.output_numel());
      const bool by_default = macs >= 16.0 && mode.math != MathMode::kStrictFP32;
      const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, opt);
      EXPECT_EQ(dflt.usable, by_default) << macs << " " << dflt.describe();
      if (!by_default) EXPECT_EQ(dflt.reason, "fewer than 8 input channels per group");
      {
        const ScopedEnv none("CONVT_WG_FEW", "0");
        const Plan off = convt::cuda::plan_implicit_gemm_fprop(c, opt);
        EXPECT_FALSE(off.usable);
        EXPECT_EQ(off.reason, "fewer than 8 input channels per group");
      }
      const ScopedEnv few("CONVT_WG_FEW", "1");
      const Plan plan = convt::cuda::plan_implicit_gemm_fprop(c, opt);
      ASSERT_TRUE(plan.usable && plan.wg && plan.wg_only) << plan.describe();
      EXPECT_FALSE(plan.tma || plan.wg_raw) << plan.describe();
      EXPECT_EQ(plan.wg_gmerge, 1);
      EXPECT_EQ(plan.wg_bk, mode.dtype == DType::kFloat32 ? 8 : 16);
      EXPECT_EQ(plan.wg_cblocks, 1);
      EXPECT_EQ(plan.split, mode.math == MathMode::kStrictFP32);
      const std::string padded = std::to_string(p.in_channels) + " input channels padded to " +
                                 std::to_string(plan.wg_bk);
      EXPECT_NE(plan.describe().find("only, input channels padded to"), std::string::npos)
          << plan.describe();
      const std::string what = convt::cuda::describe_plan_without_device(c, opt);
      EXPECT_EQ(what.rfind("implicit-GEMM wgmma persistent", 0), 0u) << what;
      EXPECT_NE(what.find(padded), std::string::npos) << what;
      if (by_default) EXPECT_EQ(dflt.describe(), plan.describe());
    }
  }
  EXPECT_EQ(std::count_if(std::begin(layers), std::end(layers),
                          [](const Problem& p) {
                            return p.flops() / 2.0 / double(p.output_numel()) >= 16.0;
                          }),
            2);
  // Groups: the same plan with and without (a depthwise layer, merged; 2 -> 4 groups).
  for (const Problem& g : {make_problem(2, 16, 64, 64, 64, {64, 64, 1}, {4, 4, 1}, {2, 2, 1},
                                        {1, 1, 0}, {0, 0, 0}, {1, 1, 1}, true),
                           make_problem(1, 8, 8, 16, 4, {500, 1, 1}, {4, 1, 1}, {2, 1, 1},
                                        {1, 0, 0}, {0, 0, 0}, {1, 1, 1}, true)}) {
    SCOPED_TRACE(g.to_string());
    const ExecOptions opt;
    const std::string before = convt::cuda::plan_implicit_gemm_fprop(g.canonical3d(), opt).describe();
    const ScopedEnv few("CONVT_WG_FEW", "1");
    EXPECT_EQ(convt::cuda::plan_implicit_gemm_fprop(g.canonical3d(), opt).describe(), before);
  }
  // float64: the direct kernel.
  Problem f64 = layers[0];
  f64.dtype = DType::kFloat64;
  const ScopedEnv few("CONVT_WG_FEW", "1");
  EXPECT_FALSE(convt::cuda::plan_implicit_gemm_fprop(f64.canonical3d(), ExecOptions()).usable);
}

// Over 600 fuzzed layers of 1-7 input channels and groups of one (1-D to 3-D, kernels of
// 1-7, strides 1-4, dilation, padding, output padding, 1-80 output channels), in every
// precision with CONVT_WG_FEW=1: a plan is either not usable, or a wgmma-only one of one
// channel block of 8 (float32) or 16 (16-bit) channels with no TMA kernel, whose description
// names the padding; most of them are usable. By default the same plan exactly where
// few_channels_on_wgmma's rule holds (some of the layers, not all), the direct kernel
// elsewhere.
TEST(CudaPlanner, FewInputChannelPlansHoldOverFuzzedLayers) {
  using convt::test::make_problem;
  std::mt19937_64 rng(1127);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int planned = 0, usable = 0, by_default = 0;
  for (int i = 0; i < 600; ++i) {
    const int dims = int(pick(1, 3));
    Dims in{1, 1, 1}, k{1, 1, 1}, st{1, 1, 1}, pad{0, 0, 0}, op{0, 0, 0}, dil{1, 1, 1};
    for (int d = 0; d < dims; ++d) {
      in[d] = pick(1, dims == 1 ? 2000 : dims == 2 ? 64 : 16);
      k[d] = pick(1, 7);
      st[d] = pick(1, 4);
      dil[d] = pick(1, 3);
      pad[d] = pick(0, (k[d] - 1) * dil[d]);
      op[d] = pick(0, std::max(st[d], dil[d]) - 1);
      if ((in[d] - 1) * st[d] - 2 * pad[d] + dil[d] * (k[d] - 1) + op[d] + 1 < 1) pad[d] = 0;
    }
    Problem p = make_problem(dims, pick(1, 16), pick(1, 7), pick(1, 80), 1, in, k, st, pad, op,
                             dil, pick(0, 1) == 1);
    const int mode = int(pick(0, 3));
    p.dtype = mode == 2 ? DType::kBFloat16 : mode == 3 ? DType::kFloat16 : DType::kFloat32;
    ExecOptions opt;
    opt.math = mode == 1 ? MathMode::kStrictFP32 : MathMode::kAllowTF32;
    SCOPED_TRACE(p.to_string() + (mode == 1 ? " strict" : ""));
    ASSERT_NO_THROW(p.validate());
    const Problem c = p.canonical3d();
    const Plan dflt = convt::cuda::plan_implicit_gemm_fprop(c, opt);
    const ScopedEnv few("CONVT_WG_FEW", "1");
    const Plan plan = convt::cuda::plan_implicit_gemm_fprop(c, opt);
    ++planned;
    const std::string what = convt::cuda::describe_plan_without_device(c, opt);
    if (!plan.usable) {
      EXPECT_EQ(what.rfind("direct kernel, ", 0), 0u) << what;
      EXPECT_FALSE(dflt.usable) << dflt.describe();
      continue;
    }
    ++usable;
    EXPECT_TRUE(plan.wg && plan.wg_only && !plan.tma && !plan.wg_raw) << plan.describe();
    EXPECT_EQ(plan.wg_gmerge, 1);
    EXPECT_EQ(plan.wg_cblocks, 1);
    EXPECT_EQ(plan.wg_bk, p.dtype == DType::kFloat32 ? 8 : 16);
    EXPECT_NE(what.find(std::to_string(p.in_channels) + " input channels padded to"),
              std::string::npos)
        << what;
    // By default: that plan where it pays (16 or more multiply-adds an output, tiles at least
    // 40% the layer's outputs, not split TF32), the direct kernel elsewhere.
    const int64_t tile_channels = plan.wg_nc > 0 ? plan.wg_nc : plan.wg_coop ? 128 : 64;
    const double share = double(p.out_channels) /
                         double((p.out_channels + tile_channels - 1) / tile_channels *
                                tile_channels);
    const bool pays = !plan.split && p.flops() / 2.0 / double(p.output_numel()) >= 16.0 &&
                      plan.wg_used * share >= 0.4;
    EXPECT_EQ(dflt.usable, pays) << plan.describe();
    if (pays) {
      EXPECT_EQ(dflt.describe(), plan.describe());
      ++by_default;
    }
  }
  EXPECT_EQ(planned, 600);
  EXPECT_GT(usable, 480);
  // (Both kinds among the fuzzed layers.)
  EXPECT_GT(by_default, 60);
  EXPECT_LT(by_default, usable - 60);
}

// The direct forward kernels' column tiles (direct_column_tiles) cover W with tiles of at
// most 256 columns, at least 32 where W has them, and keep at least 81% of a block's threads
// busy for every W up to 20000: never fewer than tiles of the next power of two at or above
// W did (W = 34: 93% against 53%), which the kernels had before. Both kernels' shapes take
// them, with row chunks of whole passes.
TEST(CudaPlanner, DirectColumnTilesKeepTheThreadsBusy) {
  using convt::cuda::direct::direct_column_tiles;
  for (int64_t W = 1; W <= 20000; ++W) {
    SCOPED_TRACE(::testing::Message() << "W " << W);
    const auto ct = direct_column_tiles(W);
    ASSERT_GE(ct.tw, 1);
    ASSERT_LE(ct.tw, 256);
    ASSERT_GE(ct.tw, std::min<int64_t>(W, 32));
    ASSERT_EQ(ct.rows_per_pass, 256 / ct.tw);
    ASSERT_EQ(ct.w_tiles, (W + ct.tw - 1) / ct.tw);
    ASSERT_LT(int64_t(ct.w_tiles - 1) * ct.tw, W);
    const double busy = double(W) / (double(ct.w_tiles) * ct.tw) * ct.rows_per_pass * ct.tw / 256;
    int64_t pow2 = 1;
    while (pow2 < 256 && pow2 < W) pow2 *= 2;
    const double busy_pow2 = double(W) / (double((W + pow2 - 1) / pow2) * pow2);
    ASSERT_GE(busy, 0.81);
    ASSERT_GE(busy, busy_pow2 - 1e-9);
  }
  EXPECT_EQ(direct_column_tiles(34).tw, 34);
  EXPECT_EQ(direct_column_tiles(34).rows_per_pass, 7);
  EXPECT_EQ(direct_column_tiles(65).tw, 33);
  EXPECT_EQ(direct_column_tiles(65).w_tiles, 2);
  EXPECT_EQ(direct_column_tiles(300).tw, 50);
  EXPECT_EQ(direct_column_tiles(4096).tw, 256);
  // The kernel by rows: 2-D depthwise 64 channels, 34 x 34 outputs.
  convt::cuda::direct::RowsShape rs{};
  const auto p = direct_params(16, 64, 64, 64, {1, 32, 32}, {1, 3, 3}, {1, 1, 1}, {0, 0, 0});
  ASSERT_TRUE(convt::cuda::direct::forward_rows_shape(p, p.N * p.C_out * 34 * 34, 132 * 32, rs));
  EXPECT_EQ(rs.tw, 34);
  EXPECT_EQ(rs.rows_per_pass, 7);
  EXPECT_EQ(rs.rows, 16 * 64 * 34);
  EXPECT_EQ(rs.chunk_rows % 7, 0);
  EXPECT_LE(rs.chunk_rows, 256);
}

// The forward's description names the direct kernel's form where the implicit GEMM cannot
// run: several output channels a thread for an RGB input into 16 channels (16, or 4 in
// float64), rows of outputs for a 1-D depthwise layer; the reason follows in parentheses.
TEST(CudaPlanner, DirectForwardDescriptionsNameTheirForm) {
  using convt::test::make_problem;
  const ExecOptions opt;
  Problem rgb = make_problem(3, 128, 3, 16, 1, {16, 32, 32}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1},
                             {0, 0, 0}, {1, 1, 1}, true);
  EXPECT_EQ(convt::cuda::describe_plan_without_device(rgb, opt),
            "direct kernel, chunks of 16 output channels a thread (implicit GEMM not usable: "
            "fewer than 8 input channels per group)");
  rgb.dtype = DType::kFloat64;
  const std::string f64 = convt::cuda::describe_plan_without_device(rgb, opt);
  EXPECT_EQ(f64.rfind("direct kernel, chunks of 4 output channels a thread (implicit GEMM ", 0),
            0u) << f64;
  const Problem dw1d = make_problem(1, 8, 128, 128, 128, {4096, 1, 1}, {8, 1, 1}, {4, 1, 1},
                                    {2, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  EXPECT_EQ(convt::cuda::describe_plan_without_device(dw1d, opt),
            "direct kernel, by rows of outputs (implicit GEMM not usable: fewer than 8 input "
            "channels per group)");
  {
    const ScopedEnv env("CONVT_DIRECT_ROWS", "0");
    EXPECT_EQ(convt::cuda::describe_plan_without_device(dw1d, opt).rfind(
                  "direct kernel, one output a thread (", 0),
              0u);
  }
}

TEST(CudaPlanner, FastDivMatchesIntegerDivision) {
  std::mt19937 rng(20261126);
  std::uniform_int_distribution<int> any(0, INT_MAX);
  std::vector<int> divisors;
  for (int d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int k = 12; k <= 30; ++k)
    for (int e : {-1, 0, 1}) divisors.push_back((1 << k) + e);
  divisors.push_back(INT_MAX);
  for (int i = 0; i < 2000; ++i) divisors.push_back(std::max(1, any(rng)));
  int64_t checked = 0;
  for (const int d : divisors) {
    const convt::cuda::FastDiv f(d);
    std::vector<int> ns = {INT_MAX, INT_MAX - 1, INT_MAX - d + 1};
    for (int n = 0; n <= 2 * d + 2 && n <= 4096; ++n) ns.push_back(n);
    for (int i = 0; i < 64; ++i) {
      const int64_t k = any(rng) / d;  // (a multiple of d and its neighbours, below 2^31)
      for (int e : {-1, 0, 1}) {
        const int64_t n = k * d + e;
        if (n >= 0 && n <= INT_MAX) ns.push_back(int(n));
      }
      ns.push_back(any(rng));
    }
    for (const int n : ns) {
      if (n < 0) continue;
      int rem = -1;
      const int q = f.divmod(n, rem);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(rem, n % d) << n << " % " << d;
      ++checked;
    }
  }
  EXPECT_GT(checked, int64_t(10000000));
}

}  // namespace

