// convt/cuda/implicit_gemm_fprop_sm80.cuh — forward transposed convolution as an implicit
// GEMM on tensor cores (mma.sync: TF32 for float32, FP16/BF16 with float accumulation).
// Runs on sm_80 and newer, Hopper included.
//
// Decomposition. Per spatial dimension with stride s, output positions o = q*s + r split
// into s phases r. Within one phase the taps that reach an output are fixed — those k with
// (r + pad - k*dil) divisible by s, an arithmetic progression k0, k0+step, ... — and tap j
// reads input position i = q + off0 - j*doff. So each phase (r_d, r_h, r_w) is an ordinary
// correlation, and each (phase, group) is a GEMM with no zero insertion:
//
//   C[co, p] = sum_{kk} A[co, kk] * B[kk, p]
//     co  output channel of the group                                   (GEMM M)
//     p   output position of the phase: (n, q_d, q_h, q_w) flattened     (GEMM N)
//     kk  (tap of the phase, input channel of the group)                 (GEMM K)
//     A   the weight, repacked once per call by pack_weight_kernel into
//         Wp[g][kd][kh][kw][ci][co] (ci padded to the K tile, co to the M tile, zeros in
//         the padding, float32 pre-rounded to TF32 unless split, see below)
//     B   the input, gathered on the fly from any strides: x[n, ci, q+off] (zero outside)
//
// Tile. A block of 256 threads (8 warps, 2 x 4) computes 64 output channels x 128
// positions; each warp 32 x 32 with m16n8k8 (TF32) or m16n8k16 (FP16/BF16) MMAs. The K
// loop walks (tap, block of BK input channels); for one tile the tap is uniform, so every
// gathered element costs one add of a channel stride. Global loads for tile t+1 are issued
// into registers before the MMAs of tile t, then stored to the other half of a
// double-buffered shared-memory stage (k-major, rows padded by 8 elements so fragment loads
// are free of bank conflicts). FP16/BF16 fragments come from ldmatrix.trans.
//
// Epilogue. Accumulators (float) get the bias and are converted and stored straight to
// y[n, g*Cog+co, q*s+r] at any output strides.
//
// Strict float32 (kSplit). Every kernel of the implicit-GEMM forward also runs float32 as
// split TF32 ("3xTF32"): operands stay float32 in shared memory, each fragment register x
// splits into hi = tf32(x) and lo = tf32(x - hi), and a*b is accumulated as lo_a*hi_b +
// hi_a*lo_b + hi_a*hi_b. The dropped lo_a*lo_b is below 2^-22 of the product, and each
// product of TF32 values is exact. The MMA's own float accumulation truncates, though, so
// over a long K loop its errors, all of one sign, add up (measured on an H200: 1.7e-5 of
// the largest output over K = 2592); split TF32 therefore sums each K tile in a fresh
// accumulator and adds that to the running sum in float, rounding to nearest. The result
// keeps float32 accuracy (the strict budget of SPEC §3) at three MMAs per step.
//
// Grid: x = position tile * phases + phase (neighbouring blocks write interleaved phases of
// the same outputs), y = group * co tiles.
//
// The header needs only the CUDA runtime headers, so that a single-file build can inline
// it.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace convt {
namespace cuda {
namespace igemm {

constexpr int kBlockM = 64;    // output channels per block
constexpr int kBlockN = 128;   // output positions per block
constexpr int kThreads = 256;  // 8 warps: 2 along M x 4 along N
constexpr int kPad = 8;        // shared-memory row padding, in elements

struct FpropParams {
  const void* x;     // input  (N, C_in, D, H, W), strides x_str
  const void* wp;    // packed weight Wp[g][kd][kh][kw][cig_pad][cog_pad]
  const void* bias;  // (C_out,) with stride b_str, or nullptr
  void* y;           // output (N, C_out, OD, OH, OW), strides y_str
  int64_t N, cig, cog, groups;
  int64_t cig_pad, cog_pad;
  int64_t in[3], out[3];
  int64_t k[3], stride[3], pad[3], dil[3];
  int64_t x_str[5], y_str[5];
  int64_t b_str;
  int64_t num_phases;  // stride[0]*stride[1]*stride[2]
  int64_t co_tiles;    // cog_pad / kBlockM
  // 0: grid x = position tile * phases + phase, y = group * co tiles. 1: one grid row,
  // x = (position tile * phases + phase) * groups * co tiles + group * co tiles + co tile,
  // so that the blocks reading the same input positions run together (the GEMM of
  // convt/cuda/gemm_fold_sm80.cuh, whose M is the output channels times the taps).
  int co_inner;
};

struct PackParams {
  const void* w;  // (C_in, Cog, KD, KH, KW), strides w_str
  void* wp;       // Wp[g][kd][kh][kw][cig_pad][cog_pad]
  int64_t cig, cog, groups, cig_pad, cog_pad;
  int64_t k[3];
  int64_t w_str[5];
};

// ---------------------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------------------
template <typename T>
struct Elem;
template <>
struct Elem<float> {
  __device__ static float to_float(float v) { return v; }
  __device__ static float from_float(float v) { return v; }
};
template <>
struct Elem<__half> {
  __device__ static float to_float(__half v) { return __half2float(v); }
  __device__ static __half from_float(float v) { return __float2half_rn(v); }
};
template <>
struct Elem<__nv_bfloat16> {
  __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

// float -> TF32 (in float32's bit layout, the low 13 mantissa bits zero), rounded to
// nearest. sm_90 has this as one instruction (F2FP.TF32) for round-to-nearest-even, where
// the sm_80 form, ties away from zero, takes three dependent ones (a compare, a predicated
// add, a mask) in every A fragment load; the two differ only on exact ties.
__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
#else
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
#endif
  return r;
}

// Elements of the packed weight (its workspace bytes are this times the element size).
__host__ __device__ inline int64_t packed_weight_elems(const PackParams& p) {
  return p.groups * p.k[0] * p.k[1] * p.k[2] * p.cig_pad * p.cog_pad;
}

// I: the index type, int where the packed weight has fewer than 2^31 elements and every
// offset of w fits (64-bit division costs several times the 32-bit one: a 512 x 256 x 16
// weight took 22 us with 64-bit indices on an H200).
template <typename T, bool kSplit = false, typename I = int64_t>
__global__ void pack_weight_kernel(PackParams p) {
  const I total = I(packed_weight_elems(p));
  const T* w = static_cast<const T*>(p.w);
  T* wp = static_cast<T*>(p.wp);
  const I cog_pad = I(p.cog_pad), cig_pad = I(p.cig_pad), k0 = I(p.k[0]), k1 = I(p.k[1]),
          k2 = I(p.k[2]);
  for (I idx = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); idx < total;
       idx += I(gridDim.x) * I(blockDim.x)) {
    I r = idx;
    const I co = r % cog_pad; r /= cog_pad;
    const I ci = r % cig_pad; r /= cig_pad;
    const I kw = r % k2; r /= k2;
    const I kh = r % k1; r /= k1;
    const I kd = r % k0; r /= k0;
    const I g = r;
    float v = 0.f;
    if (ci < I(p.cig) && co < I(p.cog)) {
      const I off = (g * I(p.cig) + ci) * I(p.w_str[0]) + co * I(p.w_str[1]) +
                    kd * I(p.w_str[2]) + kh * I(p.w_str[3]) + kw * I(p.w_str[4]);
      v = Elem<T>::to_float(w[off]);
    }
    if constexpr (sizeof(T) == 4 && !kSplit) {
      wp[idx] = __uint_as_float(to_tf32(v));
    } else {
      wp[idx] = Elem<T>::from_float(v);
    }
  }
}

// The taps of one phase along one dimension: k = k0 + j*step for j < count, reading input
// position q + off0 - j*doff.
struct PhaseTaps {
  int k0, step, count, off0, doff;
};

// (Spatial sizes, kernel sizes, strides, paddings and dilations fit in 32 bits; only
// element offsets need 64.)
__host__ __device__ inline PhaseTaps phase_taps(int r, int s, int pad, int dil, int K) {
  PhaseTaps t;
  // step: the smallest j > 0 with j*dil divisible by s
  int step = 1;
  while ((step * dil) % s != 0) ++step;
  int k0 = 0;
  while (k0 < step && k0 < K && (((r + pad - k0 * dil) % s) + s) % s != 0) ++k0;
  t.step = step;
  if (k0 >= step || k0 >= K) {
    t.k0 = 0;
    t.count = 0;
    t.off0 = 0;
    t.doff = 0;
    return t;
  }
  t.k0 = k0;
  t.count = (K - 1 - k0) / step + 1;
  t.off0 = (r + pad - k0 * dil) / s;  // exact
  t.doff = step * dil / s;
  return t;
}

// ---------------------------------------------------------------------------------------
// MMA helpers
// ---------------------------------------------------------------------------------------
template <typename T>
struct Mma;

template <>
struct Mma<float> {  // m16n8k8 TF32
  static constexpr int kK = 8;
  __device__ static void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Mma<__half> {  // m16n8k16 FP16, float accumulation
  static constexpr int kK = 16;
  __device__ static void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Mma<__nv_bfloat16> {  // m16n8k16 BF16, float accumulation
  static constexpr int kK = 16;
  __device__ static void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// Split TF32: x (float32 bits) becomes hi, x truncated to TF32 (its top 11 significand
// bits: one mask, exact for infinities and NaN), and lo = x - hi (exact) rounded to TF32,
// nearest with ties away, by an integer add on its bits (lo is finite or NaN, never a
// carry into the sign). hi + lo keeps 22 significand bits of x.
// Infinities: an infinite x gets lo = 0 (inf - inf would be NaN), and `fin`, hi with
// infinities replaced by 0, is what the correction terms multiply (inf * 0, for a lo
// that happens to be 0, would be NaN): inf * w then stays inf, as in float32.
__device__ __forceinline__ void split_tf32(uint32_t& x, uint32_t& lo, uint32_t& fin) {
  const float v = __uint_as_float(x);
  const uint32_t hi = x & 0xffffe000u;
  const uint32_t d = __float_as_uint(v - __uint_as_float(hi));
  const bool inf = isinf(v);
  lo = inf ? 0u : (d + 0x1000u) & 0xffffe000u;
  fin = inf ? 0u : hi;
  x = hi;
}

// d += a * b in split TF32, the operands from split_tf32: lo_a*fin_b + fin_a*lo_b + hi_a*hi_b.
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const uint32_t (&ahi)[4],
                                           const uint32_t (&alo)[4], const uint32_t (&afin)[4],
                                           const uint32_t (&bhi)[2], const uint32_t (&blo)[2],
                                           const uint32_t (&bfin)[2]) {
  Mma<float>::run(d, alo, bfin);
  Mma<float>::run(d, afin, blo);
  Mma<float>::run(d, ahi, bhi);
}

// Accumulator tiles: zero, and acc += part (float adds, round to nearest).
template <int MI, int NI>
__device__ __forceinline__ void zero_acc(float (&a)[MI][NI][4]) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) a[i][j][e] = 0.f;
}
template <int MI, int NI>
__device__ __forceinline__ void add_acc(float (&acc)[MI][NI][4], const float (&part)[MI][NI][4]) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
}

// The MMAs of one K step of a warp's tile: acc[mi][ni] += a[mi] * b[ni]. For float the
// registers hold TF32 values, or, when kSplit, float32 values that are split here.
template <typename T, bool kSplit, int MI, int NI>
__device__ __forceinline__ void warp_mma(float (&acc)[MI][NI][4], uint32_t (&a)[MI][4],
                                         uint32_t (&b)[NI][2]) {
  if constexpr (kSplit) {
    static_assert(sizeof(T) == 4, "split TF32 is for float32");
    uint32_t alo[MI][4], afin[MI][4], blo[NI][2], bfin[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int q = 0; q < 4; ++q) split_tf32(a[mi][q], alo[mi][q], afin[mi][q]);
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int q = 0; q < 2; ++q) split_tf32(b[ni][q], blo[ni][q], bfin[ni][q]);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
        mma_3xtf32(acc[mi][ni], a[mi], alo[mi], afin[mi], b[ni], blo[ni], bfin[ni]);
  } else {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) Mma<T>::run(acc[mi][ni], a[mi], b[ni]);
  }
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <typename T, int BK>
struct SmemLayout {
  static constexpr int kAStride = kBlockM + kPad;  // elements per k-row of A
  static constexpr int kBStride = kBlockN + kPad;  // elements per k-row of B
  static constexpr int kAStage = BK * kAStride;
  static constexpr int kBStage = BK * kBStride;
  static constexpr size_t kBytes = size_t(2) * (kAStage + kBStage) * sizeof(T);
};

// ---------------------------------------------------------------------------------------
// Pieces shared by the forward kernels (this one and the halo variant)
// ---------------------------------------------------------------------------------------

// A fragments (weights; shared memory k-major, `stride` elements per k-row) of the warp's
// two 16-row M tiles for the MMA step at k offset kk.
template <typename T>
__device__ __forceinline__ void load_a_fragments(uint32_t (&a)[2][4], const T* as, int stride,
                                                 int kk, int warp_m, int lane) {
  const int gid = lane / 4, tig = lane % 4;
  if constexpr (sizeof(T) == 4) {
    const float* af = reinterpret_cast<const float*>(as);
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      const int m = warp_m + mi * 16 + gid;
      a[mi][0] = __float_as_uint(af[(kk + tig) * stride + m]);
      a[mi][1] = __float_as_uint(af[(kk + tig) * stride + m + 8]);
      a[mi][2] = __float_as_uint(af[(kk + tig + 4) * stride + m]);
      a[mi][3] = __float_as_uint(af[(kk + tig + 4) * stride + m + 8]);
    }
  } else {
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      // matrices: (k 0-7, m 0-7), (k 0-7, m 8-15), (k 8-15, m 0-7), (k 8-15, m 8-15)
      const int krow = kk + lane % 8 + (lane / 16) * 8;
      const int mcol = warp_m + mi * 16 + ((lane / 8) % 2) * 8;
      ldmatrix_x4_trans(a[mi], as + krow * stride + mcol);
    }
  }
}

// B fragments (positions; shared memory k-major, `stride` elements per k-row) of the warp's
// four 8-column N tiles for the MMA step at k offset kk. kRound: float32 rounded to TF32
// here (where the stage holds it unrounded).
template <typename T, bool kRound>
__device__ __forceinline__ void load_b_fragments(uint32_t (&b)[4][2], const T* bs, int stride,
                                                 int kk, int warp_n, int lane) {
  const int gid = lane / 4, tig = lane % 4;
  if constexpr (sizeof(T) == 4) {
    const float* bf = reinterpret_cast<const float*>(bs);
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int n = warp_n + ni * 8 + gid;
      const float b0 = bf[(kk + tig) * stride + n], b1 = bf[(kk + tig + 4) * stride + n];
      b[ni][0] = kRound ? to_tf32(b0) : __float_as_uint(b0);
      b[ni][1] = kRound ? to_tf32(b1) : __float_as_uint(b1);
    }
  } else {
    const int lrow = lane % 8;
#pragma unroll
    for (int nj = 0; nj < 2; ++nj) {
      // matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
      const int krow = kk + lrow + ((lane / 8) % 2) * 8;
      const int ncol = warp_n + nj * 16 + (lane / 16) * 8;
      uint32_t t4[4];
      ldmatrix_x4_trans(t4, bs + krow * stride + ncol);
      b[2 * nj][0] = t4[0];
      b[2 * nj][1] = t4[1];
      b[2 * nj + 1][0] = t4[2];
      b[2 * nj + 1][1] = t4[3];
    }
  }
}

// The epilogue: adds the bias, converts, and stores the warp's 32 x 32 accumulator tile to
// y[n, g*Cog + co0 + co, position], the position's offset taken from yoff (-1: none); y's
// elements are of type Out (T, or float for sums another kernel goes on adding).
template <typename T, typename Index, typename Out = T>
__device__ __forceinline__ void store_accumulators(const float (&acc)[2][4][4],
                                                   const FpropParams& p, const Index* yoff,
                                                   int64_t g, int64_t co0, int warp_m,
                                                   int warp_n, int lane) {
  const int gid = lane / 4, tig = lane % 4;
  Out* y = static_cast<Out*>(p.y) + g * p.cog * p.y_str[1];
  const T* bias = p.bias ? static_cast<const T*>(p.bias) + g * p.cog * p.b_str : nullptr;
  const Index ys_c = Index(p.y_str[1]);
  const int cog = int(p.cog - co0);  // channels of this block's tile that exist
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int e0 = 0; e0 < 2; ++e0) {
      const int co = warp_m + mi * 16 + gid + e0 * 8;
      if (co >= cog) continue;
      const Index c = Index(co0 + co);
      const float bv = bias ? Elem<T>::to_float(bias[c * p.b_str]) : 0.f;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
        for (int e1 = 0; e1 < 2; ++e1) {
          const Index yo = yoff[warp_n + ni * 8 + 2 * tig + e1];
          if (yo < 0) continue;
          y[yo + c * ys_c] = Elem<Out>::from_float(acc[mi][ni][e0 * 2 + e1] + bv);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------
// Index: the integer type of element offsets within x and y — int where both tensors span
// fewer than 2^31 elements (cheaper address arithmetic), int64_t otherwise.
// kSplit: float32 as split TF32 (strict float32), see the top of this file. Its fragments
// and partial sums need more than the 128 registers two blocks per multiprocessor leave.
// Out: the output's element type (see store_accumulators).
template <typename T, int BK, typename Index, bool kSplit = false, typename Out = T>
__global__ void __launch_bounds__(kThreads, kSplit ? 1 : 2) fprop_kernel(FpropParams p) {
  using L = SmemLayout<T, BK>;
  // A tile: BK x 64 elements, loaded with 16-byte (or, for small tiles, 8-byte) vectors.
  constexpr int kABytes = BK * kBlockM * int(sizeof(T)) / kThreads;  // per thread
  using AVec = typename std::conditional<(kABytes >= 16), uint4, uint2>::type;
  constexpr int kVec = int(sizeof(AVec) / sizeof(T));  // A elements per vector
  constexpr int kALoads = kABytes / int(sizeof(AVec));  // vectors per thread
  constexpr int kBRows = BK * kBlockN / kThreads;       // B elements per thread
  constexpr int kRowStep = kThreads / kBlockN;          // = 2
  static_assert(kALoads >= 1 && BK * kBlockM == kALoads * kVec * kThreads, "A tile mapping");
  static_assert(BK % Mma<T>::kK == 0, "BK must be a multiple of the MMA K");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* As = reinterpret_cast<T*>(smem_raw);
  T* Bs = As + 2 * L::kAStage;
  // Output offset of each of the block's 128 positions (-1: past the end), for the epilogue.
  __shared__ Index s_yoff[kBlockN];

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = (warp / 4) * 32;  // 2 warps along M
  const int warp_n = (warp % 4) * 32;  // 4 warps along N

  // ---- which phase, group, channel tile and position tile ----
  int64_t bx = blockIdx.x, by = blockIdx.y;
  if (p.co_inner) {
    const int64_t gc = p.groups * p.co_tiles;
    by = bx % gc;
    bx /= gc;
  }
  const int64_t phase = bx % p.num_phases;
  const int64_t ptile = bx / p.num_phases;
  const int64_t g = by / p.co_tiles;
  const int64_t co0 = (by % p.co_tiles) * kBlockM;
  int r[3];
  {
    int ph = int(phase);
    r[2] = ph % int(p.stride[2]); ph /= int(p.stride[2]);
    r[1] = ph % int(p.stride[1]); ph /= int(p.stride[1]);
    r[0] = ph;
  }
  int Q[3];
  PhaseTaps taps[3];
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    const int s = int(p.stride[d]);
    Q[d] = r[d] < p.out[d] ? (int(p.out[d]) - r[d] + s - 1) / s : 0;
    taps[d] = phase_taps(r[d], s, int(p.pad[d]), int(p.dil[d]), int(p.k[d]));
  }
  const int64_t P = p.N * Q[0] * Q[1] * Q[2];
  const int64_t p0 = ptile * kBlockN;
  if (p0 >= P) return;

  // ---- this thread's gather column: one output position of the phase ----
  const int bcol = tid % kBlockN;
  const int brow0 = tid / kBlockN;
  Index qn = 0;
  int qd = 0, qh = 0, qw = 0;
  const bool col_valid = p0 + bcol < P;
  if (col_valid) {
    Index t = Index(p0 + bcol);
    qw = int(t % Q[2]); t /= Q[2];
    qh = int(t % Q[1]); t /= Q[1];
    qd = int(t % Q[0]); t /= Q[0];
    qn = t;
  }
  if (brow0 == 0) {
    s_yoff[bcol] = col_valid ? Index(qn * p.y_str[0] + (qd * p.stride[0] + r[0]) * p.y_str[2] +
                                     (qh * p.stride[1] + r[1]) * p.y_str[3] +
                                     (qw * p.stride[2] + r[2]) * p.y_str[4])
                             : Index(-1);
  }
  const Index xs_c = Index(p.x_str[1]), xs_d = Index(p.x_str[2]), xs_h = Index(p.x_str[3]),
              xs_w = Index(p.x_str[4]);
  const T* xg = static_cast<const T*>(p.x) + qn * p.x_str[0] + g * p.cig * p.x_str[1];
  const T* wg = static_cast<const T*>(p.wp) +
                g * p.k[0] * p.k[1] * p.k[2] * p.cig_pad * p.cog_pad + co0;

  const int ci_tiles = int(p.cig_pad / BK);
  const int num_taps = taps[0].count * taps[1].count * taps[2].count;
  const int num_k_tiles = num_taps * ci_tiles;

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  AVec a_reg[kALoads];
  T b_reg[kBRows];

  // Global -> registers for K tile kt.
  auto load_tile = [&](int kt) {
    const int tap = kt / ci_tiles;
    const int ci0 = (kt - tap * ci_tiles) * BK;
    int jt = tap;
    const int jw = jt % taps[2].count; jt /= taps[2].count;
    const int jh = jt % taps[1].count; jt /= taps[1].count;
    const int jd = jt;
    const int64_t kd = taps[0].k0 + jd * taps[0].step;
    const int64_t kh = taps[1].k0 + jh * taps[1].step;
    const int64_t kw = taps[2].k0 + jw * taps[2].step;
    // A: packed weight rows ci0 .. ci0+BK of tap (kd, kh, kw), columns co0 .. co0+64
    const T* wa = wg + (((kd * p.k[1] + kh) * p.k[2] + kw) * p.cig_pad + ci0) * p.cog_pad;
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int v = tid + i * kThreads;  // vector index in the BK x 64 tile
      const int row = v / (kBlockM / kVec);
      const int col = (v % (kBlockM / kVec)) * kVec;
      a_reg[i] = *reinterpret_cast<const AVec*>(wa + row * p.cog_pad + col);
    }
    // B: gathered input
    const int id = qd + taps[0].off0 - jd * taps[0].doff;
    const int ih = qh + taps[1].off0 - jh * taps[1].doff;
    const int iw = qw + taps[2].off0 - jw * taps[2].doff;
    const bool pos_ok = col_valid && id >= 0 && id < p.in[0] && ih >= 0 && ih < p.in[1] &&
                        iw >= 0 && iw < p.in[2];
    // Offsets step by kRowStep channels; a full tile of channels needs no channel check.
    Index off = Index(id) * xs_d + Index(ih) * xs_h + Index(iw) * xs_w +
                Index(ci0 + brow0) * xs_c;
    const Index step = Index(kRowStep) * xs_c;
    if (pos_ok && ci0 + BK <= p.cig) {
#pragma unroll
      for (int i = 0; i < kBRows; ++i, off += step) b_reg[i] = xg[off];
    } else {
#pragma unroll
      for (int i = 0; i < kBRows; ++i, off += step) {
        const int ci = ci0 + brow0 + i * kRowStep;
        b_reg[i] = (pos_ok && ci < p.cig) ? xg[off] : Elem<T>::from_float(0.f);
      }
    }
  };

  // Registers -> shared stage s.
  auto store_tile = [&](int s) {
    T* as = As + s * L::kAStage;
    T* bs = Bs + s * L::kBStage;
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int v = tid + i * kThreads;
      const int row = v / (kBlockM / kVec);
      const int col = (v % (kBlockM / kVec)) * kVec;
      *reinterpret_cast<AVec*>(as + row * L::kAStride + col) = a_reg[i];
    }
#pragma unroll
    for (int i = 0; i < kBRows; ++i) {
      T v = b_reg[i];
      if constexpr (sizeof(T) == 4 && !kSplit) v = __uint_as_float(to_tf32(v));  // round once, here
      bs[(brow0 + i * kRowStep) * L::kBStride + bcol] = v;
    }
  };

  // MMAs on shared stage s, into dst.
  auto compute_tile = [&](int s, float (&dst)[2][4][4]) {
    const T* as = As + s * L::kAStage;
    const T* bs = Bs + s * L::kBStage;
#pragma unroll
    for (int kk = 0; kk < BK; kk += Mma<T>::kK) {
      uint32_t a[2][4], b[4][2];
      load_a_fragments<T>(a, as, L::kAStride, kk, warp_m, lane);
      load_b_fragments<T, false>(b, bs, L::kBStride, kk, warp_n, lane);
      warp_mma<T, kSplit>(dst, a, b);
    }
  };

  if (num_k_tiles > 0) {
    load_tile(0);
    store_tile(0);
    __syncthreads();
    for (int kt = 0; kt < num_k_tiles; ++kt) {
      const int s = int(kt & 1);
      const bool more = kt + 1 < num_k_tiles;
      if (more) load_tile(kt + 1);
      if constexpr (kSplit) {  // a fresh partial sum per K tile (see the top of this file)
        float part[2][4][4];
        zero_acc(part);
        compute_tile(s, part);
        add_acc(acc, part);
      } else {
        compute_tile(s, acc);
      }
      if (more) store_tile(s ^ 1);
      __syncthreads();
    }
  }

  // ---- epilogue: bias, convert, store to y[n, g*Cog+co, q*s+r] ----
  __syncthreads();  // s_yoff (also when the K loop was empty)
  store_accumulators<T, Index, Out>(acc, p, s_yoff, g, co0, warp_m, warp_n, lane);
}

}  // namespace igemm
}  // namespace cuda
}  // namespace convt
