// convt/cuda/direct_kernels.cuh — direct CUDA kernels for every direction of a transposed
// convolution: always correct, for every argument combination, layout and dtype.
//
// All kernels work on the canonical 3-D problem with rank-5 (N, C, D, H, W) tensors of
// arbitrary element strides, described by DirectParams, and index with 64-bit integers
// in grid-stride loops (the forward with 32-bit ones where every offset fits), so tensors
// may exceed 2^31 elements.
//
//   forward      a gather per output element y[n, c, o]. Per spatial dimension the taps
//                k that reach o form an arithmetic progression (solved with a modular
//                inverse), so the loops visit only contributing (input position, tap)
//                pairs; the innermost loop runs over the group's input channels with no
//                division. Where every offset fits an int, forward_rows_kernel solves the
//                W taps once per column and the D and H taps once per output row (tables in
//                shared memory), and forward_channels_kernel, for groups of three output
//                channels or more, takes several output channels a thread against a table
//                of the weights in shared memory; elsewhere forward_kernel, one thread per
//                output, solves them per element in 64-bit arithmetic. All sum the same
//                products in the same order.
//   grad_input   one thread per element dx[n, c, i]: a direct convolution of dy with w.
//                Per dimension the taps with o = i*stride - pad + k*dil inside the output
//                form a contiguous range.
//   grad_weight  one block per weight element w[ci, co, k]; its threads stride over the box
//                of (n, input positions) whose tap k lands inside the output, accumulate
//                x * dy, and combine their sums with a fixed-order block reduction. No
//                atomics: results are bitwise reproducible.
//   grad_bias    one block per channel, reducing dy[:, c] over batch and positions.
//
// float16/bfloat16 are loaded as float, accumulated in float and rounded once on store;
// float32 accumulates in float with fused multiply-adds, float64 in double. Outputs are
// written once, element by element, and storage between elements is never touched.
//
// The header needs only the CUDA runtime headers, so that a single-file build can inline
// it. Each launch_* function launches one kernel on a stream and returns
// cudaGetLastError() (which also clears a launch error).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "convt/cuda/direct_shapes.hpp"

namespace convt {
namespace cuda {
namespace direct {


// ---------------------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------------------

// Elem<T>: the accumulator type of T, conversions to and from it, and the multiply-add.
template <typename T>
struct Elem;

template <>
struct Elem<float> {
  using Acc = float;
  __device__ static float load(const float* p) { return *p; }
  __device__ static void store(float* p, float v) { *p = v; }
  __device__ static float madd(float a, float b, float c) { return __fmaf_rn(a, b, c); }
};

template <>
struct Elem<double> {
  using Acc = double;
  __device__ static double load(const double* p) { return *p; }
  __device__ static void store(double* p, double v) { *p = v; }
  __device__ static double madd(double a, double b, double c) { return __fma_rn(a, b, c); }
};

template <>
struct Elem<__half> {
  using Acc = float;
  __device__ static float load(const __half* p) { return __half2float(*p); }
  __device__ static void store(__half* p, float v) { *p = __float2half_rn(v); }
  __device__ static float madd(float a, float b, float c) { return __fmaf_rn(a, b, c); }
};

template <>
struct Elem<__nv_bfloat16> {
  using Acc = float;
  __device__ static float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  __device__ static void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
  __device__ static float madd(float a, float b, float c) { return __fmaf_rn(a, b, c); }
};

// ---------------------------------------------------------------------------------------
// Integer helpers (divisor b > 0)
// ---------------------------------------------------------------------------------------

__host__ __device__ inline int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }
__host__ __device__ inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__host__ __device__ inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// (a * b) mod m for 0 <= a, b < m.
__device__ inline int64_t mul_mod(int64_t a, int64_t b, int64_t m) {
  if (m <= (int64_t(1) << 31)) return (a * b) % m;
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(b);
  return static_cast<int64_t>(p % static_cast<unsigned __int128>(m));
}

// An arithmetic progression of `count` taps: tap k0 + j*k_step meets position
// i0 + j*i_step of the other tensor, j = 0 .. count-1.
struct TapRun {
  int64_t k0, k_step, i0, i_step, count;
};

// Forward, dimension d: the taps k in [0, K) and input positions i in [0, in) with
// i*stride - pad + k*dil = o.
__device__ inline TapRun forward_taps(const DirectParams& p, int d, int64_t o) {
  TapRun r{0, p.s_g[d], 0, -p.d_g[d], 0};
  const int64_t t0 = o + p.pad[d];  // = i*stride + k*dil, and >= 0
  int64_t k0 = 0;
  if (p.s_g[d] > 1) {
    if (t0 % p.gcd[d] != 0) return r;
    k0 = mul_mod((t0 / p.gcd[d]) % p.s_g[d], p.d_g_inv[d], p.s_g[d]);
  } else if (p.gcd[d] > 1 && t0 % p.gcd[d] != 0) {
    return r;
  }
  if (k0 >= p.k[d]) return r;
  const int64_t i_first = (t0 - k0 * p.dil[d]) / p.stride[d];  // exact
  if (i_first < 0) return r;
  // i = i_first - j*d_g must lie in [0, in) and k = k0 + j*s_g in [0, K).
  const int64_t j_lo = i_first >= p.in[d] ? ceil_div(i_first - p.in[d] + 1, p.d_g[d]) : 0;
  const int64_t j_hi = min64(i_first / p.d_g[d], (p.k[d] - 1 - k0) / p.s_g[d]);
  r.count = max64(j_hi - j_lo + 1, 0);
  r.k0 = k0 + j_lo * p.s_g[d];
  r.i0 = i_first - j_lo * p.d_g[d];
  return r;
}

// forward_taps in index type I (int where forward_fits_int32 says every value fits; the
// same arithmetic, so the same taps in the same order).
template <typename I>
struct TapRunI {
  I k0, k_step, i0, i_step, count;
};

template <typename I>
__device__ __forceinline__ TapRunI<I> forward_taps_i(const DirectParams& p, int d, I o) {
  const I s_g = I(p.s_g[d]), d_g = I(p.d_g[d]), g = I(p.gcd[d]), kd = I(p.k[d]), in = I(p.in[d]);
  TapRunI<I> r{0, s_g, 0, -d_g, 0};
  const I t0 = o + I(p.pad[d]);  // = i*stride + k*dil, and >= 0
  I k0 = 0;
  if (s_g > 1) {
    if (t0 % g != 0) return r;
    if constexpr (sizeof(I) == 8) {
      k0 = mul_mod((t0 / g) % s_g, p.d_g_inv[d], s_g);
    } else {
      // (s_g <= 46340 here, forward_fits_int32: the product stays below 2^31.)
      k0 = (t0 / g) % s_g * I(p.d_g_inv[d]) % s_g;
    }
  } else if (g > 1 && t0 % g != 0) {
    return r;
  }
  if (k0 >= kd) return r;
  const I i_first = (t0 - k0 * I(p.dil[d])) / I(p.stride[d]);  // exact
  if (i_first < 0) return r;
  const I j_lo = i_first >= in ? (i_first - in + d_g) / d_g : I(0);  // ceil((i_first-in+1)/d_g)
  const I j_hi_a = i_first / d_g, j_hi_b = (kd - 1 - k0) / s_g;
  const I j_hi = j_hi_a < j_hi_b ? j_hi_a : j_hi_b;
  r.count = j_hi - j_lo + 1 > 0 ? j_hi - j_lo + 1 : I(0);
  r.k0 = k0 + j_lo * s_g;
  r.i0 = i_first - j_lo * d_g;
  return r;
}

// Grad-input, dimension d: the taps k in [0, K) for which o = i*stride - pad + k*dil lies in
// [0, out); o is returned in i0/i_step.
__device__ inline TapRun grad_input_taps(const DirectParams& p, int d, int64_t i) {
  const int64_t base = i * p.stride[d] - p.pad[d];  // o at k = 0
  const int64_t k_lo = max64(ceil_div(-base, p.dil[d]), 0);
  const int64_t k_hi = min64(floor_div(p.out[d] - 1 - base, p.dil[d]), p.k[d] - 1);
  return TapRun{k_lo, 1, base + k_lo * p.dil[d], p.dil[d], max64(k_hi - k_lo + 1, 0)};
}

// Grad-weight, dimension d, tap k: the input positions i in [0, in) whose output position
// o = i*stride - pad + k*dil lies in [0, out). Returns i0 (first input position), the
// matching first output position in k0, and count.
__device__ inline TapRun grad_weight_positions(const DirectParams& p, int d, int64_t k) {
  const int64_t shift = k * p.dil[d] - p.pad[d];  // o = i*stride + shift
  const int64_t i_lo = max64(ceil_div(-shift, p.stride[d]), 0);
  const int64_t i_hi = min64(floor_div(p.out[d] - 1 - shift, p.stride[d]), p.in[d] - 1);
  return TapRun{i_lo * p.stride[d] + shift, p.stride[d], i_lo, 1, max64(i_hi - i_lo + 1, 0)};
}

// ---------------------------------------------------------------------------------------
// Block reduction (fixed order, so results are reproducible)
// ---------------------------------------------------------------------------------------

// Sum of v over the block; the result is valid in thread 0. `scratch` holds one value per
// warp. Ends with a barrier, so scratch may be reused right after.
template <typename A>
__device__ inline A block_sum(A v, A* scratch) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const unsigned warps = (blockDim.x + 31u) >> 5;
    v = lane < warps ? scratch[lane] : A(0);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  }
  __syncthreads();
  return v;
}

// A position in a 4-digit mixed-radix counter (n, a, b, c) with radices (-, ra, rb, rc):
// threads of a block start at their thread index and advance by the block size with carry
// propagation only, so reduction loops need no division per element.
struct Counter4 {
  int64_t n, a, b, c;
};

__device__ inline Counter4 counter_from(int64_t j, int64_t ra, int64_t rb, int64_t rc) {
  Counter4 q;
  q.c = j % rc;
  j /= rc;
  q.b = j % rb;
  j /= rb;
  q.a = j % ra;
  q.n = j / ra;
  return q;
}

// q += s, where every digit of s is below its radix.
__device__ inline void counter_add(Counter4& q, const Counter4& s, int64_t ra, int64_t rb,
                                   int64_t rc) {
  q.c += s.c;
  int64_t carry = q.c >= rc;
  q.c -= carry * rc;
  q.b += s.b + carry;
  carry = q.b >= rb;
  q.b -= carry * rb;
  q.a += s.a + carry;
  carry = q.a >= ra;
  q.a -= carry * ra;
  q.n += s.n + carry;
}

// ---------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------

// y[n, c, od, oh, ow] = bias[c] + sum x * w over the contributing taps. `b` may be null.
// I: the index type, int where forward_fits_int32 says every size, offset and tap
// quantity fits (64-bit division costs several times the 32-bit one, and this kernel
// divides per output), else int64_t. Both sum the same products in the same order.
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    forward_kernel(const DirectParams p, const T* __restrict__ x, const T* __restrict__ w,
                   const T* __restrict__ b, T* __restrict__ y, I total) {
  using E = Elem<T>;
  using A = typename E::Acc;
  if (p.only_if != nullptr && *p.only_if == 0) return;
  const I out0 = I(p.out[0]), out1 = I(p.out[1]), out2 = I(p.out[2]);
  const I c_out = I(p.C_out), cog = I(p.cog), cig = I(p.cig);
  const I xs1 = I(p.x_str[1]), ws0 = I(p.w_str[0]);
  for (I idx = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); idx < total;
       idx += I(gridDim.x) * I(blockDim.x)) {
    I r = idx;
    const I ow = r % out2;
    r /= out2;
    const I oh = r % out1;
    r /= out1;
    const I od = r % out0;
    r /= out0;
    const I c = r % c_out;
    const I n = r / c_out;
    const I g = c / cog, co = c - g * cog;

    const TapRunI<I> td = forward_taps_i<I>(p, 0, od);
    const TapRunI<I> th = forward_taps_i<I>(p, 1, oh);
    const TapRunI<I> tw = forward_taps_i<I>(p, 2, ow);
    const I x_base = n * I(p.x_str[0]) + g * cig * xs1;
    const I w_base = g * cig * ws0 + co * I(p.w_str[1]);
    A acc = A(0);
    for (I jd = 0; jd < td.count; ++jd) {
      const I xd = x_base + (td.i0 + jd * td.i_step) * I(p.x_str[2]);
      const I wd = w_base + (td.k0 + jd * td.k_step) * I(p.w_str[2]);
      for (I jh = 0; jh < th.count; ++jh) {
        const I xh = xd + (th.i0 + jh * th.i_step) * I(p.x_str[3]);
        const I wh = wd + (th.k0 + jh * th.k_step) * I(p.w_str[3]);
        for (I jw = 0; jw < tw.count; ++jw) {
          const T* xp = x + (xh + (tw.i0 + jw * tw.i_step) * I(p.x_str[4]));
          const T* wp = w + (wh + (tw.k0 + jw * tw.k_step) * I(p.w_str[4]));
          A part = A(0);  // one partial sum per tap keeps rounding error growth low
          for (I ci = 0; ci < cig; ++ci) {
            part = E::madd(E::load(xp), E::load(wp), part);
            xp += xs1;
            wp += ws0;
          }
          acc += part;
        }
      }
    }
    if (b != nullptr) acc += E::load(b + c * I(p.b_str));
    E::store(y + (n * I(p.y_str[0]) + c * I(p.y_str[1]) + od * I(p.y_str[2]) +
                  oh * I(p.y_str[3]) + ow * I(p.y_str[4])),
             acc);
  }
}

// The forward by rows of outputs (forward_rows_kernel), for every problem whose offsets fit
// an int (forward_fits_int32): forward_kernel's sums, in the same order, without its
// per-output index arithmetic. A block takes a tile of `tw` output columns (up to 256,
// rows_per_pass rows of them at once: direct_column_tiles) and runs over chunks of output
// rows (n, c, od, oh). It solves the W taps of its columns once (a table in shared memory:
// the first tap's input and weight offsets and the tap count, per column), and per chunk
// each thread solves one row's D and H taps and offsets into shared memory; then every
// output is a few shared-memory reads and its taps' loads and multiply-adds, a thread taking
// several rows at a time with all their loads issued before their products (the kernel is
// bound by load latency: one output's loads in flight a thread left most of the memory
// system idle). Each output's address of every product is the one forward_kernel computes,
// and the products are summed in the same order (per tap a partial sum over the input
// channels, added to the output's sum), so the results are the same bit for bit.

// kTaps consecutive W taps (jw, jw + 1, ...) of forward_rows_kernel's kRows rows, kCig
// input channels each: every load of every row and tap issued before the products, then
// per row each tap's partial sum over the channels added to the row's sum in tap order
// (forward_kernel's products and order). Rows not `on` load nothing and add nothing.
template <typename T, int kRows, int kCig, int kTaps>
__device__ __forceinline__ void rows_taps(const T* __restrict__ x, const T* __restrict__ w,
                                          const bool (&on)[kRows], const int (&xh)[kRows],
                                          const int (&wh)[kRows], int jw, int sxw, int sww,
                                          int xs1, int ws0,
                                          typename Elem<T>::Acc (&acc)[kRows]) {
  using E = Elem<T>;
  using A = typename E::Acc;
  A xv[kRows][kTaps][kCig], wv[kRows][kTaps][kCig];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int xo = xh[r] + jw * sxw, wo = wh[r] + jw * sww;
#pragma unroll
    for (int ci = 0; ci < kCig; ++ci) {
#pragma unroll
      for (int tp = 0; tp < kTaps; ++tp) {
        xv[r][tp][ci] = on[r] ? E::load(x + (xo + tp * sxw + ci * xs1)) : A(0);
        wv[r][tp][ci] = on[r] ? E::load(w + (wo + tp * sww + ci * ws0)) : A(0);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (!on[r]) continue;
#pragma unroll
    for (int tp = 0; tp < kTaps; ++tp) {
      A part = A(0);
#pragma unroll
      for (int ci = 0; ci < kCig; ++ci) part = E::madd(xv[r][tp][ci], wv[r][tp][ci], part);
      acc[r] += part;
    }
  }
}

// kCig: the input channels per group where 1, 2 or 4 (the channel loop unrolled), else 0.
// kRows: the rows a thread runs at a time (forward_rows_per_thread; 1 where
// CONVT_DIRECT_ROWS=1 asks, for measuring).
template <typename T, int kCig, int kRows>
__global__ void __launch_bounds__(kThreads, 4)
    forward_rows_kernel(const DirectParams p, const RowsShape rs, const T* __restrict__ x,
                        const T* __restrict__ w, const T* __restrict__ b,
                        T* __restrict__ y) {
  using E = Elem<T>;
  using A = typename E::Acc;
  if (p.only_if != nullptr && *p.only_if == 0) return;
  __shared__ int col_x[kThreads], col_w[kThreads], col_n[kThreads];
  __shared__ int row_x[kThreads], row_w[kThreads], row_y[kThreads], row_nd[kThreads],
      row_nh[kThreads];
  __shared__ A row_b[kThreads];
  const int t = int(threadIdx.x);
  const int out0 = int(p.out[0]), out1 = int(p.out[1]), out2 = int(p.out[2]);
  const int c_out = int(p.C_out), cog = int(p.cog), cig = int(p.cig);
  const int xs1 = int(p.x_str[1]), ws0 = int(p.w_str[0]);
  // Steps between consecutive taps of a run (64-bit products, exact where a run has two
  // taps or more, the only place they are used).
  const int sxd = -int(p.d_g[0] * p.x_str[2]), swd = int(p.s_g[0] * p.w_str[2]);
  const int sxh = -int(p.d_g[1] * p.x_str[3]), swh = int(p.s_g[1] * p.w_str[3]);
  const int sxw = -int(p.d_g[2] * p.x_str[4]), sww = int(p.s_g[2] * p.w_str[4]);
  const int ow0 = int(blockIdx.x) * rs.tw;
  if (t < rs.tw) {
    const int ow = ow0 + t;
    int cx = 0, cw = 0, cn = -1;  // -1: past the output
    if (ow < out2) {
      const TapRunI<int> tr = forward_taps_i<int>(p, 2, ow);
      cx = tr.i0 * int(p.x_str[4]);
      cw = tr.k0 * int(p.w_str[4]);
      cn = tr.count;
    }
    col_x[t] = cx;
    col_w[t] = cw;
    col_n[t] = cn;
  }
  // A column of rs.rows_per_pass rows at once; the threads past them idle.
  const int col = t % rs.tw, row_in_pass = t / rs.tw;
  const bool idle = row_in_pass >= rs.rows_per_pass;
  for (int r0 = int(blockIdx.y) * rs.chunk_rows; r0 < rs.rows;
       r0 += int(gridDim.y) * rs.chunk_rows) {
    __syncthreads();  // (the previous chunk's rows are read; the first: the column table)
    if (t < rs.chunk_rows && r0 + t < rs.rows) {
      int r = r0 + t;
      const int oh = r % out1;
      r /= out1;
      const int od = r % out0;
      r /= out0;
      const int c = r % c_out;
      const int n = r / c_out;
      const int g = c / cog, co = c - g * cog;
      const TapRunI<int> td = forward_taps_i<int>(p, 0, od);
      const TapRunI<int> th = forward_taps_i<int>(p, 1, oh);
      row_x[t] = n * int(p.x_str[0]) + g * cig * xs1 + td.i0 * int(p.x_str[2]) +
                 th.i0 * int(p.x_str[3]);
      row_w[t] = g * cig * ws0 + co * int(p.w_str[1]) + td.k0 * int(p.w_str[2]) +
                 th.k0 * int(p.w_str[3]);
      row_y[t] = n * int(p.y_str[0]) + c * int(p.y_str[1]) + od * int(p.y_str[2]) +
                 oh * int(p.y_str[3]);
      row_nd[t] = td.count;
      row_nh[t] = th.count;
      row_b[t] = b != nullptr ? E::load(b + c * int(p.b_str)) : A(0);
    }
    __syncthreads();
    const int cn = col_n[col];
    if (cn < 0) continue;  // (no barrier is skipped: the next one is at the loop's top)
    const int cx = col_x[col], cw = col_w[col];
    const int y_col = (ow0 + col) * int(p.y_str[4]);
    const int rows_here = idle ? 0 : min(rs.chunk_rows, rs.rows - r0);
    // kRows rows a thread at a time (rows rr, rr + rows_per_pass, ...): their loads are
    // issued together, so that each thread has that many outputs' loads in flight. Each
    // row visits its own D and H taps (inactive past its counts) in its own order.
    for (int rr = row_in_pass; rr < rows_here; rr += kRows * rs.rows_per_pass) {
      int nd[kRows], nh[kRows], xr[kRows], wr[kRows];
      A acc[kRows];
      int nd_max = 0, nh_max = 0;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int q = rr + r * rs.rows_per_pass;
        const bool here = q < rows_here;
        nd[r] = here ? row_nd[q] : 0;
        nh[r] = here ? row_nh[q] : 0;
        xr[r] = here ? row_x[q] + cx : 0;
        wr[r] = here ? row_w[q] + cw : 0;
        acc[r] = A(0);
        nd_max = max(nd_max, nd[r]);
        nh_max = max(nh_max, nh[r]);
      }
      for (int jd = 0; jd < nd_max; ++jd) {
        for (int jh = 0; jh < nh_max; ++jh) {
          bool on[kRows];
          int xh[kRows], wh[kRows];
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            on[r] = jd < nd[r] && jh < nh[r];
            xh[r] = xr[r] + jd * sxd + jh * sxh;
            wh[r] = wr[r] + jd * swd + jh * swh;
          }
          if constexpr (kCig > 0) {
            // W taps two at a time, both taps' loads of every row issued before their
            // products (the products and their order unchanged).
            int jw = 0;
            for (; jw + 1 < cn; jw += 2)
              rows_taps<T, kRows, kCig, 2>(x, w, on, xh, wh, jw, sxw, sww, xs1, ws0, acc);
            if (jw < cn)
              rows_taps<T, kRows, kCig, 1>(x, w, on, xh, wh, jw, sxw, sww, xs1, ws0, acc);
          } else {
            for (int jw = 0; jw < cn; ++jw) {
              A part[kRows];
#pragma unroll
              for (int r = 0; r < kRows; ++r) part[r] = A(0);
              for (int ci = 0; ci < cig; ++ci) {
                A xv[kRows], wv[kRows];
#pragma unroll
                for (int r = 0; r < kRows; ++r) {
                  const int o = ci * xs1 + jw * sxw, ow = ci * ws0 + jw * sww;
                  xv[r] = on[r] ? E::load(x + (xh[r] + o)) : A(0);
                  wv[r] = on[r] ? E::load(w + (wh[r] + ow)) : A(0);
                }
#pragma unroll
                for (int r = 0; r < kRows; ++r) part[r] = E::madd(xv[r], wv[r], part[r]);
              }
#pragma unroll
              for (int r = 0; r < kRows; ++r)
                if (on[r]) acc[r] += part[r];
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int q = rr + r * rs.rows_per_pass;
        if (q >= rows_here) continue;
        A v = acc[r];
        if (b != nullptr) v += row_b[q];
        E::store(y + (row_y[q] + y_col), v);
      }
    }
  }
}
// The forward by output positions, several output channels a thread
// (forward_channels_kernel), for groups of three output channels or more whose weights fit
// shared memory (forward_channels_shape): forward_rows_kernel's blocks of columns and row
// chunks, where a row is (n, od, oh) and a thread takes one output position for kCo
// consecutive output channels of a group. Each input value a thread loads then serves kCo
// multiply-adds against weights read from shared memory (the block's channels of every tap,
// [tap][input channel][kCo], rounded to the accumulator type once), where forward_rows_kernel
// loads it again for every output channel: few input channels a group (3-channel images,
// narrow groups) make that kernel's loads the whole cost. Each output's products and their
// order are forward_kernel's (per tap a partial sum over the input channels, added to the
// output's sum, then the bias), so the results are the same bit for bit.

// part[c] = xv * wp[c] + part[c] for c < kCo, wp a row of forward_channels_kernel's
// weight table (16-byte aligned: kCo is a multiple of 4), read four floats a load (one
// shared-memory instruction per four multiply-adds) where the accumulators are float.
template <int kCo, typename A>
__device__ __forceinline__ void channels_madd(A xv, const A* wp, A (&part)[kCo]) {
  if constexpr (std::is_same<A, float>::value) {
#pragma unroll
    for (int c = 0; c < kCo; c += 4) {
      const float4 wv = *reinterpret_cast<const float4*>(wp + c);
      part[c] = __fmaf_rn(xv, wv.x, part[c]);
      part[c + 1] = __fmaf_rn(xv, wv.y, part[c + 1]);
      part[c + 2] = __fmaf_rn(xv, wv.z, part[c + 2]);
      part[c + 3] = __fmaf_rn(xv, wv.w, part[c + 3]);
    }
  } else {
#pragma unroll
    for (int c = 0; c < kCo; ++c) part[c] = __fma_rn(xv, wp[c], part[c]);
  }
}

// kCig: the input channels per group where 1 to 4 (the channel loop unrolled), else 0.
// Three blocks a multiprocessor (80 registers a thread), two in float64.
template <typename T, int kCig, int kCo>
__global__ void __launch_bounds__(kThreads, sizeof(typename Elem<T>::Acc) > 4 ? 2 : 3)
    forward_channels_kernel(const DirectParams p, const ChannelsShape cs,
                            const T* __restrict__ x, const T* __restrict__ w,
                            const T* __restrict__ b, T* __restrict__ y) {
  using E = Elem<T>;
  using A = typename E::Acc;
  if (p.only_if != nullptr && *p.only_if == 0) return;
  extern __shared__ __align__(16) unsigned char channels_smem[];
  A* const wt = reinterpret_cast<A*>(channels_smem);  // [tap][ci][kCo]
  __shared__ int col_x[kThreads], col_w[kThreads], col_n[kThreads];
  __shared__ int row_x[kThreads], row_w[kThreads], row_y[kThreads], row_nd[kThreads],
      row_nh[kThreads];
  __shared__ A bias[kCo];
  static_assert(8 * kThreads * sizeof(int) + kCo * sizeof(A) <= kChannelsStaticSmemBytes,
                "the weight table's bound counts these tables");
  const int t = int(threadIdx.x);
  const int cig = kCig > 0 ? kCig : int(p.cig), cog = int(p.cog);
  const int kh_n = int(p.k[1]), kw_n = int(p.k[2]);
  const int cc = int(blockIdx.x) % (int(p.groups) * cs.co_chunks);
  const int wtile = int(blockIdx.x) / (int(p.groups) * cs.co_chunks);
  const int g = cc / cs.co_chunks, co0 = (cc - g * cs.co_chunks) * kCo;
  const int xs1 = int(p.x_str[1]);
  // The weight table: entry (tap, ci, c) = w[g * cig + ci, co0 + c, tap], zero past the
  // group's channels.
  const int w_entries = cs.taps * cig * kCo;
  for (int i = t; i < w_entries; i += kThreads) {
    const int c = i % kCo, r = i / kCo;
    const int ci = r % cig, tap = r / cig;
    const int kw = tap % kw_n, kh = (tap / kw_n) % kh_n, kd = tap / (kw_n * kh_n);
    wt[i] = co0 + c < cog
                ? E::load(w + ((g * cig + ci) * int(p.w_str[0]) + (co0 + c) * int(p.w_str[1]) +
                               kd * int(p.w_str[2]) + kh * int(p.w_str[3]) +
                               kw * int(p.w_str[4])))
                : A(0);
  }
  if (t < kCo)
    bias[t] = b != nullptr && co0 + t < cog ? E::load(b + (g * cog + co0 + t) * int(p.b_str))
                                            : A(0);
  // Steps between consecutive taps of a run, in x and in the table.
  const int sxd = -int(p.d_g[0] * p.x_str[2]), swd = int(p.s_g[0]) * kh_n * kw_n * cig * kCo;
  const int sxh = -int(p.d_g[1] * p.x_str[3]), swh = int(p.s_g[1]) * kw_n * cig * kCo;
  const int sxw = -int(p.d_g[2] * p.x_str[4]), sww = int(p.s_g[2]) * cig * kCo;
  const int ow0 = wtile * cs.tw;
  if (t < cs.tw) {
    const int ow = ow0 + t;
    int cx = 0, cw = 0, cn = -1;  // -1: past the output
    if (ow < int(p.out[2])) {
      const TapRunI<int> tr = forward_taps_i<int>(p, 2, ow);
      cx = tr.i0 * int(p.x_str[4]);
      cw = tr.k0 * cig * kCo;
      cn = tr.count;
    }
    col_x[t] = cx;
    col_w[t] = cw;
    col_n[t] = cn;
  }
  const int out0 = int(p.out[0]), out1 = int(p.out[1]);
  // A column of cs.rows_per_pass rows at once; the threads past them idle.
  const int col = t % cs.tw, row_in_pass = t / cs.tw;
  const bool idle = row_in_pass >= cs.rows_per_pass;
  const int y_c0 = (g * cog + co0) * int(p.y_str[1]);
  const int ys1 = int(p.y_str[1]);
  const int co_here = min(kCo, cog - co0);
  for (int r0 = int(blockIdx.y) * cs.chunk_rows; r0 < cs.rows;
       r0 += int(gridDim.y) * cs.chunk_rows) {
    __syncthreads();  // (the previous chunk's rows are read; the first: both tables)
    if (t < cs.chunk_rows && r0 + t < cs.rows) {
      int r = r0 + t;
      const int oh = r % out1;
      r /= out1;
      const int od = r % out0;
      const int n = r / out0;
      const TapRunI<int> td = forward_taps_i<int>(p, 0, od);
      const TapRunI<int> th = forward_taps_i<int>(p, 1, oh);
      row_x[t] = n * int(p.x_str[0]) + g * cig * xs1 + td.i0 * int(p.x_str[2]) +
                 th.i0 * int(p.x_str[3]);
      row_w[t] = ((td.k0 * kh_n + th.k0) * kw_n) * cig * kCo;
      row_y[t] = n * int(p.y_str[0]) + od * int(p.y_str[2]) + oh * int(p.y_str[3]);
      row_nd[t] = td.count;
      row_nh[t] = th.count;
    }
    __syncthreads();
    const int cn = col_n[col];
    if (cn < 0) continue;  // (no barrier is skipped: the next one is at the loop's top)
    const int cx = col_x[col], cw = col_w[col];
    const int y_col = y_c0 + (ow0 + col) * int(p.y_str[4]);
    const int rows_here = idle ? 0 : min(cs.chunk_rows, cs.rows - r0);
    for (int q = row_in_pass; q < rows_here; q += cs.rows_per_pass) {
      const int nd = row_nd[q], nh = row_nh[q];
      const int xr = row_x[q] + cx, wr = row_w[q] + cw;
      A acc[kCo];
#pragma unroll
      for (int c = 0; c < kCo; ++c) acc[c] = A(0);
      for (int jd = 0; jd < nd; ++jd) {
        for (int jh = 0; jh < nh; ++jh) {
          const int xh = xr + jd * sxd + jh * sxh, wh = wr + jd * swd + jh * swh;
          for (int jw = 0; jw < cn; ++jw) {
            const T* const xp = x + (xh + jw * sxw);
            const A* const wp = wt + (wh + jw * sww);
            A part[kCo];
#pragma unroll
            for (int c = 0; c < kCo; ++c) part[c] = A(0);
            if constexpr (kCig > 0) {
              A xv[kCig];
#pragma unroll
              for (int ci = 0; ci < kCig; ++ci) xv[ci] = E::load(xp + ci * xs1);
#pragma unroll
              for (int ci = 0; ci < kCig; ++ci) channels_madd<kCo>(xv[ci], wp + ci * kCo, part);
            } else {
              for (int ci = 0; ci < cig; ++ci)
                channels_madd<kCo>(E::load(xp + ci * xs1), wp + ci * kCo, part);
            }
#pragma unroll
            for (int c = 0; c < kCo; ++c) acc[c] += part[c];
          }
        }
      }
      const int yo = row_y[q] + y_col;
#pragma unroll
      for (int c = 0; c < kCo; ++c) {
        if (c >= co_here) break;
        A v = acc[c];
        if (b != nullptr) v += bias[c];
        E::store(y + (yo + c * ys1), v);
      }
    }
  }
}

// dx[n, c, id, ih, iw] = sum over co < Cog and taps k with o inside the output of
// dy[n, g*Cog + co, o] * w[c, co, k].
template <typename T>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    grad_input_kernel(const DirectParams p, const T* __restrict__ dy, const T* __restrict__ w,
                      T* __restrict__ dx, int64_t total) {
  using E = Elem<T>;
  using A = typename E::Acc;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = idx;
    const int64_t iw = r % p.in[2];
    r /= p.in[2];
    const int64_t ih = r % p.in[1];
    r /= p.in[1];
    const int64_t id = r % p.in[0];
    r /= p.in[0];
    const int64_t c = r % p.C_in;
    const int64_t n = r / p.C_in;
    const int64_t g = c / p.cig;

    const TapRun td = grad_input_taps(p, 0, id);
    const TapRun th = grad_input_taps(p, 1, ih);
    const TapRun tw = grad_input_taps(p, 2, iw);
    const int64_t y_base = n * p.y_str[0] + g * p.cog * p.y_str[1];
    const int64_t w_base = c * p.w_str[0];
    A acc = A(0);
    for (int64_t jd = 0; jd < td.count; ++jd) {
      const int64_t yd = y_base + (td.i0 + jd * td.i_step) * p.y_str[2];
      const int64_t wd = w_base + (td.k0 + jd) * p.w_str[2];
      for (int64_t jh = 0; jh < th.count; ++jh) {
        const int64_t yh = yd + (th.i0 + jh * th.i_step) * p.y_str[3];
        const int64_t wh = wd + (th.k0 + jh) * p.w_str[3];
        for (int64_t jw = 0; jw < tw.count; ++jw) {
          const T* yp = dy + (yh + (tw.i0 + jw * tw.i_step) * p.y_str[4]);
          const T* wp = w + (wh + (tw.k0 + jw) * p.w_str[4]);
          A part = A(0);
          for (int64_t co = 0; co < p.cog; ++co) {
            part = E::madd(E::load(yp), E::load(wp), part);
            yp += p.y_str[1];
            wp += p.w_str[1];
          }
          acc += part;
        }
      }
    }
    E::store(dx + (n * p.x_str[0] + c * p.x_str[1] + id * p.x_str[2] + ih * p.x_str[3] +
                   iw * p.x_str[4]),
             acc);
  }
}

// dw[c, co, kd, kh, kw] = sum over n and input positions i of x[n, c, i] * dy[n, g*Cog+co, o],
// o = i*stride - pad + k*dil inside the output. One block per weight element.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads, kReduceMinBlocks)
    grad_weight_kernel(const DirectParams p, const T* __restrict__ x, const T* __restrict__ dy,
                       T* __restrict__ dw, int64_t total) {
  using E = Elem<T>;
  using A = typename E::Acc;
  __shared__ A scratch[32];
  for (int64_t idx = blockIdx.x; idx < total; idx += gridDim.x) {
    int64_t r = idx;
    const int64_t kw = r % p.k[2];
    r /= p.k[2];
    const int64_t kh = r % p.k[1];
    r /= p.k[1];
    const int64_t kd = r % p.k[0];
    r /= p.k[0];
    const int64_t co = r % p.cog;
    const int64_t c = r / p.cog;
    const int64_t c_out = (c / p.cig) * p.cog + co;

    const TapRun rd = grad_weight_positions(p, 0, kd);
    const TapRun rh = grad_weight_positions(p, 1, kh);
    const TapRun rw = grad_weight_positions(p, 2, kw);
    A acc = A(0);
    if (p.N > 0 && rd.count > 0 && rh.count > 0 && rw.count > 0) {
      const int64_t x_base = c * p.x_str[1] + rd.i0 * p.x_str[2] + rh.i0 * p.x_str[3] +
                             rw.i0 * p.x_str[4];
      const int64_t y_base = c_out * p.y_str[1] + rd.k0 * p.y_str[2] + rh.k0 * p.y_str[3] +
                             rw.k0 * p.y_str[4];
      const int64_t ys2 = p.stride[0] * p.y_str[2], ys3 = p.stride[1] * p.y_str[3],
                    ys4 = p.stride[2] * p.y_str[4];
      Counter4 q = counter_from(threadIdx.x, rd.count, rh.count, rw.count);
      const Counter4 step = counter_from(blockDim.x, rd.count, rh.count, rw.count);
      for (; q.n < p.N; counter_add(q, step, rd.count, rh.count, rw.count)) {
        const int64_t xo = x_base + q.n * p.x_str[0] + q.a * p.x_str[2] + q.b * p.x_str[3] +
                           q.c * p.x_str[4];
        const int64_t yo = y_base + q.n * p.y_str[0] + q.a * ys2 + q.b * ys3 + q.c * ys4;
        acc = E::madd(E::load(x + xo), E::load(dy + yo), acc);
      }
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0)
      E::store(dw + (c * p.w_str[0] + co * p.w_str[1] + kd * p.w_str[2] + kh * p.w_str[3] +
                     kw * p.w_str[4]),
               acc);
  }
}

// db[c] = sum over n and output positions of dy[n, c, o]. One block per channel.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads, kReduceMinBlocks)
    grad_bias_kernel(const DirectParams p, const T* __restrict__ dy, T* __restrict__ db) {
  using E = Elem<T>;
  using A = typename E::Acc;
  __shared__ A scratch[32];
  for (int64_t c = blockIdx.x; c < p.C_out; c += gridDim.x) {
    A acc = A(0);
    if (p.N > 0) {
      Counter4 q = counter_from(threadIdx.x, p.out[0], p.out[1], p.out[2]);
      const Counter4 step = counter_from(blockDim.x, p.out[0], p.out[1], p.out[2]);
      const T* base = dy + c * p.y_str[1];
      for (; q.n < p.N; counter_add(q, step, p.out[0], p.out[1], p.out[2]))
        acc += E::load(base + (q.n * p.y_str[0] + q.a * p.y_str[2] + q.b * p.y_str[3] +
                               q.c * p.y_str[4]));
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) E::store(db + c * p.b_str, acc);
  }
}

// ---------------------------------------------------------------------------------------
// Host side: parameters and launches
// ---------------------------------------------------------------------------------------

template <typename T>
cudaError_t launch_forward(const DirectParams& p, const T* x, const T* w, const T* b, T* y,
                           int64_t max_blocks, cudaStream_t stream) {
  const int64_t total = p.N * p.C_out * p.out[0] * p.out[1] * p.out[2];
  if (total == 0) return cudaSuccess;
  using A = typename Elem<T>::Acc;
  ChannelsShape cs{};
  if (forward_channels_shape(p, total, max_blocks, int(sizeof(A)), cs)) {
    const int64_t chunks = (int64_t(cs.rows) + cs.chunk_rows - 1) / cs.chunk_rows;
    const int64_t x_blocks = int64_t(cs.w_tiles) * p.groups * cs.co_chunks;
    const int64_t per_tile = std::max<int64_t>(max_blocks / x_blocks, 1);
    const dim3 grid(unsigned(x_blocks), unsigned(std::min<int64_t>({chunks, per_tile, 65535})));
    const auto launch = [&](auto cig, auto co) {
      constexpr int kCig = decltype(cig)::value, kCo = decltype(co)::value;
      forward_channels_kernel<T, kCig, kCo>
          <<<grid, kThreads, size_t(cs.smem_bytes), stream>>>(p, cs, x, w, b, y);
    };
    const auto with_co = [&](auto cig) {
      constexpr int kCig = decltype(cig)::value;
      if constexpr (kCig > 0) {
        if (cs.kco == 16) return launch(cig, std::integral_constant<int, 16>{});
      }
      if constexpr (sizeof(A) == 4) {
        if (cs.kco == 8) return launch(cig, std::integral_constant<int, 8>{});
      }
      launch(cig, std::integral_constant<int, 4>{});
    };
    // The channel loop unrolled for 1-4 input channels a group, except in float64 (the
    // reference type).
    if constexpr (sizeof(A) == 4) {
      switch (p.cig) {
        case 1:
          with_co(std::integral_constant<int, 1>{});
          break;
        case 2:
          with_co(std::integral_constant<int, 2>{});
          break;
        case 3:
          with_co(std::integral_constant<int, 3>{});
          break;
        case 4:
          with_co(std::integral_constant<int, 4>{});
          break;
        default:
          with_co(std::integral_constant<int, 0>{});
      }
    } else {
      with_co(std::integral_constant<int, 0>{});
    }
    return cudaGetLastError();
  }
  RowsShape rs{};
  if (forward_rows_shape(p, total, max_blocks, rs)) {
    const int64_t chunks = (int64_t(rs.rows) + rs.chunk_rows - 1) / rs.chunk_rows;
    const int64_t per_tile = std::max<int64_t>(max_blocks / rs.w_tiles, 1);
    const dim3 grid(unsigned(rs.w_tiles), unsigned(std::min<int64_t>({chunks, per_tile, 65535})));
    const auto launch = [&](auto cig) {
      constexpr int kCig = decltype(cig)::value;
      constexpr int kRows =
          forward_rows_per_thread(kCig, int(sizeof(typename Elem<T>::Acc)));
      if (rs.one_row)
        forward_rows_kernel<T, kCig, 1><<<grid, kThreads, 0, stream>>>(p, rs, x, w, b, y);
      else
        forward_rows_kernel<T, kCig, kRows><<<grid, kThreads, 0, stream>>>(p, rs, x, w, b, y);
    };
    switch (p.cig) {
      case 1:
        launch(std::integral_constant<int, 1>{});
        break;
      case 2:
        launch(std::integral_constant<int, 2>{});
        break;
      case 4:
        launch(std::integral_constant<int, 4>{});
        break;
      default:
        launch(std::integral_constant<int, 0>{});
    }
    return cudaGetLastError();
  }
  const unsigned grid = host::grid_for(total, kThreads, max_blocks);
  if (forward_fits_int32(p, total, int64_t(grid) * kThreads)) {
    forward_kernel<T, int><<<grid, kThreads, 0, stream>>>(p, x, w, b, y, int(total));
  } else {
    forward_kernel<T, int64_t><<<grid, kThreads, 0, stream>>>(p, x, w, b, y, total);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_grad_input(const DirectParams& p, const T* dy, const T* w, T* dx,
                              int64_t max_blocks, cudaStream_t stream) {
  const int64_t total = p.N * p.C_in * p.in[0] * p.in[1] * p.in[2];
  if (total == 0) return cudaSuccess;
  grad_input_kernel<T><<<host::grid_for(total, kThreads, max_blocks), kThreads, 0, stream>>>(
      p, dy, w, dx, total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_grad_weight(const DirectParams& p, const T* x, const T* dy, T* dw,
                               int64_t max_blocks, cudaStream_t stream) {
  const int64_t total = p.C_in * p.cog * p.k[0] * p.k[1] * p.k[2];
  if (total == 0) return cudaSuccess;
  grad_weight_kernel<T><<<host::grid_for(total, 1, max_blocks), kReduceThreads, 0, stream>>>(
      p, x, dy, dw, total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_grad_bias(const DirectParams& p, const T* dy, T* db, int64_t max_blocks,
                             cudaStream_t stream) {
  if (p.C_out == 0) return cudaSuccess;
  grad_bias_kernel<T><<<host::grid_for(p.C_out, 1, max_blocks), kReduceThreads, 0, stream>>>(
      p, dy, db);
  return cudaGetLastError();
}

}  // namespace direct
}  // namespace cuda
}  // namespace convt
