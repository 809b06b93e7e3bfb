"""``convt export-kernelbench``: a self-contained KernelBench solution for a problem file.

The solution file holds, in order:

1. a header comment: the problem, every transposed convolution of the model with its
   input and output shapes, how the file builds and which kernels run;
2. the problem file itself, verbatim (``Model``, its constants, ``get_inputs`` and
   ``get_init_inputs``, every other operation of the model);
3. convt's runtime (``runtime.py``, verbatim): the load_inline build, the autograd
   function and the ``ConvTranspose{1,2,3}dConvt`` modules;
4. ``class ModelNew(Model)``: ``Model``'s constructor (same signature) followed by
   re-classing each ``nn.ConvTranspose{1,2,3}d`` as its convt subclass, so parameter
   names, shapes and initialisation (the same random draws under the same seed) and
   ``Model.forward`` are exactly Model's;
5. convt's C++/CUDA sources, amalgamated (``amalgamate.py``), and the torch-facing C++
   wrapper (``_wrapper.py``), as string constants;
6. the build call (at import on a CUDA machine).

The file imports nothing from convt and reads no other file.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from . import _wrapper
from .amalgamate import ConvtSources, convt_sources
from .problems import ProblemError, ProblemFile, load_problem

__all__ = [
    "ConvTransposeInfo",
    "ExportError",
    "ExportResult",
    "analyse",
    "export_dir",
    "export_file",
    "installed_forward_plan",
    "render_solution",
    "runtime_source",
]

_CONV_CLASSES = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


class ExportError(ValueError):
    """A problem that cannot be exported. ``reason`` is one of "problem" (the file is not
    a usable KernelBench problem), "no-conv-transpose" (nothing for convt to compute) or
    "unsupported" (a transposed convolution convt does not compute)."""

    def __init__(self, message: str, reason: str = "problem"):
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass
class ConvCall:
    """One call of a transposed convolution seen while running the model on meta tensors."""

    input_shape: tuple[int, ...]
    output_padding: tuple[int, ...]


@dataclasses.dataclass
class ConvTransposeInfo:
    """A transposed-convolution module of the problem's model."""

    name: str  # qualified name in the model ("" for the model itself)
    class_name: str  # the module's class
    description: str  # ClassName(extra_repr)
    dims: int
    in_channels: int
    out_channels: int
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    output_padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    bias: bool
    padding_mode: str
    replaced: bool  # an exact nn.ConvTranspose{1,2,3}d (subclasses are left to PyTorch)
    calls: list[ConvCall] = dataclasses.field(default_factory=list)

    def output_shape(self, call: ConvCall) -> tuple[int, ...]:
        batched = len(call.input_shape) == self.dims + 2
        spatial = call.input_shape[-self.dims:]
        out = tuple(
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, k, s, p, op, d in zip(spatial, self.kernel_size, self.stride, self.padding,
                                         call.output_padding, self.dilation)
        )
        return ((call.input_shape[0],) if batched else ()) + (self.out_channels, *out)


@dataclasses.dataclass
class Analysis:
    """What the exporter learnt about a problem's model."""

    convs: list[ConvTransposeInfo]
    constructed_on: str  # "meta" or "cpu"
    shapes_note: str | None  # why input shapes are unknown, when they are


@dataclasses.dataclass
class ExportResult:
    problem: Path
    solution: Path | None
    text: str
    analysis: Analysis


# ---------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------

def _instantiate(problem: ProblemFile, init_inputs: list) -> tuple[Any, str]:
    """Model(*init_inputs), on the meta device when it can be built there (no memory, no
    random numbers drawn), on the CPU otherwise; the caller's RNG state is kept."""
    import torch

    with torch.random.fork_rng(devices=[]):
        try:
            with torch.device("meta"):
                return problem.Model(*init_inputs), "meta"
        except Exception:
            pass
        try:
            return problem.Model(*init_inputs), "cpu"
        except Exception as e:
            raise ExportError(
                f"{problem.path}: Model(*get_init_inputs()) raised {type(e).__name__}: {e}"
            ) from e


def _module_info(name: str, module: Any, exact: bool) -> ConvTransposeInfo:
    dims = int(module.weight.dim()) - 2 if getattr(module, "weight", None) is not None else len(module.kernel_size)
    return ConvTransposeInfo(
        name=name,
        class_name=type(module).__name__,
        description=f"{type(module).__name__}({module.extra_repr()})",
        dims=dims,
        in_channels=int(module.in_channels),
        out_channels=int(module.out_channels),
        kernel_size=tuple(int(v) for v in module.kernel_size),
        stride=tuple(int(v) for v in module.stride),
        padding=tuple(int(v) for v in module.padding) if not isinstance(module.padding, str) else (),
        output_padding=tuple(int(v) for v in module.output_padding),
        dilation=tuple(int(v) for v in module.dilation),
        groups=int(module.groups),
        bias=module.bias is not None,
        padding_mode=str(module.padding_mode),
        replaced=exact,
    )


def _record_calls(problem: ProblemFile, model: Any, convs: dict[int, ConvTransposeInfo]) -> str | None:
    """Run the model once on meta tensors to learn each convolution's input shape;
    returns why that was not possible, or None."""
    import torch

    modules = {id(m): m for m in model.modules() if id(m) in convs}

    def hook(module, args, kwargs):
        x = args[0] if args else kwargs.get("input")
        output_size = kwargs.get("output_size", args[1] if len(args) > 1 else None)
        if not isinstance(x, torch.Tensor):
            return
        info = convs[id(module)]
        output_padding = info.output_padding
        if output_size is not None:
            output_padding = tuple(int(v) for v in module._output_padding(
                x, output_size, module.stride, module.padding, module.kernel_size, info.dims, module.dilation))
        call = ConvCall(tuple(int(s) for s in x.shape), output_padding)
        if call not in info.calls:
            info.calls.append(call)

    handles = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in modules.values()]
    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"), torch.no_grad():
            inputs = problem.inputs()
            model(*inputs)
    except Exception as e:  # data-dependent or meta-less operations: shapes stay unknown
        return f"the input shapes could not be traced on meta tensors ({type(e).__name__}: {e})"
    finally:
        for h in handles:
            h.remove()
    return None


def analyse(problem: ProblemFile) -> Analysis:
    """Find the model's transposed convolutions (raises ExportError when the model has
    none convt can compute, or has one with a padding mode convt does not compute)."""
    import torch

    init_inputs = problem.init_inputs()
    model, where = _instantiate(problem, init_inputs)
    conv_types = tuple(getattr(torch.nn, c) for c in _CONV_CLASSES)
    convs: dict[int, ConvTransposeInfo] = {}
    for name, module in model.named_modules():
        if isinstance(module, conv_types) and id(module) not in convs:
            convs[id(module)] = _module_info(name, module, type(module) in conv_types)
    infos = list(convs.values())
    if not infos:
        raise ExportError(
            f"{problem.path}: Model(*get_init_inputs()) has no nn.ConvTranspose1d/2d/3d module, so "
            f"there is nothing for convt to compute (functional calls such as "
            f"F.conv_transpose2d in forward are not replaced; hold the weights in an "
            f"nn.ConvTranspose*d module instead)",
            "no-conv-transpose",
        )
    for info in infos:
        if info.padding_mode != "zeros":
            raise ExportError(
                f"{problem.path}: {info.name or 'Model'} ({info.description}) uses padding_mode="
                f"{info.padding_mode!r}; convt computes padding_mode='zeros' only (PyTorch itself "
                f"accepts only 'zeros' for transposed convolutions)",
                "unsupported",
            )
    if not any(i.replaced for i in infos):
        names = ", ".join(f"{i.name or 'Model'} ({i.class_name})" for i in infos)
        raise ExportError(
            f"{problem.path}: the transposed convolutions of Model are subclasses of "
            f"nn.ConvTranspose*d ({names}), which may change forward(); convt replaces "
            f"exactly nn.ConvTranspose1d/2d/3d",
            "unsupported",
        )
    note = None
    if where == "meta":
        note = _record_calls(problem, model, {i: c for i, c in convs.items() if c.replaced})
    else:
        note = "Model could not be built on the meta device, so its input shapes were not traced"
    return Analysis(convs=infos, constructed_on=where, shapes_note=note)


# ---------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------

def runtime_source() -> str:
    """The runtime code every solution carries (``runtime.py``, verbatim)."""
    return Path(__file__).with_name("runtime.py").read_text(encoding="utf-8")


def _literal(text: str) -> str:
    """A Python string literal for ``text``: a raw triple-quoted string when that
    represents it exactly (readable C++), else an escaped one."""
    candidate = "r'''" + text + "'''"
    try:
        if ast.literal_eval(candidate) == text:
            return candidate
    except (SyntaxError, ValueError):
        pass
    return repr(text)


def installed_forward_plan(info: ConvTransposeInfo, call: ConvCall, tf32: bool) -> str | None:
    """The forward kernel the installed convt's CUDA dispatcher picks for a float32 call, in
    its CONVT_LOG=1 wording, or None when the installed convt cannot say (built without
    CUDA, or without the ``describe_forward`` binding).

    ``convt._C.describe_forward(input, weight, bias, params, math)`` takes the descriptors
    of ``prepare_forward`` (data pointer 0: shapes only; device 0: the first GPU) and
    plans only (no device is touched), with the same sources the exported file carries.
    """
    try:
        from convt import _C
    except ImportError:
        return None
    describe = getattr(_C, "describe_forward", None)
    if describe is None or not _C.built_with_cuda():
        return None
    batched = len(call.input_shape) == info.dims + 2
    shape = tuple(call.input_shape) if batched else (1, *call.input_shape)
    weight = (info.in_channels, info.out_channels // info.groups, *info.kernel_size)

    def desc(sizes: Sequence[int]) -> tuple:
        strides, acc = [], 1
        for size in reversed(sizes):
            strides.append(acc)
            acc *= max(int(size), 1)
        return (0, tuple(sizes), tuple(reversed(strides)), 0, 0)  # float32 on cuda:0

    params = (info.dims, info.stride, info.padding, call.output_padding, info.dilation, info.groups)
    try:
        return str(describe(desc(shape), desc(weight), desc((info.out_channels,)) if info.bias else None,
                            params, 0 if tf32 else 1))
    except Exception:  # a binding of another shape: say nothing rather than guess
        return None


def _fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _header(problem: ProblemFile, analysis: Analysis, sources: ConvtSources) -> str:
    lines = [
        f"KernelBench solution for {problem.path.name},",
        f"written by `convt export-kernelbench` (convt {sources.version}).",
        "",
        "ModelNew is the problem's Model with its transposed convolutions computed by convt's",
        "own kernels: the same constructor, parameter names, shapes and initialisation (the",
        "same random draws under the same seed) and Model's own forward. Every other",
        "operation is the problem's, unchanged (the problem file follows verbatim).",
        "",
        f"convt's C++/CUDA sources ({len(sources.files)} files, amalgamated) and a small torch",
        "wrapper are at the end of this file; torch.utils.cpp_extension.load_inline compiles",
        "them when the file is imported on a CUDA machine (set CONVT_KB_BUILD=lazy to wait",
        "for the first call). The file needs PyTorch and nvcc, nothing else.",
        "",
        "The kernels are those convt's dispatcher (compiled below) picks for each call's",
        "shapes, dtype and precision mode, exactly as in `convt bench`: the implicit-GEMM",
        "tensor-core forward where it applies, the direct kernels otherwise and for the",
        "gradients (docs/kernels.md). `convt kernelbench-check` prints the choice for the",
        "problem's inputs; CONVT_LOG=1 logs every call.",
        "",
        "Transposed convolutions (input shapes traced from get_inputs() on meta tensors):",
    ]
    for info in analysis.convs:
        label = info.name or "(the model)"
        if not info.replaced:
            lines.append(f"  {label}: {info.description} -- a subclass of nn.{info.class_name}; left to PyTorch")
            continue
        lines.append(f"  {label}: {info.description}")
        if not info.calls:
            lines.append("    input shape unknown at export time")
        for call in info.calls:
            lines.append(f"    input {_fmt_shape(call.input_shape)} -> output {_fmt_shape(info.output_shape(call))}")
            for tf32, mode in ((True, "float32, TF32 allowed (PyTorch's default)"), (False, "strict float32")):
                plan = installed_forward_plan(info, call, tf32)
                if plan is not None:
                    lines.append(f"      forward, {mode}: {plan}")
    if analysis.shapes_note and any(not i.calls for i in analysis.convs if i.replaced):
        lines.append(f"  ({analysis.shapes_note})")
    rule = "# " + "-" * 86
    return "\n".join([rule] + [("# " + line).rstrip() for line in lines] + [rule]) + "\n"


_MODEL_NEW = '''

class ModelNew(Model):
    """The problem's Model with every nn.ConvTranspose1d/2d/3d computed by convt.

    Same constructor arguments, submodules, parameter names, shapes and initialisation as
    Model (Model's own constructor runs first), and Model's forward."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._convt_modules = _convt_convert(self)


_convt_copy_signature(ModelNew, Model)
'''


def _wrapped_comment(text: str, width: int = 88) -> str:
    import textwrap

    return "".join(f"# {line}\n" for line in textwrap.wrap(text, width - 2, break_on_hyphens=False))


def render_solution(problem: ProblemFile, analysis: Analysis, sources: ConvtSources) -> str:
    """The text of the solution file."""
    problem_text = problem.source if problem.source.endswith("\n") else problem.source + "\n"
    parts = [
        _header(problem, analysis, sources),
        "\n# ===== the problem, as given " + "=" * 58 + "\n\n",
        problem_text,
        "\n\n# ===== convt " + "=" * 74 + "\n",
        runtime_source(),
        _MODEL_NEW,
        "\n# ===== convt's sources " + "=" * 64 + "\n",
        _wrapped_comment(f"convt {sources.version}, amalgamated from: " + ", ".join(sources.files) + "."),
        f"_CONVT_VERSION = {sources.version!r}\n",
        "_CONVT_FUNCTIONS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in _wrapper.FUNCTIONS.items()) + "}\n\n",
        "# Public headers: include/convt/convt.hpp and what it includes.\n",
        f"_CONVT_API_SOURCE = {_literal(sources.api)}\n\n",
        "# C++ translation units: problem model, tensors, API, CPU backend.\n",
        f"_CONVT_CORE_SOURCE = {_literal(sources.core)}\n\n",
        "# CUDA translation units: the CUDA backend and its header-only kernels.\n",
        f"_CONVT_CUDA_SOURCE = {_literal(sources.cuda)}\n\n",
        "# The torch-facing wrapper (at::Tensor -> convt::TensorRef, errors -> Python exceptions).\n",
        f"_CONVT_WRAPPER_SOURCE = {_literal(_wrapper.WRAPPER_CPP)}\n\n",
        f"_CONVT_CUDA_EXTRA_SOURCE = {_literal(_wrapper.CUDA_EXTRA)}\n\n",
        "_convt_build_at_import()\n",
    ]
    return "".join(parts)


def _check_rendered(text: str, where: Path) -> None:
    """The generated file parses, and it imports nothing from convt."""
    try:
        tree = ast.parse(text, filename=str(where))
    except SyntaxError as e:  # an exporter bug, or a problem that only parses on its own
        raise ExportError(f"{where}: the generated file does not parse ({e.msg}, line {e.lineno})") from e
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for n in names:
            if n == "convt" or n.startswith("convt."):
                raise ExportError(
                    f"{where}: the problem file imports {n}; a KernelBench solution must not depend "
                    f"on the convt package",
                    "unsupported",
                )


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def export_file(
    problem_path: str | Path,
    solution_path: str | Path | None = None,
    *,
    sources: ConvtSources | None = None,
) -> ExportResult:
    """Export one problem file. Writes ``solution_path`` (when given) only if the whole
    export succeeds; raises ExportError (or AmalgamationError) otherwise."""
    problem_path = Path(problem_path)
    try:
        problem = load_problem(problem_path)
    except ProblemError as e:
        raise ExportError(str(e)) from e
    analysis = analyse(problem)
    sources = sources or convt_sources()
    text = render_solution(problem, analysis, sources)
    _check_rendered(text, problem_path)
    out = None
    if solution_path is not None:
        out = Path(solution_path)
        if out.exists() and out.resolve() == problem_path.resolve():
            raise ExportError(f"{out}: the solution would overwrite the problem file")
        _write_atomic(out, text)
    return ExportResult(problem=problem_path, solution=out, text=text, analysis=analysis)


@dataclasses.dataclass
class DirEntry:
    problem: Path
    solution: Path | None = None
    error: ExportError | None = None
    analysis: Analysis | None = None

    @property
    def status(self) -> str:
        if self.error is None:
            return "exported"
        return "skipped" if self.error.reason == "no-conv-transpose" else "failed"


def export_dir(problem_dir: str | Path, out_dir: str | Path) -> list[DirEntry]:
    """Export every ``*.py`` problem file of ``problem_dir`` into ``out_dir`` (same file
    names). Problems without a transposed convolution are skipped, others that cannot be
    exported are reported failed; neither stops the others."""
    problem_dir, out_dir = Path(problem_dir), Path(out_dir)
    if not problem_dir.is_dir():
        raise ExportError(f"{problem_dir}: not a directory")
    if out_dir.exists() and out_dir.resolve() == problem_dir.resolve():
        raise ExportError(f"{out_dir}: the output directory must differ from the problem directory")
    files = sorted(p for p in problem_dir.glob("*.py") if p.is_file() and not p.name.startswith("__"))
    if not files:
        raise ExportError(f"{problem_dir}: no problem files (*.py)")
    sources = convt_sources()
    entries = []
    for path in files:
        entry = DirEntry(problem=path)
        try:
            result = export_file(path, out_dir / path.name, sources=sources)
            entry.solution, entry.analysis = result.solution, result.analysis
        except ExportError as e:
            entry.error = e
        entries.append(entry)
    return entries
