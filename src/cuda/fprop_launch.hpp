// Launches of the implicit-GEMM forward kernels (fprop_launch.cuh), compiled in one
// translation unit per element type and precision (fprop_launch_*.cu) so that their
// kernels build in parallel; the dispatcher (fprop_implicit_gemm.cu) sees only these
// declarations.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>

#include "convt/cuda/gemm_fold_sm80.cuh"
#include "convt/cuda/implicit_gemm_fprop_tma_sm90.cuh"
#include "convt/cuda/implicit_gemm_fprop_wgmma_sm90.cuh"
#include "fprop_implicit_gemm.hpp"

namespace convt {
namespace cuda {

// The weight packings of the three implicit-GEMM kernels for the problem p each runs (the
// wgmma kernel's: wgmma_problem), without the pointers, the weight's strides and the
// non-finite flag, which the launches fill in: everything the packed layout depends on.
// weight_relayout_of hashes them into the key of ExecOptions::weight_cache.
wg::PackParams wgmma_pack_params(const ImplicitGemmFpropPlan& plan, const Problem& p, bool split);
tma::TmaPackParams tma_pack_params(const ImplicitGemmFpropPlan& plan, const Problem& p);
igemm::PackParams mma_pack_params(const ImplicitGemmFpropPlan& plan, const Problem& p);

// Bytes of the wgmma kernel's packed weight (the residual tiles included, split TF32), and
// where a weight cache holds the flag its packing sets for an infinite or NaN weight (16
// bytes after them; see launch_fprop_wgmma).
std::size_t wgmma_packed_bytes(const wg::PackParams& pk, std::size_t elem);
inline std::size_t wgmma_cache_flag_offset(std::size_t packed_bytes) {
  return (packed_bytes + 15) / 16 * 16;
}

// Where the packed weight goes: ExecOptions::weight_cache where given, else the start of
// the workspace; and whether the packing runs (not where the cache is valid).
inline void* packed_weight_ptr(const ExecOptions& opt) {
  return opt.weight_cache != nullptr ? opt.weight_cache : opt.workspace;
}
inline bool packing_runs(const ExecOptions& opt) {
  return opt.weight_cache == nullptr || !opt.weight_cache_valid;
}

// Dynamic shared memory the halo kernel may use: what lets two blocks share a multiprocessor.
// Its size varies with the problem, so each kernel is opted in to this bound once.
constexpr std::size_t kHaloSmemLimit = 100 * 1024;

// The TMA kernel with the plan's tile (T: float, __half or __nv_bfloat16; kSplit: float
// as split TF32), after packing the weight into the workspace. `map` describes x.
template <typename T, bool kSplit>
void launch_fprop_tma(const ImplicitGemmFpropPlan& plan, const Problem& p, const CUtensorMap& map,
                      const TensorRef& w, const TensorRef* b, const TensorRef& y,
                      const ExecOptions& opt, int device);

// The mma.sync kernels (gather or halo, by the plan) with the plan's K step, after packing
// the weight into the workspace.
template <typename T, bool kSplit>
void launch_fprop_mma(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                      const TensorRef& w, const TensorRef* b, const TensorRef& y,
                      const ExecOptions& opt);

// GEMM and fold (plan.fold; src/cuda/fprop_gemm_fold.cu): packs the weight (unless the
// cache holds it), runs the GEMM into the workspace's products, then the fold into y.
template <typename T, bool kSplit>
void launch_gemm_fold(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                      const TensorRef& w, const TensorRef* b, const TensorRef& y,
                      const ExecOptions& opt);

// The tensor map over a channels_last input the wgmma kernel reads in place (see
// wgmma_channels_last_in_place); false where it cannot (the input copy runs then).
bool make_channels_last_tensor_map(CUtensorMap* map, const ImplicitGemmFpropPlan& plan,
                                   const Problem& p, const TensorRef& x);

// The tensor map over an NC... 16-bit input whose raw boxes the wgmma kernel transposes
// itself (plan.wg_xp; see wgmma_input_transposed_in_kernel); false where it cannot (the
// input copy runs then).
bool make_xp_tensor_map(CUtensorMap* map, const ImplicitGemmFpropPlan& plan, const Problem& p,
                        const TensorRef& x);

// Makes the tensor map of the wgmma kernel's input (see launch_fprop_wgmma): strides null,
// the blocked copy at `data`; else, for the kernel reading the input in place, the
// (N, C, D, H, W) input at `data` with element strides `strides`.
using WgmmaMapFn = std::function<void(CUtensorMap*, const void*, const int64_t*)>;

// The persistent wgmma kernel (sm_90a): packs the weight and copies the input into the
// workspace (reading the input in place, plan.wg_raw: only an input a tensor map cannot
// read as it is, padded), then runs it with the plan's tile (kSplit: float as split TF32).
template <typename T, bool kSplit>
void launch_fprop_wgmma(const ImplicitGemmFpropPlan& plan, const Problem& p, const TensorRef& x,
                        const TensorRef& w, const TensorRef* b, const TensorRef& y,
                        const ExecOptions& opt, int device, const WgmmaMapFn& encode);

// binaryVersion of the wgmma kernel's code in this build where it is sm_90a code that
// loads on the current device, else 0.
int wgmma_kernel_binary_version();

// binaryVersion of the TMA kernel's code in this build (0 where the build has none that
// loads on the current device).
int tma_kernel_binary_version();

// Output positions of the largest phase (phase 0) along each dimension.
Dims phase0_positions(const Problem& p);

// Whether CONVT_TMA_MMA=wgmma asks for the TMA kernel on wgmma (read at every call).
bool tma_wgmma_requested();

// The W phases of the TMA kernel's grid, into its parameters (see tma_w_phases and
// tma_w_owners_requested in fprop_implicit_gemm.cu).
bool tma_w_owners_requested();
void set_w_owners(tma::TmaFpropParams& fp);

}  // namespace cuda
}  // namespace convt
