// convt/cuda/gemm_fold_sm80.cuh — the forward transposed convolution as one GEMM over the
// input's positions and a fold of its products into the output ("GEMM and fold"), for
// layers of few output channels.
//
// Every input element x[n, ci, i] reaches output o = i*s - pad + k*dil through tap k with
// weight w[ci, co, k]. The GEMM takes all taps at once:
//
//   P[n, g, co, t, i] = sum_{ci of group g} w[ci, co, t] * x[n, ci, i]
//     M  (co, t): output channels of the group times the taps (t = (kd*KH + kh)*KW + kw)
//     N  i:       input positions of the sample (n, id, ih, iw)
//     K  ci:      input channels of the group
//
// which is the pointwise (1 x 1 x 1) transposed convolution with C_out * taps output
// channels and the weight viewed as (C_in, C_out / groups * taps): the implicit-GEMM kernel
// of convt/cuda/implicit_gemm_fprop_sm80.cuh runs it (FpropParams::co_inner, float sums,
// the weight packed by pack_fold_weight_kernel below). The fold then adds, for each output,
// the products of the taps that reach it (fold_kernel):
//
//   y[n, co, o] = bias[co] + sum_{t, i: o = i*s - pad + t*dil} P[n, g, co, t, i]
//
// Each input element is read once, every product is a useful one (no output phase pads N,
// no tap reloads its box), and the MMA's M is C_out / groups * taps, however few the output
// channels: a layer of 3 output channels and 4 x 4 taps runs 48-row tiles where the
// output-stationary kernels pad 3 channels to 8 or 64. It costs the products' round trip
// through memory, 2 x 4 bytes per (output channel, tap, input position); the dispatcher
// (src/cuda/fprop_gemm_fold.cu) takes it where that stays small against the input.
//
// The products are float sums whatever the element type, so that float16 and bfloat16
// accumulate in float32 up to the output's one rounding.
//
// The header needs only the CUDA runtime headers (single-file builds inline it).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "convt/cuda/implicit_gemm_fprop_sm80.cuh"

namespace convt {
namespace cuda {
namespace fold {

// The packed weight of the GEMM: Wp[g][ci][j], ci < cig_pad, j = co * taps + t < cog_pad
// (igemm::PackParams with cog_pad the padded (channel, tap) rows), zero in the padding
// (float32 pre-rounded to TF32 unless split), from w (C_in, Cog, KD, KH, KW) at any strides.
template <typename T, bool kSplit, typename I>
__global__ void pack_fold_weight_kernel(igemm::PackParams p) {
  using igemm::Elem;
  const I taps = I(p.k[0] * p.k[1] * p.k[2]);
  const I total = I(p.groups * p.cig_pad * p.cog_pad);
  const T* w = static_cast<const T*>(p.w);
  T* wp = static_cast<T*>(p.wp);
  for (I idx = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); idx < total;
       idx += I(gridDim.x) * I(blockDim.x)) {
    I r = idx;
    const I j = r % I(p.cog_pad); r /= I(p.cog_pad);
    const I ci = r % I(p.cig_pad);
    const I g = r / I(p.cig_pad);
    float v = 0.f;
    if (ci < I(p.cig) && j < I(p.cog) * taps) {
      const I co = j / taps;
      I t = j - co * taps;
      const I kw = t % I(p.k[2]); t /= I(p.k[2]);
      const I kh = t % I(p.k[1]);
      const I kd = t / I(p.k[1]);
      const I off = (g * I(p.cig) + ci) * I(p.w_str[0]) + co * I(p.w_str[1]) +
                    kd * I(p.w_str[2]) + kh * I(p.w_str[3]) + kw * I(p.w_str[4]);
      v = Elem<T>::to_float(w[off]);
    }
    if constexpr (sizeof(T) == 4 && !kSplit) {
      wp[idx] = __uint_as_float(igemm::to_tf32(v));
    } else {
      wp[idx] = Elem<T>::from_float(v);
    }
  }
}

// ---------------------------------------------------------------------------------------
// The GEMM fed by cp.async (CONVT_GEMM_FOLD_PIPE=0 turns it off; see fold_gemm_pipelined in
// src/cuda/fprop_gemm_fold.cu for where it runs). The same tile and MMAs as igemm's
// fprop_kernel (64 (channel, tap) rows x 128 positions, K steps of 32 input channels, 8
// warps of 32 x 32), but no gather: every K step's tiles are 16-byte cp.async copies (zeros
// filled past the positions and the group's channels) into a ring of kFoldStages stages, so
// that three K steps' loads are in flight while one is multiplied. Needs each channel's
// plane contiguous with the plane, x's sample and channel strides multiples of 16 bytes (a
// 16-byte run of positions never crosses a sample), and x 16-byte aligned.
// ---------------------------------------------------------------------------------------

constexpr int kFoldStages = 4;
constexpr int kFoldBK = 32;

struct GemmParams {
  const void* x;     // (N, C_in, plane), strides x_n, x_c, 1
  const void* wp;    // Wp[g][cig_pad][j_pad] (pack_fold_weight_kernel)
  float* prod;       // (N, C_out * taps, plane) contiguous
  int64_t P, plane;  // positions (N * plane), positions of a sample
  int64_t x_n, x_c;
  int64_t cig, cig_pad, j, j_pad, groups;  // j: output channels of a group x taps
  int64_t co_tiles;                        // j_pad / 64
};

template <typename T>
struct FoldSmem {
  using L = igemm::SmemLayout<T, kFoldBK>;
  static constexpr int kStage = L::kAStage + L::kBStage;  // elements
  static constexpr size_t kBytes = size_t(kFoldStages) * kStage * sizeof(T);
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool fill) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(fill ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The copies of one thread: A (weight) chunks fixed by the thread, B (input) chunks at
// (channel row, column) fixed across K steps, each with its offset in x past the channel
// (the sample and position) and whether it exists.
template <typename T>
struct FoldCopies {
  static constexpr int kV = 16 / int(sizeof(T));  // elements a copy
  static constexpr int kA = kFoldBK * igemm::kBlockM / kV / igemm::kThreads;
  static constexpr int kB = kFoldBK * igemm::kBlockN / kV / igemm::kThreads;
  static_assert(kA >= 1 && kB >= 1, "copies per thread");
  int64_t b_off[kB];
  int b_row[kB], b_col[kB];
  bool b_ok[kB];
  // Thread tid's B chunks: their rows and columns, and, from pos_of(column) (the chunk's
  // first input position in the sample's row of positions, or -1 where it has none), their
  // offsets.
  template <typename PosFn>
  __device__ __forceinline__ void place(int tid, PosFn pos_of) {
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      const int v = tid + i * igemm::kThreads;
      b_row[i] = v / (igemm::kBlockN / kV);
      b_col[i] = (v % (igemm::kBlockN / kV)) * kV;
      const int64_t off = pos_of(b_col[i]);
      b_ok[i] = off >= 0;
      b_off[i] = b_ok[i] ? off : 0;
    }
  }
};

// The K loop of the cp.async GEMM into acc: a 64 x 128 tile of wg (the packed weight's rows
// from the tile's first, j_pad a channel) times the input at xg (the group's first channel,
// x_c a channel), cig channels in K steps of 32 through kFoldStages stages of smem.
template <typename T, bool kSplit>
__device__ __forceinline__ void fold_gemm_mainloop(float (&acc)[2][4][4], T* smem,
                                                   const FoldCopies<T>& c, const T* xg,
                                                   const T* wg, int64_t x_c, int64_t cig,
                                                   int64_t j_pad, int ktiles) {
  using namespace igemm;
  using L = SmemLayout<T, kFoldBK>;
  using C = FoldCopies<T>;
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = (warp / 4) * 32, warp_n = (warp % 4) * 32;
  auto load = [&](int stage, int kt) {
    T* as = smem + stage * FoldSmem<T>::kStage;
    T* bs = as + L::kAStage;
    const int ci0 = kt * kFoldBK;
#pragma unroll
    for (int i = 0; i < C::kA; ++i) {
      const int v = tid + i * kThreads;
      const int row = v / (kBlockM / C::kV), col = (v % (kBlockM / C::kV)) * C::kV;
      cp_async16(as + row * L::kAStride + col, wg + (ci0 + row) * j_pad + col, true);
    }
#pragma unroll
    for (int i = 0; i < C::kB; ++i) {
      const int ci = ci0 + c.b_row[i];
      const bool ok = c.b_ok[i] && ci < cig;
      cp_async16(bs + c.b_row[i] * L::kBStride + c.b_col[i], ok ? xg + ci * x_c + c.b_off[i] : xg,
                 ok);
    }
  };
  zero_acc(acc);
#pragma unroll
  for (int s = 0; s < kFoldStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kFoldStages - 2>();
    __syncthreads();  // step kt landed for every thread; step kt - 1's stage is free
    const int next = kt + kFoldStages - 1;
    if (next < ktiles) load(next % kFoldStages, next);
    cp_async_commit();
    const T* as = smem + (kt % kFoldStages) * FoldSmem<T>::kStage;
    const T* bs = as + L::kAStage;
    float part[2][4][4];
    if constexpr (kSplit) zero_acc(part);
#pragma unroll
    for (int kk = 0; kk < kFoldBK; kk += Mma<T>::kK) {
      uint32_t a[2][4], b[4][2];
      load_a_fragments<T>(a, as, L::kAStride, kk, warp_m, lane);
      // (The input lands as float32: rounded to TF32 here, split where kSplit.)
      load_b_fragments<T, !kSplit>(b, bs, L::kBStride, kk, warp_n, lane);
      if constexpr (kSplit)
        warp_mma<T, kSplit>(part, a, b);
      else
        warp_mma<T, kSplit>(acc, a, b);
    }
    if constexpr (kSplit) add_acc(acc, part);  // a fresh partial sum per K step
  }
  cp_async_wait<0>();
}

template <typename T, bool kSplit>
__global__ void __launch_bounds__(igemm::kThreads, kSplit ? 1 : 2) fold_gemm_kernel(GemmParams p) {
  using namespace igemm;
  using C = FoldCopies<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = (warp / 4) * 32, warp_n = (warp % 4) * 32;
  const int gid = lane / 4, tig = lane % 4;

  const int64_t gc = p.groups * p.co_tiles;
  const int64_t by = int64_t(blockIdx.x) % gc;
  const int64_t p0 = int64_t(blockIdx.x) / gc * kBlockN;
  const int64_t g = by / p.co_tiles;
  const int64_t m0 = (by % p.co_tiles) * kBlockM;

  C c;
  c.place(tid, [&](int col) -> int64_t {
    const int64_t pp = p0 + col;
    if (pp >= p.P) return -1;
    const int64_t n = pp / p.plane;
    return n * p.x_n + (pp - n * p.plane);
  });
  float acc[2][4][4];
  fold_gemm_mainloop<T, kSplit>(acc, reinterpret_cast<T*>(smem_raw), c,
                                static_cast<const T*>(p.x) + g * p.cig * p.x_c,
                                static_cast<const T*>(p.wp) + g * p.cig_pad * p.j_pad + m0,
                                p.x_c, p.cig, p.j_pad, int(p.cig_pad / kFoldBK));

  // Epilogue: pairs of adjacent positions (one sample: the plane is a multiple of kV) as
  // float2 stores to prod[n, g * j + m, position].
  float* prod = p.prod + g * p.j * p.plane;
  const int64_t prod_n = p.groups * p.j * p.plane;
#pragma unroll
  for (int ni = 0; ni < 4; ++ni) {
    const int64_t pp = p0 + warp_n + ni * 8 + 2 * tig;
    if (pp >= p.P) continue;
    const int64_t n = pp / p.plane;
    const int64_t off = n * prod_n + (pp - n * p.plane);
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
      for (int e0 = 0; e0 < 2; ++e0) {
        const int64_t m = m0 + warp_m + mi * 16 + gid + e0 * 8;
        if (m >= p.j) continue;
        *reinterpret_cast<float2*>(prod + off + m * p.plane) =
            make_float2(acc[mi][ni][e0 * 2], acc[mi][ni][e0 * 2 + 1]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// The fold in the GEMM's epilogue, 1-D layers whose output channels x taps fit one 64-row
// tile (CONVT_GEMM_FOLD_FUSED=0 turns it off; where the cp.async GEMM runs): a block owns
// `owned`
// consecutive outputs of one sample and group, multiplies the 128 input positions from
// `ib` = the first one any of them reads, rounded down to a multiple of the copy's
// elements (zeros outside the sample), keeps the products in shared memory and adds each
// owned output's taps there. Neighbouring blocks compute the positions their outputs share
// (a halo of about (taps - 1) x dilation / stride positions), so that the products never
// leave the block: no round trip through memory, no second kernel.
// ---------------------------------------------------------------------------------------

struct FusedParams {
  const void* x;     // (N, C_in, L), strides x_n, x_c, 1
  const void* wp;    // Wp[g][cig_pad][64]
  const void* bias;  // (C_out,) with stride b_str, or nullptr
  void* y;           // (N, C_out, OL), strides y_n, y_c, y_w
  int64_t x_n, x_c, y_n, y_c, y_w, b_str;
  int64_t cig, cig_pad, cog, groups;
  int L, OL, k, stride, pad, dil;
  int owned;   // outputs a block
  int blocks;  // blocks a (sample, group): ceil(OL / owned)
};

// The first input position output o reads (the smallest i with i * s - pad + t * dil = o
// for some tap t < k), floor division.
__host__ __device__ inline int64_t fused_first_input(int64_t o, int s, int pad, int dil, int k) {
  const int64_t num = o + pad - int64_t(k - 1) * dil;
  return num >= 0 ? num / s : -((-num + s - 1) / s);
}

template <typename T, bool kSplit>
__global__ void __launch_bounds__(igemm::kThreads, kSplit ? 1 : 2)
    fold_fused_1d_kernel(FusedParams p) {
  using namespace igemm;
  using C = FoldCopies<T>;
  constexpr int kPitch = kBlockN + 4;  // floats a row of the products in shared memory
  static_assert(kBlockM * kPitch * 4 <= int(FoldSmem<T>::kBytes), "products fit the stages");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = (warp / 4) * 32, warp_n = (warp % 4) * 32;
  const int gid = lane / 4, tig = lane % 4;

  const int64_t bid = blockIdx.x;
  const int tile = int(bid % p.blocks);
  const int64_t ng = bid / p.blocks;
  const int64_t g = ng % p.groups, n = ng / p.groups;
  const int64_t o0 = int64_t(tile) * p.owned;
  int64_t ib = fused_first_input(o0, p.stride, p.pad, p.dil, p.k);
  ib = ib >= 0 ? ib / C::kV * C::kV : -((-ib + C::kV - 1) / C::kV) * C::kV;

  C c;
  c.place(tid, [&](int col) -> int64_t {
    const int64_t pos = ib + col;  // (a chunk is wholly in or out: L % kV == 0)
    return pos >= 0 && pos < p.L ? n * p.x_n + pos : -1;
  });
  float acc[2][4][4];
  T* smem = reinterpret_cast<T*>(smem_raw);
  fold_gemm_mainloop<T, kSplit>(acc, smem, c, static_cast<const T*>(p.x) + g * p.cig * p.x_c,
                                static_cast<const T*>(p.wp) + g * p.cig_pad * kBlockM, p.x_c,
                                p.cig, kBlockM, int(p.cig_pad / kFoldBK));
  __syncthreads();  // every warp is done with the stages
  float* prod = reinterpret_cast<float*>(smem_raw);
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = warp_m + mi * 16 + gid + (e / 2) * 8;
        const int col = warp_n + ni * 8 + 2 * tig + (e % 2);
        prod[m * kPitch + col] = acc[mi][ni][e];
      }
  __syncthreads();

  // The fold: output o = q * stride + r reads position q + off0 - j * doff through tap
  // k0 + j * step (igemm::phase_taps), all within the block's 128 positions.
  const int64_t end = o0 + p.owned < p.OL ? o0 + p.owned : p.OL;
  const int64_t count = (end - o0) * p.cog;
  T* y = static_cast<T*>(p.y) + n * p.y_n + g * p.cog * p.y_c;
  const T* bias = p.bias ? static_cast<const T*>(p.bias) + g * p.cog * p.b_str : nullptr;
  for (int64_t idx = tid; idx < count; idx += kThreads) {
    const int co = int(idx / (end - o0));
    const int64_t o = o0 + idx % (end - o0);
    const int r = int(o % p.stride);
    const int64_t q = o / p.stride;
    const PhaseTaps t = phase_taps(r, p.stride, p.pad, p.dil, p.k);
    float sum = bias ? Elem<T>::to_float(bias[co * p.b_str]) : 0.f;
    for (int j = 0; j < t.count; ++j) {
      const int64_t i = q + t.off0 - int64_t(j) * t.doff;
      if (i < 0 || i >= p.L) continue;
      sum += prod[(co * p.k + t.k0 + j * t.step) * kPitch + int(i - ib)];
    }
    y[co * p.y_c + o * p.y_w] = Elem<T>::from_float(sum);
  }
}

// Outputs a block of fold_fused_1d_kernel owns, so that the positions they read from their
// block's first one (rounded down to `v`) fit its 128: 0 where not even one output's do.
__host__ __device__ inline int fused_owned_outputs(int s, int dil, int k, int v) {
  // (o0 .. o0 + owned - 1 read positions from floor((o0 + pad - (k - 1) dil) / s) to
  // floor((o0 + owned - 1 + pad) / s): at most (owned - 1 + (k - 1) dil) / s + 2 of them,
  // plus v - 1 for the rounding.)
  const int room = igemm::kBlockN - (v - 1) - 2;
  const int64_t owned = int64_t(room) * s - int64_t(k - 1) * dil + 1;
  return owned > 0 ? int(owned) : 0;
}

// The fold's parameters. P is contiguous: P[n][c][t][id][ih][iw], c the output channel
// (g * Cog + co), t the tap; y any strides.
struct FoldParams {
  const float* prod;
  const void* bias;  // (C_out,) with stride b_str, or nullptr
  void* y;           // (N, C_out, OD, OH, OW), strides y_str
  int64_t N, C;
  int64_t in[3], out[3];
  int64_t k[3], stride[3], pad[3], dil[3];
  int64_t y_str[5];
  int64_t b_str;
  int64_t qw;  // output columns per W phase, rounded up: ceil(OW / stride W)
};

// One thread an output, threads in the order (n, c, od, oh, W phase, q) with ow = q * sW +
// phase, so that a warp's lanes share their taps and read consecutive input columns of each.
// Index: int where P and y span fewer than 2^31 elements.
template <typename T, typename Index>
__global__ void fold_kernel(FoldParams p) {
  using igemm::Elem;
  using igemm::PhaseTaps;
  using igemm::phase_taps;
  const int sw = int(p.stride[2]);
  const Index total = Index(p.N * p.C * p.out[0] * p.out[1]) * Index(sw) * Index(p.qw);
  const Index in_w = Index(p.in[2]), in_h = Index(p.in[1]), in_d = Index(p.in[0]);
  const Index plane = in_d * in_h * in_w;
  const int taps = int(p.k[0] * p.k[1] * p.k[2]);
  for (Index idx = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); idx < total;
       idx += Index(gridDim.x) * Index(blockDim.x)) {
    Index r = idx;
    const int q = int(r % Index(p.qw)); r /= Index(p.qw);
    const int rw = int(r % Index(sw)); r /= Index(sw);
    const int oh = int(r % Index(p.out[1])); r /= Index(p.out[1]);
    const int od = int(r % Index(p.out[0])); r /= Index(p.out[0]);
    const Index c = r % Index(p.C);
    const Index n = r / Index(p.C);
    const int ow = q * sw + rw;
    if (ow >= p.out[2]) continue;
    const int sd = int(p.stride[0]), sh = int(p.stride[1]);
    const PhaseTaps td = phase_taps(od % sd, sd, int(p.pad[0]), int(p.dil[0]), int(p.k[0]));
    const PhaseTaps th = phase_taps(oh % sh, sh, int(p.pad[1]), int(p.dil[1]), int(p.k[1]));
    const PhaseTaps tw = phase_taps(rw, sw, int(p.pad[2]), int(p.dil[2]), int(p.k[2]));
    const float* src = p.prod + (n * Index(p.C) + c) * Index(taps) * plane;
    float sum = 0.f;
    for (int jd = 0; jd < td.count; ++jd) {
      const int id = od / sd + td.off0 - jd * td.doff;
      if (id < 0 || id >= p.in[0]) continue;
      const int kd = td.k0 + jd * td.step;
      for (int jh = 0; jh < th.count; ++jh) {
        const int ih = oh / sh + th.off0 - jh * th.doff;
        if (ih < 0 || ih >= p.in[1]) continue;
        const int kh = th.k0 + jh * th.step;
        const float* row = src + (Index(kd * p.k[1] + kh) * Index(p.k[2])) * plane +
                           (Index(id) * in_h + Index(ih)) * in_w;
        for (int jw = 0; jw < tw.count; ++jw) {
          const int iw = q + tw.off0 - jw * tw.doff;
          if (iw < 0 || iw >= p.in[2]) continue;
          sum += row[Index(tw.k0 + jw * tw.step) * plane + Index(iw)];
        }
      }
    }
    if (p.bias) sum += Elem<T>::to_float(static_cast<const T*>(p.bias)[c * Index(p.b_str)]);
    static_cast<T*>(p.y)[n * Index(p.y_str[0]) + c * Index(p.y_str[1]) +
                         Index(od) * Index(p.y_str[2]) + Index(oh) * Index(p.y_str[3]) +
                         Index(ow) * Index(p.y_str[4])] = Elem<T>::from_float(sum);
  }
}

}  // namespace fold
}  // namespace cuda
}  // namespace convt
