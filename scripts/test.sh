#!/usr/bin/env bash
# Build convt with its C++ tests, run them (ctest), then run the Python tests (pytest)
# against the installed `convt` package.
#
#   bash scripts/test.sh                 # everything
#   CONVT_CUDA_ARCHS=90a bash scripts/test.sh
#
# Environment: BUILD_DIR (default build/cpp), CONVT_ENABLE_CUDA (AUTO|ON|OFF),
# CONVT_CUDA_ARCHS (default 80;90a), JOBS (default: all cores), CONVT_SKIP_PYTHON=1.
# Without a GPU, the CUDA sources still compile (when nvcc is found) and the GPU tests
# skip with their reason printed.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build/cpp}
JOBS=${JOBS:-$(nproc)}
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCONVT_ENABLE_CUDA="${CONVT_ENABLE_CUDA:-AUTO}")
[ -n "${CONVT_CUDA_ARCHS:-}" ] && CMAKE_ARGS+=(-DCONVT_CUDA_ARCHS="${CONVT_CUDA_ARCHS}")
[ -n "${CONVT_GTEST_SOURCE_DIR:-}" ] && CMAKE_ARGS+=(-DCONVT_GTEST_SOURCE_DIR="${CONVT_GTEST_SOURCE_DIR}")
command -v ninja >/dev/null && CMAKE_ARGS+=(-G Ninja)

# GoogleTest: an installed one (Debian's libgtest-dev), or sources in CONVT_GTEST_SOURCE_DIR.
if [ -z "${CONVT_GTEST_SOURCE_DIR:-}" ] && [ ! -f /usr/include/gtest/gtest.h ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgtest-dev >/dev/null
  else
    echo "GoogleTest not found: install libgtest-dev, or set CONVT_GTEST_SOURCE_DIR" >&2
    exit 1
  fi
fi

echo "== configure + build (${BUILD_DIR})"
cmake -S . -B "${BUILD_DIR}" "${CMAKE_ARGS[@]}"
cmake --build "${BUILD_DIR}" -j "${JOBS}"

echo "== C++ tests (ctest)"
(cd "${BUILD_DIR}" && ctest --output-on-failure -j "${JOBS}")

CUDA_TESTS="${BUILD_DIR}/tests/cpp/convt_test_cuda"
if [ -x "${CUDA_TESTS}" ] && ! "${CUDA_TESTS}" --gtest_filter='CudaStreams.*' 2>&1 | grep -q "OK \]"; then
  echo "== CUDA tests skipped; why:"
  "${CUDA_TESTS}" --gtest_filter='CudaStreams.*' 2>&1 | grep -m1 "no CUDA device" || true
fi

echo "== example"
"${BUILD_DIR}/examples/convt_example_forward"

echo "== installed CMake package (find_package(convt))"
PKG_DIR="$(cd "${BUILD_DIR}" && pwd)/package-test"
rm -rf "${PKG_DIR}"
cmake --install "${BUILD_DIR}" --prefix "${PKG_DIR}/prefix" >/dev/null
cmake -S tests/cmake_package -B "${PKG_DIR}/build" -DCMAKE_PREFIX_PATH="${PKG_DIR}/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "${PKG_DIR}/build" -j "${JOBS}" >/dev/null
"${PKG_DIR}/build/convt_package_test"

if [ "${CONVT_SKIP_PYTHON:-0}" != "1" ]; then
  echo "== Python tests (pytest)"
  python3 -c "import pytest, numpy" 2>/dev/null || python3 -m pip install -q "pytest>=7" "numpy>=1.24"
  python3 -m pytest -q -ra tests/python
fi
