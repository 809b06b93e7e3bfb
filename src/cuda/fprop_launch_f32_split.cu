// The implicit-GEMM forward's launches for float32 as split TF32 (strict float32) (see fprop_launch.hpp).
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

template void launch_fprop_tma<float, true>(const ImplicitGemmFpropPlan&, const Problem&,
                                              const CUtensorMap&, const TensorRef&,
                                              const TensorRef*, const TensorRef&,
                                              const ExecOptions&, int);
template void launch_fprop_mma<float, true>(const ImplicitGemmFpropPlan&, const Problem&,
                                              const TensorRef&, const TensorRef&,
                                              const TensorRef*, const TensorRef&,
                                              const ExecOptions&);

}  // namespace cuda
}  // namespace convt
