// convt/cuda/implicit_gemm_fprop_halo_sm80.cuh — the implicit-GEMM forward with input
// reuse across the taps of the innermost (W) dimension.
//
// Same decomposition as implicit_gemm_fprop_sm80.cuh (phases, one GEMM per phase and
// group: M = output channels, N = output positions, K = taps x input channels), but the
// block's 128 positions are R rows of Wt consecutive positions along W (R = 128 / Wt), and
// within a phase the W taps j = 0 .. Tw-1 read input columns q + off0 - j*doff. So for one
// (d tap, h tap, block of input channels) the block gathers, once, a strip of
// Wt + (Tw-1)*doff input columns per row into shared memory, stored position-major
// ([strip position][channel], channels contiguous), and every W tap is then a GEMM step on a
// window of that strip shifted by (Tw-1-j)*doff rows: Tw times fewer global loads than one
// gather per tap. Fragments of the shifted windows come from per-lane row addresses
// (ldmatrix for FP16/BF16, scalar loads for TF32), so any shift and any row mapping work.
//
// The weight tiles of all Tw taps (packed as for the gather kernel) arrive by cp.async;
// the strip goes through registers (any strides, zero outside the input). Two shared-memory
// stages: the loads of step s+1 are in flight during the MMAs of step s.
//
// The host picks Wt and R so that the strip has at most 128 rows, R * (Wt + (Tw-1)*doff)
// <= 128: every strip row is gathered by two threads (one for each half of the channels).
// Where the halo alone would exceed that, the gather kernel runs instead.
#pragma once

#include <cstdint>

#include "convt/cuda/implicit_gemm_fprop_sm80.cuh"

namespace convt {
namespace cuda {
namespace igemm {

constexpr int kMaxStripRows = kBlockN;

struct HaloParams {
  FpropParams f;
  int wt;         // positions per row of the block's tile (<= 128)
  int rows;       // R = rows per tile
  int col_segs;   // tiles along W per row group (of the largest phase)
  int row_groups; // tiles along (n, d, h) rows (of the largest phase)
  int tw_max;     // most W taps of any phase
  int strip_rows_max;  // R * (Wt + (tw_max-1)*doff): strip rows one stage holds
};

template <typename T, int BK>
struct HaloSmem {
  static constexpr int kAStride = kBlockM + kPad;               // per k-row of A
  static constexpr int kBStride = BK + (sizeof(T) == 4 ? 4 : 8); // per strip row of B
  // Bytes of one stage with tw taps and `rows` strip rows.
  __host__ __device__ static size_t a_stage(int tw) { return size_t(tw) * BK * kAStride; }
  __host__ __device__ static size_t b_stage(int rows) { return size_t(rows) * kBStride; }
  __host__ __device__ static size_t bytes(int tw, int rows) {
    return 2 * (a_stage(tw) + b_stage(rows)) * sizeof(T);
  }
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit_wait() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// kSplit: float32 as split TF32 (strict float32), see implicit_gemm_fprop_sm80.cuh (one
// block per multiprocessor: its fragments and partial sums need more registers).
template <typename T, int BK, typename Index, bool kSplit = false>
__global__ void __launch_bounds__(kThreads, kSplit ? 1 : 2) fprop_halo_kernel(HaloParams hp) {
  const FpropParams& p = hp.f;
  using L = HaloSmem<T, BK>;
  constexpr bool kTf32 = sizeof(T) == 4;
  // Strip gather: each thread owns one strip row and kRegs registers of its channels:
  // single channels (TF32) or channel pairs packed in 32 bits (FP16/BF16).
  constexpr int kPerReg = kTf32 ? 1 : 2;
  constexpr int kRegs = BK / (2 * kPerReg);  // 2 = threads sharing a strip row
  static_assert(BK % Mma<T>::kK == 0, "BK must be a multiple of the MMA K");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ Index s_yoff[kBlockN];

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = (warp / 4) * 32;
  const int warp_n = (warp % 4) * 32;
  const int gid = lane / 4, tig = lane % 4;

  // ---- phase, group, channel tile, position tile ----
  const int64_t phase = blockIdx.x % p.num_phases;
  const int64_t tile = blockIdx.x / p.num_phases;
  const int cseg = int(tile % hp.col_segs);
  const int64_t rgroup = tile / hp.col_segs;
  const int64_t g = blockIdx.y / p.co_tiles;
  const int64_t co0 = (blockIdx.y % p.co_tiles) * kBlockM;
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
  const int R = hp.rows, Wt = hp.wt;
  const int64_t NR = p.N * Q[0] * Q[1];  // rows (n, q_d, q_h) of this phase
  const int64_t row0 = rgroup * R;
  const int q0 = cseg * Wt;
  if (row0 >= NR || q0 >= Q[2]) return;
  const int Tw = taps[2].count;
  const int halo = Tw > 0 ? (Tw - 1) * taps[2].doff : 0;
  const int SW = Wt + halo;  // strip columns per row
  const int strip_rows = R * SW;

  T* As = reinterpret_cast<T*>(smem_raw);
  T* Bs = As + 2 * L::a_stage(hp.tw_max);
  const size_t b_stage = L::b_stage(hp.strip_rows_max);

  // ---- output offsets of the 128 GEMM columns (n -> row n / Wt, column n % Wt) ----
  if (tid < kBlockN) {
    const int rr = tid / Wt, cc = tid % Wt;
    const int64_t row = row0 + rr;
    Index yo = Index(-1);
    if (rr < R && row < NR && q0 + cc < Q[2]) {
      int64_t t = row;
      const int qh = int(t % Q[1]); t /= Q[1];
      const int qd = int(t % Q[0]); t /= Q[0];
      yo = Index(t * p.y_str[0] + (int64_t(qd) * p.stride[0] + r[0]) * p.y_str[2] +
                 (int64_t(qh) * p.stride[1] + r[1]) * p.y_str[3] +
                 (int64_t(q0 + cc) * p.stride[2] + r[2]) * p.y_str[4]);
    }
    s_yoff[tid] = yo;
  }

  // ---- this thread's strip row: (row, input column) and the row's batch offset ----
  const Index xs_c = Index(p.x_str[1]), xs_d = Index(p.x_str[2]), xs_h = Index(p.x_str[3]),
              xs_w = Index(p.x_str[4]);
  const T* xg = static_cast<const T*>(p.x) + g * p.cig * p.x_str[1];
  const int chan0 = (tid / kBlockN) * kPerReg;  // first channel of this thread in a block
  const int my_row = tid % kBlockN;
  Index srow_base = 0;
  int srow_qd = 0, srow_qh = 0;
  bool srow_ok = false;
  {
    const int rr = my_row / SW, cc = my_row % SW;
    const int64_t row = row0 + rr;
    if (my_row < strip_rows && row < NR) {
      int64_t t = row;
      srow_qh = int(t % Q[1]); t /= Q[1];
      srow_qd = int(t % Q[0]); t /= Q[0];
      const int iw = q0 + cc + taps[2].off0 - halo;  // input column of strip column cc
      srow_ok = iw >= 0 && iw < p.in[2];
      srow_base = Index(t * p.x_str[0]) + Index(iw) * xs_w;
    }
  }

  // ---- per-lane strip rows of the B fragments (before the tap shift) ----
  // FP16/BF16 (ldmatrix.x4, two n8 tiles per load): row of column warp_n + nj*16 + lrow.
  // TF32 (scalar loads): row of column warp_n + ni*8 + gid.
  int frag_row[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int n;
    if constexpr (kTf32) {
      n = warp_n + i * 8 + gid;
    } else {
      n = warp_n + (i & 1) * 16 + (lane & 7) + ((lane >> 4) << 3);
    }
    const int rr = n / Wt, cc = n % Wt;
    frag_row[i] = rr < R ? rr * SW + cc : 0;  // columns past the tile read row 0 (discarded)
  }

  const int ci_tiles = int(p.cig_pad / BK);
  const int steps = taps[0].count * taps[1].count * ci_tiles;

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  uint32_t b_reg[kRegs];

  auto decode = [&](int s, int& jd, int& jh, int& ci0) {
    const int tap = s / ci_tiles;
    ci0 = (s - tap * ci_tiles) * BK;
    jh = tap % taps[1].count;
    jd = tap / taps[1].count;
  };

  // Weight tiles of all W taps of step s -> shared stage `st` (cp.async, 16-byte vectors).
  auto issue_a = [&](int s, int st) {
    int jd, jh, ci0;
    decode(s, jd, jh, ci0);
    const int64_t kd = taps[0].k0 + int64_t(jd) * taps[0].step;
    const int64_t kh = taps[1].k0 + int64_t(jh) * taps[1].step;
    const T* wsrc = static_cast<const T*>(p.wp) +
                    g * p.k[0] * p.k[1] * p.k[2] * p.cig_pad * p.cog_pad + co0 +
                    ((kd * p.k[1] + kh) * p.k[2]) * p.cig_pad * p.cog_pad + ci0 * p.cog_pad;
    T* as = As + st * L::a_stage(hp.tw_max);
    constexpr int kVec = 16 / int(sizeof(T));
    constexpr int kVecPerRow = kBlockM / kVec;
    const int total = Tw * BK * kVecPerRow;
    for (int v = tid; v < total; v += kThreads) {
      const int j = v / (BK * kVecPerRow);
      const int rem = v - j * BK * kVecPerRow;
      const int row = rem / kVecPerRow, col = (rem % kVecPerRow) * kVec;
      const int64_t kw = taps[2].k0 + int64_t(j) * taps[2].step;
      cp_async16(as + (j * BK + row) * L::kAStride + col,
                 wsrc + (kw * p.cig_pad + row) * p.cog_pad + col);
    }
  };

  // Strip of step s -> registers.
  auto load_b = [&](int s) {
    int jd, jh, ci0;
    decode(s, jd, jh, ci0);
    const int dd = taps[0].off0 - jd * taps[0].doff;
    const int dh = taps[1].off0 - jh * taps[1].doff;
    const bool full = ci0 + BK <= p.cig;
    const int id = srow_qd + dd, ih = srow_qh + dh;
    const bool ok = srow_ok && id >= 0 && id < p.in[0] && ih >= 0 && ih < p.in[1];
    Index off = srow_base + Index(id) * xs_d + Index(ih) * xs_h + Index(ci0 + chan0) * xs_c;
    const Index step = Index(2 * kPerReg) * xs_c;
#pragma unroll
    for (int i = 0; i < kRegs; ++i, off += step) {
      const int ci = ci0 + chan0 + i * 2 * kPerReg;
      if constexpr (kTf32) {
        const float v = (ok && (full || ci < p.cig)) ? xg[off] : 0.f;
        b_reg[i] = kSplit ? __float_as_uint(v) : to_tf32(v);
      } else {
        const T zero = Elem<T>::from_float(0.f);
        const T v0 = (ok && (full || ci < p.cig)) ? xg[off] : zero;
        const T v1 = (ok && (full || ci + 1 < p.cig)) ? xg[off + xs_c] : zero;
        b_reg[i] = uint32_t(reinterpret_cast<const uint16_t&>(v0)) |
                   (uint32_t(reinterpret_cast<const uint16_t&>(v1)) << 16);
      }
    }
  };

  auto store_b = [&](int st) {
    if (my_row >= strip_rows) return;
    T* bs = Bs + st * b_stage + my_row * L::kBStride + chan0;
#pragma unroll
    for (int i = 0; i < kRegs; ++i)
      *reinterpret_cast<uint32_t*>(bs + i * 2 * kPerReg) = b_reg[i];
  };

  auto compute = [&](int st) {
    const T* as_all = As + st * L::a_stage(hp.tw_max);
    const T* bs = Bs + st * b_stage;
    // Split TF32 sums each (W tap, K tile) in a fresh partial accumulator (see
    // implicit_gemm_fprop_sm80.cuh).
    [[maybe_unused]] float part[2][4][4];
    for (int j = 0; j < Tw; ++j) {
      const T* as = as_all + j * BK * L::kAStride;
      const int shift = (Tw - 1 - j) * taps[2].doff;
      if constexpr (kSplit) zero_acc(part);
#pragma unroll
      for (int kk = 0; kk < BK; kk += Mma<T>::kK) {
        uint32_t a[2][4], b[4][2];
        load_a_fragments<T>(a, as, L::kAStride, kk, warp_m, lane);
        if constexpr (kTf32) {
          const float* bf = reinterpret_cast<const float*>(bs);
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) {
            const float* row = bf + (frag_row[ni] + shift) * L::kBStride + kk;
            b[ni][0] = __float_as_uint(row[tig]);
            b[ni][1] = __float_as_uint(row[tig + 4]);
          }
        } else {
#pragma unroll
          for (int nj = 0; nj < 2; ++nj) {
            // matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
            const int kcol = kk + ((lane >> 3) & 1) * 8;
            uint32_t t4[4];
            ldmatrix_x4(t4, bs + (frag_row[nj] + shift) * L::kBStride + kcol);
            b[2 * nj][0] = t4[0];
            b[2 * nj][1] = t4[1];
            b[2 * nj + 1][0] = t4[2];
            b[2 * nj + 1][1] = t4[3];
          }
        }
        if constexpr (kSplit)
          warp_mma<T, kSplit>(part, a, b);
        else
          warp_mma<T, kSplit>(acc, a, b);
      }
      if constexpr (kSplit) add_acc(acc, part);
    }
  };

  if (steps > 0 && Tw > 0) {
    issue_a(0, 0);
    load_b(0);
    store_b(0);
    cp_async_commit_wait();
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
      const int st = s & 1;
      const bool more = s + 1 < steps;
      if (more) {
        issue_a(s + 1, st ^ 1);
        load_b(s + 1);
      }
      compute(st);
      if (more) {
        store_b(st ^ 1);
        cp_async_commit_wait();
      }
      __syncthreads();
    }
  }

  // ---- epilogue: bias, convert, store ----
  __syncthreads();  // s_yoff (also when the K loop was empty)
  store_accumulators<T, Index>(acc, p, s_yoff, g, co0, warp_m, warp_n, lane);
}

}  // namespace igemm
}  // namespace cuda
}  // namespace convt
