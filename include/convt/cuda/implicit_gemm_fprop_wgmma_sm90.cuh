// convt/cuda/implicit_gemm_fprop_wgmma_sm90.cuh — the persistent wgmma forward for Hopper
// (sm_90a): TMA-fed, warp-specialised, both GEMM operands in shared memory.
//
// Same phase decomposition as the other implicit-GEMM kernels: per spatial dimension
// with stride s, outputs o = q*s + r split into s phases r, and tap j of a phase reads input
// position q + off0 - j*doff. Per (group, phase) the forward is the GEMM
//
//   C[co, n] = sum_{kk} W[co, kk] * X[kk, n]
//     co  64 output channels of a channel tile                      (wgmma M = 64)
//     n   N output positions of the phase                           (wgmma N, 128..256)
//     kk  (D tap, H tap, W tap, input channel)                       (K)
//
// or, for groups of at most 32 output channels (where 64 rows of M would be mostly
// empty), turned around as position-major tiles (template argument NC > 0): M = N
// positions in N / 64 blocks of 64, wgmma N = NC channels (8 to 48), the box rows of each
// m64 block as A and the weight tile as B. Both operands are the same shared-memory tiles
// either way; only the descriptors' roles, the weight tile's width and the epilogue's
// register layout change.
//
// Two steps make every operand a plain K-major shared-memory tile:
//
//  1. The input is first copied (transpose_input_tiled_kernel where its W stride is 1, else
//     transpose_input_kernel) into the workspace in a blocked
//     layout xt[n*G + g][c / bk][D][H][W][bk], bk = the K step's channels (32, 64 or 128
//     bytes of them), channels padded with zeros to bk (float rounded to TF32 once, here).
//     A TMA box of xt, [hbox rows][wbox columns][bk], written with the swizzle of its row
//     width (32B, 64B or 128B), is then exactly wgmma's K-major swizzled layout for X, one
//     row per position (stride byte offset 8 rows), each MMA K step 32 bytes further
//     along the row. (Rows of 16 bytes, the unswizzled layout, make TMA slow: it moves a
//     box row at a time.) A channels_last 16-bit input of a 1-D or 2-D problem already
//     has this layout where its groups are whole K steps: the tensor map then covers x
//     itself, dims (bk, W, H, channel blocks of a sample, N) (Params::cl_chunks), and
//     there is no copy. Where the plan says so (float as TF32 on channel-major tiles with
//     many multiply-adds per input element, large inputs; ImplicitGemmFpropPlan::
//     wg_copy_fused), no copy kernel runs: the forward kernel's copier warps (warp 5 of
//     each block) make the same copy while the tiles run, chunk by chunk in the order the
//     tiles take the input, each chunk's count going up once it is written (Params::fused,
//     chunk_done), and a tile's producer waits for the chunks that hold the rows its
//     outputs read before loading them.
//  2. Positions are flattened over the box: position n of a tile is box row n / wbox,
//     column n % wbox. Tap (jh, jw) of the phase then reads rows n + shift with shift =
//     (jh' * doff_h) * wbox + jw' * doff_w (jh', jw' counted from the last tap), so every
//     tap of a K step is one descriptor offset into the same box: no gather, no copy, any
//     shift (16-byte rows). The box holds R output rows of wv = wbox - halo_w valid
//     columns plus their H and W halos; columns past wv and rows past R are computed and
//     dropped (the planner picks N, R and wbox to waste little). Where a phase's whole
//     plane fits the tile several times over, the box stacks consecutive planes (samples of
//     a 1-D or 2-D problem, D positions of a 3-D one; Params::stack), hbox rows each: a
//     plane's output rows come first, the rows between planes are computed and dropped
//     (base[] holds kNoRow for them), and every tap's shift stays within its plane.
//
// NC... inputs may skip the copy instead (template argument kXp; ImplicitGemmFpropPlan::
// wg_xp; 16-bit types, and float as TF32): the producer loads the K step's raw box of x
// itself through a tensor map over x (dims W, channels of a group, H, D, N * G) in pieces of
// 32 columns x bk channels x xp_rows rows (at most 4 KB; lines of 64 or 128 bytes, swizzled
// as wide; from the last multiple of 8 columns at or before the box's first), through a ring of
// pieces in the shared memory the stages leave, and warp 5 transposes each piece into the
// stage's K-major box, exactly the layout the copy's tensor map writes: with ldmatrix.trans
// / stmatrix in 16-bit types (xp_transpose_piece), with 16-byte loads and stores of 4 x 4
// blocks rounded to TF32 in float (xp_transpose_piece_f32). The stage's "full" barrier then
// counts the producer's arrival (with the weight tiles' bytes) and the transposer's 32. The
// consumers are unchanged. With XW = 2 (two consumer warpgroups, or position-major tiles of
// 16-32 channels; ImplicitGemmFpropPlan::wg_xp_warps) warps 5 and 6 (9 and 10) transpose:
// each reads every piece's header in turn and transposes every XW-th piece, each releases
// every piece (the ring's "empty" barriers count 32 XW) and arrives on the stage's "full"
// barrier once it has passed the K step's last piece (1 + 32 XW arrivals). The ring's area
// is the same.
//
// Float32 as TF32 on position-major tiles may instead read the input in place (template
// argument kRaw; ImplicitGemmFpropPlan::wg_raw): no copy, the producer loads the raw box
// [bk channels][hbox rows][wbox columns] of x itself (a tensor map over x with W innermost,
// dims W, H, D, channels of a group, N * G, zeros past its edges and past the group's
// channels; the box starts at the 16-byte-aligned column at or before its first, wsh
// columns early), and the consumers load wgmma's A operand into registers from it: A is
// K-major only in registers, where any position shift is an address offset. Thread (warp
// w, lane 4g + t) loads, per m64 block i and MMA K step ks, the positions 64 i + 16 w + g
// and + 8 of channels 8 ks + t and + 4, scalar loads that hit 32 distinct banks where the
// box's channel plane (hbox * wbox floats) is an odd multiple of 8 (the planner pads wbox
// for it), rounded to TF32 there. wbox is then the flattening width itself (a multiple of
// 4), positions are box row n / wbox, column n % wbox - wsh, and the weight tile is wgmma's
// B operand as before. wgmma reads A registers asynchronously: the MMA steps go in batches
// (one wgmma fence each) whose A lives in one of two register sets, alternating, each batch
// waiting for the one before the last.
//
// Position-major tiles may fold the W taps into N (template argument FOLD;
// ImplicitGemmFpropPlan::wg_fold): the weight tile of an H tap holds NC x FOLD columns,
// column f * NC + c the weights of W tap f for channel c, and each MMA step runs the
// unshifted box against it, so that the accumulators hold every tap's products Z_f at
// every box position; output n is then the sum over f of Z_f[n + (cw - 1 - f) * doff],
// which the epilogue adds up in shared memory (the box is read once per H tap instead of
// once per (H tap, W tap), what bounds narrow tiles). With Params::sc (W taps scattered,
// for W strides s > 1) the fold takes every W tap of every W phase and the kernel runs W
// with stride 1 and one phase: box column j of a tile holds input column cs * wv + sc_clo
// + j, its tap kw's products belong to output column (sc_clo + j) * s - pad + kw * dil of
// the tile's s * wv (from cs * wv * s on), and the epilogue adds them there and stores
// whole output rows.
//
// Channel-major tiles of narrow groups may stack W taps in M instead (template argument MF
// = 2 or 4; ImplicitGemmFpropPlan::wg_mfold): the 64 rows of a weight tile hold MF W taps
// of 64 / MF output channels, row s (64 / MF) + c W tap MF j + s of channel c in the
// phase's W tile j, and every MMA step runs the box at tile j's first tap's shift, so that
// the box is read once per MF W taps by an N of up to 256 positions (a position-major tile
// reads 64 box rows per MMA of only NC columns). The phase's W taps count as padded with
// zero taps to a multiple of MF (its box W halo (taps rounded up to MF - 1) x doff, W
// tiles MF x doff apart); output n is then the sum over s of row s (64 / MF) + c at
// position n + (MF - 1 - s) doff, which the epilogue adds up from every warp's staged rows.
//
// Memory-bound problems with a W stride s may run as W stride 1 over a copy with zeros
// inserted along W (TransposeParams::wup: input column w at copy column w * s), so that
// each tile stores whole output rows rather than every s-th column (see
// ImplicitGemmFpropPlan::wg_wup); the kernel itself is the same. Or a tile may run every
// W phase of its column segment in turn (Params::wm; the tiles then count only the D and H
// phases): with WPH = 2 (W stride 2, position-major tiles) into two accumulator sets, whose
// epilogue stages the two phases interleaved and stores each position's two adjacent
// outputs with one instruction, or runs of adjacent outputs a lane each where those pairs
// are not aligned (ImplicitGemmFpropPlan::wg_wpairs); with WPH = 1 each phase's
// epilogue places its outputs in a shared buffer and the last one stores the tile's rows
// (merged_phase_epilogue, ImplicitGemmFpropPlan::wg_wmerge, opt-in: slower).
//
// Weights are repacked once per call (pack_weight_wgmma_kernel) per (group, channel
// tile, phase, D tap, channel block), the (H tap, W tap) tiles of a K step adjacent, each
// 64 x bk in the K-major core-matrix layout: one bulk copy per K step.
//
// Roles (160 threads, 192 with kXp or a copier): warps 0-3 are the consumer warpgroup, warp
// 4's first lane the producer, warp 5 the transposer (kXp) or the copier (has_copier). With
// two consumer warpgroups (CG = 2: tiles of 128 channels, the weight tiles of channels 64 j ..
// 64 j + 63 for warpgroup j, the box shared; 288 or 320 threads, one block a multiprocessor)
// warps 0-7 consume, warp 8 produces and warp 9 copies or transposes (kXp: the box it
// transposes into the stage is the one both warpgroups read); with Params::coop_n the two share
// the weight tiles of 64 channels instead, each with a box of its own over half the rows. The
// grid is persistent (as many blocks as are resident, two per multiprocessor); the producer
// takes its block's index as its first tile and the later ones from a global counter (one
// atomic per tile, which balances phases of unequal work), decodes them, and fills a ring of stages, each a header (what the consumers need
// to know), the box of a K step (D tap, block of H taps, block of bk channels) and its
// weight tiles, completing on the stage's "full"
// mbarrier. It runs ahead into the next tile while the consumers finish one. The
// consumers issue, per K step, one m64 x N wgmma per (H tap, W tap, 32 bytes of
// channels), keep one K step in flight and release the previous stage ("empty",
// one arrival per consumer thread). At a tile's last K step they wait for all of it, copy the
// header's output description, release the stage, and run the epilogue: each warp
// stages its own 16 channels x 64 positions through shared memory and stores them along
// the positions (two elements per lane), adding the bias. Another block on the same
// multiprocessor runs its MMAs meanwhile.
//
// The header needs only the CUDA headers, so that a single-file build can inline it.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "convt/cuda/fast_divmod.hpp"
#include "convt/cuda/implicit_gemm_fprop_tma_sm90.cuh"
#include "convt/cuda/wgmma_ss_sm90.cuh"

namespace convt {
namespace cuda {
namespace wg {

using igemm::Elem;
using igemm::PhaseTaps;
using igemm::phase_taps;
using igemm::to_tf32;

constexpr int kM = 64;                // output channels per tile
constexpr int kMaxRows = 32;          // output rows per tile
constexpr int kMaxStages = 8;
constexpr int kBatch = 4;             // wgmma issued back to back between fences
constexpr int kHeaderBytes = 384;     // StageHeader slot (the headers sit apart from the stages)
constexpr int kEpiPitch = 72;         // floats per channel row of a warp's staging area
constexpr int kEpiBytes = 4 * 16 * kEpiPitch * 4;  // four warps x 16 channels
constexpr int kInfoBytes = 640;       // EpiInfo
constexpr int kBarrierBytes = 2 * kMaxStages * 8;
// Shared memory a block may use so that two share a multiprocessor (228 KB, 1 KB of it
// reserved per block), and what is left of it for the stages.
constexpr int kBlockSmem = 113 * 1024;
constexpr int kStageBudget =
    kBlockSmem - kEpiBytes - kInfoBytes - kBarrierBytes - kMaxStages * kHeaderBytes - 1024;
// Two consumer warpgroups (the kernel's CG = 2, ImplicitGemmFpropPlan::wg_coop): one block a
// multiprocessor (227 KB), each warpgroup with a staging area and an EpiInfo of its own.
constexpr int kCoopSmem = 227 * 1024;
constexpr int kCoopStageBudget = kCoopSmem - 2 * kEpiBytes - 2 * kInfoBytes - kBarrierBytes -
                                 kMaxStages * kHeaderBytes - 1024;

// The input transposed in the kernel (the kernel's kXp; see the top of this file): TMA loads
// a K step's raw box of x in pieces of kXpCols columns x bk channels x xp_piece_rows rows
// (4 KB, or less where the box has fewer rows) through a ring of pieces, and a warp of its
// own transposes them into the stages. Its area follows the barriers, 1024-byte aligned: the
// ring, then kXpMetaBytes of barriers, piece headers and a 16-byte trash row per lane (a
// second transposer warp's lanes share one row past the headers).
constexpr int kXpCols = 32;  // columns of a piece: lines of 64 (16-bit) or 128 bytes (float)
constexpr int kXpMinPieces = 4;
constexpr int kXpMaxPieces = 16;
constexpr int kXpMetaBytes = 1024;
// The channel-major kernels that read the copy of the input (not split TF32, no W taps
// folded, no W phase pairs) have a copier warp, warp 5, that makes the copy while the tiles
// run where the plan asks for it (Params::fused). (Not the position-major ones: their small
// tiles run three blocks per multiprocessor where the registers allow, which a sixth warp
// would not.)
__host__ __device__ constexpr bool has_copier(bool xp, bool raw, bool split, int nc, int fold,
                                              int wph) {
  return !xp && !raw && !split && nc == 0 && fold == 1 && wph == 1;
}
// Threads of a block: cg consumer warpgroups, the producer's warp, and warp 4 cg + 1 where
// it transposes or copies the input (xw warps from there where they transpose it).
__host__ __device__ constexpr int block_threads(bool xp, bool copier = false, int cg = 1,
                                                int xw = 1) {
  return 128 * cg + 32 + (xp ? 32 * xw : copier ? 32 : 0);
}
// Rows of a 4 KB piece, for K steps of bk channels of `elem` bytes (bk * elem: 16 to 128).
__host__ __device__ constexpr int xp_piece_rows(int bk, int elem) {
  return 4096 / (kXpCols * bk * elem);
}
// Pieces along a box row: its wbox columns from up to 7 before the first (a multiple of 8).
__host__ __device__ constexpr int xp_chunks(int wbox) { return (wbox + 7 + kXpCols - 1) / kXpCols; }
// Offset of the ring from the (1024-aligned) start of the block's shared memory, past the
// stages, headers, staging, the cg consumer warpgroups' EpiInfo and the barriers.
__host__ __device__ constexpr int xp_area_offset(int stages, int stage_bytes, int epi_bytes,
                                                 int cg = 1) {
  return (stages * stage_bytes + kMaxStages * kHeaderBytes + epi_bytes + cg * kInfoBytes +
          kBarrierBytes + 1023) / 1024 * 1024;
}

// The N (positions per tile) the kernel is built for; see wgmma_ss_sm90.cuh.
constexpr int kNumN = 6;
__host__ __device__ constexpr int n_choice(int i) {
  return i == 0 ? 128 : i == 1 ? 160 : i == 2 ? 192 : i == 3 ? 208 : i == 4 ? 224 : 256;
}

// W taps folded into N (position-major tiles, the kernel's FOLD): the fold counts the kernel
// is built for (a phase with fewer W taps leaves the rest of its columns zero), and the
// positions of a tile of NC channels folded FOLD times: as many m64 blocks as keep the
// accumulators at 128 registers a thread and the epilogue's sums (NC x positions floats) at
// 16 KB.
constexpr int kNumFolds = 5;
__host__ __device__ constexpr int fold_choice(int i) {
  return i == 0 ? 2 : i == 1 ? 3 : i == 2 ? 4 : i == 3 ? 5 : 7;
}
__host__ __device__ constexpr int fold_positions(int nc, int fold) {
  return nc * fold <= 64 && nc <= 16 ? 256 : nc * fold <= 128 ? 128 : 64;
}

// Channels per 16 bytes: one core-matrix row.
template <typename T>
struct Kc {
  static constexpr int value = 16 / int(sizeof(T));
};

// Stage flags: the tile's first K step, its last (the header then describes its outputs),
// no MMA (a phase without taps: its outputs are the bias), the producer's end, and with W
// phases merged (Params::wm) the last step of the tile's last W phase (its merged output
// rows are then stored).
enum : int { kFirst = 1, kLast = 2, kNoMma = 4, kEnd = 8, kTileEnd = 16 };

// What the producer tells the consumers about a stage (written before it arms "full").
struct StageHeader {
  int flags;
  int hcnt;     // H taps of this K step
  int cw;       // W taps of the phase
  int shift_h;  // box rows (flattened) between consecutive H taps: doff_h * wbox
  int doff_w;   // between consecutive W taps
  // The tile's output (valid with kLast): global channel of row 0, valid channels, rows
  // and columns; y offset of (row r, column 0) and between columns.
  // (Stacked planes: rows counts the box rows up to the last plane's last output row, and
  // base[] holds kNoRow for the rows between planes' outputs.)
  int co0, co_valid, rows, cols;
  int steps;    // K steps of the tile (valid with kFirst)
  int wsh;      // kRaw: box column 0's column in the raw box (TMA boxes start at a multiple
                // of 16 bytes along W)
  int fcw, fdoff;  // FOLD (valid with kLast): the phase's W taps and their spacing
  // W phases merged (valid with kLast): the W phase, and the tile's output columns (from
  // column 0 of base[], which is then the tile's first output column).
  int wm_rw, wm_ocols;
  // Split K (Params::splits > 1; valid with kLast): the tile, this part of its K steps and
  // the tile's parts.
  int split_tile, split_part, split_parts;
  int64_t col_step;
  int64_t base[kMaxRows];
  // The producer's own record (Params::w_reuse): the weight tiles the stage holds, as the
  // packed weight's byte offset (-1: none yet) and length.
  int64_t w_src, w_len;
};
static_assert(sizeof(StageHeader) <= kHeaderBytes, "header fits its slot");

// base[] of a box row that holds no output row (stacked planes: a plane's H halo).
constexpr int64_t kNoRow = INT64_MIN;

// The consumers' copy of a tile's output description, and the bias of its channels.
struct EpiInfo {
  int co0, co_valid, rows, cols;
  int fcw, fdoff;  // FOLD: the phase's W taps and their spacing (StageHeader)
  int wm_rw, wm_ocols, wm_end;  // W phases merged (StageHeader; wm_end: kTileEnd)
  // Split K (StageHeader; split_last: this warpgroup adds the parts' sums).
  int split_tile, split_part, split_parts, split_last;
  // W phase pairs: whether some row's base[] is odd (their epilogues then store runs of
  // adjacent outputs: their pairs are not all aligned for one store).
  int odd_rows;
  int64_t col_step;
  int64_t base[kMaxRows];
  float bias[kM];
};
static_assert(sizeof(EpiInfo) <= kInfoBytes, "info fits its slot");

// The taps and the positions of every phase along one dimension (stride s, kernel k,
// padding, dilation, out outputs; phase r has ceil((out - r) / s) positions), kept in the
// kernel's parameters for the producer's lookups per tile; strides above kTapTable are
// computed per tile instead.
constexpr int kTapTable = 8;
struct PhaseTable {
  PhaseTaps t[kTapTable];
  int ext[kTapTable];
  int s, pad, dil, k, out;
  void init(int s_, int pad_, int dil_, int k_, int out_) {
    s = s_;
    pad = pad_;
    dil = dil_;
    k = k_;
    out = out_;
    for (int r = 0; r < kTapTable; ++r) {
      t[r] = r < s ? phase_taps(r, s, pad, dil, k) : PhaseTaps{};
      ext[r] = r < s && out > r ? (out - r + s - 1) / s : 0;
    }
  }
  __device__ __forceinline__ PhaseTaps taps(int r) const {
    return s <= kTapTable ? t[r] : phase_taps(r, s, pad, dil, k);
  }
  __device__ __forceinline__ int extent(int r) const {
    return s <= kTapTable ? ext[r] : (out > r ? (out - r + s - 1) / s : 0);
  }
};

struct Params {
  const void* wp;    // packed weight (pack_weight_wgmma_kernel)
  const void* bias;  // (C_out,) with stride b_str, or nullptr
  void* y;           // output (N, C_out, OD, OH, OW), strides y_str
  int* counter;      // tile counter, zero at launch
  int64_t b_str;
  int64_t y_str[5];
  int batch, groups, cig, cog;
  int cw;        // output channels per tile: 64, or NC of a position-major tile
  int co_tiles;  // ceil(cog / cw)
  int cblocks;   // channel blocks of bk per group (cig padded)
  int bk;        // input channels per K step, a multiple of 2 kc
  int out[3], k[3], stride[3], pad[3], dil[3];
  int tmax[3];   // taps of the widest phase per dimension (the packed weight's blocks)
  int q[3];      // positions of phase 0 per dimension
  int wbox, hbox;  // box columns and rows (of one plane)
  int rows, wv;    // output rows per tile (of one plane), valid columns per box row
  // Planes stacked in a tile (ImplicitGemmFpropPlan::wg_stack): stack consecutive samples
  // (stack_n; the tensor map's dims are then (bk, W, H, N, G x channel blocks)) or D
  // positions of a sample, hbox box rows each; the tiles then count n_tiles groups of
  // samples and d_tiles groups of D positions (batch and q[0] where stack is 1).
  int stack, stack_n, n_tiles, d_tiles;
  int hb;          // H taps per K step (at most)
  // Taps split (ImplicitGemmFpropPlan::wg_tsplit): every K step one (D tap, H tap, W tap)
  // and channel block (hb is 1), the box loaded at the tap's own offset and holding the
  // tile's rows x columns exactly (no halo), so that whole planes stack without the halo's
  // positions; the step's one weight tile is the packing's (H tap, W tap) tile.
  int tsplit;
  int row_groups, col_segs;  // tiles per (n, qd) plane: rows of tiles, column segments
  int phases;
  int tiles;
  int stages, stage_bytes, box_bytes, tile_bytes;  // stage_bytes: a multiple of 1024
  int row_bytes;    // bytes of a box row: bk elements, 32, 64 or 128
  // Offsets within a stage: the weight tiles (after the box), and with split TF32 the
  // residual copies of the box and of the weight tiles. Split TF32: the input's residual
  // copy is the tensor map's channel blocks from split_ngc on, the weight's residual tiles
  // start w_small bytes into the packed weight.
  int w_off, xs_off, ws_off, split_ngc;
  int64_t w_small;
  // W taps scattered (FOLD tiles only; the kernel then runs W with stride 1 and one phase,
  // see the top of this file): sc 1; the W stride, the first input column of a segment
  // counted from its first output column divided by the stride, e0 = sc_clo * sc_s - pad,
  // the dilation, output columns per segment (sc_s * wv) and the sums' channel pitch.
  int sc, sc_s, sc_clo, sc_e0, sc_dil, sc_wo, sc_pitch;
  // W phases merged (unfolded tiles, W stride s > 1): wm 1; a tile then runs every W phase
  // of its segment in turn (phases counts the D and H phases only), each phase's outputs
  // go into a [channels][rows][wm_wo] buffer of T in the staging area (wm_wo = s * wv
  // output columns), and the tile's last phase stores its whole output rows.
  int wm, wm_wo;
  // A channels_last input read in place (1-D and 2-D, 16-bit types): the tensor map's dims
  // are (bk channels, W, H, cl_chunks channel blocks of a sample, N), not the copy's; 0: the
  // copy.
  int cl_chunks;
  // Bytes of the epilogue's staging area (at least kEpiBytes).
  int epi_bytes;
  // The input transposed in the kernel (kXp): pieces per box row (xp_chunks(wbox)), the
  // ring's pieces, rows per piece and a piece's bytes (kXpCols x bk x rows elements).
  int xp_chunks, xp_pieces, xp_rows, xp_piece_bytes;
  // 1: the producer loads a K step's raw pieces into the ring before its stage is free, and
  // the transposer waits for the stage (ImplicitGemmFpropPlan::wg_xp_early).
  int xp_early;
  // 1: a K step whose stage still holds its weight tiles (the stage's last K step copied the
  // same ones: the next tile's same step, where the tile's K steps divide the stages and
  // both tiles have one group, channel tile and phase) does not copy them again. 2 (a
  // measuring probe, wrong results): a K step keeps whatever weight tiles of its length its
  // stage holds, so that no weight tile is copied twice: the time without the weight tiles'
  // traffic from L2, an upper bound of what resident weights could give.
  int w_reuse;
  // 1 (a measuring probe, wrong results; not with the input transposed in the kernel): once
  // each stage has received a box, no K step copies its box again: the time without the
  // boxes' traffic from L2.
  int box_probe;
  // 1: the epilogues of channel-major and (unfolded) position-major tiles store four adjacent
  // outputs a lane where they can (store_runs_quads; opt-in, CONVT_WG_STORE4=1), instead of
  // two.
  int store4;
  // The input copied by the copier warps while the tiles run (has_copier kernels; no copy
  // kernel ran): fused 1, the input x (N, C, D, H, W, each sample's D x H x W positions
  // contiguous; in[] its D, H, W), the copy xt, copy_counter (zero at launch) handing out
  // units of copy_chunk consecutive positions of one (sample, group) and one channel block
  // (copy_chunks chunks per (sample, group)), chunk_done[(n G + g) copy_chunks + chunk] (zero
  // at launch) counting a chunk's channel blocks copied; the producer waits for the chunks
  // that hold the rows a tile reads. copy_pairs (16-bit types): 1, two positions per 4-byte
  // load (x's channel and sample strides and the plane even, x 4-byte aligned); 2, eight per
  // 16-byte load (the same, multiples of 8 and 16 bytes; copy_unit_vec8).
  int fused;
  int in[3];
  const void* x;
  int64_t x_str[5];
  void* xt;
  int* copy_counter;
  int* chunk_done;
  int copy_chunk, copy_chunks, copy_pairs;
  // Two consumer warpgroups (CG = 2): tiles of cw = 128 channels, warpgroup j multiplying the
  // stage's box by the weight tiles of channels 64 j .. 64 j + 63, which the producer copies
  // coop_w_half bytes after the first's (the packed weight's 64-channel tiles 2 c and 2 c + 1
  // of channel tile c). 0 with one warpgroup.
  int coop_w_half;
  // Two consumer warpgroups sharing the weight tiles (CG = 2 with coop_n = 1; opt-in, see
  // ImplicitGemmFpropPlan::wg_coop_n): tiles of cw = 64 channels and rows = 2 coop_rows
  // rows, warpgroup j computing rows j coop_rows .. (j + 1) coop_rows - 1 from a box of its
  // own (hbox rows from the tile's row j coop_rows on, coop_box_off bytes after the
  // first's), both multiplying the stage's one set of weight tiles (coop_w_half 0).
  int coop_n;
  int coop_rows;
  int coop_box_off;
  // Split K (channel-major tiles, not kSplit, W phases neither merged nor paired): the K
  // steps of each tile in `splits` parts (1: none), part j of tile t the work item t *
  // splits + j (tiles counts the work items). Each part's warpgroups store their
  // accumulators into partials (float32, [tile][part][warpgroup][kNA / 8][128 threads] of
  // float4) and count the part in split_done[tile * CG + warpgroup] (zero at launch); the
  // warpgroup that counts the last part sums every part's accumulators in part order (so
  // that the result does not depend on which part finished last) and runs the epilogue.
  int splits;
  int* split_done;
  float* partials;
  // Set at launch (set_producer_tables): the producer's divisors as FastDiv, and each
  // dimension's phase taps and extents. (Decoding a tile with integer divisions and
  // computing its phases' taps took the producer's one thread longer than the loads of
  // a tile of a few K steps: kb72, kb75.)
  FastDiv f_split, f_cot, f_ph, f_cs, f_rg, f_dt, f_nt, f_sw, f_sh;
  PhaseTable tab[3];
};

// The producer's divisors and phase tables of a launch's final parameters.
inline void set_producer_tables(Params& p) {
  p.f_split = FastDiv(p.splits > 1 ? p.splits : 1);
  p.f_cot = FastDiv(p.co_tiles);
  p.f_ph = FastDiv(p.phases);
  p.f_cs = FastDiv(p.col_segs);
  p.f_rg = FastDiv(p.row_groups);
  p.f_dt = FastDiv(p.d_tiles);
  p.f_nt = FastDiv(p.n_tiles);
  p.f_sw = FastDiv(p.stride[2]);
  p.f_sh = FastDiv(p.stride[1]);
  for (int d = 0; d < 3; ++d) p.tab[d].init(p.stride[d], p.pad[d], p.dil[d], p.k[d], p.out[d]);
}

// ---------------------------------------------------------------------------------------
// Preparation kernels
// ---------------------------------------------------------------------------------------
struct TransposeParams {
  const void* x;  // (N, C_in, D, H, W), strides x_str
  void* xt;       // [N*G][cblocks][D][H][wout][bk]
  int64_t x_str[5];
  int batch, groups, cig, cblocks, bk;
  int in[3];  // the input's D, H, W
  // Zeros inserted along W: xt column w holds input column w / wup where wup divides w,
  // zeros elsewhere; wout = (in[2] - 1) * wup + 1 columns (wup = 1: a plain copy).
  int wup, wout;
  // Split TF32 (float only): the residual x - tf32(x), rounded to TF32, written small_off
  // 16-byte units after each element's copy.
  int split;
  int64_t small_off;
  // Set to 1 where an input is infinite or NaN, if flag_nonfinite (split TF32, whose
  // residual products cannot carry them, and groups merged, where a zero weight of another
  // group times such an input would give NaN).
  int flag_nonfinite;
  int* nonfinite;
};

// Stores one 16-byte unit of xt (kc channels) at xt[i]: 16-bit types converted, float
// rounded to TF32, and with split TF32 the rounding residual at xt[i + small_off].
template <typename T>
__device__ __forceinline__ void store_xt(uint4* xt, int64_t i, const float (&v)[Kc<T>::value],
                                         const TransposeParams& p) {
  constexpr int kc = Kc<T>::value;
  union {
    uint4 u;
    T e[kc];
  } big, small;
#pragma unroll
  for (int j = 0; j < kc; ++j) {
    if constexpr (sizeof(T) == 4) {
      big.e[j] = __uint_as_float(to_tf32(v[j]));
      small.e[j] = __uint_as_float(to_tf32(v[j] - big.e[j]));
    } else {
      big.e[j] = Elem<T>::from_float(v[j]);
    }
  }
  xt[i] = big.u;
  if constexpr (sizeof(T) == 4) {
    if (p.split) xt[i + p.small_off] = small.u;
  }
  if (p.flag_nonfinite) {
    bool finite = true;
#pragma unroll
    for (int j = 0; j < kc; ++j) finite = finite && isfinite(v[j]);
    if (!finite) *p.nonfinite = 1;
  }
}

// One thread per (16 bytes of a row of xt): kc channels of a position, consecutive threads
// along the position's 16-byte pieces, then along W. Where the channels are innermost
// (channel stride 1: channels_last) and the piece is 16-byte aligned in x, one 16-byte load;
// else kc loads along the channel stride. One 16-byte store.
template <typename T>
__global__ void transpose_input_kernel(TransposeParams p) {
  constexpr int kc = Kc<T>::value;
  const T* x = static_cast<const T*>(p.x);
  uint4* xt = static_cast<uint4*>(p.xt);
  const int subs = p.bk / kc;
  const int64_t total = int64_t(p.batch) * p.groups * p.cblocks * subs * p.in[0] * p.in[1] * p.wout;
  const bool inner = p.x_str[1] == 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int sub = int(i % subs);
    int64_t r = i / subs;
    const int wo = int(r % p.wout);
    r /= p.wout;
    const bool hit = wo % p.wup == 0;  // an input column, not an inserted zero
    const int w = wo / p.wup;
    const int h = int(r % p.in[1]); r /= p.in[1];
    const int d = int(r % p.in[0]); r /= p.in[0];
    const int cb = int(r % p.cblocks); r /= p.cblocks;
    const int g = int(r % p.groups);
    const int64_t n = r / p.groups;
    const int ch = cb * subs + sub;
    const int64_t base = n * p.x_str[0] + d * p.x_str[2] + h * p.x_str[3] + w * p.x_str[4];
    const int c0 = ch * kc;
    const T* src = x + base + (int64_t(g) * p.cig + c0) * p.x_str[1];
    float v[kc];
    if (hit && inner && c0 + kc <= p.cig && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
      union {
        uint4 u;
        T e[kc];
      } in;
      in.u = __ldg(reinterpret_cast<const uint4*>(src));
#pragma unroll
      for (int j = 0; j < kc; ++j) v[j] = Elem<T>::to_float(in.e[j]);
    } else {
#pragma unroll
      for (int j = 0; j < kc; ++j)
        v[j] = hit && c0 + j < p.cig ? Elem<T>::to_float(src[int64_t(j) * p.x_str[1]]) : 0.f;
    }
    store_xt<T>(xt,
                (((((n * p.groups + g) * p.cblocks + cb) * p.in[0] + d) * p.in[1] + h) * p.wout +
                 wo) * subs + sub,
                v, p);
  }
}

// The copy for inputs whose W stride is 1 (PyTorch's contiguous NC... layout): one block
// per 128 positions of an input row (n, g, channel block, d, h; the launch passes a plane
// whose rows are contiguous as one row). It reads the block's bk
// channels along W into shared memory (coalesced; 16 bytes per thread where every row
// starts 16-byte aligned and W is a multiple of 16 bytes, kVec), then writes the tile's
// run of xt, which is contiguous ([128 wup positions][bk channels], the inserted zeros
// included), 16 bytes per thread.
constexpr int kTransposeW = 128;

template <typename T, bool kVec>
__global__ void __launch_bounds__(256) transpose_input_tiled_kernel(TransposeParams p) {
  constexpr int kc = Kc<T>::value;
  constexpr int kTw = kTransposeW;
  __shared__ float tile[8 * kc][kTw + 1];  // bk is at most 128 bytes of channels
  const T* x = static_cast<const T*>(p.x);
  uint4* xt = static_cast<uint4*>(p.xt);
  const int subs = p.bk / kc;
  const int wtiles = (p.in[2] + kTw - 1) / kTw;
  const int64_t tiles =
      int64_t(p.batch) * p.groups * p.cblocks * p.in[0] * p.in[1] * wtiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t r = t;
    const int w0 = int(r % wtiles) * kTw; r /= wtiles;
    const int h = int(r % p.in[1]); r /= p.in[1];
    const int d = int(r % p.in[0]); r /= p.in[0];
    const int cb = int(r % p.cblocks); r /= p.cblocks;
    const int g = int(r % p.groups);
    const int64_t n = r / p.groups;
    const int64_t base = n * p.x_str[0] + d * p.x_str[2] + h * p.x_str[3];
    const int c0 = g * p.cig + cb * p.bk;  // the block's first channel
    const int cvalid = min(p.bk, p.cig - cb * p.bk);
    const int wn = min(kTw, p.in[2] - w0);  // the tile's input columns
    if constexpr (kVec) {
      const int per = (wn + kc - 1) / kc;  // 16-byte loads per channel row
      for (int i = threadIdx.x; i < p.bk * per; i += blockDim.x) {
        const int c = i / per, v = i % per, w = w0 + v * kc;
        union {
          uint4 u;
          T e[kc];
        } u;
        u.u = make_uint4(0, 0, 0, 0);
        if (c < cvalid && w < p.in[2])
          u.u = *reinterpret_cast<const uint4*>(x + base + int64_t(c0 + c) * p.x_str[1] + w);
#pragma unroll
        for (int j = 0; j < kc; ++j) tile[c][v * kc + j] = Elem<T>::to_float(u.e[j]);
      }
    } else {
      for (int i = threadIdx.x; i < p.bk * wn; i += blockDim.x) {
        const int c = i / wn, wl = i % wn, w = w0 + wl;
        float v = 0.f;
        if (c < cvalid && w < p.in[2])
          v = Elem<T>::to_float(x[base + int64_t(c0 + c) * p.x_str[1] + w * p.x_str[4]]);
        tile[c][wl] = v;
      }
    }
    __syncthreads();
    const int64_t row = ((((n * p.groups + g) * p.cblocks + cb) * p.in[0] + d) * p.in[1] + h) *
                        int64_t(p.wout);
    const int wo0 = w0 * p.wup;
    const int won = min(kTw * p.wup, p.wout - wo0);  // xt columns of the tile
    for (int i = threadIdx.x; i < won * subs; i += blockDim.x) {
      const int wl = i / subs, sub = i % subs;
      const int wx = wl / p.wup;
      const bool hit = wx * p.wup == wl;
      float v[kc];
#pragma unroll
      for (int j = 0; j < kc; ++j) v[j] = hit ? tile[sub * kc + j][wx] : 0.f;
      store_xt<T>(xt, (row + wo0 + wl) * subs + sub, v, p);
    }
    __syncthreads();
  }
}

// For the kernel reading the input in place: where a tensor map cannot read the input as it
// is (its W stride is not 1, or its other strides or its address are not multiples of 16
// bytes, or groups do not tile its batch stride), it is first copied into the workspace as
// a contiguous (N, C, D, H, wp) tensor, wp = W rounded up to 16 bytes (the columns past W
// are never read: the tensor map's W is W).
struct PadParams {
  const void* x;  // (N, C, D, H, W), strides x_str
  void* xp;       // (N, C, D, H, wp), contiguous
  int64_t x_str[5];
  int64_t n, c;
  int in[3], wp;
};

template <typename T>
__global__ void __launch_bounds__(256) pad_input_kernel(PadParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* xp = static_cast<T*>(p.xp);
  const int64_t total = p.n * p.c * p.in[0] * p.in[1] * p.in[2];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int w = int(i % p.in[2]);
    int64_t r = i / p.in[2];
    const int h = int(r % p.in[1]); r /= p.in[1];
    const int d = int(r % p.in[0]); r /= p.in[0];
    const int64_t c = r % p.c, n = r / p.c;
    xp[((r * p.in[0] + d) * p.in[1] + h) * p.wp + w] =
        x[n * p.x_str[0] + c * p.x_str[1] + d * p.x_str[2] + h * p.x_str[3] + w * p.x_str[4]];
  }
}

struct PackParams {
  const void* w;  // (C_in, Cog, KD, KH, KW), strides w_str
  void* wp;
  int64_t w_str[5];
  int groups, cig, cog, cw, co_tiles, cblocks, bk;  // cw: columns per tile (64, NC or NC x fold)
  int k[3], stride[3], pad[3], dil[3], tmax[3];
  // W taps folded into a tile's columns (position-major tiles, see the kernel's FOLD): one
  // tile per H tap, column f * (cw / fold) + c holding W tap f of channel c (zero where the
  // phase has no tap f); tmax[2] is then 1. 1: one tile per (H tap, W tap).
  int fold;
  // W taps stacked in M (channel-major tiles, the kernel's MF): a tile's cw = 64 rows hold
  // mfold W taps of cw / mfold channels, row s (cw / mfold) + c W tap mfold j + s of
  // channel c in the phase's W tile j (zero past its taps); tmax[2] then counts those
  // tiles. 0 or 1: one W tap a tile.
  int mfold;
  int split;  // split TF32: the residual tiles follow the whole packed weight
  // Groups merged (ImplicitGemmFpropPlan::wg_gmerge): cig and cog are those of the merged
  // groups, and a merged group's input channel ci and output channel co weigh
  // w[ci][co % gm_cog] where ci / gm_cig == co / gm_cog (the same original group), zero
  // elsewhere; gm_cig, gm_cog are the original groups' channels. 0: not merged.
  int gm_cig, gm_cog;
  // Set to 1 where a weight is infinite or NaN, if flag_nonfinite (split TF32, whose
  // residual products cannot carry them, and zeros inserted along W, where such a weight
  // times an inserted zero would give NaN).
  int flag_nonfinite;
  int* nonfinite;
};

__host__ __device__ inline int64_t packed_weight_elems(const PackParams& p) {
  return int64_t(p.groups) * p.co_tiles * p.stride[0] * p.stride[1] * p.stride[2] * p.tmax[0] *
         p.cblocks * p.tmax[1] * p.tmax[2] * p.cw * p.bk;
}

// Wp[g][co tile][phase][D tap < tmax_d][channel block][tile < tmax_h * tmax_w][cw x bk]:
// the phase's tile i is (H tap i / tw, W tap i % tw), tw its W taps; unused tiles zero.
// (With fold > 1: tile i is H tap i, its column m W tap m / (cw / fold). With mfold > 1: tw
// counts the phase's W taps in tiles of mfold, row m of tile (i / tw, j) W tap mfold j + m /
// (cw / mfold).)
// Within a tile, element ((((ks * cw/8 + m / 8) * 2 + half) * 8 + m % 8) * kc + e) is
// channel m of the tile, input channel ks * 2kc + half * kc + e of the block: per MMA K
// step, cw/8 groups of 8 channels, each two core matrices (halves along K) of 8 rows of 16
// bytes (leading byte offset 128, stride byte offset 256: tma::wgmma_desc). The same
// layout is wgmma's A operand (cw = 64) or its B operand (position-major tiles, cw = NC).
//
// One block per tile (grid-stride): the tile's group, channel tile, phase, taps and channel
// block are decoded once, then each thread fills elements of the tile (the weight is read
// along its channels, one tap at a time; the packed tile is written contiguously).
template <typename T>
__global__ void __launch_bounds__(256) pack_weight_wgmma_kernel(PackParams p) {
  constexpr int kc = Kc<T>::value;
  const int64_t total = packed_weight_elems(p);
  const int tile = p.cw * p.bk;
  const int64_t tiles = total / tile;
  const int cw8 = p.cw / 8;
  const int mf = p.mfold > 1 ? p.mfold : 1;
  const int ncw = p.fold > 1 ? p.cw / p.fold : p.cw / mf;  // output channels per tile
  const T* w = static_cast<const T*>(p.w);
  T* wp = static_cast<T*>(p.wp);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t r = t;
    const int ti = int(r % (p.tmax[1] * p.tmax[2])); r /= p.tmax[1] * p.tmax[2];
    const int cb = int(r % p.cblocks); r /= p.cblocks;
    const int jd = int(r % p.tmax[0]); r /= p.tmax[0];
    const int rw = int(r % p.stride[2]); r /= p.stride[2];
    const int rh = int(r % p.stride[1]); r /= p.stride[1];
    const int rd = int(r % p.stride[0]); r /= p.stride[0];
    const int cot = int(r % p.co_tiles);
    const int g = int(r / p.co_tiles);
    const PhaseTaps td = phase_taps(rd, p.stride[0], p.pad[0], p.dil[0], p.k[0]);
    const PhaseTaps th = phase_taps(rh, p.stride[1], p.pad[1], p.dil[1], p.k[1]);
    const PhaseTaps tw = phase_taps(rw, p.stride[2], p.pad[2], p.dil[2], p.k[2]);
    // The tile's (H tap, W tap) counted within the phase, and whether the phase has it
    // (folded: the H tap; the W tap is the column's).
    int jh = ti, jw = 0;
    bool tap = false;
    if (p.fold > 1) {
      tap = jh < th.count;
    } else if (tw.count > 0) {
      const int twt = (tw.count + mf - 1) / mf;  // the phase's W tiles
      jh = ti / twt;
      jw = ti % twt;
      tap = ti < th.count * twt;
    }
    tap = tap && jd < td.count;
    const int kd = td.k0 + jd * td.step, kh = th.k0 + jh * th.step;
    const int64_t off0 = int64_t(g) * p.cig * p.w_str[0] + kd * p.w_str[2] + kh * p.w_str[3];
    T* out = wp + t * tile;
    for (int e = threadIdx.x; e < tile; e += blockDim.x) {
      const int kk = e % kc, mr = (e / kc) % 8, half = (e / (8 * kc)) % 2;
      const int rest = e / (16 * kc);
      const int mg = rest % cw8, ks = rest / cw8;
      const int m = mg * 8 + mr;
      const int ci = cb * p.bk + ks * 2 * kc + half * kc + kk;
      const int co = cot * ncw + m % ncw;
      const int jwm = p.fold > 1 ? m / ncw : jw * mf + m / ncw;
      float v = 0.f;
      const bool same_group = p.gm_cig == 0 || ci / p.gm_cig == co / p.gm_cog;
      if (tap && jwm < tw.count && ci < p.cig && co < p.cog && same_group) {
        const int kw = tw.k0 + jwm * tw.step;
        const int cow = p.gm_cig == 0 ? co : co % p.gm_cog;
        v = Elem<T>::to_float(w[off0 + int64_t(ci) * p.w_str[0] + cow * p.w_str[1] +
                                kw * p.w_str[4]]);
      }
      if constexpr (sizeof(T) == 4) {
        const float big = __uint_as_float(to_tf32(v));
        out[e] = big;
        if (p.split) out[e + total] = __uint_as_float(to_tf32(v - big));
      } else {
        out[e] = Elem<T>::from_float(v);
      }
      if (p.flag_nonfinite && !isfinite(v)) *p.nonfinite = 1;
    }
  }
}

// ---------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------

// Descriptor of the flattened input box at `addr` (a row, plus 32 bytes per MMA K step):
// K-major, rows of `row_bytes` (32, 64, 128) swizzled in their width, 8-row groups
// 8 * row_bytes apart. The swizzle follows the absolute shared-memory address (as TMA
// writes it), so a start address at any row needs no base offset (tested: setting the
// descriptor's base-offset field to the row's phase gives wrong results).
__device__ __forceinline__ uint64_t desc_x(uint32_t addr, int row_bytes) {
  const uint64_t mode = row_bytes == 128 ? 1 : row_bytes == 64 ? 2 : 3;
  return uint64_t((addr & 0x3ffffu) >> 4) | (uint64_t(1) << 16) |
         (uint64_t((8 * row_bytes) >> 4) << 32) | (mode << 62);
}

// A shared-memory descriptor moved on by `units` 16-byte units: an add to its start address
// field alone (bits 0-13; shared-memory addresses stay below 2^18 bytes, so nothing carries
// out of it).
__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t units) {
  return (d & 0xffffffff00000000ull) | uint64_t(uint32_t(d) + units);
}

// The consumer warpgroup's barrier (one per warpgroup: barrier 1 + its index).
// (Immediate barrier ids: a register id makes ptxas reserve all 16 barriers.)
__device__ __forceinline__ void named_sync_consumers(int wgi = 0) {
  if (wgi == 0) {
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  } else {
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
  }
}

// Stores two adjacent outputs (a at y[off], b at y[off + 1]) with one instruction; the
// caller checks that y + off is aligned to both.
template <typename T>
__device__ __forceinline__ void store_pair(T* y, int64_t off, float a, float b) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float2*>(y + off) = make_float2(a, b);
  } else {
    union {
      uint32_t u;
      T e[2];
    } v;
    v.e[0] = Elem<T>::from_float(a);
    v.e[1] = Elem<T>::from_float(b);
    *reinterpret_cast<uint32_t*>(y + off) = v.u;
  }
}

// One MMA step (an (H tap, W tap, 32 bytes of channels) of a K step) of the tile at weight
// descriptor dw and input descriptor dx. Channel-major tiles (kPos false): one m64 x NA
// wgmma, weights as A. Position-major tiles: MB wgmma m64 x NA, the input's rows
// 64 i .. 64 i + 63 as A (mstep: 64 rows in descriptor units), the weights as B. Split TF32
// adds the residual products (dxs, dws: the residual copies' offsets).
template <typename T, int NA, int MB, bool kPos, bool kSplit>
__device__ __forceinline__ void mma_step(float (&acc)[MB][NA / 2], uint64_t dw, uint64_t dx,
                                         int accumulate, uint64_t mstep, uint64_t dws,
                                         uint64_t dxs) {
  if constexpr (kPos) {
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      const uint64_t xi = dx + uint64_t(i) * mstep;
      WgmmaSS<T, NA>::run(acc[i], xi, dw, accumulate);
      if constexpr (kSplit) {
        WgmmaSS<T, NA>::run(acc[i], xi + dxs, dw, 1);
        WgmmaSS<T, NA>::run(acc[i], xi, dw + dws, 1);
      }
    }
  } else {
    WgmmaSS<T, NA>::run(acc[0], dw, dx, accumulate);
    if constexpr (kSplit) {
      WgmmaSS<T, NA>::run(acc[0], dw, dx + dxs, 1);
      WgmmaSS<T, NA>::run(acc[0], dw + dws, dx, 1);
    }
  }
}

// The epilogue's stores of a warp: positions nn and nn + 1 of the tile (flattened over box
// rows of wbox columns) for channels m0 .. m0 + kCh - 1 of the tile, staged channel i at
// staged[i * pitch] (two floats), plus the bias, where the position is an output (row
// below `rows`, column below `cols`) and the channel below m0 + mcount. One 2-element
// store where both are outputs and adjacent in y; zero: a tile without MMAs (its
// accumulators are stale), which stores the bias.
// The position's offsets and the pair test are worked out once; per channel the lane then
// only loads, adds the bias, converts and stores, stepping one pointer by the channel
// stride (a warp's 16 channels unrolled kUnroll at a time where all are valid, the zero case
// a branch of its own: warp-uniform, so neither costs a select or a test per element).
// (Unrolling all 16 in the channel-major kernels, whose accumulators take most registers,
// made ptxas move the accumulators to the stack: 416-512 bytes at N = 208..256.)
// kBias: the layer has a bias (info->bias holds it); without one (every KernelBench layer)
// the bias is neither loaded nor added: a load and two adds of the five or six instructions
// a channel takes here.
template <typename T, bool kBias = true>
__device__ __forceinline__ void store_channel(T* q, int64_t d1, const float2 v, const float* b,
                                              bool pair, bool v0, bool v1) {
  const float bv = kBias ? *b : 0.f;
  const float a0 = kBias ? v.x + bv : v.x, a1 = kBias ? v.y + bv : v.y;
  if (pair) {
    store_pair<T>(q, 0, a0, a1);
  } else {
    if (v0) q[0] = Elem<T>::from_float(a0);
    if (v1) q[d1] = Elem<T>::from_float(a1);
  }
}

template <typename T, int kUnroll, int kCh = 16, bool kBias = true>
__device__ __forceinline__ void store_two_positions(T* y, const float* staged, int pitch, int nn,
                                                    int m0, int mcount, const EpiInfo* info,
                                                    int wbox, int rows, int cols, int64_t ys1,
                                                    bool zero) {
  const int r0 = nn / wbox, c0 = nn - r0 * wbox;
  const int r1 = c0 + 1 == wbox ? r0 + 1 : r0, c1 = c0 + 1 == wbox ? 0 : c0 + 1;
  const bool v0 = r0 < rows && c0 < cols && info->base[r0] != kNoRow,
             v1 = r1 < rows && c1 < cols && info->base[r1] != kNoRow;
  if (!(v0 || v1) || mcount <= 0) return;
  const int64_t col_step = info->col_step;
  const int64_t o0 = v0 ? info->base[r0] + c0 * col_step : 0;
  const int64_t o1 = v1 ? info->base[r1] + c1 * col_step : 0;
  const bool pair = v0 && v1 && o1 == o0 + 1 && ys1 % 2 == 0 &&
                    reinterpret_cast<uintptr_t>(y + o0) % (2 * sizeof(T)) == 0;
  // q: output element (position nn, channel m0 + i) for the channel at hand; q[d1] the
  // position nn + 1's.
  T* q = y + (o0 + int64_t(info->co0 + m0) * ys1);
  const int64_t d1 = o1 - o0;
  const float* bias = info->bias + m0;
  if (zero) {
#pragma unroll 1
    for (int i = 0; i < min(mcount, kCh); ++i, q += ys1)
      store_channel<T>(q, d1, make_float2(0.f, 0.f), bias + i, pair, v0, v1);
  } else if (mcount >= kCh) {
#pragma unroll kUnroll
    for (int i = 0; i < kCh; ++i, q += ys1)
      store_channel<T, kBias>(q, d1, *reinterpret_cast<const float2*>(staged + i * pitch),
                              bias + i, pair, v0, v1);
  } else {
#pragma unroll 1
    for (int i = 0; i < mcount; ++i, q += ys1)
      store_channel<T, kBias>(q, d1, *reinterpret_cast<const float2*>(staged + i * pitch),
                              bias + i, pair, v0, v1);
  }
}

// store_two_positions with the layer's bias, or without one (has_bias: uniform).
template <typename T, int kUnroll, int kCh = 16>
__device__ __forceinline__ void store_two_positions_b(bool has_bias, T* y, const float* staged,
                                                      int pitch, int nn, int m0, int mcount,
                                                      const EpiInfo* info, int wbox, int rows,
                                                      int cols, int64_t ys1, bool zero) {
  if (has_bias) {
    store_two_positions<T, kUnroll, kCh, true>(y, staged, pitch, nn, m0, mcount, info, wbox,
                                               rows, cols, ys1, zero);
  } else {
    store_two_positions<T, kUnroll, kCh, false>(y, staged, pitch, nn, m0, mcount, info, wbox,
                                                rows, cols, ys1, zero);
  }
}

// Four adjacent outputs in one store (16 bytes of float, 8 of a 16-bit type; y + off aligned
// to them).
template <typename T>
__device__ __forceinline__ void store_quad(T* y, int64_t off, float a, float b, float c,
                                           float d) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(y + off) = make_float4(a, b, c, d);
  } else {
    union {
      uint2 u;
      T e[4];
    } v;
    v.e[0] = Elem<T>::from_float(a);
    v.e[1] = Elem<T>::from_float(b);
    v.e[2] = Elem<T>::from_float(c);
    v.e[3] = Elem<T>::from_float(d);
    *reinterpret_cast<uint2*>(y + off) = v.u;
  }
}

// An epilogue pass's stores four outputs at a time (Params::store4, opt-in,
// CONVT_WG_STORE4=1). The warp's staging holds 16 channels (staged[i * pitch + q]: channel
// m0 + i) of kRuns runs of kLen outputs each (run r's staged at q = r * kLen), whose offsets
// in y (for channel co0) offset(r, j) gives, -1 for none: channel-major tiles one run of 64
// tile positions a pass, position-major ones kRuns runs of 16 (a warp's positions in each
// 64-position block), W phase pairs one run of 32 positions' two phases interleaved. A
// channel's runs take kRuns kLen / 4 lanes, so that the warp stores G = 32 / that channels
// at once (group g: channels g, g + G, ...; their outputs all at one alignment where G ys1
// is a multiple of 4, else element by element). In each run a lane takes 4 consecutive
// outputs from the run's first whose offset is 4-element aligned in y (h outputs in): one
// store a channel (16 bytes of float, 8 of a 16-bit type) where the four are adjacent and
// aligned in y, else one a pair where a pair is (adjacent, at an even element), one an
// element otherwise; the run's last lane (h > 0) stores the h outputs
// before its first quad and the 4 - h after its last, element by element. The same stores
// as store_two_positions in half as many instructions where a run's outputs are contiguous,
// whatever their alignment (store_two_positions pairs only outputs at even elements:
// layouts of odd width store one element at a time). zero: a tile without MMAs (its staging
// is stale), which stores the bias.
template <typename T, bool kBias, int kRuns, int kLen, typename Offset>
__device__ __forceinline__ void store_runs_quads(T* y, const float* staged, int pitch,
                                                 Offset offset, int lane, int m0, int mcount,
                                                 const EpiInfo* info, int64_t ys1, bool zero) {
  constexpr int kQuads = kLen / 4;            // quads of a run
  constexpr int kLanes = kRuns * kQuads;      // lanes of a channel
  constexpr int kG = 32 / kLanes;             // channels stored at once
  static_assert(kLen % 4 == 0 && 32 % kLanes == 0, "whole quads, whole channel groups");
  const int grp = lane / kLanes, li = lane % kLanes, run = li / kQuads, k = li % kQuads;
  if (grp >= mcount) return;
  const int cend = min(mcount, 16);
  // The group's first channel (m0 + grp); each next one G ys1 further.
  T* yc = y + int64_t(info->co0 + m0 + grp) * ys1;
  const int64_t cstep = int64_t(kG) * ys1;
  const int64_t o_first = offset(run, 0);
  const int h =
      o_first < 0 ? 0 : int((4 - (reinterpret_cast<uintptr_t>(yc + o_first) / sizeof(T)) % 4) % 4);
  const float* bias = info->bias + m0;
  const bool add_bias = kBias || zero;
  const float* src = staged + run * kLen;
  auto value = [&](int i, int j) {
    return (zero ? 0.f : src[i * pitch + j]) + (add_bias ? bias[i] : 0.f);
  };
  auto store_one = [&](int j) {
    const int64_t o = offset(run, j);
    if (o < 0) return;
    T* q = yc + o;
#pragma unroll 1
    for (int i = grp; i < cend; i += kG, q += cstep) *q = Elem<T>::from_float(value(i, j));
  };
  if (h == 0 || k < kQuads - 1) {
    const int j0 = h + 4 * k;
    // (Aligned: a run crossing box rows, or starting at no output, may leave its quads off
    // the alignment h gave; and the group's every channel with it.)
    const int64_t o0 = offset(run, j0);
    bool quad = o0 >= 0 && cstep % 4 == 0 &&
                reinterpret_cast<uintptr_t>(yc + o0) % (4 * sizeof(T)) == 0;
#pragma unroll 1
    for (int e = 1; e < 4 && quad; ++e) quad = offset(run, j0 + e) == o0 + e;
    if (quad) {
      T* q = yc + o0;
#pragma unroll 2
      for (int i = grp; i < cend; i += kG, q += cstep)
        store_quad<T>(q, 0, value(i, j0), value(i, j0 + 1), value(i, j0 + 2), value(i, j0 + 3));
    } else {
      // (Two pairs where they are adjacent and aligned for one store, as
      // store_two_positions would store them; else one element at a time.)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int64_t oa = offset(run, j0 + e);
        const bool pair = oa >= 0 && cstep % 2 == 0 &&
                          reinterpret_cast<uintptr_t>(yc + oa) % (2 * sizeof(T)) == 0 &&
                          offset(run, j0 + e + 1) == oa + 1;
        if (pair) {
          T* q = yc + oa;
#pragma unroll 1
          for (int i = grp; i < cend; i += kG, q += cstep)
            store_pair<T>(q, 0, value(i, j0 + e), value(i, j0 + e + 1));
        } else {
          store_one(j0 + e);
          store_one(j0 + e + 1);
        }
      }
    }
  } else {
    for (int j = 0; j < h; ++j) store_one(j);
    for (int j = kLen - 4 + h; j < kLen; ++j) store_one(j);
  }
}

// store_runs_quads over runs of tile positions (flattened over box rows of wbox columns; run
// r's first at tile position pos0 + r * step), with the layer's bias or without one
// (has_bias: uniform).
template <typename T, int kRuns, int kLen>
__device__ __forceinline__ void store_runs_quads_b(bool has_bias, T* y, const float* staged,
                                                   int pitch, int pos0, int step, int lane,
                                                   int m0, int mcount, const EpiInfo* info,
                                                   int wbox, int rows, int cols, int64_t ys1,
                                                   int npos, bool zero) {
  const int64_t col_step = info->col_step;
  auto offset = [=](int run, int j) -> int64_t {
    const int nn = pos0 + run * step + j;
    const int r = nn / wbox, c = nn - r * wbox;
    if (nn >= npos || r >= rows || c >= cols || info->base[r] == kNoRow) return -1;
    return info->base[r] + c * col_step;
  };
  if (has_bias)
    store_runs_quads<T, true, kRuns, kLen>(y, staged, pitch, offset, lane, m0, mcount, info, ys1,
                                           zero);
  else
    store_runs_quads<T, false, kRuns, kLen>(y, staged, pitch, offset, lane, m0, mcount, info,
                                            ys1, zero);
}

// kCh channels of one output whose channels are innermost (out[i], channel i) from staged
// values src[i * pitch] (zeros where `zero`) plus bias[i], 16 bytes per store where out is
// aligned to them.
template <typename T, int kCh>
__device__ __forceinline__ void store_channels_packed(T* out, const float* src, int pitch,
                                                      const float* bias, bool zero = false) {
  constexpr int kPer = 16 / int(sizeof(T));  // elements per 16-byte store
  static_assert(kCh % kPer == 0, "whole 16-byte stores");
  if (reinterpret_cast<uintptr_t>(out) % 16 == 0) {
#pragma unroll
    for (int s = 0; s < kCh / kPer; ++s) {
      union {
        uint4 u;
        T v[kPer];
      } pk;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int i = s * kPer + j;
        pk.v[j] = Elem<T>::from_float((zero ? 0.f : src[i * pitch]) + bias[i]);
      }
      *reinterpret_cast<uint4*>(out + s * kPer) = pk.u;
    }
  } else {
#pragma unroll 4
    for (int i = 0; i < kCh; ++i)
      out[i] = Elem<T>::from_float((zero ? 0.f : src[i * pitch]) + bias[i]);
  }
}

// An output whose channels are innermost (channel stride 1, e.g. channels_last): a lane
// stores kCh channels of one staged position (staged[i * pitch + q]: channel m0 + i of
// position q of the staging, output position nn of the tile) together, 16 bytes per store
// where aligned, instead of one element per channel, the channels' positions far apart.
template <typename T, int kCh>
__device__ __forceinline__ void store_channels_of_position(T* y, const float* staged, int pitch,
                                                           int q, int nn, int m0,
                                                           const EpiInfo* info, int wbox,
                                                           int rows, int cols, bool zero) {
  const int r = nn / wbox, c = nn - r * wbox;
  if (r >= rows || c >= cols || info->base[r] == kNoRow) return;
  store_channels_packed<T, kCh>(y + (info->base[r] + c * info->col_step + info->co0 + m0),
                                staged + q, pitch, info->bias + m0, zero);
}

// Channel-major tiles whose output has its channels innermost: each lane stores the warp's
// 16 channels of positions lane and lane + 32 of the pass (staged[i * kEpiPitch + q]).
template <typename T, int N>
__device__ __forceinline__ void store_position_channels(T* y, const float* staged, int pass,
                                                        int lane, int m0, const EpiInfo* info,
                                                        int wbox, int rows, int cols,
                                                        bool zero) {
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int q = lane + 32 * k, nn = pass * 64 + q;
    if (nn < N)
      store_channels_of_position<T, 16>(y, staged, kEpiPitch, q, nn, m0, info, wbox, rows, cols,
                                        zero);
  }
}

// After a wgmma wait: the accumulators count as written here, so that the compiler moves
// no read of them (the epilogue's, or a copy to local memory) above the wait. (wgmma
// writes them asynchronously; to the compiler the asm statement that issued it wrote
// them.)
template <int MB, int NA2>
__device__ __forceinline__ void fence_accumulators(float (&acc)[MB][NA2]) {
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NA2; ++j) asm volatile("" : "+f"(acc[i][j])::"memory");
}

// W phases merged (Params::wm, unfolded tiles): the epilogue of one W phase of a tile. Its
// outputs plus the bias, converted to T, go into the buffer buf[channel][row][wm_wo] at
// column c * s + rw of box column c (column 0: the tile's first output column); after the
// tile's last phase the warpgroup stores the buffer's rows, each a run of ocols adjacent
// outputs from base[row] on, two elements per store where they are aligned: whole 32-byte
// sectors, where a tile of one W phase writes every s-th element. (Every accumulator is
// read on every path, targets past the outputs going to the thread's own slot past the
// buffer, as in the folded epilogue: ptxas serializes the wgmma otherwise, C7520.)
template <typename T>
__device__ __forceinline__ void store_pair_t(T* y, T a, T b) {
  union {
    uint64_t u8;
    uint32_t u4;
    T e[2];
  } v;
  v.e[0] = a;
  v.e[1] = b;
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<uint64_t*>(y) = v.u8;
  } else {
    *reinterpret_cast<uint32_t*>(y) = v.u4;
  }
}

template <typename T, int N, int NC>
__device__ __forceinline__ void merged_phase_epilogue(
    float (&acc)[NC > 0 ? N / 64 : 1][NC > 0 ? NC / 2 : N / 2], T* buf, float* stg, T* y,
    const Params& p, const EpiInfo* info, int co_valid, int rows, int cols, int64_t ys1,
    bool has_mma, int warp, int g8, int t4) {
  constexpr int kCh = NC > 0 ? NC : kM;
  const int sw = p.stride[2], wo = p.wm_wo, rw = info->wm_rw, wbox = p.wbox;
  const int plane = p.rows * wo;  // buffer elements per channel
  const int trash = kCh * plane + int(threadIdx.x);
  const float* bias = info->bias;
  // Box row of position m < 256 without a division or a branch: (m + 0.5) / wbox is at
  // least 1 / 512 from the nearest integers, far more than the float product's error.
  const float inv_wbox = __frcp_rn(float(wbox));
  auto box_row = [&](int m) { return __float2int_rz((float(m) + 0.5f) * inv_wbox); };
  if constexpr (NC > 0) {
    // acc[i][4 pp + 2 h + e]: position 64 i + 16 warp + 8 h + g8, channel 8 pp + 2 t4 + e.
#pragma unroll
    for (int i = 0; i < N / 64; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = 64 * i + 16 * warp + 8 * h + g8;
        const int r = box_row(m), c = m - r * wbox;
        const bool ok = r < rows && c < cols;
        const int at0 = r * wo + c * sw + rw;
#pragma unroll
        for (int pp = 0; pp < NC / 8; ++pp)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int ch = 8 * pp + 2 * t4 + e;
            const int at = ok && ch < co_valid ? ch * plane + at0 : trash;
            const float v = (has_mma ? acc[i][4 * pp + 2 * h + e] : 0.f) + bias[ch];
            buf[at] = Elem<T>::from_float(v);
          }
      }
  } else {
    // Channel-major: acc[0][4 pi + 2 h + e] is channel 16 warp + 8 h + g8, position
    // 8 pi + 2 t4 + e. The warp stages its 16 channels 64 positions at a time (as the
    // unmerged epilogue does; placing the accumulators straight into the buffer, fully
    // unrolled, made ptxas spill them at N = 192..256), then each lane places positions
    // 2 lane and 2 lane + 1 of the pass.
    const int lane = int(threadIdx.x % 32);
    const int m0 = 16 * warp;
#pragma unroll
    for (int pass = 0; pass < (N + 63) / 64; ++pass) {
#pragma unroll
      for (int pp = 0; pp < 8; ++pp) {
        const int pi = pass * 8 + pp;
        if (pi < N / 8) {
#pragma unroll
          for (int h = 0; h < 2; ++h)
            *reinterpret_cast<float2*>(stg + (8 * h + g8) * kEpiPitch + 8 * pp + 2 * t4) =
                make_float2(acc[0][4 * pi + 2 * h], acc[0][4 * pi + 2 * h + 1]);
        }
      }
      __syncwarp();
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int n = pass * 64 + 2 * lane + e;
        const int r = box_row(n), c = n - r * wbox;
        if (n < N && r < rows && c < cols) {
          T* dst = buf + m0 * plane + r * wo + c * sw + rw;
#pragma unroll 4
          for (int i = 0; i < min(16, co_valid - m0); ++i)
            dst[i * plane] = Elem<T>::from_float(
                (has_mma ? stg[i * kEpiPitch + 2 * lane + e] : 0.f) + bias[m0 + i]);
        }
      }
      __syncwarp();
    }
  }
  // (Broadcast: the test is uniform then, C7520 otherwise.)
  if (!__shfl_sync(0xffffffffu, info->wm_end, 0)) return;
  named_sync_consumers();  // every W phase's outputs are in the buffer
  const int lane = int(threadIdx.x % 32);
  const int ocols = info->wm_ocols;
  const int64_t cstep = info->col_step;
#pragma unroll 1
  for (int rr = warp; rr < co_valid * rows; rr += 4) {
    const int ch = rr / rows, r = rr - ch * rows;
    const T* src = buf + ch * plane + r * wo;
    T* dst = y + info->base[r] + int64_t(info->co0 + ch) * ys1;
    if (cstep == 1) {
      // (Pairs from the first element aligned to two.)
      const int lead = min(int((reinterpret_cast<uintptr_t>(dst) / sizeof(T)) & 1), ocols);
      if (lane == 0 && lead) dst[0] = src[0];
#pragma unroll 2
      for (int j = lead + 2 * lane; j + 1 < ocols; j += 64)
        store_pair_t<T>(dst + j, src[j], src[j + 1]);
      if (lane == 0 && ((ocols - lead) & 1)) dst[ocols - 1] = src[ocols - 1];
    } else {
#pragma unroll 4
      for (int j = lane; j < ocols; j += 32) dst[j * cstep] = src[j];
    }
  }
  // (The warp reconverges before the next tile's wgmma: C7520 otherwise.)
  __syncwarp();
}

// A batch of MMA steps (count `left` of them, at most kBatch) into the accumulators A,
// committed as one group. (Straight-line wgmma per count, each run with its commit: ptxas
// closes a group where a branch leaves a run of wgmma, so a test between two wgmma, or a
// commit after the branches, gave a group per wgmma or an empty group after the batch,
// and wait_group then waited for more than it names.)
template <int kCount, typename T, int NA, int MB, bool kPos, bool kSplit>
__device__ __forceinline__ void issue_run(float (&A)[MB][NA / 2], const uint64_t (&da)[kBatch],
                                          const uint64_t (&db)[kBatch], int& accumulate,
                                          uint64_t mstep, uint64_t dws, uint64_t dxs) {
#pragma unroll
  for (int u = 0; u < kCount; ++u) {
    mma_step<T, NA, MB, kPos, kSplit>(A, da[u], db[u], accumulate, mstep, dws, dxs);
    accumulate = 1;
  }
  tma::wgmma_commit();
}

template <typename T, int NA, int MB, bool kPos, bool kSplit>
__device__ __forceinline__ void issue_batch(float (&A)[MB][NA / 2], const uint64_t (&da)[kBatch],
                                            const uint64_t (&db)[kBatch], int left,
                                            int& accumulate, uint64_t mstep, uint64_t dws,
                                            uint64_t dxs) {
  static_assert(kBatch == 4, "the partial batches below");
  if (left >= kBatch) {
    issue_run<4, T, NA, MB, kPos, kSplit>(A, da, db, accumulate, mstep, dws, dxs);
  } else if (left == 3) {
    issue_run<3, T, NA, MB, kPos, kSplit>(A, da, db, accumulate, mstep, dws, dxs);
  } else if (left == 2) {
    issue_run<2, T, NA, MB, kPos, kSplit>(A, da, db, accumulate, mstep, dws, dxs);
  } else {
    issue_run<1, T, NA, MB, kPos, kSplit>(A, da, db, accumulate, mstep, dws, dxs);
  }
}

// W phase pairs (WPH = 2) on channel-major tiles (64 channels x N positions, N <= 128): the
// epilogue of a tile whose two W phases' accumulators are acc (phase 0) and acc2 (phase 1),
// acc[0][4 pi + 2 h + e] being channel 16 warp + 8 h + g8 at box position 8 pi + 2 t4 + e.
// Box position m of both is output columns 2 c and 2 c + 1 (c = m % wbox, from the tile's
// first output column, base[]). Per pass of 32 positions each warp stages its 16 channels
// with the two phases interleaved (position q's phase e at stg[channel * kEpiPitch + 2 q +
// e], one 16-byte store per thread and accumulator pair), then lane l stores position 32
// pass + l's two adjacent outputs of each channel with one instruction where they are
// aligned: a warp's store is 64 adjacent outputs of a channel, where a tile of one W phase
// writes every other element (two partial writes per 32-byte sector). Where the pairs are
// not all aligned for one store (an odd channel stride, rows starting at odd elements:
// EpiInfo::odd_rows), lane l stores staged outputs l and l + 32 of the pass instead, so that
// each store is still 32 adjacent outputs of a channel rather than every other element of
// 64 twice. A phase without MMAs (no W tap) stores the bias alone.
template <typename T, int N>
__device__ __forceinline__ void pair_epilogue_cm(float (&acc)[1][N / 2], float (&acc2)[1][N / 2],
                                                 bool mma0, bool mma1, int cols0, float* stg,
                                                 T* y, const EpiInfo* info, int co_valid,
                                                 int rows, int cols1, int64_t ys1, int wbox,
                                                 int warp, int g8, int t4, bool store4) {
  static_assert(N % 32 == 0 && N <= 128, "passes of 32 positions, two accumulator sets");
  static_assert(64 <= kEpiPitch, "a pass's 64 staged outputs fit a channel row");
  const int lane = int(threadIdx.x % 32);
  const int m0 = 16 * warp, mcount = min(co_valid - m0, 16);
  const int64_t cstep = info->col_step;
  T* const yc = y + int64_t(info->co0 + m0) * ys1;
  const float* bias = info->bias + m0;
  const float inv_wbox = __frcp_rn(float(wbox));
  // runs: pairs of outputs not all aligned for one store (an odd channel stride, a row
  // starting at an odd element).
  const bool runs = cstep == 1 && ys1 != 1 &&
                    (ys1 % 2 != 0 || info->odd_rows ||
                     reinterpret_cast<uintptr_t>(yc) % (2 * sizeof(T)) != 0);
#pragma unroll
  for (int pass = 0; pass < N / 32; ++pass) {
#pragma unroll
    for (int pp = 0; pp < 4; ++pp) {
      const int pi = 4 * pass + pp;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 v = make_float4(mma0 ? acc[0][4 * pi + 2 * h] : 0.f,
                                     mma1 ? acc2[0][4 * pi + 2 * h] : 0.f,
                                     mma0 ? acc[0][4 * pi + 2 * h + 1] : 0.f,
                                     mma1 ? acc2[0][4 * pi + 2 * h + 1] : 0.f);
        *reinterpret_cast<float4*>(stg + (8 * h + g8) * kEpiPitch + 16 * pp + 4 * t4) = v;
      }
    }
    __syncwarp();
    if (ys1 == 1 && mcount == 16) {
      // (Channels innermost, e.g. channels_last: lane l stores staged outputs l and l + 32
      // of the pass, each its warp's 16 channels together, 16 bytes per store where
      // aligned, in place of 16 stores of one element, channels' outputs far apart.)
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const int o = lane + 32 * k, e = o & 1;
        const int mo = 32 * pass + (o >> 1);
        const int ro = mo / wbox, co = mo - ro * wbox;
        if (ro >= rows || co >= (e == 0 ? cols0 : cols1)) continue;
        store_channels_packed<T, 16>(yc + (info->base[ro] + int64_t(2 * co + e) * cstep),
                                     stg + o, kEpiPitch, bias);
      }
      __syncwarp();
      continue;
    }
    if (store4 && cstep == 1 && ys1 % 2 == 0) {
      // (Four outputs a lane, Params::store4: the pass's 64 interleaved outputs as one run.)
      auto offset = [&](int, int j) -> int64_t {
        const int e = j & 1, mo = 32 * pass + (j >> 1);
        const int ro = mo / wbox, co = mo - ro * wbox;
        if (ro >= rows || co >= (e == 0 ? cols0 : cols1)) return -1;
        return info->base[ro] + int64_t(2 * co + e) * cstep;
      };
      store_runs_quads<T, true, 1, 64>(y, stg, kEpiPitch, offset, lane, m0, co_valid - m0, info,
                                       ys1, false);
      __syncwarp();
      continue;
    }
    if (runs) {
      // (Pairs not aligned for one store: lane l stores staged outputs l and l + 32 of the
      // pass, each store 32 adjacent outputs of a channel.)
      if (mcount > 0) {
        T* q0 = yc;
        T* q1 = yc;
        bool w0 = false, w1 = false;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int e = lane & 1, mo = 32 * pass + 16 * k + (lane >> 1);
          const int ro = __float2int_rz((float(mo) + 0.5f) * inv_wbox), co = mo - ro * wbox;
          const bool v = ro < rows && co < (e == 0 ? cols0 : cols1);
          T* const qo = yc + (v ? info->base[ro] + int64_t(2 * co + e) * cstep : 0);
          if (k == 0) { q0 = qo; w0 = v; } else { q1 = qo; w1 = v; }
        }
        const float* src = stg + lane;
#pragma unroll 4
        for (int i = 0; i < mcount; ++i, q0 += ys1, q1 += ys1) {
          const float b = bias[i];
          if (w0) *q0 = Elem<T>::from_float(src[i * kEpiPitch] + b);
          if (w1) *q1 = Elem<T>::from_float(src[i * kEpiPitch + 32] + b);
        }
      }
      __syncwarp();
      continue;
    }
    const int m = 32 * pass + lane;
    const int r = m / wbox, c = m - r * wbox;
    const bool v0 = r < rows && c < cols0, v1 = r < rows && c < cols1;
    if ((v0 || v1) && mcount > 0) {
      T* q = yc + (info->base[r] + int64_t(2 * c) * cstep);
      const bool pair = v0 && v1 && cstep == 1 && ys1 % 2 == 0 &&
                        reinterpret_cast<uintptr_t>(q) % (2 * sizeof(T)) == 0;
      if (mcount == 16) {
#pragma unroll 4
        for (int i = 0; i < 16; ++i, q += ys1)
          store_channel<T>(q, cstep, *reinterpret_cast<const float2*>(stg + i * kEpiPitch + 2 * lane),
                           bias + i, pair, v0, v1);
      } else {
#pragma unroll 1
        for (int i = 0; i < mcount; ++i, q += ys1)
          store_channel<T>(q, cstep, *reinterpret_cast<const float2*>(stg + i * kEpiPitch + 2 * lane),
                           bias + i, pair, v0, v1);
      }
    }
    __syncwarp();
  }
}

// W phase pairs (WPH = 2; position-major tiles, W stride 2): the epilogue of a tile whose
// two W phases' accumulators are acc (phase 0) and acc2 (phase 1). Box position m of both is
// output columns 2 c and 2 c + 1 (c = m % wbox, from the tile's first output column, base[]).
// Per pass of 8 channels each warp stages its positions with the two phases interleaved
// (channel i of local position q at stg[i * kP2 + 2 q + phase]), then each lane stores a
// position's two adjacent outputs per channel, one instruction where they are aligned (or,
// where the output's channels are innermost, each output's 8 channels together). Where the
// pairs are not all aligned for one store (an odd channel stride, rows starting at odd
// elements: EpiInfo::odd_rows), lane l stores output l of each run of 16 positions x 2
// phases, each store 32 adjacent outputs of a channel.
template <typename T, int N, int NC>
__device__ __forceinline__ void pair_epilogue(float (&acc)[N / 64][NC / 2],
                                              float (&acc2)[N / 64][NC / 2], bool mma0,
                                              bool mma1, int cols0, float* stg, T* y,
                                              const EpiInfo* info, int co_valid, int rows,
                                              int cols1, int64_t ys1, int wbox, int warp, int g8,
                                              int t4, bool store4) {
  constexpr int kMB = N / 64;
  constexpr int kP2 = 32 * kMB + 4;
  static_assert(8 * kP2 <= 16 * kEpiPitch, "a pass fits the warp's staging area");
  const int lane = int(threadIdx.x % 32);
  const float inv_wbox = __frcp_rn(float(wbox));
  const int64_t cstep = info->col_step;
  // runs: pairs of outputs not all aligned for one store (an odd channel stride, a row
  // starting at an odd element).
  const bool runs = cstep == 1 && (ys1 % 2 != 0 || info->odd_rows ||
                                   reinterpret_cast<uintptr_t>(y) % (2 * sizeof(T)) != 0);
#pragma unroll
  for (int pass = 0; pass < NC / 8; ++pass) {
#pragma unroll
    for (int i = 0; i < kMB; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          // (The two phases' values of a channel and position side by side: one 8-byte
          // store; stg and kP2 keep every pair 8-byte aligned.)
          const int q = 16 * i + 8 * h + g8;
          *reinterpret_cast<float2*>(stg + (2 * t4 + e) * kP2 + 2 * q) =
              make_float2(mma0 ? acc[i][4 * pass + 2 * h + e] : 0.f,
                          mma1 ? acc2[i][4 * pass + 2 * h + e] : 0.f);
        }
    __syncwarp();
    const int c8 = 8 * pass;
    if (ys1 == 1 && co_valid - c8 >= 8) {
      // (Channels innermost: each of a position's two outputs stores its 8 channels
      // together, 16 bytes per store where aligned. A loop of its own, so that the one
      // below, the NC... outputs', is compiled as before.)
#pragma unroll 1
      for (int ql = lane; ql < 16 * kMB; ql += 32) {
        const int m = 64 * (ql / 16) + 16 * warp + ql % 16;
        const int r = __float2int_rz((float(m) + 0.5f) * inv_wbox), c = m - r * wbox;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (r >= rows || c >= (e == 0 ? cols0 : cols1)) continue;
          store_channels_packed<T, 8>(
              y + (info->base[r] + (2 * c + e) * cstep + int64_t(info->co0 + c8)),
              stg + 2 * ql + e, kP2, info->bias + c8);
        }
      }
      __syncwarp();
      continue;
    }
    // (The pass's 8 biases in registers for all of the lane's positions, each pair of
    // staged values one 8-byte load, the channels unrolled under a count: the stores' loop
    // is a third of the kernel's issue slots on narrow strided layers, kb72.)
    const int nch = min(8, co_valid - c8);
    float bv[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) bv[i] = info->bias[c8 + i];
    if constexpr (kMB == 1 || kMB == 2 || kMB == 4) {
      if (store4 && cstep == 1) {
        // (Four outputs a lane, Params::store4: the warp's kMB runs of 16 positions x 2
        // phases interleaved, one in each 64-position block.)
        auto offset = [&](int k, int j) -> int64_t {
          const int e = j & 1, m = 64 * k + 16 * warp + (j >> 1);
          const int r = m / wbox, c = m - r * wbox;
          if (r >= rows || c >= (e == 0 ? cols0 : cols1)) return -1;
          return info->base[r] + (2 * c + e) * cstep;
        };
        store_runs_quads<T, true, kMB, 32>(y, stg, kP2, offset, lane, c8, nch, info, ys1, false);
        __syncwarp();
        continue;
      }
    }
    if (runs) {
      // (Pairs not aligned for one store somewhere in the warp's rows: lane l stores staged
      // output l of each run of 16 positions x 2 phases, each store 32 adjacent outputs of a
      // channel, where two stores of one element a lane would each cover every other
      // element of its sectors.)
#pragma unroll 1
      for (int k = 0; k < kMB; ++k) {
        const int e = lane & 1;
        const int m = 64 * k + 16 * warp + (lane >> 1);
        const int r = __float2int_rz((float(m) + 0.5f) * inv_wbox), c = m - r * wbox;
        if (r >= rows || c >= (e == 0 ? cols0 : cols1)) continue;
        T* q = y + (info->base[r] + (2 * c + e) * cstep + int64_t(info->co0 + c8) * ys1);
        const float* src = stg + 32 * k + lane;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (i >= nch) break;
          q[i * ys1] = Elem<T>::from_float(src[i * kP2] + bv[i]);
        }
      }
      __syncwarp();
      continue;
    }
#pragma unroll 1
    for (int ql = lane; ql < 16 * kMB; ql += 32) {
      const int m = 64 * (ql / 16) + 16 * warp + ql % 16;
      const int r = __float2int_rz((float(m) + 0.5f) * inv_wbox), c = m - r * wbox;
      const bool v0 = r < rows && c < cols0, v1 = r < rows && c < cols1;
      if (!(v0 || v1)) continue;
      T* q = y + (info->base[r] + 2 * c * cstep + int64_t(info->co0 + c8) * ys1);
      // (Every channel's pair aligned: the first's, and an even channel stride.)
      const bool pair = v0 && v1 && cstep == 1 && ys1 % 2 == 0 &&
                        reinterpret_cast<uintptr_t>(q) % (2 * sizeof(T)) == 0;
      const float* src = stg + 2 * ql;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        if (i >= nch) break;
        const float2 v = *reinterpret_cast<const float2*>(src + i * kP2);
        const float a0 = v.x + bv[i], a1 = v.y + bv[i];
        T* qi = q + i * ys1;
        if (pair) {
          store_pair<T>(qi, 0, a0, a1);
        } else {
          if (v0) qi[0] = Elem<T>::from_float(a0);
          if (v1) qi[cstep] = Elem<T>::from_float(a1);
        }
      }
    }
    __syncwarp();
  }
}

// kRaw: MMA steps per wgmma fence (and register set), each batch's A loads overlapping the
// last batch's MMAs. One: batches of two steps were slower (H200, TF32: kb57 4.31 -> 4.77
// ms, kb71 0.75 -> 0.89 ms), the kernel being bound by the latency of its loads, not by
// the fences. (A larger B needs a stage's MMA steps to be a whole number of batches: a
// batch cut short needs its wgmma behind a test, and ptxas puts a fence before each such
// wgmma, C7519.)
template <int MB>
constexpr int kRawBatch = 1;

// kRaw: a batch of B MMA steps (an (H tap, W tap, MMA K step) each). For step u at shift sh_u and MMA K step ks_u thread (warp w, lane
// 4g + t) loads A[64 i + 16 w + 8 h + g][t + 4 j] = channel 8 ks_u + t + 4 j of box
// position 64 i + 16 w + 8 h + g + sh_u into a[u][i][2j + h] (TF32 rounded), then the
// batch's wgmma run against the weight tiles (one fence for the batch). The caller has
// waited for the wgmma that last read `a`.
template <int NC, int MB, int B>
__device__ __forceinline__ void raw_batch(float (&acc)[MB][NC / 2], uint32_t (&a)[B][MB][4],
                                          const float* base, int plane, uint32_t& wt, int& i, int& jw, int& ks, int hcnt, int cw,
                                          int ksteps, int shift_h, int doff_w, int& accumulate) {
  using namespace tma;
  uint64_t db[B];
#pragma unroll
  for (int u = 0; u < B; ++u) {
    const float* src = base + (hcnt - 1 - i) * shift_h + (cw - 1 - jw) * doff_w + 8 * ks * plane;
#pragma unroll
    for (int m = 0; m < MB; ++m) {
      a[u][m][0] = to_tf32(src[64 * m]);
      a[u][m][1] = to_tf32(src[64 * m + 8]);
      a[u][m][2] = to_tf32(src[64 * m + 4 * plane]);
      a[u][m][3] = to_tf32(src[64 * m + 4 * plane + 8]);
    }
    db[u] = wgmma_desc(wt);
    wt += NC * 32;
    if (++ks == ksteps) {
      ks = 0;
      if (++jw == cw) {
        jw = 0;
        ++i;
      }
    }
  }
  wgmma_fence();
#pragma unroll
  for (int u = 0; u < B; ++u) {
#pragma unroll
    for (int m = 0; m < MB; ++m) WgmmaRS<float, NC>::run(acc[m], a[u][m], db[u], accumulate);
    accumulate = 1;
  }
  wgmma_commit();
}

// kRaw: a stage's MMA steps (count = hcnt * cw * ksteps) in batches whose A registers
// alternate between two sets (a0, a1; `odd`: the set the next batch takes, carried across
// stages): each batch first waits (wait_group 1) for the one before the last, the previous
// user of its set, so that its loads overlap the last batch's MMAs. raw: the stage's raw box
// at the tile's column 0 (wsh applied); plane: floats between its channels; wts: the weight
// tiles.
template <int NC, int MB, int B>
__device__ __forceinline__ void raw_steps(float (&acc)[MB][NC / 2], uint32_t (&a0)[B][MB][4],
                                          uint32_t (&a1)[B][MB][4], int& odd, const float* raw,
                                          int plane, uint32_t wts, int hcnt, int cw, int ksteps,
                                          int shift_h, int doff_w, int warp, int g8, int t4,
                                          int& accumulate) {
  using namespace tma;
  const float* base = raw + t4 * plane + 16 * warp + g8;
  const int count = hcnt * cw * ksteps;
  int i = 0, jw = 0, ks = 0;
  uint32_t wt = wts;
  for (int it = 0; it < count; it += B) {
    wgmma_wait<1>();
    if (odd) {
      raw_batch<NC, MB, B>(acc, a1, base, plane, wt, i, jw, ks, hcnt, cw, ksteps, shift_h,
                           doff_w, accumulate);
    } else {
      raw_batch<NC, MB, B>(acc, a0, base, plane, wt, i, jw, ks, hcnt, cw, ksteps, shift_h,
                           doff_w, accumulate);
    }
    odd ^= 1;
  }
}

// ---------------------------------------------------------------------------------------
// The input transposed in the kernel (kXp)
// ---------------------------------------------------------------------------------------

// What the producer tells the transposer about a piece: the stage its box goes to (-1: the
// end), its first box row and its column chunk, the box's first column within the chunks
// (they start at a multiple of 16 bytes), and whether it is the K step's last piece.
struct XpHeader {
  int16_t stage, h0;
  int8_t chunk, wsh, last;
  // Params::xp_early: the parity of the stage's "empty" barrier the transposer waits on
  // before the K step's first piece.
  int8_t par;
};
static_assert(2 * 8 * kXpMaxPieces + sizeof(XpHeader) * kXpMaxPieces + 16 <= 512 &&
                  512 + 32 * 16 <= kXpMetaBytes,
              "the ring's barriers, headers and trash rows fit their area");

__device__ __forceinline__ void mbar_arrive_count(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(count)
               : "memory");
}

// The copier warp's unit: npos consecutive positions of one channel block (BK channels,
// cvalid of them real, the rest zeros) from src (channel c of position i at src[c * cstride
// + i]) into xt's rows at dst (position i's BK channels at dst[i * BK / kc ..], float
// rounded to TF32). Lane l takes positions l, l + 32, ... (pairs 2 l, 2 l + 1 with 4-byte
// loads where `pairs`, 16-bit types), kGroups of 32 at once: every channel's loads along the
// positions are coalesced, issued before any store, and each position's row goes out as
// BK / kc 16-byte stores (consecutive lanes, consecutive rows).
template <typename T, int BK>
__device__ __forceinline__ void copy_unit(const T* src, int64_t cstride, uint4* dst, int npos,
                                          int cvalid, int pairs, int lane) {
  constexpr int kc = Kc<T>::value;
  constexpr int kSubs = BK / kc;
  // 32 loaded values a lane at a time: kGroups of 32 lanes' positions (kPer a lane: 16-bit
  // pairs) x kSlice channels, the K step's channels in BK / kSlice slices.
  constexpr int kPer = sizeof(T) == 2 && BK <= 32 ? 2 : 1;
  constexpr int kSlice = BK * kPer <= 32 ? BK : 32 / kPer;
  constexpr int kGroups = 32 / (kPer * kSlice);
  const bool two = kPer == 2 && pairs != 0;
  const int step = two ? 64 : 32;
  for (int p0 = 0; p0 < npos; p0 += step * kGroups) {
#pragma unroll
    for (int c0 = 0; c0 < BK; c0 += kSlice) {
      float v[kGroups][kPer][kSlice];
#pragma unroll
      for (int b = 0; b < kGroups; ++b) {
        const int i = p0 + step * b + (two ? 2 * lane : lane);
#pragma unroll
        for (int cc = 0; cc < kSlice; ++cc) {
          const int c = c0 + cc;
          if constexpr (kPer == 2) {
            if (two) {
              union {
                uint32_t u;
                T e[2];
              } pr;
              pr.u = c < cvalid && i < npos
                         ? *reinterpret_cast<const uint32_t*>(src + c * cstride + i)
                         : 0u;
              v[b][0][cc] = Elem<T>::to_float(pr.e[0]);
              v[b][kPer - 1][cc] = Elem<T>::to_float(pr.e[1]);
              continue;
            }
          }
          v[b][0][cc] = c < cvalid && i < npos ? Elem<T>::to_float(src[c * cstride + i]) : 0.f;
        }
      }
#pragma unroll
      for (int b = 0; b < kGroups; ++b) {
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
          if (e == 1 && !two) break;
          const int i = p0 + step * b + (two ? 2 * lane + e : lane);
          if (i < npos) {
#pragma unroll
            for (int sb = 0; sb < kSlice / kc; ++sb) {
              union {
                uint4 u;
                uint32_t f[4];
                T h[kc];
              } out;
#pragma unroll
              for (int jj = 0; jj < kc; ++jj) {
                if constexpr (sizeof(T) == 4)
                  out.f[jj] = to_tf32(v[b][e][sb * kc + jj]);
                else
                  out.h[jj] = Elem<T>::from_float(v[b][e][sb * kc + jj]);
              }
              dst[int64_t(i) * kSubs + c0 / kc + sb] = out.u;
            }
          }
        }
      }
    }
  }
}

// The copier warp's unit in 16-bit types where every 8 consecutive positions of a channel
// are one aligned 16-byte load (Params::copy_pairs == 2): lane l takes positions 8 l ..
// 8 l + 7 of each 256, 16 channels at a time (BK = 8: 8), all their loads issued before any
// store, and transposes each 8 x 8 block of (channels, positions) in its registers, two
// channels' halves of a position a byte permute: position i's 8 channels of the block are
// one 16-byte store into its row. Four times the bytes in flight of the pairs' 4-byte loads
// and no conversions (the values move bit for bit). npos is a multiple of 8.
template <typename T, int BK>
__device__ __forceinline__ void copy_unit_vec8(const T* src, int64_t cstride, uint4* dst,
                                               int npos, int cvalid, int lane) {
  static_assert(sizeof(T) == 2, "16-bit types");
  constexpr int kc = Kc<T>::value;  // 8 channels a 16-byte unit of a row
  constexpr int kSubs = BK / kc;
  constexpr int kSl = BK < 16 ? BK : 16;
  for (int p0 = 0; p0 < npos; p0 += 256) {
    const int i0 = p0 + 8 * lane;
    const bool in = i0 < npos;
#pragma unroll
    for (int c0 = 0; c0 < BK; c0 += kSl) {
      uint32_t v[kSl][4];
#pragma unroll
      for (int cc = 0; cc < kSl; ++cc) {
        uint4 u = make_uint4(0u, 0u, 0u, 0u);
        if (in && c0 + cc < cvalid)
          u = __ldg(reinterpret_cast<const uint4*>(src + int64_t(c0 + cc) * cstride + i0));
        v[cc][0] = u.x;
        v[cc][1] = u.y;
        v[cc][2] = u.z;
        v[cc][3] = u.w;
      }
      if (in) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          // (Position j is the low half of word j / 2 for even j, the high half for odd j;
          // channel 2k of the pair goes to the low half of output word k.)
          const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
#pragma unroll
          for (int sb = 0; sb < kSl / kc; ++sb) {
            uint4 o;
            o.x = __byte_perm(v[sb * kc + 0][j >> 1], v[sb * kc + 1][j >> 1], sel);
            o.y = __byte_perm(v[sb * kc + 2][j >> 1], v[sb * kc + 3][j >> 1], sel);
            o.z = __byte_perm(v[sb * kc + 4][j >> 1], v[sb * kc + 5][j >> 1], sel);
            o.w = __byte_perm(v[sb * kc + 6][j >> 1], v[sb * kc + 7][j >> 1], sel);
            dst[int64_t(i0 + j) * kSubs + c0 / kc + sb] = o;
          }
        }
      }
    }
  }
}

// A load with acquire semantics at GPU scope (another block's release of what it guards).
__device__ __forceinline__ int ld_acquire_gpu(const int* ptr) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}

// Orders this thread's shared-memory writes before later reads by the async proxy (wgmma).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Transposes one piece of a K step's raw box into the stage's K-major box. The piece holds
// `rows` box rows from h0 on of kXpCols columns (from column 32 chunk - wsh of the box on),
// [row][bk = 8 G channels][kXpCols columns], its 64-byte lines swizzled as TMA's 64-byte
// swizzle writes them (16-byte unit j of line L at j ^ ((L >> 1) & 3)). Box row (position)
// q = h * wbox + column holds the position's bk channels, swizzled in the row's width rb =
// 2 bk bytes as the input copy's tensor map writes them (unit c of row q at c ^ (q & 7),
// ((q >> 1) & 3) or ((q >> 2) & 1) for rows of 128, 64 or 32 bytes). Each 8 x 8 block (8
// channels of 8 columns) is one ldmatrix.trans matrix, read along the channels, and one
// stmatrix matrix, written along the positions; four per instruction (lane 8m + i
// addressing row i of matrix m), G per piece row, at most 8 per piece, all loaded before
// any is stored. Columns outside the box go to the lane's trash row. Every access is free
// of bank conflicts: a matrix's 8 rows are 8 swizzle phases of either layout.
template <int G>
__device__ __forceinline__ void xp_transpose_piece(uint32_t piece, uint32_t box, uint32_t trash,
                                                   int h0, int rows, int chunk, int wsh,
                                                   int wbox, int lane) {
  constexpr int kBk = 8 * G, kRb = 2 * kBk, kRows = 8 / G;
  const int m = lane >> 3, li = lane & 7;
  const uint32_t sxor = uint32_t((li >> 1) & 3);  // the source lines' swizzle phase
  uint32_t v[8][4];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows) {
#pragma unroll
      for (int i = 0; i < G; ++i) {
        const int u = 4 * i + m, b = u / G, cg = u % G;
        const uint32_t src = piece + uint32_t((r * kBk + 8 * cg + li) * 64) +
                             16u * (uint32_t(b) ^ sxor);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v[r * G + i][0]), "=r"(v[r * G + i][1]), "=r"(v[r * G + i][2]),
                       "=r"(v[r * G + i][3])
                     : "r"(src)
                     : "memory");
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows) {
      const int rowq = (h0 + r) * wbox;
#pragma unroll
      for (int i = 0; i < G; ++i) {
        const int u = 4 * i + m, b = u / G, cg = u % G;
        const int col = kXpCols * chunk + 8 * b + li - wsh;
        const int q = rowq + col;
        const int sw = kRb == 128 ? (q & 7) : kRb == 64 ? ((q >> 1) & 3) : ((q >> 2) & 1);
        const uint32_t dst = unsigned(col) < unsigned(wbox)
                                 ? box + uint32_t(q * kRb) + 16u * uint32_t(cg ^ sw)
                                 : trash;
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                         dst),
                     "r"(v[r * G + i][0]), "r"(v[r * G + i][1]), "r"(v[r * G + i][2]),
                     "r"(v[r * G + i][3])
                     : "memory");
      }
    }
  }
}

// The same for float (K steps of bk = 8 G channels, as TF32): the piece is [row][bk
// channels][kXpCols columns] in 128-byte lines, swizzled as TMA's 128-byte swizzle writes
// them (16-byte unit j of line L at j ^ (L & 7)); the box row q holds the position's bk
// channels in 4 bk bytes, unit c of row q at c ^ sw(q) as above. Each lane moves 4 x 4
// blocks, 4 channels (unit cu of a box row) x 4 columns (unit j of a piece line): four
// 16-byte loads, one per channel line, the 16 values rounded to TF32, four 16-byte stores,
// one per position; 64 blocks per 4 KB piece, two per lane. A quarter warp (one
// shared-memory wavefront) takes 8 (cu, j) such that its loads hit 8 distinct 16-byte bank
// groups (unit j ^ 4 (cu & 1) ^ k for its k-th load), and its stores as many as the box's
// swizzle allows without reordering a lane's registers: G = 4 (128-byte rows, unit cu ^ 4
// (j & 1) ^ const): cu = e, j = (e >> 1) ^ d, 8 distinct; G = 2 (64-byte rows: the column's
// parity, fixed per store, picks the half of the 128 bytes): cu in a pair, 4 consecutive j,
// two lanes per bank group. G = 1 (32-byte rows, where two quarter-warp lanes in four would
// collide) reorders instead: lane j takes its k-th store at column k ^ (j & 3), its
// registers permuted back with selects. Columns outside the box are not stored (each lane
// stores on its own, unlike stmatrix's eight-lane rows).
template <int G>
__device__ __forceinline__ void xp_transpose_piece_f32(uint32_t piece, uint32_t box, int h0,
                                                       int rows, int chunk, int wsh, int wbox,
                                                       int lane) {
  static_assert(G == 1 || G == 2 || G == 4, "K steps of 8, 16 or 32 channels");
  constexpr int kBk = 8 * G, kRb = 4 * kBk;
  constexpr int kIters = 2;  // (4 / G rows x 2 G units x 8 column units) / 32 lanes
  const int e = lane & 7, qw = lane >> 3;
  const int col0 = kXpCols * chunk - wsh;  // the piece's first column within the box
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int cu = G == 1 ? e >> 2 : G == 2 ? 2 * (qw & 1) + (e >> 2) : e;
    const int j = G == 1   ? 4 * (qw & 1) + (e & 3)
                  : G == 2 ? 4 * (qw >> 1) + (e & 3)
                           : (e >> 1) ^ (qw + 4 * it);
    const int r = G == 1 ? (qw >> 1) + 2 * it : G == 2 ? it : 0;
    const int rho = G == 1 ? j & 3 : 0;
    if (r >= rows) continue;
    float a[4][4];  // a[c][i]: channel 4 cu + c at column 4 j + i
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int line = r * kBk + 4 * cu + c;
      const uint32_t src = piece + uint32_t(line * 128) + 16u * uint32_t(j ^ (line & 7));
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(a[c][0]), "=f"(a[c][1]), "=f"(a[c][2]), "=f"(a[c][3])
                   : "r"(src)
                   : "memory");
    }
    uint32_t b[4][4];  // b[c][i]: channel 4 cu + c at column 4 j + (i ^ rho), as TF32
#pragma unroll
    for (int c = 0; c < 4; ++c) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float v = a[c][i];
        if (G == 1) {
          v = (rho & 1) ? a[c][i ^ 1] : v;
          if (rho & 2) v = (rho & 1) ? a[c][i ^ 3] : a[c][i ^ 2];
        }
        b[c][i] = to_tf32(v);
      }
    }
    const int rowq = (h0 + r) * wbox;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = col0 + 4 * j + (i ^ rho);
      const int q = rowq + col;
      const int sw = kRb == 128 ? (q & 7) : kRb == 64 ? ((q >> 1) & 3) : ((q >> 2) & 1);
      if (unsigned(col) >= unsigned(wbox)) continue;  // (a column outside the box)
      const uint32_t dst = box + uint32_t(q * kRb) + 16u * uint32_t(cu ^ sw);
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(b[0][i]),
                   "r"(b[1][i]), "r"(b[2][i]), "r"(b[3][i])
                   : "memory");
    }
  }
}

// kSplit (float only): split TF32 for strict float32. Each product is
// W_big X_big + W_big X_small + W_small X_big, big = tf32(v), small = tf32(v - big): both
// operands' residual copies ride in the same stage, and every MMA step is three wgmma.
// NC = 0: tiles of 64 channels x N positions. NC > 0: position-major tiles of N positions
// (N / 64 m64 blocks) x NC channels, for narrow groups.
// kRaw (float as TF32, position-major tiles): A from registers, loaded from the raw input box
// (see the top of this file).
// FOLD > 1 (position-major tiles, not kSplit or kRaw): the W taps of a phase folded into
// wgmma's N (see the top of this file): N = NC x FOLD columns, column f * NC + c the
// products with W tap f of channel c, one MMA step per (H tap, 32 bytes of channels) on the
// unshifted box; the epilogue sums the taps' columns at their shifts.
// kXp (16-bit types or TF32, not kSplit or kRaw): the input transposed in the kernel (see the
// top of this file); map is then the raw tensor map over x, and warp 5 transposes.
// CG = 2 (channel-major tiles reading the copy, a channels_last input or, with kXp, the
// input transposed in the kernel; not kSplit, kRaw, FOLD or WPH): two consumer warpgroups
// share each stage's box, warpgroup j with the weight tiles of the tile's channels 64 j ..
// 64 j + 63 (a tile of 128 channels, the box copied or transposed into shared memory once
// for both), one block a multiprocessor.
template <typename T, int N, bool kSplit = false, int NC = 0, bool kRaw = false, int FOLD = 1,
          int WPH = 1, bool kXp = false, int CG = 1, int MF = 1, int XW = 1>
__global__ void __launch_bounds__(block_threads(kXp,
                                                has_copier(kXp, kRaw, kSplit, NC, FOLD, WPH), CG,
                                                XW),
                                  CG == 2 ? 1 : 2)
    fprop_wgmma_kernel(const __grid_constant__ CUtensorMap map, const Params p) {
  static_assert(!kXp || (!kSplit && !kRaw),
                "the input transposed in the kernel: 16-bit types or TF32");
  static_assert(WPH == 1 || (WPH == 2 && !kSplit && !kRaw && FOLD == 1 && CG == 1 &&
                             (NC > 0 || N <= 128)),
                "W phase pairs in registers: unfolded tiles of one warpgroup (channel-major "
                "ones of at most 128 positions)");
  static_assert(!kSplit || sizeof(T) == 4, "split TF32 is for float");
  static_assert(!kRaw || (std::is_same<T, float>::value && !kSplit && NC > 0),
                "the input read in place: TF32 on position-major tiles");
  static_assert(NC == 0 || (N % 64 == 0 && N <= 256 && NC % 8 == 0 && NC <= kM),
                "position-major tiles: m64 blocks of positions, at most 64 channels");
  static_assert(FOLD == 1 || (NC > 0 && !kSplit && !kRaw && NC * FOLD <= 256),
                "W taps fold into position-major tiles' N, at most 256 columns");
  static_assert(CG == 1 || (CG == 2 && NC == 0 && !kSplit && !kRaw && FOLD == 1 && WPH == 1),
                "two consumer warpgroups: channel-major tiles reading the copy or the input "
                "transposed in the kernel");
  static_assert(MF == 1 || ((MF == 2 || MF == 4) && NC == 0 && !kSplit && !kRaw && !kXp &&
                            FOLD == 1 && WPH == 1 && CG == 1),
                "W taps stacked in M: channel-major tiles of one warpgroup reading the copy");
  static_assert(XW == 1 || (XW == 2 && kXp && FOLD == 1 && WPH == 1 && MF == 1 &&
                            (CG == 2 || (NC >= 16 && NC <= 32))),
                "two transposer warps: the input transposed in the kernel for two consumer "
                "warpgroups or position-major tiles of 16-32 channels");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace tma;
  constexpr int kc = Kc<T>::value;
  constexpr bool kPos = NC > 0;
  constexpr int kMB = kPos ? N / 64 : 1;  // m64 blocks of the accumulators
  constexpr int kNA = kPos ? NC * FOLD : N;  // wgmma N
  constexpr int kCw = kPos ? NC * FOLD : kM;  // weight tile rows (output channels x folded taps)
  constexpr bool kFold = FOLD > 1;
  constexpr bool kCopier = has_copier(kXp, kRaw, kSplit, NC, FOLD, WPH);
  constexpr int kProducerWarp = 4 * CG, kExtraWarp = 4 * CG + 1;
  // (kXp: a stage's "full" barrier counts the producer and every transposer warp's lanes.)
  constexpr uint32_t kFullCount = kXp ? 1u + 32u * uint32_t(XW) : 1u;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // Stages (1024-byte aligned: the swizzle patterns), then the headers, the epilogue's
  // staging, the tile info and the barriers.
  // (Offset from smem_raw rather than rebuilt from an integer, so that the compiler keeps
  // knowing these are shared-memory pointers: st.shared, not generic stores.)
  unsigned char* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char* stages = smem;
  unsigned char* headers = smem + p.stages * p.stage_bytes;
  float* epi = reinterpret_cast<float*>(headers + kMaxStages * kHeaderBytes);
  EpiInfo* info = reinterpret_cast<EpiInfo*>(headers + kMaxStages * kHeaderBytes + p.epi_bytes);
  uint64_t* bars = reinterpret_cast<uint64_t*>(headers + kMaxStages * kHeaderBytes +
                                               p.epi_bytes + CG * kInfoBytes);
  const uint32_t full0 = smem_addr(bars), empty0 = smem_addr(bars + kMaxStages);
  // Broadcast, so that the compiler knows these are uniform across each warp (wgmma
  // behind branches it cannot prove uniform is serialized, ptxas C7520).
  const int warp = __shfl_sync(0xffffffffu, int(threadIdx.x / 32), 0);
  const int lane = threadIdx.x % 32;
  // kXp: the ring of pieces, their "full" and "empty" barriers and headers, the trash rows.
  const uint32_t xp_base =
      smem_addr(smem) + uint32_t(xp_area_offset(p.stages, p.stage_bytes, p.epi_bytes, CG));
  const uint32_t xp_meta = xp_base + uint32_t(p.xp_pieces * p.xp_piece_bytes);
  const uint32_t xfull0 = xp_meta, xempty0 = xp_meta + 8 * kXpMaxPieces;
  XpHeader* xhdr =
      reinterpret_cast<XpHeader*>(smem + (xp_meta + 16 * kXpMaxPieces - smem_addr(smem)));
  // (Headers from 2 * 8 * kXpMaxPieces bytes on, trash rows from 512.)
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      // (kXp: the producer's arrival with the weight tiles' bytes, and the transposers' 32
      // each.)
      mbar_init(full0 + 8 * s, kFullCount);
      mbar_init(empty0 + 8 * s, 128 * CG);  // every consumer thread releases (racecheck sees it)
      if (p.w_reuse) reinterpret_cast<StageHeader*>(headers + s * kHeaderBytes)->w_src = -1;
    }
    if constexpr (kXp) {
      for (int s = 0; s < p.xp_pieces; ++s) {
        mbar_init(xfull0 + 8 * s, 1);
        mbar_init(xempty0 + 8 * s, 32 * XW);
      }
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (kXp && (XW == 1 ? warp == kExtraWarp : warp >= kExtraWarp)) {
    // ---------------------------------------------------------------- transposer
    // (XW warps: warp kExtraWarp + xw transposes the pieces i with i % XW == xw, and reads
    // every header.)
    const int xw = XW == 1 ? 0 : warp - kExtraWarp;
    int turn = 0;
    int xs = 0;
    uint32_t xpar = 0;
    // (16-bit types, whose stmatrix stores take a row address from every lane: the first
    // warp's lanes a trash row each; the second's lanes share one, past the headers: one
    // stmatrix's lanes may write one address, and the two warps never share one. Float
    // stores only the columns inside the box.)
    const uint32_t trash =
        xw == 0 ? xp_meta + 512 + 16 * lane
                : xp_meta + uint32_t((2 * 8 + sizeof(XpHeader)) * kXpMaxPieces);
    const uint32_t box0 = smem_addr(stages);
    for (;;) {
      mbar_wait(xfull0 + 8 * xs, xpar);
      const XpHeader hd = xhdr[xs];
      if (hd.stage < 0) break;
      const uint32_t piece = xp_base + uint32_t(xs * p.xp_piece_bytes);
      const uint32_t box = box0 + uint32_t(hd.stage * p.stage_bytes);
      // (Loaded ahead of the stage: the K step's first piece waits for the consumers to
      // release the stage.)
      if (p.xp_early && hd.h0 == 0 && hd.chunk == 0) mbar_wait(empty0 + 8 * hd.stage, hd.par ^ 1);
      const int rows = min(p.xp_rows, p.hbox - hd.h0);
      const bool mine = XW == 1 || turn == xw;
      if (XW > 1 && ++turn == XW) turn = 0;
      if (!mine) {
        // (Another warp's piece: only its header was read.)
      } else if constexpr (sizeof(T) == 4) {
        if (p.bk == 8) {
          xp_transpose_piece_f32<1>(piece, box, hd.h0, rows, hd.chunk, hd.wsh, p.wbox,
                                    lane);
        } else if (p.bk == 16) {
          xp_transpose_piece_f32<2>(piece, box, hd.h0, rows, hd.chunk, hd.wsh, p.wbox,
                                    lane);
        } else {
          xp_transpose_piece_f32<4>(piece, box, hd.h0, rows, hd.chunk, hd.wsh, p.wbox,
                                    lane);
        }
      } else if (p.bk == 16) {
        xp_transpose_piece<2>(piece, box, trash, hd.h0, rows, hd.chunk, hd.wsh, p.wbox, lane);
      } else if (p.bk == 32) {
        xp_transpose_piece<4>(piece, box, trash, hd.h0, rows, hd.chunk, hd.wsh, p.wbox, lane);
      } else {
        xp_transpose_piece<8>(piece, box, trash, hd.h0, rows, hd.chunk, hd.wsh, p.wbox, lane);
      }
      mbar_arrive(xempty0 + 8 * xs);  // the piece's reads (or its header's) are done
      if (hd.last) {
        fence_proxy_async();  // the stage's rows, written here, are read by wgmma
        mbar_arrive(full0 + 8 * hd.stage);
      }
      if (++xs == p.xp_pieces) {
        xs = 0;
        xpar ^= 1;
      }
    }
    return;
  }

  if (kCopier && warp == kExtraWarp) {
    // ---------------------------------------------------------------- copier
    // Units of copy_chunk positions of one (sample, group) and one channel block, in the
    // order the tiles run (groups, samples, then positions; the channel blocks of a chunk
    // one after the other), each copied by copy_unit. Then the chunk's count in chunk_done
    // goes up (after a fence: the producers' tensor loads read what it wrote).
    if constexpr (kCopier) {
      if (!p.fused) return;
      const T* x = static_cast<const T*>(p.x);
      uint4* xt = static_cast<uint4*>(p.xt);
      const int64_t plane = int64_t(p.in[0]) * p.in[1] * p.in[2];  // positions of a sample
      const int64_t units = int64_t(p.batch) * p.groups * p.copy_chunks * p.cblocks;
      for (;;) {
        int u0 = 0;
        if (lane == 0) u0 = atomicAdd(p.copy_counter, 1);
        const int64_t u = __shfl_sync(0xffffffffu, u0, 0);
        if (u >= units) break;
        const int cb = int(u % p.cblocks);
        const int64_t chunk = u / p.cblocks;  // (n G + g) copy_chunks + the chunk
        const int64_t ng = chunk / p.copy_chunks;
        const int64_t pos0 = (chunk - ng * p.copy_chunks) * p.copy_chunk;
        const int npos = int(min(int64_t(p.copy_chunk), plane - pos0));
        const int64_t n = ng / p.groups;
        const int g = int(ng - n * p.groups);
        const int cvalid = min(p.bk, p.cig - cb * p.bk);
        const T* src = x + n * p.x_str[0] + int64_t(g * p.cig + cb * p.bk) * p.x_str[1] + pos0;
        uint4* dst = xt + ((ng * p.cblocks + cb) * plane + pos0) * (p.bk / Kc<T>::value);
        constexpr int kc = Kc<T>::value;
        if (sizeof(T) == 2 && p.copy_pairs == 2) {
          if constexpr (sizeof(T) == 2) {
            if (p.bk == 2 * kc) {
              copy_unit_vec8<T, 2 * kc>(src, p.x_str[1], dst, npos, cvalid, lane);
            } else if (p.bk == 4 * kc) {
              copy_unit_vec8<T, 4 * kc>(src, p.x_str[1], dst, npos, cvalid, lane);
            } else {
              copy_unit_vec8<T, 8 * kc>(src, p.x_str[1], dst, npos, cvalid, lane);
            }
          }
        } else if (p.bk == 2 * kc) {
          copy_unit<T, 2 * kc>(src, p.x_str[1], dst, npos, cvalid, p.copy_pairs, lane);
        } else if (p.bk == 4 * kc) {
          copy_unit<T, 4 * kc>(src, p.x_str[1], dst, npos, cvalid, p.copy_pairs, lane);
        } else {
          copy_unit<T, 8 * kc>(src, p.x_str[1], dst, npos, cvalid, p.copy_pairs, lane);
        }
        __threadfence();
        __syncwarp();
        if (lane == 0) atomicAdd(p.chunk_done + chunk, 1);
      }
    }
    return;
  }

  if (warp == kProducerWarp) {
    // ---------------------------------------------------------------- producer
    if (lane != 0) return;
    int stage = 0;
    uint32_t parity = 0;
    // Weight tiles per H tap of a K step: one per W tap, or one with the W taps folded.
    const int tmax_hw = p.tmax[1] * (kFold ? 1 : p.tmax[2]);
    // A block's first tile is its index (no atomic's round trip before its first loads);
    // the later ones, gridDim.x on, come from the counter, each asked for one tile ahead
    // (an atomic's round trip is long).
    int next = int(blockIdx.x);
    int xs = 0;  // kXp: the next raw slot and its parity
    uint32_t xpar = 0;
    // (Per tile this one thread decodes the tile's indices and looks up its phases' taps:
    // Params::f_*, Params::tab.)
    const int nsplit = p.splits > 1 ? p.splits : 1;
    // (Params::fused: the chunks of positions last found copied, as ranges of (n G + g) and
    // of chunks.)
    int64_t ok_ng0 = -1, ok_ng1 = -2, ok_c0 = 0, ok_c1 = -1;
    // (Params::box_probe: the stages still to receive their first box.)
    int box_probe_left = p.stages;
    for (;;) {
      const int t = next;
      if (t >= p.tiles) break;
      next = int(gridDim.x) + atomicAdd(p.counter, 1);
      // (Split K: work item t is part t % splits of tile t / splits.)
      int part = 0;
      const int tile = p.f_split.divmod(t, part);
      int r = tile, cot, ph, cs, rg, qd, n;
      r = p.f_cot.divmod(r, cot);
      r = p.f_ph.divmod(r, ph);
      r = p.f_cs.divmod(r, cs);
      r = p.f_rg.divmod(r, rg);
      // (Stacked planes: the tile's first sample or D position of its group.)
      r = p.f_dt.divmod(r, qd);
      qd *= p.stack_n ? 1 : p.stack;
      const int g = p.f_nt.divmod(r, n);
      n *= p.stack_n ? p.stack : 1;
      // (W phases merged: ph counts the D and H phases, and the tile runs every W phase of
      // its segment in turn; else ph counts every phase and the tile runs one. phf: the
      // phase's index among all of them, as the packed weight counts them.)
      const int sw = p.stride[2];
      const int nw = p.wm ? sw : 1;
      int rw0 = 0, phdh = ph;
      if (!p.wm) phdh = p.f_sw.divmod(ph, rw0);
      int rh;
      const int rd = p.f_sh.divmod(phdh, rh);
      const int qh0 = rg * p.rows, qw0 = cs * p.wv;
      const PhaseTaps td = p.tab[0].taps(rd), th = p.tab[1].taps(rh);
      const int ext_d = p.tab[0].extent(rd);
      if (qd >= ext_d) continue;
      const int rows = min(p.rows, p.tab[1].extent(rh) - qh0);
      // (W phases merged: the tile's outputs are wm_wo whole columns from qw0 * s on.)
      const int ocols = p.wm ? min(p.wm_wo, p.out[2] - qw0 * sw) : 1;
      if (rows <= 0 || ocols <= 0) continue;
      for (int rw = rw0; rw < rw0 + nw; ++rw) {
        const int phf = phdh * sw + rw;
        // (W taps scattered: the tile's outputs are sc_wo whole columns from qw0 * sc_s on.)
        const int ow0 = p.sc ? qw0 * p.sc_s : qw0 * sw + rw;
        const int cols = p.sc ? min(p.sc_wo, p.out[2] - ow0)
                              : min(p.wv, p.tab[2].extent(rw) - qw0);
        // (Merged, a W phase without outputs in the segment still takes its step: the last
        // one stores the rows.)
        if (!p.wm && cols <= 0) continue;
        const PhaseTaps tw = p.tab[2].taps(rw);
        const bool mma = cols > 0 && td.count > 0 && th.count > 0 && tw.count > 0;
        const int hblocks = mma ? (th.count + p.hb - 1) / p.hb : 0;
        // (Taps split: a K step per W tap as well, within each H block.)
        const int wsteps = mma && p.tsplit ? tw.count : 1;
        const int all_steps = mma ? td.count * hblocks * wsteps * p.cblocks : 1;
        // (Split K: the tile's parts, at most its K steps, and this part's K steps s0 .. s1 -
        // 1; a tile without MMAs is part 0's alone.)
        const int parts = mma ? min(nsplit, all_steps) : 1;
        if (part >= parts) continue;
        int s0 = 0, steps = all_steps;
        if (parts > 1) {
          s0 = int(int64_t(all_steps) * part / parts);
          steps = int(int64_t(all_steps) * (part + 1) / parts) - s0;
        }
        // (CG = 2: the packed weight's 64-channel tiles 2 cot and 2 cot + 1; sharing them
        // (coop_n), tile cot.)
        const int cgw = CG == 2 && p.coop_n ? 1 : CG;
        const int64_t wtile0 = ((int64_t(g) * p.co_tiles * cgw + cot * cgw) * (p.phases * nw) + phf) *
                               p.tmax[0] * p.cblocks;
        const int ngc0 = (n * p.groups + g) * p.cblocks;
        // (The K step s = ((jd hblocks + hbi) wsteps + jws) cblocks + cb, from s0 on.)
        int cb = 0, jws = 0, hbi = 0, jd = 0;
        if (mma && s0 > 0) {
          cb = s0 % p.cblocks;
          jws = (s0 / p.cblocks) % wsteps;
          hbi = (s0 / (p.cblocks * wsteps)) % hblocks;
          jd = s0 / (p.cblocks * wsteps * hblocks);
        }
        if (kCopier && p.fused && mma) {
          // The input rows the tile's outputs read (samples n .. n_last, D positions d0 ..
          // d1, rows h0 .. h1 of group g), as the chunks of positions that hold them, unless
          // the last ones found copied hold them: wait until every channel block of each is.
          const int planes =
              p.stack > 1 ? (p.stack_n ? min(p.stack, p.batch - n)
                                       : min(p.stack, ext_d - qd))
                          : 1;
          const int n_last = n + (p.stack_n ? planes - 1 : 0);
          const int d0 = max(qd + td.off0 - (td.count - 1) * td.doff, 0);
          const int d1 = min(qd + (p.stack_n ? 0 : planes - 1) + td.off0, p.in[0] - 1);
          const int h0 = max(qh0 + th.off0 - (th.count - 1) * th.doff, 0);
          const int h1 = min(qh0 + rows - 1 + th.off0, p.in[1] - 1);
          if (d0 <= d1 && h0 <= h1) {
            const int64_t c0 = (int64_t(d0) * p.in[1] + h0) * p.in[2] / p.copy_chunk;
            const int64_t c1 =
                ((int64_t(d1) * p.in[1] + h1) * p.in[2] + p.in[2] - 1) / p.copy_chunk;
            const int64_t ng0 = int64_t(n) * p.groups + g, ng1 = int64_t(n_last) * p.groups + g;
            if (!(ng0 >= ok_ng0 && ng1 <= ok_ng1 && (ng0 - ok_ng0) % p.groups == 0 &&
                  c0 >= ok_c0 && c1 <= ok_c1)) {
              for (int64_t ng = ng0; ng <= ng1; ng += p.groups)
                for (int64_t c = c0; c <= c1; ++c) {
                  const int* cnt = p.chunk_done + ng * p.copy_chunks + c;
                  while (ld_acquire_gpu(cnt) < p.cblocks) {
                  }
                }
              // (The copy, written through the generic proxy, is read by tensor loads.)
              asm volatile("fence.proxy.async.global;\n" ::: "memory");
              ok_ng0 = ng0;
              ok_ng1 = ng1;
              ok_c0 = c0;
              ok_c1 = c1;
            }
          }
        }
        // kXp: the K step's raw box in pieces (xp_rows rows x kXpCols columns from the last
        // multiple of 8 columns at or before w0), each into the ring's next piece once the
        // transposer is done with it; the piece's header names the stage it goes to.
        auto xp_load_pieces = [&](int w0, int h0, int d0) {
          const int w0a = w0 & ~7;
          for (int hr = 0; hr < p.hbox; hr += p.xp_rows) {
            for (int k = 0; k < p.xp_chunks; ++k) {
              mbar_wait(xempty0 + 8 * xs, xpar ^ 1);
              xhdr[xs].stage = int16_t(stage);
              xhdr[xs].h0 = int16_t(hr);
              xhdr[xs].chunk = int8_t(k);
              xhdr[xs].wsh = int8_t(w0 - w0a);
              xhdr[xs].last = int8_t(hr + p.xp_rows >= p.hbox && k == p.xp_chunks - 1);
              xhdr[xs].par = int8_t(parity);
              const uint32_t xf = xfull0 + 8 * xs;
              mbar_arrive_expect_tx(xf, uint32_t(p.xp_piece_bytes));
              tma_load_5d(xp_base + uint32_t(xs * p.xp_piece_bytes), &map, xf,
                          w0a + k * kXpCols, cb * p.bk, h0 + hr, d0, n * p.groups + g);
              if (++xs == p.xp_pieces) {
                xs = 0;
                xpar ^= 1;
              }
            }
          }
        };
        for (int s = 0; s < steps; ++s) {
          if constexpr (kXp) {
            // (Params::xp_early: the pieces first, while the consumers still hold the stage;
            // the transposer waits for it.)
            if (p.xp_early && mma) {
              const int jh0 = hbi * p.hb;
              const int hcnt = min(p.hb, th.count - jh0);
              xp_load_pieces(p.sc ? qw0 + p.sc_clo : qw0 + tw.off0 - (tw.count - 1) * tw.doff,
                             qh0 + th.off0 - (jh0 + hcnt - 1) * th.doff,
                             qd + td.off0 - jd * td.doff);
            }
          }
          mbar_wait(empty0 + 8 * stage, parity ^ 1);
          unsigned char* st = stages + size_t(stage) * p.stage_bytes;
          StageHeader* hd = reinterpret_cast<StageHeader*>(headers + stage * kHeaderBytes);
          const uint32_t full = full0 + 8 * stage;
          int flags = (s == 0 ? kFirst : 0) | (s == steps - 1 ? kLast : 0) | (mma ? 0 : kNoMma) |
                      (p.wm && rw == rw0 + nw - 1 && s == steps - 1 ? kTileEnd : 0);
          hd->flags = flags;
          hd->steps = steps;
          hd->wm_rw = rw;
          if (flags & kLast) {
            hd->split_tile = tile;
            hd->split_part = part;
            hd->split_parts = parts;
            hd->co0 = g * p.cog + cot * p.cw;
            hd->co_valid = min(p.cw, p.cog - cot * p.cw);
            hd->rows = rows;
            hd->cols = max(cols, 0);
            // (Merged: base[] at the tile's first output column, its columns adjacent.)
            hd->col_step = int64_t(p.wm ? 1 : sw) * p.y_str[4];
            const int64_t b0 = int64_t(n) * p.y_str[0] +
                               int64_t(qd * p.stride[0] + rd) * p.y_str[2] +
                               int64_t(p.wm ? qw0 * sw : ow0) * p.y_str[4];
            if (p.stack > 1) {
              // Plane j of the tile (sample n + j, or D position qd + j) at box rows j *
              // hbox on, its output rows first; the planes past the batch or the phase's D
              // positions hold none.
              const int planes = p.stack_n ? min(p.stack, p.batch - n)
                                           : min(p.stack, ext_d - qd);
              const int64_t pstep = p.stack_n ? p.y_str[0] : int64_t(p.stride[0]) * p.y_str[2];
              hd->rows = (planes - 1) * p.hbox + rows;
              for (int i = 0; i < hd->rows; ++i) {
                const int j = i / p.hbox, rr = i - j * p.hbox;
                hd->base[i] = rr < rows ? b0 + j * pstep +
                                              int64_t((qh0 + rr) * p.stride[1] + rh) * p.y_str[3]
                                        : kNoRow;
              }
            } else {
              for (int i = 0; i < rows; ++i)
                hd->base[i] = b0 + int64_t((qh0 + i) * p.stride[1] + rh) * p.y_str[3];
            }
            hd->fcw = tw.count;
            hd->fdoff = tw.doff;
            hd->wm_rw = rw;
            hd->wm_ocols = ocols;
          }
          if (mma) {
            const int jh0 = hbi * p.hb;
            const int hcnt = min(p.hb, th.count - jh0);
            // (Folded, the MMA steps run the unshifted box once per H tap; taps split, the
            // box at W tap jws's offset once.)
            // (W taps stacked in M: a weight tile per MF W taps, MF W taps apart.)
            const int wtiles = kFold || p.tsplit ? 1 : (tw.count + MF - 1) / MF;
            hd->hcnt = hcnt;
            hd->cw = wtiles;
            hd->shift_h = th.doff * p.wbox;
            hd->doff_w = tw.doff * MF;
            const uint32_t wbytes = uint32_t(hcnt * wtiles) * p.tile_bytes;
            // (Taps split, hcnt is 1: the packing's tile (H tap jh0, W tap jws).)
            const int64_t wt = ((wtile0 + int64_t(jd) * p.cblocks + cb) * tmax_hw +
                                (p.tsplit ? int64_t(jh0) * tw.count + jws
                                          : int64_t(jh0) * wtiles)) * p.tile_bytes;
            // (Params::w_reuse: the stage's weight tiles are the ones this step needs.)
            bool w_kept = false;
            if (p.w_reuse) {
              w_kept = (p.w_reuse == 2 ? hd->w_src >= 0 : hd->w_src == wt) &&
                       hd->w_len == int64_t(wbytes);
              hd->w_src = wt;
              hd->w_len = wbytes;
            }
            const uint32_t wcopy = w_kept ? 0u : wbytes;
            // (kXp: the box comes from the transposer, only the weight tiles by copy, each
            // warpgroup's with two.)
            // (coop_n: two boxes, one set of weight tiles.)
            // (Params::box_probe: no box once every stage has had one.)
            const bool box_skip = !kXp && p.box_probe && box_probe_left == 0;
            if (!kXp && p.box_probe && box_probe_left > 0) --box_probe_left;
            const uint32_t nbox = box_skip ? 0u : CG == 2 && p.coop_n ? 2u : 1u;
            mbar_arrive_expect_tx(full, kXp ? uint32_t(cgw) * wcopy
                                            : (nbox * uint32_t(p.box_bytes) + uint32_t(cgw) * wcopy) *
                                                  (kSplit ? 2u : 1u));
            // (W taps stacked in M: the box of the phase's taps padded to a multiple of MF.)
            const int w0 = p.sc       ? qw0 + p.sc_clo
                           : p.tsplit ? qw0 + tw.off0 - jws * tw.doff
                                      : qw0 + tw.off0 -
                                            ((tw.count + MF - 1) / MF * MF - 1) * tw.doff;
            const int h0 = qh0 + th.off0 - (jh0 + hcnt - 1) * th.doff;
            const int d0 = qd + td.off0 - jd * td.doff;
            const uint32_t box = smem_addr(st);
            if constexpr (kXp) {
              if (!p.xp_early) xp_load_pieces(w0, h0, d0);
            } else if (box_skip) {
              // (Params::box_probe: the stage keeps the box it holds.)
            } else if constexpr (kRaw) {
              const int w0a = w0 & ~3;  // 16 bytes of floats (rounds negative columns down too)
              hd->wsh = w0 - w0a;
              tma_load_5d(box, &map, full, w0a, h0, d0, cb * p.bk, n * p.groups + g);
            } else {
              if (p.cl_chunks) {
                const int j = ngc0 + cb;
                tma_load_5d(box, &map, full, 0, w0, h0, j % p.cl_chunks, j / p.cl_chunks);
                if (CG == 2 && p.coop_n)
                  tma_load_5d(box + p.coop_box_off, &map, full, 0, w0, h0 + p.coop_rows,
                              j % p.cl_chunks, j / p.cl_chunks);
              } else if (p.stack_n) {
                tma_load_5d(box, &map, full, 0, w0, h0, n, g * p.cblocks + cb);
              } else {
                tma_load_5d(box, &map, full, 0, w0, h0, d0, ngc0 + cb);
                // (coop_n: the second warpgroup's box, coop_rows rows further; rows past the
                // input read as zeros.)
                if (CG == 2 && p.coop_n)
                  tma_load_5d(box + p.coop_box_off, &map, full, 0, w0, h0 + p.coop_rows, d0,
                              ngc0 + cb);
              }
            }
            const unsigned char* wp = static_cast<const unsigned char*>(p.wp);
            if (!w_kept) bulk_load(box + p.w_off, wp + wt, wbytes, full);
            if (CG == 2 && !p.coop_n) {
              // (The second warpgroup's channels: the next 64-channel tile of the packing.)
              const int64_t half = int64_t(p.phases * nw) * p.tmax[0] * p.cblocks * tmax_hw *
                                   p.tile_bytes;
              if (!w_kept) bulk_load(box + p.w_off + p.coop_w_half, wp + wt + half, wbytes, full);
            }
            if constexpr (kSplit) {
              // (Stacked samples: the residual copies are samples batch .. 2 batch - 1.)
              if (box_skip) {
              } else if (p.stack_n)
                tma_load_5d(box + p.xs_off, &map, full, 0, w0, h0, p.batch + n, g * p.cblocks + cb);
              else
                tma_load_5d(box + p.xs_off, &map, full, 0, w0, h0, d0, p.split_ngc + ngc0 + cb);
              if (!w_kept) bulk_load(box + p.ws_off, wp + p.w_small + wt, wbytes, full);
            }
            if (++cb == p.cblocks) {
              cb = 0;
              if (++jws == wsteps) {
                jws = 0;
                if (++hbi == hblocks) {
                  hbi = 0;
                  ++jd;
                }
              }
            }
          } else {
            mbar_arrive_count(full, kFullCount);
          }
          if (++stage == p.stages) {
            stage = 0;
            parity ^= 1;
          }
        }
      }  // W phases
    }
    mbar_wait(empty0 + 8 * stage, parity ^ 1);
    reinterpret_cast<StageHeader*>(headers + stage * kHeaderBytes)->flags = kEnd;
    mbar_arrive_count(full0 + 8 * stage, kFullCount);
    if constexpr (kXp) {
      mbar_wait(xempty0 + 8 * xs, xpar ^ 1);
      xhdr[xs].stage = -1;  // the transposer's end
      mbar_arrive(xfull0 + 8 * xs);
    }
    return;
  }

  // ------------------------------------------------------------------ consumers
  // (CG = 2: warpgroup wgi of the block, wq the warp within it; each has its own EpiInfo
  // and named barrier, and the warps their own staging.)
  const int wgi = CG == 2 ? warp / 4 : 0, wq = CG == 2 ? warp % 4 : warp;
  if constexpr (CG == 2)
    info = reinterpret_cast<EpiInfo*>(reinterpret_cast<unsigned char*>(info) + wgi * kInfoBytes);
  float acc[kMB][kNA / 2];
  // WPH = 2 (W phase pairs, Params::wm with a W stride of 2): the second phase's
  // accumulators, and what the first phase's epilogue step left for the pair's: whether it
  // had MMAs and its valid columns.
  float acc2[WPH > 1 ? kMB : 1][WPH > 1 ? kNA / 2 : 1];
  bool pair_mma0 = false;
  int pair_cols0 = 0;
  // Split TF32 sums each K step's products in acc (fresh per step) and adds them here with
  // ordinary float adds: wgmma's own accumulation drifts with K (measured up to 2.2e-5
  // relative on 3360-long K against 4e-6 for strict float32).
  float sum[kSplit ? kMB : 1][kSplit ? kNA / 2 : 1];
  const int row_bytes = p.row_bytes;
  const int ksteps = p.bk / (2 * kc);
  T* y = static_cast<T*>(p.y);
  const T* bias = static_cast<const T*>(p.bias);
  int stage = 0;
  uint32_t parity = 0;
  float* stg = epi + warp * 16 * kEpiPitch;
  const int g8 = lane / 4, t4 = lane % 4;
  // kRaw: the two sets of A registers and which one the next batch takes.
  uint32_t ra0[kRaw ? kRawBatch<kMB> : 1][kMB][4], ra1[kRaw ? kRawBatch<kMB> : 1][kMB][4];
  int raw_odd = 0;
  // One iteration per tile: its K steps, then its epilogue (accumulators touched only
  // outside the K-step loop: anything else makes ptxas serialize the wgmma, C7520).
  for (;;) {
    mbar_wait(full0 + 8 * stage, parity);
    // Header fields are read by lane 0 and broadcast: only the lane that releases a stage
    // reads it, so that the release orders every read before the producer's next writes.
    const StageHeader* h0 = reinterpret_cast<const StageHeader*>(headers + stage * kHeaderBytes);
    const int flags = __shfl_sync(0xffffffffu, lane == 0 ? h0->flags : 0, 0);
    if (flags & kEnd) break;
    const int steps = __shfl_sync(0xffffffffu, lane == 0 ? h0->steps : 0, 0);
    const bool has_mma = !(flags & kNoMma);
    // (W phase pairs: which phase of the pair this is; its MMAs go to acc or acc2.)
    const int wrw = WPH > 1 ? __shfl_sync(0xffffffffu, lane == 0 ? h0->wm_rw : 0, 0) : 0;
    int accumulate = 0;  // the tile's first MMA overwrites the accumulators (scale-d 0)
    int prev = -1;
    if constexpr (kSplit) {
#pragma unroll
      for (int i = 0; i < kMB; ++i)
#pragma unroll
        for (int j = 0; j < kNA / 2; ++j) sum[i][j] = 0.f;
    }
    for (int s = 0; s < steps; ++s) {
      if (s > 0) mbar_wait(full0 + 8 * stage, parity);
      const unsigned char* st = stages + size_t(stage) * p.stage_bytes;
      const StageHeader* hd = reinterpret_cast<const StageHeader*>(headers + stage * kHeaderBytes);
      if (has_mma) {
        const int hcnt = __shfl_sync(0xffffffffu, lane == 0 ? hd->hcnt : 0, 0);
        const int cw = __shfl_sync(0xffffffffu, lane == 0 ? hd->cw : 0, 0);
        const int shift_h = __shfl_sync(0xffffffffu, lane == 0 ? hd->shift_h : 0, 0);
        const int doff_w = __shfl_sync(0xffffffffu, lane == 0 ? hd->doff_w : 0, 0);
        const uint32_t box = smem_addr(st);
        // (CG = 2: warpgroup wgi's weight tiles, or with coop_n its box.)
        const uint32_t wts = box + p.w_off + (CG == 2 ? wgi * p.coop_w_half : 0);
        const uint32_t xbox = box + (CG == 2 ? wgi * p.coop_box_off : 0);
        if constexpr (kRaw) {
          const int wsh = __shfl_sync(0xffffffffu, lane == 0 ? hd->wsh : 0, 0);
          raw_steps<NC, kMB, kRawBatch<kMB>>(acc, ra0, ra1, raw_odd,
                                             reinterpret_cast<const float*>(st) + wsh,
                                             p.hbox * p.wbox, wts, hcnt, cw, ksteps, shift_h,
                                             doff_w, wq, g8, t4, accumulate);
        } else {
          // Split TF32: the residual copies' descriptors, the same addresses moved by their
          // offsets (in the descriptor's 16-byte units).
          const uint64_t dws = uint64_t(p.ws_off - p.w_off) >> 4, dxs = uint64_t(p.xs_off) >> 4;
          const uint64_t mstep = uint64_t(4 * row_bytes);  // 64 box rows
          // The stage's (H tap, W tap, MMA K step) in batches of kBatch: one fence, then the
          // batch's wgmma back to back, each with descriptors in registers of its own. (A
          // loop of single wgmma needs a fence per iteration, ptxas inserts one otherwise,
          // C7519, and a fence waits for the wgmma before it: serialized.)
          // Each batch is a group of its own. Channel-major tiles wait for the batch before
          // each one they issue (wait_group 1), position-major tiles (whose batches are
          // narrow) only after the step's last batch, for all but that one (measured faster
          // on each, docs/kernels.md): the batch just issued runs while the next is prepared,
          // across K steps too, and the previous stage is released at the first wait of
          // this one. (With one group per K step, ptxas closed a group at each batch's
          // fence all the same, and wait_group 1 at the step's end then waited for every
          // batch of the step: the tensor pipe drained at each K step.)
          const int count = hcnt * cw * ksteps;
          // Position-major tiles without folded taps (narrow MMAs, many a K step: the
          // descriptors' arithmetic is a large part of the step) keep each step's
          // descriptors as the stage's first plus an offset, by 32-bit adds (desc_add): the
          // box offset of step (H tap i, W tap jw, MMA K step ks), ((hcnt - 1 - i) shift_h +
          // (cw - 1 - jw) doff_w) rows plus 32 ks bytes, moves back doff_w rows per W tap and
          // shift_h rows less the W taps' per H tap. Elsewhere each step's are built from the
          // addresses: in the folded and channel-major W pair kernels the added form made
          // ptxas inject wgmma fences (C7519) at twice the sites (docs/kernels.md).
          constexpr bool kIncr = kPos && FOLD == 1;
          const int rb16 = row_bytes >> 4;
          const int jw_back = -(doff_w * rb16 + 2 * ksteps);
          const int i_back = (cw * doff_w - shift_h) * rb16;
          const uint64_t dw0 = wgmma_desc(wts), dx0 = desc_x(xbox, row_bytes);
          int xo = ((hcnt - 1) * shift_h + (cw - 1) * doff_w) * rb16;
          int i = 0, jw = 0, ks = 0;
          uint32_t wt = wts;
          for (int it = 0; it < count; it += kBatch) {
            uint64_t da[kBatch], db[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
              if constexpr (kIncr) {
                da[u] = desc_add(dw0, uint32_t((it + u) * kCw * 2));
                db[u] = desc_add(dx0, uint32_t(xo));
                xo += 2;
                if (++ks == ksteps) {
                  ks = 0;
                  xo += jw_back;
                  if (++jw == cw) {
                    jw = 0;
                    xo += i_back;
                  }
                }
              } else {
                const uint32_t shift =
                    uint32_t((hcnt - 1 - i) * shift_h + (cw - 1 - jw) * doff_w);
                da[u] = wgmma_desc(wt);
                db[u] = desc_x(xbox + shift * row_bytes + 32 * ks, row_bytes);
                wt += kCw * 32;
                if (++ks == ksteps) {
                  ks = 0;
                  if (++jw == cw) {
                    jw = 0;
                    ++i;
                  }
                }
              }
            }
            const int left = count - it;
            wgmma_fence();
            if constexpr (WPH > 1) {
              if (wrw != 0) {
                issue_batch<T, kNA, kMB, kPos, kSplit>(acc2, da, db, left, accumulate, mstep, dws,
                                                       dxs);
              } else {
                issue_batch<T, kNA, kMB, kPos, kSplit>(acc, da, db, left, accumulate, mstep, dws,
                                                       dxs);
              }
            } else {
              issue_batch<T, kNA, kMB, kPos, kSplit>(acc, da, db, left, accumulate, mstep, dws,
                                                     dxs);
            }
            if constexpr (!kSplit) {
              if (!kPos || it + kBatch >= count) {
                wgmma_wait<1>();  // the batches before this one are done
                if (prev >= 0) {
                  mbar_arrive(empty0 + 8 * prev);  // the previous stage's MMAs are all done
                  prev = -1;
                }
              }
            }
          }
        }  // kRaw
        if constexpr (kSplit) {
          wgmma_wait<0>();
          fence_accumulators(acc);
#pragma unroll
          for (int i = 0; i < kMB; ++i)
#pragma unroll
            for (int j = 0; j < kNA / 2; ++j) sum[i][j] += acc[i][j];
          accumulate = 0;
        }
      }
      if (prev >= 0) {
        // (Not released above: kRaw, split TF32, or a stage without MMAs.) kRaw keeps one
        // batch of this step in flight; elsewhere no MMA of this step is pending but the
        // last batch.
        if constexpr (!kSplit) wgmma_wait<1>();  // the previous K step's MMAs are done
        mbar_arrive(empty0 + 8 * prev);  // release its stage
      }
      prev = stage;
      if (++stage == p.stages) {
        stage = 0;
        parity ^= 1;
      }
    }
    wgmma_wait<0>();
    fence_accumulators(acc);
    if constexpr (WPH > 1) {
      fence_accumulators(acc2);
      if (wrw == 0) {
        // The pair's first phase: keep what its epilogue needs, release its last stage and
        // go on to the second phase.
        const StageHeader* hp = reinterpret_cast<const StageHeader*>(headers + prev * kHeaderBytes);
        pair_cols0 = __shfl_sync(0xffffffffu, lane == 0 ? hp->cols : 0, 0);
        pair_mma0 = has_mma;
        mbar_arrive(empty0 + 8 * prev);
        continue;
      }
    }
    if constexpr (kSplit) {
#pragma unroll
      for (int i = 0; i < kMB; ++i)
#pragma unroll
        for (int j = 0; j < kNA / 2; ++j) acc[i][j] = sum[i][j];
    }
    // The last stage's header describes the tile's output: copy it, then release.
    const StageHeader* hd = reinterpret_cast<const StageHeader*>(headers + prev * kHeaderBytes);
    named_sync_consumers(wgi);  // every warp is done with the previous tile's info
    // (CG = 2: warpgroup wgi's channels are the tile's 64 wgi .. 64 wgi + 63; with coop_n
    // its rows are the tile's wgi coop_rows .. (wgi + 1) coop_rows - 1.)
    const bool share_w = CG == 2 && p.coop_n;
    const int tid = int(threadIdx.x % 128), cofs = share_w ? 0 : kM * wgi;
    const int roff = share_w ? wgi * p.coop_rows : 0;
    const int wg_rows = share_w ? min(max(hd->rows - roff, 0), p.coop_rows) : hd->rows;
    static_assert(kMaxRows == 32, "the rows' bases are one warp's");
    if (tid < kMaxRows) {
      if constexpr (WPH > 1) {
        const int64_t b = tid < wg_rows ? hd->base[roff + tid] : 0;
        if (tid < wg_rows) info->base[tid] = b;
        const unsigned odd = __ballot_sync(0xffffffffu, (b & 1) != 0);  // (kNoRow is even)
        if (tid == 0) info->odd_rows = odd != 0;
      } else {
        if (tid < wg_rows) info->base[tid] = hd->base[roff + tid];
      }
    } else if (tid < kMaxRows + kM) {
      const int m = tid - kMaxRows;
      info->bias[m] = bias != nullptr && m + cofs < hd->co_valid
                          ? Elem<T>::to_float(bias[int64_t(hd->co0 + cofs + m) * p.b_str])
                          : 0.f;
    } else if (tid == kMaxRows + kM) {
      info->co0 = hd->co0 + cofs;
      info->co_valid = max(hd->co_valid - cofs, 0);
      info->rows = wg_rows;
      info->cols = hd->cols;
      info->col_step = hd->col_step;
      info->fcw = hd->fcw;
      info->fdoff = hd->fdoff;
      info->wm_rw = hd->wm_rw;
      info->wm_ocols = hd->wm_ocols;
      info->wm_end = (hd->flags & kTileEnd) != 0;
      info->split_tile = hd->split_tile;
      info->split_part = hd->split_part;
      info->split_parts = hd->split_parts;
    }
    named_sync_consumers(wgi);  // every read of the header is done: release its stage
    mbar_arrive(empty0 + 8 * prev);
    if constexpr (!kPos && !kSplit && WPH == 1) {
      const int parts = info->split_parts;
      if (p.splits > 1 && has_mma && parts > 1) {
        // Split K: store this part's sums, count it; the warpgroup that counts the last part
        // adds every part's sums in part order and runs the epilogue, the others go on.
        const int part = info->split_part;
        constexpr int kChunks = kNA / 8;  // float4 of the thread's kNA / 2 sums
        const int64_t slab = int64_t(kChunks) * 128;  // float4 of a warpgroup's part
        float4* sums = reinterpret_cast<float4*>(p.partials) +
                        (int64_t(info->split_tile) * p.splits * CG) * slab;
        float4* mine = sums + (int64_t(part) * CG + wgi) * slab + tid;
#pragma unroll
        for (int c = 0; c < kChunks; ++c)
          __stcg(mine + c * 128, make_float4(acc[0][4 * c], acc[0][4 * c + 1], acc[0][4 * c + 2],
                                             acc[0][4 * c + 3]));
        __threadfence();
        named_sync_consumers(wgi);  // every thread's sums are stored and fenced
        if (tid == 0)
          info->split_last =
              atomicAdd(p.split_done + int64_t(info->split_tile) * CG + wgi, 1) == parts - 1;
        named_sync_consumers(wgi);
        if (!info->split_last) {
          __syncwarp();
          continue;
        }
        __threadfence();  // the other parts' sums, fenced before their counts, are visible
        // (Every part's sums from memory, this one's too, in part order: the same adds
        // whichever part finished last. Up to 8 chunks of a part are loaded together, so that
        // the reads wait for L2 about once a part rather than once a chunk and part.)
        constexpr int kBatch = kChunks < 8 ? kChunks : 8;
#pragma unroll
        for (int c0 = 0; c0 < kChunks; c0 += kBatch) {
#pragma unroll
          for (int c = c0; c < c0 + kBatch; ++c) {
            const float4 v = __ldcg(sums + int64_t(wgi) * slab + c * 128 + tid);
            acc[0][4 * c] = v.x;
            acc[0][4 * c + 1] = v.y;
            acc[0][4 * c + 2] = v.z;
            acc[0][4 * c + 3] = v.w;
          }
          for (int j = 1; j < parts; ++j) {
            const float4* src = sums + (int64_t(j) * CG + wgi) * slab + tid;
            float4 v[kBatch];
#pragma unroll
            for (int c = 0; c < kBatch; ++c) v[c] = __ldcg(src + (c0 + c) * 128);
#pragma unroll
            for (int c = 0; c < kBatch; ++c) {
              acc[0][4 * (c0 + c)] += v[c].x;
              acc[0][4 * (c0 + c) + 1] += v[c].y;
              acc[0][4 * (c0 + c) + 2] += v[c].z;
              acc[0][4 * (c0 + c) + 3] += v[c].w;
            }
          }
        }
      }
    }
    const int co_valid = info->co_valid, rows = info->rows, cols = info->cols;
    const int64_t ys1 = p.y_str[1];
    if constexpr (WPH > 1 && kPos) {
      pair_epilogue<T, N, NC>(acc, acc2, pair_mma0, has_mma, pair_cols0, stg, y, info, co_valid,
                              rows, cols, ys1, p.wbox, wq, g8, t4, p.store4 != 0);
    } else if constexpr (WPH > 1) {
      pair_epilogue_cm<T, N>(acc, acc2, pair_mma0, has_mma, pair_cols0, stg, y, info, co_valid,
                             rows, cols, ys1, p.wbox, wq, g8, t4, p.store4 != 0);
    } else if (!kFold && !kSplit && p.wm) {
      // (Not with split TF32: its epilogue's copy of the running sums and this one together
      // made ptxas serialize its wgmma, C7515.)
      if constexpr (!kFold && !kSplit)
        merged_phase_epilogue<T, N, NC>(
            acc, reinterpret_cast<T*>(NC > 0 ? epi : epi + kEpiBytes / 4), stg, y, p, info,
            co_valid, rows, cols, ys1, has_mma, wq, g8, t4);
    } else if constexpr (!kPos && MF > 1) {
      // W taps stacked in M: accumulator row s kC + c (kC = 64 / MF channels, slot s < MF;
      // warp w holds rows 16w .. 16w + 15) holds, for W tap MF j + s of every weight tile j,
      // the products of channel c at each box position; output position n is the sum over s
      // of row s kC + c at position n + (MF - 1 - s) doff (slot s was multiplied against the
      // box at slot 0's shift). Per pass of 64 positions every warp stages its rows for the
      // pass's positions and the next 8 (the planner keeps (MF - 1) doff at most 8), then
      // warp w adds up and stores channels w kC / 4 .. (w + 1) kC / 4 - 1 of the pass, a
      // position per lane (32 adjacent outputs of a channel per store).
      constexpr int kC = kM / MF, kPer = kC / 4;
      const int fdoff = __shfl_sync(0xffffffffu, info->fdoff, 0);
      const bool has_bias = p.bias != nullptr;
#pragma unroll
      for (int pass = 0; pass < (N + 63) / 64; ++pass) {
#pragma unroll
        for (int pp = 0; pp < 9; ++pp) {
          const int pi = pass * 8 + pp;
          if (pi < N / 8) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
              *reinterpret_cast<float2*>(stg + (8 * h + g8) * kEpiPitch + 8 * pp + 2 * t4) =
                  make_float2(acc[0][4 * pi + 2 * h], acc[0][4 * pi + 2 * h + 1]);
          }
        }
        named_sync_consumers();  // every warp's rows of the pass are staged
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int j = lane + 32 * k, nn = pass * 64 + j;
          if (nn < N) {
            const int r = nn / p.wbox, col = nn - r * p.wbox;
            if (r < rows && col < cols && info->base[r] != kNoRow) {
              T* q = y + (info->base[r] + col * info->col_step +
                          int64_t(info->co0 + wq * kPer) * ys1);
#pragma unroll 1
              for (int i = 0; i < kPer && wq * kPer + i < co_valid; ++i, q += ys1) {
                const int c = wq * kPer + i;
                float v = has_bias ? info->bias[c] : 0.f;
                if (has_mma) {
#pragma unroll
                  for (int s = 0; s < MF; ++s) {
                    const int row = s * kC + c;
                    v += epi[(row / 16) * 16 * kEpiPitch + (row % 16) * kEpiPitch + j +
                             (MF - 1 - s) * fdoff];
                  }
                }
                *q = Elem<T>::from_float(v);
              }
            }
          }
        }
        named_sync_consumers();  // the pass's staging is read
      }
    } else if constexpr (!kPos) {
      // Epilogue: warp w owns channels 16w .. 16w + 15 (rows 16w + 8h + g of the
      // accumulators), stages them 64 positions at a time and stores each channel's
      // positions two per lane.
#pragma unroll
      for (int pass = 0; pass < (N + 63) / 64; ++pass) {
#pragma unroll
        for (int pp = 0; pp < 8; ++pp) {
          const int pi = pass * 8 + pp;
          if (pi < N / 8) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
              *reinterpret_cast<float2*>(stg + (8 * h + g8) * kEpiPitch + 8 * pp + 2 * t4) =
                  make_float2(acc[0][4 * pi + 2 * h], acc[0][4 * pi + 2 * h + 1]);
          }
        }
        __syncwarp();
        const int nn = pass * 64 + 2 * lane;
        if (ys1 == 1 && co_valid >= 16 * wq + 16) {
          store_position_channels<T, N>(y, stg, pass, lane, wq * 16, info, p.wbox, rows, cols,
                                        !has_mma);
        } else if (p.store4 && ys1 % 2 == 0) {
          store_runs_quads_b<T, 1, 64>(p.bias != nullptr, y, stg, kEpiPitch, pass * 64, 0, lane,
                                       wq * 16, co_valid - wq * 16, info, p.wbox, rows, cols,
                                       ys1, N, !has_mma);
        } else if (nn < N) {
          store_two_positions_b<T, 4>(p.bias != nullptr, y, stg + 2 * lane, kEpiPitch, nn,
                                      wq * 16, co_valid - wq * 16, info, p.wbox, rows, cols,
                                      ys1, !has_mma);
        }
        __syncwarp();
      }
    } else if constexpr (!kFold) {
      // Position-major tile: acc[i][4p + 2h + s] is position 64i + 16w + 8h + g, channel
      // 8p + 2t + s. Warp w owns positions 64i + 16w .. 64i + 16w + 15 (16 kMB of them);
      // it stages them 16 channels at a time (position-minor, pitch 16 kMB + 4: the
      // lanes' scalar stores hit distinct banks) and stores each channel's positions two
      // per lane.
      constexpr int kPitch = 16 * kMB + 4;
      static_assert(kPitch <= kEpiPitch, "staging fits the warp's area");
      const int j = 2 * lane;  // the lane's first staged position
      const bool store4_pm = (kMB == 1 || kMB == 2 || kMB == 4) && p.store4;
      const int nn = 64 * (j / 16) + 16 * wq + j % 16;
#pragma unroll
      for (int pass = 0; pass < (NC + 15) / 16; ++pass) {
#pragma unroll
        for (int pp = 0; pp < 2; ++pp) {
          const int pi = 2 * pass + pp;
          if (pi < NC / 8) {
#pragma unroll
            for (int i = 0; i < kMB; ++i)
#pragma unroll
              for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                  stg[(8 * pp + 2 * t4 + e) * kPitch + 16 * i + 8 * h + g8] =
                      acc[i][4 * pi + 2 * h + e];
          }
        }
        __syncwarp();
        const int left = co_valid - 16 * pass;  // the pass's valid channels
        if (ys1 == 1 && left >= 16) {
          // (Channels innermost: each lane stores the 16 channels of staged positions lane
          // and lane + 32.)
#pragma unroll
          for (int k = 0; k < (16 * kMB + 31) / 32; ++k) {
            const int q = lane + 32 * k;
            if (q < 16 * kMB)
              store_channels_of_position<T, 16>(y, stg, kPitch, q,
                                                64 * (q / 16) + 16 * wq + q % 16, 16 * pass,
                                                info, p.wbox, rows, cols, !has_mma);
          }
        } else if (NC % 16 == 8 && ys1 == 1 && left == 8) {
          // (The last 8 channels of a tile of 8, 24 or 40.)
#pragma unroll
          for (int k = 0; k < (16 * kMB + 31) / 32; ++k) {
            const int q = lane + 32 * k;
            if (q < 16 * kMB)
              store_channels_of_position<T, 8>(y, stg, kPitch, q,
                                               64 * (q / 16) + 16 * wq + q % 16, 16 * pass,
                                               info, p.wbox, rows, cols, !has_mma);
          }
        } else if (store4_pm && (kMB != 4 || ys1 % 2 == 0)) {
          // (Four outputs a lane, Params::store4: the warp's kMB runs of 16 positions, one
          // in each 64-position block.)
          if constexpr (kMB == 1 || kMB == 2 || kMB == 4)
            store_runs_quads_b<T, kMB, 16>(p.bias != nullptr, y, stg, kPitch, 16 * wq, 64,
                                           lane, 16 * pass, left, info, p.wbox, rows, cols, ys1,
                                           N, !has_mma);
        } else if (j < 16 * kMB) {
          // (Unrolled by 4 at 64 channels: fully, the pass loop above stays rolled and the
          // accumulators go to local memory.)
          store_two_positions_b<T, (NC > 48 ? 4 : 16)>(p.bias != nullptr, y, stg + j, kPitch, nn,
                                                       16 * pass, left, info, p.wbox, rows,
                                                       cols, ys1, !has_mma);
        }
        __syncwarp();
      }
    } else {
      // Folded W taps: acc[i][4p + 2h + s] is position 64i + 16w + 8h + g, column 8p + 2t + s,
      // which is W tap f = p / (NC / 8) of channel 8 (p % (NC / 8)) + 2t + s. Output position
      // n sums tap f's column of position n + (cw - 1 - f) * doff (the shift the unfolded
      // MMA step gives that tap). The warpgroup adds the taps into a shared [NC][kNP + 4]
      // buffer, one tap per round between barriers (within a round every target is one
      // thread's), then stores each channel's positions two per thread.
      constexpr int kNP = 64 * kMB;
      constexpr int kOPitch = kNP + 4;  // (2t + s) * kOPitch + g: 32 banks for a warp
      // (Targets before position 0 go to the thread's own slot past the buffer, so that no
      // accumulator is read on a divergent path: ptxas would serialize the wgmma, C7520.)
      static_assert((NC * kOPitch + 128) * 4 <= kEpiBytes, "the folded sums fit the staging area");
      // W taps scattered (p.sc): box column j of box row r, tap f, goes to output column
      // j * s + e0 + f * dil of the tile's row r (kept where that is one of its sc_wo
      // columns); the sums are [NC][sc_pitch] floats (rows x sc_wo of them), zeroed first
      // since not every column gets every round. (The planner keeps them and the slots
      // below within the staging area.)
      const bool sc = p.sc != 0;
      const int pitch = sc ? p.sc_pitch : kOPitch;
      const int trash = NC * pitch + int(threadIdx.x);
      // (Broadcast, so that ptxas sees the tap tests below as uniform: C7520 otherwise.)
      const int fcw = __shfl_sync(0xffffffffu, has_mma ? info->fcw : 0, 0);
      const int fdoff = info->fdoff;
      named_sync_consumers();  // the previous tile's stores have read the buffer
      // (Two loops, so that the folded taps' rounds stay as they were without the scatter:
      // one load fewer per element in the first round.)
      if (sc) {
        for (int k = int(threadIdx.x); k < NC * pitch; k += 128) epi[k] = 0.f;
        named_sync_consumers();
#pragma unroll
        for (int f = 0; f < FOLD; ++f) {
          if (f < fcw) {
            const int ef = p.sc_e0 + f * p.sc_dil;
#pragma unroll
            for (int i = 0; i < kMB; ++i)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int m = 64 * i + 16 * wq + 8 * h + g8;
                const int r = m / p.wbox;
                const int o = (m - r * p.wbox) * p.sc_s + ef;
                const bool ok = r < p.rows && o >= 0 && o < p.sc_wo;
                const int at0 = r * p.sc_wo + o;
#pragma unroll
                for (int c = 0; c < NC / 8; ++c)
#pragma unroll
                  for (int e = 0; e < 2; ++e) {
                    const float v = acc[i][4 * (f * (NC / 8) + c) + 2 * h + e];
                    const int at = ok ? (2 * t4 + 8 * c + e) * pitch + at0 : trash;
                    epi[at] += v;
                  }
              }
            named_sync_consumers();
          }
        }
      } else {
#pragma unroll
        for (int f = 0; f < FOLD; ++f) {
          if (f < fcw) {
            const int sh = (fcw - 1 - f) * fdoff;
#pragma unroll
            for (int i = 0; i < kMB; ++i)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int n = 64 * i + 16 * wq + 8 * h + g8 - sh;
#pragma unroll
                for (int c = 0; c < NC / 8; ++c)
#pragma unroll
                  for (int e = 0; e < 2; ++e) {
                    const float v = acc[i][4 * (f * (NC / 8) + c) + 2 * h + e];
                    const int at = n >= 0 ? (2 * t4 + 8 * c + e) * kOPitch + n : trash;
                    epi[at] = f == 0 ? v : epi[at] + v;
                  }
              }
            named_sync_consumers();
          }
        }
      }
      // The tile's positions (scatter: rows x sc_wo output columns), two per thread and pass.
      const int np = sc ? p.rows * p.sc_wo : kNP, fw = sc ? p.sc_wo : p.wbox;
#pragma unroll 1
      for (int nn = 2 * int(threadIdx.x); nn < np; nn += 256) {
#pragma unroll 1
        for (int c8 = 0; c8 < NC; c8 += 8)
          store_two_positions<T, 8, 8>(y, epi + c8 * pitch + nn, pitch, nn, c8, co_valid - c8,
                                       info, fw, rows, cols, ys1, !has_mma);
      }
      // (The warp reconverges after the stores' divergent paths before the next tile's
      // wgmma: without it ptxas serializes them, C7520.)
      __syncwarp();
    }
  }
#endif
}

}  // namespace wg
}  // namespace cuda
}  // namespace convt
