// A forward pass with the convt C++ API: a 2-D transposed convolution that doubles the
// resolution of a feature map (kernel 4, stride 2, padding 1), as in a GAN generator.
//
//   cmake -S . -B build && cmake --build build && ./build/examples/convt_example_forward
//
// The same call runs on the GPU when the tensors' Device is Device::cuda(i) and their data
// pointers are device memory (pass the stream in ExecOptions).
#include <cstdio>
#include <random>
#include <vector>

#include "convt/convt.hpp"

int main() {
  using namespace convt;
  const int64_t N = 2, C_in = 16, C_out = 8, H = 32, W = 32;

  std::vector<float> x(N * C_in * H * W), w(C_in * C_out * 4 * 4), b(C_out);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto* v : {&x, &w, &b})
    for (float& e : *v) e = dist(rng);

  TensorRef input(x.data(), DType::kFloat32, Device::cpu(), {N, C_in, H, W});
  TensorRef weight(w.data(), DType::kFloat32, Device::cpu(), {C_in, C_out, 4, 4});
  TensorRef bias(b.data(), DType::kFloat32, Device::cpu(), {C_out});

  ConvParams params;
  params.spatial_dims = 2;
  params.stride = {2, 2, 1};
  params.padding = {1, 1, 0};

  try {
    // Validates the arguments exactly as PyTorch does and infers every size.
    const Problem problem = Problem::from_tensors(input, weight, &bias, params);
    const auto out_shape = problem.output_shape();
    std::vector<float> y(problem.output_numel());
    TensorRef output(y.data(), DType::kFloat32, Device::cpu(),
                     {out_shape[0], out_shape[1], out_shape[2], out_shape[3]});

    forward(problem, input, weight, &bias, output);

    double sum = 0;
    for (float v : y) sum += v;
    std::printf("%s\n", build_info());
    std::printf("%s\n", problem.to_string().c_str());
    std::printf("output [%lld, %lld, %lld, %lld], sum %.6f\n", (long long)out_shape[0],
                (long long)out_shape[1], (long long)out_shape[2], (long long)out_shape[3], sum);
  } catch (const Error& e) {
    std::fprintf(stderr, "convt error: %s\n", e.what());
    return 1;
  }
  return 0;
}
