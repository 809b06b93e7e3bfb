// convt_plan: what the CUDA forward would run for each problem read from standard input, and
// the wgmma plan's tile count and its L2 -> shared memory bytes, without a GPU (the planner
// is host code; a machine without one plans for wgmma_planner_sms() = 132 multiprocessors).
// For working on the dispatcher: `python3 scripts/plan_suite.py` feeds it a suite's cases.
//
// One problem per line, key=value fields (per-dimension values comma-separated, one per
// spatial dimension):
//   id=kb57 dims=2 batch=8 cin=64 cout=64 in=1024,1024 k=3,3 [s=1,1] [p=0,0] [op=0,0]
//   [d=1,1] [groups=1] [dtype=fp32|bf16|fp16] [math=tf32|strict] [kernel=auto|wgmma|tma|fold]
// (kernel: the one asked for, as CONVT_FORWARD_KERNEL asks for it)
// Output, one line each: id dtype math: description [| tiles T x K steps S, boxes B MB,
// weight tiles W MB].
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "convt/convt.hpp"
#include "cuda/fprop_implicit_gemm.hpp"

namespace {

using convt::Dims;
using convt::DType;
using convt::MathMode;
using convt::Problem;

bool read_dims(const std::string& v, int dims, int64_t fill, Dims* out) {
  Dims d = {fill, fill, fill};
  std::stringstream ss(v);
  std::string item;
  int i = 0;
  while (std::getline(ss, item, ',')) {
    if (i >= dims) return false;
    d[size_t(i++)] = std::stoll(item);
  }
  if (i != dims) return false;
  *out = d;
  return true;
}

}  // namespace

int main() {
  std::string line;
  int status = 0;
  while (std::getline(std::cin, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    std::string field, id = "?", in, k, s, p, op, d, dtype = "fp32", math = "tf32",
                kernel = "auto";
    Problem pr;
    try {
      while (ss >> field) {
        const size_t eq = field.find('=');
        if (eq == std::string::npos) throw std::runtime_error("not key=value: " + field);
        const std::string key = field.substr(0, eq), v = field.substr(eq + 1);
        if (key == "id") id = v;
        else if (key == "dims") pr.spatial_dims = std::stoi(v);
        else if (key == "batch") pr.batch = std::stoll(v);
        else if (key == "cin") pr.in_channels = std::stoll(v);
        else if (key == "cout") pr.out_channels = std::stoll(v);
        else if (key == "groups") pr.groups = std::stoll(v);
        else if (key == "in") in = v;
        else if (key == "k") k = v;
        else if (key == "s") s = v;
        else if (key == "p") p = v;
        else if (key == "op") op = v;
        else if (key == "d") d = v;
        else if (key == "dtype") dtype = v;
        else if (key == "math") math = v;
        else if (key == "kernel") kernel = v;
        else throw std::runtime_error("unknown key: " + key);
      }
      const int n = pr.spatial_dims;
      const std::string ones = n == 1 ? "1" : n == 2 ? "1,1" : "1,1,1";
      const std::string zeros = n == 1 ? "0" : n == 2 ? "0,0" : "0,0,0";
      if (!read_dims(in, n, 1, &pr.input_size) || !read_dims(k, n, 1, &pr.kernel_size) ||
          !read_dims(s.empty() ? ones : s, n, 1, &pr.stride) ||
          !read_dims(p.empty() ? zeros : p, n, 0, &pr.padding) ||
          !read_dims(op.empty() ? zeros : op, n, 0, &pr.output_padding) ||
          !read_dims(d.empty() ? ones : d, n, 1, &pr.dilation))
        throw std::runtime_error("each of in, k, s, p, op, d needs dims values");
      pr.dtype = dtype == "bf16"   ? DType::kBFloat16
                 : dtype == "fp16" ? DType::kFloat16
                 : dtype == "fp32" ? DType::kFloat32
                                   : throw std::runtime_error("dtype: fp32, bf16 or fp16");
      if (math != "tf32" && math != "strict") throw std::runtime_error("math: tf32 or strict");
      pr.validate();
      convt::ExecOptions opt;
      opt.math = math == "strict" ? MathMode::kStrictFP32 : MathMode::kAllowTF32;
      opt.forward_kernel = kernel == "wgmma" ? convt::ForwardKernel::kImplicitGemmWgmma
                           : kernel == "tma" ? convt::ForwardKernel::kImplicitGemmTma
                           : kernel == "fold" ? convt::ForwardKernel::kGemmFold
                           : kernel == "auto"
                               ? convt::ForwardKernel::kAuto
                               : throw std::runtime_error("kernel: auto, wgmma, tma or fold");
      const Problem c = pr.canonical3d();
      std::string what = convt::cuda::describe_plan_without_device(c, opt);
      const auto plan = convt::cuda::plan_implicit_gemm_fprop(c, opt);
      if (plan.usable && plan.wg) {
        // Each K step copies its box and, unless resident, one weight tile per (H tap, W
        // tap) of the step (docs/kernels.md, "What the wgmma tiles move").
        const double e = double(convt::dtype_size(c.dtype)) * (plan.split ? 2 : 1);
        const double tile_steps = double(plan.wg_tiles) * plan.wg_steps;
        // (Two warpgroups sharing the weight tiles: two boxes a step.)
        const double boxes = tile_steps * plan.wg_box_bytes * (plan.split ? 2 : 1) *
                             (plan.wg_coop_n ? 2 : 1);
        const double wtaps = plan.wg_tsplit    ? 1
                             : plan.wg_fold > 1 ? plan.wg_fold
                                                : plan.wg_tmax[2];
        // (Two consumer warpgroups of 64 channels each: each tile's steps copy both
        // warpgroups' weight tiles.)
        const bool two_sets = plan.wg_coop && !plan.wg_coop_n;
        const double weights = plan.wg_w_resident ? 0.0
                                                  : tile_steps * plan.wg_hb * wtaps * plan.wg_cw *
                                                        plan.wg_bk * e * (two_sets ? 2 : 1);
        char extra[160];
        std::snprintf(extra, sizeof extra,
                      " | tiles %lld x K steps %d, boxes %.1f MB, weight tiles %.1f MB",
                      static_cast<long long>(plan.wg_tiles), plan.wg_steps, boxes / 1e6,
                      weights / 1e6);
        what += extra;
      } else if (plan.usable && !plan.wg_reason.empty()) {
        // (Why the wgmma kernel does not run it.)
        what += " | not wgmma: " + plan.wg_reason;
      }
      std::cout << id << " " << dtype << " " << math << ": " << what << "\n";
    } catch (const std::exception& ex) {
      std::cout << id << ": error: " << ex.what() << "\n";
      status = 1;
    }
  }
  return status;
}
