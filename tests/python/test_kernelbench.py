"""``convt export-kernelbench`` and ``convt kernelbench-check`` without a GPU.

Problem files covering 1-D, 2-D and 3-D, strided, dilated, grouped, with bias, a model
with other operations around its transposed convolution and nested modules are written
for the tests; the exported solutions must parse, import nothing from convt, define a
ModelNew with Model's signature, submodules and identical weights under the same seed,
and re-class exactly the transposed convolutions. Unsupported problems must raise a
clear error and write no file. (Building and running the exported extension is in
test_kernelbench_build.py.)
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from convt.cli import main
from convt.kernelbench import (
    AmalgamationError,
    ExportError,
    convt_sources,
    export_dir,
    export_file,
    find_source_root,
    load_module,
    load_problem,
)
from convt.kernelbench.amalgamate import SourceTree, amalgamate
from convt.kernelbench.check import CheckConfig, run_check
from convt.kernelbench.problems import KERNELBENCH_NAMES, problem_filename
from convt.kernelbench.summary import summarise

# ---------------------------------------------------------------------------------------
# Problem files
# ---------------------------------------------------------------------------------------

_HEAD = "import torch\nimport torch.nn as nn\n\n"

PROBLEMS = {
    "conv1d_strided_dilated_bias": _HEAD + textwrap.dedent('''
        class Model(nn.Module):
            def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                         padding: int = 0, output_padding: int = 0, dilation: int = 1, bias: bool = False):
                super(Model, self).__init__()
                self.conv1d_transpose = nn.ConvTranspose1d(
                    in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                    output_padding=output_padding, dilation=dilation, bias=bias)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.conv1d_transpose(x)

        batch_size = 2
        in_channels = 4
        out_channels = 6
        length = 9

        def get_inputs():
            return [torch.rand(batch_size, in_channels, length)]

        def get_init_inputs():
            return [in_channels, out_channels, 3, 2, 1, 1, 2, True]
        '''),
    "conv2d_grouped_asymmetric": _HEAD + textwrap.dedent('''
        class Model(nn.Module):
            def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                         dilation=1, groups=1, bias=False):
                super().__init__()
                self.conv_transpose2d = nn.ConvTranspose2d(
                    in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                    dilation=dilation, groups=groups, bias=bias)

            def forward(self, x):
                return self.conv_transpose2d(x)

        def get_inputs():
            return [torch.rand(2, 8, 5, 7)]

        def get_init_inputs():
            return [8, 12, (3, 5), (2, 1), (1, 2), (1, 2), 4, True]
        '''),
    "conv3d_strided_padded": _HEAD + textwrap.dedent('''
        class Model(nn.Module):
            def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                         output_padding=0, groups=1, bias=False):
                super().__init__()
                self.conv_transpose3d = nn.ConvTranspose3d(
                    in_channels, out_channels, (kernel_size, kernel_size, kernel_size), stride=stride,
                    padding=padding, output_padding=output_padding, groups=groups, bias=bias)

            def forward(self, x):
                return self.conv_transpose3d(x)

        batch_size = 1
        depth, height, width = 3, 4, 5

        def get_inputs():
            return [torch.rand(batch_size, 16, depth, height, width)]

        def get_init_inputs():
            return [16, 8, 3, 2, 1, 1]
        '''),
    # Other operations around the transposed convolution, a module-level constant used in
    # forward, a __future__ import (which must stay first in the exported file).
    "conv2d_then_ops": "from __future__ import annotations\n\n" + _HEAD + textwrap.dedent('''
        import torch.nn.functional as F

        SCALE = 0.5

        class Model(nn.Module):
            """ConvTranspose2d, batch norm, GELU, a learnt scale, a 1x1 convolution, a sum."""

            def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 4):
                super().__init__()
                self.up = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2, padding=1)
                self.norm = nn.BatchNorm2d(out_channels)
                self.scale = nn.Parameter(torch.ones(1, out_channels, 1, 1))
                self.proj = nn.Conv2d(out_channels, 3, 1)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                y = F.gelu(self.norm(self.up(x))) * self.scale * SCALE
                return self.proj(y).sum(dim=1)

        def get_inputs():
            return [torch.rand(2, 6, 5, 5)]

        def get_init_inputs():
            return [6, 10]
        '''),
    # Nested modules, two transposed convolutions, forward(x, output_size=...).
    "nested_output_size": _HEAD + textwrap.dedent('''
        class Model(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.decoder = nn.Sequential(
                    nn.ConvTranspose2d(channels, channels // 2, 3, stride=2, padding=1, bias=False),
                    nn.ReLU(),
                )
                self.head = nn.ModuleDict({"up": nn.ConvTranspose2d(channels // 2, 2, 3, stride=2, padding=1)})

            def forward(self, x):
                y = self.decoder(x)
                return self.head["up"](y, output_size=[2 * y.shape[-2], 2 * y.shape[-1]])

        def get_inputs():
            return [torch.rand(2, 8, 3, 4)]

        def get_init_inputs():
            return [8]
        '''),
}

BAD_PROBLEMS = {
    "no_conv_transpose": (_HEAD + textwrap.dedent('''
        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.fc = nn.Linear(n, n)

            def forward(self, x):
                return torch.nn.functional.conv_transpose1d(x, self.fc.weight.view(x.shape[1], -1, 1))

        def get_inputs():
            return [torch.rand(2, 4, 8)]

        def get_init_inputs():
            return [4]
        '''), r"no nn\.ConvTranspose1d/2d/3d module.*functional calls", "no-conv-transpose"),
    "padding_mode": (_HEAD + textwrap.dedent('''
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.ConvTranspose2d(4, 4, 3)
                self.up.padding_mode = "reflect"

            def forward(self, x):
                return self.up(x)

        def get_inputs():
            return [torch.rand(1, 4, 5, 5)]

        def get_init_inputs():
            return []
        '''), r"up \(ConvTranspose2d\(4, 4.*\) uses padding_mode='reflect'; convt computes padding_mode='zeros' only",
        "unsupported"),
    "subclass_only": (_HEAD + textwrap.dedent('''
        class MyUp(nn.ConvTranspose2d):
            def forward(self, x):
                return super().forward(x) * 2

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = MyUp(4, 4, 3)

            def forward(self, x):
                return self.up(x)

        def get_inputs():
            return [torch.rand(1, 4, 5, 5)]

        def get_init_inputs():
            return []
        '''), r"subclasses of nn\.ConvTranspose\*d \(up \(MyUp\)\)", "unsupported"),
    "not_a_problem": (_HEAD + "class Model(nn.Module):\n    pass\n",
                      r"not a KernelBench problem file: it defines no get_inputs, get_init_inputs", "problem"),
    "syntax_error": (_HEAD + "class Model(nn.Module)\n    pass\n", r":4: not valid Python", "problem"),
    "constructor_raises": (_HEAD + textwrap.dedent('''
        class Model(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.up = nn.ConvTranspose2d(c, 4, 3, groups=3)

            def forward(self, x):
                return self.up(x)

        def get_inputs():
            return [torch.rand(1, 4, 5, 5)]

        def get_init_inputs():
            return [4]
        '''), r"Model\(\*get_init_inputs\(\)\) raised ValueError: in_channels must be divisible by groups",
        "problem"),
}

_CONV_TYPES = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


@pytest.fixture(scope="module")
def sources():
    return convt_sources()


@pytest.fixture(autouse=True)
def _lazy_build(monkeypatch):
    # Importing an exported file on a CUDA machine builds its extension; these tests only
    # look at the Python side.
    monkeypatch.setenv("CONVT_KB_BUILD", "lazy")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def _imports_convt(text: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "convt"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "convt":
            found.append(node.module)
    return found


def _build_both(problem, solution, seed: int = 1234):
    init = problem.get_init_inputs()
    torch.manual_seed(seed)
    ref = problem.Model(*init)
    torch.manual_seed(seed)
    new = solution.ModelNew(*init)
    return ref, new


# ---------------------------------------------------------------------------------------
# Export: the generated file
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_export_matches_model(tmp_path, sources, name):
    problem_path = _write(tmp_path, name, PROBLEMS[name])
    out = tmp_path / "solutions" / f"{name}.py"
    result = export_file(problem_path, out, sources=sources)
    text = out.read_text(encoding="utf-8")
    assert text == result.text

    # It parses and imports nothing from convt.
    compile(text, str(out), "exec")
    assert _imports_convt(text) == []
    assert not re.search(r"^\s*(import|from)\s+convt\b", text, re.M)
    # The problem is carried verbatim; the convt sources and the wrapper are inlined.
    assert PROBLEMS[name] in text
    assert "load_inline" in text and "convt::forward(" in text and "__global__" in text
    assert '#include "' not in text

    problem = load_problem(problem_path)
    solution = load_module(out, "solution")
    assert issubclass(solution.ModelNew, torch.nn.Module)
    assert inspect.signature(solution.ModelNew) == inspect.signature(problem.Model)

    ref, new = _build_both(problem, solution)
    ref_state, new_state = ref.state_dict(), new.state_dict()
    assert list(new_state) == list(ref_state)
    for key, value in ref_state.items():
        assert new_state[key].shape == value.shape, key
        assert torch.equal(new_state[key], value), f"{key} differs under the same seed"
    assert [n for n, _ in new.named_parameters()] == [n for n, _ in ref.named_parameters()]

    # Exactly the transposed convolutions are re-classed (still instances of torch's).
    ref_modules, new_modules = dict(ref.named_modules()), dict(new.named_modules())
    assert list(new_modules) == list(ref_modules)
    converted = []
    for mod_name, module in ref_modules.items():
        if mod_name == "":
            continue
        twin = new_modules[mod_name]
        if type(module) in _CONV_TYPES:
            assert type(twin).__name__ == type(module).__name__ + "Convt"
            assert isinstance(twin, type(module))
            converted.append(mod_name)
        else:
            assert type(twin) is type(module)
    assert converted and new._convt_modules == converted
    assert sorted(i.name for i in result.analysis.convs) == sorted(converted)

    # Model's forward is inherited unchanged.
    assert solution.ModelNew.forward is problem.Model.forward or (
        solution.ModelNew.forward.__code__.co_code == problem.Model.forward.__code__.co_code)


def test_header_names_modules_and_shapes(tmp_path, sources):
    path = _write(tmp_path, "p", PROBLEMS["nested_output_size"])
    text = export_file(path, None, sources=sources).text
    header = text.split("# ===== the problem")[0]
    assert "decoder.0: ConvTranspose2d(8, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)" in header
    assert "input (2, 8, 3, 4) -> output (2, 4, 5, 7)" in header
    # output_size=[10, 14] gives output_padding (1, 1): (5-1)*2 - 2 + 2 + 1 + 1 = 10.
    assert "head.up:" in header and "input (2, 4, 5, 7) -> output (2, 2, 10, 14)" in header
    assert f"(convt {sources.version})" in header and "kernelbench-check` prints the choice" in header


def test_header_uses_installed_planner(tmp_path, sources, monkeypatch):
    """With a convt build that can describe its forward plan, the header quotes it."""
    import convt

    calls = []

    def describe_forward(x, w, b, params, math):
        calls.append((x, w, b, params, math))
        return f"plan-{'tf32' if math == 0 else 'strict'}-{x[1]}"

    monkeypatch.setattr(convt._C, "describe_forward", describe_forward, raising=False)
    monkeypatch.setattr(convt._C, "built_with_cuda", lambda: True)
    path = _write(tmp_path, "p", PROBLEMS["conv1d_strided_dilated_bias"])
    header = export_file(path, None, sources=sources).text.split("# ===== the problem")[0]
    assert "forward, float32, TF32 allowed (PyTorch's default): plan-tf32-(2, 4, 9)" in header
    assert "forward, strict float32: plan-strict-(2, 4, 9)" in header
    x, w, b, params, math = calls[0]
    assert x == (0, (2, 4, 9), (36, 9, 1), 0, 0) and w == (0, (4, 6, 3), (18, 3, 1), 0, 0)
    assert b == (0, (6,), (1,), 0, 0) and params == (1, (2,), (1,), (1,), (2,), 1) and math == 0


def test_future_import_stays_first(tmp_path, sources):
    path = _write(tmp_path, "p", PROBLEMS["conv2d_then_ops"])
    text = export_file(path, None, sources=sources).text
    first_statement = ast.parse(text).body[0]
    assert isinstance(first_statement, ast.ImportFrom) and first_statement.module == "__future__"


@pytest.mark.parametrize("name", sorted(BAD_PROBLEMS))
def test_unsupported_problem_clear_error_no_file(tmp_path, sources, name):
    text, pattern, reason = BAD_PROBLEMS[name]
    path = _write(tmp_path, name, text)
    out = tmp_path / "out" / "solution.py"
    with pytest.raises(ExportError, match=pattern) as info:
        export_file(path, out, sources=sources)
    assert info.value.reason == reason
    assert not out.exists() and not out.parent.exists()


def test_exported_file_runs_without_convt(tmp_path, sources):
    """In a fresh interpreter where `import convt` fails, every exported file loads,
    builds ModelNew with Model's weights, and opens no file while doing so."""
    paths = []
    for name, text in PROBLEMS.items():
        problem = _write(tmp_path, name, text)
        paths.append((problem, export_file(problem, tmp_path / "sol" / f"{name}.py", sources=sources).solution))
    script = textwrap.dedent('''
        import builtins, json, sys
        import torch
        sys.modules["convt"] = None  # any import of convt now raises ImportError
        opened = []
        real_open = builtins.open
        def spy(file, *args, **kwargs):
            opened.append(str(file))
            return real_open(file, *args, **kwargs)
        pairs = json.loads(sys.argv[1])
        results = []
        for problem_path, solution_path in pairs:
            problem, solution = {}, {"__name__": "solution"}
            exec(compile(real_open(problem_path).read(), problem_path, "exec"), problem)
            code = compile(real_open(solution_path).read(), solution_path, "exec")
            builtins.open = spy
            try:
                exec(code, solution)
                torch.manual_seed(0)
                new = solution["ModelNew"](*solution["get_init_inputs"]())
            finally:
                builtins.open = real_open
            torch.manual_seed(0)
            ref = problem["Model"](*problem["get_init_inputs"]())
            a, b = ref.state_dict(), new.state_dict()
            same = list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
            results.append([solution_path, same])
        print(json.dumps({"results": results, "opened": opened}))
    ''')
    env = dict(os.environ, CONVT_KB_BUILD="lazy")
    proc = subprocess.run([sys.executable, "-c", script, json.dumps([[str(p), str(s)] for p, s in paths])],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["opened"] == []
    assert all(same for _, same in report["results"]), report["results"]
    assert len(report["results"]) == len(PROBLEMS)


# ---------------------------------------------------------------------------------------
# The KernelBench suite
# ---------------------------------------------------------------------------------------

def _suite_cases():
    from convt.bench.suite import load_suite

    return list(load_suite("kernelbench").cases)


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("kernelbench_problems")
    assert main(["export-kernelbench", "--from-suite", "kernelbench", "-o", str(out), "-q"]) == 0
    return out


def test_suite_problems_written(suite_dir):
    files = sorted(p.name for p in suite_dir.glob("*.py"))
    assert len(files) == 17
    assert "57_conv_transposed_2D__square_input__square_kernel.py" in files
    assert "64_conv_transposed_1D.py" in files
    assert {int(f.split("_")[0]) for f in files} == set(KERNELBENCH_NAMES)


@pytest.mark.parametrize("case", _suite_cases(), ids=lambda c: c.id)
def test_suite_problem_matches_case_and_exports(suite_dir, sources, tmp_path, case):
    problem = load_problem(suite_dir / problem_filename(case))
    with torch.device("meta"):
        model = problem.Model(*problem.get_init_inputs())
        (x,) = problem.get_inputs()
    conv = getattr(model, f"conv_transpose{case.dims}d")
    assert type(conv) is getattr(torch.nn, f"ConvTranspose{case.dims}d")
    assert (conv.in_channels, conv.out_channels, conv.groups) == (case.in_channels, case.out_channels, case.groups)
    assert conv.kernel_size == case.kernel_size and conv.stride == case.stride
    assert conv.padding == case.padding and conv.output_padding == case.output_padding
    assert conv.dilation == case.dilation and (conv.bias is not None) == case.bias
    assert tuple(x.shape) == case.input_shape
    assert tuple(model(x).shape) == case.output_shape

    result = export_file(problem.path, tmp_path / problem.path.name, sources=sources)
    compile(result.text, problem.path.name, "exec")
    assert _imports_convt(result.text) == []
    (info,) = result.analysis.convs
    assert info.calls and info.calls[0].input_shape == case.input_shape
    solution = load_module(result.solution, "solution")
    ref, new = _build_both(problem, solution)
    assert [(n, p.shape) for n, p in new.named_parameters()] == [(n, p.shape) for n, p in ref.named_parameters()]
    assert all(torch.equal(a, b) for a, b in zip(ref.parameters(), new.parameters()))


def test_export_dir_skips_and_fails(tmp_path, sources):
    problems = tmp_path / "problems"
    problems.mkdir()
    _write(problems, "a_conv", PROBLEMS["conv3d_strided_padded"])
    _write(problems, "b_linear", BAD_PROBLEMS["no_conv_transpose"][0])
    entries = export_dir(problems, tmp_path / "out")
    assert [(e.problem.name, e.status) for e in entries] == [("a_conv.py", "exported"), ("b_linear.py", "skipped")]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a_conv.py"]
    with pytest.raises(ExportError, match="must differ from the problem directory"):
        export_dir(problems, problems)


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

def test_cli_export_single(tmp_path, capsys):
    path = _write(tmp_path, "p", PROBLEMS["conv1d_strided_dilated_bias"])
    out = tmp_path / "s.py"
    assert main(["export-kernelbench", str(path), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "conv1d_transpose: ConvTranspose1d(4, 6" in printed and "2x4x9" in printed
    assert out.is_file()


def test_cli_export_unsupported(tmp_path, capsys):
    path = _write(tmp_path, "p", BAD_PROBLEMS["padding_mode"][0])
    out = tmp_path / "s.py"
    assert main(["export-kernelbench", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "convt export-kernelbench: error:" in err and "padding_mode='reflect'" in err
    assert not out.exists()


def test_cli_export_all(tmp_path, capsys):
    problems = tmp_path / "problems"
    problems.mkdir()
    _write(problems, "a", PROBLEMS["conv2d_grouped_asymmetric"])
    _write(problems, "b", BAD_PROBLEMS["no_conv_transpose"][0])
    assert main(["export-kernelbench", "--all", str(problems), "-o", str(tmp_path / "out")]) == 0
    assert "1 exported, 1 skipped" in capsys.readouterr().out
    _write(problems, "c", BAD_PROBLEMS["padding_mode"][0])
    assert main(["export-kernelbench", "--all", str(problems), "-o", str(tmp_path / "out2")]) == 1
    captured = capsys.readouterr()
    assert "failed    c.py" in captured.err and "1 exported, 1 skipped" in captured.out + captured.err


@pytest.mark.parametrize("argv, message", [
    (["export-kernelbench", "-o", "x.py"], "give exactly one of PROBLEM.py, --all DIR and --from-suite NAME"),
    (["export-kernelbench", "p.py", "--all", "d", "-o", "x"], "got PROBLEM.py, --all"),
    (["export-kernelbench", "p.py", "--case", "kb57", "-o", "x"], "--case selects cases of --from-suite"),
    (["export-kernelbench", "--from-suite", "kernelbench", "--case", "kb99", "-o", "x"], "unknown case id"),
    (["export-kernelbench", "--all", ".", "-o", "file.txt"], "-o file.txt is a file; give a directory"),
])
def test_cli_export_usage_errors(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("")
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_cli_check_needs_gpu(tmp_path, capsys):
    path = _write(tmp_path, "p", PROBLEMS["conv1d_strided_dilated_bias"])
    assert main(["kernelbench-check", str(path), str(path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# The checker, with pure-PyTorch solutions on the CPU (no build needed)
# ---------------------------------------------------------------------------------------

_SOLUTIONS = {
    "exact": "class ModelNew(Model):\n    pass\n",
    # Same function, a different initialisation (drawn after an extra random number).
    "reinit": textwrap.dedent('''
        class ModelNew(Model):
            def __init__(self, *args):
                torch.rand(1)
                super().__init__(*args)
        '''),
    # Off by about 1e-3 relative: within 1e-2, not within 1e-4.
    "noisy": textwrap.dedent('''
        class ModelNew(Model):
            def forward(self, x):
                y = super().forward(x)
                return y + 1e-3 * y.abs().max()
        '''),
}


@pytest.mark.parametrize("kind", sorted(_SOLUTIONS))
def test_checker_protocol_cpu(tmp_path, kind):
    problem = _write(tmp_path, "problem", PROBLEMS["conv1d_strided_dilated_bias"])
    solution = _write(tmp_path, "solution", PROBLEMS["conv1d_strided_dilated_bias"] + "\n" + _SOLUTIONS[kind])
    result = run_check(problem, solution, CheckConfig(device="cpu", trials=2, reps=2, warmup=1))
    default, strict = result.modes
    assert (default.math, default.tolerance, strict.math, strict.tolerance) == ("default", 1e-2, "strict", 1e-4)
    assert default.trials == strict.trials == 2
    if kind == "exact":
        assert result.ok and result.weights_identical
        assert default.max_abs_diff == 0 and default.backward_ok and default.speedup > 0
    elif kind == "reinit":
        assert not result.weights_identical and not result.ok
        assert "different values under the same seed" in result.weights_message
        assert not default.correct  # different weights give different outputs
    else:
        assert result.weights_identical and not result.ok
        assert default.correct and not strict.correct
        assert "torch.allclose(atol=rtol=0.0001) fails" in strict.message
        assert strict.speedup is None  # an incorrect mode is not timed


# Model's float32 input gradient is off by 1e-3 relative (a stand-in for the rounding of a
# long float32 reduction, as cuDNN's strict-fp32 weight gradients on KernelBench 57/68 are
# about 5e-4 / 7e-5 from float64), exact in float64.
_ROUGH_GRAD_PROBLEM = _HEAD + textwrap.dedent('''
    class _RoughGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g + 1e-3 * g.abs().max() if g.dtype == torch.float32 else g
    ''') + PROBLEMS["conv1d_strided_dilated_bias"][len(_HEAD):].replace(
        "return self.conv1d_transpose(x)", "return self.conv1d_transpose(_RoughGrad.apply(x))")

_ROUGH_GRAD_SOLUTIONS = {
    # Exact gradients: off from Model's by 1e-3, within 1e-4 of the float64 reference.
    "accurate": "class ModelNew(Model):\n    def forward(self, x):\n        return self.conv1d_transpose(x)\n",
    # Off the other way: 2e-3 from Model's, 1e-3 from float64.
    "rough": textwrap.dedent('''
        class _OtherRoughGrad(_RoughGrad):
            @staticmethod
            def backward(ctx, g):
                return g - 1e-3 * g.abs().max() if g.dtype == torch.float32 else g

        class ModelNew(Model):
            def forward(self, x):
                return self.conv1d_transpose(_OtherRoughGrad.apply(x))
        '''),
}


@pytest.mark.parametrize("kind", sorted(_ROUGH_GRAD_SOLUTIONS))
def test_checker_gradients_judged_against_float64(tmp_path, kind):
    problem = _write(tmp_path, "problem", _ROUGH_GRAD_PROBLEM)
    solution = _write(tmp_path, "solution", _ROUGH_GRAD_PROBLEM + "\n" + _ROUGH_GRAD_SOLUTIONS[kind])
    result = run_check(problem, solution, CheckConfig(device="cpu", trials=1, reps=1, warmup=0, timing=False))
    default, strict = result.modes
    assert default.correct and strict.correct and result.weights_identical
    # TF32 allowed (tolerance 1e-2): Model's gradient is good enough, no float64 run.
    assert default.backward_ok and default.backward_message is None
    assert strict.backward["input 0"] == pytest.approx(1e-3 if kind == "accurate" else 2e-3, rel=0.05)
    if kind == "accurate":
        assert strict.backward_ok and result.ok
        assert strict.backward_message.startswith("within the tolerance of a float64 reference: input 0 1.0e-03")
        assert "from float64" in strict.backward_message
    else:
        assert strict.backward_ok is False and not result.ok
        assert strict.backward_message.startswith("gradient error above the tolerance: input 0 2.0e-03")
        assert "1.0e-03 from float64" in strict.backward_message


def test_checker_cli_cpu_json(tmp_path, capsys):
    problem = _write(tmp_path, "problem", PROBLEMS["conv2d_then_ops"])
    solution = _write(tmp_path, "solution", PROBLEMS["conv2d_then_ops"] + "\n" + _SOLUTIONS["exact"])
    out = tmp_path / "check.json"
    code = main(["kernelbench-check", str(problem), str(solution), "--device", "cpu", "--trials", "2",
                 "--reps", "2", "--math", "strict", "--json", str(out), "-q"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "result    PASS" in printed and "fp32, TF32 disabled" in printed
    doc = json.loads(out.read_text())
    assert doc["ok"] and [m["math"] for m in doc["modes"]] == ["strict"]


def test_summary_compares_speedups():
    check = {"problem": "out/57_conv_transposed_2D__square_input__square_kernel.py", "ok": True,
             "weights_identical": True,
             "modes": [{"math": "default", "ok": True, "correct": True, "speedup": 2.0},
                       {"math": "strict", "ok": True, "correct": True, "speedup": 1.5}]}
    bench = {"results": [
        {"case": "kb57", "dtype": "fp32", "math": "default", "direction": "fwd", "speedup": 2.1},
        {"case": "kb57", "dtype": "fp32", "math": "strict", "direction": "fwd", "speedup": 1.2},
    ]}
    default, strict = summarise([check], bench, 0.10)
    assert default["case"] == "kb57" and default["within_tolerance"] and default["pass"]
    assert strict["ratio"] == pytest.approx(1.25) and not strict["within_tolerance"] and not strict["pass"]


# ---------------------------------------------------------------------------------------
# Amalgamation
# ---------------------------------------------------------------------------------------

def _fake_tree(root: Path) -> None:
    files = {
        "include/convt/convt.hpp": '#pragma once\n#include "convt/a.hpp"\n#include <vector>\nint api();\n',
        "include/convt/a.hpp": "#pragma once\n#include <cstdint>\nstruct A {};\n",
        "src/api.cpp": '#include "convt/a.hpp"\n#include "local.hpp"\nint api() { return 1; }\n',
        "src/local.hpp": '#pragma once\n#include "convt/a.hpp"\nint local();\n',
        "src/cuda/k.cu": '#include "local.hpp"\n#include <cuda_runtime.h>\n__global__ void k() {}\n',
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_amalgamate_inlines_each_file_once(tmp_path):
    _fake_tree(tmp_path)
    tree = SourceTree(tmp_path, "repository")
    seen: set = set()
    api = amalgamate(tree.api_headers(), tree, seen)
    core = amalgamate(tree.core_units(), tree, set(seen))
    assert api.count("struct A {};") == 1 and "#include <vector>" in api and "#include <cstdint>" in api
    assert "#pragma once" not in api + core and '#include "' not in api + core
    assert "struct A {};" not in core  # already in the API block
    assert core.index("int local();") < core.index("int api() { return 1; }")
    assert "// ---- begin src/local.hpp ----" in core


def test_amalgamate_missing_include(tmp_path):
    _fake_tree(tmp_path)
    (tmp_path / "src/api.cpp").write_text('#include "nowhere.hpp"\n')
    tree = SourceTree(tmp_path, "repository")
    with pytest.raises(AmalgamationError, match=r'src/api.cpp:1: #include "nowhere.hpp" names no file'):
        amalgamate(tree.core_units(), tree)


def test_find_source_root(tmp_path):
    package = tmp_path / "repo" / "python" / "convt"
    package.mkdir(parents=True)
    with pytest.raises(AmalgamationError, match="sources were not found.*_sources.*source checkout"):
        find_source_root(package)
    _fake_tree(tmp_path / "repo")
    assert find_source_root(package).origin == "repository"
    _fake_tree(package / "_sources")
    tree = find_source_root(package)
    assert tree.origin == "package" and tree.root == package / "_sources"


def test_real_sources_blocks(sources):
    assert sources.version and sources.version != "unknown"
    for block in (sources.api, sources.core, sources.cuda):
        assert '#include "' not in block
    for required in ("include/convt/api.hpp", "src/api.cpp", "src/cpu/conv_transpose_cpu.cpp",
                     "src/cuda/cuda_backend.cu", "include/convt/cuda/direct_kernels.cuh"):
        assert required in sources.files
    # The CPU build (api + core) needs no CUDA header.
    from convt.kernelbench.amalgamate import system_includes

    assert not [h for h in system_includes(sources.api + sources.core) if h.startswith("cu")]
    assert "cuda_runtime.h" in system_includes(sources.cuda)
    assert "__global__" in sources.cuda and "class Problem" not in sources.cuda


# ---------------------------------------------------------------------------------------
# The runtime every solution carries (importable on its own for these checks)
# ---------------------------------------------------------------------------------------

def test_runtime_math_mode_follows_pytorch():
    from convt.kernelbench import runtime
    from convt.kernelbench.check import precision

    with precision("default"):
        assert runtime._convt_math_mode() == runtime._CONVT_MATH_ALLOW_TF32
    with precision("strict"):
        assert runtime._convt_math_mode() == runtime._CONVT_MATH_STRICT_FP32


def test_runtime_convert_rules():
    from convt.kernelbench import runtime

    class Sub(torch.nn.ConvTranspose1d):
        pass

    model = torch.nn.Sequential(torch.nn.ConvTranspose3d(2, 2, 1), Sub(2, 2, 1), torch.nn.Linear(2, 2))
    assert runtime._convt_convert(model) == ["0"]
    assert type(model[0]) is runtime.ConvTranspose3dConvt and type(model[1]) is Sub

    bad = torch.nn.Sequential(torch.nn.ConvTranspose2d(2, 2, 1), torch.nn.ConvTranspose2d(2, 2, 1))
    bad[1].padding_mode = "circular"
    with pytest.raises(ValueError, match=r"convt: 1 \(ConvTranspose2d\) has padding_mode='circular'"):
        runtime._convt_convert(bad)
    assert type(bad[0]) is torch.nn.ConvTranspose2d  # nothing changed

    with pytest.warns(UserWarning, match="has no nn.ConvTranspose1d/2d/3d module"):
        assert runtime._convt_convert(torch.nn.Linear(2, 2)) == []


@pytest.mark.parametrize("has_option", [True, False])
def test_runtime_nvcc_parallel_flags(tmp_path, monkeypatch, has_option):
    """An exported file asks nvcc for --split-compile=0 exactly where the nvcc it builds
    with lists the option (a fake nvcc here, picked by PYTORCH_NVCC)."""
    from convt.kernelbench import runtime

    nvcc = tmp_path / "nvcc"
    usage = "--split-compile <number>    (-split-compile)" if has_option else "--threads <number>"
    nvcc.write_text(f"#!/bin/sh\necho '{usage}'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("PYTORCH_NVCC", str(nvcc))
    assert runtime._convt_nvcc_parallel_flags() == (["--split-compile=0"] if has_option else [])
