// Internal interface between the public API (src/api.cpp) and the backends.
//
// The API validates the call and hands each backend the canonical 3-D problem
// (Problem::canonical3d()) with every tensor except bias / grad_bias viewed as rank 5
// (N, C, D, H, W); a 1-D or 2-D problem's missing leading spatial dimensions have size 1
// (and stride 0). Bias and grad_bias stay rank 1 with their own stride. Outputs with no
// elements never reach a backend, and outputs never have overlapping elements. Backends
// overwrite their outputs completely.
#pragma once

#include <cstddef>
#include <string>

#include "convt/api.hpp"

namespace convt {

namespace cpu {
void forward(const Problem& p, const TensorRef& x, const TensorRef& w, const TensorRef* b,
             const TensorRef& y, const ExecOptions& opt);
void grad_input(const Problem& p, const TensorRef& dy, const TensorRef& w, const TensorRef& dx,
                const ExecOptions& opt);
void grad_weight(const Problem& p, const TensorRef& x, const TensorRef& dy, const TensorRef& dw,
                 const ExecOptions& opt);
void grad_bias(const Problem& p, const TensorRef& dy, const TensorRef& db, const ExecOptions& opt);
}  // namespace cpu

namespace cuda {
bool available();
std::size_t workspace_size(Op op, const Problem& p, const ExecOptions& opt);
std::string describe_forward(const Problem& p, const TensorRef& x, const ExecOptions& opt);
WeightRelayout weight_relayout(const Problem& p, const TensorRef& x, const ExecOptions& opt);
void forward(const Problem& p, const TensorRef& x, const TensorRef& w, const TensorRef* b,
             const TensorRef& y, const ExecOptions& opt);
void grad_input(const Problem& p, const TensorRef& dy, const TensorRef& w, const TensorRef& dx,
                const ExecOptions& opt);
void grad_weight(const Problem& p, const TensorRef& x, const TensorRef& dy, const TensorRef& dw,
                 const ExecOptions& opt);
void grad_bias(const Problem& p, const TensorRef& dy, const TensorRef& db, const ExecOptions& opt);
}  // namespace cuda

}  // namespace convt
