"""The code an exported KernelBench solution compiles, built for real.

* The amalgamated convt sources compile with nvcc for sm_90a (with PyTorch's nvcc flags
  and the exported file's own) and with the host compiler, and link; the linked
  program reports the dispatcher's forward plans (as an exported file does at run time).
* The torch-facing wrapper compiles against PyTorch's headers with the CUDA backend on.
* An exported file builds with ``load_inline`` on this machine (convt's CPU backend where
  PyTorch sees no GPU, the CUDA backend on a GPU) and ModelNew computes what Model
  computes, forward and backward, through the ``kernelbench-check`` protocol too.

These tests compile C++/CUDA (about a minute the first time), so they are marked slow.
Each is skipped, with the reason, when its compiler is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import textwrap
from pathlib import Path

import pytest
import torch

from convt.kernelbench import convt_sources, export_file, load_module, load_problem
from convt.kernelbench import _wrapper

pytestmark = pytest.mark.slow

NVCC = shutil.which("nvcc")
CXX = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
requires_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
requires_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (c++ or g++) on PATH")


def _runtime_nvcc_flags() -> list[str]:
    """The nvcc flags an exported file passes (runtime.py's _CONVT_NVCC_FLAGS)."""
    namespace: dict = {}
    source = (Path(__file__).resolve().parents[2] / "python/convt/kernelbench/runtime.py").read_text()
    start = source.index("_CONVT_NVCC_FLAGS = [")
    end = source.index("]", start) + 1
    exec(source[start:end], namespace)
    return namespace["_CONVT_NVCC_FLAGS"]


_PLAN_MAIN = r"""
#include <iostream>
#include <string>
// Reads problems, one a line: sd N C_in C_out groups dtype math, then per spatial dimension
// input, kernel, stride, padding, output_padding, dilation; prints the forward plan of each.
int main() {
  int sd;
  while (std::cin >> sd) {
    convt::Problem p;
    p.spatial_dims = sd;
    std::string dtype;
    int math = 0;
    std::cin >> p.batch >> p.in_channels >> p.out_channels >> p.groups >> dtype >> math;
    convt::Dims* fields[] = {&p.input_size, &p.kernel_size, &p.stride, &p.padding, &p.output_padding, &p.dilation};
    for (convt::Dims* f : fields)
      for (int d = 0; d < sd; ++d) std::cin >> (*f)[d];
    p.dtype = dtype == "float64" ? convt::DType::kFloat64 : dtype == "float16" ? convt::DType::kFloat16
            : dtype == "bfloat16" ? convt::DType::kBFloat16 : convt::DType::kFloat32;
    std::cout << convt_kb::cuda_forward_plan(p, math) << "\n";
  }
  return 0;
}
"""


def _nvcc_parallel_flags() -> list[str]:
    """What an exported file adds (runtime.py's _convt_nvcc_parallel_flags): the device
    code optimized on every core where nvcc can."""
    out = subprocess.run([NVCC, "--help"], capture_output=True, text=True, timeout=60).stdout
    return ["--split-compile=0"] if "--split-compile" in out else []


def _run(cmd, cwd) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen, what: str) -> None:
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"{what} failed:\n{out[-6000:]}"


@pytest.fixture(scope="module")
def planner_program(tmp_path_factory):
    """The amalgamated CUDA part compiled by nvcc (sm_90a) and the C++ part by the host
    compiler, linked into a program that prints forward plans."""
    if NVCC is None or CXX is None:
        pytest.skip("nvcc and a C++ compiler are needed")
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    src = convt_sources()
    work = tmp_path_factory.mktemp("kb_build")
    (work / "plan_main.cu").write_text(src.api + src.cuda + _wrapper.CUDA_EXTRA + _PLAN_MAIN)
    (work / "core.cpp").write_text('#define CONVT_CUDA_ARCHS_STRING "90a"\n' + src.api + src.core)
    nvcc_flags = list(COMMON_NVCC_FLAGS) + _runtime_nvcc_flags() + _nvcc_parallel_flags() + [
        "-std=c++20", "-gencode=arch=compute_90a,code=sm_90a", "--compiler-options", "-fPIC"]
    procs = [
        (_run([NVCC, *nvcc_flags, "-c", "plan_main.cu", "-o", "plan_main.o"], work), "nvcc (CUDA part, sm_90a)"),
        (_run([CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC", "-DCONVT_WITH_CUDA",
               "-c", "core.cpp", "-o", "core.o"], work), "host compiler (C++ part)"),
    ]
    for proc, what in procs:
        _finish(proc, what)
    _finish(_run([NVCC, "plan_main.o", "core.o", "-o", "plan"], work), "link")
    return work / "plan"


@requires_nvcc
@requires_cxx
def test_amalgamation_compiles_and_links(planner_program):
    assert planner_program.is_file()


def _plan_lines():
    """The 17 KernelBench shapes in float32 (both precision modes), float16, bfloat16 and
    float64, and a depthwise one, as lines for the planner program."""
    from convt.bench.suite import load_suite

    cases = [(c.dims, c.batch, c.in_channels, c.out_channels, c.groups, c.input_size, c.kernel_size, c.stride,
              c.padding, c.output_padding, c.dilation) for c in load_suite("kernelbench").cases]
    cases.append((2, 2, 8, 8, 8, (16, 16), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)))
    lines = []
    for dims, n, cin, cout, g, *per_dim in cases:
        for dtype, math in (("float32", 0), ("float32", 1), ("float16", 0), ("bfloat16", 0), ("float64", 0)):
            lines.append(" ".join(map(str, [dims, n, cin, cout, g, dtype, math] + [v for f in per_dim for v in f])))
    return lines


@requires_nvcc
@requires_cxx
def test_compiled_planner_reports(planner_program):
    """convt_kb::cuda_forward_plan (what an exported file reports at run time) runs on the
    linked amalgamation, in CONVT_LOG's wording: tensor cores for KernelBench's float32
    shapes (TF32 when allowed, split TF32 in strict float32), the direct kernel for float64
    with its form and reason, and the depthwise shape's groups merged eight at a time on the
    wgmma kernel (docs/kernels.md)."""
    lines = _plan_lines()
    proc = subprocess.run([str(planner_program)], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    plans = proc.stdout.splitlines()
    assert len(plans) == len(lines)
    by_mode = {}
    for line, plan in zip(lines, plans):
        fields = line.split()
        by_mode.setdefault((fields[5], fields[6]), []).append(plan)
    assert any(p.startswith("implicit-GEMM") for p in by_mode[("float32", "0")])
    strict = by_mode[("float32", "1")]  # split TF32 on the same kernels
    assert any(p.startswith("implicit-GEMM wgmma persistent 3xTF32") for p in strict)
    assert all("3xTF32" in p or p.startswith("direct kernel") for p in strict)
    assert not any("3xTF32" in p for p in by_mode[("float32", "0")])
    # Depthwise (1 input channel per group): eight groups merged into one of 8 channels.
    assert "3xTF32" in strict[-1] and "groups merged 8 at a time" in strict[-1], strict[-1]
    for plan in by_mode[("float64", "0")]:
        assert plan.startswith("direct kernel, ") and plan.endswith(
            "(implicit GEMM not usable: float64 has no tensor-core path)"), plan
    # The form of each float64 layer: one of the direct kernel's three.
    assert all(any(f in p for f in ("output channels a thread", "by rows of outputs", "one output a thread"))
               for p in by_mode[("float64", "0")])
    for dtype in ("float32", "bfloat16", "float16"):
        depthwise = by_mode[(dtype, "0")][-1]
        assert depthwise.startswith("implicit-GEMM wgmma"), depthwise
        assert "groups merged 8 at a time" in depthwise, depthwise


def _cuda_include_dir() -> Path | None:
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    if NVCC:
        candidates.append(str(Path(os.path.realpath(NVCC)).parent.parent))
        # A wrapper script (exec /path/to/cuda/bin/nvcc "$@") hides the toolkit's directory.
        try:
            text = Path(NVCC).read_text(errors="replace")[:4000]
            for word in text.split():
                if word.endswith("/bin/nvcc"):
                    candidates.append(str(Path(word).parent.parent))
        except OSError:
            pass
    for c in candidates:
        if c and (Path(c) / "include" / "cuda_runtime_api.h").is_file():
            return Path(c) / "include"
    return None


@requires_cxx
def test_wrapper_compiles_with_cuda_backend(tmp_path):
    """The host side of the CUDA build: convt's C++ units and the wrapper (with
    c10/cuda/CUDAStream.h) against PyTorch's headers, as load_inline compiles main.cpp."""
    from torch.utils.cpp_extension import include_paths

    cuda_include = _cuda_include_dir()
    if cuda_include is None:
        pytest.skip("the CUDA toolkit's headers (cuda_runtime_api.h) were not found")
    src = convt_sources()
    functions = "".join(f'  m.def("{n}", torch::wrap_pybind_function({n}), "{d}");\n'
                        for n, d in _wrapper.FUNCTIONS.items())
    (tmp_path / "main.cpp").write_text(
        "#include <torch/extension.h>\n" + '#define CONVT_CUDA_ARCHS_STRING "90a"\n' + src.api + src.core
        + _wrapper.WRAPPER_CPP + "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + functions + "}\n")
    stub = tmp_path / "stub"
    # A CPU-only PyTorch lacks this generated header of its CUDA build; an empty one will do.
    torch_root = Path(include_paths()[0])
    if not (torch_root / "c10/cuda/impl/cuda_cmake_macros.h").is_file():
        (stub / "c10/cuda/impl").mkdir(parents=True)
        (stub / "c10/cuda/impl/cuda_cmake_macros.h").write_text("#pragma once\n")
    includes = [f"-isystem{p}" for p in include_paths()] + [f"-isystem{stub}", f"-isystem{cuda_include}",
                                                             f"-isystem{sysconfig.get_path('include')}"]
    cmd = [CXX, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-DCONVT_WITH_CUDA", "-DTORCH_EXTENSION_NAME=x",
           "-DTORCH_API_INCLUDE_EXTENSION_H", *includes, "main.cpp"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "warning" not in proc.stderr, proc.stderr[-6000:]


# ---------------------------------------------------------------------------------------
# Building and running an exported file on this machine
# ---------------------------------------------------------------------------------------

_PROBLEMS = {
    "p1d": '''
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, dilation=2, bias=True)

            def forward(self, x):
                return self.up(x)

        def get_inputs():
            return [torch.rand(2, 4, 9)]

        def get_init_inputs():
            return []
        ''',
    "p2d_ops": '''
        class Model(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.up = nn.ConvTranspose2d(c, 12, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=4)
                self.norm = nn.GroupNorm(3, 12)

            def forward(self, x):
                return torch.relu(self.norm(self.up(x))) * 2

        def get_inputs():
            return [torch.rand(2, 16, 5, 7)]

        def get_init_inputs():
            return [16]
        ''',
    "p3d": '''
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.ConvTranspose3d(8, 4, 3, stride=2, padding=1, output_padding=1, bias=True)

            def forward(self, x):
                return self.up(x)

        def get_inputs():
            return [torch.rand(1, 8, 3, 4, 5)]

        def get_init_inputs():
            return []
        ''',
    "p2d_wide": '''
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.ConvTranspose2d(32, 48, 3, stride=2, padding=1, output_padding=1)

            def forward(self, x):
                return self.up(x)

        def get_inputs():
            return [torch.rand(2, 32, 12, 14)]

        def get_init_inputs():
            return []
        ''',
}

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def exported(tmp_path_factory, request):
    """The problems and their exported solutions, loaded (the extension built once)."""
    if CXX is None:
        pytest.skip("no C++ compiler for load_inline")
    if DEVICE == "cuda" and NVCC is None:
        pytest.skip("nvcc is needed to build the CUDA extension")
    # Keep built extensions between runs where pytest's cache is enabled.
    cache = getattr(request.config, "cache", None)
    ext_dir = (cache.mkdir("convt_kernelbench_extensions") if cache is not None
               else tmp_path_factory.mktemp("convt_kernelbench_extensions"))
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(ext_dir))
    work = tmp_path_factory.mktemp("kb_run")
    sources = convt_sources()
    out = {}
    for name, body in _PROBLEMS.items():
        path = work / f"{name}.py"
        path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
        solution = export_file(path, work / "solutions" / f"{name}.py", sources=sources).solution
        out[name] = (load_problem(path), load_module(solution, "solution"), path, solution)
    return out


@pytest.mark.parametrize("name", sorted(_PROBLEMS))
def test_exported_model_computes_model(exported, name):
    problem, solution, _, _ = exported[name]
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs()).to(DEVICE)
    torch.manual_seed(0)
    new = solution.ModelNew(*problem.get_init_inputs()).to(DEVICE)
    torch.manual_seed(1)
    (x,) = [t.to(DEVICE) for t in problem.get_inputs()]
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # strict float32 on both sides
    try:
        xr, xn = x.clone().requires_grad_(), x.clone().requires_grad_()
        yr, yn = ref(xr), new(xn)
        assert yn.shape == yr.shape and yn.dtype == yr.dtype
        torch.testing.assert_close(yn, yr, atol=1e-5, rtol=1e-5)
        g = torch.rand_like(yr) * 2 - 1
        gr = torch.autograd.grad(yr, [xr, *ref.parameters()], g)
        gn = torch.autograd.grad(yn, [xn, *new.parameters()], g)
        for a, b in zip(gr, gn):
            torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    kernels = solution._convt_kernel_report(new, x)
    assert [k for k, _ in kernels] == ["up"]
    info = solution._convt_extension().convt_build_info()
    assert info.startswith("convt ") and ("CUDA backend" in info if DEVICE == "cuda" else "CPU backend only" in info)


@pytest.mark.skipif(DEVICE != "cuda", reason="the weight's re-layout is kept on CUDA only")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exported_forward_sees_every_weight_change(exported, monkeypatch, dtype):
    """By default (CONVT_WEIGHT_CACHE unset) the exported wrapper keeps the forward's weight
    re-layout per weight tensor: later forwards take it, and every change PyTorch counts
    (in-place ops, copy_, optimizer steps, load_state_dict) is seen; a change through .data
    with the cache off (CONVT_WEIGHT_CACHE=0) or cleared; CUDA-graph replays see in-place
    changes."""
    import torch.nn.functional as F

    monkeypatch.delenv("CONVT_WEIGHT_CACHE", raising=False)
    _, solution, _, _ = exported["p2d_wide"]
    torch.manual_seed(0)
    model = solution.ModelNew().to(DEVICE, dtype)
    up = model.up
    x = torch.rand(2, 32, 12, 14, device=DEVICE, dtype=dtype)
    budget = 8e-4 if dtype is torch.float32 else 1e-2
    if "implicit-GEMM" not in solution._convt_kernel_report(model, x)[0][1]:
        pytest.skip("this GPU runs the direct kernel here: no packing to keep")

    def error(y):
        ref = F.conv_transpose2d(x.double(), up.weight.double(), up.bias.double(), stride=2, padding=1,
                                 output_padding=1)
        return ((y.double() - ref).abs().max() / ref.abs().max()).item()

    def check():
        assert error(model(x)) <= budget

    with torch.no_grad():
        for _ in range(3):
            check()
        up.weight.mul_(-2)
        check()
        up.weight.copy_(torch.randn_like(up.weight))
        check()
        up.load_state_dict({"weight": torch.randn_like(up.weight), "bias": up.bias.clone()})
        check()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model(x).float().square().mean().backward()
    opt.step()
    with torch.no_grad():
        check()
        # Through .data the version counter does not move: CONVT_WEIGHT_CACHE=0, or the
        # cache cleared, is the way.
        monkeypatch.setenv("CONVT_WEIGHT_CACHE", "0")
        up.weight.data.copy_(torch.randn_like(up.weight))
        check()
        monkeypatch.delenv("CONVT_WEIGHT_CACHE")
        up.weight.data.mul_(-1)
        solution._convt_extension().convt_clear_weight_cache()
        check()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = model(x)
        for scale in (1.0, -3.0):
            up.weight.mul_(scale)
            graph.replay()
            torch.cuda.synchronize()
            assert error(static_y) <= budget


def test_exported_module_matches_torch_details(exported):
    """Unbatched input, forward(x, output_size=...), channels_last, errors PyTorch raises."""
    _, solution, _, _ = exported["p2d_ops"]
    torch.manual_seed(0)
    up = solution.ModelNew(16).up.to(DEVICE)
    torch_forward = torch.nn.ConvTranspose2d.forward
    x = torch.rand(16, 5, 7, device=DEVICE)
    torch.backends.cudnn.allow_tf32, saved = False, torch.backends.cudnn.allow_tf32
    try:
        torch.testing.assert_close(up(x), torch_forward(up, x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(up(x, output_size=[10, 11]), torch_forward(up, x, output_size=[10, 11]),
                                   atol=1e-5, rtol=1e-5)
        xcl = torch.rand(2, 16, 5, 7, device=DEVICE).to(memory_format=torch.channels_last)
        y, ref = up(xcl), torch_forward(up, xcl)
        torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
        assert y.stride() == ref.stride()
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv_transpose2d"):
        up(torch.rand(5, 7, device=DEVICE))
    with pytest.raises(RuntimeError, match="expected input\\[2, 8, 5, 7\\] to have 16 channels, but got 8"):
        up(torch.rand(2, 8, 5, 7, device=DEVICE))
    with pytest.raises(RuntimeError, match=r"Input type \(Double\) and weight type \(Float\) should be the same"):
        up(torch.rand(2, 16, 5, 7, device=DEVICE, dtype=torch.float64))


def test_two_solutions_in_one_process(exported):
    """Every exported file builds the same extension (same sources): the second loads it."""
    _, first, _, _ = exported["p1d"]
    _, second, _, _ = exported["p3d"]
    assert first._convt_build_spec()[0] == second._convt_build_spec()[0]
    assert first._convt_extension().convt_build_info() == second._convt_extension().convt_build_info()


def test_checker_passes_exported_solution(exported, capsys):
    from convt.cli import main

    _, _, problem_path, solution_path = exported["p3d"]
    code = main(["kernelbench-check", str(problem_path), str(solution_path), "--device", DEVICE,
                 "--trials", "2", "--reps", "3", "--warmup", "1", "-q"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "result    PASS" in printed and "weights   identical under the same seed: 2 tensors" in printed
    assert "kernels   [strict] up: " in printed
