// The CUDA backend: turns a validated canonical problem and rank-5 tensor views into
// kernel parameters and launches kernels on the caller's stream, on the tensors' device.
//
// Forward runs the implicit-GEMM tensor-core kernel (fprop_implicit_gemm.hpp) where its
// plan accepts the problem, and the always-correct direct kernels
// (convt/cuda/direct_kernels.cuh) otherwise; the gradients run the direct kernels.
// CONVT_LOG=1 prints each choice and the reason for it.
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "backend.hpp"
#include "convt/cuda/direct_kernels.cuh"
#include "cuda_util.hpp"
#include "fprop_implicit_gemm.hpp"
#include "log.hpp"

namespace convt {
namespace cuda {

namespace {

using direct::DirectParams;

// The number of visible devices, queried once (it cannot change within a process).
int device_count() {
  static const int count = [] {
    int n = 0;
    check_cuda(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
    return n;
  }();
  return count;
}

// Makes `device` current for the lifetime of the guard and restores the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device) {
    const int count = device_count();
    CONVT_CHECK(device.index >= 0 && device.index < count, "convt: CUDA device index ",
                device.index, " is out of range: ", count, " CUDA device",
                count == 1 ? " is" : "s are", " visible");
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device.index) {
      check_cuda(cudaSetDevice(device.index), "cudaSetDevice");
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// The grid cap of every launch: enough resident blocks to fill the device a few times over.
int64_t max_blocks(Device device) {
  // Multiprocessor counts, cached per device (0: not queried yet).
  static std::atomic<int> sm_count[64] = {};
  std::atomic<int>* cached = device.index < 64 ? &sm_count[device.index] : nullptr;
  int sms = cached ? cached->load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device.index),
               "cudaDeviceGetAttribute");
    if (cached) cached->store(sms, std::memory_order_relaxed);
  }
  return int64_t(sms > 0 ? sms : 1) * 32;
}

// Parameters of the canonical problem. x/w/y are the tensors in their forward roles
// (input or grad_input, weight or grad_weight, output or grad_output); any may be null
// when the call does not use it.
DirectParams make_params(const Problem& p, const TensorRef* x, const TensorRef* w,
                         const TensorRef* y, const TensorRef* b) {
  DirectParams d = direct_problem_params(p);
  for (int i = 0; i < 5; ++i) {
    d.x_str[i] = x ? x->strides[i] : 0;
    d.w_str[i] = w ? w->strides[i] : 0;
    d.y_str[i] = y ? y->strides[i] : 0;
  }
  d.b_str = b ? b->strides[0] : 0;
  return d;
}

// Calls fn(T{}) with T the CUDA element type of `dtype`.
template <typename Fn>
void with_element_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: fn(float{}); return;
    case DType::kFloat64: fn(double{}); return;
    case DType::kFloat16: fn(__half{}); return;
    case DType::kBFloat16: fn(__nv_bfloat16{}); return;
  }
  throw Error(ErrorKind::kNotImplemented,
              detail::str_cat("convt: unsupported dtype ", dtype_name(dtype)));
}

template <typename T>
const T* cptr(const TensorRef& t) {
  return static_cast<const T*>(t.data);
}
template <typename T>
T* mptr(const TensorRef& t) {
  return static_cast<T*>(t.data);
}

}  // namespace

bool available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

std::size_t workspace_size(Op op, const Problem& p, const ExecOptions& opt) {
  if (op == Op::kForward) {
    const ImplicitGemmFpropPlan plan = plan_implicit_gemm_fprop(p, opt);
    if (plan.usable) return plan.workspace_bytes;
  }
  return 0;
}

std::string describe_forward(const Problem& p, const TensorRef& x, const ExecOptions& opt) {
  DeviceGuard guard(x.device);
  const ImplicitGemmFpropPlan plan = plan_implicit_gemm_fprop(p, opt);
  if (implicit_gemm_runs(plan, x.device.index))
    return describe_implicit_gemm_fprop(plan, p, x, x.device.index);
  return describe_direct_forward(p, plan, x.strides.data(), int(max_blocks(x.device) / 32));
}

WeightRelayout weight_relayout(const Problem& p, const TensorRef& x, const ExecOptions& opt) {
  DeviceGuard guard(x.device);
  const ImplicitGemmFpropPlan plan = plan_implicit_gemm_fprop(p, opt);
  if (!implicit_gemm_runs(plan, x.device.index)) return {};
  return weight_relayout_of(plan, p, x, x.device.index);
}

void forward(const Problem& p, const TensorRef& x, const TensorRef& w, const TensorRef* b,
             const TensorRef& y, const ExecOptions& opt) {
  DeviceGuard guard(y.device);
  const ImplicitGemmFpropPlan plan = plan_implicit_gemm_fprop(p, opt);
  if (implicit_gemm_runs(plan, y.device.index)) {
    const std::string what = run_implicit_gemm_fprop(plan, p, x, w, b, y, opt, log_enabled());
    if (log_enabled()) log_line(detail::str_cat("forward ", p.to_string(), ": ", what));
    if (const int* flag = wgmma_nonfinite_flag(plan, opt, y.device.index)) {
      // Split TF32 or zeros inserted along W on the wgmma kernel: where the input (split
      // TF32) or the weight holds an infinity or a NaN (the flag its preparation set), the
      // direct kernel recomputes the output, so that they propagate as in float64;
      // elsewhere its blocks exit at once.
      DirectParams d = make_params(p, &x, &w, &y, b);
      d.only_if = flag;
      with_element_type(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        check_cuda(direct::launch_forward<T>(d, cptr<T>(x), cptr<T>(w),
                                             b ? cptr<T>(*b) : nullptr, mptr<T>(y),
                                             max_blocks(y.device), opt.stream),
                   "convt::cuda::direct::forward_kernel");
      });
    }
    return;
  }
  if (log_enabled())
    log_line(detail::str_cat("forward ", p.to_string(), ": ",
                             describe_direct_forward(p, plan, x.strides.data(),
                                                     int(max_blocks(y.device) / 32))));
  const DirectParams d = make_params(p, &x, &w, &y, b);
  const int64_t blocks = max_blocks(y.device);
  with_element_type(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    check_cuda(direct::launch_forward<T>(d, cptr<T>(x), cptr<T>(w), b ? cptr<T>(*b) : nullptr,
                                         mptr<T>(y), blocks, opt.stream),
               "convt::cuda::direct::forward_kernel");
  });
}

void grad_input(const Problem& p, const TensorRef& dy, const TensorRef& w, const TensorRef& dx,
                const ExecOptions& opt) {
  DeviceGuard guard(dx.device);
  const DirectParams d = make_params(p, &dx, &w, &dy, nullptr);
  const int64_t blocks = max_blocks(dx.device);
  with_element_type(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    check_cuda(direct::launch_grad_input<T>(d, cptr<T>(dy), cptr<T>(w), mptr<T>(dx), blocks,
                                            opt.stream),
               "convt::cuda::direct::grad_input_kernel");
  });
}

void grad_weight(const Problem& p, const TensorRef& x, const TensorRef& dy, const TensorRef& dw,
                 const ExecOptions& opt) {
  DeviceGuard guard(dw.device);
  const DirectParams d = make_params(p, &x, &dw, &dy, nullptr);
  const int64_t blocks = max_blocks(dw.device);
  with_element_type(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    check_cuda(direct::launch_grad_weight<T>(d, cptr<T>(x), cptr<T>(dy), mptr<T>(dw), blocks,
                                             opt.stream),
               "convt::cuda::direct::grad_weight_kernel");
  });
}

void grad_bias(const Problem& p, const TensorRef& dy, const TensorRef& db, const ExecOptions& opt) {
  DeviceGuard guard(db.device);
  const DirectParams d = make_params(p, nullptr, nullptr, &dy, &db);
  const int64_t blocks = max_blocks(db.device);
  with_element_type(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    check_cuda(direct::launch_grad_bias<T>(d, cptr<T>(dy), mptr<T>(db), blocks, opt.stream),
               "convt::cuda::direct::grad_bias_kernel");
  });
}

}  // namespace cuda
}  // namespace convt
