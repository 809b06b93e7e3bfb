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
