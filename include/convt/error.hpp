// convt/error.hpp — the library's exception type.
//
// Every failure convt reports (bad arguments, unsupported configurations, CUDA errors)
// is a convt::Error. Its kind tells a language binding which exception to raise so that
// convt fails exactly where, and how, PyTorch would: most argument errors are
// RuntimeError in PyTorch's functional API, module constructor errors are ValueError.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace convt {

enum class ErrorKind {
  kRuntime,         // PyTorch RuntimeError: bad shapes, strides, paddings, CUDA failures
  kValue,           // PyTorch ValueError: bad constructor arguments, output_size
  kType,            // PyTorch TypeError: wrong argument types
  kNotImplemented,  // PyTorch NotImplementedError: unsupported dtype/device
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  explicit Error(const std::string& message) : Error(ErrorKind::kRuntime, message) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

}  // namespace convt

// CONVT_CHECK(cond, part, part, ...): throw convt::Error(kRuntime) with the parts
// streamed together when cond is false. CONVT_CHECK_KIND takes the kind first.
#define CONVT_CHECK(cond, ...)                                                    \
  do {                                                                            \
    if (!(cond))                                                                  \
      throw ::convt::Error(::convt::ErrorKind::kRuntime,                          \
                           ::convt::detail::str_cat(__VA_ARGS__));                \
  } while (0)

#define CONVT_CHECK_KIND(kind, cond, ...)                                         \
  do {                                                                            \
    if (!(cond))                                                                  \
      throw ::convt::Error(kind, ::convt::detail::str_cat(__VA_ARGS__));          \
  } while (0)
