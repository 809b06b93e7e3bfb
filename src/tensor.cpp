#include "convt/tensor.hpp"

#include <sstream>

#include "convt/error.hpp"

namespace convt {

std::array<int64_t, kMaxTensorRank> contiguous_strides(int rank, const int64_t* sizes) {
  std::array<int64_t, kMaxTensorRank> s{};
  int64_t acc = 1;
  for (int d = rank - 1; d >= 0; --d) {
    s[d] = acc;
    acc *= sizes[d] > 1 ? sizes[d] : 1;
  }
  return s;
}

TensorRef TensorRef::from_arrays(void* data, DType dtype, Device device, int rank,
                                 const int64_t* sizes, const int64_t* strides) {
  CONVT_CHECK(rank >= 0 && rank <= kMaxTensorRank, "convt supports tensors of rank at most ",
              kMaxTensorRank, ", but got rank ", rank);
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.rank = rank;
  for (int d = 0; d < rank; ++d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = strides ? strides[d] : 0;
  }
  if (!strides) t.strides = contiguous_strides(rank, sizes);
  return t;
}

TensorRef::TensorRef(void* data_, DType dtype_, Device device_,
                     std::initializer_list<int64_t> sizes_,
                     std::initializer_list<int64_t> strides_) {
  CONVT_CHECK(sizes_.size() == strides_.size(), "sizes and strides must have the same length");
  *this = from_arrays(data_, dtype_, device_, static_cast<int>(sizes_.size()), sizes_.begin(),
                      strides_.begin());
}

TensorRef::TensorRef(void* data_, DType dtype_, Device device_,
                     std::initializer_list<int64_t> sizes_) {
  *this = from_arrays(data_, dtype_, device_, static_cast<int>(sizes_.size()), sizes_.begin(),
                      nullptr);
}

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= sizes[d];
  return n;
}

bool TensorRef::is_contiguous() const {
  int64_t expected = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

std::string TensorRef::sizes_string() const {
  std::ostringstream os;
  os << '[';
  for (int d = 0; d < rank; ++d) os << (d ? ", " : "") << sizes[d];
  os << ']';
  return os.str();
}

}  // namespace convt
