// CUDA backend tests: every direction of every sweep case in every dtype against the
// float64 CPU oracle (same rounded inputs), in each case's memory layout; tensors of more
// than 2^31 elements; device errors; non-default streams; zero-size edge cases.
//
// Without a CUDA device every test skips, printing why. CONVT_TEST_QUICK=1 runs every
// 8th sweep case and skips the large-tensor test (for runs under compute-sanitizer).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <optional>
#include <string>
#include <string>
#include <utility>
#include <vector>

#include "convt/convt.hpp"
#include "test_util.hpp"

namespace convt {
namespace test {
namespace {

// ---------------------------------------------------------------------------------------
// CUDA helpers
// ---------------------------------------------------------------------------------------

// Why CUDA tests cannot run here; empty when they can.
const std::string& cuda_unavailable_reason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
    }
    if (count == 0) return std::string("cudaGetDeviceCount reports 0 devices");
    return std::string();
  }();
  return reason;
}

#define SKIP_WITHOUT_CUDA()                                                       \
  do {                                                                            \
    if (!cuda_unavailable_reason().empty())                                       \
      GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();            \
  } while (0)

bool quick_mode() {
  const char* v = std::getenv("CONVT_TEST_QUICK");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
  }
}

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A device copy of a host tensor's whole storage (gaps included), with the same strides.
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorRef ref;

  DeviceTensor(const HostTensor& h, cudaStream_t stream) : buffer(h.bytes.size()), ref(h.ref) {
    ref.data = buffer.get();
    ref.device = Device::cuda(0);
    cuda_check(cudaMemcpyAsync(buffer.get(), h.bytes.data(), h.bytes.size(),
                               cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync to device");
  }
  void download(HostTensor& h, cudaStream_t stream) const {
    cuda_check(cudaMemcpyAsync(h.bytes.data(), buffer.get(), h.bytes.size(),
                               cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync to host");
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
};

// The workspace a call asks for (none for most), attached to the options.
struct Workspace {
  DeviceBuffer buffer;
  Workspace(Op op, const Problem& p, ExecOptions& opt) {
    const size_t bytes = convt::workspace_size(op, p, Device::cuda(0), opt);
    buffer = DeviceBuffer(bytes);
    opt.workspace = buffer.get();
    opt.workspace_bytes = bytes;
  }
};

// ---------------------------------------------------------------------------------------
// Comparison with the float64 oracle
// ---------------------------------------------------------------------------------------

struct Precision {
  DType dtype;
  MathMode math;
  double budget;  // SPEC §3: max |out - oracle| / max |oracle|
  const char* name;
};

const Precision kPrecisions[] = {
    {DType::kFloat32, MathMode::kStrictFP32, 4e-6, "float32 strict"},
    {DType::kFloat32, MathMode::kAllowTF32, 8e-4, "float32 tf32"},
    {DType::kFloat64, MathMode::kStrictFP32, 1e-12, "float64"},
    {DType::kFloat16, MathMode::kStrictFP32, 1.5e-3, "float16"},
    {DType::kBFloat16, MathMode::kStrictFP32, 1e-2, "bfloat16"},
};

// The same values in float64, contiguous.
HostTensor to_f64(const HostTensor& h) {
  HostTensor out(h.ref.sizes, h.ref.rank, DType::kFloat64, Layout::kContiguous);
  for (int64_t i = 0; i < h.numel(); ++i) out.set(i, h.get(i));
  return out;
}

HostTensor f64_like(const Shape& shape, int rank) {
  return HostTensor(shape, rank, DType::kFloat64, Layout::kContiguous);
}

// Gives every size-1 dimension of `h` stride 0 (as PyTorch may for such dimensions).
void zero_unit_strides(HostTensor& h) {
  for (int d = 0; d < h.ref.rank; ++d)
    if (h.ref.sizes[d] == 1) h.ref.strides[d] = 0;
}

// Runs every direction of `problem` (in precision.dtype) on the GPU on `stream` and on the
// CPU in float64 on the same values, and compares; output gaps must stay untouched.
void check_all_directions(Problem problem, Layout layout, const Precision& precision,
                          uint64_t seed, cudaStream_t stream = nullptr,
                          bool unit_strides_zero = false,
                          ForwardKernel forward_kernel = ForwardKernel::kAuto) {
  SCOPED_TRACE(precision.name);
  const DType dt = precision.dtype;
  problem.dtype = dt;
  const Problem& p = problem;
  const int r = p.tensor_rank();
  std::mt19937_64 rng(seed);
  CaseTensors t(p, layout, dt, rng);
  HostTensor dy(p.output_shape(), r, dt, layout), dx(p.input_shape(), r, dt, layout),
      dw(p.weight_shape(), r, dt, layout);
  dy.fill_uniform(rng);
  Shape bias_shape{};
  bias_shape[0] = p.out_channels;
  const Layout bias_layout = layout == Layout::kGapped ? Layout::kGapped : Layout::kContiguous;
  HostTensor db(bias_shape, 1, dt, bias_layout), b(bias_shape, 1, dt, bias_layout);
  for (int64_t i = 0; i < b.numel(); ++i) b.set(i, t.b.get(i));  // the bias, maybe strided
  if (unit_strides_zero)
    for (HostTensor* h : {&t.x, &t.w, &t.y, &dy, &dx, &dw, &db, &b}) zero_unit_strides(*h);

  // The oracle: the CPU backend in float64 on the already rounded values.
  Problem p64 = p;
  p64.dtype = DType::kFloat64;
  const HostTensor x64 = to_f64(t.x), w64 = to_f64(t.w), b64 = to_f64(t.b), dy64 = to_f64(dy);
  HostTensor y64 = f64_like(p.output_shape(), r), dx64 = f64_like(p.input_shape(), r),
             dw64 = f64_like(p.weight_shape(), r), db64 = f64_like(bias_shape, 1);
  convt::forward(p64, x64.ref, w64.ref, p.has_bias ? &b64.ref : nullptr, y64.ref);
  convt::grad_input(p64, dy64.ref, w64.ref, dx64.ref);
  convt::grad_weight(p64, x64.ref, dy64.ref, dw64.ref);
  if (p.has_bias) convt::grad_bias(p64, dy64.ref, db64.ref);

  const DeviceTensor gx(t.x, stream), gw(t.w, stream), gb(b, stream), gy(t.y, stream),
      gdy(dy, stream), gdx(dx, stream), gdw(dw, stream), gdb(db, stream);
  ExecOptions base;
  base.math = precision.math;
  base.stream = stream;
  base.forward_kernel = forward_kernel;

  auto expect_close = [&](const char* what, HostTensor& out, const DeviceTensor& dev,
                          const HostTensor& ref) {
    dev.download(out, stream);
    const double err = rel_error(out, ref);
    EXPECT_LE(err, precision.budget) << what << ": max|out - oracle| / max|oracle| = " << err;
    EXPECT_EQ(out.touched_gaps(), 0) << what << " wrote storage outside its elements";
  };
  {
    ExecOptions opt = base;
    Workspace ws(Op::kForward, p, opt);
    convt::forward(p, gx.ref, gw.ref, p.has_bias ? &gb.ref : nullptr, gy.ref, opt);
    expect_close("forward", t.y, gy, y64);
  }
  {
    ExecOptions opt = base;
    Workspace ws(Op::kGradInput, p, opt);
    convt::grad_input(p, gdy.ref, gw.ref, gdx.ref, opt);
    expect_close("grad_input", dx, gdx, dx64);
  }
  {
    ExecOptions opt = base;
    Workspace ws(Op::kGradWeight, p, opt);
    convt::grad_weight(p, gx.ref, gdy.ref, gdw.ref, opt);
    expect_close("grad_weight", dw, gdw, dw64);
  }
  if (p.has_bias) {
    ExecOptions opt = base;
    Workspace ws(Op::kGradBias, p, opt);
    convt::grad_bias(p, gdy.ref, gdb.ref, opt);
    expect_close("grad_bias", db, gdb, db64);
  }
}

// ---------------------------------------------------------------------------------------
// The sweep
// ---------------------------------------------------------------------------------------

// Parametrized tests' names: case_000, case_001, ...
std::string indexed_case_name(const ::testing::TestParamInfo<int>& info) {
  char name[32];
  std::snprintf(name, sizeof(name), "case_%03d", info.param);
  return std::string(name);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = sweep_cases();
  return all;
}

class CudaSweep : public ::testing::TestWithParam<int> {};

TEST_P(CudaSweep, MatchesFloat64Oracle) {
  SKIP_WITHOUT_CUDA();
  const Case& c = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  for (const Precision& precision : kPrecisions)
    check_all_directions(c.problem, c.layout, precision, 7919u * uint64_t(GetParam()) + 1);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CudaSweep,
                         ::testing::Range(0, static_cast<int>(cases().size()),
                                          quick_mode() ? 8 : 1),
                         indexed_case_name);

// The forms of the direct forward, as the settings that ask for them: several output
// channels a thread where a group has three or more (the default; kCo by the planner's rule,
// and 16, which the small test problems would not get), several rows a thread
// (CONVT_DIRECT_CHANNELS=0), one row a thread (CONVT_DIRECT_ROWS=1), one output a thread
// (CONVT_DIRECT_ROWS=0).
struct DirectForm {
  const char* channels;
  const char* rows;
  std::string name() const {
    return std::string("CONVT_DIRECT_CHANNELS=") + channels + " CONVT_DIRECT_ROWS=" + rows;
  }
};
const std::vector<DirectForm>& direct_forms() {
  static const std::vector<DirectForm> forms = {
      {"", ""}, {"16", ""}, {"0", ""}, {"", "1"}, {"", "0"}};
  return forms;
}

// The direct forward kernels asked for on every other case of the sweep (depthwise and
// other small groups, strides, dilation, padding, output_padding, every layout), every
// precision, against the float64 oracle, in every form (direct_forms).
class CudaDirectForward : public ::testing::TestWithParam<int> {};

TEST_P(CudaDirectForward, MatchesFloat64Oracle) {
  SKIP_WITHOUT_CUDA();
  const Case& c = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  for (const DirectForm& form : direct_forms()) {
    SCOPED_TRACE(form.name());
    const ScopedEnv channels("CONVT_DIRECT_CHANNELS", form.channels);
    const ScopedEnv rows("CONVT_DIRECT_ROWS", form.rows);
    for (const Precision& precision : kPrecisions)
      check_all_directions(c.problem, c.layout, precision, 7919u * uint64_t(GetParam()) + 2,
                           nullptr, false, ForwardKernel::kDirect);
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, CudaDirectForward,
                         ::testing::Range(0, static_cast<int>(cases().size()),
                                          quick_mode() ? 8 : 2),
                         indexed_case_name);

// ---------------------------------------------------------------------------------------
// Hand-picked problems
// ---------------------------------------------------------------------------------------

TEST(CudaEdgeCases, StridesAndDilationsOutsideTheSweep) {
  SKIP_WITHOUT_CUDA();
  const std::vector<Problem> problems = {
      // A stride beyond 2^32 (one input position along it), coprime with the dilation.
      make_problem(2, 2, 2, 3, 1, {1, 5, 1}, {4, 3, 1}, {5000000001, 2, 1}, {1, 1, 0},
                   {0, 1, 0}, {2, 1, 1}, true),
      // Stride and dilation sharing a factor; output_padding up to max(stride, dil) - 1.
      make_problem(1, 2, 4, 6, 2, {7, 1, 1}, {5, 1, 1}, {6, 1, 1}, {3, 0, 0}, {5, 0, 0},
                   {4, 1, 1}, true),
      make_problem(3, 1, 3, 3, 3, {3, 2, 4}, {3, 2, 3}, {4, 3, 6}, {2, 0, 5}, {3, 1, 8},
                   {6, 2, 9}, false),
      // A kernel far wider than the input; padding trimming most of the output.
      make_problem(1, 3, 2, 2, 1, {2, 1, 1}, {40, 1, 1}, {7, 1, 1}, {30, 0, 0}, {0, 0, 0},
                   {3, 1, 1}, true),
      // Many channels per group, for accumulation-order error.
      make_problem(2, 2, 96, 64, 2, {9, 7, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 0, 0},
                   {1, 1, 1}, true),
  };
  uint64_t seed = 1;
  for (const Problem& p : problems) {
    SCOPED_TRACE(p.to_string());
    ASSERT_NO_THROW(p.validate());
    for (Layout layout : {Layout::kContiguous, Layout::kPermuted})
      for (const Precision& precision : kPrecisions)
        check_all_directions(p, layout, precision, ++seed);
  }
}

// The direct forward by rows of outputs at its own boundaries: several column tiles with a
// partial last one, tiles of any width (direct_column_tiles) with the threads past whole
// rows idle, a single column, and row counts that leave partial chunks (or halve them for lack of blocks); and the
// kernel of several output channels a thread at its: 1-5 input channels a group (the
// channel loop unrolled and not), chunks of 4, 8 and 16 channels with a partial last one,
// a weight table too large for shared memory (the kernel by rows instead); in every form
// (direct_forms, with kCo 4 and 8 too).
std::vector<Problem> direct_rows_problems() {
  return {
      // 1-D depthwise, 1401 output columns: eleven tiles of 128 (two rows a pass), the last
      // one partial.
      make_problem(1, 3, 4, 4, 4, {700, 1, 1}, {4, 1, 1}, {2, 1, 1}, {1, 1, 1}, {1, 0, 0},
                   {1, 1, 1}, true),
      // 2-D, two output channels per group, W 600 (twelve tiles of 50), 84 rows (halved chunks).
      make_problem(2, 2, 3, 6, 3, {5, 300, 1}, {3, 5, 1}, {1, 2, 1}, {0, 2, 0}, {0, 1, 0},
                   {1, 1, 1}, false),
      // 3-D with one output column, strided and dilated along D and H.
      make_problem(3, 2, 4, 6, 2, {3, 4, 1}, {2, 3, 1}, {3, 2, 1}, {1, 0, 0}, {2, 1, 0},
                   {2, 2, 1}, true),
      // 2-D with 3 output columns (85 rows a pass, one thread idle) and 3570 rows.
      make_problem(2, 5, 6, 6, 3, {40, 1, 1}, {2, 3, 1}, {3, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      // 2-D, rows of one and two H taps side by side (k3 s2), 4 -> 4 channels a group.
      make_problem(2, 3, 8, 8, 2, {7, 45, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, true),
      // 3-D, 5 input channels a group (the channel loop not unrolled), D taps differing
      // between rows.
      make_problem(3, 2, 10, 4, 2, {3, 4, 9}, {3, 2, 3}, {2, 3, 2}, {1, 0, 1}, {1, 2, 0},
                   {1, 1, 2}, false),
      // 2-D, 3 -> 16 channels (an image's), k3 s2 with output_padding, 32 columns.
      make_problem(2, 3, 3, 16, 1, {9, 16, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, true),
      // 3-D, 1 -> 21 channels (chunks of 16 and 8 leave a partial last one), dilated W.
      make_problem(3, 2, 1, 21, 1, {3, 5, 6}, {2, 3, 3}, {1, 2, 1}, {0, 1, 1}, {0, 1, 0},
                   {1, 1, 2}, true),
      // 1-D, 2 groups of 2 -> 5 channels, k5 s3, 302 columns (six tiles of 51).
      make_problem(1, 2, 4, 10, 2, {100, 1, 1}, {5, 1, 1}, {3, 1, 1}, {1, 0, 0}, {2, 0, 0},
                   {1, 1, 1}, false),
      // 2-D, 4 -> 12 channels a group, 3 groups, W stride 3 (phases of one and two taps).
      make_problem(2, 2, 12, 36, 3, {6, 11, 1}, {2, 5, 1}, {1, 3, 1}, {0, 1, 0}, {0, 2, 0},
                   {1, 1, 1}, true),
      // 2-D, 6 -> 9 channels (the channel loop not unrolled, kCo 8 at most).
      make_problem(2, 2, 6, 9, 1, {5, 7, 1}, {3, 2, 1}, {1, 2, 1}, {1, 0, 0}, {0, 1, 0},
                   {2, 1, 1}, true),
      // 3-D, 8 -> 4 channels, 7 x 7 x 6 taps: a weight table of 4 channels (36.75 KB in
      // float32) near its bound (kChannelsSmemBytes, 39.9 KB), beside the static tables.
      make_problem(3, 1, 8, 4, 1, {2, 2, 3}, {7, 7, 6}, {1, 1, 1}, {3, 3, 3}, {0, 0, 0},
                   {1, 1, 1}, true),
      // 7 x 7 x 7 taps: 42.9 KB, past the bound (though below 48 KB), the kernel by rows.
      make_problem(3, 1, 8, 4, 1, {2, 2, 3}, {7, 7, 7}, {1, 1, 1}, {3, 3, 3}, {0, 0, 0},
                   {1, 1, 1}, false),
      // 3-D, 3 -> 16 channels k3 s2, 67 output columns: two tiles of 34, 7 rows a pass (18
      // threads idle), the second tile's last column past W.
      make_problem(3, 2, 3, 16, 1, {3, 4, 33}, {3, 3, 3}, {2, 2, 2}, {0, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      // 2-D, 2 -> 6 channels k3 s1, 34 output columns: one tile, 7 rows a pass, 95 rows.
      make_problem(2, 5, 2, 6, 1, {17, 32, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, false),
  };
}

TEST(CudaDirectForwardRows, ColumnTilesAndRowChunks) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 100;
  for (const Problem& p : direct_rows_problems()) {
    SCOPED_TRACE(p.to_string());
    ASSERT_NO_THROW(p.validate());
    std::vector<DirectForm> forms = direct_forms();
    forms.push_back({"4", ""});
    forms.push_back({"8", ""});
    for (const DirectForm& form : forms) {
      SCOPED_TRACE(form.name());
      const ScopedEnv channels("CONVT_DIRECT_CHANNELS", form.channels);
      const ScopedEnv rows("CONVT_DIRECT_ROWS", form.rows);
      for (Layout layout : {Layout::kContiguous, Layout::kPermuted})
        for (const Precision& precision : kPrecisions)
          check_all_directions(p, layout, precision, ++seed, nullptr, false,
                               ForwardKernel::kDirect);
    }
  }
}

// The forms of the direct forward (several output channels a thread with every kCo,
// several rows a thread, one row a thread, one output a thread) sum the same products in
// the same order: the same bits, every precision and layout.
TEST(CudaDirectForwardRows, EveryFormGivesTheSameBits) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 300;
  for (const Problem& base : direct_rows_problems()) {
    for (const Precision& precision : kPrecisions) {
      for (Layout layout : {Layout::kContiguous, Layout::kPermuted}) {
        Problem p = base;
        p.dtype = precision.dtype;
        SCOPED_TRACE(p.to_string() + " " + precision.name);
        std::mt19937_64 rng(++seed);
        CaseTensors t(p, layout, p.dtype, rng);
        const DeviceTensor gx(t.x, nullptr), gw(t.w, nullptr), gb(t.b, nullptr);
        ExecOptions opt;
        opt.math = precision.math;
        opt.forward_kernel = ForwardKernel::kDirect;
        auto run = [&](const char* channels, const char* rows) {
          const ScopedEnv env_channels("CONVT_DIRECT_CHANNELS", channels);
          const ScopedEnv env_rows("CONVT_DIRECT_ROWS", rows);
          HostTensor y(p.output_shape(), p.tensor_rank(), p.dtype, layout);
          DeviceTensor gy(y, nullptr);
          convt::forward(p, gx.ref, gw.ref, p.has_bias ? &gb.ref : nullptr, gy.ref, opt);
          gy.download(y, nullptr);
          return y.bytes;
        };
        const auto per_output = run("", "0");
        EXPECT_EQ(per_output, run("", "1"));
        EXPECT_EQ(per_output, run("0", ""));
        for (const char* channels : {"", "4", "8", "16"})
          EXPECT_EQ(per_output, run(channels, "")) << "CONVT_DIRECT_CHANNELS=" << channels;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// The tensor-core forward's boundaries: enough channels per group for the implicit GEMM,
// channel counts that do not divide its tiles, position counts around its 128-wide tile,
// every phase of strides 2-5 (including phases that no tap reaches), groups, dilation.
// All four directions run, in the precisions that use tensor cores.
// ---------------------------------------------------------------------------------------

std::vector<Case> fast_path_cases() {
  std::vector<Case> cases;
  // Every phase of strides 2..5 with kernels that leave some phases without taps.
  for (int64_t s = 2; s <= 5; ++s) {
    for (int64_t k : {int64_t(1), s - 1, s + 1, int64_t(7)}) {
      Problem p = make_problem(2, 2, 16, 64, 1, {9, 11, 1}, {k, 3, 1}, {s, s, 1}, {0, 1, 0},
                               {s - 1, 0, 0}, {1, 1, 1}, k % 2 == 1);
      if (p.output_size(0) >= 1 && p.output_size(1) >= 1) cases.push_back({p, Layout::kContiguous});
    }
  }
  // Positions per phase just below, at and above the tile width (128).
  for (int64_t l : {int64_t(127), int64_t(128), int64_t(129), int64_t(257)})
    cases.push_back({make_problem(1, 1, 24, 70, 1, {l - 2, 1, 1}, {3, 1, 1}, {1, 1, 1},
                                  {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, true),
                     Layout::kContiguous});
  // Random problems over the argument space, with 8..64 channels per group.
  std::mt19937_64 rng(424242);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t cigs[] = {8, 13, 16, 24, 40, 64};
  const int64_t cogs[] = {1, 7, 16, 64, 65, 100};
  const Layout layouts[] = {Layout::kContiguous, Layout::kChannelsLast, Layout::kGapped,
                            Layout::kPermuted};
  while (cases.size() < 72) {
    Problem p;
    p.spatial_dims = static_cast<int>(pick(1, 3));
    p.groups = pick(1, 3);
    p.in_channels = p.groups * cigs[pick(0, 5)];
    p.out_channels = p.groups * cogs[pick(0, 5)];
    p.batch = pick(1, 3);
    for (int d = 0; d < p.spatial_dims; ++d) {
      p.input_size[d] = p.spatial_dims == 1 ? pick(20, 90) : (p.spatial_dims == 2 ? pick(3, 12) : pick(2, 5));
      p.kernel_size[d] = pick(1, p.spatial_dims == 3 ? 3 : 5);
      p.stride[d] = pick(1, 5);
      p.dilation[d] = pick(1, 3);
      p.padding[d] = pick(0, 3);
      p.output_padding[d] = pick(0, std::max(p.stride[d], p.dilation[d]) - 1);
    }
    p.has_bias = pick(0, 1) == 1;
    try {
      p.validate();
    } catch (const Error&) {
      continue;
    }
    cases.push_back({p, layouts[pick(0, 3)]});
  }
  return cases;
}

const std::vector<Case>& fast_cases() {
  static const std::vector<Case> all = fast_path_cases();
  return all;
}

class CudaFastPath : public ::testing::TestWithParam<int> {};

TEST_P(CudaFastPath, MatchesFloat64Oracle) {
  SKIP_WITHOUT_CUDA();
  const Case& c = fast_cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  // Each tensor-core forward kernel (where it can express the case), then the dispatcher's.
  for (ForwardKernel kernel : {ForwardKernel::kImplicitGemm, ForwardKernel::kImplicitGemmHalo,
                               ForwardKernel::kImplicitGemmTma, ForwardKernel::kImplicitGemmWgmma,
                               ForwardKernel::kGemmFold, ForwardKernel::kAuto}) {
    SCOPED_TRACE("forward kernel " + std::to_string(int(kernel)));
    for (const Precision& precision : kPrecisions) {
      if (precision.dtype == DType::kFloat64) continue;
      check_all_directions(c.problem, c.layout, precision, 104729u * uint64_t(GetParam()) + 3,
                           nullptr, false, kernel);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, CudaFastPath,
                         ::testing::Range(0, static_cast<int>(fast_cases().size()),
                                          quick_mode() ? 6 : 1),
                         indexed_case_name);

// Kernels of the tensor-core forward differ in their shared-memory needs; running a
// small-tile one first must not keep a large-tile one from getting its allowance.
TEST(CudaFastPathOrder, EveryTileSizeInOneProcess) {
  SKIP_WITHOUT_CUDA();
  const Precision tf32 = kPrecisions[1];
  ASSERT_EQ(tf32.math, MathMode::kAllowTF32);
  uint64_t seed = 77;
  for (int64_t cig : {int64_t(8), int64_t(16), int64_t(40), int64_t(64)}) {
    const Problem p = make_problem(2, 1, cig, 64, 1, {6, 7, 1}, {3, 3, 1}, {1, 2, 1},
                                   {1, 1, 0}, {0, 1, 0}, {1, 1, 1}, true);
    SCOPED_TRACE(p.to_string());
    for (const Precision& precision : {tf32, kPrecisions[0], kPrecisions[3], kPrecisions[4]})
      for (ForwardKernel kernel : {ForwardKernel::kImplicitGemm, ForwardKernel::kImplicitGemmHalo,
                                   ForwardKernel::kImplicitGemmTma})
        check_all_directions(p, Layout::kContiguous, precision, ++seed, nullptr, false, kernel);
  }
}

// Strict float32 on tensor cores (split TF32) keeps float32 accuracy on long reductions:
// K = 27 taps x 96 channels (one K loop of 81 steps), in every forward kernel (the wgmma
// kernel sums its K steps outside wgmma for this), within the strict budget (4e-6) of the
// float64 oracle, where one TF32 rounding alone would miss it.
TEST(CudaStrictFloat32, SplitTf32KeepsLongReductionsWithinTheStrictBudget) {
  SKIP_WITHOUT_CUDA();
  const Precision strict = kPrecisions[0];
  ASSERT_EQ(strict.math, MathMode::kStrictFP32);
  const Problem p = make_problem(3, 2, 96, 40, 1, {6, 7, 36}, {3, 3, 3}, {1, 1, 1},
                                 {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, true);
  uint64_t seed = 4242;
  for (ForwardKernel kernel : {ForwardKernel::kImplicitGemm, ForwardKernel::kImplicitGemmHalo,
                               ForwardKernel::kImplicitGemmTma, ForwardKernel::kImplicitGemmWgmma,
                               ForwardKernel::kGemmFold, ForwardKernel::kAuto}) {
    SCOPED_TRACE("forward kernel " + std::to_string(int(kernel)));
    Problem pf = p;
    pf.dtype = DType::kFloat32;
    ExecOptions opt;
    opt.math = strict.math;
    opt.forward_kernel = kernel;
    HostTensor x(pf.input_shape(), pf.tensor_rank(), pf.dtype, Layout::kContiguous);
    DeviceTensor gx(x, nullptr);
    const std::string what = convt::describe_forward(pf, gx.ref, opt);
    // (The wgmma kernel runs split TF32 too, on Hopper; the dispatcher takes it here.)
    const bool any = kernel == ForwardKernel::kImplicitGemmWgmma || kernel == ForwardKernel::kAuto;
    EXPECT_NE(what.find(any ? "3xTF32" : "mma.sync 3xTF32"), std::string::npos) << what;
    if (kernel == ForwardKernel::kGemmFold)
      EXPECT_NE(what.find("GEMM and fold"), std::string::npos) << what;
    check_all_directions(p, Layout::kContiguous, strict, ++seed, nullptr, false, kernel);
  }
}

// ---------------------------------------------------------------------------------------
// GEMM and fold (convt/cuda/gemm_fold_sm80.cuh): one GEMM over the input's positions for
// every (output channel, tap), then the fold of the products into the output. Layers of
// 1-4 output channels a group and some of more (several 64-row tiles of (channel, tap)),
// 1-D to 3-D, strides, dilations, paddings wider than the kernel's reach, output_padding,
// groups, input channels off the 32-channel K step and over several steps, positions off
// the 128-position tile, bias, every layout; every precision against the float64 oracle.
// Each case asserts that GEMM and fold ran.
// ---------------------------------------------------------------------------------------

std::vector<Case> gemm_fold_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // 1-D decoders' last layers: kernel 16 stride 8, kernel 25 stride 4 (output_padding 1).
  add(make_problem(1, 2, 40, 1, 1, {37, 1, 1}, {16, 1, 1}, {8, 1, 1}, {4, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 3, 24, 3, 1, {29, 1, 1}, {25, 1, 1}, {4, 1, 1}, {11, 0, 0},
                   {1, 0, 0}, {1, 1, 1}, false),
      Layout::kGapped);
  // 2-D image outputs: 3 channels, kernel 4 stride 2; 9 x 9 stride 3 (FSRCNN-like).
  add(make_problem(2, 2, 33, 3, 1, {9, 11, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 1, 56, 1, 1, {13, 10, 1}, {9, 9, 1}, {3, 3, 1}, {3, 4, 0}, {2, 1, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  // Groups, dilation, output_padding along W, an input channel count off the K step.
  add(make_problem(2, 3, 90, 4, 2, {7, 12, 1}, {3, 5, 1}, {1, 3, 1}, {2, 1, 0}, {0, 2, 0},
                   {2, 1, 1}, true),
      Layout::kPermuted);
  // A channel count over several K steps, more (channel, tap) rows than one 64-row tile.
  add(make_problem(2, 2, 70, 4, 1, {6, 9, 1}, {5, 5, 1}, {2, 1, 1}, {2, 2, 0}, {1, 0, 0},
                   {1, 1, 1}, true),
      Layout::kRowPadded);
  // Strides wider than the kernel's reach (outputs no tap reaches hold the bias), padding.
  add(make_problem(2, 2, 17, 2, 1, {5, 6, 1}, {2, 3, 1}, {5, 4, 1}, {3, 1, 0}, {4, 3, 0},
                   {1, 1, 1}, true));
  // 3-D: strides, dilation, output_padding; 3 x 27 rows over two row tiles.
  add(make_problem(3, 2, 20, 2, 1, {4, 5, 6}, {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 0, 0},
                   {1, 2, 1}, true));
  add(make_problem(3, 1, 48, 3, 1, {3, 4, 5}, {3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1},
                   {1, 1, 1}, false),
      Layout::kGapped);
  // More output channels (the forced kernel runs them too): 12 x 4 taps, groups of 6.
  add(make_problem(2, 2, 24, 12, 2, {8, 8, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // One tap; one input position; a batch of positions over several 128-position tiles.
  add(make_problem(2, 2, 40, 3, 1, {9, 13, 1}, {1, 1, 1}, {2, 3, 1}, {0, 1, 0}, {1, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 1, 36, 2, 1, {1, 1, 1}, {7, 1, 1}, {3, 1, 1}, {1, 0, 0}, {2, 0, 0},
                   {2, 1, 1}, true));
  add(make_problem(1, 5, 20, 1, 1, {301, 1, 1}, {6, 1, 1}, {3, 1, 1}, {2, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  // Planes of a multiple of 8 positions (the GEMM's cp.async tiles where asked for): 1-D
  // samples ending inside a 128-position tile, groups with a partial K step, 3-D.
  add(make_problem(1, 3, 40, 2, 1, {200, 1, 1}, {8, 1, 1}, {4, 1, 1}, {2, 0, 0}, {1, 0, 0},
                   {1, 1, 1}, true));
  // 1-D: groups, dilation and output_padding; a long row over several blocks of the fold in
  // the GEMM's epilogue (kernel 25, stride 4).
  add(make_problem(1, 2, 96, 4, 2, {264, 1, 1}, {9, 1, 1}, {3, 1, 1}, {5, 0, 0}, {2, 0, 0},
                   {2, 1, 1}, true));
  add(make_problem(1, 2, 40, 1, 1, {1024, 1, 1}, {25, 1, 1}, {4, 1, 1}, {11, 0, 0},
                   {1, 0, 0}, {1, 1, 1}, true));
  add(make_problem(2, 2, 90, 6, 2, {16, 24, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 64, 1, 1, {4, 4, 8}, {2, 3, 3}, {2, 2, 2}, {0, 1, 1}, {1, 1, 1},
                   {1, 1, 1}, false));
  return v;
}

class CudaGemmFold : public ::testing::TestWithParam<int> {};

TEST_P(CudaGemmFold, MatchesFloat64Oracle) {
  SKIP_WITHOUT_CUDA();
  static const std::vector<Case> all = gemm_fold_cases();
  const Case& c = all[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  // The GEMM as the mma.sync gather kernel (CONVT_GEMM_FOLD_PIPE=0), then on cp.async tiles
  // where they run (CONVT_GEMM_FOLD_FUSED=0: contiguous inputs of planes of a multiple of 16
  // bytes), then as by default, with the fold in that GEMM's epilogue where it runs (1-D layers
  // of at most 64 (channel, tap) rows a group).
  const Problem& cp = c.problem;
  const int64_t plane = cp.input_size[0] * cp.input_size[1] * cp.input_size[2];
  const bool one_tile = cp.out_channels_per_group() *
                            cp.kernel_size[0] * cp.kernel_size[1] * cp.kernel_size[2] <= 64;
  const std::pair<const char*, const char*> forms[] = {{"0", "0"}, {"1", "0"}, {"1", "1"}};
  for (const auto& form : forms) {
    const char* pipe = form.first;
    const bool fused = *form.second == '1';
    SCOPED_TRACE(std::string("CONVT_GEMM_FOLD_PIPE=") + pipe + " CONVT_GEMM_FOLD_FUSED=" +
                 form.second);
    const ScopedEnv env("CONVT_GEMM_FOLD_PIPE", pipe);
    const ScopedEnv env_fused("CONVT_GEMM_FOLD_FUSED", form.second);
    for (const Precision& precision : kPrecisions) {
      if (precision.dtype == DType::kFloat64) continue;
      Problem p = c.problem;
      p.dtype = precision.dtype;
      ExecOptions opt;
      opt.math = precision.math;
      opt.forward_kernel = ForwardKernel::kGemmFold;
      HostTensor x(p.input_shape(), p.tensor_rank(), p.dtype, c.layout);
      DeviceTensor gx(x, nullptr);
      const std::string what = convt::describe_forward(p, gx.ref, opt);
      EXPECT_NE(what.find("GEMM and fold"), std::string::npos) << what;
      EXPECT_EQ(what.find("3xTF32") != std::string::npos,
                precision.math == MathMode::kStrictFP32 && p.dtype == DType::kFloat32)
          << what;
      const bool tiles = *pipe == '1' && c.layout == Layout::kContiguous &&
                         plane % (16 / int64_t(convt::dtype_size(p.dtype))) == 0;
      EXPECT_EQ(what.find("cp.async") != std::string::npos, tiles) << what;
      EXPECT_EQ(what.find("epilogue") != std::string::npos,
                tiles && fused && cp.spatial_dims == 1 && one_tile)
          << what;
      check_all_directions(c.problem, c.layout, precision, 6151u * uint64_t(GetParam()) + 5,
                           nullptr, false, ForwardKernel::kGemmFold);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaGemmFold,
                         ::testing::Range(0, static_cast<int>(gemm_fold_cases().size())),
                         indexed_case_name);

// The products and the output on a stream other than the default, into a workspace the
// call reuses, and the weight packed into a weight cache then taken from it: the second
// call's output equals the first's bit for bit (the fold sums in a fixed order).
TEST(CudaGemmFoldCalls, StreamsWeightCacheAndRepeatedCallsAgree) {
  SKIP_WITHOUT_CUDA();
  Problem p = make_problem(2, 3, 45, 3, 1, {10, 14, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0},
                           {0, 0, 0}, {1, 1, 1}, true);
  p.dtype = DType::kBFloat16;
  std::mt19937_64 rng(99);
  CaseTensors t(p, Layout::kContiguous, p.dtype, rng);
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  {
    const DeviceTensor gx(t.x, stream), gw(t.w, stream), gb(t.b, stream), gy(t.y, stream);
    ExecOptions opt;
    opt.stream = stream;
    opt.forward_kernel = ForwardKernel::kGemmFold;
    const convt::WeightRelayout r = convt::weight_relayout(p, gx.ref, opt);
    ASSERT_GT(r.bytes, 0u);
    DeviceBuffer cache(r.bytes);
    Workspace ws(Op::kForward, p, opt);
    opt.weight_cache = cache.get();
    convt::forward(p, gx.ref, gw.ref, &gb.ref, gy.ref, opt);
    HostTensor first(p.output_shape(), p.tensor_rank(), p.dtype, Layout::kContiguous);
    gy.download(first, stream);
    opt.weight_cache_valid = true;
    convt::forward(p, gx.ref, gw.ref, &gb.ref, gy.ref, opt);
    HostTensor second(p.output_shape(), p.tensor_rank(), p.dtype, Layout::kContiguous);
    gy.download(second, stream);
    EXPECT_EQ(first.bytes, second.bytes);
    // (Against the float64 oracle too.)
    Problem p64 = p;
    p64.dtype = DType::kFloat64;
    const HostTensor x64 = to_f64(t.x), w64 = to_f64(t.w), b64 = to_f64(t.b);
    HostTensor y64 = f64_like(p.output_shape(), p.tensor_rank());
    convt::forward(p64, x64.ref, w64.ref, &b64.ref, y64.ref);
    EXPECT_LE(rel_error(second, y64), 1e-2);
  }
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

// ---------------------------------------------------------------------------------------
// The TMA-fed forward (sm_90 and newer): input W a multiple of 8 elements, so that every
// dtype's rows are multiples of 16 bytes. Segments of 32 (float) / 64 (16-bit) positions
// along W: output rows just below, at and above a segment, many short rows per tile
// (segments crossing rows, images and the batch), every phase of strides 2-5 along W and
// H, channel counts off the 16/32 K step and the 32/64 channel tile, groups, dilation,
// padding, output_padding, 1-D/2-D/3-D, bias. Each case asserts that the TMA kernel ran.
// ---------------------------------------------------------------------------------------

std::string tma_unavailable_reason() {
  if (!cuda_unavailable_reason().empty()) return "no CUDA device: " + cuda_unavailable_reason();
  int major = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
             "cudaDeviceGetAttribute");
  if (major < 9) return "the TMA kernel needs compute capability 9.0 or newer";
  return std::string();
}

std::vector<Case> tma_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // 1-D: output lengths around the 32/64-position segments and the 128-position tile.
  for (int64_t l : {int64_t(8), int64_t(24), int64_t(32), int64_t(56), int64_t(64),
                    int64_t(120), int64_t(128)})
    for (int64_t k : {int64_t(1), int64_t(3)})
      add(make_problem(1, 2, 24, 40, 1, {l, 1, 1}, {k, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                       {1, 1, 1}, k == 3));
  // Every phase of strides 2..5 along H and W, kernels that leave phases without taps.
  for (int64_t s = 2; s <= 5; ++s)
    for (int64_t k : {int64_t(1), s + 1, int64_t(7)})
      add(make_problem(2, 2, 16, 48, 1, {5, 16, 1}, {k, k, 1}, {s, s, 1}, {k / 2, 1, 0},
                       {s - 1, 0, 0}, {1, 1, 1}, k != 1));
  // Channel counts off the K step (16/32) and the channel tile (32/64), with groups.
  const int64_t cigs[] = {8, 12, 16, 24, 40, 64};
  const int64_t cogs[] = {8, 32, 33, 64, 65, 100};
  for (int i = 0; i < 6; ++i)
    add(make_problem(2, 3, 2 * cigs[i], 2 * cogs[(i + 2) % 6], 2, {6, 40, 1}, {3, 3, 1},
                     {1, 2, 1}, {1, 1, 0}, {0, 1, 0}, {1, 2, 1}, i % 2 == 0));
  // Dilation, padding, asymmetric kernels, 3-D.
  add(make_problem(2, 2, 32, 64, 1, {9, 48, 1}, {3, 5, 1}, {1, 1, 1}, {2, 4, 0}, {0, 0, 0},
                   {2, 3, 1}, true));
  add(make_problem(2, 1, 16, 16, 1, {4, 8, 1}, {2, 3, 1}, {1, 1, 1}, {1, 3, 0}, {0, 0, 0},
                   {1, 2, 1}, false));
  add(make_problem(3, 2, 32, 32, 4, {6, 7, 16}, {3, 5, 7}, {2, 2, 2}, {1, 2, 3}, {1, 1, 1},
                   {1, 1, 1}, false));
  add(make_problem(3, 1, 48, 24, 1, {5, 6, 32}, {3, 3, 3}, {2, 1, 3}, {1, 0, 2}, {0, 0, 1},
                   {2, 1, 1}, true));
  // Many W taps per box: the planner narrows the K step, then the channel tile, to keep
  // two or three stages (9 and 13 taps, 96 output channels), and wide dilated windows.
  add(make_problem(1, 2, 40, 96, 1, {80, 1, 1}, {9, 1, 1}, {1, 1, 1}, {4, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 1, 24, 80, 1, {3, 40, 1}, {1, 13, 1}, {1, 1, 1}, {0, 6, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  add(make_problem(1, 2, 16, 40, 1, {64, 1, 1}, {5, 1, 1}, {1, 1, 1}, {30, 0, 0}, {0, 0, 0},
                   {20, 1, 1}, true));
  // Many short rows per tile: segments cross rows, depth planes and images.
  add(make_problem(3, 3, 16, 16, 1, {3, 5, 8}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // More tiles than fit on the GPU at once, of phases with and without taps, channel
  // tiles and groups.
  add(make_problem(2, 4, 16, 24, 1, {40, 96, 1}, {3, 3, 1}, {3, 3, 1}, {1, 1, 0}, {2, 1, 0},
                   {2, 2, 1}, true));
  add(make_problem(3, 4, 32, 80, 4, {8, 12, 48}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 0, 1},
                   {1, 1, 1}, false));
  // W phases without taps (with CONVT_TMA_W_OWNERS=1 written by the phase with taps before
  // them): stride 4 with dilation 2 (owners 1 and 3; phase 0 wraps to the previous
  // position, except for the first output of a row), stride 5 like kb81, output_padding at
  // the row's end.
  add(make_problem(2, 2, 16, 40, 1, {6, 24, 1}, {1, 2, 1}, {1, 4, 1}, {0, 1, 0}, {0, 3, 0},
                   {1, 2, 1}, true));
  add(make_problem(3, 2, 16, 24, 2, {3, 4, 16}, {2, 3, 3}, {1, 2, 5}, {0, 1, 1}, {0, 1, 4},
                   {1, 1, 2}, false));
  // Rows whose H or D phase has no tap (with CONVT_TMA_W_OWNERS=1 written whole by the
  // first W phase's block): like kb75 (every W phase has taps), and 3-D with tap-less depth
  // planes and W phases.
  add(make_problem(2, 2, 32, 32, 4, {6, 32, 1}, {3, 5, 1}, {2, 3, 1}, {1, 2, 0}, {1, 0, 0},
                   {2, 1, 1}, true));
  add(make_problem(3, 1, 8, 16, 1, {4, 5, 16}, {2, 2, 1}, {3, 1, 2}, {0, 0, 0}, {2, 0, 1},
                   {1, 1, 1}, false));
  // Row-padded input (W contiguous, padded H/C/N strides), also with groups: the batch
  // stride then does not join batch and groups, and the kernel must decline.
  add(make_problem(2, 2, 16, 32, 1, {7, 24, 1}, {3, 3, 1}, {2, 1, 1}, {1, 1, 0}, {1, 0, 0},
                   {1, 1, 1}, true),
      Layout::kRowPadded);
  return v;
}

const std::vector<Case>& tma_case_list() {
  static const std::vector<Case> all = tma_cases();
  return all;
}

// Case `index` of tma_case_list() in every precision with the TMA kernel asked for:
// describe_forward names it (mma.sync; wgmma when `wgmma` but for split TF32, see
// CudaTmaWgmma; 3xTF32 for strict float32 only), and every direction matches the oracle.
void check_tma_case(int index, bool wgmma) {
  const Case& c = tma_case_list()[static_cast<size_t>(index)];
  SCOPED_TRACE(c.name());
  for (const Precision& precision : kPrecisions) {
    if (precision.dtype == DType::kFloat64) continue;
    Problem p = c.problem;
    p.dtype = precision.dtype;
    ExecOptions opt;
    opt.math = precision.math;
    opt.forward_kernel = ForwardKernel::kImplicitGemmTma;
    HostTensor x(p.input_shape(), p.tensor_rank(), p.dtype, c.layout);
    DeviceTensor gx(x, nullptr);
    const std::string what = convt::describe_forward(p, gx.ref, opt);
    // Strict float32 runs the same kernel in split TF32 (on mma.sync); no other mode does.
    const bool split = p.dtype == DType::kFloat32 && precision.math == MathMode::kStrictFP32;
    EXPECT_EQ(what.find("3xTF32") != std::string::npos, split) << precision.name << ": " << what;
    const bool on_wgmma = wgmma && !split;
    EXPECT_NE(what.find(on_wgmma ? "TMA + wgmma" : "TMA + mma.sync"), std::string::npos)
        << precision.name << ": " << what;
    if (wgmma && !on_wgmma) continue;  // split TF32 runs mma.sync either way (CudaTmaPath)
    check_all_directions(c.problem, c.layout, precision,
                         (wgmma ? 104729u : 7919u) * uint64_t(index) + 11, nullptr, false,
                         ForwardKernel::kImplicitGemmTma);
  }
}


class CudaTmaPath : public ::testing::TestWithParam<int> {};

TEST_P(CudaTmaPath, MatchesFloat64Oracle) {
  const std::string reason = tma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  check_tma_case(GetParam(), false);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaTmaPath,
                         ::testing::Range(0, static_cast<int>(tma_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// The same cases on wgmma (CONVT_TMA_MMA=wgmma, sm_90a builds; TF32 and 16-bit types):
// its weight packing (canonical K-major core matrices), the warpgroup's rows-to-positions
// mapping and its epilogue.
class CudaTmaWgmma : public ::testing::TestWithParam<int> {};

TEST_P(CudaTmaWgmma, MatchesFloat64Oracle) {
  const std::string reason = tma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv env("CONVT_TMA_MMA", "wgmma");
  check_tma_case(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaTmaWgmma,
                         ::testing::Range(0, static_cast<int>(tma_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// The same cases with only the W phases that have taps running, each writing the bias of
// the tap-less outputs after its own, and rows whose D or H phase has no tap written whole
// by one block (CONVT_TMA_W_OWNERS=1, off by default: see tma_w_owners_requested).
class CudaTmaOwners : public ::testing::TestWithParam<int> {};

TEST_P(CudaTmaOwners, MatchesFloat64Oracle) {
  const std::string reason = tma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv env("CONVT_TMA_W_OWNERS", "1");
  check_tma_case(GetParam(), false);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaTmaOwners,
                         ::testing::Range(0, static_cast<int>(tma_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// ---------------------------------------------------------------------------------------
// The persistent wgmma kernel (sm_90a builds on compute capability 9.0): every TMA case
// plus tiles of its own kind: rows wider than a box (column segments), several output
// rows per tile (each N it is built for), K steps that split the H taps, channel tiles
// past 64, more tiles than resident blocks (the tile counter), channels_last input.
// Strict float32 runs it in split TF32 (three wgmma per step) where two such stages fit,
// else the TMA kernel's split TF32, and says which (CudaWgmmaPathSplit.StrictFloat32RunsOnItWhereTwoStagesFit
// checks that few cases fall back).
// ---------------------------------------------------------------------------------------

std::string wgmma_unavailable_reason() {
  const std::string tma = tma_unavailable_reason();
  if (!tma.empty()) return tma;
  int major = 0, minor = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
             "cudaDeviceGetAttribute");
  cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0),
             "cudaDeviceGetAttribute");
  if (major != 9 || minor != 0) return "the wgmma kernel is sm_90a code (compute capability 9.0)";
  return std::string();
}

std::vector<Case> wgmma_cases() {
  std::vector<Case> v = tma_case_list();
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // 1-D rows longer than a box: column segments, the last one partial.
  add(make_problem(1, 3, 24, 72, 1, {1000, 1, 1}, {3, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 2, 16, 40, 1, {700, 1, 1}, {5, 1, 1}, {2, 1, 1}, {2, 0, 0}, {1, 0, 0},
                   {3, 1, 1}, false));
  // 2-D rows of 40..300 outputs: 1-6 output rows per tile, every N the planner can pick;
  // seven H taps split over K steps with 48 input channels; 130 output channels.
  for (int64_t w : {int64_t(38), int64_t(62), int64_t(100), int64_t(150), int64_t(298)})
    add(make_problem(2, 2, 32, 48, 1, {9, w, 1}, {3, 3, 1}, {1, 1, 1}, {0, 1, 0}, {0, 0, 0},
                     {1, 1, 1}, w % 4 == 2));
  add(make_problem(2, 2, 48, 130, 1, {12, 50, 1}, {7, 5, 1}, {1, 1, 1}, {3, 2, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Outputs whose pairs of adjacent positions are not aligned for one store (the stores by
  // runs of adjacent outputs): an odd channel stride (9 x 11), rows of an odd width in an
  // even one (10 x 11, 7 x 8 x 9); position-major and channel-major tiles.
  add(make_problem(2, 2, 32, 16, 1, {7, 9, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 32, 64, 1, {7, 9, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 32, 64, 1, {8, 9, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  add(make_problem(3, 2, 16, 24, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  // More tiles than resident blocks: the persistent blocks take several tiles each.
  add(make_problem(2, 8, 16, 64, 1, {40, 300, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 4, 16, 32, 2, {10, 12, 20}, {3, 3, 3}, {2, 1, 2}, {1, 1, 1}, {1, 0, 1},
                   {1, 1, 1}, true));
  // W strides above 1: tap-less W phases (stride 2 and 5 with dilation 2), a last column
  // segment that only some phases reach (output_padding), several rows per tile, two
  // channel tiles, groups, a 3-D stride of 4 along W.
  add(make_problem(1, 2, 32, 64, 1, {3000, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {0, 0, 0},
                   {2, 1, 1}, true));
  add(make_problem(1, 2, 16, 24, 1, {517, 1, 1}, {5, 1, 1}, {3, 1, 1}, {1, 0, 0}, {2, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 32, 70, 1, {9, 40, 1}, {3, 3, 1}, {2, 5, 1}, {1, 1, 0}, {1, 0, 0},
                   {1, 2, 1}, true));
  add(make_problem(2, 3, 16, 16, 1, {20, 11, 1}, {3, 4, 1}, {1, 3, 1}, {1, 1, 0}, {0, 2, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 32, 32, 2, {5, 6, 30}, {3, 3, 5}, {2, 2, 4}, {1, 1, 2}, {0, 1, 3},
                   {1, 1, 1}, false));
  // channels_last input (the copy reads any strides).
  add(make_problem(2, 2, 32, 64, 1, {10, 24, 1}, {3, 3, 1}, {2, 1, 1}, {1, 1, 0}, {1, 0, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  // Narrow groups (position-major tiles): a generator's last layer (3 output channels,
  // kernel 4, stride 2), one output channel, 40 channels in two groups of 20.
  add(make_problem(2, 2, 64, 3, 1, {16, 24, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 3, 16, 1, 1, {600, 1, 1}, {7, 1, 1}, {1, 1, 1}, {3, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 32, 40, 2, {6, 9, 21}, {3, 3, 3}, {1, 1, 1}, {1, 0, 1}, {0, 0, 0},
                   {1, 2, 1}, true));
  return v;
}

const std::vector<Case>& wgmma_case_list() {
  static const std::vector<Case> all = wgmma_cases();
  return all;
}

// What describe_forward says the forward of `problem` runs in `precision` with the wgmma
// kernel asked for, on an input of `layout`.
std::string describe_wgmma_forward(const Problem& problem, const Precision& precision,
                                   Layout layout) {
  Problem p = problem;
  p.dtype = precision.dtype;
  ExecOptions opt;
  opt.math = precision.math;
  opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
  HostTensor x(p.input_shape(), p.tensor_rank(), p.dtype, layout);
  DeviceTensor gx(x, nullptr);
  return convt::describe_forward(p, gx.ref, opt);
}

class CudaWgmmaPath : public ::testing::TestWithParam<int> {};

// Runs case c with the wgmma kernel asked for, in every precision but float64, against the
// float64 oracle (seeded with `seed`); expect(precision, split, what) checks what
// describe_forward says runs (split: strict float32, which runs split TF32).
template <typename Expect>
void check_wgmma_case(const Case& c, uint64_t seed, Expect expect) {
  SCOPED_TRACE(c.name());
  // (These small cases are shaped for the tiles they exercise, every N among them: with the
  // N that fills the machine, CudaWgmmaFill, most would run 128 positions.)
  const ScopedEnv fill("CONVT_WG_FILL", "0");
  for (const Precision& precision : kPrecisions) {
    if (precision.dtype == DType::kFloat64) continue;
    const std::string what = describe_wgmma_forward(c.problem, precision, c.layout);
    expect(precision,
           precision.dtype == DType::kFloat32 && precision.math == MathMode::kStrictFP32, what);
    check_all_directions(c.problem, c.layout, precision, seed, nullptr, false,
                         ForwardKernel::kImplicitGemmWgmma);
  }
}

// What check_wgmma_case expects by default: the wgmma kernel, or in strict float32 split
// TF32 (split TF32 doubles a stage: where two no longer fit, the TMA kernel's split runs).
void expect_wgmma_kernel(const Precision& precision, bool split, const std::string& what) {
  EXPECT_NE(what.find(split ? "3xTF32" : "wgmma persistent"), std::string::npos)
      << precision.name << ": " << what;
}

TEST_P(CudaWgmmaPath, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = wgmma_case_list()[static_cast<size_t>(GetParam())];
  check_wgmma_case(c, 15485863u * uint64_t(GetParam()) + 5, expect_wgmma_kernel);
}

// Planes stacked in a tile (ImplicitGemmFpropPlan::wg_stack): phases whose whole (H, W)
// plane fits a box several times over put several samples (1-D and 2-D problems) or D
// positions (3-D) in one tile. Batches that leave the last group partial, phases of unequal
// extents, position-major and channel-major tiles, groups, split TF32 (strict float32, its
// residual copies as further samples), a channels_last input (taking the copy).
std::vector<Case> stack_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // A DCGAN-like layer: 4 x 4 inputs, kernel 4, stride 2, 32 output channels
  // (position-major), 5 samples.
  add(make_problem(2, 5, 64, 32, 1, {4, 4, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Channel-major, 3 x 5 inputs, stride 1, 7 samples.
  add(make_problem(2, 7, 32, 64, 1, {3, 5, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Two groups of 32 -> 64 channels, no bias.
  add(make_problem(2, 4, 64, 128, 2, {4, 4, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  // Phases of 5 and 4 output rows (kernel 3, stride 2 along H, padding 1: 9 x 5).
  add(make_problem(2, 6, 48, 40, 1, {5, 5, 1}, {3, 3, 1}, {2, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 1-D, a HiFi-GAN-like stride of 8 with kernel 16 over 20 inputs, 6 samples.
  add(make_problem(1, 6, 32, 48, 1, {20, 1, 1}, {16, 1, 1}, {8, 1, 1}, {4, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 3-D: D positions stacked (6 x 3 x 3 inputs, stride 2, output_padding), and a video-GAN-
  // like 2 x 4 x 4 input.
  add(make_problem(3, 2, 32, 64, 1, {6, 3, 3}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1},
                   {1, 1, 1}, true));
  add(make_problem(3, 3, 64, 32, 1, {2, 4, 4}, {4, 4, 4}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0},
                   {1, 1, 1}, false));
  // channels_last input of the DCGAN-like layer.
  add(make_problem(2, 5, 64, 32, 1, {4, 4, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  // A DCGAN-like first layer: 1 x 1 inputs, kernel 4, stride 1 (one H tap a K step, so that
  // more samples stack), 100 channels padded to the K step, 9 samples.
  add(make_problem(2, 9, 100, 64, 1, {1, 1, 1}, {4, 4, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  return v;
}

class CudaWgmmaStack : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaStack, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  static const std::vector<Case> all = stack_cases();
  const Case& c = all[static_cast<size_t>(GetParam())];
  check_wgmma_case(c, 104729u * uint64_t(GetParam()) + 7,
                   [&](const Precision& precision, bool split, const std::string& what) {
                     expect_wgmma_kernel(precision, split, what);
                     if (!split) {
                       const char* stacked = c.problem.spatial_dims == 3 ? "D planes a tile"
                                                                         : "samples a tile";
                       EXPECT_NE(what.find(stacked), std::string::npos)
                           << precision.name << ": " << what;
                     }
                   });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaStack,
                         ::testing::Range(0, static_cast<int>(stack_cases().size())),
                         indexed_case_name);

// Strides above the producer's phase tables (wg::kTapTable = 8 phases a dimension), whose
// taps and extents the producer computes per tile instead: along H (9), along D (10, with H
// stride 2), and along W (10 and 12, samples stacked in a tile), every precision.
std::vector<Case> large_stride_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p) { v.push_back({p, Layout::kContiguous}); };
  add(make_problem(2, 3, 40, 48, 1, {6, 20, 1}, {9, 3, 1}, {9, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 32, 64, 1, {3, 5, 12}, {12, 3, 3}, {10, 2, 1}, {1, 1, 1}, {0, 1, 0},
                   {1, 1, 1}, false));
  add(make_problem(1, 4, 64, 32, 1, {30, 1, 1}, {12, 1, 1}, {12, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 32, 64, 1, {5, 9, 1}, {3, 20, 1}, {1, 10, 1}, {1, 5, 0}, {0, 3, 0},
                   {1, 1, 1}, true));
  return v;
}

class CudaWgmmaLargeStrides : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaLargeStrides, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  static const std::vector<Case> all = large_stride_cases();
  check_wgmma_case(all[static_cast<size_t>(GetParam())], 7919u * uint64_t(GetParam()) + 3,
                   expect_wgmma_kernel);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaLargeStrides,
                         ::testing::Range(0, static_cast<int>(large_stride_cases().size())),
                         indexed_case_name);

// y against the float64 oracle y64 where both hold infinities and NaN: an output the oracle
// makes NaN is NaN, one it makes +-inf is that infinity, and every other output is finite
// and within budget x the largest finite oracle output. The oracle must hold at least one
// infinity and one NaN (else the case would test nothing of them).
void expect_non_finite_like_oracle(const HostTensor& y64, const HostTensor& y, double budget) {
  double max_ref = 0;
  int64_t infs = 0, nans = 0;
  for (int64_t i = 0; i < y64.numel(); ++i) {
    const double o = y64.get(i);
    if (std::isfinite(o)) max_ref = std::max(max_ref, std::fabs(o));
    infs += std::isinf(o) ? 1 : 0;
    nans += std::isnan(o) ? 1 : 0;
  }
  ASSERT_GT(infs, 0);
  ASSERT_GT(nans, 0);
  for (int64_t i = 0; i < y64.numel(); ++i) {
    const double o = y64.get(i), v = y.get(i);
    if (std::isnan(o)) {
      ASSERT_TRUE(std::isnan(v)) << "output " << i << ": " << v << ", oracle NaN";
    } else if (std::isinf(o)) {
      ASSERT_EQ(v, o) << "output " << i;
    } else {
      ASSERT_TRUE(std::isfinite(v)) << "output " << i << ": " << v << ", oracle " << o;
      ASSERT_LE(std::fabs(v - o), budget * max_ref) << "output " << i;
    }
  }
}

// Groups merged (ImplicitGemmFpropPlan::wg_gmerge, CONVT_WG_GMERGE=m): m consecutive groups
// run as one with a block-diagonal weight. Position-major merged tiles (8 -> 8 groups by 2
// and 4, 3-D with strides and output padding like kb72), channel-major ones (8 -> 16 by 4,
// 64 channels), zeros inserted along W with them (W stride 3, dilation, like kb75), a 1-D
// layer of six groups of 8 -> 4 by 3 and 6, depthwise by 8 and 32, 3-D groups of 2 -> 3
// by 4, bias, a channels_last and a permuted input (which such plans copy), every
// precision against the float64 oracle.
struct MergeCase {
  Case c;
  const char* m;
};

std::vector<MergeCase> group_merge_cases() {
  std::vector<MergeCase> v;
  auto add = [&](const char* m, Problem p, Layout layout = Layout::kContiguous) {
    v.push_back({{p, layout}, m});
  };
  const Problem two_d = make_problem(2, 2, 32, 32, 4, {12, 20, 1}, {3, 3, 1}, {1, 1, 1},
                                     {1, 1, 0}, {0, 0, 0}, {1, 1, 1}, true);
  add("2", two_d);
  add("4", two_d);
  add("4", two_d, Layout::kChannelsLast);
  add("2", make_problem(3, 2, 32, 32, 4, {3, 6, 10}, {3, 5, 7}, {2, 2, 2}, {1, 2, 3}, {1, 1, 1},
                        {1, 1, 1}, false));
  add("4", make_problem(3, 2, 32, 32, 4, {3, 6, 10}, {3, 5, 7}, {2, 2, 2}, {1, 2, 3}, {1, 1, 1},
                        {1, 1, 1}, true),
      Layout::kPermuted);
  const Problem kb75 = make_problem(2, 2, 32, 64, 4, {9, 14, 1}, {3, 5, 1}, {2, 3, 1},
                                    {1, 2, 0}, {0, 0, 0}, {2, 1, 1}, false);
  add("2", kb75);
  add("4", kb75);
  const Problem six = make_problem(1, 3, 48, 24, 6, {50, 1, 1}, {5, 1, 1}, {1, 1, 1},
                                   {2, 0, 0}, {0, 0, 0}, {1, 1, 1}, true);
  add("3", six);
  add("6", six);
  // Depthwise (no implicit-GEMM plan of its own: the merged plan runs on the wgmma kernel
  // only) and groups of 2 input channels.
  const Problem dw = make_problem(2, 2, 32, 32, 32, {8, 10, 1}, {4, 4, 1}, {2, 2, 1},
                                  {1, 1, 0}, {0, 0, 0}, {1, 1, 1}, true);
  add("8", dw);
  add("32", dw);
  add("4", make_problem(3, 2, 16, 24, 8, {3, 4, 6}, {3, 3, 3}, {2, 1, 2}, {1, 1, 1},
                        {1, 0, 1}, {1, 1, 1}, false));
  return v;
}

class CudaWgmmaGroupMerge : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaGroupMerge, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  static const std::vector<MergeCase> all = group_merge_cases();
  const MergeCase& mc = all[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(std::string("CONVT_WG_GMERGE=") + mc.m);
  const ScopedEnv env("CONVT_WG_GMERGE", mc.m);
  const std::string merged = std::string("groups merged ") + mc.m + " at a time";
  check_wgmma_case(mc.c, 104729u * uint64_t(GetParam()) + 11,
                   [&](const Precision& precision, bool split, const std::string& what) {
                     expect_wgmma_kernel(precision, split, what);
                     EXPECT_NE(what.find(merged), std::string::npos)
                         << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaGroupMerge,
                         ::testing::Range(0, static_cast<int>(group_merge_cases().size())),
                         indexed_case_name);

// Fewer than 8 input channels with groups of one on the wgmma kernel, the K step's channels
// padded with zeros (CONVT_WG_FEW=1): an RGB image or volume into 16 channels, strided and
// not, 1 -> 32 and 4 -> 64 stems, a 1-D 2 -> 64 layer, odd channel counts with dilation
// and output padding, a 3-D layer of mixed strides; every layout (the input copy, the
// boxes of x transposed in the kernel, channels_last), every precision and direction
// (backward on the direct kernels) against the float64 oracle, as the dispatch plans them.
std::vector<Case> few_channel_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  const Problem rgb2 = make_problem(2, 2, 3, 16, 1, {9, 16, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0},
                                    {1, 1, 0}, {1, 1, 1}, true);
  add(rgb2);
  add(rgb2, Layout::kPermuted);
  add(rgb2, Layout::kChannelsLast);
  add(make_problem(2, 3, 3, 16, 1, {10, 13, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  add(make_problem(3, 2, 3, 16, 1, {3, 5, 9}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 3, 8, 1, {4, 5, 6}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, false),
      Layout::kPermuted);
  add(make_problem(2, 4, 1, 32, 1, {8, 8, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 4, 64, 1, {6, 7, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 2, 2, 64, 1, {50, 1, 1}, {8, 1, 1}, {4, 1, 1}, {2, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 7, 20, 1, {6, 9, 1}, {5, 3, 1}, {3, 2, 1}, {2, 1, 0}, {1, 1, 0},
                   {2, 1, 1}, true));
  add(make_problem(3, 2, 5, 12, 1, {3, 4, 7}, {2, 3, 4}, {1, 2, 3}, {0, 1, 1}, {0, 1, 2},
                   {1, 1, 1}, false));
  add(make_problem(2, 3, 1, 3, 1, {7, 11, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  return v;
}

class CudaWgmmaFewChannels : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaFewChannels, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  static const std::vector<Case> all = few_channel_cases();
  const Case& c = all[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  const ScopedEnv few("CONVT_WG_FEW", "1");
  const std::string padded = std::to_string(c.problem.in_channels) + " input channels padded to ";
  for (const Precision& precision : kPrecisions) {
    if (precision.dtype == DType::kFloat64) continue;
    const std::string what = describe_wgmma_forward(c.problem, precision, c.layout);
    EXPECT_NE(what.find("wgmma persistent"), std::string::npos) << precision.name << ": " << what;
    EXPECT_NE(what.find(padded), std::string::npos) << precision.name << ": " << what;
    check_all_directions(c.problem, c.layout, precision, 7919u * uint64_t(GetParam()) + 3);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaFewChannels,
                         ::testing::Range(0, static_cast<int>(few_channel_cases().size())),
                         indexed_case_name);

// Fuzzed 2-D and 3-D layers of 1, 2 or 4 input channels a group (small_group_cases: 8-32
// groups, random kernel, stride, padding, dilation, output padding, every layout) run as
// the dispatch plans them, their groups merged on the wgmma kernel where the planner merges
// them (a third at least in every dtype: CudaPlanner.SmallGroupCasesMergeOften) and the
// direct kernel elsewhere, every precision and direction against the float64 oracle.
class CudaSmallGroupsDispatched : public ::testing::TestWithParam<int> {};

TEST_P(CudaSmallGroupsDispatched, MatchesFloat64Oracle) {
  SKIP_WITHOUT_CUDA();
  static const std::vector<Case> all = small_group_cases();
  const Case& c = all[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(c.name());
  for (const Precision& precision : kPrecisions)
    check_all_directions(c.problem, c.layout, precision, 6151u * uint64_t(GetParam()) + 5);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaSmallGroupsDispatched,
                         ::testing::Range(0, static_cast<int>(small_group_cases().size())),
                         indexed_case_name);

// With groups merged, an infinite or NaN input must not reach the other groups of its
// merged group through their zero weights (inf * 0 = NaN): the input copy flags it and the
// direct kernel recomputes the output. Infinities and a NaN in input channels 9, 15 and 17,
// an infinite weight of input channel 26, four groups of 8 and 32 depthwise ones: every
// output is what the float64 oracle gives (output channels 0-7 all finite).
TEST(CudaWgmmaGroupMerge, NonFiniteInputsStayInTheirGroups) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const double inf = std::numeric_limits<double>::infinity();
  uint64_t seed = 4242;
  // (Four groups of 8 merged by 2 and 4; 32 depthwise groups merged by 8.)
  for (const auto& [groups, m] : std::vector<std::pair<int64_t, const char*>>{
           {4, "2"}, {4, "4"}, {32, "8"}}) {
    const Problem base = make_problem(2, 2, 32, 32, groups, {6, 16, 1}, {3, 3, 1}, {1, 2, 1},
                                      {1, 1, 0}, {0, 1, 0}, {1, 1, 1}, true);
    const int64_t cog = 32 / groups;
    const ScopedEnv env("CONVT_WG_GMERGE", m);
    for (const Precision& precision : kPrecisions) {
      if (precision.dtype == DType::kFloat64) continue;
      Problem p = base;
      p.dtype = precision.dtype;
      SCOPED_TRACE(std::string(precision.name) + ", CONVT_WG_GMERGE=" + m);
      std::mt19937_64 rng(++seed);
      CaseTensors t(p, Layout::kContiguous, p.dtype, rng);
      const int64_t plane = p.input_size[0] * p.input_size[1];
      t.x.set((0 * 32 + 9) * plane + 2 * 16 + 5, inf);            // n 0, c 9 (group 1)
      t.x.set((1 * 32 + 15) * plane + 1 * 16 + 9, -inf);          // n 1, c 15 (group 1)
      t.x.set((1 * 32 + 17) * plane + 4 * 16 + 0, std::nan(""));  // n 1, c 17 (group 2)
      t.w.set(((26 * cog + cog / 4) * 3 + 1) * 3 + 1, inf);       // ci 26 (group 3 / 26)
      Problem p64 = p;
      p64.dtype = DType::kFloat64;
      const HostTensor x64 = to_f64(t.x), w64 = to_f64(t.w), b64 = to_f64(t.b);
      HostTensor y64 = f64_like(p.output_shape(), p.tensor_rank());
      convt::forward(p64, x64.ref, w64.ref, &b64.ref, y64.ref);

      const DeviceTensor gx(t.x, nullptr), gw(t.w, nullptr), gb(t.b, nullptr), gy(t.y, nullptr);
      ExecOptions opt;
      opt.math = precision.math;
      opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
      EXPECT_NE(convt::describe_forward(p, gx.ref, opt).find("groups merged"),
                std::string::npos);
      Workspace ws(Op::kForward, p, opt);
      convt::forward(p, gx.ref, gw.ref, &gb.ref, gy.ref, opt);
      gy.download(t.y, nullptr);

      const int64_t out_plane = p.output_size(0) * p.output_size(1);
      for (int64_t i = 0; i < y64.numel(); ++i)
        if ((i / out_plane) % 32 < 8) ASSERT_TRUE(std::isfinite(y64.get(i))) << "output " << i;
      expect_non_finite_like_oracle(y64, t.y, precision.budget);
    }
  }
}

// Runs case c as check_wgmma_case does with each tile N the two-warpgroup kernels are built
// for (the planner's, then 128 and 192: CONVT_WG_N caps it), expecting `what` in the
// description of every precision but strict float32 (split TF32 runs its own tiles).
void check_two_warpgroup_case(const Case& c, uint64_t seed, const char* what_text) {
  // (The W phase pairs on channel-major tiles would take the stride-2 cases.)
  const ScopedEnv no_pairs("CONVT_WG_CMPAIRS", "0");
  for (const char* n : {"", "128", "192"}) {
    SCOPED_TRACE(std::string("CONVT_WG_N=") + n);
    const ScopedEnv cap("CONVT_WG_N", n);
    check_wgmma_case(c, seed,
                     [&](const Precision& precision, bool split, const std::string& what) {
                       expect_wgmma_kernel(precision, split, what);
                       if (!split)
                         EXPECT_NE(what.find(what_text), std::string::npos)
                             << precision.name << ": " << what;
                     });
    if (quick_mode()) break;
  }
}

// Two consumer warpgroups (ImplicitGemmFpropPlan::wg_coop, CONVT_WG_COOP=1): channel-major
// tiles of 128 channels whose warpgroups share the stage's box, each with the weight tiles of
// its 64 channels. Groups of two 64-channel tiles and of more, a second warpgroup with fewer
// channels than 64 (100 = 64 + 36), bias, strides with their phases, dilation, planes stacked
// in a tile, 1-D, 3-D, groups, a channels_last input; each tile N they are built for (128,
// 192, 256). Strict float32 (split TF32) has no such tile: it runs its own.
std::vector<Case> coop_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // 2-D, stride 1, 32 -> 128, kernel 3, 12 x 40.
  add(make_problem(2, 2, 32, 128, 1, {12, 40, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // A DCGAN-like layer: 4 x 4 inputs, kernel 4, stride 2, 64 -> 128, 5 samples (stacked).
  add(make_problem(2, 5, 64, 128, 1, {4, 4, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 48 -> 100 (the second warpgroup's 36 channels), kernel 3 x 5, dilation 2 along H.
  add(make_problem(2, 2, 48, 100, 1, {9, 20, 1}, {3, 5, 1}, {1, 1, 1}, {2, 1, 0}, {0, 0, 0},
                   {2, 1, 1}, true));
  // Two groups of 32 -> 128, kernel 3, stride 2, output_padding 1, no bias.
  add(make_problem(2, 2, 64, 256, 2, {6, 7, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, false));
  // 256 output channels (two tiles of 128), kernel 2, stride 2 (one tap a phase).
  add(make_problem(2, 3, 64, 256, 1, {8, 8, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 1-D, 128 -> 128, kernel 3, 600 positions (kb64-like).
  add(make_problem(1, 3, 128, 128, 1, {600, 1, 1}, {3, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 3-D, 32 -> 128, kernel 3, 4 x 5 x 6.
  add(make_problem(3, 2, 32, 128, 1, {4, 5, 6}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // channels_last, 64 -> 128, kernel 3, 10 x 33.
  add(make_problem(2, 2, 64, 128, 1, {10, 33, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  return v;
}

class CudaWgmmaCoop : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaCoop, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv coop("CONVT_WG_COOP", "1");
  static const std::vector<Case> all = coop_cases();
  check_two_warpgroup_case(all[static_cast<size_t>(GetParam())], 7919u * uint64_t(GetParam()) + 3,
                           "128 channels (two warpgroups)");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaCoop,
                         ::testing::Range(0, static_cast<int>(coop_cases().size())),
                         indexed_case_name);

// Two consumer warpgroups sharing the weight tiles (ImplicitGemmFpropPlan::wg_coop_n,
// CONVT_WG_COOP_N=1): tiles of 64 channels over twice the rows, each warpgroup with a box
// of its own. Groups of one 64-channel tile (64, 48 channels) and of three (160: the last
// of 32), a row count that leaves the second warpgroup's rows empty in the last row group,
// bias, strides with their phases, dilation, zeros inserted along W, 3-D, groups, a
// channels_last input; each tile N they are built for (128, 192, 256). Strict float32
// (split TF32) runs its own tiles.
std::vector<Case> coop_n_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // kb57-like: 2-D 64 -> 64, kernel 3, padding 1, 12 x 40.
  add(make_problem(2, 2, 64, 64, 1, {12, 40, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // kb65-like: kernel 3 x 7, padding (1, 3), 9 rows (an odd count of row groups).
  add(make_problem(2, 1, 64, 64, 1, {9, 50, 1}, {3, 7, 1}, {1, 1, 1}, {1, 3, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // kb61-like: 3-D 48 -> 48, kernel 3, 5 x 6 x 7.
  add(make_problem(3, 2, 48, 48, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // kb68-like: 3-D 32 -> 64, kernel 3 x 5 x 5, 4 x 6 x 9.
  add(make_problem(3, 1, 32, 64, 1, {4, 6, 9}, {3, 5, 5}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // kb77-like: 3-D stride 2, padding 1, dilation 2, kernel 3.
  add(make_problem(3, 2, 32, 64, 1, {4, 5, 6}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0},
                   {2, 2, 2}, true));
  // 160 output channels (three tiles of 64, the last of 32), kernel 3, stride 2, output
  // padding 1, no bias.
  add(make_problem(2, 2, 64, 160, 1, {7, 9, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, false));
  // Two groups of 64 -> 64, kernel 3, 6 x 20.
  add(make_problem(2, 2, 128, 128, 2, {6, 20, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // channels_last, 64 -> 64, kernel 3, 10 x 33.
  add(make_problem(2, 2, 64, 64, 1, {10, 33, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  return v;
}

class CudaWgmmaCoopN : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaCoopN, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv coop_n("CONVT_WG_COOP_N", "1");
  static const std::vector<Case> all = coop_n_cases();
  check_two_warpgroup_case(all[static_cast<size_t>(GetParam())],
                           7211u * uint64_t(GetParam()) + 5,
                           "two warpgroups sharing the weight tiles");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaCoopN,
                         ::testing::Range(0, static_cast<int>(coop_n_cases().size())),
                         indexed_case_name);

// Two consumer warpgroups over the input transposed in the kernel (CONVT_WG_XP_COOP=1 with
// CONVT_WG_COOP=1 and CONVT_WG_XP=1: ImplicitGemmFpropPlan::wg_coop with wg_xp): the
// transposer warp fills each stage's box once for both warpgroups. NC... inputs whose rows
// a tensor map reads in place (W a multiple of 16 bytes); groups of two 64-channel tiles and
// of more, a second warpgroup of fewer than 64 channels (100 = 64 + 36), bias, dilation,
// 1-D, 3-D, groups; each tile N they are built for (128, 192, 256). Strict float32 (split
// TF32) runs its own tiles.
std::vector<Case> xp_coop_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p) { v.push_back({p, Layout::kContiguous}); };
  // kb64-like: 1-D, 128 -> 128, kernel 3, 600 positions.
  add(make_problem(1, 3, 128, 128, 1, {600, 1, 1}, {3, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 2-D, 32 -> 128, kernel 3, 12 x 40.
  add(make_problem(2, 2, 32, 128, 1, {12, 40, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 48 -> 100 (the second warpgroup's 36 channels), kernel 3 x 5, dilation 2 along H.
  add(make_problem(2, 2, 48, 100, 1, {9, 40, 1}, {3, 5, 1}, {1, 1, 1}, {2, 1, 0}, {0, 0, 0},
                   {2, 1, 1}, true));
  // 3-D, 32 -> 128, kernel 3, 3 x 12 x 40.
  add(make_problem(3, 1, 32, 128, 1, {3, 12, 40}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Two groups of 32 -> 128, kernel 3, padding 1, no bias.
  add(make_problem(2, 2, 64, 256, 2, {10, 24, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  // 256 output channels (two tiles of 128), 64 input channels, kernel 2 x 3, 8 x 48.
  add(make_problem(2, 2, 64, 256, 1, {8, 48, 1}, {2, 3, 1}, {1, 1, 1}, {0, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  return v;
}

class CudaWgmmaXpCoop : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaXpCoop, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv coop("CONVT_WG_COOP", "1");
  const ScopedEnv xp("CONVT_WG_XP", "1");
  const ScopedEnv xp_coop("CONVT_WG_XP_COOP", "1");
  static const std::vector<Case> all = xp_coop_cases();
  const Case& c = all[static_cast<size_t>(GetParam())];
  for (const char* n : {"", "128", "192"}) {
    SCOPED_TRACE(std::string("CONVT_WG_N=") + n);
    const ScopedEnv cap("CONVT_WG_N", n);
    check_wgmma_case(c, 6151u * uint64_t(GetParam()) + 11,
                     [&](const Precision& precision, bool split, const std::string& what) {
                       expect_wgmma_kernel(precision, split, what);
                       if (split) return;
                       EXPECT_NE(what.find("128 channels (two warpgroups)"), std::string::npos)
                           << precision.name << ": " << what;
                       EXPECT_NE(what.find("input transposed in the kernel"), std::string::npos)
                           << precision.name << ": " << what;
                     });
    if (quick_mode()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaXpCoop,
                         ::testing::Range(0, static_cast<int>(xp_coop_cases().size())),
                         indexed_case_name);

// Taps split (ImplicitGemmFpropPlan::wg_tsplit, CONVT_WG_TSPLIT=1): every K step one tap,
// its box at the tap's offset and the tile's rows x columns exactly. Small planes stacked
// (DCGAN-like 4 x 4 and 8 x 8 phases, several samples, the last tile's partial), stride 1
// with every tap in H and W (zero padding at the box's edges), dilation, asymmetric
// kernels and strides, output padding, phases without taps, 1-D with long strides, 3-D
// with D planes stacked, position-major tiles (narrow groups, 8 and 24 channels), two
// consumer warpgroups (128 channels), groups, bias, a channels_last input; each with split
// K too and with N capped at 128, where the planner takes them.
std::vector<Case> tsplit_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // DCGAN-like: 4 x 4 inputs, kernel 4, stride 2, padding 1, 64 -> 128, 7 samples.
  add(make_problem(2, 7, 64, 128, 1, {4, 4, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 8 x 8 inputs, 32 -> 64, 5 samples, no bias.
  add(make_problem(2, 5, 32, 64, 1, {8, 8, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  // Stride 1, kernel 3 x 5, padding (1, 2), 9 x 21.
  add(make_problem(2, 2, 32, 64, 1, {9, 21, 1}, {3, 5, 1}, {1, 1, 1}, {1, 2, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Dilation (2, 3), kernel 3, stride (2, 3), output padding (1, 2), 6 x 7.
  add(make_problem(2, 3, 48, 80, 1, {6, 7, 1}, {3, 3, 1}, {2, 3, 1}, {1, 1, 0}, {1, 2, 0},
                   {2, 3, 1}, true));
  // Kernel 2, stride 3 (phases without taps), 5 x 6.
  add(make_problem(2, 2, 32, 64, 1, {5, 6, 1}, {2, 2, 1}, {3, 3, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 1-D, kernel 16, stride 8, padding 4 (HiFi-GAN-like), 40 positions.
  add(make_problem(1, 3, 64, 64, 1, {40, 1, 1}, {16, 1, 1}, {8, 1, 1}, {4, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 3-D: 2 x 4 x 4 inputs, kernel 4, stride 2, padding 1 (D planes stacked), 64 -> 64.
  add(make_problem(3, 2, 64, 64, 1, {2, 4, 4}, {4, 4, 4}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 3-D, kernel 3, stride 2, dilation 2 (kb77-like), 32 -> 64.
  add(make_problem(3, 1, 32, 64, 1, {3, 5, 6}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0},
                   {2, 2, 2}, true));
  // Position-major: 64 -> 24, kernel 4, stride 2, 6 x 6, 3 samples.
  add(make_problem(2, 3, 64, 24, 1, {6, 6, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Four groups of 16 -> 8, kernel 3 x 5, stride 2, 7 x 9.
  add(make_problem(2, 2, 64, 32, 4, {7, 9, 1}, {3, 5, 1}, {2, 2, 1}, {1, 2, 0}, {1, 1, 0},
                   {1, 1, 1}, true));
  // Two warpgroups: 256 -> 256, kernel 4, stride 2, 8 x 8, 2 samples.
  add(make_problem(2, 2, 256, 256, 1, {8, 8, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // channels_last, 64 -> 64, kernel 4, stride 2, 6 x 10.
  add(make_problem(2, 2, 64, 64, 1, {6, 10, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  return v;
}

class CudaWgmmaTapsSplit : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaTapsSplit, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv tsplit("CONVT_WG_TSPLIT", "1");
  // (The W phase pairs on channel-major tiles would take the stride-2 cases.)
  const ScopedEnv no_pairs("CONVT_WG_CMPAIRS", "0");
  static const std::vector<Case> all = tsplit_cases();
  const Case& c = all[static_cast<size_t>(GetParam())];
  for (const char* form : {"", "split", "n128"}) {
    SCOPED_TRACE(std::string("form ") + form);
    const ScopedEnv parts("CONVT_WG_SPLIT_K", std::string(form) == "split" ? "2" : "");
    const ScopedEnv cap("CONVT_WG_N", std::string(form) == "n128" ? "128" : "");
    check_wgmma_case(c, 4099u * uint64_t(GetParam()) + 11,
                     [&](const Precision& precision, bool split, const std::string& what) {
                       expect_wgmma_kernel(precision, split, what);
                       if (!split)
                         EXPECT_NE(what.find("taps split"), std::string::npos)
                             << precision.name << ": " << what;
                     });
    if (quick_mode()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaTapsSplit,
                         ::testing::Range(0, static_cast<int>(tsplit_cases().size())),
                         indexed_case_name);

// Split K (ImplicitGemmFpropPlan::wg_splits, CONVT_WG_SPLIT_K): a tile's K steps in parts on
// different blocks, the last part adding every part's float32 sums in part order. Parts that
// divide the K steps evenly and not (3 of 16), more parts than a phase has K steps (strided
// phases of fewer taps: those tiles take fewer parts), one and two warpgroups, bias, planes
// stacked in a tile, 1-D and 3-D; the rule's own choice (=1) on a deep layer of few tiles.
// Every precision but strict float32 (split TF32 does not take it).
std::vector<Case> split_k_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // A DeconvNet-like deep layer at batch 1: 512 -> 128, 6 x 7, kernel 3, stride 1.
  add(make_problem(2, 1, 512, 128, 1, {6, 7, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 64 channels (one warpgroup), kernel 4, stride 2: phases of 2 x 2 taps.
  add(make_problem(2, 2, 256, 64, 1, {5, 6, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Kernel 3, stride 2: phases of 1 and 2 taps (fewer K steps than parts in some).
  add(make_problem(2, 1, 96, 100, 1, {7, 9, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, false));
  // A DCGAN-like layer with stacked samples, two groups.
  add(make_problem(2, 6, 256, 256, 2, {4, 4, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // 1-D, 3-D.
  add(make_problem(1, 2, 256, 128, 1, {40, 1, 1}, {5, 1, 1}, {1, 1, 1}, {2, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 1, 128, 64, 1, {3, 4, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0},
                   {1, 1, 1}, true));
  return v;
}

class CudaWgmmaSplitK : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaSplitK, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  static const std::vector<Case> all = split_k_cases();
  const Case& c = all[static_cast<size_t>(GetParam())];
  // (The W phase pairs on channel-major tiles, which split K does not run, would take the
  // stride-2 case.)
  const ScopedEnv no_pairs("CONVT_WG_CMPAIRS", "0");
  for (const char* parts : {"3", "16", "1"}) {
    SCOPED_TRACE(std::string("CONVT_WG_SPLIT_K=") + parts);
    const ScopedEnv split("CONVT_WG_SPLIT_K", parts);
    check_wgmma_case(c, 6007u * uint64_t(GetParam()) + 11,
                     [&](const Precision& precision, bool split_tf32, const std::string& what) {
                       expect_wgmma_kernel(precision, split_tf32, what);
                       // (The rule's own choice on the deep batch-1 layer; forced elsewhere.)
                       if (!split_tf32 && (std::string(parts) != "1" || GetParam() == 0))
                         EXPECT_NE(what.find("K steps split in "), std::string::npos)
                             << precision.name << ": " << what;
                     });
    if (quick_mode()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaSplitK,
                         ::testing::Range(0, static_cast<int>(split_k_cases().size())),
                         indexed_case_name);

// The weight cache (ExecOptions::weight_cache, convt::weight_relayout): for each
// implicit-GEMM kernel (wgmma, TMA, gather) and precision, a forward that fills the cache
// and one that takes it give the output of a forward without it, bit for bit; with the
// cache marked valid the packing is skipped (a changed weight still gives the kept
// weight's output, the caller's contract), without it the new weight's. The key names the
// kernel's layout: equal for equal calls, different across kernels and precisions. Split
// TF32 keeps its flag for a non-finite weight with the packing, so that a forward taking
// the cache still propagates an infinity as the forward without it does.
TEST(CudaWeightCache, KeptPackingMatchesAndIsTakenOnlyWhenValid) {
  SKIP_WITHOUT_CUDA();
  struct Kind {
    ForwardKernel kernel;
    bool needs_sm90a;
  };
  const Kind kinds[] = {{ForwardKernel::kImplicitGemmWgmma, true},
                        {ForwardKernel::kImplicitGemmTma, true},
                        {ForwardKernel::kImplicitGemm, false}};
  const Problem base = make_problem(2, 2, 32, 48, 1, {9, 13, 1}, {3, 3, 1}, {2, 2, 1},
                                    {1, 1, 0}, {1, 0, 0}, {1, 1, 1}, true);
  std::vector<std::pair<uint64_t, std::string>> keys;
  for (const Kind& kind : kinds) {
    if (kind.needs_sm90a && !wgmma_unavailable_reason().empty()) continue;
    for (const Precision& precision : kPrecisions) {
      if (precision.dtype == DType::kFloat64) continue;
      SCOPED_TRACE(std::string(precision.name) + " kernel " +
                   std::to_string(int(kind.kernel)));
      Problem p = base;
      p.dtype = precision.dtype;
      std::mt19937_64 rng(99);
      CaseTensors t(p, Layout::kContiguous, p.dtype, rng);
      HostTensor w2(p.weight_shape(), p.tensor_rank(), p.dtype, Layout::kContiguous);
      w2.fill_uniform(rng);
      const DeviceTensor gx(t.x, nullptr), gw(t.w, nullptr), gw2(w2, nullptr), gb(t.b, nullptr);
      ExecOptions opt;
      opt.math = precision.math;
      opt.forward_kernel = kind.kernel;
      const std::string what = convt::describe_forward(p, gx.ref, opt);
      const WeightRelayout r = convt::weight_relayout(p, gx.ref, opt);
      ASSERT_GT(r.bytes, 0u) << what;
      EXPECT_EQ(convt::weight_relayout(p, gx.ref, opt).key, r.key);
      // (What a key names: the precision and the kernel that runs, whose packing differs
      // between the wgmma kernel, the TMA kernel and the mma.sync kernels (gather and halo
      // pack alike). A kernel asked for that cannot run gives way to another, whose
      // packing then has that one's key.)
      const char* family = what.find("wgmma persistent") != std::string::npos ? "wgmma"
                           : what.rfind("implicit-GEMM TMA", 0) == 0          ? "TMA"
                                                                              : "mma.sync";
      keys.push_back({r.key, std::string(precision.name) + " " + family});
      DeviceBuffer cache(r.bytes);
      // One forward into a fresh output; the host copy of its bytes.
      auto run = [&](const DeviceTensor& w, void* cache_ptr, bool valid) {
        HostTensor y(p.output_shape(), p.tensor_rank(), p.dtype, Layout::kContiguous);
        DeviceTensor gy(y, nullptr);
        ExecOptions o = opt;
        Workspace ws(Op::kForward, p, o);
        o.weight_cache = cache_ptr;
        o.weight_cache_valid = valid;
        convt::forward(p, gx.ref, w.ref, &gb.ref, gy.ref, o);
        gy.download(y, nullptr);
        return y.bytes;
      };
      const auto plain = run(gw, nullptr, false);
      const auto plain2 = run(gw2, nullptr, false);
      ASSERT_NE(plain, plain2);
      EXPECT_EQ(run(gw, cache.get(), false), plain) << what;
      EXPECT_EQ(run(gw, cache.get(), true), plain) << what;
      EXPECT_EQ(run(gw2, cache.get(), true), plain) << "the kept packing was not taken: " << what;
      EXPECT_EQ(run(gw2, cache.get(), false), plain2) << what;
      EXPECT_EQ(run(gw2, cache.get(), true), plain2) << what;
      if (p.dtype == DType::kFloat32 && precision.math == MathMode::kStrictFP32) {
        // An infinite weight: the forward without the cache and both with it agree (NaN and
        // infinity where float64 has them).
        HostTensor w3(p.weight_shape(), p.tensor_rank(), p.dtype, Layout::kContiguous);
        for (int64_t i = 0; i < w3.numel(); ++i) w3.set(i, t.w.get(i));
        w3.set(5, INFINITY);
        const DeviceTensor gw3(w3, nullptr);
        const auto inf_plain = run(gw3, nullptr, false);
        EXPECT_EQ(run(gw3, cache.get(), false), inf_plain) << what;
        EXPECT_EQ(run(gw3, cache.get(), true), inf_plain) << what;
      }
    }
  }
  // Equal keys for the same precision and kernel, different ones across them.
  ASSERT_GE(keys.size(), 4u);
  for (const auto& a : keys)
    for (const auto& b : keys)
      EXPECT_EQ(a.first == b.first, a.second == b.second) << a.second << " / " << b.second;
}

// The CPU backend and the direct kernel run no re-layout.
TEST(CudaWeightCache, NoRelayoutWithoutThePackingKernels) {
  SKIP_WITHOUT_CUDA();
  Problem p = make_problem(2, 2, 32, 48, 1, {9, 13, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0},
                           {1, 0, 0}, {1, 1, 1}, true);
  p.dtype = DType::kFloat32;
  HostTensor x(p.input_shape(), p.tensor_rank(), p.dtype, Layout::kContiguous);
  EXPECT_EQ(convt::weight_relayout(p, x.ref).bytes, 0u);
  const DeviceTensor gx(x, nullptr);
  ExecOptions opt;
  opt.forward_kernel = ForwardKernel::kDirect;
  EXPECT_EQ(convt::weight_relayout(p, gx.ref, opt).bytes, 0u);
}

// channels_last inputs of 1-D and 2-D problems in 16-bit types: the wgmma kernel reads them
// in place through a tensor map over x (no input copy) where every group's channels are a
// whole number of K steps; float32 (TF32 rounding) and groups of other widths take the copy.
// Each case says which it expects in bfloat16 and float16. (The outputs are channels_last
// too: the channel-major tiles' epilogue then stores a position's channels together.)
struct ChannelsLastCase {
  Problem problem;
  bool in_place;
};

std::vector<ChannelsLastCase> channels_last_cases() {
  std::vector<ChannelsLastCase> v;
  // 2-D, two groups of 32 channels, W stride 2 (tap-less W phases), output_padding.
  v.push_back({make_problem(2, 2, 64, 64, 2, {10, 24, 1}, {3, 3, 1}, {2, 1, 1}, {1, 1, 0},
                            {1, 0, 0}, {1, 1, 1}, true),
               true});
  // 2-D, 48 channels in K steps of 16, rows wider than a box, 4 samples.
  v.push_back({make_problem(2, 4, 48, 64, 1, {6, 300, 1}, {3, 5, 1}, {1, 1, 1}, {1, 2, 0},
                            {0, 0, 0}, {1, 1, 1}, false),
               true});
  // 1-D, 64 channels, dilation 2, long rows.
  v.push_back({make_problem(1, 3, 64, 64, 1, {700, 1, 1}, {3, 1, 1}, {1, 1, 1}, {2, 0, 0},
                            {0, 0, 0}, {2, 1, 1}, true),
               true});
  // 40 output channels: a channel-major tile whose last warps hold 8 and no valid channels
  // (the epilogue's channels-innermost stores and its fallback).
  v.push_back({make_problem(2, 2, 32, 40, 1, {7, 50, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0},
                            {0, 0, 0}, {1, 1, 1}, true),
               true});
  // 3-D: the copy (the map has no dimension to spare).
  v.push_back({make_problem(3, 2, 32, 32, 1, {4, 6, 10}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1},
                            {0, 0, 0}, {1, 1, 1}, true),
               false});
  // Position-major tiles (at most 32 output channels per group), whose epilogue stores a
  // position's channels together where they are innermost: 24 channels (a pass of 16, then
  // one of 8), 8 channels, and 20 in a tile of 24 (the last pass falls back to per-channel
  // stores).
  v.push_back({make_problem(2, 2, 64, 48, 2, {9, 40, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0},
                            {0, 0, 0}, {1, 1, 1}, true),
               true});
  v.push_back({make_problem(2, 2, 32, 8, 1, {8, 70, 1}, {3, 5, 1}, {1, 1, 1}, {1, 2, 0},
                            {0, 0, 0}, {1, 1, 1}, false),
               true});
  v.push_back({make_problem(2, 2, 64, 40, 2, {6, 33, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0},
                            {0, 0, 0}, {1, 1, 1}, true),
               true});
  return v;
}

class CudaWgmmaChannelsLast : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaChannelsLast, ReadsInPlaceWhereItCanAndMatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ChannelsLastCase c = channels_last_cases()[static_cast<size_t>(GetParam())];
  check_wgmma_case(Case{c.problem, Layout::kChannelsLast}, 7919u * uint64_t(GetParam()) + 3,
                   [&](const Precision& precision, bool split, const std::string& what) {
                     const bool sixteen = precision.dtype == DType::kBFloat16 ||
                                          precision.dtype == DType::kFloat16;
                     EXPECT_NE(what.find(split ? "3xTF32" : "wgmma persistent"),
                               std::string::npos)
                         << precision.name << ": " << what;
                     EXPECT_EQ(what.find("channels_last input read in place") != std::string::npos,
                               sixteen && c.in_place)
                         << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaChannelsLast,
                         ::testing::Range(0, static_cast<int>(channels_last_cases().size())));

// NC... inputs in 16-bit types: the wgmma kernel loads raw boxes of x by TMA and transposes
// them itself (no input copy) where a tensor map can read x (W contiguous, 16-byte strides),
// else it copies. Each case says which it expects with CONVT_WG_XP=1 (the transposition
// wherever two stages and its ring fit); each runs with it and with CONVT_WG_XP=0 (the
// copy), both against the float64 oracle.
struct XpCase {
  Problem problem;
  bool xp;    // transposed in the kernel in 16-bit types (CONVT_WG_XP=1)
  bool xp32;  // and in float as TF32
};

std::vector<XpCase> xp_cases() {
  std::vector<XpCase> v;
  // 64 channels, padding: boxes starting before column 0, so the
  // raw chunks start up to 7 columns early.
  v.push_back({make_problem(2, 2, 64, 64, 1, {9, 72, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0},
                            {0, 0, 0}, {1, 1, 1}, true),
               true, true});
  // Rows wider than a box (several column segments, several raw chunks), 32 channels.
  v.push_back({make_problem(2, 2, 32, 48, 1, {5, 200, 1}, {3, 5, 1}, {1, 1, 1}, {1, 2, 0},
                            {0, 0, 0}, {1, 1, 1}, false),
               true, true});
  // Two groups of 24 input channels: the last channel block of a group zero-filled.
  v.push_back({make_problem(2, 3, 48, 64, 2, {6, 40, 1}, {3, 3, 1}, {1, 1, 1}, {0, 1, 0},
                            {0, 0, 0}, {1, 1, 1}, true),
               true, true});
  // 3-D, a position-major tile of 24 channels, boxes of several rows.
  v.push_back({make_problem(3, 2, 16, 24, 1, {5, 12, 24}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1},
                            {0, 0, 0}, {1, 1, 1}, false),
               true, true});
  // 1-D, dilation 3, long rows (position shifts of 3 columns per tap).
  v.push_back({make_problem(1, 2, 32, 64, 1, {1000, 1, 1}, {5, 1, 1}, {1, 1, 1}, {0, 0, 0},
                            {0, 0, 0}, {3, 1, 1}, true),
               true, true});
  // 3-D, strides 2 (W phase pairs in 16-bit types), 32 channels (in float, K steps of
  // 128-byte rows, which leave no room for the ring).
  v.push_back({make_problem(3, 2, 32, 32, 1, {4, 8, 32}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1},
                            {1, 0, 1}, {1, 1, 1}, false),
               true, false});
  // Rows of 50 elements (100 bytes): no tensor map over x, the copy runs.
  v.push_back({make_problem(2, 2, 32, 32, 1, {6, 50, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0},
                            {0, 0, 0}, {1, 1, 1}, false),
               false, false});
  // 16 output channels, K steps of 128-byte rows (64 channels in 16-bit types, 32 in float),
  // one box row.
  v.push_back({make_problem(2, 2, 64, 16, 1, {7, 304, 1}, {2, 3, 1}, {1, 1, 1}, {0, 1, 0},
                            {0, 0, 0}, {1, 1, 1}, true),
               true, true});
  // Rows of 1024 outputs (kb57's shape at 8 rows): tiles of more rows than the widest for an
  // H-complete K step (2 rows x 94 of a 4 x 96 box), split K in float32.
  v.push_back({make_problem(2, 1, 64, 64, 1, {8, 1024, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0},
                            {0, 0, 0}, {1, 1, 1}, false),
               true, true});
  // 8 output channels, 96 input channels: K steps of 128-byte rows over boxes of several
  // rows, one row per piece in float.
  v.push_back({make_problem(2, 2, 96, 8, 1, {7, 304, 1}, {2, 3, 1}, {1, 1, 1}, {0, 1, 0},
                            {0, 0, 0}, {1, 1, 1}, true),
               true, true});
  return v;
}

class CudaWgmmaXp : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaXp, TransposesWhereItCanAndMatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const XpCase c = xp_cases()[static_cast<size_t>(GetParam())];
  for (const Precision& precision : kPrecisions) {
    const bool sixteen = precision.dtype == DType::kBFloat16 || precision.dtype == DType::kFloat16;
    const bool tf32 =
        precision.dtype == DType::kFloat32 && precision.math == MathMode::kAllowTF32;
    if (!sixteen && !tf32) continue;
    const bool expect = sixteen ? c.xp : c.xp32;
    // 0: the transposition asked for (CONVT_WG_XP=1) where it can run, 1: the copy
    // (CONVT_WG_XP=0), both on the tiles these cases are shaped for (CONVT_WG_FILL=0,
    // CONVT_WG_EVEN=0); 2: the plan of the run's own settings (gpu_check.sh's WG_TEST_ENV,
    // e.g. other layouts or rings), against the oracle only.
    for (const int mode : {0, 1, 2}) {
      SCOPED_TRACE(mode == 1 ? "CONVT_WG_XP=0" : mode == 0 ? "CONVT_WG_XP=1" : "the run's settings");
      std::optional<ScopedEnv> env, fill, even;
      if (mode < 2) {
        env.emplace("CONVT_WG_XP", mode == 1 ? "0" : "1");
        fill.emplace("CONVT_WG_FILL", "0");
        even.emplace("CONVT_WG_EVEN", "0");
      }
      const std::string what = describe_wgmma_forward(c.problem, precision, Layout::kContiguous);
      EXPECT_NE(what.find("wgmma persistent"), std::string::npos) << precision.name << ": " << what;
      if (mode < 2)
        EXPECT_EQ(what.find("input transposed in the kernel") != std::string::npos,
                  expect && mode == 0)
            << precision.name << ": " << what;
      check_all_directions(c.problem, Layout::kContiguous, precision,
                           6151u * uint64_t(GetParam()) + uint64_t(mode), nullptr, false,
                           ForwardKernel::kImplicitGemmWgmma);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaXp,
                         ::testing::Range(0, static_cast<int>(xp_cases().size())));

// Two transposer warps (ImplicitGemmFpropPlan::wg_xp_warps, by default; one with
// CONVT_WG_XP_WARPS=1): each transposes every other piece of the ring. The two-warpgroup
// cases above (each N) and the position-major cases of the transposition's list (16 and 24
// channels, where the transposition runs: CONVT_WG_XP=1 on the tiles they are shaped for)
// against the float64 oracle in every precision with two warps and with one, each plan that
// transposes for two warpgroups or a position-major tile of 16-32 channels saying so exactly
// where two warps run; some of each kind do.
TEST(CudaWgmmaXpWarps, TwoTransposerWarpsMatchTheFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv xp("CONVT_WG_XP", "1");
  const ScopedEnv even("CONVT_WG_EVEN", "0");
  for (const char* warps : {"", "1"}) {
    SCOPED_TRACE(std::string("CONVT_WG_XP_WARPS=") + warps);
    const ScopedEnv warps_env("CONVT_WG_XP_WARPS", warps);
    const bool two = *warps == '\0';
    int coop = 0, pos = 0;
    auto expect = [&](const Precision& precision, bool split, const std::string& what) {
      expect_wgmma_kernel(precision, split, what);
      if (split || what.find("input transposed in the kernel") == std::string::npos) return;
      const bool two_wg = what.find("(two warpgroups)") != std::string::npos;
      const bool narrow = what.find("positions x 16 channels") != std::string::npos ||
                          what.find("positions x 24 channels") != std::string::npos ||
                          what.find("positions x 32 channels") != std::string::npos;
      const bool pairs = what.find("W phase pairs") != std::string::npos;
      EXPECT_EQ(what.find("two transposer warps") != std::string::npos,
                two && (two_wg || (narrow && !pairs)))
          << precision.name << ": " << what;
      if (two_wg) ++coop;
      if (narrow && !pairs) ++pos;
    };
    {
      const ScopedEnv coop_env("CONVT_WG_COOP", "1");
      const ScopedEnv xp_coop("CONVT_WG_XP_COOP", "1");
      const std::vector<Case> cases = xp_coop_cases();
      for (size_t i = 0; i < cases.size(); ++i) {
        for (const char* n : {"", "128", "192"}) {
          SCOPED_TRACE(std::string("CONVT_WG_N=") + n);
          const ScopedEnv cap("CONVT_WG_N", n);
          check_wgmma_case(cases[i], 7717u * uint64_t(i) + 3, expect);
          if (quick_mode()) break;
        }
      }
    }
    const std::vector<XpCase> xcases = xp_cases();
    for (size_t i = 0; i < xcases.size(); ++i) {
      const Problem& p = xcases[i].problem;
      if (p.out_channels / p.groups > 32 || !xcases[i].xp) continue;
      check_wgmma_case(Case{p, Layout::kContiguous}, 7723u * uint64_t(i) + 5, expect);
    }
    EXPECT_GT(coop, 0);
    EXPECT_GT(pos, 0);
  }
}

// The N that fills the machine (plan_wgmma_tile): DCGAN's first layer at batch 128 (1 x 1
// inputs, kernel 4, 4 x 4 planes stacked) has fewer tiles than two per multiprocessor with
// its largest N; on 132 multiprocessors the planner takes 128 positions a tile (256 tiles)
// instead of 208 (152). Both plans against the float64 oracle, in every precision.
TEST(CudaWgmmaFill, FewTilesRunTheNThatFillsTheMachine) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  int sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0),
             "cudaDeviceGetAttribute");
  const Problem base = make_problem(2, 128, 100, 512, 1, {1, 1, 1}, {4, 4, 1}, {1, 1, 1},
                                    {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, false);
  uint64_t seed = 31;
  for (const Precision& precision : kPrecisions) {
    if (precision.dtype == DType::kFloat64) continue;
    // (One consumer warpgroup: the slots counted are two blocks a multiprocessor.)
    const ScopedEnv one("CONVT_WG_COOP", "0");
    for (const bool largest : {false, true}) {
      SCOPED_TRACE(largest ? "CONVT_WG_FILL=0" : "default");
      const ScopedEnv fill("CONVT_WG_FILL", largest ? "0" : "1");
      const std::string what = describe_wgmma_forward(base, precision, Layout::kContiguous);
      const bool split =
          precision.dtype == DType::kFloat32 && precision.math == MathMode::kStrictFP32;
      // (Split TF32 has 128 positions at most either way.)
      if (sms == 132 && !split)
        EXPECT_NE(what.find(largest ? "64 channels x 208 positions" : "64 channels x 128 positions"),
                  std::string::npos)
            << precision.name << ": " << what;
      check_all_directions(base, Layout::kContiguous, precision, ++seed, nullptr, false,
                           ForwardKernel::kImplicitGemmWgmma);
    }
  }
}

TEST(CudaWgmmaPathSplit, StrictFloat32RunsOnItWhereTwoStagesFit) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  int declined = 0, total = 0;
  for (const Case& c : wgmma_case_list()) {
    Problem p = c.problem;
    p.dtype = DType::kFloat32;
    ExecOptions opt;
    opt.math = MathMode::kStrictFP32;
    opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    HostTensor x(p.input_shape(), p.tensor_rank(), p.dtype, c.layout);
    DeviceTensor gx(x, nullptr);
    const std::string what = convt::describe_forward(p, gx.ref, opt);
    ++total;
    if (what.find("wgmma persistent 3xTF32") == std::string::npos) ++declined;
  }
  // Only the widest W windows (13 W taps of 24 channels, say) leave no two split stages.
  EXPECT_LE(declined * 10, total) << declined << " of " << total << " cases";
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaPath,
                         ::testing::Range(0, static_cast<int>(wgmma_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// Epilogues storing four adjacent outputs a lane (Params::store4, CONVT_WG_STORE4=1):
// every case of the wgmma sweep (channel-major and position-major tiles, rows of odd widths
// in even ones, odd and even channel strides, partial channel tiles, tap-less W phases whose
// tiles store the bias alone, several rows a tile, 1-D rows longer than a box, channels_last
// inputs), then small layers shaped like KernelBench's strided and narrow ones: W phase
// pairs on channel-major tiles (1-D, stride 2, dilation 2) and on position-major ones (3-D
// stride 2, groups of 8 channels), zeros inserted along W (stride 5, dilation 2), rows of odd
// width on position-major tiles of 32 and 24 channels.
std::vector<Case> store4_cases() {
  std::vector<Case> v = wgmma_cases();
  auto add = [&](Problem p) { v.push_back({p, Layout::kContiguous}); };
  add(make_problem(1, 2, 32, 64, 1, {1000, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {0, 0, 0},
                   {2, 1, 1}, true));
  add(make_problem(3, 2, 32, 32, 1, {6, 10, 37}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 32, 32, 4, {4, 6, 13}, {3, 5, 7}, {2, 2, 2}, {1, 2, 3}, {1, 1, 1},
                   {1, 1, 1}, false));
  add(make_problem(2, 2, 32, 64, 1, {9, 21, 1}, {3, 3, 1}, {5, 5, 1}, {1, 1, 0}, {0, 0, 0},
                   {2, 2, 1}, false));
  add(make_problem(2, 2, 32, 32, 1, {13, 101, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 48, 24, 1, {7, 9, 23}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  return v;
}

const std::vector<Case>& store4_case_list() {
  static const std::vector<Case> all = store4_cases();
  return all;
}

class CudaWgmmaStore4 : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaStore4, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv store4("CONVT_WG_STORE4", "1");
  const Case& c = store4_case_list()[static_cast<size_t>(GetParam())];
  check_wgmma_case(c, 32452843u * uint64_t(GetParam()) + 7, expect_wgmma_kernel);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaStore4,
                         ::testing::Range(0, static_cast<int>(store4_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// K steps keeping the weight tiles their stage still holds (Params::w_reuse), beyond the
// default plans (which make the weight tiles resident in the fewest stages, at least two,
// that are a multiple of a tile's K steps, wherever those are no more than the stages; every
// other wgmma test runs them): the most such stages (CONVT_WG_STAGE_ALIGN=max), and the
// check on with the stages as they were chosen (CONVT_WG_STAGE_ALIGN=0, CONVT_WG_WREUSE=1:
// a stage's weight tiles kept only where they happen to be the next step's). Every other
// wgmma case and four with several tiles a block (3-D taps, two channel tiles, 1-D rows of
// many segments, H and W phases), every precision, against the float64 oracle.
const std::vector<Case>& weight_reuse_case_list() {
  static const std::vector<Case> all = [] {
    std::vector<Case> v;
    for (size_t i = 0; i < wgmma_case_list().size(); i += 2) v.push_back(wgmma_case_list()[i]);
    v.push_back({make_problem(3, 6, 16, 32, 1, {12, 20, 40}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1},
                              {0, 0, 0}, {1, 1, 1}, true),
                 Layout::kContiguous});
    v.push_back({make_problem(1, 4, 32, 128, 1, {20000, 1, 1}, {3, 1, 1}, {1, 1, 1},
                              {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, true),
                 Layout::kContiguous});
    v.push_back({make_problem(2, 4, 48, 64, 1, {30, 260, 1}, {3, 5, 1}, {1, 1, 1}, {1, 2, 0},
                              {0, 0, 0}, {1, 1, 1}, false),
                 Layout::kChannelsLast});
    v.push_back({make_problem(2, 3, 16, 24, 1, {33, 70, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0},
                              {1, 1, 0}, {1, 1, 1}, true),
                 Layout::kContiguous});
    return v;
  }();
  return all;
}

class CudaWgmmaWeightReuse : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaWeightReuse, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = weight_reuse_case_list()[static_cast<size_t>(GetParam())];
  {
    SCOPED_TRACE("CONVT_WG_STAGE_ALIGN=max");
    const ScopedEnv align("CONVT_WG_STAGE_ALIGN", "max");
    check_wgmma_case(c, 49979687u * uint64_t(GetParam()) + 11, expect_wgmma_kernel);
  }
  {
    SCOPED_TRACE("CONVT_WG_STAGE_ALIGN=0 CONVT_WG_WREUSE=1");
    const ScopedEnv align("CONVT_WG_STAGE_ALIGN", "0");
    const ScopedEnv reuse("CONVT_WG_WREUSE", "1");
    check_wgmma_case(c, 49979687u * uint64_t(GetParam()) + 12, expect_wgmma_kernel);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaWeightReuse,
                         ::testing::Range(0, static_cast<int>(weight_reuse_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// Stages other than the launch's default (which takes, of the plan's, the most that let
// more blocks share a multiprocessor where the kernel's registers allow it): the plan's own
// (CONVT_WG_OCC=0), and at most two (CONVT_WG_MAX_STAGES=2: weight tiles resident only
// where a tile has one or two K steps). The same cases as CudaWgmmaWeightReuse, every
// precision, against the float64 oracle.
class CudaWgmmaFewerStages : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaFewerStages, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = weight_reuse_case_list()[static_cast<size_t>(GetParam())];
  {
    SCOPED_TRACE("CONVT_WG_OCC=0");
    const ScopedEnv occ("CONVT_WG_OCC", "0");
    check_wgmma_case(c, 7919u * uint64_t(GetParam()) + 5, expect_wgmma_kernel);
  }
  {
    SCOPED_TRACE("CONVT_WG_MAX_STAGES=2");
    const ScopedEnv cap("CONVT_WG_MAX_STAGES", "2");
    check_wgmma_case(c, 7919u * uint64_t(GetParam()) + 6, expect_wgmma_kernel);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaFewerStages,
                         ::testing::Range(0, static_cast<int>(weight_reuse_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// The input copy: by default the forward kernel's copier warps make it while the tiles run,
// for rows of 32 columns or more; CONVT_WG_FUSED_COPY=1 takes them for every row width (most
// of these cases' rows are narrower), =0 runs the copy kernel before the forward.
class CudaWgmmaFusedCopy : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaFusedCopy, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = wgmma_case_list()[static_cast<size_t>(GetParam())];
  for (const char* v : {"1", "0"}) {
    SCOPED_TRACE(std::string("CONVT_WG_FUSED_COPY=") + v);
    const ScopedEnv env("CONVT_WG_FUSED_COPY", v);
    check_wgmma_case(c, 6421u * uint64_t(GetParam()) + 3, expect_wgmma_kernel);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaFusedCopy,
                         ::testing::Range(0, static_cast<int>(wgmma_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// The wgmma kernel's other tiles, asked for with CONVT_WG_NC on every other case: 64
// channels x N positions where the planner would take a position-major tile (groups of at
// most 32 output channels), and position-major tiles of 8 channels (several channel tiles
// per group), 24 and 48 (one with split TF32 too: up to 32) where it would not.
class CudaWgmmaTiles : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CudaWgmmaTiles, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const int nc = std::get<0>(GetParam());
  const Case& c = wgmma_case_list()[static_cast<size_t>(std::get<1>(GetParam()))];
  const ScopedEnv env("CONVT_WG_NC", std::to_string(nc).c_str());
  check_wgmma_case(c, 3571u * uint64_t(std::get<1>(GetParam())) + 7,
                   [nc](const Precision& precision, bool split, const std::string& what) {
                     if (split) return;
                     // (64: or two warpgroups' 128, where a group has an even count of
                     // 64-channel tiles.)
                     const std::string tile =
                         nc == 64 ? "tile 64 channels x "
                                  : " positions x " + std::to_string(nc) + " channels";
                     EXPECT_TRUE(what.find(tile) != std::string::npos ||
                                 (nc == 64 && what.find("tile 128 channels (two warpgroups) x ") !=
                                                  std::string::npos))
                         << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaWgmmaTiles,
    ::testing::Combine(::testing::Values(64, 8, 24, 48),
                       ::testing::Range(0, static_cast<int>(wgmma_case_list().size()),
                                        quick_mode() ? 6 : 2)),
    [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
      char name[48];
      std::snprintf(name, sizeof(name), "nc%02d_case_%03d", std::get<0>(info.param),
                    std::get<1>(info.param));
      return std::string(name);
    });

// W taps folded into N (CONVT_WG_FOLD=1: position-major tiles in TF32 and the 16-bit types
// whose widest phase has 2 to 7 W taps): every fold (2, 3, 4, 5, 7: six taps take 7, one column block zero),
// tiles of 8 to 32 channels and so every width (16 to 224 columns, 64 to 256 positions),
// groups narrower than their tile, W strides whose phases have fewer taps than the fold or
// none, dilation (shifts of several columns), column segments, several rows per tile,
// groups with bias, channels_last input, and more tiles than resident blocks. Strict
// float32 (split TF32) does not fold. CudaWgmmaUnfolded runs every other wgmma case with
// CONVT_WG_FOLD=0.
std::vector<Case> fold_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  add(make_problem(2, 2, 16, 16, 1, {10, 70, 1}, {3, 7, 1}, {1, 1, 1}, {1, 3, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  add(make_problem(2, 2, 32, 32, 1, {6, 130, 1}, {3, 7, 1}, {1, 1, 1}, {1, 3, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 3, 16, 3, 1, {600, 1, 1}, {5, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 32, 24, 1, {6, 8, 20}, {3, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 0, 0},
                   {1, 1, 1}, false));
  add(make_problem(2, 2, 16, 20, 1, {7, 40, 1}, {3, 5, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 16, 16, 1, {9, 33, 1}, {2, 6, 1}, {1, 1, 1}, {0, 2, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 16, 8, 1, {8, 41, 1}, {3, 7, 1}, {1, 2, 1}, {1, 3, 0}, {0, 1, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 2, 16, 12, 1, {300, 1, 1}, {5, 1, 1}, {3, 1, 1}, {1, 0, 0}, {2, 0, 0},
                   {2, 1, 1}, true));
  add(make_problem(2, 2, 16, 16, 1, {6, 50, 1}, {3, 3, 1}, {1, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 2, 1}, false));
  add(make_problem(2, 2, 16, 32, 1, {8, 60, 1}, {3, 3, 1}, {1, 1, 1}, {1, 0, 0}, {0, 0, 0},
                   {1, 3, 1}, true));
  add(make_problem(2, 2, 32, 32, 4, {10, 30, 1}, {3, 5, 1}, {1, 1, 1}, {1, 2, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 16, 8, 1, {12, 20, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 16, 16, 1, {8, 40, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  add(make_problem(2, 2, 16, 32, 1, {6, 90, 1}, {3, 5, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  add(make_problem(1, 2, 32, 24, 1, {500, 1, 1}, {7, 1, 1}, {1, 1, 1}, {3, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 16, 32, 1, {9, 21, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 8, 16, 16, 1, {40, 120, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  return v;
}

const std::vector<Case>& fold_case_list() {
  static const std::vector<Case> all = fold_cases();
  return all;
}

class CudaWgmmaFold : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaFold, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = fold_case_list()[static_cast<size_t>(GetParam())];
  const ScopedEnv env("CONVT_WG_FOLD", "1");
  check_wgmma_case(c, 6151u * uint64_t(GetParam()) + 13,
                   [](const Precision& precision, bool split, const std::string& what) {
                     EXPECT_EQ(what.find("folded into N") != std::string::npos, !split)
                         << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaFold,
                         ::testing::Range(0, static_cast<int>(fold_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

class CudaWgmmaUnfolded : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaUnfolded, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = wgmma_case_list()[static_cast<size_t>(GetParam())];
  const ScopedEnv env("CONVT_WG_FOLD", "0"), env_sc("CONVT_WG_SCATTER", "0");
  check_wgmma_case(c, 4099u * uint64_t(GetParam()) + 17,
                   [](const Precision& precision, bool, const std::string& what) {
                     EXPECT_EQ(what.find("folded"), std::string::npos)
                         << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaUnfolded,
                         ::testing::Range(0, static_cast<int>(wgmma_case_list().size()),
                                          quick_mode() ? 6 : 2),
                         indexed_case_name);

// W taps stacked in M (CONVT_WG_MFOLD=1: channel-major tiles for groups of at most 32
// output channels whose widest phase has 2 or more W taps, 2 taps x 32 channels or, up to
// 16 channels with 3 or more taps, 4 x 16 a row block): every count of taps a row block
// leaves zero (7 in 4 x 2 and 2 x 4, 5, 3), 24 channels in 32 rows, 3-D volumes, W strides
// whose phases have fewer taps, dilation (shifts of up to 8 columns; 4 taps x 3 columns
// falls back to 2 taps), groups, bias, channels_last input, stacked planes, rows of several
// segments, a 1-D layer of many tiles; and the layers it does not take (one W tap, a tap
// offset of 9 columns), which keep their tiles. Each case also with the copier warps
// (CONVT_WG_FUSED_COPY=1) and with split K (CONVT_WG_SPLIT_K=3). Strict float32 (split
// TF32) does not stack.
struct MfoldCase {
  Case c;
  int mfold;  // the taps a row block the planner must take (1: none; 0: 2 or 4)
  // W strides run as their phases' own tiles (CONVT_WG_WUP=0, CONVT_WG_WMERGE=0: no zeros
  // along W, which the stacking does not take, nor W phase pairs).
  bool own_phases = false;
};

std::vector<MfoldCase> mfold_cases() {
  std::vector<MfoldCase> v;
  auto add = [&](int mf, Problem p, Layout layout = Layout::kContiguous, bool own = false) {
    v.push_back({{p, layout}, mf, own});
  };
  // kb78-like: 16 -> 32, 3 x 7 taps padded (7 W taps: 4 tiles of 2, the last half zero).
  add(2, make_problem(2, 2, 16, 32, 1, {10, 70, 1}, {3, 7, 1}, {1, 1, 1}, {1, 3, 0}, {0, 0, 0},
                      {1, 1, 1}, true));
  // 16 -> 16 with 7 W taps: 2 tiles of 4.
  add(4, make_problem(2, 2, 16, 16, 1, {9, 50, 1}, {3, 7, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                      {1, 1, 1}, false));
  // kb70-like: 3-D, 16 -> 24 (24 channels in 32 rows), 3 W taps.
  add(2, make_problem(3, 2, 16, 24, 1, {6, 8, 20}, {3, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 0, 0},
                      {1, 1, 1}, false));
  // kb58-like: 3-D 8 -> 16, 3 x 5 x 7 taps, with a bias.
  add(4, make_problem(3, 2, 8, 16, 1, {4, 8, 20}, {3, 5, 7}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                      {1, 1, 1}, true));
  // 1-D, dilation 3: 4 taps would shift 9 columns, so 2 x 16 (5 taps in 3 tiles).
  add(2, make_problem(1, 2, 16, 12, 1, {300, 1, 1}, {5, 1, 1}, {1, 1, 1}, {1, 0, 0}, {0, 0, 0},
                      {3, 1, 1}, true));
  // Stride 2, kernel 4: every W phase 2 taps (16 channels, fewer than 3 taps: 2 a block).
  add(2, make_problem(2, 2, 32, 16, 1, {9, 21, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                      {1, 1, 1}, true),
      Layout::kContiguous, true);
  // Stride 3, kernel 5: W phases of 2, 2 and 1 taps; output_padding.
  add(2, make_problem(2, 2, 16, 32, 1, {7, 15, 1}, {3, 5, 1}, {1, 3, 1}, {1, 1, 0}, {0, 2, 0},
                      {1, 1, 1}, true),
      Layout::kContiguous, true);
  // Dilation 2 along W with 4 taps a block (shifts of 6 columns).
  add(4, make_problem(2, 2, 16, 8, 1, {8, 41, 1}, {3, 5, 1}, {1, 1, 1}, {1, 2, 0}, {0, 0, 0},
                      {1, 2, 1}, true));
  // Four groups of 8 -> 8 channels, 5 W taps (4 x 16 a block; in 16-bit types the groups
  // merged into one of 32 channels, 2 x 32).
  add(0, make_problem(2, 2, 32, 32, 4, {10, 30, 1}, {3, 5, 1}, {1, 1, 1}, {1, 2, 0}, {0, 0, 0},
                      {1, 1, 1}, true));
  // channels_last input.
  add(2, make_problem(2, 2, 16, 32, 1, {8, 40, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                      {1, 1, 1}, true),
      Layout::kChannelsLast);
  // Small planes, 6 samples (stacked in a tile where they fit).
  add(2, make_problem(2, 6, 16, 16, 1, {4, 4, 1}, {3, 2, 1}, {1, 1, 1}, {1, 0, 0}, {0, 0, 0},
                      {1, 1, 1}, true));
  // Rows of several column segments, several rows a tile.
  add(2, make_problem(2, 2, 32, 32, 1, {12, 300, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {0, 0, 0},
                      {1, 1, 1}, false));
  // kb73-like: 3-D stride 2, padding 1 (W phases of 2 and 1 taps), 32 channels.
  add(2, make_problem(3, 2, 16, 32, 1, {4, 6, 11}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0},
                      {1, 1, 1}, true),
      Layout::kContiguous, true);
  // 1-D of many tiles, 7 taps.
  add(2, make_problem(1, 8, 16, 32, 1, {2000, 1, 1}, {7, 1, 1}, {1, 1, 1}, {3, 0, 0}, {0, 0, 0},
                      {1, 1, 1}, true));
  // Not taken: one W tap; a W tap offset of 9 columns.
  add(1, make_problem(2, 2, 16, 32, 1, {10, 30, 1}, {3, 1, 1}, {1, 1, 1}, {1, 0, 0}, {0, 0, 0},
                      {1, 1, 1}, true));
  add(1, make_problem(2, 2, 16, 32, 1, {10, 40, 1}, {3, 3, 1}, {1, 1, 1}, {1, 0, 0}, {0, 0, 0},
                      {1, 9, 1}, true));
  return v;
}

const std::vector<MfoldCase>& mfold_case_list() {
  static const std::vector<MfoldCase> all = mfold_cases();
  return all;
}

class CudaWgmmaMfold : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CudaWgmmaMfold, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const int form = std::get<0>(GetParam());
  const MfoldCase& m = mfold_case_list()[static_cast<size_t>(std::get<1>(GetParam()))];
  const ScopedEnv env("CONVT_WG_MFOLD", "1");
  const ScopedEnv copier("CONVT_WG_FUSED_COPY", form == 1 ? "1" : "");
  const ScopedEnv split("CONVT_WG_SPLIT_K", form == 2 ? "3" : "");
  const ScopedEnv wup("CONVT_WG_WUP", m.own_phases ? "0" : "");
  const ScopedEnv wmerge("CONVT_WG_WMERGE", m.own_phases ? "0" : "");
  const int mf = m.mfold;
  check_wgmma_case(m.c, 7919u * uint64_t(std::get<1>(GetParam())) + 31 + uint64_t(form),
                   [mf](const Precision& precision, bool split, const std::string& what) {
                     const std::string tag = " W taps x ";
                     const bool want = mf != 1 && !split;
                     EXPECT_EQ(what.find("stacked in M") != std::string::npos, want)
                         << precision.name << ": " << what;
                     if (want && mf > 1)
                       EXPECT_NE(what.find("tile " + std::to_string(mf) + tag), std::string::npos)
                           << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaWgmmaMfold,
    ::testing::Combine(::testing::Values(0, 1, 2),
                       ::testing::Range(0, static_cast<int>(mfold_case_list().size()),
                                        quick_mode() ? 3 : 1)),
    [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
      const int form = std::get<0>(info.param);
      char name[48];
      std::snprintf(name, sizeof(name), "%s_case_%03d",
                    form == 0 ? "copy" : form == 1 ? "copier" : "splitk", std::get<1>(info.param));
      return std::string(name);
    });

// W taps scattered (CONVT_WG_SCATTER=1: position-major tiles of at most 16 channels with a
// W stride of 2 or more and 2 to 7 W taps): a generator's last layer (64 -> 3, kernel 4,
// stride 2), grouped 3-D strides with output_padding, strides 3-5 (output columns without
// taps: the bias only), dilation with stride 2 (every other column tap-less), two taps,
// odd sizes, long rows (segments), groups with bias, channels_last input. Strict float32
// (split TF32) does not scatter.
std::vector<Case> scatter_cases() {
  std::vector<Case> v;
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  add(make_problem(2, 2, 64, 3, 1, {16, 24, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(3, 2, 32, 32, 4, {6, 8, 12}, {3, 5, 7}, {2, 2, 2}, {1, 2, 3}, {1, 1, 1},
                   {1, 1, 1}, false));
  add(make_problem(1, 2, 16, 16, 1, {200, 1, 1}, {5, 1, 1}, {3, 1, 1}, {2, 0, 0}, {1, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 16, 12, 1, {7, 40, 1}, {3, 3, 1}, {1, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 2, 1}, true));
  add(make_problem(2, 2, 16, 8, 1, {5, 30, 1}, {3, 3, 1}, {2, 5, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 3, 8, 5, 1, {333, 1, 1}, {7, 1, 1}, {4, 1, 1}, {3, 0, 0}, {3, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 16, 16, 1, {9, 50, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  add(make_problem(2, 2, 32, 16, 1, {10, 20, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  add(make_problem(1, 2, 24, 8, 1, {1500, 1, 1}, {5, 1, 1}, {2, 1, 1}, {2, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 32, 16, 2, {6, 31, 1}, {3, 6, 1}, {2, 3, 1}, {1, 2, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  return v;
}

const std::vector<Case>& scatter_case_list() {
  static const std::vector<Case> all = scatter_cases();
  return all;
}

class CudaWgmmaScatter : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaScatter, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = scatter_case_list()[static_cast<size_t>(GetParam())];
  const ScopedEnv env("CONVT_WG_SCATTER", "1");
  // (The grouped cases' own groups: merged, their tiles would not scatter.)
  const ScopedEnv own_groups("CONVT_WG_GMERGE", "0");
  check_wgmma_case(c, 7919u * uint64_t(GetParam()) + 19,
                   [](const Precision& precision, bool split, const std::string& what) {
                     EXPECT_EQ(what.find("W taps scattered") != std::string::npos, !split)
                         << precision.name << ": " << what;
                   });
}

// Scattered W taps on rows too long for any segment count the layout scans: segments of at
// most the default staging area's output columns (CONVT_WG_SC_SEGS=1), or of a staging area
// grown up to twice the default, taken from the stages (=2, the default). Without segments
// (=0) such a layer leaves the wgmma kernel. 8 channels at stride 3 and 16 at stride 2 (whose
// 256-position tile with 2 W taps a phase outgrows the default area's 544 and 224 output
// columns).
TEST(CudaWgmmaScatterSegs, LongRowsInSegments) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv env("CONVT_WG_SCATTER", "1");
  const std::vector<Case> cases = {
      {make_problem(1, 2, 24, 8, 1, {13403, 1, 1}, {4, 1, 1}, {3, 1, 1}, {1, 0, 0}, {1, 0, 0},
                    {1, 1, 1}, true),
       Layout::kContiguous},
      {make_problem(1, 2, 40, 16, 1, {5003, 1, 1}, {4, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 0, 0},
                    {1, 1, 1}, true),
       Layout::kContiguous}};
  uint64_t seed = 104729u;
  for (const char* segs_value : {"1", "2"}) {
    const ScopedEnv segs("CONVT_WG_SC_SEGS", segs_value);
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string("CONVT_WG_SC_SEGS=") + segs_value);
      check_wgmma_case(c, seed++, [](const Precision& precision, bool split,
                                     const std::string& what) {
        EXPECT_EQ(what.find("W taps scattered") != std::string::npos, !split)
            << precision.name << ": " << what;
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaScatter,
                         ::testing::Range(0, static_cast<int>(scatter_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// Layers the dispatch rules of 2026-11-28 move, run as dispatched (ForwardKernel::kAuto) in
// every precision against the float64 oracle, with what each rule gives checked in the
// plan's description (the few-K-steps rule, which gives layers this small to the TMA
// kernel, off): the W phase pairs transposed in the kernel over scattered W taps in 16-bit
// types (1-D, stride 2, 13 and 9 output channels); volumes of sparse tiles (26% used) and
// of stacked planes on the wgmma kernel outside strict float32; strided 1-D float32 layers
// of output channels x W taps over 2.5 x the input channels on it in TF32; and (the rule
// of the same day) two warpgroups over the input transposed in the kernel outside strict
// float32 (128 -> 128, and 100 -> 200, whose second 128-channel tile holds 72 channels and
// whose 16-bit K step of 16 channels x 2 W taps holds the rule's least 64 bytes), and past
// 768 multiply-adds per input element in TF32 only (2 groups of 105 -> 230, kernel 4,
// dilation 2: 920; the copy in 16-bit types).
TEST(CudaDispatchRules, LayersTheRulesMoveMatchTheOracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv few("CONVT_WG_FEW_STEPS", "0");
  enum Rule { kPairs, kVolume, kRow, kXpCoop, kXpCoopTf32 };
  struct RuleCase {
    Problem problem;
    Rule rule;
  };
  const std::vector<RuleCase> cases = {
      {make_problem(1, 2, 114, 13, 1, {4096, 1, 1}, {2, 1, 1}, {2, 1, 1}, {1, 0, 0}, {0, 0, 0},
                    {1, 1, 1}, true),
       kPairs},
      {make_problem(1, 2, 96, 9, 1, {3000, 1, 1}, {4, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 0, 0},
                    {1, 1, 1}, true),
       kPairs},
      {make_problem(3, 2, 71, 30, 1, {9, 19, 3}, {3, 4, 5}, {2, 1, 3}, {1, 0, 2}, {0, 0, 0},
                    {1, 1, 1}, true),
       kVolume},
      {make_problem(3, 2, 103, 29, 1, {8, 3, 19}, {5, 3, 3}, {1, 3, 1}, {0, 0, 1}, {0, 0, 0},
                    {1, 1, 1}, true),
       kVolume},
      {make_problem(1, 2, 206, 288, 2, {400, 1, 1}, {7, 1, 1}, {2, 1, 1}, {6, 0, 0}, {0, 0, 0},
                    {1, 1, 1}, true),
       kRow},
      {make_problem(1, 2, 64, 173, 1, {500, 1, 1}, {7, 1, 1}, {3, 1, 1}, {2, 0, 0}, {1, 0, 0},
                    {1, 1, 1}, false),
       kRow},
      {make_problem(1, 2, 128, 128, 1, {4096, 1, 1}, {3, 1, 1}, {1, 1, 1}, {1, 0, 0}, {0, 0, 0},
                    {1, 1, 1}, true),
       kXpCoop},
      {make_problem(1, 2, 100, 200, 1, {3000, 1, 1}, {2, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                    {1, 1, 1}, true),
       kXpCoop},
      {make_problem(1, 2, 210, 460, 2, {3000, 1, 1}, {4, 1, 1}, {1, 1, 1}, {2, 0, 0}, {1, 0, 0},
                    {2, 1, 1}, true),
       kXpCoopTf32}};
  uint64_t seed = 7919u;
  for (const RuleCase& rc : cases) {
    SCOPED_TRACE(rc.problem.to_string());
    for (const Precision& precision : kPrecisions) {
      if (precision.dtype == DType::kFloat64) continue;
      Problem p = rc.problem;
      p.dtype = precision.dtype;
      ExecOptions opt;
      opt.math = precision.math;
      HostTensor x(p.input_shape(), p.tensor_rank(), p.dtype, Layout::kContiguous);
      DeviceTensor gx(x, nullptr);
      const std::string what = convt::describe_forward(p, gx.ref, opt);
      const bool split =
          precision.dtype == DType::kFloat32 && precision.math == MathMode::kStrictFP32;
      const bool tf32 =
          precision.dtype == DType::kFloat32 && precision.math == MathMode::kAllowTF32;
      const bool sixteen = precision.dtype != DType::kFloat32;
      if (rc.rule == kPairs && sixteen) {
        EXPECT_NE(what.find("W phase pairs"), std::string::npos) << precision.name << ": " << what;
        EXPECT_NE(what.find("transposed in the kernel"), std::string::npos)
            << precision.name << ": " << what;
      }
      if ((rc.rule == kVolume && !split) || (rc.rule == kRow && tf32))
        EXPECT_NE(what.find("wgmma persistent"), std::string::npos)
            << precision.name << ": " << what;
      if (rc.rule == kXpCoop && !split) {
        EXPECT_NE(what.find("(two warpgroups)"), std::string::npos)
            << precision.name << ": " << what;
        EXPECT_NE(what.find("transposed in the kernel"), std::string::npos)
            << precision.name << ": " << what;
      }
      if (rc.rule == kXpCoopTf32 && !split) {
        EXPECT_NE(what.find("(two warpgroups)"), std::string::npos)
            << precision.name << ": " << what;
        EXPECT_EQ(what.find("transposed in the kernel") != std::string::npos, tf32)
            << precision.name << ": " << what;
      }
      check_all_directions(rc.problem, Layout::kContiguous, precision, seed++);
    }
  }
}

// Zeros inserted along W (CONVT_WG_WUP=1 asks for them wherever W is strided): every wgmma
// case with a W stride, plus a channels_last input with W stride 3 (the untiled copy), a W
// that is no whole number of 16-byte chunks (the tiled copy's scalar loads), groups with
// bias and output_padding, and a W stride of 5 with dilation 2 (phases without taps).
std::vector<Case> upsampled_cases() {
  std::vector<Case> v;
  for (const Case& c : wgmma_case_list())
    if (c.problem.canonical3d().stride[2] > 1) v.push_back(c);
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  add(make_problem(2, 2, 32, 40, 1, {7, 19, 1}, {3, 4, 1}, {1, 3, 1}, {1, 1, 0}, {0, 2, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  add(make_problem(1, 3, 24, 64, 1, {203, 1, 1}, {4, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 32, 96, 2, {6, 37, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 16, 64, 1, {5, 26, 1}, {3, 3, 1}, {5, 5, 1}, {1, 1, 0}, {0, 0, 0},
                   {2, 2, 1}, true));
  return v;
}

const std::vector<Case>& upsampled_case_list() {
  static const std::vector<Case> all = upsampled_cases();
  return all;
}

class CudaWgmmaUpsampled : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaUpsampled, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = upsampled_case_list()[static_cast<size_t>(GetParam())];
  const ScopedEnv env("CONVT_WG_WUP", "1"), env_sc("CONVT_WG_SCATTER", "0");
  check_wgmma_case(c, 7727u * uint64_t(GetParam()) + 3,
                   [](const Precision& precision, bool split, const std::string& what) {
                     // (Split TF32 falls back to the TMA kernel where two of its stages do
                     // not fit.)
                     if (what.find("wgmma persistent") != std::string::npos)
                       EXPECT_NE(what.find("zeros inserted along W (stride"), std::string::npos)
                           << precision.name << ": " << what;
                     else
                       EXPECT_TRUE(split) << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaUpsampled,
                         ::testing::Range(0, static_cast<int>(upsampled_case_list().size()),
                                          quick_mode() ? 2 : 1),
                         indexed_case_name);

// W phases merged (CONVT_WG_WMERGE=1 asks for them wherever W is strided): every case with
// a W stride above (zeros inserted along W, scattered W taps), plus a kb73-like 3-D layer
// (32 -> 32, stride 2), two channel tiles of the channel-major tile with strides (2, 3),
// and a 1-D layer with stride 4 and dilation 3 (W phases without taps, and segments whose
// last phases have no outputs). Strict float32 (split TF32) does not merge.
std::vector<Case> merged_cases() {
  std::vector<Case> v = upsampled_case_list();
  for (const Case& c : scatter_case_list()) v.push_back(c);
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  add(make_problem(3, 2, 32, 32, 1, {5, 6, 20}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 32, 96, 1, {9, 45, 1}, {3, 4, 1}, {2, 3, 1}, {1, 1, 0}, {1, 2, 0},
                   {1, 1, 1}, true));
  add(make_problem(1, 2, 16, 48, 1, {700, 1, 1}, {3, 1, 1}, {4, 1, 1}, {2, 0, 0}, {1, 0, 0},
                   {3, 1, 1}, true));
  return v;
}

const std::vector<Case>& merged_case_list() {
  static const std::vector<Case> all = merged_cases();
  return all;
}

class CudaWgmmaMerged : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaMerged, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = merged_case_list()[static_cast<size_t>(GetParam())];
  const ScopedEnv env("CONVT_WG_WMERGE", "1"), env_up("CONVT_WG_WUP", "0"),
      env_sc("CONVT_WG_SCATTER", "0");
  check_wgmma_case(c, 7741u * uint64_t(GetParam()) + 11,
                   [](const Precision& precision, bool split, const std::string& what) {
                     // (Split TF32 does not merge.)
                     EXPECT_EQ(what.find("W phases merged (stride") != std::string::npos, !split)
                         << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaMerged,
                         ::testing::Range(0, static_cast<int>(merged_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// W phase pairs in registers (CONVT_WG_WMERGE=2: W stride 2, not split TF32; position-major
// tiles up to 32 output channels per group, channel-major ones of 128 positions above) on
// the merged cases and layers aimed at the channel-major pairs' epilogue: a channel tile
// whose last warps hold 8 channels or none (40), two channel tiles (96), a phase without W
// taps (dilation 2) and a last column only the first phase has, rows cut into column
// segments, groups, 3-D, channels_last; the others run as the planner would without it.
std::vector<Case> pair_cases() {
  std::vector<Case> v = merged_case_list();
  auto add = [&](Problem p, Layout layout = Layout::kContiguous) { v.push_back({p, layout}); };
  // DCGAN-like: kernel 4, stride 2, padding 1 (two W taps a phase).
  add(make_problem(2, 2, 64, 64, 1, {9, 13, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 64, 64, 1, {9, 13, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true),
      Layout::kChannelsLast);
  // Kernel 3, stride 2, output padding 1; 40 channels.
  add(make_problem(2, 3, 48, 40, 1, {7, 11, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0},
                   {1, 1, 1}, true));
  // Kernel 2, stride 2 (one tap a phase), 96 channels: two channel tiles.
  add(make_problem(2, 2, 32, 96, 1, {6, 37, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, false));
  // kb79-like: dilation 2, one W phase without taps; 601 outputs (the last column phase 0's).
  add(make_problem(1, 2, 32, 64, 1, {300, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {0, 0, 0},
                   {2, 1, 1}, true));
  // kb77-like 3-D.
  add(make_problem(3, 2, 16, 64, 1, {3, 5, 9}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0},
                   {2, 2, 2}, true));
  // Rows of 150 positions a phase: column segments.
  add(make_problem(2, 2, 32, 64, 1, {3, 150, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Two groups of 64 output channels.
  add(make_problem(2, 2, 64, 128, 2, {5, 7, 1}, {4, 4, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  // Rows of an odd width (19) in an even channel stride (12 x 19): every other phase row
  // starts at an odd element, so its pairs are not aligned for one store (the stores by
  // runs of adjacent outputs); position-major (16 channels) and channel-major (64).
  add(make_problem(2, 2, 32, 16, 1, {6, 10, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 0, 0},
                   {1, 1, 1}, true));
  add(make_problem(2, 2, 32, 64, 1, {6, 10, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 0, 0},
                   {1, 1, 1}, false));
  // An odd channel stride (25 x 51), 24 channels, rows of several tiles' positions.
  add(make_problem(2, 3, 32, 24, 1, {13, 26, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0},
                   {1, 1, 1}, true));
  return v;
}

const std::vector<Case>& pair_case_list() {
  static const std::vector<Case> all = pair_cases();
  return all;
}

class CudaWgmmaPairs : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaPairs, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = pair_case_list()[static_cast<size_t>(GetParam())];
  const ScopedEnv env("CONVT_WG_WMERGE", "2"), env_up("CONVT_WG_WUP", "0"),
      env_sc("CONVT_WG_SCATTER", "0");
  const Problem p3 = c.problem.canonical3d();
  const bool fits = p3.stride[2] == 2;
  check_wgmma_case(c, 7753u * uint64_t(GetParam()) + 13,
                   [fits](const Precision& precision, bool split, const std::string& what) {
                     EXPECT_EQ(what.find("W phase pairs in registers") != std::string::npos,
                               fits && !split)
                         << precision.name << ": " << what;
                   });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaPairs,
                         ::testing::Range(0, static_cast<int>(pair_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// The input read in place (CONVT_WG_RAW=1 asks for it wherever it can run: float32 as TF32,
// A from registers) on every wgmma case: position-major tiles of 8 to 64 channels (several
// channel tiles past 64), inputs a tensor map reads as they are (W a multiple of 4 floats)
// and the others, padded first (channels_last, W of 38, 62, 298, 517, ...), strides and
// tap-less phases, groups, padding that starts boxes left of the input. Other precisions
// run as before, and so do problems with zeros inserted along W. Where the W halo is too
// wide for its tile, or the group has fewer than 16 input channels, the copying kernel
// runs, which CudaWgmmaRaw.MostCasesReadTheInputInPlace keeps rare.
class CudaWgmmaRaw : public ::testing::TestWithParam<int> {};

TEST_P(CudaWgmmaRaw, MatchesFloat64Oracle) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Case& c = wgmma_case_list()[static_cast<size_t>(GetParam())];
  const ScopedEnv env("CONVT_WG_RAW", "1");
  check_wgmma_case(c, 9973u * uint64_t(GetParam()) + 11,
                   [](const Precision& precision, bool split, const std::string& what) {
                     // (16-bit channels_last inputs may still be read in place through
                     // a tensor map, CudaWgmmaChannelsLast; not with A from registers.)
                     const bool tf32 = precision.dtype == DType::kFloat32 && !split;
                     if (!tf32)
                       EXPECT_EQ(what.find("(A from registers)"), std::string::npos)
                           << precision.name << ": " << what;
                   });
}

TEST(CudaWgmmaRaw, MostCasesReadTheInputInPlace) {
  const std::string reason = wgmma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const ScopedEnv env("CONVT_WG_RAW", "1");
  int raw = 0, padded = 0, total = 0;
  for (const Case& c : wgmma_case_list()) {
    Problem p = c.problem;
    p.dtype = DType::kFloat32;
    ExecOptions opt;
    opt.forward_kernel = ForwardKernel::kImplicitGemmWgmma;
    HostTensor x(p.input_shape(), p.tensor_rank(), p.dtype, c.layout);
    DeviceTensor gx(x, nullptr);
    const std::string what = convt::describe_forward(p, gx.ref, opt);
    if (what.find("zeros inserted along W") != std::string::npos) continue;  // (not with those)
    ++total;
    if (what.find("input read in place") != std::string::npos) ++raw;
    if (what.find("input padded, then read in place") != std::string::npos) ++padded;
  }
  EXPECT_GE((raw + padded) * 10, total * 8) << raw << " + " << padded << " of " << total;
  EXPECT_GE(raw, 10);
  EXPECT_GE(padded, 3);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaWgmmaRaw,
                         ::testing::Range(0, static_cast<int>(wgmma_case_list().size()),
                                          quick_mode() ? 3 : 1),
                         indexed_case_name);

// Layouts a tensor map cannot describe run the mma.sync kernels instead of the TMA kernel
// asked for, and say so. (Under the default dispatch some of these run the wgmma kernel,
// whose input copy reads any layout.)
TEST(CudaTmaPath, DeclinesLayoutsATensorMapCannotDescribe) {
  const std::string reason = tma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  struct Decline {
    Problem p;
    Layout layout;
    const char* why;
  };
  const Decline declines[] = {
      {make_problem(2, 2, 16, 16, 1, {4, 16, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                    {1, 1, 1}, false),
       Layout::kChannelsLast, "input W not contiguous"},
      {make_problem(2, 2, 16, 16, 1, {4, 10, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                    {1, 1, 1}, false),
       Layout::kContiguous, "input strides not multiples of 16 bytes"},
      {make_problem(2, 2, 32, 32, 2, {4, 16, 1}, {3, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                    {1, 1, 1}, false),
       Layout::kRowPadded, "input batch stride does not join batch and groups"},
      // W taps 100 columns apart: their windows (64 + 200 columns) exceed a 256-wide box.
      {make_problem(2, 1, 16, 16, 1, {3, 16, 1}, {2, 3, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                    {1, 100, 1}, false),
       Layout::kContiguous, "too wide for a TMA box"},
  };
  uint64_t seed = 5;
  for (const Decline& d : declines) {
    Problem p = d.p;
    p.dtype = DType::kBFloat16;
    SCOPED_TRACE(p.to_string());
    HostTensor x(p.input_shape(), p.tensor_rank(), p.dtype, d.layout);
    DeviceTensor gx(x, nullptr);
    ExecOptions opt;
    opt.forward_kernel = ForwardKernel::kImplicitGemmTma;
    const std::string what = convt::describe_forward(p, gx.ref, opt);
    EXPECT_NE(what.find(d.why), std::string::npos) << what;
    EXPECT_NE(what.find("mma.sync"), std::string::npos) << what;
    check_all_directions(d.p, d.layout, kPrecisions[4], ++seed, nullptr, false,
                         ForwardKernel::kImplicitGemmTma);
  }
}

// A group's output must not depend on another group's input, even where the channel block
// runs past the group's channels: an infinite input in group 1 leaves group 0 finite.
TEST(CudaTmaPath, GroupsReadOnlyTheirOwnChannels) {
  const std::string reason = tma_unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    Problem p = make_problem(2, 2, 24, 16, 2, {4, 16, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0},
                             {0, 0, 0}, {1, 1, 1}, false);
    p.dtype = dt;
    std::mt19937_64 rng(99);
    CaseTensors t(p, Layout::kContiguous, dt, rng);
    const int64_t plane = p.input_size[0] * p.input_size[1];
    for (int64_t n = 0; n < p.batch; ++n)
      for (int64_t c = 12; c < 24; ++c)
        for (int64_t i = 0; i < plane; ++i)
          t.x.set((n * 24 + c) * plane + i, std::numeric_limits<double>::infinity());
    const DeviceTensor gx(t.x, nullptr), gw(t.w, nullptr), gy(t.y, nullptr);
    ExecOptions opt;
    opt.forward_kernel = ForwardKernel::kImplicitGemmTma;
    Workspace ws(Op::kForward, p, opt);
    EXPECT_NE(convt::describe_forward(p, gx.ref, opt).find("TMA"), std::string::npos);
    convt::forward(p, gx.ref, gw.ref, nullptr, gy.ref, opt);
    gy.download(t.y, nullptr);
    const int64_t out_plane = p.output_size(0) * p.output_size(1);
    for (int64_t n = 0; n < p.batch; ++n)
      for (int64_t c = 0; c < 8; ++c)
        for (int64_t i = 0; i < out_plane; ++i)
          ASSERT_TRUE(std::isfinite(t.y.get((n * 16 + c) * out_plane + i)))
              << dtype_name(dt) << " n " << n << " c " << c << " i " << i;
  }
}

// Infinities and NaN in the input and the weight propagate as in the float64 oracle, in
// every forward kernel and precision: an output the oracle makes +-inf is that infinity,
// one it makes NaN is NaN, and every other output stays finite and within the budget.
// (Split TF32 must not turn inf into inf - inf or inf * 0 = NaN.)
TEST(CudaEdgeCases, NonFiniteInputsPropagateLikeTheFloat64Oracle) {
  SKIP_WITHOUT_CUDA();
  const Problem base = make_problem(2, 2, 16, 24, 1, {5, 16, 1}, {3, 3, 1}, {1, 2, 1},
                                    {1, 1, 0}, {0, 1, 0}, {1, 1, 1}, true);
  const double inf = std::numeric_limits<double>::infinity();
  uint64_t seed = 31337;
  // (The wgmma kernel with and without zeros inserted along W: an infinite weight times an
  // inserted zero must not leave a NaN where float64 has none.)
  for (const char* wup : {"0", "1"})
  for (const Precision& precision : kPrecisions) {
    for (ForwardKernel kernel :
         {ForwardKernel::kImplicitGemm, ForwardKernel::kImplicitGemmHalo,
          ForwardKernel::kImplicitGemmTma, ForwardKernel::kImplicitGemmWgmma,
          ForwardKernel::kAuto}) {
      const ScopedEnv env("CONVT_WG_WUP", wup);
      Problem p = base;
      p.dtype = precision.dtype;
      SCOPED_TRACE(std::string(precision.name) + ", forward kernel " +
                   std::to_string(int(kernel)) + ", CONVT_WG_WUP=" + wup);
      std::mt19937_64 rng(++seed);
      CaseTensors t(p, Layout::kContiguous, p.dtype, rng);
      const int64_t plane = p.input_size[0] * p.input_size[1];
      t.x.set((0 * 16 + 3) * plane + 2 * 16 + 5, inf);         // n 0, c 3, (2, 5)
      t.x.set((1 * 16 + 7) * plane + 1 * 16 + 9, -inf);        // n 1, c 7, (1, 9)
      t.x.set((1 * 16 + 0) * plane + 4 * 16 + 0, std::nan(""));  // n 1, c 0, (4, 0)
      t.w.set(((5 * 24 + 2) * 3 + 1) * 3 + 1, inf);            // ci 5, co 2, tap (1, 1)
      Problem p64 = p;
      p64.dtype = DType::kFloat64;
      const HostTensor x64 = to_f64(t.x), w64 = to_f64(t.w), b64 = to_f64(t.b);
      HostTensor y64 = f64_like(p.output_shape(), p.tensor_rank());
      convt::forward(p64, x64.ref, w64.ref, &b64.ref, y64.ref);

      const DeviceTensor gx(t.x, nullptr), gw(t.w, nullptr), gb(t.b, nullptr), gy(t.y, nullptr);
      ExecOptions opt;
      opt.math = precision.math;
      opt.forward_kernel = kernel;
      Workspace ws(Op::kForward, p, opt);
      convt::forward(p, gx.ref, gw.ref, &gb.ref, gy.ref, opt);
      gy.download(t.y, nullptr);

      expect_non_finite_like_oracle(y64, t.y, precision.budget);
    }
  }
}

TEST(CudaEdgeCases, SizeOneDimensionsWithStrideZero) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem(2, 1, 1, 3, 1, {1, 7, 1}, {1, 3, 1}, {2, 2, 1}, {0, 1, 0},
                                 {1, 1, 0}, {1, 2, 1}, true);
  uint64_t seed = 100;
  for (Layout layout : {Layout::kContiguous, Layout::kGapped, Layout::kPermuted})
    for (const Precision& precision : kPrecisions)
      check_all_directions(p, layout, precision, ++seed, nullptr, true);
}

// A Problem built directly may have no input or no output channels; outputs must still be
// fully written (bias or zeros).
TEST(CudaEdgeCases, ZeroChannelsAndZeroBatchWriteBiasOrZeros) {
  SKIP_WITHOUT_CUDA();
  Problem p = make_problem(1, 2, 0, 4, 1, {5, 1, 1}, {3, 1, 1}, {2, 1, 1}, {0, 0, 0},
                           {1, 0, 0}, {1, 1, 1}, true);
  const int64_t l_out = p.output_size(0);
  // forward with in_channels == 0: y = bias.
  const float bias_host[4] = {0.5f, -1.0f, 2.0f, 0.0f};
  DeviceBuffer bias(sizeof(bias_host)), y(2 * 4 * size_t(l_out) * sizeof(float));
  cuda_check(cudaMemcpy(bias.get(), bias_host, sizeof(bias_host), cudaMemcpyHostToDevice), "copy");
  cuda_check(cudaMemset(y.get(), 0xff, y.bytes()), "memset");
  const TensorRef x_ref(nullptr, DType::kFloat32, Device::cuda(0), {2, 0, 5});
  const TensorRef w_ref(nullptr, DType::kFloat32, Device::cuda(0), {0, 4, 3});
  const TensorRef b_ref(bias.get(), DType::kFloat32, Device::cuda(0), {4});
  const TensorRef y_ref(y.get(), DType::kFloat32, Device::cuda(0), {2, 4, l_out});
  convt::forward(p, x_ref, w_ref, &b_ref, y_ref);
  std::vector<float> y_host(size_t(2 * 4 * l_out));
  cuda_check(cudaMemcpy(y_host.data(), y.get(), y.bytes(), cudaMemcpyDeviceToHost), "copy");
  for (size_t i = 0; i < y_host.size(); ++i)
    ASSERT_EQ(y_host[i], bias_host[(i / size_t(l_out)) % 4]) << "element " << i;

  // grad_input with out_channels == 0: dx = 0.
  Problem q = p;
  q.in_channels = 3;
  q.out_channels = 0;
  DeviceBuffer dx(2 * 3 * 5 * sizeof(float));
  cuda_check(cudaMemset(dx.get(), 0xff, dx.bytes()), "memset");
  const TensorRef dy_ref(nullptr, DType::kFloat32, Device::cuda(0), {2, 0, l_out});
  const TensorRef w0_ref(nullptr, DType::kFloat32, Device::cuda(0), {3, 0, 3});
  const TensorRef dx_ref(dx.get(), DType::kFloat32, Device::cuda(0), {2, 3, 5});
  convt::grad_input(q, dy_ref, w0_ref, dx_ref);
  std::vector<float> dx_host(2 * 3 * 5);
  cuda_check(cudaMemcpy(dx_host.data(), dx.get(), dx.bytes(), cudaMemcpyDeviceToHost), "copy");
  for (float v : dx_host) ASSERT_EQ(v, 0.0f);

  // grad_weight and grad_bias with batch 0: zeros.
  Problem e = p;
  e.batch = 0;
  e.in_channels = 2;
  DeviceBuffer dw(2 * 4 * 3 * sizeof(double)), db(4 * sizeof(double));
  cuda_check(cudaMemset(dw.get(), 0xff, dw.bytes()), "memset");
  cuda_check(cudaMemset(db.get(), 0xff, db.bytes()), "memset");
  e.dtype = DType::kFloat64;
  const TensorRef ex(nullptr, DType::kFloat64, Device::cuda(0), {0, 2, 5});
  const TensorRef edy(nullptr, DType::kFloat64, Device::cuda(0), {0, 4, l_out});
  const TensorRef edw(dw.get(), DType::kFloat64, Device::cuda(0), {2, 4, 3});
  const TensorRef edb(db.get(), DType::kFloat64, Device::cuda(0), {4});
  convt::grad_weight(e, ex, edy, edw);
  convt::grad_bias(e, edy, edb);
  std::vector<double> dw_host(2 * 4 * 3), db_host(4);
  cuda_check(cudaMemcpy(dw_host.data(), dw.get(), dw.bytes(), cudaMemcpyDeviceToHost), "copy");
  cuda_check(cudaMemcpy(db_host.data(), db.get(), db.bytes(), cudaMemcpyDeviceToHost), "copy");
  for (double v : dw_host) ASSERT_EQ(v, 0.0);
  for (double v : db_host) ASSERT_EQ(v, 0.0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaEdgeCases, GradWeightIsDeterministic) {
  SKIP_WITHOUT_CUDA();
  Problem p = make_problem(2, 4, 8, 8, 1, {48, 40, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0},
                           {1, 1, 0}, {1, 1, 1}, false);
  std::mt19937_64 rng(99);
  CaseTensors t(p, Layout::kChannelsLast, DType::kFloat32, rng);
  HostTensor dy(p.output_shape(), 4, DType::kFloat32, Layout::kChannelsLast);
  dy.fill_uniform(rng);
  HostTensor dw1(p.weight_shape(), 4, DType::kFloat32, Layout::kContiguous),
      dw2(p.weight_shape(), 4, DType::kFloat32, Layout::kContiguous);
  const DeviceTensor gx(t.x, nullptr), gdy(dy, nullptr), gdw1(dw1, nullptr), gdw2(dw2, nullptr);
  ExecOptions opt;
  opt.math = MathMode::kStrictFP32;
  Workspace ws(Op::kGradWeight, p, opt);
  convt::grad_weight(p, gx.ref, gdy.ref, gdw1.ref, opt);
  convt::grad_weight(p, gx.ref, gdy.ref, gdw2.ref, opt);
  gdw1.download(dw1, nullptr);
  gdw2.download(dw2, nullptr);
  EXPECT_EQ(std::memcmp(dw1.bytes.data(), dw2.bytes.data(), dw1.bytes.size()), 0);
}

// ---------------------------------------------------------------------------------------
// Streams and errors
// ---------------------------------------------------------------------------------------

TEST(CudaStreams, RunsOnANonBlockingStream) {
  SKIP_WITHOUT_CUDA();
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const Problem p = make_problem(2, 2, 8, 12, 2, {17, 19, 1}, {3, 2, 1}, {2, 3, 1}, {1, 0, 0},
                                 {1, 2, 0}, {1, 1, 1}, true);
  for (const Precision& precision : kPrecisions)
    check_all_directions(p, Layout::kChannelsLast, precision, 4242, stream);
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaErrors, BadDeviceIndexThrowsAndLeavesNoErrorPending) {
  SKIP_WITHOUT_CUDA();
  int count = 0, before = -1, after = -2;
  cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  cuda_check(cudaGetDevice(&before), "cudaGetDevice");
  const Problem p = make_problem(1, 1, 2, 2, 1, {4, 1, 1}, {3, 1, 1}, {2, 1, 1}, {0, 0, 0},
                                 {0, 0, 0}, {1, 1, 1}, true);
  DeviceBuffer buf(4096);
  for (int index : {count, count + 7, -1}) {
    SCOPED_TRACE(index);
    const Device dev = Device::cuda(index);
    const TensorRef x(buf.get(), DType::kFloat32, dev, {1, 2, 4});
    const TensorRef w(buf.get(), DType::kFloat32, dev, {2, 2, 3});
    const TensorRef b(buf.get(), DType::kFloat32, dev, {2});
    const TensorRef y(buf.get(), DType::kFloat32, dev, {1, 2, p.output_size(0)});
    EXPECT_THROW(convt::forward(p, x, w, &b, y), convt::Error);
    EXPECT_THROW(convt::grad_input(p, y, w, x), convt::Error);
    EXPECT_THROW(convt::grad_weight(p, x, y, w), convt::Error);
    EXPECT_THROW(convt::grad_bias(p, y, b), convt::Error);
    try {
      convt::forward(p, x, w, &b, y);
    } catch (const convt::Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
      EXPECT_NE(std::string(e.what()).find(std::to_string(index)), std::string::npos) << e.what();
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
  cuda_check(cudaGetDevice(&after), "cudaGetDevice");
  EXPECT_EQ(before, after);
}

TEST(CudaErrors, MixedDevicesThrowAndLeaveNoErrorPending) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem(1, 1, 2, 2, 1, {4, 1, 1}, {3, 1, 1}, {2, 1, 1}, {0, 0, 0},
                                 {0, 0, 0}, {1, 1, 1}, false);
  DeviceBuffer buf(4096);
  std::vector<float> host(1024, 0.0f);
  const int64_t l_out = p.output_size(0);
  const TensorRef gx(buf.get(), DType::kFloat32, Device::cuda(0), {1, 2, 4});
  const TensorRef gw(buf.get(), DType::kFloat32, Device::cuda(0), {2, 2, 3});
  const TensorRef gy(buf.get(), DType::kFloat32, Device::cuda(0), {1, 2, l_out});
  const TensorRef hx(host.data(), DType::kFloat32, Device::cpu(), {1, 2, 4});
  const TensorRef hw(host.data(), DType::kFloat32, Device::cpu(), {2, 2, 3});
  const TensorRef hy(host.data(), DType::kFloat32, Device::cpu(), {1, 2, l_out});
  EXPECT_THROW(convt::forward(p, hx, gw, nullptr, gy), convt::Error);
  EXPECT_THROW(convt::forward(p, gx, hw, nullptr, gy), convt::Error);
  EXPECT_THROW(convt::forward(p, gx, gw, nullptr, hy), convt::Error);
  EXPECT_THROW(convt::grad_input(p, hy, gw, gx), convt::Error);
  EXPECT_THROW(convt::grad_weight(p, gx, hy, gw), convt::Error);
  EXPECT_THROW(convt::grad_weight(p, hx, gy, gw), convt::Error);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// ---------------------------------------------------------------------------------------
// Tensors of more than 2^31 elements
// ---------------------------------------------------------------------------------------

// Values k/8 with |k| <= 8: exact in float16 and bfloat16, and sums of a few products of
// them are exact in float, float16 and bfloat16, so results can be compared exactly.
// Element i holds pattern_value(i mod period, salt); the period is prime, so an index that
// wrapped around 2^31 or 2^32 reads a different value.
double pattern_value(int64_t j, int64_t salt) {
  const uint64_t h = (uint64_t(j) + uint64_t(salt)) * 0x9E3779B97F4A7C15ull;
  return double(int64_t((h >> 40) % 17) - 8) / 8.0;
}

// Fills `count` elements of `dtype` at `dst` with the pattern (host copy of one period,
// then doubling device-to-device copies).
void fill_pattern(void* dst, DType dtype, int64_t count, int64_t period, int64_t salt) {
  const size_t es = dtype_size(dtype);
  const int64_t first = std::min(count, period);
  std::vector<unsigned char> host(size_t(first) * es);
  for (int64_t j = 0; j < first; ++j) store(dtype, host.data(), j, pattern_value(j, salt));
  auto* d = static_cast<unsigned char*>(dst);
  cuda_check(cudaMemcpy(d, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  int64_t filled = first;
  while (filled < count) {
    // Copy whole periods so that element i keeps value(i mod period).
    const int64_t len = std::min((filled / period) * period, count - filled);
    cuda_check(cudaMemcpy(d + size_t(filled) * es, d, size_t(len) * es, cudaMemcpyDeviceToDevice),
               "cudaMemcpy");
    filled += len;
  }
}

// Reads elements [begin, end) of a device array.
std::vector<double> read_range(const void* src, DType dtype, int64_t begin, int64_t end) {
  const size_t es = dtype_size(dtype);
  std::vector<unsigned char> host(size_t(end - begin) * es);
  cuda_check(cudaMemcpy(host.data(), static_cast<const unsigned char*>(src) + size_t(begin) * es,
                        host.size(), cudaMemcpyDeviceToHost),
             "cudaMemcpy");
  std::vector<double> out(size_t(end - begin));
  for (int64_t i = 0; i < end - begin; ++i) out[size_t(i)] = load(dtype, host.data(), i);
  return out;
}

// Index ranges to check in an array of `numel` elements: its start, the neighbourhoods of
// 2^31 and 2^32 where they exist, its end, and random single elements.
std::vector<std::pair<int64_t, int64_t>> sample_ranges(int64_t numel, std::mt19937_64& rng) {
  std::vector<std::pair<int64_t, int64_t>> r;
  auto add = [&](int64_t b, int64_t e) {
    b = std::max<int64_t>(b, 0);
    e = std::min(e, numel);
    if (b < e) r.emplace_back(b, e);
  };
  add(0, 2048);
  add((int64_t(1) << 31) - 1024, (int64_t(1) << 31) + 1024);
  add((int64_t(1) << 32) - 1024, (int64_t(1) << 32) + 1024);
  add(numel - 2048, numel);
  std::uniform_int_distribution<int64_t> pick(0, numel - 1);
  for (int i = 0; i < 1000; ++i) {
    const int64_t j = pick(rng);
    add(j, j + 1);
  }
  return r;
}

TEST(CudaLargeTensors, ForwardAndGradInputBeyond2To31Elements) {
  SKIP_WITHOUT_CUDA();
  if (quick_mode()) GTEST_SKIP() << "CONVT_TEST_QUICK is set: large-tensor test skipped";
  // Forward (bfloat16): x (1, 1, L), y (1, 3, L+1): y has 3*(L+1) > 2^31 elements.
  // Grad-input (float16): dy (1, 1, L+1), dx (1, 3, L): dx has 3*L > 2^31 elements.
  const int64_t L = (int64_t(1) << 30) + 3, Lo = L + 1, K = 2;
  const size_t big_bytes = size_t(3 * Lo) * 2, small_bytes = size_t(Lo) * 2;
  size_t free_bytes = 0, total_bytes = 0;
  cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const size_t need = big_bytes + small_bytes + (size_t(1) << 30);
  if (free_bytes < need)
    GTEST_SKIP() << "needs " << (need >> 20) << " MiB of free device memory, "
                 << (free_bytes >> 20) << " MiB free";
  DeviceBuffer big(big_bytes), small(small_bytes), params(64);
  const int64_t period_a = 65521, period_b = 65519;
  std::mt19937_64 rng(31);

  {  // forward, bfloat16, with bias
    Problem p = make_problem(1, 1, 1, 3, 1, {L, 1, 1}, {K, 1, 1}, {1, 1, 1}, {0, 0, 0},
                             {0, 0, 0}, {1, 1, 1}, true);
    p.dtype = DType::kBFloat16;
    double w[3][2], b[3];
    uint16_t wb[9];  // weight (6 values), then bias (3)
    for (int c = 0; c < 3; ++c) {
      for (int k = 0; k < K; ++k) {
        w[c][k] = pattern_value(10 + 2 * c + k, 5);
        store(p.dtype, wb, c * K + k, w[c][k]);
      }
      b[c] = pattern_value(20 + c, 6);
      store(p.dtype, wb, 6 + c, b[c]);
    }
    cuda_check(cudaMemcpy(params.get(), wb, sizeof(wb), cudaMemcpyHostToDevice), "cudaMemcpy");
    fill_pattern(small.get(), p.dtype, L, period_a, 1);
    cuda_check(cudaMemset(big.get(), 0xff, big_bytes), "cudaMemset");  // NaN poison
    const Device dev = Device::cuda(0);
    const TensorRef x(small.get(), p.dtype, dev, {1, 1, L});
    const TensorRef wt(params.get(), p.dtype, dev, {1, 3, K});
    const TensorRef bt(static_cast<uint16_t*>(params.get()) + 6, p.dtype, dev, {3});
    const TensorRef y(big.get(), p.dtype, dev, {1, 3, Lo});
    ExecOptions opt;
    Workspace ws(Op::kForward, p, opt);
    convt::forward(p, x, wt, &bt, y, opt);
    cuda_check(cudaDeviceSynchronize(), "forward");
    auto x_at = [&](int64_t i) { return pattern_value(i % period_a, 1); };
    int64_t checked = 0;
    for (const auto& range : sample_ranges(3 * Lo, rng)) {
      const std::vector<double> got = read_range(big.get(), p.dtype, range.first, range.second);
      for (int64_t e = range.first; e < range.second; ++e) {
        const int64_t c = e / Lo, o = e % Lo;
        double ref = 0;
        for (int k = 0; k < K; ++k)
          if (o - k >= 0 && o - k < L) ref += x_at(o - k) * w[c][k];
        ref += b[c];
        ASSERT_EQ(got[size_t(e - range.first)], ref) << "forward y[0, " << c << ", " << o << "]";
        ++checked;
      }
    }
    EXPECT_GT(checked, 7000);
  }

  {  // grad_input, float16
    Problem p = make_problem(1, 1, 3, 1, 1, {L, 1, 1}, {K, 1, 1}, {1, 1, 1}, {0, 0, 0},
                             {0, 0, 0}, {1, 1, 1}, false);
    p.dtype = DType::kFloat16;
    double w[3][2];
    uint16_t wb[6];
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < K; ++k) {
        w[c][k] = pattern_value(30 + 2 * c + k, 7);
        store(p.dtype, wb, c * K + k, w[c][k]);
      }
    cuda_check(cudaMemcpy(params.get(), wb, sizeof(wb), cudaMemcpyHostToDevice), "cudaMemcpy");
    fill_pattern(small.get(), p.dtype, Lo, period_b, 2);
    cuda_check(cudaMemset(big.get(), 0xff, big_bytes), "cudaMemset");
    const Device dev = Device::cuda(0);
    const TensorRef dy(small.get(), p.dtype, dev, {1, 1, Lo});
    const TensorRef wt(params.get(), p.dtype, dev, {3, 1, K});
    const TensorRef dx(big.get(), p.dtype, dev, {1, 3, L});
    ExecOptions opt;
    Workspace ws(Op::kGradInput, p, opt);
    convt::grad_input(p, dy, wt, dx, opt);
    cuda_check(cudaDeviceSynchronize(), "grad_input");
    auto dy_at = [&](int64_t o) { return pattern_value(o % period_b, 2); };
    int64_t checked = 0;
    for (const auto& range : sample_ranges(3 * L, rng)) {
      const std::vector<double> got = read_range(big.get(), p.dtype, range.first, range.second);
      for (int64_t e = range.first; e < range.second; ++e) {
        const int64_t c = e / L, i = e % L;
        double ref = 0;
        for (int k = 0; k < K; ++k)
          if (i + k < Lo) ref += dy_at(i + k) * w[c][k];
        ASSERT_EQ(got[size_t(e - range.first)], ref)
            << "grad_input dx[0, " << c << ", " << i << "]";
        ++checked;
      }
    }
    EXPECT_GT(checked, 7000);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace test
}  // namespace convt
