// The implicit-GEMM forward's launches for bfloat16 (see fprop_launch.hpp).
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

template void launch_fprop_tma<__nv_bfloat16, false>(const ImplicitGemmFpropPlan&, const Problem&,
                                              const CUtensorMap&, const TensorRef&,
                                              const TensorRef*, const TensorRef&,
                                              const ExecOptions&, int);
template void launch_fprop_mma<__nv_bfloat16, false>(const ImplicitGemmFpropPlan&, const Problem&,
                                              const TensorRef&, const TensorRef&,
                                              const TensorRef*, const TensorRef&,
                                              const ExecOptions&);

}  // namespace cuda
}  // namespace convt
