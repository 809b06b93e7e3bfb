// The wgmma forward reading the input in place (float32 as TF32, A from registers; see
// fprop_launch.hpp), apart from the other launches so that the kernels build in parallel.
#include "fprop_launch.cuh"

namespace convt {
namespace cuda {

void launch_wgmma_raw(const wg::Params& fp, const CUtensorMap& map, std::size_t smem,
                      cudaStream_t stream, int device, int nc) {
  using fprop_detail::launch_wgmma_n;
  switch (nc) {
    case 8: launch_wgmma_n<float, 256, false, 8, true>(fp, map, smem, stream, device); break;
    case 16: launch_wgmma_n<float, 256, false, 16, true>(fp, map, smem, stream, device); break;
    case 24: launch_wgmma_n<float, 256, false, 24, true>(fp, map, smem, stream, device); break;
    case 32: launch_wgmma_n<float, 256, false, 32, true>(fp, map, smem, stream, device); break;
    case 48: launch_wgmma_n<float, 128, false, 48, true>(fp, map, smem, stream, device); break;
    default:
      CONVT_CHECK(nc == 64, "convt: wgmma tile reading the input in place with ", nc,
                  " channels");
      launch_wgmma_n<float, 128, false, 64, true>(fp, map, smem, stream, device);
  }
}

}  // namespace cuda
}  // namespace convt
