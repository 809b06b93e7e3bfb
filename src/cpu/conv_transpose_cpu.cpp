// The CPU backend: transposed convolution and its gradients by direct gather loops.
//
// All four ops work on the canonical 3-D problem (src/backend.hpp) with rank-5 tensors of
// any element strides. Per spatial dimension, with stride s, padding p, dilation d:
//
//   forward      y[n, g*Cog+co, o] = b[g*Cog+co]
//                    + sum_{ci, k} x[n, g*Cig+ci, i] * w[g*Cig+ci, co, k]
//                    over the taps k with o + p - k*d = i*s and 0 <= i < L_in
//   grad_input   dx[n, g*Cig+ci, i] = sum_{co, k} dy[n, g*Cog+co, o] * w[g*Cig+ci, co, k]
//                    over the taps k with o = i*s - p + k*d and 0 <= o < L_out
//                    (an ordinary direct convolution of dy)
//   grad_weight  dw[g*Cig+ci, co, k] = sum_{n, i} x[n, g*Cig+ci, i] * dy[n, g*Cog+co, o]
//                    over the i whose o = i*s - p + k*d lies in [0, L_out)
//   grad_bias    db[c] = sum_{n, o} dy[n, c, o]
//
// Forward is computed as a gather: every output element sums the inputs that reach it, so
// no zeros are inserted and no output is written twice. The (tap, input position) pairs
// that reach each output coordinate are listed once per dimension before the main loops,
// so the inner loops do no divisibility tests. Weights are repacked once per call into
// the accumulation type with the channel the inner loop runs over stored contiguously,
// which also converts float16/bfloat16 weights only once.
//
// Accumulation: float64 in double; float32, float16 and bfloat16 in float. Long
// reductions (grad_weight, grad_bias) sum fixed-size chunks first and then the chunk sums,
// which keeps float32 rounding error low on large tensors.
//
// Threads: every op splits its outputs into disjoint ranges, one per thread, and every
// output element is summed in an order that does not depend on the split, so results are
// bit-identical for any thread count. All index arithmetic is 64-bit.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "convt/detail/host_float.hpp"

namespace convt {
namespace cpu {

namespace {

// ---------------------------------------------------------------------------------------
// Element types: how a stored value becomes an accumulator value and back.
// ---------------------------------------------------------------------------------------
struct F32 {
  using Storage = float;
  using Acc = float;
  static Acc load(Storage v) { return v; }
  static Storage store(Acc v) { return v; }
};
struct F64 {
  using Storage = double;
  using Acc = double;
  static Acc load(Storage v) { return v; }
  static Storage store(Acc v) { return v; }
};
struct F16 {
  using Storage = uint16_t;
  using Acc = float;
  static Acc load(Storage v) { return detail::fp16_to_float(v); }
  static Storage store(Acc v) { return detail::float_to_fp16(v); }
};
struct BF16 {
  using Storage = uint16_t;
  using Acc = float;
  static Acc load(Storage v) { return detail::bf16_to_float(v); }
  static Storage store(Acc v) { return detail::float_to_bf16(v); }
};

template <typename Fn>
void dispatch_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::kFloat32: fn(F32{}); return;
    case DType::kFloat64: fn(F64{}); return;
    case DType::kFloat16: fn(F16{}); return;
    case DType::kBFloat16: fn(BF16{}); return;
  }
  throw Error(ErrorKind::kNotImplemented, "convt: unsupported dtype on the CPU backend");
}

// ---------------------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------------------

// Work (multiply-adds or loads) below which a thread is not worth starting.
constexpr double kMinWorkPerThread = 1 << 16;

int resolve_threads(const ExecOptions& opt) {
  if (opt.num_threads > 0) return opt.num_threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

// Runs fn(begin, end) over disjoint contiguous ranges covering [0, items), on at most
// max_threads threads (the calling thread included), using fewer threads when `work`
// (the total cost, in multiply-adds) is too small to share out. The first exception a
// range throws is rethrown once all threads have finished.
template <typename Fn>
void parallel_for(int64_t items, double work, int max_threads, Fn&& fn) {
  if (items <= 0) return;
  int64_t threads = std::min<int64_t>(max_threads, items);
  threads = std::min<int64_t>(threads, std::max<int64_t>(1, int64_t(work / kMinWorkPerThread)));
  if (threads <= 1) {
    fn(int64_t(0), items);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto run = [&](int64_t t) {
    const int64_t begin = items * t / threads, end = items * (t + 1) / threads;
    try {
      fn(begin, end);
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  for (int64_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(run, t);
    } catch (const std::system_error&) {
      run(t);  // the system has no thread to spare: compute this range here
    }
  }
  run(0);
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// ---------------------------------------------------------------------------------------
// Geometry
// ---------------------------------------------------------------------------------------

// One tap of one spatial dimension: its share of the offset of the tap's slice in the
// packed weight, and the storage offset (in elements) of the position it pairs with in
// the tensor being gathered from. Offsets of the three dimensions add up.
struct Tap {
  int64_t k;    // kernel index times the packed-weight stride of this dimension
  int64_t off;  // position times the element stride of the gathered tensor
};

// Taps listed per coordinate of one dimension: those of coordinate c are
// taps[start[c] .. start[c+1]).
struct TapList {
  std::vector<int64_t> start;
  std::vector<Tap> taps;
  const Tap* begin(int64_t c) const { return taps.data() + start[static_cast<size_t>(c)]; }
  const Tap* end(int64_t c) const { return taps.data() + start[static_cast<size_t>(c) + 1]; }
};

// Floor division for a positive divisor.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
// Ceiling division of a non-negative number by a positive divisor.
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Forward taps of dimension d: for each output coordinate o, the kernel taps k and input
// positions i with o + pad - k*dil = i*stride and 0 <= i < in_size. `k_stride` is the
// dimension's stride in the packed weight, `x_stride` the input's element stride.
TapList forward_taps(const Problem& p, int d, int64_t out_size, int64_t k_stride,
                     int64_t x_stride) {
  const int64_t s = p.stride[d], pad = p.padding[d], dil = p.dilation[d];
  TapList l;
  l.start.reserve(static_cast<size_t>(out_size) + 1);
  for (int64_t o = 0; o < out_size; ++o) {
    l.start.push_back(static_cast<int64_t>(l.taps.size()));
    for (int64_t k = 0; k < p.kernel_size[d]; ++k) {
      const int64_t t = o + pad - k * dil;  // = i*stride for a tap that lands on o
      if (t < 0) break;                     // t only decreases with k
      if (t % s != 0) continue;
      const int64_t i = t / s;
      if (i < p.input_size[d]) l.taps.push_back({k * k_stride, i * x_stride});
    }
  }
  l.start.push_back(static_cast<int64_t>(l.taps.size()));
  return l;
}

// grad_input taps of dimension d: for each input coordinate i, the kernel taps k and
// output positions o = i*stride - pad + k*dil with 0 <= o < out_size.
TapList grad_input_taps(const Problem& p, int d, int64_t out_size, int64_t k_stride,
                        int64_t dy_stride) {
  const int64_t s = p.stride[d], pad = p.padding[d], dil = p.dilation[d];
  TapList l;
  l.start.reserve(static_cast<size_t>(p.input_size[d]) + 1);
  for (int64_t i = 0; i < p.input_size[d]; ++i) {
    l.start.push_back(static_cast<int64_t>(l.taps.size()));
    for (int64_t k = 0; k < p.kernel_size[d]; ++k) {
      const int64_t o = i * s - pad + k * dil;
      if (o >= out_size) break;  // o only grows with k
      if (o >= 0) l.taps.push_back({k * k_stride, o * dy_stride});
    }
  }
  l.start.push_back(static_cast<int64_t>(l.taps.size()));
  return l;
}

// For kernel tap k of dimension d: the input positions [lo, hi) whose output position
// o = i*stride - pad + k*dil lies in [0, out_size). Empty ranges have lo >= hi.
struct Range {
  int64_t lo, hi;
};
Range grad_weight_range(const Problem& p, int d, int64_t out_size, int64_t k) {
  const int64_t s = p.stride[d], shift = k * p.dilation[d] - p.padding[d];  // o = i*s + shift
  const int64_t lo = std::max<int64_t>(0, floor_div(-shift + s - 1, s));      // ceil(-shift/s)
  const int64_t hi = std::min<int64_t>(p.input_size[d], floor_div(out_size - 1 - shift, s) + 1);
  return {lo, std::max(lo, hi)};
}

struct Geometry {
  int64_t N, C_in, C_out, G, Cig, Cog;
  int64_t I[3], O[3], K[3];
  int64_t k_total;       // prod(K)
  int64_t k_strides[3];  // strides of (kd, kh, kw) in the flat kernel index

  explicit Geometry(const Problem& p) {
    N = p.batch;
    C_in = p.in_channels;
    C_out = p.out_channels;
    G = p.groups;
    Cig = p.in_channels_per_group();
    Cog = p.out_channels_per_group();
    for (int d = 0; d < 3; ++d) {
      I[d] = p.input_size[d];
      O[d] = p.output_size(d);
      K[d] = p.kernel_size[d];
    }
    k_total = K[0] * K[1] * K[2];
    k_strides[0] = K[1] * K[2];
    k_strides[1] = K[2];
    k_strides[2] = 1;
  }
};

// Element offset of (a, b, d, h, w) in a rank-5 tensor.
inline int64_t offset5(const TensorRef& t, int64_t a, int64_t b, int64_t d, int64_t h,
                       int64_t w) {
  return a * t.strides[0] + b * t.strides[1] + d * t.strides[2] + h * t.strides[3] +
         w * t.strides[4];
}

// The weight converted to the accumulation type and reordered so that the channel named
// last is contiguous:
//   kOutInner: packed[(k*C_in + c_in)*Cog + co]              (forward)
//   kInInner:  packed[((k*G + g)*Cog + co)*Cig + ci]         (grad_input)
enum class Pack { kOutInner, kInInner };

template <typename T>
std::vector<typename T::Acc> pack_weight(const Geometry& g, const TensorRef& w, Pack order,
                                         int max_threads) {
  using Acc = typename T::Acc;
  const auto* wp = static_cast<const typename T::Storage*>(w.data);
  std::vector<Acc> packed(static_cast<size_t>(g.k_total * g.C_in * g.Cog));
  // One item per input channel: its Cog x k_total weights.
  parallel_for(g.C_in, double(packed.size()), max_threads, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t grp = g.Cig > 0 ? c / g.Cig : 0, ci = c - grp * g.Cig;
      for (int64_t co = 0; co < g.Cog; ++co)
        for (int64_t kd = 0; kd < g.K[0]; ++kd)
          for (int64_t kh = 0; kh < g.K[1]; ++kh)
            for (int64_t kw = 0; kw < g.K[2]; ++kw) {
              const int64_t k = (kd * g.K[1] + kh) * g.K[2] + kw;
              const int64_t dst = order == Pack::kOutInner
                                      ? (k * g.C_in + c) * g.Cog + co
                                      : ((k * g.G + grp) * g.Cog + co) * g.Cig + ci;
              packed[static_cast<size_t>(dst)] = T::load(wp[offset5(w, c, co, kd, kh, kw)]);
            }
    }
  });
  return packed;
}

// acc[0..n) += a * v[0..n). Depthwise problems call it with n = 1 in their innermost
// loop, which the general loop would run with much overhead.
template <typename Acc>
inline void axpy(Acc* __restrict acc, const Acc* __restrict v, Acc a, int64_t n) {
  if (n == 1) {
    acc[0] += a * v[0];
    return;
  }
  for (int64_t j = 0; j < n; ++j) acc[j] += a * v[j];
}

// Positions along W that one work item of forward / grad_input computes together: enough
// that each channel's row segment is read and written as whole cache lines (NCHW tensors
// whose channel stride is a power of two would otherwise hit one cache set with every
// channel), few enough that the tile's accumulators stay in cache.
int64_t tile_width(int64_t width, int64_t channels) {
  return std::clamp<int64_t>(std::min<int64_t>(32, 8192 / std::max<int64_t>(channels, 1)), 1,
                             std::max<int64_t>(width, 1));
}

// ---------------------------------------------------------------------------------------
// forward
// ---------------------------------------------------------------------------------------
template <typename T>
void forward_impl(const Problem& p, const TensorRef& x, const TensorRef& w, const TensorRef* b,
                  const TensorRef& y, int max_threads) {
  using Acc = typename T::Acc;
  using S = typename T::Storage;
  const Geometry g(p);
  const auto* xp = static_cast<const S*>(x.data);
  auto* yp = static_cast<S*>(y.data);

  const std::vector<Acc> wpk = pack_weight<T>(g, w, Pack::kOutInner, max_threads);
  std::vector<Acc> bias(static_cast<size_t>(g.C_out), Acc(0));
  if (b) {
    const auto* bp = static_cast<const S*>(b->data);
    for (int64_t c = 0; c < g.C_out; ++c)
      bias[static_cast<size_t>(c)] = T::load(bp[c * b->strides[0]]);
  }
  // Tap.k is the offset of the tap's (C_in x Cog) slice in the packed weight.
  const int64_t k_slice = g.C_in * g.Cog;
  TapList taps[3];
  for (int d = 0; d < 3; ++d)
    taps[d] = forward_taps(p, d, g.O[d], g.k_strides[d] * k_slice, x.strides[2 + d]);

  // Items are (n, od, oh, tile of ow); each computes every channel of its positions, in
  // acc[(ow - ow0)*C_out + c]. Each output sums over (kd, kh), then input channels, then kw.
  const int64_t tw = tile_width(g.O[2], g.C_out), tiles = ceil_div(g.O[2], tw);
  const int64_t items = g.N * g.O[0] * g.O[1] * tiles;
  const double work = double(g.N) * double(g.C_in) * double(g.Cog) * double(g.k_total) *
                      double(g.I[0] * g.I[1] * g.I[2]);
  parallel_for(items, work, max_threads, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(static_cast<size_t>(tw * g.C_out));
    for (int64_t item = begin; item < end; ++item) {
      int64_t r = item;
      const int64_t tile = r % tiles; r /= tiles;
      const int64_t oh = r % g.O[1]; r /= g.O[1];
      const int64_t od = r % g.O[0];
      const int64_t n = r / g.O[0];
      const int64_t ow0 = tile * tw, ow1 = std::min(g.O[2], ow0 + tw);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (const Tap* td = taps[0].begin(od); td != taps[0].end(od); ++td)
        for (const Tap* th = taps[1].begin(oh); th != taps[1].end(oh); ++th) {
          const S* x_dh = xp + n * x.strides[0] + td->off + th->off;
          const Acc* w_dh = wpk.data() + td->k + th->k;
          for (int64_t grp = 0; grp < g.G; ++grp)
            for (int64_t ci = 0; ci < g.Cig; ++ci) {
              const int64_t c = grp * g.Cig + ci;
              const S* xc = x_dh + c * x.strides[1];
              const Acc* wc = w_dh + c * g.Cog;
              Acc* a = acc.data() + grp * g.Cog;
              for (int64_t ow = ow0; ow < ow1; ++ow, a += g.C_out)
                for (const Tap* t = taps[2].begin(ow); t != taps[2].end(ow); ++t)
                  axpy(a, wc + t->k, T::load(xc[t->off]), g.Cog);
            }
        }
      S* yo = yp + offset5(y, n, 0, od, oh, 0);
      for (int64_t c = 0; c < g.C_out; ++c) {
        const Acc bc = bias[static_cast<size_t>(c)];
        for (int64_t ow = ow0; ow < ow1; ++ow)
          yo[c * y.strides[1] + ow * y.strides[4]] =
              T::store(acc[static_cast<size_t>((ow - ow0) * g.C_out + c)] + bc);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------
// grad_input
// ---------------------------------------------------------------------------------------
template <typename T>
void grad_input_impl(const Problem& p, const TensorRef& dy, const TensorRef& w,
                     const TensorRef& dx, int max_threads) {
  using Acc = typename T::Acc;
  using S = typename T::Storage;
  const Geometry g(p);
  const auto* dyp = static_cast<const S*>(dy.data);
  auto* dxp = static_cast<S*>(dx.data);

  const std::vector<Acc> wpk = pack_weight<T>(g, w, Pack::kInInner, max_threads);
  // Tap.k is the offset of the tap's (G x Cog x Cig) slice in the packed weight.
  const int64_t k_slice = g.C_in * g.Cog;
  TapList taps[3];
  for (int d = 0; d < 3; ++d)
    taps[d] = grad_input_taps(p, d, g.O[d], g.k_strides[d] * k_slice, dy.strides[2 + d]);

  // Items are (n, id, ih, tile of iw); each computes every channel of its positions, in
  // acc[(iw - iw0)*C_in + c]. Each element sums over (kd, kh), then output channels, then kw.
  const int64_t tw = tile_width(g.I[2], g.C_in), tiles = ceil_div(g.I[2], tw);
  const int64_t items = g.N * g.I[0] * g.I[1] * tiles;
  const double work = double(g.N) * double(g.C_in) * double(g.Cog) * double(g.k_total) *
                      double(g.I[0] * g.I[1] * g.I[2]);
  parallel_for(items, work, max_threads, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(static_cast<size_t>(tw * g.C_in));
    for (int64_t item = begin; item < end; ++item) {
      int64_t r = item;
      const int64_t tile = r % tiles; r /= tiles;
      const int64_t ih = r % g.I[1]; r /= g.I[1];
      const int64_t id = r % g.I[0];
      const int64_t n = r / g.I[0];
      const int64_t iw0 = tile * tw, iw1 = std::min(g.I[2], iw0 + tw);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (const Tap* td = taps[0].begin(id); td != taps[0].end(id); ++td)
        for (const Tap* th = taps[1].begin(ih); th != taps[1].end(ih); ++th) {
          const S* dy_dh = dyp + n * dy.strides[0] + td->off + th->off;
          const Acc* w_dh = wpk.data() + td->k + th->k;
          for (int64_t grp = 0; grp < g.G; ++grp)
            for (int64_t co = 0; co < g.Cog; ++co) {
              const S* dyc = dy_dh + (grp * g.Cog + co) * dy.strides[1];
              const Acc* wc = w_dh + (grp * g.Cog + co) * g.Cig;
              Acc* a = acc.data() + grp * g.Cig;
              for (int64_t iw = iw0; iw < iw1; ++iw, a += g.C_in)
                for (const Tap* t = taps[2].begin(iw); t != taps[2].end(iw); ++t)
                  axpy(a, wc + t->k, T::load(dyc[t->off]), g.Cig);
            }
        }
      S* xo = dxp + offset5(dx, n, 0, id, ih, 0);
      for (int64_t c = 0; c < g.C_in; ++c)
        for (int64_t iw = iw0; iw < iw1; ++iw)
          xo[c * dx.strides[1] + iw * dx.strides[4]] =
              T::store(acc[static_cast<size_t>((iw - iw0) * g.C_in + c)]);
    }
  });
}

// ---------------------------------------------------------------------------------------
// grad_weight
// ---------------------------------------------------------------------------------------

// Positions summed into a partial sum before it is added to the running total.
constexpr int64_t kChunk = 256;

template <typename T>
void grad_weight_impl(const Problem& p, const TensorRef& x, const TensorRef& dy,
                      const TensorRef& dw, int max_threads) {
  using Acc = typename T::Acc;
  using S = typename T::Storage;
  const Geometry g(p);
  const auto* xp = static_cast<const S*>(x.data);
  const auto* dyp = static_cast<const S*>(dy.data);
  auto* dwp = static_cast<S*>(dw.data);

  // Items are (kernel tap, group, block of input channels of the group); each sums its
  // block x Cog weights over the batch and the positions the tap reaches. The block size
  // only decides how work is shared out: every weight is summed in the same order.
  // Blocks aim at about 4 items per thread, with at most 64 channels (and 8192
  // accumulators) each.
  const int64_t tap_groups = g.k_total * g.G;
  const int64_t want_blocks = ceil_div(4 * int64_t(max_threads), tap_groups);
  const int64_t max_block = std::clamp<int64_t>(8192 / std::max<int64_t>(g.Cog, 1), 1, 64);
  const int64_t block = std::clamp<int64_t>(ceil_div(g.Cig, want_blocks), 1, max_block);
  const int64_t blocks = ceil_div(g.Cig, block);
  const int64_t items = tap_groups * blocks;
  const double work = double(g.N) * double(g.C_in) * double(g.Cog) * double(g.k_total) *
                      double(g.I[0] * g.I[1] * g.I[2]);

  parallel_for(items, work, max_threads, [&](int64_t begin, int64_t end) {
    std::vector<Acc> total(static_cast<size_t>(block * g.Cog));
    std::vector<Acc> part(static_cast<size_t>(block * g.Cog));
    std::vector<Acc> dyv(static_cast<size_t>(g.Cog));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t blk = item % blocks;
      const int64_t grp = (item / blocks) % g.G;
      const int64_t k = item / (blocks * g.G);
      const int64_t kd = k / (g.K[1] * g.K[2]), kh = (k / g.K[2]) % g.K[1], kw = k % g.K[2];
      const int64_t ci0 = blk * block, nci = std::min(block, g.Cig - ci0);
      const int64_t c0 = grp * g.Cig + ci0;  // first input channel of the block
      const Range rd = grad_weight_range(p, 0, g.O[0], kd);
      const Range rh = grad_weight_range(p, 1, g.O[1], kh);
      const Range rw = grad_weight_range(p, 2, g.O[2], kw);
      // o = i*stride + shift per dimension
      const int64_t sh[3] = {kd * p.dilation[0] - p.padding[0], kh * p.dilation[1] - p.padding[1],
                             kw * p.dilation[2] - p.padding[2]};
      std::fill(total.begin(), total.end(), Acc(0));
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t id = rd.lo; id < rd.hi; ++id)
          for (int64_t ih = rh.lo; ih < rh.hi; ++ih)
            for (int64_t iw0 = rw.lo; iw0 < rw.hi; iw0 += kChunk) {
              const int64_t iw1 = std::min(rw.hi, iw0 + kChunk);
              std::fill(part.begin(), part.end(), Acc(0));
              for (int64_t iw = iw0; iw < iw1; ++iw) {
                const S* dyo = dyp + offset5(dy, n, grp * g.Cog, id * p.stride[0] + sh[0],
                                             ih * p.stride[1] + sh[1], iw * p.stride[2] + sh[2]);
                for (int64_t co = 0; co < g.Cog; ++co)
                  dyv[static_cast<size_t>(co)] = T::load(dyo[co * dy.strides[1]]);
                const S* xo = xp + offset5(x, n, c0, id, ih, iw);
                for (int64_t ci = 0; ci < nci; ++ci)
                  axpy(part.data() + ci * g.Cog, dyv.data(), T::load(xo[ci * x.strides[1]]), g.Cog);
              }
              for (size_t j = 0; j < part.size(); ++j) total[j] += part[j];
            }
      for (int64_t ci = 0; ci < nci; ++ci)
        for (int64_t co = 0; co < g.Cog; ++co)
          dwp[offset5(dw, c0 + ci, co, kd, kh, kw)] =
              T::store(total[static_cast<size_t>(ci * g.Cog + co)]);
    }
  });
}

// ---------------------------------------------------------------------------------------
// grad_bias
// ---------------------------------------------------------------------------------------
template <typename T>
void grad_bias_impl(const Problem& p, const TensorRef& dy, const TensorRef& db, int max_threads) {
  using Acc = typename T::Acc;
  using S = typename T::Storage;
  const Geometry g(p);
  const auto* dyp = static_cast<const S*>(dy.data);
  auto* dbp = static_cast<S*>(db.data);

  // Items are blocks of channels. Every channel sums its positions in the same order, in
  // chunks along W, whatever the block size and the loop order below.
  const int64_t positions = g.N * g.O[0] * g.O[1] * g.O[2];
  const int64_t block = std::clamp<int64_t>(ceil_div(g.C_out, max_threads), 1, 64);
  const int64_t blocks = ceil_div(g.C_out, block);
  // Channels [c0, c0 + nc) with positions in the outer loop and channels in the inner one.
  auto sum_channels = [&](int64_t c0, int64_t nc, Acc* total, Acc* part) {
    std::fill(total, total + nc, Acc(0));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t od = 0; od < g.O[0]; ++od)
        for (int64_t oh = 0; oh < g.O[1]; ++oh)
          for (int64_t ow0 = 0; ow0 < g.O[2]; ow0 += kChunk) {
            const int64_t ow1 = std::min(g.O[2], ow0 + kChunk);
            std::fill(part, part + nc, Acc(0));
            for (int64_t ow = ow0; ow < ow1; ++ow) {
              const S* row = dyp + offset5(dy, n, c0, od, oh, ow);
              for (int64_t c = 0; c < nc; ++c) part[c] += T::load(row[c * dy.strides[1]]);
            }
            for (int64_t c = 0; c < nc; ++c) total[c] += part[c];
          }
    for (int64_t c = 0; c < nc; ++c) dbp[(c0 + c) * db.strides[0]] = T::store(total[c]);
  };
  // Channels innermost where they are closer in memory than W neighbours (channels_last);
  // otherwise one channel at a time, which reads its rows contiguously.
  const bool channels_inner = dy.strides[1] <= dy.strides[4];
  parallel_for(blocks, double(positions) * double(g.C_out), max_threads,
               [&](int64_t begin, int64_t end) {
    std::vector<Acc> total(static_cast<size_t>(block)), part(static_cast<size_t>(block));
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t c0 = blk * block, nc = std::min(block, g.C_out - c0);
      if (channels_inner) {
        sum_channels(c0, nc, total.data(), part.data());
      } else {
        for (int64_t c = c0; c < c0 + nc; ++c) sum_channels(c, 1, total.data(), part.data());
      }
    }
  });
}

}  // namespace

void forward(const Problem& p, const TensorRef& x, const TensorRef& w, const TensorRef* b,
             const TensorRef& y, const ExecOptions& opt) {
  dispatch_dtype(p.dtype, [&](auto t) {
    forward_impl<decltype(t)>(p, x, w, b, y, resolve_threads(opt));
  });
}

void grad_input(const Problem& p, const TensorRef& dy, const TensorRef& w, const TensorRef& dx,
                const ExecOptions& opt) {
  dispatch_dtype(p.dtype, [&](auto t) {
    grad_input_impl<decltype(t)>(p, dy, w, dx, resolve_threads(opt));
  });
}

void grad_weight(const Problem& p, const TensorRef& x, const TensorRef& dy, const TensorRef& dw,
                 const ExecOptions& opt) {
  dispatch_dtype(p.dtype, [&](auto t) {
    grad_weight_impl<decltype(t)>(p, x, dy, dw, resolve_threads(opt));
  });
}

void grad_bias(const Problem& p, const TensorRef& dy, const TensorRef& db, const ExecOptions& opt) {
  dispatch_dtype(p.dtype, [&](auto t) {
    grad_bias_impl<decltype(t)>(p, dy, db, resolve_threads(opt));
  });
}

}  // namespace cpu
}  // namespace convt
