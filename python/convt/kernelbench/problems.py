"""KernelBench problem files: loading them, and writing them from a benchmark suite.

A KernelBench problem is one Python file defining ``class Model(nn.Module)``,
``get_inputs()`` (the forward's arguments) and ``get_init_inputs()`` (the constructor's),
usually with module-level constants such as ``batch_size``. :func:`load_module` runs
such a file in a fresh module namespace and :func:`load_problem` checks that the three
names are there.

:func:`problem_source` writes the problem file of one benchmark case (for instance one of
the 17 transposed-convolution shapes of KernelBench level 1, from convt's ``kernelbench``
suite) in KernelBench's layout, and :func:`write_suite_problems` writes a whole suite.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterable

__all__ = [
    "KERNELBENCH_NAMES",
    "ProblemError",
    "ProblemFile",
    "load_module",
    "load_problem",
    "problem_filename",
    "problem_source",
    "write_suite_problems",
]


class ProblemError(ValueError):
    """A problem (or solution) file that cannot be used."""


@dataclasses.dataclass
class ProblemFile:
    """A loaded KernelBench problem file."""

    path: Path
    source: str
    module: types.ModuleType
    Model: type
    get_inputs: Callable[[], Any]
    get_init_inputs: Callable[[], Any]

    def init_inputs(self) -> list:
        """``get_init_inputs()`` as a list (ProblemError when it is not a list or tuple)."""
        try:
            values = self.get_init_inputs()
        except Exception as e:
            raise ProblemError(f"{self.path}: get_init_inputs() raised {type(e).__name__}: {e}") from e
        if not isinstance(values, (list, tuple)):
            raise ProblemError(
                f"{self.path}: get_init_inputs() must return a list of Model's constructor "
                f"arguments, but returned {type(values).__name__}"
            )
        return list(values)

    def inputs(self) -> list:
        """``get_inputs()`` as a list (ProblemError when it is not a list or tuple)."""
        try:
            values = self.get_inputs()
        except Exception as e:
            raise ProblemError(f"{self.path}: get_inputs() raised {type(e).__name__}: {e}") from e
        if not isinstance(values, (list, tuple)):
            raise ProblemError(
                f"{self.path}: get_inputs() must return a list of Model.forward's arguments, "
                f"but returned {type(values).__name__}"
            )
        return list(values)


def load_module(path: str | Path, role: str = "problem") -> types.ModuleType:
    """Run a Python file in a fresh module namespace and return the module.

    The module is registered in ``sys.modules`` under a name derived from the file's
    path (dataclasses and pickling look modules up there). Raises ProblemError for a
    missing file, a syntax error, or an exception while running the file.
    """
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemError(f"{path}: cannot read the file: {e}") from None
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        raise ProblemError(f"{path}:{e.lineno}: not valid Python: {e.msg}") from None
    digest = hashlib.sha1(str(path.resolve()).encode("utf-8")).hexdigest()[:12]
    name = f"_convt_kernelbench_{role}_{digest}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__convt_source__ = source  # type: ignore[attr-defined]
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except Exception as e:
        sys.modules.pop(name, None)
        raise ProblemError(f"{path}: running the file raised {type(e).__name__}: {e}") from e
    return module


def load_problem(path: str | Path) -> ProblemFile:
    """Load a KernelBench problem file: ``Model``, ``get_inputs`` and ``get_init_inputs``."""
    import torch

    path = Path(path)
    module = load_module(path, "problem")
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise ProblemError(
            f"{path}: not a KernelBench problem file: it defines no {', '.join(missing)} "
            f"(a problem defines class Model(nn.Module), get_inputs() and get_init_inputs())"
        )
    model_cls = module.Model
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise ProblemError(f"{path}: Model must be a subclass of torch.nn.Module, but is {model_cls!r}")
    for n in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, n)):
            raise ProblemError(f"{path}: {n} must be a function")
    return ProblemFile(
        path=path,
        source=module.__convt_source__,
        module=module,
        Model=model_cls,
        get_inputs=module.get_inputs,
        get_init_inputs=module.get_init_inputs,
    )


# ---------------------------------------------------------------------------------------
# Problem files from benchmark cases
# ---------------------------------------------------------------------------------------

#: KernelBench level-1 file names (without ".py") of the transposed convolutions.
KERNELBENCH_NAMES = {
    57: "conv_transposed_2D__square_input__square_kernel",
    58: "conv_transposed_3D__asymmetric_input__asymmetric_kernel",
    61: "conv_transposed_3D__square_input__square_kernel",
    64: "conv_transposed_1D",
    65: "conv_transposed_2D__square_input__asymmetric_kernel",
    68: "conv_transposed_3D__square_input__asymmetric_kernel",
    69: "conv_transposed_2D__asymmetric_input__asymmetric_kernel",
    70: "conv_transposed_3D__asymmetric_input__square_kernel",
    71: "conv_transposed_2D__asymmetric_input__square_kernel",
    72: "conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_",
    73: "conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped",
    74: "conv_transposed_1D_dilated",
    75: "conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__",
    77: "conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__",
    78: "conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__",
    79: "conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__",
    81: "conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__",
}

_SPATIAL_NAMES = {1: ("length",), 2: ("height", "width"), 3: ("depth", "height", "width")}


def _kernelbench_number(case_id: str) -> int | None:
    digits = case_id[2:] if case_id.lower().startswith("kb") else ""
    return int(digits) if digits.isdigit() else None


def problem_filename(case: Any) -> str:
    """``57_conv_transposed_2D__square_input__square_kernel.py`` for KernelBench's cases,
    ``<id>_conv_transposed_<n>D.py`` for others."""
    number = _kernelbench_number(case.id)
    if number is not None and number in KERNELBENCH_NAMES:
        return f"{number}_{KERNELBENCH_NAMES[number]}.py"
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in case.id)
    return f"{safe}_conv_transposed_{case.dims}D.py"


def _arg(values: Iterable[int]) -> str:
    """An int when every dimension agrees, else a tuple."""
    values = tuple(int(v) for v in values)
    if len(set(values)) == 1:
        return str(values[0])
    return "(" + ", ".join(map(str, values)) + ")"


def problem_source(case: Any) -> str:
    """The KernelBench problem file of a benchmark case (``convt.bench.suite.Case``).

    A ``Model`` holding ``self.conv_transpose{1,2,3}d = nn.ConvTranspose{1,2,3}d(...)``, the
    case's sizes as module-level constants, ``get_inputs()`` drawing the input with
    ``torch.rand`` and ``get_init_inputs()`` returning every constructor argument.
    """
    dims = case.dims
    attr = f"conv_transpose{dims}d"
    spatial = _SPATIAL_NAMES[dims]
    number = _kernelbench_number(case.id)
    title = (f"KernelBench level 1, problem {number}: {KERNELBENCH_NAMES[number]}"
             if number in KERNELBENCH_NAMES else f"benchmark case {case.id}")
    kind = {1: "1-D", 2: "2-D", 3: "3-D"}[dims]
    constants = [
        f"batch_size = {case.batch}",
        f"in_channels = {case.in_channels}",
        f"out_channels = {case.out_channels}",
        f"kernel_size = {_arg(case.kernel_size)}",
        *(f"{name} = {size}" for name, size in zip(spatial, case.input_size)),
        f"stride = {_arg(case.stride)}",
        f"padding = {_arg(case.padding)}",
        f"output_padding = {_arg(case.output_padding)}",
        f"dilation = {_arg(case.dilation)}",
        f"groups = {case.groups}",
        f"bias = {bool(case.bias)}",
    ]
    return f'''import torch
import torch.nn as nn


class Model(nn.Module):
    """A transposed {kind} convolution ({title}).

    Args:
        in_channels (int): channels of the input.
        out_channels (int): channels of the output.
        kernel_size (int or tuple): size of the kernel.
        stride (int or tuple, optional): stride of the convolution. Defaults to 1.
        padding (int or tuple, optional): zero padding removed from each side of the output. Defaults to 0.
        output_padding (int or tuple, optional): size added to one side of the output. Defaults to 0.
        dilation (int or tuple, optional): spacing between kernel elements. Defaults to 1.
        groups (int, optional): blocked connections from input to output channels. Defaults to 1.
        bias (bool, optional): whether a learnable bias is added. Defaults to False.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, dilation=1, groups: int = 1, bias: bool = False):
        super().__init__()
        self.{attr} = nn.ConvTranspose{dims}d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            output_padding=output_padding, dilation=dilation, groups=groups, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch_size, in_channels, {", ".join(spatial)}) -> (batch_size, out_channels, {", ".join(s + "_out" for s in spatial)})"""
        return self.{attr}(x)


# Test code
{chr(10).join(constants)}


def get_inputs():
    x = torch.rand(batch_size, in_channels, {", ".join(spatial)})
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation, groups, bias]
'''


def write_suite_problems(suite: str, out_dir: str | Path, cases: Iterable[str] = ()) -> list[Path]:
    """Write the problem file of every case of a suite (a built-in name such as
    ``kernelbench``, or a suite file) into ``out_dir``; returns the paths written.
    ``cases`` selects case ids (all when empty)."""
    from convt.bench.suite import load_suite, select_cases

    loaded = load_suite(suite)
    selected = select_cases(list(loaded.cases), list(cases))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for case in selected:
        path = out_dir / problem_filename(case)
        path.write_text(problem_source(case), encoding="utf-8")
        paths.append(path)
    return paths
