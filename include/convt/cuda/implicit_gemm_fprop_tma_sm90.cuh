// convt/cuda/implicit_gemm_fprop_tma_sm90.cuh — the implicit-GEMM forward fed by the
// Tensor Memory Accelerator (TMA), for Hopper (sm_90) and newer.
//
// Same phase decomposition as implicit_gemm_fprop_sm80.cuh: per spatial dimension with
// stride s, output positions o = q*s + r split into s phases r; within a phase, tap j of
// the phase reads input position q + off0 - j*doff. The GEMM is oriented the other way:
//
//   C[p, co] = sum_{kk} A[p, kk] * B[kk, co]
//     p   output position of the phase                                       (GEMM M)
//     co  output channel of the group                                        (GEMM N)
//     kk  (tap of the phase, input channel of the group)                     (GEMM K)
//     A   the input, read by TMA straight from x (NC[D]HW, W contiguous)
//     B   the weight, repacked once per call into fragment order (see below)
//
// Why this works without any gather: for a fixed tap and block of input channels, the
// inputs of kSegW consecutive positions q_w of one output row of a phase are kSegW
// consecutive input columns, and the W taps of the phase shift that window by doff
// columns each. So the block's 128 positions are split into segments of kW = 128 bytes /
// sizeof(T) positions (32 for float, 64 for 16-bit types) along W, and each (segment,
// K step) is one TMA box of x, [BK channels][1][1][row], whose row holds the windows of
// every W tap of the phase: a K step is (D tap, H tap, block of BK channels), and its
// stage serves all W taps, one weight tile each (see Seg: a box must also start on a
// 16-byte boundary, so it starts up to kAlign - 1 columns early). The tensor map's bounds
// checks do the padding and the borders (out-of-range elements read as zero), and the
// channel dimension of the map stops at the group's channel count, so a partial channel
// block reads zeros, never the next group. Box rows are an odd multiple of 16 bytes
// apart, which keeps the fragment loads below conflict-free.
//
// Warp roles. One producer warp (one elected thread) walks the K steps, waits for a free
// stage, and issues the boxes of the block's segments plus one bulk copy per W tap of the
// packed weight tile, all completing on the stage's "full" mbarrier.
// Four consumer warps each own 32 positions (rows of A) and all BN channels; they wait on
// "full", run mma.sync (TF32 m16n8k8, FP16/BF16 m16n8k16, float accumulation), and
// release the stage on its "empty" mbarrier (one arrival per consumer thread). As many
// stages as fit in 72 KB (three blocks per multiprocessor) where that is two or more, else
// in 104 KB (two blocks), at most kMaxStages, are in flight (Smem::launch_stages); a
// launch allocates just those, so small stages leave room for more blocks.
//
// Fragments.
//  - A (input): element (c, w) of tap j's window is at c*row_bytes + (w + col_j)*sizeof(T)
//    bytes, row_bytes = 16 (mod 32). TF32: the MMA's k index t (0..3) maps to channel 2t
//    and t+4 to channel 2t+1 of the 8-channel step (B is packed in the same order), so a
//    warp's 32 loads hit banks 8t + g + const (mod 32): no conflicts. Values are rounded to TF32 (to_tf32) after the load, or,
//    for strict float32 (kSplit), split into two TF32 values (3xTF32, like B).
//    FP16/BF16: each A register pairs two channels of one position, two 16-bit loads
//    (banks 8t + g/2 + const); the windows' shifts rule out ldmatrix.
//  - B: for each MMA K step and pair of n8 columns, the 32 lanes' fragments are stored
//    consecutively, 16 bytes per lane (b[n][0], b[n][1], b[n+8][0], b[n+8][1]), so one
//    128-bit load per lane fetches four B registers, conflict-free.
//
// Epilogue. Accumulators (float) get the bias, are converted and stored to
// y[n, g*Cog + co, ...] at the output strides (o_w = q_w*s_w + r_w).
//
// Grid: x = ((position tile * phases) + phase) * co_tiles + co tile, y = group.
//
// A later wgmma version keeps the producer, the boxes and the packed B; its A fragments
// come from the same loads (wgmma with A in registers, B from shared memory).
//
// The header needs only the CUDA headers (cuda.h for the tensor-map type), so that a
// single-file build can inline it.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "convt/cuda/implicit_gemm_fprop_sm80.cuh"

namespace convt {
namespace cuda {
namespace tma {

using igemm::Elem;
using igemm::Mma;
using igemm::PhaseTaps;
using igemm::phase_taps;
using igemm::add_acc;
using igemm::mma_3xtf32;
using igemm::zero_acc;
using igemm::split_tf32;
using igemm::to_tf32;

constexpr int kConsumerWarps = 4;
constexpr int kThreads = (kConsumerWarps + 1) * 32;
constexpr int kBlockM = 128;  // output positions per block (32 per consumer warp)
constexpr int kMaxStages = 8;
constexpr int kMaxWPhases = 16;  // W strides up to which tap-less W phases have owners

// A segment: kW consecutive positions of one output row of a phase (128 bytes of them).
// Its box holds, per channel, the input columns of every W tap of the phase: tap j's
// window of kW columns starts (count_w - 1 - j) * doff columns after tap count_w - 1's, so
// the box covers kW + (count_w - 1) * doff columns, plus up to kAlign - 1 in front: TMA
// boxes must start at a multiple of 16 bytes along the innermost dimension, so a box
// starts at the aligned column at or before its first column. The host sizes the box row
// (TmaFpropParams::row_bytes, see tma_row_bytes) for the widest phase.
template <typename T>
struct Seg {
  static constexpr int kW = 128 / int(sizeof(T));     // positions per segment
  static constexpr int kCount = kBlockM / kW;         // segments per block
  static constexpr int kAlign = 16 / int(sizeof(T));  // columns per 16 bytes
};

// Bytes of one box row for W windows spanning `span` = kW + (taps - 1) * doff columns:
// at least span + kAlign - 1 columns, a multiple of 16 bytes, and an odd multiple of 16
// (16 mod 32), which keeps the fragment loads free of bank conflicts (see the kernel).
__host__ __device__ constexpr int tma_row_bytes(int span_cols, int elem_bytes) {
  const int need = (span_cols * elem_bytes + 16 - elem_bytes + 15) / 16 * 16;
  return need % 32 == 16 ? need : need + 16;
}

// Shared memory of one block: `stages` stages of [kSegs boxes][count_w weight tiles].
template <typename T, int BN, int BK>
struct Smem {
  static constexpr int kBBytes = BN * BK * int(sizeof(T));  // one weight tile
  static constexpr int kBudget = 104 * 1024;                 // two blocks per multiprocessor
  static constexpr size_t kBytes = size_t(kBudget) + 128;   // the most a launch asks for
  static_assert(kBBytes % 128 == 0, "128-byte aligned tiles");
  // The mma.sync epilogue stages each consumer warp's 32 x BN accumulators through shared
  // memory (in the stages' space, once they are consumed): channel rows of kEpiStride
  // floats, 36 = 4 (mod 32), so that the fragment writes hit 32 distinct banks.
  static constexpr int kEpiStride = 36;
  static constexpr int kEpiBytes = kConsumerWarps * BN * kEpiStride * 4;
  __host__ __device__ static constexpr int seg_bytes(int row_bytes) { return BK * row_bytes; }
  __host__ __device__ static constexpr int a_bytes(int row_bytes) {
    return Seg<T>::kCount * seg_bytes(row_bytes);
  }
  __host__ __device__ static constexpr int stage_bytes(int row_bytes, int w_taps) {
    return (a_bytes(row_bytes) + w_taps * kBBytes + 127) / 128 * 128;
  }
  __host__ __device__ static constexpr int stages(int row_bytes, int w_taps,
                                                  int budget = kBudget) {
    return budget / stage_bytes(row_bytes, w_taps) < kMaxStages
               ? budget / stage_bytes(row_bytes, w_taps)
               : kMaxStages;
  }
  // The stages a launch uses. Every tile fits in 128 registers (launch bounds), so three
  // blocks share a multiprocessor where their stages fit in kBudget3 each: twelve
  // consumer warps with two or more stages each beat eight with deeper pipelines (H200,
  // docs/kernels.md). Else two blocks, kBudget each.
  static constexpr int kBudget3 = 72 * 1024;
  __host__ __device__ static constexpr int launch_stages(int row_bytes, int w_taps) {
    return stages(row_bytes, w_taps, kBudget3) >= 2 ? stages(row_bytes, w_taps, kBudget3)
                                                    : stages(row_bytes, w_taps);
  }
};

struct TmaFpropParams {
  const void* wp;    // packed weight (see pack_weight_tma_kernel)
  const void* bias;  // (C_out,) with stride b_str, or nullptr
  void* y;           // output (N, C_out, OD, OH, OW), strides y_str
  int64_t b_str;
  int64_t y_str[5];
  int N, cig, cog, groups;
  int ci_chunks;  // cig_pad / BK
  int co_tiles;   // cog_pad / BN
  int num_phases;  // phases in the grid: stride[0] * stride[1] * w_phases
  // W phases in the grid. With w_map, only the W phases that have W taps run ("owners"),
  // in ascending order, and each also writes the bias of the tap-less W phases that
  // follow it, w_owned[i] outputs right after each of its own (the last one wrapping to
  // the next position; the first owner also writes the w_owner[0] outputs that start a
  // row). Outputs of one row then leave one block together instead of one per W phase.
  // Without w_map (more W phases than kMaxWPhases) every W phase runs. Either way, rows
  // whose D or H phase has no tap are written whole by the grid's first W phase.
  int w_map;
  int w_phases;
  int bias_rows;  // 1: rows whose D or H phase has no tap are written whole (see above)
  int w_owner[kMaxWPhases];
  int w_owned[kMaxWPhases];
  int row_bytes;  // bytes of a box row (the tensor map's box width), see tma_row_bytes
  int w_taps;     // W taps of the widest phase (weight tiles a stage holds)
  int stages;     // pipeline stages, 2..kMaxStages (see Smem::launch_stages)
  int out[3], k[3], stride[3], pad[3], dil[3];
};

struct TmaPackParams {
  const void* w;  // (C_in, Cog, KD, KH, KW), strides w_str
  void* wp;
  int64_t w_str[5];
  int cig, cog, groups;
  int ci_chunks, co_tiles;
  int k[3];
};

// ---------------------------------------------------------------------------------------
// Weight packing: Wp[g][kd][kh][kw][ci chunk][co tile][BN x BK tile in fragment order]
// ---------------------------------------------------------------------------------------
__host__ __device__ inline int64_t tma_packed_weight_elems(const TmaPackParams& p, int bn,
                                                           int bk) {
  return int64_t(p.groups) * p.k[0] * p.k[1] * p.k[2] * p.ci_chunks * p.co_tiles * bn * bk;
}

// kWgmma: each tile in the canonical K-major layout of wgmma's shared-memory operand
// without swizzle instead: per MMA K step (16 channels of a 16-bit type, 8 of float), per
// group of 8 columns n, two 8 x 16-byte core matrices (the step's two halves along K),
// each 8 rows (n) of 16 contiguous bytes: byte offset ks * BN * 32 + (n / 8) * 256 +
// half * 128 + (n % 8) * 16 + e * sizeof(T), i.e. leading (K) byte offset 128 and stride
// (N) byte offset 256 in the descriptor (see wgmma_desc). 16-bit: element e of half h is
// channel 8h + e of the step. TF32: MMA k index t is channel 2t and t + 4 is 2t + 1, as
// in the mma.sync packing, so element e of half h is channel 2e + h.
// Element i of a packed wgmma tile (BN columns, `elem_bytes`-byte elements): its channel c
// within the tile's K step block and its column n (see below).
__host__ __device__ inline void wgmma_b_element(int i, int bn, int elem_bytes, int& c, int& n) {
  const int e_row = 16 / elem_bytes;  // elements per core-matrix row
  const int e = i % e_row, row = (i / e_row) % 8, half = (i / (8 * e_row)) % 2;
  const int ng = (i / (16 * e_row)) % (bn / 8), ks = i / (2 * e_row * bn);
  n = ng * 8 + row;
  c = elem_bytes == 4 ? ks * 8 + 2 * e + half : ks * 16 + half * 8 + e;
}

template <typename T, int BN, int BK, bool kSplit = false, bool kWgmma = false>
__global__ void pack_weight_tma_kernel(TmaPackParams p) {
  constexpr int kTile = BN * BK;
  constexpr int kNPairs = BN / 16;
  const int64_t total = tma_packed_weight_elems(p, BN, BK);
  const T* w = static_cast<const T*>(p.w);
  T* wp = static_cast<T*>(p.wp);
  // One block per tile (grid-stride): its indices decoded once, its elements by the threads.
  for (int64_t t = blockIdx.x; t < total / kTile; t += gridDim.x) {
    int64_t r = t;
    const int cot = int(r % p.co_tiles); r /= p.co_tiles;
    const int cic = int(r % p.ci_chunks); r /= p.ci_chunks;
    const int kw = int(r % p.k[2]); r /= p.k[2];
    const int kh = int(r % p.k[1]); r /= p.k[1];
    const int kd = int(r % p.k[0]); r /= p.k[0];
    const int g = int(r);
    for (int i = threadIdx.x; i < kTile; i += blockDim.x) {
      const int64_t idx = t * kTile + i;
      int c, n;  // channel within the chunk, column within the tile
      if constexpr (kWgmma) {
        wgmma_b_element(i, BN, int(sizeof(T)), c, n);
      } else if constexpr (sizeof(T) == 4) {
        const int j = i % 4, lane = (i / 4) % 32, rest = i / 128;
        const int np = rest % kNPairs, ks = rest / kNPairs;
        n = np * 16 + lane / 4 + (j / 2) * 8;
        c = ks * 8 + 2 * (lane % 4) + (j % 2);
      } else {
        const int e = i % 2, j = (i / 2) % 4, lane = (i / 8) % 32, rest = i / 256;
        const int np = rest % kNPairs, ks = rest / kNPairs;
        n = np * 16 + lane / 4 + (j / 2) * 8;
        c = ks * 16 + 2 * (lane % 4) + e + (j % 2) * 8;
      }
      const int ci = cic * BK + c, co = cot * BN + n;
      float v = 0.f;
      if (ci < p.cig && co < p.cog) {
        const int64_t off = (int64_t(g) * p.cig + ci) * p.w_str[0] + co * p.w_str[1] +
                            kd * p.w_str[2] + kh * p.w_str[3] + kw * p.w_str[4];
        v = Elem<T>::to_float(w[off]);
      }
      if constexpr (sizeof(T) == 4 && !kSplit) {
        wp[idx] = __uint_as_float(to_tf32(v));
      } else {
        wp[idx] = Elem<T>::from_float(v);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// PTX wrappers (sm_90)
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Waits until the phase of `bar` with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// One 5-D box of the tensor map into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
      "r"(bar)
      : "memory");
}

// A contiguous global -> shared copy of `bytes` (a multiple of 16), completing on `bar`.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// The four consumer warps (named barrier 1; the producer warp does not take part).
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerWarps * 32) : "memory");
}

__device__ __forceinline__ uint32_t lds16(uint32_t addr) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(addr));
  return v;
}

// wgmma (sm_90a): the warpgroup's asynchronous MMA, A from registers, B from shared
// memory through a matrix descriptor.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Descriptor of a K-major, unswizzled B tile at shared address `addr` (16-byte aligned):
// core matrices 128 bytes apart along K (leading byte offset), groups of 8 columns 256
// bytes apart (stride byte offset); see pack_weight_tma_kernel.
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr) {
  return uint64_t((addr & 0x3ffffu) >> 4) | (uint64_t(128 >> 4) << 16) |
         (uint64_t(256 >> 4) << 32);
}

// d (m64 x BN, float) += a (m64 x k from registers: this warp's 16 rows, in the A layout
// of mma.m16n8k16, or m16n8k8 for TF32) * B (k x BN at descriptor `desc`); k = 16 for
// 16-bit types, 8 for TF32. Thread (warp w, lane 4g + t) holds d[4p + 2h + s] =
// D[16w + 8h + g][8p + 2t + s].
template <typename T, int BN>
struct Wgmma;

#define CONVT_WGMMA_D16                                                                   \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),     \
      "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),          \
      "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define CONVT_WGMMA_D32                                                                   \
  CONVT_WGMMA_D16, "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),       \
      "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]),       \
      "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
// OP: shape and types; IMM: scale-d (1: accumulate), scale-a, scale-b and, for 16-bit
// types, transpose-b (0: B K-major).
#define CONVT_WGMMA_N32(OP, IMM)                                                          \
  asm volatile("wgmma.mma_async.sync.aligned." OP                                          \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15},"                 \
               " {%16,%17,%18,%19}, %20, " IMM ";\n"                                       \
               : CONVT_WGMMA_D16                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc))
#define CONVT_WGMMA_N64(OP, IMM)                                                          \
  asm volatile("wgmma.mma_async.sync.aligned." OP                                          \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,"  \
               "%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"                         \
               " {%32,%33,%34,%35}, %36, " IMM ";\n"                                       \
               : CONVT_WGMMA_D32                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc))

template <>
struct Wgmma<__nv_bfloat16, 32> {
  __device__ static void run(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) {
    CONVT_WGMMA_N32("m64n32k16.f32.bf16.bf16", "1, 1, 1, 0");
  }
};
template <>
struct Wgmma<__nv_bfloat16, 64> {
  __device__ static void run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
    CONVT_WGMMA_N64("m64n64k16.f32.bf16.bf16", "1, 1, 1, 0");
  }
};
template <>
struct Wgmma<__half, 32> {
  __device__ static void run(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) {
    CONVT_WGMMA_N32("m64n32k16.f32.f16.f16", "1, 1, 1, 0");
  }
};
template <>
struct Wgmma<__half, 64> {
  __device__ static void run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
    CONVT_WGMMA_N64("m64n64k16.f32.f16.f16", "1, 1, 1, 0");
  }
};
// TF32: k8 per instruction; A registers hold TF32 bit patterns (m16n8k8 A layout).
template <>
struct Wgmma<float, 32> {
  __device__ static void run(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) {
    CONVT_WGMMA_N32("m64n32k8.f32.tf32.tf32", "1, 1, 1");
  }
};
template <>
struct Wgmma<float, 64> {
  __device__ static void run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
    CONVT_WGMMA_N64("m64n64k8.f32.tf32.tf32", "1, 1, 1");
  }
};
#undef CONVT_WGMMA_N64
#undef CONVT_WGMMA_N32
#undef CONVT_WGMMA_D32
#undef CONVT_WGMMA_D16

// ---------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------
// Tap-less outputs a block writes besides its own: `after` outputs right after each of
// its positions, and `before` outputs ahead of its first position of a row (see
// TmaFpropParams::w_map).
struct Owned {  // trivial (it lives in shared memory): initialise with {0, 0}
  int after, before;
};

// Stores v + bias at position w of a segment (output W index ow0 + w * stride_w, at
// yc[w * ys_w]) and the bias alone at the tap-less outputs the position owns (yw: the
// output's W stride, out_w: its W size).
template <typename T>
__device__ __forceinline__ void store_output(T* yc, int w, int64_t ys_w, int64_t yw, int ow0,
                                             int stride_w, int out_w, Owned own, float v,
                                             float bv) {
  T* at = yc + w * ys_w;
  *at = Elem<T>::from_float(v + bv);
  if ((own.after | own.before) != 0) {
    const T b = Elem<T>::from_float(bv);
    const int o = ow0 + w * stride_w;
    // Not unrolled: the epilogue inlines this for each of a thread's 16 to 64 outputs,
    // and unrolled loops made it thousands of stores of code.
#pragma unroll 1
    for (int j = 1; j <= own.after && o + j < out_w; ++j) at[j * yw] = b;
    if (o == own.before) {  // the row's first position: outputs 0 .. o - 1 have no owner before
#pragma unroll 1
      for (int j = 1; j <= own.before; ++j) at[-j * yw] = b;
    }
  }
}

// The consumers of fprop_tma_kernel on wgmma: the four consumer warps are one warpgroup.
// Per W tap and MMA K step of a stage, two m64 x BN x k wgmma cover the block's 128
// positions: wgmma j takes positions 64j .. 64j + 63, warp w supplies rows 16w .. 16w + 15
// of each from its A fragments (the same shifted-window loads as the mma.sync path), and
// B comes straight from the stage's weight tile. The A fragments of the next (W tap, K
// step) load while the current one's wgmma run; all complete before the stage is
// released.
template <typename T, int BN, int BK>
__device__ __forceinline__ void consume_wgmma(
    const TmaFpropParams& p, uint32_t smem_base, int seg_bytes, int a_bytes, int stage_bytes,
    int num_stages, int num_chunks, int w_count, int w_doff, uint64_t* full_bar,
    uint64_t* empty_bar, const int64_t* s_ybase, const int* s_valid, const int* s_ow0,
    const int (*s_coord)[3], const Owned* s_own) {
  using L = Smem<T, BN, BK>;
  constexpr int kSegW = Seg<T>::kW;
  constexpr int kAlign = Seg<T>::kAlign;
  constexpr int kMmaK = Mma<T>::kK;  // channels per MMA K step: 16 (16-bit), 8 (TF32)
  constexpr int kKS = BK / kMmaK;     // MMA K steps per stage and W tap
  constexpr int kD = BN / 2;    // accumulators per thread per m64 block
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int gid = lane / 4, tig = lane % 4;
  const int row_bytes = p.row_bytes;

  // Rows of wgmma j: positions 64j + 16 warp + gid (+ 8); segment and column of each.
  int seg[2];
  uint32_t a_off[2][4];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int m0 = 64 * j + 16 * warp;
    seg[j] = m0 / kSegW;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      // Register q: row g (q even) or g + 8 (q odd); 16-bit: channels 2t, 2t + 1 (+ 8 for
      // q / 2); TF32: k index t (channel 2t) or t + 4 (channel 2t + 1), see the packing.
      const int w = m0 % kSegW + gid + (q % 2) * 8;
      const int c = sizeof(T) == 4 ? 2 * tig + q / 2 : 2 * tig + (q / 2) * 8;
      a_off[j][q] = uint32_t(seg[j] * seg_bytes + c * row_bytes + w * int(sizeof(T)));
    }
  }
  int lead[2];
#pragma unroll
  for (int j = 0; j < 2; ++j)
    lead[j] = (s_coord[seg[j]][0] - (w_count - 1) * w_doff) & (kAlign - 1);

  float acc[2][kD];
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < kD; ++e) acc[j][e] = 0.f;

  int stage = 0;
  uint32_t parity = 0;
  for (int kc = 0; kc < num_chunks; ++kc) {
    mbar_wait(smem_addr(&full_bar[stage]), parity);
    const uint32_t stage_base = smem_base + uint32_t(stage * stage_bytes);
    // Items (W tap jw, K step ks), it = jw * kKS + ks: load an item's A fragments while
    // the previous item's wgmma run, in two register buffers. Before a buffer is loaded
    // again, wgmma.wait_group 1 lets all but the latest group complete: the one that read it.
    auto load = [&](uint32_t (&a)[2][4], int it) {
      const int jw = it / kKS, ks = it % kKS;
      const int shift = (w_count - 1 - jw) * w_doff;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t base = stage_base + uint32_t((lead[j] + shift) * int(sizeof(T)) +
                                                    ks * kMmaK * row_bytes);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const uint32_t addr = base + a_off[j][q];
          if constexpr (sizeof(T) == 4)
            a[j][q] = to_tf32(__uint_as_float(lds32(addr)));
          else
            a[j][q] = lds16(addr) | (lds16(addr + row_bytes) << 16);
        }
      }
    };
    auto issue = [&](const uint32_t (&a)[2][4], int it) {
      const int jw = it / kKS, ks = it % kKS;
      const uint64_t desc =
          wgmma_desc(stage_base + uint32_t(a_bytes + jw * L::kBBytes + ks * BN * 32));
      wgmma_fence();
      Wgmma<T, BN>::run(acc[0], a[0], desc);
      Wgmma<T, BN>::run(acc[1], a[1], desc);
      wgmma_commit();
    };
    const int items = w_count * kKS;
    uint32_t a0[2][4], a1[2][4];
    load(a0, 0);
    for (int it = 0; it < items; it += 2) {
      issue(a0, it);
      if (it + 1 < items) {
        wgmma_wait<1>();
        load(a1, it + 1);
        issue(a1, it + 1);
      }
      if (it + 2 < items) {
        wgmma_wait<1>();
        load(a0, it + 2);
      }
    }
    wgmma_wait<0>();
    // Every consumer thread releases the stage after its wgmma reads of it completed.
    mbar_arrive(smem_addr(&empty_bar[stage]));
    if (++stage == num_stages) {
      stage = 0;
      parity ^= 1u;
    }
  }

  // ---- epilogue: bias, convert, store ----
  const Owned own = *s_own;
  T* y = static_cast<T*>(p.y);
  const T* bias = static_cast<const T*>(p.bias);
  const int64_t ys_w = int64_t(p.stride[2]) * p.y_str[4];
  const int64_t ys_c = p.y_str[1];
  const int g = blockIdx.y;
  const int co_base = int(blockIdx.x % p.co_tiles) * BN;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int valid = s_valid[seg[j]];
    const int64_t ybase = s_ybase[seg[j]];
#pragma unroll
    for (int pn = 0; pn < BN / 8; ++pn) {
#pragma unroll
      for (int sc = 0; sc < 2; ++sc) {
        const int co = co_base + pn * 8 + 2 * tig + sc;
        if (co >= p.cog) continue;
        const int64_t cg = int64_t(g) * p.cog + co;
        const float bv = bias ? Elem<T>::to_float(bias[cg * p.b_str]) : 0.f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int w = (64 * j + 16 * warp) % kSegW + 8 * h + gid;
          if (w < valid)
            store_output(y + ybase + cg * ys_c, w, ys_w, p.y_str[4], s_ow0[seg[j]],
                         p.stride[2], p.out[2], own, acc[j][4 * pn + 2 * h + sc], bv);
        }
      }
    }
  }
}

// kSplit: float32 as split TF32 (strict float32), see implicit_gemm_fprop_sm80.cuh.
// kWgmma (TF32 and 16-bit types, sm_90a): the consumers run as one warpgroup on wgmma
// (see consume_wgmma) instead of mma.sync; B tiles are packed for it
// (pack_weight_tma_kernel).
template <typename T, int BN, int BK, bool kSplit = false, bool kWgmma = false>
__global__ void __launch_bounds__(kThreads, 3)
    fprop_tma_kernel(const __grid_constant__ CUtensorMap xmap, const TmaFpropParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using L = Smem<T, BN, BK>;
  constexpr int kSegW = Seg<T>::kW;
  constexpr int kSegs = Seg<T>::kCount;
  constexpr int kAlign = Seg<T>::kAlign;
  constexpr int kMmaK = Mma<T>::kK;
  constexpr int kNi = BN / 8;  // n8 columns per warp
  static_assert(BN % 16 == 0 && BK % kMmaK == 0, "tile shape");

  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[kMaxStages];
  __shared__ __align__(8) uint64_t empty_bar[kMaxStages];
  __shared__ int64_t s_ybase[kSegs];  // output offset of the segment's first position
  __shared__ int s_valid[kSegs];      // positions of the segment that exist (0: none)
  __shared__ int s_ow0[kSegs];        // output W index of the segment's first position
  __shared__ int s_coord[kSegs][3];   // TMA coordinates (w, h, d) of tap 0, channel 0
  __shared__ int s_ng[kSegs];         // TMA coordinate n * groups + g

  // ---- which tile, phase, group and channel tile ----
  int64_t bx = blockIdx.x;
  const int cot = int(bx % p.co_tiles);
  bx /= p.co_tiles;
  const int phase = int(bx % p.num_phases);
  const int64_t tile = bx / p.num_phases;
  const int g = blockIdx.y;
  int r[3];
  const int wi = phase % p.w_phases;  // the block's W phase in the grid
  {
    int ph = phase / p.w_phases;
    r[2] = p.w_map ? p.w_owner[wi] : wi;
    r[1] = ph % p.stride[1]; ph /= p.stride[1];
    r[0] = ph;
  }
  int Q[3];
  PhaseTaps taps[3];
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    const int s = p.stride[d];
    Q[d] = r[d] < p.out[d] ? (p.out[d] - r[d] + s - 1) / s : 0;
    taps[d] = phase_taps(r[d], s, p.pad[d], p.dil[d], p.k[d]);
  }
  const int wchunks = (Q[2] + kSegW - 1) / kSegW;
  const int64_t segs_total = int64_t(p.N) * Q[0] * Q[1] * wchunks;
  const int64_t seg0 = tile * kSegs;
  if (seg0 >= segs_total) return;  // uniform over the block
  // Rows whose D or H phase has no tap are the bias alone: the block of the grid's first
  // W phase writes them whole (every W output after each of its positions, and those
  // ahead of its first), the other W phases' blocks nothing.
  const bool bias_rows = p.bias_rows && (taps[0].count == 0 || taps[1].count == 0);
  if (bias_rows && wi != 0) return;  // uniform over the block
  __shared__ Owned s_own;  // the outputs it writes besides its own (see TmaFpropParams)

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;

  if (tid < kSegs) {
    const int64_t sg = seg0 + tid;
    if (sg < segs_total) {
      int64_t t = sg;
      const int wc = int(t % wchunks); t /= wchunks;
      const int qh = int(t % Q[1]); t /= Q[1];
      const int qd = int(t % Q[0]); t /= Q[0];
      const int n = int(t);
      const int qw0 = wc * kSegW;
      s_valid[tid] = min(kSegW, Q[2] - qw0);
      s_ow0[tid] = qw0 * p.stride[2] + r[2];
      s_ybase[tid] = n * p.y_str[0] + int64_t(qd * p.stride[0] + r[0]) * p.y_str[2] +
                     int64_t(qh * p.stride[1] + r[1]) * p.y_str[3] +
                     int64_t(qw0 * p.stride[2] + r[2]) * p.y_str[4];
      s_coord[tid][0] = qw0 + taps[2].off0;
      s_coord[tid][1] = qh + taps[1].off0;
      s_coord[tid][2] = qd + taps[0].off0;
      s_ng[tid] = n * p.groups + g;
    } else {
      s_valid[tid] = 0;
      s_ow0[tid] = 0;
      s_ybase[tid] = 0;
      s_coord[tid][0] = s_coord[tid][1] = s_coord[tid][2] = 0;
      s_ng[tid] = 0;
    }
  }
  // Stage buffers, aligned to 128 bytes.
  const uint32_t smem_base = (smem_addr(smem_raw) + 127u) & ~127u;
  const int row_bytes = p.row_bytes;
  const int seg_bytes = L::seg_bytes(row_bytes);
  const int a_bytes = L::a_bytes(row_bytes);
  const int stage_bytes = L::stage_bytes(row_bytes, p.w_taps);
  const int num_stages = p.stages;
  if (tid == 0) {
    Owned own{0, 0};
    if (bias_rows) {
      own.after = p.stride[2] - 1;
      own.before = r[2];
    } else if (p.w_map) {
      own.after = p.w_owned[wi];
      own.before = wi == 0 ? r[2] : 0;
    }
    s_own = own;
    for (int s = 0; s < num_stages; ++s) {
      mbar_init(smem_addr(&full_bar[s]), 1);
      mbar_init(smem_addr(&empty_bar[s]), kConsumerWarps * 32);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();

  // One K step per (D tap, H tap, channel block); its stage holds every W tap of it.
  const int w_count = taps[2].count, w_doff = taps[2].doff;
  const int num_chunks = w_count > 0 ? taps[0].count * taps[1].count * p.ci_chunks : 0;

  if (warp == kConsumerWarps) {
    // ---------------- producer ----------------
    if (lane == 0 && num_chunks > 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&xmap))
                   : "memory");
      int nseg = 0;
#pragma unroll
      for (int s = 0; s < kSegs; ++s) nseg += s_valid[s] > 0 ? 1 : 0;
      const uint32_t bytes = uint32_t(nseg * seg_bytes + w_count * L::kBBytes);
      const T* wbase = static_cast<const T*>(p.wp);
      int jd = 0, jh = 0, cic = 0;
      int stage = 0;
      uint32_t parity = 0;
      // The box of a segment starts at the aligned column at or before its last W tap's
      // window, which begins (w_count - 1) * doff columns before tap 0's.
      const int w_back = (w_count - 1) * w_doff;
      for (int kc = 0; kc < num_chunks; ++kc) {
        const uint32_t full = smem_addr(&full_bar[stage]);
        if (kc >= num_stages) mbar_wait(smem_addr(&empty_bar[stage]), parity ^ 1u);
        mbar_arrive_expect_tx(full, bytes);
        const uint32_t a_dst = smem_base + uint32_t(stage * stage_bytes);
        const int dh = jh * taps[1].doff, dd = jd * taps[0].doff;
#pragma unroll
        for (int s = 0; s < kSegs; ++s) {
          if (s_valid[s] > 0)
            tma_load_5d(a_dst + s * seg_bytes, &xmap, full,
                        (s_coord[s][0] - w_back) & ~(kAlign - 1), s_coord[s][1] - dh,
                        s_coord[s][2] - dd, cic * BK, s_ng[s]);
        }
        const int kd = taps[0].k0 + jd * taps[0].step;
        const int kh = taps[1].k0 + jh * taps[1].step;
        for (int jw = 0; jw < w_count; ++jw) {
          const int kw = taps[2].k0 + jw * taps[2].step;
          const int64_t tile_idx =
              ((((int64_t(g) * p.k[0] + kd) * p.k[1] + kh) * p.k[2] + kw) * p.ci_chunks +
               cic) * p.co_tiles + cot;
          bulk_load(a_dst + a_bytes + jw * L::kBBytes, wbase + tile_idx * (BN * BK),
                    uint32_t(L::kBBytes), full);
        }
        // next K step: channel chunk fastest, then H, D taps
        if (++cic == p.ci_chunks) {
          cic = 0;
          if (++jh == taps[1].count) {
            jh = 0;
            ++jd;
          }
        }
        if (++stage == num_stages) {
          stage = 0;
          parity ^= 1u;
        }
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  if constexpr (kWgmma) {
    static_assert(!kSplit, "wgmma: TF32 and 16-bit types, not split TF32");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    consume_wgmma<T, BN, BK>(p, smem_base, seg_bytes, a_bytes, stage_bytes, num_stages,
                             num_chunks, w_count, w_doff, full_bar, empty_bar, s_ybase,
                             s_valid, s_ow0, s_coord, &s_own);
#else
    __trap();  // wgmma exists on sm_90a only: CONVT_TMA_MMA=wgmma needs an sm_90a build
#endif
    return;
  } else {
  const int gid = lane / 4, tig = lane % 4;
  const int m0 = warp * 32;            // first row (position) of this warp in the tile
  const int seg = m0 / kSegW;          // the segment it lies in
  const int w0 = m0 % kSegW;           // and its first position there

  float acc[2][kNi][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kNi; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // Per-lane byte offsets of the A fragments within the segment (K step 0, shift 0):
  // register q of M tile mi holds row g (q even) or g+8 (q odd) and the k half q/2.
  uint32_t a_off[2][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int w = w0 + mi * 16 + gid + (q % 2) * 8;
      // TF32: k = t -> channel 2t, k = t+4 -> 2t+1. 16-bit: k = 2t, 2t+1 (+8 for q/2).
      const int c = sizeof(T) == 4 ? 2 * tig + q / 2 : 2 * tig + (q / 2) * 8;
      a_off[mi][q] = uint32_t(c * row_bytes + w * int(sizeof(T)));
    }
  }
  // Column of tap jw's window within the segment's box: tap w_count - 1 starts `lead`
  // columns in (the box starts at the aligned column at or before it), tap jw
  // (w_count - 1 - jw) * doff columns after that.
  const int w_last = s_coord[seg][0] - (w_count - 1) * w_doff;  // for segments that exist
  const int lead = w_last & (kAlign - 1);

  int stage = 0;
  uint32_t parity = 0;
  for (int kc = 0; kc < num_chunks; ++kc) {
    mbar_wait(smem_addr(&full_bar[stage]), parity);
    const uint32_t stage_base = smem_base + uint32_t(stage * stage_bytes);
    for (int jw = 0; jw < w_count; ++jw) {
      // Split TF32 sums each (K step, W tap) in a fresh partial accumulator (see
      // implicit_gemm_fprop_sm80.cuh).
      [[maybe_unused]] float part[2][kNi][4];
      if constexpr (kSplit) zero_acc(part);
      const int col = lead + (w_count - 1 - jw) * w_doff;
      const uint32_t a_base =
          stage_base + uint32_t(seg * seg_bytes + col * int(sizeof(T)));
      const uint32_t b_base = stage_base + uint32_t(a_bytes + jw * L::kBBytes) +
                              uint32_t(lane) * 16;
#pragma unroll
      for (int ks = 0; ks < BK / kMmaK; ++ks) {
        const uint32_t kb = a_base + uint32_t(ks * kMmaK * row_bytes);
        uint32_t a[2][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            if constexpr (sizeof(T) == 4) {
              const uint32_t v = lds32(kb + a_off[mi][q]);
              a[mi][q] = kSplit ? v : to_tf32(__uint_as_float(v));
            } else {
              const uint32_t lo = lds16(kb + a_off[mi][q]);
              const uint32_t hi = lds16(kb + a_off[mi][q] + row_bytes);
              a[mi][q] = lo | (hi << 16);
            }
          }
        }
        [[maybe_unused]] uint32_t alo[2][4], afin[2][4];  // split TF32 only
        if constexpr (kSplit) {
#pragma unroll
          for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int q = 0; q < 4; ++q) split_tf32(a[mi][q], alo[mi][q], afin[mi][q]);
        }
#pragma unroll
        for (int np = 0; np < BN / 16; ++np) {
          const uint4 bv = lds128(b_base + uint32_t((ks * (BN / 16) + np) * 32 * 16));
          uint32_t b[2][2] = {{bv.x, bv.y}, {bv.z, bv.w}};
          if constexpr (kSplit) {
            uint32_t blo[2][2], bfin[2][2];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              split_tf32(b[j][0], blo[j][0], bfin[j][0]);
              split_tf32(b[j][1], blo[j][1], bfin[j][1]);
            }
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) {
              mma_3xtf32(part[mi][2 * np], a[mi], alo[mi], afin[mi], b[0], blo[0], bfin[0]);
              mma_3xtf32(part[mi][2 * np + 1], a[mi], alo[mi], afin[mi], b[1], blo[1],
                         bfin[1]);
            }
          } else {
#pragma unroll
            for (int mi = 0; mi < 2; ++mi) {
              Mma<T>::run(acc[mi][2 * np], a[mi], b[0]);
              Mma<T>::run(acc[mi][2 * np + 1], a[mi], b[1]);
            }
          }
        }
      }
      if constexpr (kSplit) add_acc(acc, part);
    }
    // Every consumer thread releases the stage after its own last read of it.
    mbar_arrive(smem_addr(&empty_bar[stage]));
    if (++stage == num_stages) {
      stage = 0;
      parity ^= 1u;
    }
  }

  // ---- epilogue: bias, convert, store ----
  // Every consumer is done with the stages (the producer too: every stage it filled has
  // been waited for), so their space holds the staged accumulators below.
  consumers_sync();
  const int valid = s_valid[seg];
  if (valid <= w0) return;
  const Owned own = s_own;
  T* y = static_cast<T*>(p.y) + s_ybase[seg];
  const int64_t ys_w = int64_t(p.stride[2]) * p.y_str[4];
  const int64_t ys_c = p.y_str[1];
  const T* bias = static_cast<const T*>(p.bias);
  const int co_base = cot * BN;
  if ((own.after | own.before) == 0) {
    // Staged: the warp's 32 positions x BN channels into its rows of shared memory, then
    // per channel one store of the 32 positions, consecutive lanes at consecutive
    // positions (one run of 32 elements of an output row where the W stride is 1, instead
    // of eight-element pieces of four rows per store).
    float* stg = reinterpret_cast<float*>(smem_raw + (smem_base - smem_addr(smem_raw))) +
                 warp * BN * L::kEpiStride;
#pragma unroll
    for (int ni = 0; ni < kNi; ++ni)
#pragma unroll
      for (int e1 = 0; e1 < 2; ++e1)
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int e0 = 0; e0 < 2; ++e0)
            stg[(ni * 8 + 2 * tig + e1) * L::kEpiStride + mi * 16 + gid + e0 * 8] =
                acc[mi][ni][e0 * 2 + e1];
    __syncwarp();
    // Lane l holds the bias of channels l and l + 32 of the tile, shuffled out per channel.
    static_assert(BN <= 64, "two bias registers per lane");
    const int64_t cg0 = int64_t(g) * p.cog + co_base;
    float bl[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int c = i * 32 + lane;
      bl[i] = bias && c < BN && co_base + c < p.cog ? Elem<T>::to_float(bias[(cg0 + c) * p.b_str])
                                                    : 0.f;
    }
    const int w = w0 + lane;
    T* yw = y + cg0 * ys_c + w * ys_w;
    const int n_co = min(BN, p.cog - co_base);
#pragma unroll 4
    for (int c = 0; c < n_co; ++c) {
      const float bv = __shfl_sync(0xffffffffu, c < 32 ? bl[0] : bl[1], c % 32);
      if (w < valid) yw[c * ys_c] = Elem<T>::from_float(stg[c * L::kEpiStride + lane] + bv);
    }
    return;
  }
#pragma unroll
  for (int ni = 0; ni < kNi; ++ni) {
#pragma unroll
    for (int e1 = 0; e1 < 2; ++e1) {
      const int co = co_base + ni * 8 + 2 * tig + e1;
      if (co >= p.cog) continue;
      const int64_t cg = int64_t(g) * p.cog + co;
      const float bv = bias ? Elem<T>::to_float(bias[cg * p.b_str]) : 0.f;
      T* yc = y + cg * ys_c;
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int e0 = 0; e0 < 2; ++e0) {
          const int w = w0 + mi * 16 + gid + e0 * 8;
          if (w < valid)
            store_output(yc, w, ys_w, p.y_str[4], s_ow0[seg], p.stride[2], p.out[2], own,
                         acc[mi][ni][e0 * 2 + e1], bv);
        }
      }
    }
  }
  }  // !kWgmma
#endif  // __CUDA_ARCH__ >= 900
}

}  // namespace tma
}  // namespace cuda
}  // namespace convt
