// Planning and launching the implicit-GEMM forward (convt/cuda/implicit_gemm_fprop_sm80.cuh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend.hpp"
#include "convt/cuda/direct_shapes.hpp"

namespace convt {
namespace cuda {

struct ImplicitGemmFpropPlan {
  enum class Kind { kGather, kHalo };
  bool usable = false;
  std::string reason;  // why no implicit-GEMM kernel runs this problem, when !usable
  Kind kind = Kind::kGather;
  int block_k = 0;     // input channels per K step
  bool split = false;  // float32 in split TF32 (strict float32), else TF32 / 16-bit
  int64_t cig_pad = 0, cog_pad = 0;
  std::size_t workspace_bytes = 0;  // the packed weight
  // kHalo: tile of `rows` x `wt` positions, W taps of the widest phase, strip rows.
  int wt = 0, rows = 0, tw_max = 0, strip_rows = 0;
  std::size_t smem_bytes = 0;
  // The TMA-fed kernel (sm_90+), used when the tensors allow it (see
  // run_implicit_gemm_fprop): allowed by the options and the device, and its tile.
  bool tma = false;
  std::string tma_reason;  // why not, when !tma
  int tma_bn = 0, tma_bk = 0;
  int tma_row_bytes = 0;  // bytes of a box row: the windows of every W tap of a phase
  int tma_w_taps = 0;     // W taps of the widest phase (weight tiles per stage)
  // The persistent wgmma kernel (sm_90a; float16, bfloat16, float32 as TF32): tile of 64
  // channels x wg_n positions (or wg_n positions x wg_nc channels), wg_rows output rows of wg_wv columns in a box of wg_hbox x
  // wg_wbox input positions; K steps of wg_bk channels and up to wg_hb H taps.
  bool wg = false;
  std::string wg_reason;  // why not, when !wg
  int wg_n = 0, wg_bk = 0, wg_cblocks = 0, wg_hb = 0;
  // Position-major tiles (wg_nc > 0): wg_n positions x wg_nc channels; else 64 channels x
  // wg_n positions. wg_cw: channels per tile (64 or wg_nc).
  int wg_nc = 0, wg_cw = 64;
  int wg_wbox = 0, wg_hbox = 0, wg_rows = 0, wg_wv = 0;
  int wg_tmax[3] = {0, 0, 0};
  int64_t wg_tiles = 0;
  int wg_stages = 0, wg_stage_bytes = 0, wg_box_bytes = 0;
  double wg_used = 0;  // valid outputs / computed positions
  // Offsets within a stage of the weight tiles, and (split TF32) of the residual box and
  // residual weight tiles.
  int wg_w_off = 0, wg_xs_off = 0, wg_ws_off = 0;
  // Bytes from a stage's start that its MMAs read: every tap's shifted run of wg_n
  // flattened positions, of which those past the box (dropped outputs) read the weight
  // tiles and what follows the stage; the block's shared memory covers them from the last
  // stage (wgmma_shared_bytes). 0 where the stage itself holds that room (reading in place).
  int wg_a_bytes = 0;
  // Workspace: packed weight at 0, the input copy at wg_xt_offset, the tile counter.
  std::size_t wg_xt_offset = 0, wg_counter_offset = 0;
  // The copy made by the kernel's copier warps (wg::Params::fused): chunks of
  // wg_copy_chunk positions of a sample's D x H x W, a count per (sample, group, chunk) (ints,
  // zero before the kernel) at wg_chunk_done_offset; 0 bytes where the plan cannot take it
  // (split TF32, the input read in place).
  std::size_t wg_chunk_done_offset = 0, wg_chunk_done_bytes = 0;
  int wg_copy_chunk = 0;
  // Whether the copier warps make the copy (channel-major tiles reading the copy, see
  // plan_wgmma_tile for the rule), where the input's layout lets them; wg_copy_vec: only
  // where they load 8 positions at once (16-bit types by the rule, see
  // wgmma_copier_positions_per_load).
  bool wg_copy_fused = false, wg_copy_vec = false;
  // Zeros inserted along W (wg_wup = the W stride, else 1): the input copy holds input
  // column w at column w * wg_wup and zeros between, and the kernel runs the problem with
  // W stride 1 on it (wgmma_problem), every output row one phase stored whole. It
  // multiplies the MMAs by the stride; the planner takes it where the problem stays
  // memory-bound with them (see plan_implicit_gemm_fprop).
  int wg_wup = 1;
  // The input read in place (float32 as TF32, position-major tiles): the producer loads raw
  // boxes of x through a tensor map and the consumers load wgmma's A operand from them into
  // registers; no input copy (only where x's layout does not suit a tensor map, a padded
  // one: wgmma_input_in_place). wg_wbox is then the flattening width, a multiple of 4.
  bool wg_raw = false;
  // The input transposed in the kernel (16-bit types and TF32, unfolded tiles, no zeros
  // inserted): where x is NC... with W contiguous (wgmma_input_transposed_in_kernel), TMA
  // loads raw boxes of x into slots of the block's shared memory and a warp of the kernel
  // transposes them into the stages, so that there is no input copy. The raw box of a K step
  // comes in pieces of 32 columns x bk channels x wg_xp_rows rows (wg_xp_piece_bytes, at most
  // 4 KB) through a ring of wg_xp_pieces of them, in the shared memory the copy's stages
  // leave. Elsewhere the copy runs with the same tile.
  bool wg_xp = false;
  int wg_xp_pieces = 0, wg_xp_rows = 0, wg_xp_piece_bytes = 0;
  // The raw pieces loaded ahead of the stages (wherever the input is transposed in the kernel;
  // CONVT_WG_XP_EARLY=0 turns it off): the producer issues a K step's pieces into the ring
  // before it waits for the step's stage to be free, and the transposer waits for the stage
  // before writing it, so that the loads' latency overlaps the consumers' use of the stage
  // instead of following it.
  bool wg_xp_early = false;
  // Transposer warps (1, or 2 where CONVT_WG_XP_WARPS=2 asks and the kernels have them: two
  // consumer warpgroups, or position-major tiles of 16-32 channels without W phase pairs):
  // with two, each transposes every other piece of the ring.
  int wg_xp_warps = 1;
  // (The transposition reached by an H-complete K step in float32, CONVT_WG_XP_HFULL: the
  // planner still weighs two consumer warpgroups with the copy against it.)
  bool wg_xp_hfull = false;
  // W taps folded into N (position-major tiles): wgmma's N is wg_nc x wg_fold columns, one
  // per (W tap, channel), over wg_n = wg::fold_positions(wg_nc, wg_fold) positions; 1: not
  // folded.
  int wg_fold = 1;
  // W taps stacked in M (channel-major tiles; opt-in, CONVT_WG_MFOLD=1): wgmma's 64 rows
  // hold wg_mfold W taps of wg_cw = 64 / wg_mfold channels, each MMA step the box at one
  // shift against wg_mfold consecutive W taps; the epilogue adds each output's rows at their
  // shifts. 1: one W tap an MMA step.
  int wg_mfold = 1;
  // W taps scattered (with wg_fold; CONVT_WG_SCATTER=1): every W tap of every W phase folded
  // into N over the input's columns, each product added to its output column; the kernel
  // runs W with stride 1 and one phase, a segment's box starting wg_sc_clo input columns
  // after its first output column divided by the W stride, and stores wg_wv x the W stride
  // whole output columns per row.
  bool wg_scatter = false;
  int wg_sc_clo = 0;
  // W phases merged (unfolded tiles, W stride s > 1; CONVT_WG_WMERGE): a tile runs every W
  // phase of its column segment in turn, each phase's outputs going into a buffer of T in
  // the staging area, [channels][rows][s x wg_wv], and stores the tile's whole output rows
  // after the last phase: full 32-byte sectors without zeros inserted along W.
  bool wg_wmerge = false;
  // W phase pairs (W stride 2, position-major tiles; CONVT_WG_WMERGE=2): a tile runs both W
  // phases of its segment into two sets of accumulators and stores their outputs
  // interleaved, two adjacent elements per store, from the registers' staging pass.
  bool wg_wpairs = false;
  // Bytes of the kernel's epilogue staging area (wg::kEpiBytes, or the merged phases'
  // buffer where that is larger; the stages take what is left).
  int wg_epi_bytes = 0;
  // Weight tiles resident in the stages: a tile's K steps (wg_steps, its widest phase's)
  // divide the stages, so that each K step k of a block's next tile of the same group,
  // channel tile and phase lands in the stage that still holds its weight tiles, and the
  // producer does not copy them again (Params::w_reuse).
  bool wg_w_resident = false;
  int wg_steps = 0;
  // Planes stacked in a tile (1: one plane): where a phase's whole (H, W) plane fits a box
  // several times over, a tile's box holds wg_stack consecutive planes, wg_hbox rows each:
  // its samples (wg_stack_n; 1-D and 2-D problems, the input copy's tensor map then has
  // dims (bk, W, H, N, G x channel blocks)) or its D positions (3-D problems, a box of
  // wg_stack D planes). Each plane's output rows are its first ones of the box's rows; the
  // rows between (the H halo of a plane) are computed and dropped.
  int wg_stack = 1;
  bool wg_stack_n = false;
  double wg_used_plane = 0;  // wg_used with one plane a tile
  // Taps split (wg::Params::tsplit; CONVT_WG_TSPLIT): every K step is one (D tap, H tap, W
  // tap) and channel block, its box loaded at that tap's offset, so that a box holds the
  // tile's rows x wg_wv columns exactly (wg_hb 1, wg_wbox wg_wv): no halo columns or rows
  // computed and dropped, whole small planes stacked without gaps, for as many box loads
  // as the tile has taps (see plan_wgmma_tile for where the planner takes it).
  bool wg_tsplit = false;
  // Two consumer warpgroups (channel-major tiles reading the copy or a channels_last input;
  // CONVT_WG_COOP): tiles of 128 channels x wg_n positions, each warpgroup multiplying the
  // stage's one box by the weight tiles of its 64 channels (wg_w_half bytes after the
  // first's in a stage), one block a multiprocessor: the box is copied from L2 once per 128
  // channels instead of once per 64. wg_cw stays 64 (the packed weight's tiles).
  bool wg_coop = false;
  int wg_w_half = 0;
  // Two consumer warpgroups sharing the weight tiles (opt-in, CONVT_WG_COOP_N=1; wg_coop is
  // set too, the kernel being the same): tiles of 64 channels x 2 wg_rows rows, warpgroup j
  // multiplying the weight tiles, copied once a stage, by a box of its own (wg_hbox rows
  // from the tile's row j wg_rows on, wg_coop_box_off bytes after the first's): the weight
  // tiles are copied from L2 once per 2 wg_n positions instead of once per wg_n, for groups
  // of 64 channels or fewer, which two warpgroups of 64 channels each cannot share.
  bool wg_coop_n = false;
  int wg_coop_box_off = 0;
  // Split K (channel-major tiles, not split TF32, W phases neither merged nor paired; opt-in,
  // CONVT_WG_SPLIT_K): each tile's K steps in wg_splits parts run by different blocks, their
  // float32 sums stored at wg_partials_offset (wg_tiles x wg_splits x warpgroups x 128
  // threads x wg_n / 2 floats) and counted per (tile, warpgroup) at wg_split_done_offset
  // (ints, zero before the kernel); the last part's warpgroup adds them in part order and
  // stores the tile. 1: not split.
  int wg_splits = 1;
  std::size_t wg_split_done_offset = 0, wg_partials_offset = 0;
  // Groups merged (wg_gmerge consecutive groups run as one, 1: not merged): the kernel runs
  // the problem with groups / wg_gmerge groups (wgmma_problem), whose weight is packed
  // block-diagonal (zero where an input and an output channel fall in different original
  // groups), so that narrow groups make fewer, deeper tiles. A zero weight times an
  // infinite or NaN input would be NaN where the grouped convolution keeps the other groups
  // finite: the input copy (which such plans always take) flags non-finite inputs, and the
  // direct kernel recomputes the output where it did (wgmma_nonfinite_flag). The other
  // kernels' fields (TMA, gather) stay those of the problem as given.
  int wg_gmerge = 1;
  // The plan runs on the wgmma kernel only (groups merged where the given problem has no
  // implicit-GEMM plan of its own: fewer than 8 input channels per group); elsewhere the
  // direct kernel runs it (implicit_gemm_runs).
  bool wg_only = false;
  // GEMM and fold (convt/cuda/gemm_fold_sm80.cuh; layers of few output channels, see
  // gemm_fold_wanted): the mma.sync kernel runs the pointwise GEMM of every tap at once,
  // M = output channels of a group x taps padded to fold_j_pad (cog_pad = fold_j_pad,
  // block_k and cig_pad its K step), into float products at fold_prod_offset of the
  // workspace (fold_prod_bytes), and the fold kernel adds them into the output. The packed
  // weight, Wp[g][ci][j], is at the workspace's start (or in the weight cache). No other
  // kernel's fields are set.
  bool fold = false;
  int64_t fold_j_pad = 0;
  std::size_t fold_prod_offset = 0, fold_prod_bytes = 0;
  std::string describe() const;
};

// Whether the dispatcher runs p as GEMM and fold (ImplicitGemmFpropPlan::fold) under `math`
// where the options leave it the choice, whatever the other kernels' plan: layers of at
// most 4 output channels a group with, in strict float32, 64 input channels a group or
// more; with TF32, 100 or more and at most 2 output channels a group or output channels
// times taps within one 64-row tile; in 16-bit types, 100 or more and output channels
// times taps within one 64-row tile (see the definition for the measurements). CONVT_GEMM_FOLD=0
// turns it off, =1 takes it wherever it runs; CONVT_FORWARD_KERNEL=gemm_fold (or
// ForwardKernel::kGemmFold) asks for it.
bool gemm_fold_wanted(const Problem& p, MathMode math);

// Whether the dispatcher runs p (at most 4 output channels a group; not in strict float32)
// as GEMM and fold over `plan`, the other kernels' plan for it, with 100 input channels a
// group or more: where `plan` runs on an mma.sync kernel, or, with output channels times
// taps over one 64-row tile, where `plan`'s wgmma boxes move at least 3.5x
// the bytes of the GEMM's input reads (once per row tile) and the products' round trip, on
// inputs of 32 MB or more.
bool gemm_fold_wanted_over(const Problem& p, const ImplicitGemmFpropPlan& plan);

// Whether GEMM and fold runs its GEMM on fold::fold_gemm_kernel (cp.async tiles; by default,
// CONVT_GEMM_FOLD_PIPE=0 turns it off) for the input x: each channel's plane contiguous,
// the plane, x's sample and channel strides multiples of 16 bytes, x 16-byte aligned. Else
// the mma.sync gather kernel runs it.
bool fold_gemm_pipelined(const Problem& p, const TensorRef& x);

// Whether GEMM and fold runs as fold::fold_fused_1d_kernel, the fold in the cp.async GEMM's
// epilogue (by default, CONVT_GEMM_FOLD_FUSED=0 turns it off; where fold_gemm_pipelined
// holds): 1-D layers
// whose output channels x taps fit one 64-row tile. No products then leave the kernel.
bool fold_fused(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x);

// The problem the wgmma kernel of `plan` runs for p: p itself, with groups merged
// (plan.wg_gmerge > 1) fewer groups over the same tensors, and with zeros inserted along W
// (plan.wg_wup > 1) the same convolution over the upsampled input, W stride 1.
Problem wgmma_problem(const ImplicitGemmFpropPlan& plan, const Problem& p);

// The TMA kernel's pipeline stages for a tile (bn channels x bk input channels), box row and
// W taps per stage: as many as fit in its shared-memory budget, at most kTmaMaxStages.
constexpr int kTmaMaxStages = 8;
int tma_pipeline_stages(DType dtype, int bn, int bk, int row_bytes, int w_taps);

// The multiprocessors the wgmma planner fills (the current device's; 132 where there is no
// device): channel-major tiles fewer than two per multiprocessor take a smaller N where
// that shortens the call (plan_wgmma_tile; CONVT_WG_FILL=0 keeps the largest N).
int wgmma_planner_sms();

// The W phases the TMA kernel's grid runs (tma::TmaFpropParams::w_map). With `map`, only
// the phases with W taps run, in ascending order ("owners"), and each also writes the bias
// of the tap-less outputs after each of its own (owned[i] of them; the first owner also
// the owner[0] outputs that start a row), so that a row's outputs leave one block together.
// Without it (no tap-less phase, a stride over kTmaMaxWPhases, or an output row narrower
// than the first owner), all `stride` W phases run, each writing its own outputs.
constexpr int kTmaMaxWPhases = 16;
struct TmaWPhases {
  bool map = false;
  int phases = 0;                   // W phases in the grid
  int owner[kTmaMaxWPhases] = {};   // with map: the W phase of the grid's i-th
  int owned[kTmaMaxWPhases] = {};   // with map: tap-less outputs after each of its outputs
};
TmaWPhases tma_w_phases(int stride, int pad, int dil, int k, int out);

// Dynamic shared memory of the wgmma kernel's block for `plan` (stages, headers, the
// epilogue's staging, tile info, barriers, alignment), and the most a block of the plan may
// take: so that two are resident on a multiprocessor, or one with two consumer warpgroups.
std::size_t wgmma_shared_bytes(const ImplicitGemmFpropPlan& plan);
std::size_t wgmma_max_shared_bytes(const ImplicitGemmFpropPlan& plan);

// Where the TMA kernel's wgmma weight packing puts element i of a tile of `bn` columns:
// its channel within the tile (`c`) and its column (`n`); see tma::wgmma_b_element.
void tma_wgmma_b_element(int i, int bn, int elem_bytes, int* c, int* n);

// Whether the wgmma kernel reading the input in place (plan.wg_raw) reads x itself through a
// tensor map: dims (W, H, D, channels of a group, N * G), W contiguous, the other strides and
// the address multiples of 16 bytes, groups tiling the batch stride. Else it first copies x
// into the workspace, contiguous with W padded to 16 bytes.
bool wgmma_input_in_place(const Problem& p, const TensorRef& x);

// Whether the wgmma kernel of `plan` reads a channels_last 16-bit input x of the 1-D or 2-D
// problem p through a tensor map over x itself, without the input copy: each position's
// channels contiguous, every group's channels a whole number of K steps, 16-byte aligned
// strides; the map's dims are then (bk channels, W, H, channel blocks of a sample, N)
// (make_channels_last_tensor_map, which may still decline: the copy runs then).
bool wgmma_channels_last_in_place(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                  const TensorRef& x);

// Whether the wgmma kernel of `plan` transposes raw boxes of the input x itself
// (plan.wg_xp, not a channels_last input read in place, and x readable by a tensor map as
// wgmma_input_in_place says): dims (W, channels of a group, H, D, N * G), box (32 columns,
// bk channels, hbox rows, 1, 1).
bool wgmma_input_transposed_in_kernel(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                      const TensorRef& x);

// Whether the wgmma kernel of `plan` copies the input itself, its copier warps making the
// copy while the tiles run (plan.wg_copy_fused; no zeros inserted, not split TF32), where x
// is NC... with each sample's D x H x W positions contiguous. Else a copy kernel runs first.
bool wgmma_input_copied_in_kernel(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                  const TensorRef& x);

// The copier warps' positions per load of a channel of x (16-bit types): 8 where every run
// of 8 they load is one aligned 16-byte load (the plane, x's sample and channel strides and
// the plan's chunks multiples of 8, x 16-byte aligned), 2 where every pair is an aligned
// 4-byte load, else 1 (and 1 for float).
int wgmma_copier_positions_per_load(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                    const TensorRef& x);

// The weight re-layout run_implicit_gemm_fprop runs for (plan, problem, input) on `device`
// (see convt::weight_relayout): the packed weight of the kernel it picks, its bytes (with
// the wgmma kernel's non-finite flag where its packing sets one) and a key hashed from
// everything that packing depends on.
WeightRelayout weight_relayout_of(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                  const TensorRef& x, int device);

// Whether (and how) the implicit-GEMM kernel runs this canonical problem.
ImplicitGemmFpropPlan plan_implicit_gemm_fprop(const Problem& p, const ExecOptions& opt);

// Whether `device` runs the plan's implicit-GEMM kernels (plan.usable, and a device that runs
// the wgmma kernel where the plan has no other: plan.wg_only); else the direct kernel runs
// the problem.
bool implicit_gemm_runs(const ImplicitGemmFpropPlan& plan, int device);

// What run_implicit_gemm_fprop runs for (plan, problem, input) on `device`, as one line
// (host-side only: nothing is launched).
std::string describe_implicit_gemm_fprop(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                         const TensorRef& x, int device);

// What the forward would run for the canonical problem p with a contiguous NC... input on
// a Hopper GPU of wgmma_planner_sms() multiprocessors, as describe_implicit_gemm_fprop says
// it, without a device (the planner's tools and tests): the wgmma kernel where the plan
// takes it, else the TMA kernel where it can run, else the plan's own description (the
// direct kernel's where the implicit GEMM cannot run).
std::string describe_plan_without_device(const Problem& p, const ExecOptions& opt);

// The direct kernels' parameters of the canonical problem p: sizes, taps and the derived
// fields (finish_params); the tensors' strides left zero, for the caller to set.
direct::DirectParams direct_problem_params(const Problem& p);

// What the direct forward runs for p where the implicit GEMM does not (plan), as one line:
// "direct kernel, <its form> (implicit GEMM <why not>)", the form as launch_forward picks it
// on a device of `sms` multiprocessors for an input of the given element strides (N, C, D,
// H, W; null: contiguous) and a contiguous weight and output.
std::string describe_direct_forward(const Problem& p, const ImplicitGemmFpropPlan& plan,
                                    const int64_t* x_strides, int sms);

// Packs the weight into the workspace and runs the kernel (plan.usable must be true): the
// TMA-fed kernel where plan.tma holds and the input's layout suits a tensor map, else the
// plan's mma.sync kernel. Returns a description of what ran when `describe` is set.
// Where run_implicit_gemm_fprop ran the wgmma kernel in split TF32 or with zeros inserted
// along W: the device flag that its preparation kernels set when the input (split TF32) or
// the weight holds an infinity or NaN (split TF32's residual products cannot carry them,
// and such a weight times an inserted zero gives NaN; the caller recomputes the output
// where it is set). Else null.
const int* wgmma_nonfinite_flag(const ImplicitGemmFpropPlan& plan, const ExecOptions& opt,
                                int device);

std::string run_implicit_gemm_fprop(const ImplicitGemmFpropPlan& plan, const Problem& p,
                                    const TensorRef& x, const TensorRef& w, const TensorRef* b,
                                    const TensorRef& y, const ExecOptions& opt,
                                    bool describe = false);

}  // namespace cuda
}  // namespace convt
