// convt/api.hpp — the entry points: forward, grad-input, grad-weight, grad-bias.
//
// Each call computes one direction of one Problem on tensors described by TensorRef.
// All tensors of a call must live on one device; the device picks the backend (the CPU
// backend for CPU tensors, the CUDA backend for CUDA tensors, launched on
// ExecOptions::stream). Tensors are batched: rank spatial_dims + 2, with the shapes
// Problem::{input,weight,output}_shape() give; any element strides are accepted.
//
// convt never allocates device memory behind the caller's back. A call that needs
// scratch memory says how much through workspace_size(); the caller passes at least
// that many bytes, 16-byte aligned (as every cudaMalloc and PyTorch allocation is), in
// ExecOptions::workspace.
//
// Every output is fully overwritten (never accumulated into). All functions throw
// convt::Error on bad arguments and on CUDA failures; a CUDA error is never left pending.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "convt/dtype.hpp"
#include "convt/error.hpp"
#include "convt/problem.hpp"
#include "convt/tensor.hpp"

// The CUDA runtime's stream handle, declared here so that this header does not need
// cuda_runtime.h (the declaration is identical to the runtime's own).
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace convt {

enum class Op : int8_t { kForward = 0, kGradInput = 1, kGradWeight = 2, kGradBias = 3 };

const char* op_to_string(Op op);

// Which forward kernel the CUDA backend runs. kAuto (the default) lets the dispatcher choose;
// the others ask for one kernel, which runs when it can express the problem (otherwise the
// dispatcher's own choice runs). For tests and benchmarks; CONVT_LOG=1 shows the choice.
enum class ForwardKernel : int8_t {
  kAuto = 0,
  kDirect = 1,            // the always-correct gather kernel
  kImplicitGemm = 2,      // tensor cores, one input gather per tap
  kImplicitGemmHalo = 3,  // tensor cores, input strips shared by the taps along W
  kImplicitGemmTma = 4,   // tensor cores, input tiles by TMA (sm_90 and newer)
  kImplicitGemmWgmma = 5, // persistent wgmma kernel, input copied into TMA tiles (sm_90a)
  kGemmFold = 6,          // one GEMM over the input's positions for every tap, then a fold
};

struct ExecOptions {
  MathMode math = MathMode::kAllowTF32;  // float32 precision contract (SPEC §3)
  cudaStream_t stream = nullptr;         // CUDA stream (nullptr: the legacy default stream)
  void* workspace = nullptr;             // scratch memory on the tensors' device
  std::size_t workspace_bytes = 0;
  int num_threads = 0;                   // CPU backend threads (<= 0: all hardware threads)
  ForwardKernel forward_kernel = ForwardKernel::kAuto;  // CUDA forward kernel choice
  // The forward's weight re-layout kept across calls (see weight_relayout): where set, the
  // forward writes its re-layout of the weight there, or, with weight_cache_valid, takes the
  // one an earlier forward wrote and skips it.
  void* weight_cache = nullptr;
  bool weight_cache_valid = false;
};

// The re-layout of the weight that forward() runs for (problem, input) with these options
// (the CUDA implicit-GEMM kernels pack the weight into their tiles' layout at every call):
// its bytes, 0 where it runs none (the CPU backend, the direct kernel), and a key naming
// that layout. A caller may keep `bytes` (16-byte aligned) on the input's device per weight
// and pass them as ExecOptions::weight_cache: the first forward fills them, and later
// forwards whose weight_relayout gives the same key may set weight_cache_valid while the
// weight's values have not changed since (the caller's to know: convt does not look).
struct WeightRelayout {
  std::size_t bytes = 0;
  uint64_t key = 0;
};
WeightRelayout weight_relayout(const Problem& problem, const TensorRef& input,
                               const ExecOptions& options = {});

// Scratch bytes the call (op, problem) on `device` needs; 0 when none.
std::size_t workspace_size(Op op, const Problem& problem, Device device,
                           const ExecOptions& options = {});

// The kernel forward() runs for this problem and input (its layout matters) with these
// options, and why: the line CONVT_LOG=1 prints for the call. "CPU backend" for CPU tensors.
std::string describe_forward(const Problem& problem, const TensorRef& input,
                             const ExecOptions& options = {});

// y = conv_transpose(x, w) + bias. `bias` may be nullptr (problem.has_bias must agree).
void forward(const Problem& problem, const TensorRef& input, const TensorRef& weight,
             const TensorRef* bias, const TensorRef& output, const ExecOptions& options = {});

// dx = d(loss)/dx given dy = d(loss)/dy: an ordinary (direct) convolution of dy with w.
void grad_input(const Problem& problem, const TensorRef& grad_output, const TensorRef& weight,
                const TensorRef& grad_input, const ExecOptions& options = {});

// dw = d(loss)/dw: a reduction over batch and positions of x times shifted dy.
void grad_weight(const Problem& problem, const TensorRef& input, const TensorRef& grad_output,
                 const TensorRef& grad_weight, const ExecOptions& options = {});

// db[c] = sum over batch and output positions of dy[:, c].
void grad_bias(const Problem& problem, const TensorRef& grad_output, const TensorRef& grad_bias,
               const ExecOptions& options = {});

// True when this build has the CUDA backend and a CUDA device is visible.
bool cuda_available();
// True when this build was compiled with the CUDA backend.
bool built_with_cuda();
// A one-line description of the build ("convt 0.1.0, CUDA 13.0, archs 80;90a").
const char* build_info();

}  // namespace convt
