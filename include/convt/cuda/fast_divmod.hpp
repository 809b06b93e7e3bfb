#pragma once
// Division by a divisor fixed ahead of the divisions (a kernel's tile counts, strides):
// a multiply-high, an add and a shift in place of the ~20 instructions of an integer
// division, for the indices a persistent kernel's producer decodes per tile.

#include <cstdint>

#if defined(__CUDACC__)
#define CONVT_FD_HD __host__ __device__ __forceinline__
#else
#define CONVT_FD_HD inline
#endif

namespace convt {
namespace cuda {

// Unsigned division by an invariant integer (Granlund and Montgomery): for a divisor d >= 1
// with l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1 (which fits 32 bits),
// n / d = (umulhi(n, m) + n) >> l for every n < 2^32; for n < 2^31, the indices here, the
// sum cannot overflow 32 bits (umulhi(n, m) <= n), so no wider form is needed.
struct FastDiv {
  uint32_t d = 1;
  uint32_t m = 1;
  int l = 0;

  FastDiv() = default;
  CONVT_FD_HD explicit FastDiv(int divisor) : d(uint32_t(divisor)) {
    l = 0;
    while ((uint64_t(1) << l) < d) ++l;
    m = uint32_t((uint64_t(1) << 32) * ((uint64_t(1) << l) - d) / d + 1);
  }

  // n / d for 0 <= n < 2^31.
  CONVT_FD_HD int div(int n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(uint32_t(n), m);
#else
    const uint32_t t = uint32_t((uint64_t(uint32_t(n)) * m) >> 32);
#endif
    return int((t + uint32_t(n)) >> l);
  }

  // n / d, and n % d into rem.
  CONVT_FD_HD int divmod(int n, int& rem) const {
    const int q = div(n);
    rem = n - q * int(d);
    return q;
  }
};

}  // namespace cuda
}  // namespace convt
