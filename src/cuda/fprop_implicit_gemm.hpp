// Planning and launching the implicit-GEMM forward (convt/cuda/implicit_gemm_fprop_sm80.cuh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend.hpp"

namespace convt {
namespace cuda {

struct ImplicitGemmFpropPlan {
  enum class Kind { kGather, kHalo };
  bool usable = false;
  std::string reason;  // why no implicit-GEMM kernel runs this problem, when !usable
  Kind kind = Kind::kGather;
  int block_k = 0;     // input channels per K step
  int64_t cig_pad = 0, cog_pad = 0;
  std::size_t workspace_bytes = 0;  // the packed weight
  // kHalo: tile of `rows` x `wt` positions, W taps of the widest phase, strip rows.
  int wt = 0, rows = 0, tw_max = 0, strip_rows = 0;
  std::size_t smem_bytes = 0;
  std::string describe() const;
};

// Whether (and how) the implicit-GEMM kernel runs this canonical problem.
ImplicitGemmFpropPlan plan_implicit_gemm_fprop(const Problem& p, const ExecOptions& opt);

// Packs the weight into the workspace and runs the kernel (plan.usable must be true).
void run_implicit_gemm_fprop(const ImplicitGemmFpropPlan& plan, const Problem& p,
                             const TensorRef& x, const TensorRef& w, const TensorRef* b,
                             const TensorRef& y, const ExecOptions& opt);

}  // namespace cuda
}  // namespace convt
