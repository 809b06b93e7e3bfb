// convt/cuda/direct_kernels.cuh — direct CUDA kernels for every direction of a transposed
// convolution: always correct, for every argument combination, layout and dtype.
//
// All kernels work on the canonical 3-D problem with rank-5 (N, C, D, H, W) tensors of
// arbitrary element strides, described by DirectParams, and index with 64-bit integers
// in grid-stride loops, so tensors may exceed 2^31 elements.
//
//   forward      one thread per output element y[n, c, o] (a gather). Per spatial
//                dimension the taps k that reach o form an arithmetic progression (solved
//                once per element with a modular inverse), so the loops visit only
//                contributing (input position, tap) pairs; the innermost loop runs over the
//                group's input channels with no division.
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

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

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
__device__ inline TapRunI<I> forward_taps_i(const DirectParams& p, int d, I o) {
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

// The forward for small groups (depthwise and other groups of few channels, float64), by
// output tiles (forward_tiled_kernel; CONVT_DIRECT_TILED=1 asks for it, being verified):
// a block computes an output tile of tile_h x tile_w positions (256 of them) for up to
// kTiledCog channels of one group at one output D position. Per D tap it stages the input
// window the tile reads (every input channel of the group) in shared memory, converted to
// the accumulator type, and the weights of its channels once; each thread then sums its
// outputs' taps from there. The products and their order are forward_kernel's (per tap, a
// partial sum over the input channels, added to the output's sum), so the results are the
// same bit for bit; only the loads move (each input element is read from memory once per
// tile and D tap instead of once per output tap).
constexpr int kTiledCog = 8;
constexpr int kTiledSmem = 40 * 1024;  // the input window and the weights, in bytes

struct TiledShape {
  int tile_h, tile_w;   // output positions per block along H and W (tile_h x tile_w = 256)
  int rows, cols;       // the largest input window a tile reads along H and W
  int h_tiles, w_tiles, co_chunks;
};

template <typename T>
__global__ void __launch_bounds__(256)
    forward_tiled_kernel(const DirectParams p, const TiledShape ts, const T* __restrict__ x,
                         const T* __restrict__ w, const T* __restrict__ b,
                         T* __restrict__ y) {
  using E = Elem<T>;
  using A = typename E::Acc;
  if (p.only_if != nullptr && *p.only_if == 0) return;
  extern __shared__ __align__(16) unsigned char tiled_smem[];
  const int cig = int(p.cig), cog = int(p.cog);
  const int taps = int(p.k[0] * p.k[1] * p.k[2]);
  // The block: W tile fastest, then H tile, channel chunk, D position, group, sample.
  int r = int(blockIdx.x);
  const int wt = r % ts.w_tiles; r /= ts.w_tiles;
  const int ht = r % ts.h_tiles; r /= ts.h_tiles;
  const int cc = r % ts.co_chunks; r /= ts.co_chunks;
  const int od = r % int(p.out[0]); r /= int(p.out[0]);
  const int g = r % int(p.groups);
  const int n = r / int(p.groups);
  const int co0 = cc * kTiledCog;
  const int ncout = min(kTiledCog, cog - co0);
  const int oh0 = ht * ts.tile_h, ow0 = wt * ts.tile_w;
  // The input window of the tile: rows and columns some of its outputs read.
  const int sh = int(p.stride[1]), sw = int(p.stride[2]);
  const int ih_lo = max(0, int(ceil_div(int64_t(oh0) + p.pad[1] - (p.k[1] - 1) * p.dil[1], sh)));
  const int ih_hi = min(int(p.in[1]) - 1, int(floor_div(int64_t(oh0) + ts.tile_h - 1 + p.pad[1], sh)));
  const int iw_lo = max(0, int(ceil_div(int64_t(ow0) + p.pad[2] - (p.k[2] - 1) * p.dil[2], sw)));
  const int iw_hi = min(int(p.in[2]) - 1, int(floor_div(int64_t(ow0) + ts.tile_w - 1 + p.pad[2], sw)));
  const int rows = max(ih_hi - ih_lo + 1, 0), cols = max(iw_hi - iw_lo + 1, 0);
  A* xs = reinterpret_cast<A*>(tiled_smem);                            // [cig][rows][cols]
  A* ws = xs + size_t(cig) * ts.rows * ts.cols;                        // [cig][kTiledCog][taps]
  // The weights of the block's channels, w[g * cig + ci][co0 + j][kd][kh][kw].
  for (int i = threadIdx.x; i < cig * ncout * taps; i += blockDim.x) {
    const int t = i % taps, j = (i / taps) % ncout, ci = i / (taps * ncout);
    const int kw = t % int(p.k[2]), kh = (t / int(p.k[2])) % int(p.k[1]),
              kd = t / int(p.k[2] * p.k[1]);
    ws[(ci * kTiledCog + j) * taps + t] =
        E::load(w + (int64_t(g) * cig + ci) * p.w_str[0] + int64_t(co0 + j) * p.w_str[1] +
                kd * p.w_str[2] + kh * p.w_str[3] + kw * p.w_str[4]);
  }
  const int oh = oh0 + int(threadIdx.x) / ts.tile_w, ow = ow0 + int(threadIdx.x) % ts.tile_w;
  const bool live = oh < int(p.out[1]) && ow < int(p.out[2]);
  const TapRunI<int> td = forward_taps_i<int>(p, 0, od);
  TapRunI<int> th{}, tw{};
  if (live) {
    th = forward_taps_i<int>(p, 1, oh);
    tw = forward_taps_i<int>(p, 2, ow);
  }
  A acc[kTiledCog];
#pragma unroll
  for (int j = 0; j < kTiledCog; ++j) acc[j] = A(0);
  for (int jd = 0; jd < td.count; ++jd) {
    const int id = td.i0 + jd * td.i_step, kd = td.k0 + jd * td.k_step;
    __syncthreads();  // (the previous D tap's window is read; the weights are in, first time)
    for (int i = threadIdx.x; i < cig * rows * cols; i += blockDim.x) {
      const int c = i % cols, rr = (i / cols) % rows, ci = i / (cols * rows);
      xs[(ci * ts.rows + rr) * ts.cols + c] =
          E::load(x + int64_t(n) * p.x_str[0] + (int64_t(g) * cig + ci) * p.x_str[1] +
                  int64_t(id) * p.x_str[2] + int64_t(ih_lo + rr) * p.x_str[3] +
                  int64_t(iw_lo + c) * p.x_str[4]);
    }
    __syncthreads();
    if (!live) continue;
    for (int jh = 0; jh < th.count; ++jh) {
      const int ihr = th.i0 + jh * th.i_step - ih_lo;
      const int kh = th.k0 + jh * th.k_step;
      for (int jw = 0; jw < tw.count; ++jw) {
        const int iwc = tw.i0 + jw * tw.i_step - iw_lo;
        const int t = (kd * int(p.k[1]) + kh) * int(p.k[2]) + tw.k0 + jw * tw.k_step;
        // (A fixed count, so that acc stays in registers.)
#pragma unroll
        for (int j = 0; j < kTiledCog; ++j) {
          if (j >= ncout) break;
          A part = A(0);  // (forward_kernel's order: a partial sum per tap)
          for (int ci = 0; ci < cig; ++ci)
            part = E::madd(xs[(ci * ts.rows + ihr) * ts.cols + iwc],
                           ws[(ci * kTiledCog + j) * taps + t], part);
          acc[j] += part;
        }
      }
    }
  }
  if (!live) return;
#pragma unroll
  for (int j = 0; j < kTiledCog; ++j) {
    if (j >= ncout) break;
    const int64_t c = int64_t(g) * cog + co0 + j;
    A v = acc[j];
    if (b != nullptr) v += E::load(b + c * p.b_str);
    E::store(y + (n * p.y_str[0] + c * p.y_str[1] + od * p.y_str[2] + oh * p.y_str[3] +
                  ow * p.y_str[4]),
             v);
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

// forward_tiled_kernel's tile for p, and whether it runs it (CONVT_DIRECT_TILED=1, read at
// every call, being verified; where forward_fits_int32 holds, the window and weights fit
// kTiledSmem and the blocks an int): fills `ts` and the shared memory it takes.
template <typename T>
bool forward_tiled_shape(const DirectParams& p, int64_t total, TiledShape& ts,
                         std::size_t& smem) {
  const char* env = std::getenv("CONVT_DIRECT_TILED");
  if (env == nullptr || env[0] != '1') return false;
  if (!forward_fits_int32(p, total, 256)) return false;
  using A = typename Elem<T>::Acc;
  int tw = 256;
  while (tw > 32 && tw / 2 >= p.out[2]) tw /= 2;
  ts.tile_w = tw;
  ts.tile_h = 256 / tw;
  // (The window along a dimension: (tile - 1 + (k - 1) * dil) / stride + 1 positions, one
  // more for the rounding of its two ends.)
  ts.rows = int(std::min<int64_t>((ts.tile_h - 1 + (p.k[1] - 1) * p.dil[1]) / p.stride[1] + 2,
                                  p.in[1]));
  ts.cols = int(std::min<int64_t>((ts.tile_w - 1 + (p.k[2] - 1) * p.dil[2]) / p.stride[2] + 2,
                                  p.in[2]));
  const int64_t taps = p.k[0] * p.k[1] * p.k[2];
  const int64_t bytes = (p.cig * ts.rows * ts.cols + p.cig * kTiledCog * taps) * int64_t(sizeof(A));
  if (bytes > kTiledSmem) return false;
  ts.h_tiles = int((p.out[1] + ts.tile_h - 1) / ts.tile_h);
  ts.w_tiles = int((p.out[2] + ts.tile_w - 1) / ts.tile_w);
  ts.co_chunks = int((p.cog + kTiledCog - 1) / kTiledCog);
  const int64_t blocks =
      p.N * p.groups * p.out[0] * ts.co_chunks * int64_t(ts.h_tiles) * ts.w_tiles;
  if (blocks >= (int64_t(1) << 31)) return false;
  smem = std::size_t(bytes);
  return true;
}

template <typename T>
cudaError_t launch_forward(const DirectParams& p, const T* x, const T* w, const T* b, T* y,
                           int64_t max_blocks, cudaStream_t stream) {
  const int64_t total = p.N * p.C_out * p.out[0] * p.out[1] * p.out[2];
  if (total == 0) return cudaSuccess;
  TiledShape ts{};
  std::size_t smem = 0;
  if (forward_tiled_shape<T>(p, total, ts, smem)) {
    const int64_t blocks =
        p.N * p.groups * p.out[0] * ts.co_chunks * int64_t(ts.h_tiles) * ts.w_tiles;
    forward_tiled_kernel<T><<<static_cast<unsigned>(blocks), 256, smem, stream>>>(p, ts, x, w,
                                                                                  b, y);
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
