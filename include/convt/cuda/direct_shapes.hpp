// convt/cuda/direct_shapes.hpp — the host side of the direct CUDA kernels
// (direct_kernels.cuh): the canonical problem's parameters, and the shapes and choices of
// the direct forward's forms (by rows of outputs, several output channels a thread), which
// the launches take and the planner's tests check without a device. Needs no CUDA header.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#if defined(__CUDACC__)
#define CONVT_DIRECT_HD __host__ __device__
#else
#define CONVT_DIRECT_HD
#endif

namespace convt {
namespace cuda {
namespace direct {

// Problem shape and tensor strides, in the canonical 3-D form. Spatial arrays are indexed
// (D, H, W); stride arrays (N, C, D, H, W), in elements.
//
// The tensors are named by their role in the forward problem: `x` is the input (or
// grad_input), `w` the weight (or grad_weight), `y` the output (or grad_output).
struct DirectParams {
  int64_t N, C_in, C_out, groups;
  int64_t cig, cog;  // channels per group: C_in/groups, C_out/groups
  int64_t in[3], k[3], out[3], stride[3], pad[3], dil[3];
  // Per dimension, with g = gcd(stride, dil): the taps reaching one output position are
  // k0, k0 + s_g, k0 + 2*s_g, ... and their input positions step down by d_g; k0 solves
  // k0*d_g = (o + pad)/g (mod s_g), found with d_g_inv = d_g^-1 (mod s_g).
  int64_t gcd[3], s_g[3], d_g[3], d_g_inv[3];
  int64_t x_str[5], w_str[5], y_str[5];
  int64_t b_str;  // element stride of the 1-D bias (or grad_bias)
  // forward_kernel runs only where this is null or points at a nonzero flag (a recompute
  // that the device decides on: see cuda_backend.cu, split TF32 and non-finite values).
  const int* only_if = nullptr;
};

// Block sizes, and the resident blocks per multiprocessor the register allocation aims for
// (3 x 256 threads leaves 85 registers a thread: enough for the 64-bit index arithmetic of
// the gather kernels without spilling).
constexpr int kThreads = 256;  // forward, grad_input
constexpr int kMinBlocks = 3;
constexpr int kReduceThreads = 256;  // grad_weight, grad_bias
constexpr int kReduceMinBlocks = 4;

// forward_rows_kernel's shape (forward_rows_shape).
struct RowsShape {
  int tw;              // output columns per block (1..256; direct_column_tiles)
  int rows_per_pass;   // rows the block's threads take at once: 256 / tw
  int chunk_rows;      // rows per chunk: a multiple of rows_per_pass, at most 256
  int rows, w_tiles;   // output rows N * C_out * D * H, column tiles
  bool one_row;        // one row a thread at a time (CONVT_DIRECT_ROWS=1), else kRows
};

// Output rows a thread of forward_rows_kernel runs at a time, by its kCig and the size of
// its accumulator type: as many as keep the loads in flight (two W taps' input and weight,
// kCig channels each, per row) within the 64 registers of __launch_bounds__(256, 4) without
// spills (checked with ptxas -v for sm_90a: 4 rows of 2 float channels spill, of 2 bfloat16
// channels do not, 2 rows of 4 double channels spill); 2 with the channel loop not unrolled.
CONVT_DIRECT_HD constexpr int forward_rows_per_thread(int cig, int acc_bytes) {
  return cig == 1 ? 4 : cig == 4 && acc_bytes > 4 ? 1 : 2;
}

// forward_channels_kernel's shape (forward_channels_shape).
struct ChannelsShape {
  int tw;             // output columns per block (1..256; direct_column_tiles)
  int rows_per_pass;  // rows the block's threads take at once: 256 / tw
  int chunk_rows;     // rows (n, od, oh) per chunk: a multiple of rows_per_pass, at most 256
  int rows, w_tiles;  // N * D * H output rows, column tiles
  int co_chunks;      // chunks of kCo channels per group (the last may be partial)
  int kco;            // kCo: 4, 8 or 16
  int taps;           // kD * kH * kW
  int smem_bytes;     // the weight table: taps * cig * kCo accumulators
};

namespace host {
inline int64_t gcd(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}
// a^-1 (mod m) for gcd(a, m) = 1, m >= 1 (0 when m == 1).
inline int64_t inverse_mod(int64_t a, int64_t m) {
  if (m == 1) return 0;
  // Extended Euclid on (a mod m, m); coefficients stay below m in magnitude.
  int64_t old_r = a % m, r = m, old_s = 1, s = 0;
  while (r != 0) {
    const int64_t q = old_r / r;
    int64_t t = old_r - q * r;
    old_r = r;
    r = t;
    t = old_s - q * s;
    old_s = s;
    s = t;
  }
  const int64_t inv = old_s % m;
  return inv < 0 ? inv + m : inv;
}
inline unsigned grid_for(int64_t items, int64_t per_block, int64_t max_blocks) {
  int64_t blocks = (items + per_block - 1) / per_block;
  if (blocks > max_blocks) blocks = max_blocks;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks);
}
}  // namespace host

// Fill the derived per-dimension fields (gcd, s_g, d_g, d_g_inv) from stride and dil.
inline void finish_params(DirectParams& p) {
  for (int d = 0; d < 3; ++d) {
    p.gcd[d] = host::gcd(p.stride[d], p.dil[d]);
    p.s_g[d] = p.stride[d] / p.gcd[d];
    p.d_g[d] = p.dil[d] / p.gcd[d];
    p.d_g_inv[d] = host::inverse_mod(p.d_g[d], p.s_g[d]);
  }
}

// `max_blocks` caps the grid (e.g. a small multiple of the device's multiprocessor count);
// the kernels loop over whatever the grid does not cover.
// Whether forward_kernel may run with int indices: the outputs, the largest element offset
// of x, w, y and the bias, and every tap quantity (o + pad, k * dil, the grid's stride)
// below 2^30, and s_g small enough that k0's product stays below 2^31.
inline bool forward_fits_int32(const DirectParams& p, int64_t total, int64_t grid_threads) {
  constexpr int64_t kLimit = int64_t(1) << 30;
  const int64_t xs[5] = {p.N, p.C_in, p.in[0], p.in[1], p.in[2]};
  const int64_t ws[5] = {p.C_in, p.cog, p.k[0], p.k[1], p.k[2]};
  const int64_t ys[5] = {p.N, p.C_out, p.out[0], p.out[1], p.out[2]};
  int64_t xo = 0, wo = 0, yo = 0;
  for (int d = 0; d < 5; ++d) {
    if (p.x_str[d] < 0 || p.w_str[d] < 0 || p.y_str[d] < 0) return false;
    if (xs[d] >= kLimit || ws[d] >= kLimit || ys[d] >= kLimit) return false;
    xo += (xs[d] - 1) * p.x_str[d];
    wo += (ws[d] - 1) * p.w_str[d];
    yo += (ys[d] - 1) * p.y_str[d];
    if (xo >= kLimit || wo >= kLimit || yo >= kLimit) return false;
  }
  if (p.b_str < 0 || (p.C_out - 1) * p.b_str >= kLimit) return false;
  for (int d = 0; d < 3; ++d) {
    if (p.pad[d] >= kLimit || p.stride[d] >= kLimit || p.dil[d] >= kLimit) return false;
    if (p.k[d] * p.dil[d] >= kLimit || p.s_g[d] > 46340) return false;
  }
  return total + grid_threads < kLimit;
}

// The direct forward kernels' column tiles: a block takes tw consecutive output columns of
// rows_per_pass = kThreads / tw rows at once (a thread one column of one row), the
// kThreads - rows_per_pass * tw threads left over idle. W is cut into m tiles of
// ceil(W / m) columns, m from the fewest that fit kThreads (ceil(W / kThreads)) up to 15
// more while the tiles keep 32 columns (a warp's loads of a row stay contiguous), taking the
// fewest tiles whose share of busy threads (columns of W over the tiles' columns, times the
// busy threads) is within 2% of the best of them: 34 columns make one tile of 7 rows of 34
// (93% of the threads busy, where the next power of two, 64, keeps 53%), 65 columns two
// tiles of 33 (89%), 300 columns six tiles of 50 (98%).
struct ColumnTiles {
  int tw, rows_per_pass, w_tiles;
};
inline ColumnTiles direct_column_tiles(int64_t width) {
  const int64_t W = std::max<int64_t>(width, 1);
  const int64_t m0 = (W + kThreads - 1) / kThreads;
  auto busy = [&](int64_t m) {
    const int64_t tw = (W + m - 1) / m, tiles = (W + tw - 1) / tw;
    return double(W) / double(tiles * tw) * double((kThreads / tw) * tw) / kThreads;
  };
  double best = busy(m0);
  for (int64_t m = m0 + 1; m <= m0 + 15 && (W + m - 1) / m >= 32; ++m)
    best = std::max(best, busy(m));
  int64_t m = m0;
  while (busy(m) < best - 0.02) ++m;
  ColumnTiles ct{};
  ct.tw = int((W + m - 1) / m);
  ct.rows_per_pass = kThreads / ct.tw;
  ct.w_tiles = int((W + ct.tw - 1) / ct.tw);
  return ct;
}

// Rows per chunk of the direct forward kernels: the whole passes of rows_per_pass rows that
// fit kThreads (the kernels' row tables), halved while that leaves fewer than
// max_blocks / 8 blocks (`blocks(chunk)`), down to one pass.
template <typename Blocks>
inline int direct_chunk_rows(int rows_per_pass, int64_t max_blocks, Blocks blocks) {
  int passes = kThreads / rows_per_pass;
  while (passes > 1 && blocks(passes * rows_per_pass) < max_blocks / 8) passes = (passes + 1) / 2;
  return passes * rows_per_pass;
}

// forward_rows_kernel's shape for p, and whether it runs it: where forward_fits_int32 holds
// (and CONVT_DIRECT_ROWS=0, read at every call, does not ask for the per-output kernel;
// CONVT_DIRECT_ROWS=1 asks for one row a thread at a time, the form before
// forward_rows_per_thread, for measuring). Column tiles of direct_column_tiles, chunks of
// direct_chunk_rows.
inline bool forward_rows_shape(const DirectParams& p, int64_t total, int64_t max_blocks,
                               RowsShape& rs) {
  const char* env = std::getenv("CONVT_DIRECT_ROWS");
  if (env != nullptr && env[0] == '0') return false;
  if (!forward_fits_int32(p, total, int64_t(kThreads) * 65535)) return false;
  rs.one_row = env != nullptr && env[0] == '1';
  const ColumnTiles ct = direct_column_tiles(p.out[2]);
  rs.tw = ct.tw;
  rs.rows_per_pass = ct.rows_per_pass;
  rs.w_tiles = ct.w_tiles;
  rs.rows = int(p.N * p.C_out * p.out[0] * p.out[1]);
  rs.chunk_rows = direct_chunk_rows(rs.rows_per_pass, max_blocks, [&](int chunk) {
    return ((int64_t(rs.rows) + chunk - 1) / chunk) * rs.w_tiles;
  });
  return true;
}

// The weight table's bound (forward_channels_kernel): with the kernel's static tables
// (eight of kThreads ints and the bias, at most kChannelsStaticSmemBytes: the kernel
// asserts it), within the 48 KB of shared memory a block gets without opting in.
constexpr int kChannelsStaticSmemBytes = 8 * kThreads * 4 + 16 * 8;
constexpr int kChannelsSmemBytes = 48 * 1024 - kChannelsStaticSmemBytes;

// forward_channels_kernel's shape for p, and whether it runs it: groups of three output
// channels or more (with two, kCo = 4 measured slower than the kernel by rows: 1-D groups
// of 2 -> 2 channels, H100), where forward_fits_int32 holds and the weight table of the chosen kCo
// fits kChannelsSmemBytes. kCo: 16, 8 or 4 channels a thread (16 from 12 channels a
// group, 8 from 6), the largest that still gives one thread per output position and chunk
// of channels for a full wave of blocks (max_blocks / 32 multiprocessors x 768 threads), so
// that small layers keep their parallelism; halved while the table does not fit. Columns
// and row chunks as forward_rows_shape's. CONVT_DIRECT_CHANNELS (read at every call): `0`
// runs the kernels by rows instead (as does CONVT_DIRECT_ROWS set), `4`, `8` or `16` asks
// for that kCo (at most the largest instantiated), for tests and measuring.
inline bool forward_channels_shape(const DirectParams& p, int64_t total, int64_t max_blocks,
                                   int acc_bytes, ChannelsShape& cs) {
  const char* env = std::getenv("CONVT_DIRECT_CHANNELS");
  if (env != nullptr && env[0] == '0') return false;
  const char* rows = std::getenv("CONVT_DIRECT_ROWS");
  if (rows != nullptr && rows[0] != '\0') return false;
  if (p.cog < 3) return false;
  if (!forward_fits_int32(p, total, int64_t(kThreads) * 65535)) return false;
  const ColumnTiles ct = direct_column_tiles(p.out[2]);
  cs.tw = ct.tw;
  cs.rows_per_pass = ct.rows_per_pass;
  cs.w_tiles = ct.w_tiles;
  cs.rows = int(p.N * p.out[0] * p.out[1]);
  const int64_t taps = p.k[0] * p.k[1] * p.k[2];  // (each below 2^30: forward_fits_int32)
  if (taps * p.cig * 4 * acc_bytes > kChannelsSmemBytes) return false;
  cs.taps = int(taps);
  const int64_t positions = int64_t(cs.rows) * cs.w_tiles * cs.tw;
  const int64_t wave = std::max<int64_t>(max_blocks / 32, 1) * 768;
  // The largest kCo instantiated: 16 with the channel loop unrolled (1-4 input channels a
  // group), 8 with it not, 4 in float64 (more accumulators spill at the launch bounds'
  // registers; ptxas -v, sm_90a).
  const int kco_max = acc_bytes > 4 ? 4 : p.cig <= 4 ? 16 : 8;
  int kco = std::min(p.cog >= 12 ? 16 : p.cog >= 6 ? 8 : 4, kco_max);
  while (kco > 4 && positions * p.groups * ((p.cog + kco - 1) / kco) < wave) kco /= 2;
  if (env != nullptr && (std::atoi(env) == 4 || std::atoi(env) == 8 || std::atoi(env) == 16))
    kco = std::min(std::atoi(env), kco_max);
  while (kco >= 4 && int64_t(cs.taps) * p.cig * kco * acc_bytes > kChannelsSmemBytes) kco /= 2;
  if (kco < 4) return false;
  cs.kco = kco;
  cs.co_chunks = int((p.cog + kco - 1) / kco);
  cs.smem_bytes = int(int64_t(cs.taps) * p.cig * kco * acc_bytes);
  if (p.groups * cs.co_chunks * int64_t(cs.w_tiles) > INT32_MAX) return false;
  cs.chunk_rows = direct_chunk_rows(cs.rows_per_pass, max_blocks, [&](int chunk) {
    return ((int64_t(cs.rows) + chunk - 1) / chunk) * cs.w_tiles * p.groups * cs.co_chunks;
  });
  return true;
}
// The form of the direct forward that launch_forward runs for p, in words (the forward's
// descriptions): "chunks of kCo output channels a thread" (forward_channels_kernel), "by rows
// of outputs" (forward_rows_kernel) or "one output a thread" (forward_kernel).
inline std::string direct_forward_form(const DirectParams& p, int64_t max_blocks,
                                       int acc_bytes) {
  const int64_t total = p.N * p.C_out * p.out[0] * p.out[1] * p.out[2];
  ChannelsShape cs{};
  if (forward_channels_shape(p, total, max_blocks, acc_bytes, cs))
    return "chunks of " + std::to_string(cs.kco) + " output channels a thread";
  RowsShape rs{};
  if (forward_rows_shape(p, total, max_blocks, rs)) return "by rows of outputs";
  return "one output a thread";
}

}  // namespace direct
}  // namespace cuda
}  // namespace convt
