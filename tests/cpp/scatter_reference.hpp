// A naive float64 reference for transposed convolution and its gradients, written as a
// scatter: every input element, paired with every kernel tap, adds its product to the
// output element it lands on,
//
//   y[n, g*Cog + co, i*stride - padding + k*dilation] += x[n, g*Cig + ci, i] * w[g*Cig + ci, co, k]
//
// (per spatial dimension; contributions landing outside the output are dropped), then the
// bias is added. This is the textbook definition of the op, independent of the gather
// formulation the backends use. The gradients are the exact adjoints of the same loop:
// the one enumeration of (n, ci, i, co, k, o) drives all four functions.
//
// The functions take the user-visible problem (tensors of rank spatial_dims + 2, bias of
// rank 1), read tensors of any layout and dtype through HostTensor::get, compute in
// double, and write every element of the output through HostTensor::set. Pass a float64
// output tensor for an exact reference; an output of another dtype receives the double
// result rounded once. Cost: N * C_in * C_out/groups * prod(kernel) * prod(input) steps,
// so keep problems small.
#pragma once

#include <cstdint>
#include <vector>

#include "test_util.hpp"

namespace convt {
namespace test {

namespace scatter_detail {

// The tensor's elements in row-major logical order, as doubles.
inline std::vector<double> values(const HostTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get(i);
  return v;
}

inline void write(HostTensor& t, const std::vector<double>& v) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, v[static_cast<size_t>(i)]);
}

// Calls fn(xi, wi, yi) for every (input element, kernel tap, output channel) whose tap
// lands inside the output, with the row-major linear indices of the input, weight and
// output elements involved. Inserting size-1 dimensions does not change a row-major
// linear index, so the canonical 3-D form serves problems of any rank.
template <typename Fn>
void for_each_contribution(const Problem& user_problem, Fn&& fn) {
  const Problem p = user_problem.canonical3d();
  const int64_t cig = p.in_channels_per_group(), cog = p.out_channels_per_group();
  const Dims out = p.output_sizes();
  const Dims& in = p.input_size;
  const Dims& ks = p.kernel_size;
  const int64_t in_sp = in[0] * in[1] * in[2], out_sp = out[0] * out[1] * out[2];
  const int64_t k_sp = ks[0] * ks[1] * ks[2];
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t c = 0; c < p.in_channels; ++c) {
      const int64_t g = c / cig;
      for (int64_t i0 = 0; i0 < in[0]; ++i0)
        for (int64_t i1 = 0; i1 < in[1]; ++i1)
          for (int64_t i2 = 0; i2 < in[2]; ++i2) {
            const int64_t xi = (n * p.in_channels + c) * in_sp + (i0 * in[1] + i1) * in[2] + i2;
            for (int64_t k0 = 0; k0 < ks[0]; ++k0) {
              const int64_t o0 = i0 * p.stride[0] - p.padding[0] + k0 * p.dilation[0];
              if (o0 < 0 || o0 >= out[0]) continue;
              for (int64_t k1 = 0; k1 < ks[1]; ++k1) {
                const int64_t o1 = i1 * p.stride[1] - p.padding[1] + k1 * p.dilation[1];
                if (o1 < 0 || o1 >= out[1]) continue;
                for (int64_t k2 = 0; k2 < ks[2]; ++k2) {
                  const int64_t o2 = i2 * p.stride[2] - p.padding[2] + k2 * p.dilation[2];
                  if (o2 < 0 || o2 >= out[2]) continue;
                  const int64_t k = (k0 * ks[1] + k1) * ks[2] + k2;
                  const int64_t o = (o0 * out[1] + o1) * out[2] + o2;
                  for (int64_t co = 0; co < cog; ++co) {
                    const int64_t wi = (c * cog + co) * k_sp + k;
                    const int64_t yi = (n * p.out_channels + g * cog + co) * out_sp + o;
                    fn(xi, wi, yi);
                  }
                }
              }
            }
          }
    }
}

}  // namespace scatter_detail

// y = conv_transpose(x, w) + b. `b` may be nullptr (no bias).
inline void scatter_forward(const Problem& p, const HostTensor& x, const HostTensor& w,
                            const HostTensor* b, HostTensor& y) {
  const std::vector<double> xv = scatter_detail::values(x), wv = scatter_detail::values(w);
  std::vector<double> yv(static_cast<size_t>(y.numel()), 0.0);
  scatter_detail::for_each_contribution(p, [&](int64_t xi, int64_t wi, int64_t yi) {
    yv[static_cast<size_t>(yi)] += xv[static_cast<size_t>(xi)] * wv[static_cast<size_t>(wi)];
  });
  if (b && y.numel() > 0) {
    const int64_t per_channel = y.numel() / (p.batch * p.out_channels);
    for (int64_t i = 0; i < y.numel(); ++i)
      yv[static_cast<size_t>(i)] += b->get((i / per_channel) % p.out_channels);
  }
  scatter_detail::write(y, yv);
}

// dx = adjoint of forward (without bias) in x, applied to dy.
inline void scatter_grad_input(const Problem& p, const HostTensor& dy, const HostTensor& w,
                               HostTensor& dx) {
  const std::vector<double> dyv = scatter_detail::values(dy), wv = scatter_detail::values(w);
  std::vector<double> dxv(static_cast<size_t>(dx.numel()), 0.0);
  scatter_detail::for_each_contribution(p, [&](int64_t xi, int64_t wi, int64_t yi) {
    dxv[static_cast<size_t>(xi)] += dyv[static_cast<size_t>(yi)] * wv[static_cast<size_t>(wi)];
  });
  scatter_detail::write(dx, dxv);
}

// dw = adjoint of forward (without bias) in w, applied to dy, at input x.
inline void scatter_grad_weight(const Problem& p, const HostTensor& x, const HostTensor& dy,
                                HostTensor& dw) {
  const std::vector<double> xv = scatter_detail::values(x), dyv = scatter_detail::values(dy);
  std::vector<double> dwv(static_cast<size_t>(dw.numel()), 0.0);
  scatter_detail::for_each_contribution(p, [&](int64_t xi, int64_t wi, int64_t yi) {
    dwv[static_cast<size_t>(wi)] += xv[static_cast<size_t>(xi)] * dyv[static_cast<size_t>(yi)];
  });
  scatter_detail::write(dw, dwv);
}

// db[c] = sum of dy[:, c] over batch and positions.
inline void scatter_grad_bias(const Problem& p, const HostTensor& dy, HostTensor& db) {
  std::vector<double> dbv(static_cast<size_t>(db.numel()), 0.0);
  if (dy.numel() > 0) {
    const int64_t per_channel = dy.numel() / (p.batch * p.out_channels);
    for (int64_t i = 0; i < dy.numel(); ++i)
      dbv[static_cast<size_t>((i / per_channel) % p.out_channels)] += dy.get(i);
  }
  scatter_detail::write(db, dbv);
}

}  // namespace test
}  // namespace convt
