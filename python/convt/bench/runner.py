"""Runs benchmark cases: PyTorch eager against an implementation of the same API.

For each case and mode the runner

1. builds the tensors once: ``torch.rand`` input, the weight (and bias) of a freshly
   constructed ``torch.nn.ConvTranspose{1,2,3}d`` under a fixed seed, and for
   forward+backward a grad-output uniform in [-1, 1); both sides get these same tensors;
2. checks both sides against a float64 oracle (``torch.nn.functional`` on the same
   values upcast to float64, on the same device): error = max|out - oracle| /
   max|oracle| for the output and, for forward+backward, every gradient. The output is
   held to the budget of the mode (SPEC §3); a gradient to that budget or twice
   PyTorch's own error on the same gradient, whichever is larger (a weight gradient
   sums over batch and positions, and PyTorch's error there can exceed the forward
   budget). A case with an error above its budget is FAILED and is not timed;
3. times both sides interleaved (see ``timing``), after warm-up, L2 evicted before each
   timed call on a GPU;
4. refills the same input and weight storage in place with new values (which also bumps
   their ``_version``) and checks both sides again, so that results left over from
   earlier calls, or caches that ignore a change of values, cannot pass.

The implementation under test ("convt side") is anything with ``conv_transpose1d``,
``conv_transpose2d`` and ``conv_transpose3d`` taking torch's arguments: by default the
``convt`` package, imported only when a run starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib
import math
import platform
import shutil
import subprocess
import sys
from typing import Any, Callable, Iterator, Sequence

from convt.bench import roofline as rl
from convt.bench.suite import CPU_MAX_FLOPS, Case, scale_down
from convt.bench.timing import L2Flusher, time_interleaved

__all__ = [
    "BUDGETS",
    "Bench",
    "BenchConfig",
    "BenchRun",
    "CaseResult",
    "DIRECTIONS",
    "DTYPES",
    "Implementation",
    "ImplementationError",
    "MATHS",
    "Mode",
    "SideResult",
    "build_modes",
    "cudnn_math",
    "relative_error",
    "resolve_implementation",
]

DTYPES = ("fp32", "bf16", "fp16")
MATHS = ("default", "strict")
DIRECTIONS = rl.DIRECTIONS

#: Error budgets (SPEC §3): max|out - oracle| / max|oracle| the implementation may reach.
BUDGETS = {"fp32/default": 8e-4, "fp32/strict": 4e-6, "fp16": 1.5e-3, "bf16": 1e-2}

#: Statuses of a case result. Only "ok" results carry a speedup.
STATUSES = ("ok", "FAILED", "ERROR", "UNSUPPORTED", "SKIPPED")


# ---------------------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Mode:
    """dtype (fp32/bf16/fp16), math (default/strict for fp32; None otherwise), direction."""

    dtype: str
    math: str | None
    direction: str

    @property
    def label(self) -> str:
        parts = [self.dtype] + ([self.math] if self.math else []) + [self.direction]
        return "/".join(parts)

    @property
    def budget_key(self) -> str:
        return f"fp32/{self.math}" if self.dtype == "fp32" else self.dtype

    @property
    def budget(self) -> float:
        return BUDGETS[self.budget_key]

    @property
    def peak_key(self) -> str:
        return rl.peak_key(self.dtype, self.math)


def build_modes(dtypes: Sequence[str], maths: Sequence[str], directions: Sequence[str],
                device_type: str = "cuda") -> list[Mode]:
    """All requested combinations, without duplicates, in the order given.

    ``math`` only applies to float32 (half types always accumulate in float32). On the
    CPU there is no TF32, so float32 always runs (and is checked) as strict.
    """
    for values, allowed, what in ((dtypes, DTYPES, "dtype"), (maths, MATHS, "math"),
                                  (directions, DIRECTIONS, "direction")):
        for v in values:
            if v not in allowed:
                raise ValueError(f"unknown {what} {v!r} (choose from {', '.join(allowed)})")
    modes: list[Mode] = []
    for dtype in dtypes:
        for m in maths:
            for direction in directions:
                if dtype != "fp32":
                    math_mode = None
                elif device_type == "cpu":
                    math_mode = "strict"
                else:
                    math_mode = m
                mode = Mode(dtype, math_mode, direction)
                if mode not in modes:
                    modes.append(mode)
    return modes


# ---------------------------------------------------------------------------------------
# The implementation under test
# ---------------------------------------------------------------------------------------

class ImplementationError(RuntimeError):
    """The implementation to benchmark cannot be imported or lacks the API."""


_API = ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


@dataclasses.dataclass(frozen=True)
class Implementation:
    """The side under test: ``api.conv_transpose{1,2,3}d`` with torch's signature."""

    name: str
    api: Any
    version: str | None = None
    origin: str | None = None

    @property
    def label(self) -> str:
        """A short name for table headers: the last part of a dotted name."""
        return self.name.replace(":", ".").rsplit(".", 1)[-1] or self.name

    def op(self, dims: int) -> Callable[..., Any]:
        return getattr(self.api, f"conv_transpose{dims}d")


def _has_api(obj: Any) -> bool:
    return all(callable(getattr(obj, name, None)) for name in _API)


def resolve_implementation(spec: Any = None) -> Implementation:
    """The implementation to benchmark.

    ``None`` or ``"convt"``: the convt package. A string ``"module"`` or
    ``"module:attribute"``: that object (e.g. ``"torch.nn.functional"``). Any other
    object is used as it is when it has ``conv_transpose1d/2d/3d``.
    """
    if isinstance(spec, Implementation):
        return spec
    if spec is None or spec == "convt":
        try:
            convt = importlib.import_module("convt")
            api = convt if _has_api(convt) else importlib.import_module("convt.functional")
        except Exception as e:  # an unbuilt extension may fail in many ways
            raise ImplementationError(
                f"convt's functional API cannot be imported ({type(e).__name__}: {e}); "
                f"build and install the package, or pass --impl to benchmark another "
                f"implementation"
            ) from e
        if not _has_api(api):
            raise ImplementationError("the convt package has no conv_transpose1d/2d/3d")
        version = getattr(convt, "__version__", None)
        return Implementation("convt", api, version=version, origin="convt")
    if isinstance(spec, str):
        module_name, _, attr = spec.partition(":")
        try:
            obj = importlib.import_module(module_name)
            for part in filter(None, attr.split(".")):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise ImplementationError(f"cannot load implementation {spec!r}: {e}") from e
        if not _has_api(obj):
            raise ImplementationError(
                f"{spec!r} has no conv_transpose1d/2d/3d functions to benchmark"
            )
        root = sys.modules.get(module_name.split(".")[0])
        return Implementation(spec, obj, version=getattr(root, "__version__", None),
                              origin=spec)
    if _has_api(spec):
        name = getattr(spec, "name", None) or getattr(spec, "__name__", None) \
            or type(spec).__name__
        return Implementation(str(name), spec, origin=repr(spec))
    raise ImplementationError(f"{spec!r} has no conv_transpose1d/2d/3d functions")


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class SideResult:
    """The figures of one side (PyTorch or the implementation) on one case and mode."""

    name: str
    ms: float | None = None                 # median device time of one call
    samples_ms: list[float] = dataclasses.field(default_factory=list)
    host_ms: float | None = None            # median host time incl. device-wide sync
    error: float | None = None              # worst relative error over tensors and checks
    errors: dict[str, float] = dataclasses.field(default_factory=dict)
    tflops: float | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None  # roofline time / measured time
    # What the implementation says its forward runs for this case and mode (its
    # ``describe_forward``, where it has one: convt names kernel, tile and stages).
    forward_kernel: str | None = None


@dataclasses.dataclass
class CaseResult:
    case: Case
    mode: Mode
    budget: float                           # the budget of the mode (for the output)
    flops: int
    bytes: int
    pytorch: SideResult
    convt: SideResult
    status: str = "ok"
    message: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    budgets: dict[str, float] = dataclasses.field(default_factory=dict)  # per tensor
    roofline_ms: float | None = None
    bound: str | None = None
    peak_tflops: float | None = None
    speedup: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclasses.dataclass
class BenchConfig:
    """How to run. ``device``: "auto", "cpu", "cuda" or "cuda:N"."""

    device: str = "auto"
    reps: int = 20
    warmup: int = 5
    seed: int = 0
    flush_l2: bool = True
    cudnn_benchmark: bool = False
    recheck: bool = True
    cpu_max_flops: int = CPU_MAX_FLOPS
    peak_overrides: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class BenchRun:
    """Everything one ``convt bench`` run measured."""

    config: BenchConfig
    device: str
    environment: dict[str, Any]
    implementation: dict[str, Any]
    bandwidth_gbps: float | None
    peaks: rl.Peaks | None
    modes: list[Mode]
    results: list[CaseResult]
    started: str
    finished: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def results_for(self, mode: Mode) -> list[CaseResult]:
        return [r for r in self.results if r.mode == mode]

    def summary(self) -> list[dict[str, Any]]:
        """Per mode: counts, and geometric means over the cases that passed."""
        rows = []
        for mode in self.modes:
            results = self.results_for(mode)
            passed = [r for r in results if r.ok]
            counts = {s: sum(r.status == s for r in results) for s in STATUSES}
            rows.append({
                "mode": mode.label,
                "cases": len(results),
                "passed": len(passed),
                "failed": counts["FAILED"] + counts["ERROR"],
                "unsupported": counts["UNSUPPORTED"],
                "skipped": counts["SKIPPED"],
                "geomean_speedup": geomean([r.speedup for r in passed]),
                "geomean_roofline_fraction_pytorch":
                    geomean([r.pytorch.roofline_fraction for r in passed]),
                "geomean_roofline_fraction_convt":
                    geomean([r.convt.roofline_fraction for r in passed]),
            })
        return rows


def geomean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals or len(vals) != len(values):
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


# ---------------------------------------------------------------------------------------
# Precision switch and errors
# ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def cudnn_math(math_mode: str | None) -> Iterator[None]:
    """Set ``torch.backends.cudnn.allow_tf32`` for the mode ("default": True, "strict":
    False; None leaves it alone) and restore the previous setting afterwards."""
    if math_mode is None:
        yield
        return
    import torch

    cudnn = torch.backends.cudnn
    saved_flag: bool | None = None
    saved_precisions: tuple[str, str] | None = None
    try:
        saved_flag = bool(cudnn.allow_tf32)
    except RuntimeError:
        # The flags were set through torch's per-operator API; restore those instead.
        saved_precisions = (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision)
    cudnn.allow_tf32 = math_mode == "default"
    try:
        yield
    finally:
        if saved_flag is not None:
            cudnn.allow_tf32 = saved_flag
        elif saved_precisions is not None:
            cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision = saved_precisions


@contextlib.contextmanager
def _cudnn_benchmark(enabled: bool) -> Iterator[None]:
    import torch

    saved = torch.backends.cudnn.benchmark
    if enabled:
        torch.backends.cudnn.benchmark = True
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = saved


class _Mismatch(Exception):
    """An output of the wrong shape, dtype or device."""


_CHUNK = 1 << 24


def relative_error(out, ref) -> float:
    """max|out - ref| / max|ref|, computed in float64 in chunks (NaN if out has NaN)."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        raise _Mismatch(f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    a = out.detach().reshape(-1)
    b = ref.detach().reshape(-1)
    diff_max = 0.0
    ref_max = 0.0
    with torch.no_grad():
        for i in range(0, b.numel(), _CHUNK):
            rb = b[i:i + _CHUNK]
            d = float((a[i:i + _CHUNK].to(torch.float64) - rb).abs().max())
            if math.isnan(d):
                return math.nan
            diff_max = max(diff_max, d)
            ref_max = max(ref_max, float(rb.abs().max()))
    if ref_max == 0.0:
        return 0.0 if diff_max == 0.0 else math.inf
    return diff_max / ref_max


def _worst(a: float | None, b: float) -> float:
    if a is None:
        return b
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b)


# ---------------------------------------------------------------------------------------
# Tensors and calls
# ---------------------------------------------------------------------------------------

_TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


class _Tensors:
    """The tensors of one case and mode, shared by both sides."""

    def __init__(self, case: Case, dtype: str, device: Any, seed: int, backward: bool):
        import torch

        self.case = case
        self.dtype = getattr(torch, _TORCH_DTYPES[dtype])
        self.device = device
        self.backward = backward
        x, w, b, gy = self._values(seed)
        self.x = x.requires_grad_(backward)
        self.w = w.requires_grad_(backward)
        self.b = b.requires_grad_(backward) if b is not None else None
        self.gy = gy

    def _values(self, seed: int):
        """Input from torch.rand, grad-output uniform in [-1, 1) (signed, as gradients
        are; all-positive values would overflow float16 weight gradients); weight and
        bias from the module's default initialisation under ``seed``."""
        import torch

        case = self.case
        module_cls = getattr(torch.nn, f"ConvTranspose{case.dims}d")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = module_cls(
                case.in_channels, case.out_channels, case.kernel_size, stride=case.stride,
                padding=case.padding, output_padding=case.output_padding,
                groups=case.groups, bias=case.bias, dilation=case.dilation,
            )
        w = module.weight.detach().to(self.device, self.dtype)
        b = module.bias.detach().to(self.device, self.dtype) if case.bias else None
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        x = torch.rand(case.input_shape, generator=gen, device=self.device).to(self.dtype)
        gy = None
        if self.backward:
            gy = torch.rand(case.output_shape, generator=gen, device=self.device)
            gy = gy.mul_(2).sub_(1).to(self.dtype)
        return x, w, b, gy

    def refresh(self, seed: int) -> None:
        """New values in the same storage (in place, so ``_version`` changes)."""
        import torch

        x, w, b, gy = self._values(seed)
        with torch.no_grad():
            self.x.copy_(x)
            self.w.copy_(w)
            if b is not None:
                self.b.copy_(b)
            if gy is not None:
                self.gy.copy_(gy)

    def output_names(self) -> list[str]:
        names = ["output"]
        if self.backward:
            names += ["grad_input", "grad_weight"] + (["grad_bias"] if self.b is not None else [])
        return names

    def make_call(self, op: Callable[..., Any]) -> Callable[[], tuple]:
        """A call of ``op`` on these tensors returning (output, *gradients)."""
        import torch

        case = self.case
        kwargs = dict(stride=case.stride, padding=case.padding,
                      output_padding=case.output_padding, groups=case.groups,
                      dilation=case.dilation)
        if not self.backward:
            def forward():
                return (op(self.x, self.w, self.b, **kwargs),)
            return forward
        params = [self.x, self.w] + ([self.b] if self.b is not None else [])

        def forward_backward():
            y = op(self.x, self.w, self.b, **kwargs)
            grads = torch.autograd.grad(y, params, self.gy)
            return (y, *grads)
        return forward_backward

    def oracle(self) -> tuple:
        """The reference results in float64, on the same device."""
        import torch
        import torch.nn.functional as F

        op = getattr(F, f"conv_transpose{self.case.dims}d")
        x = self.x.detach().to(torch.float64).requires_grad_(self.backward)
        w = self.w.detach().to(torch.float64).requires_grad_(self.backward)
        b = None
        if self.b is not None:
            b = self.b.detach().to(torch.float64).requires_grad_(self.backward)
        case = self.case
        y = op(x, w, b, stride=case.stride, padding=case.padding,
               output_padding=case.output_padding, groups=case.groups,
               dilation=case.dilation)
        if not self.backward:
            return (y.detach(),)
        params = [x, w] + ([b] if b is not None else [])
        grads = torch.autograd.grad(y, params, self.gy.to(torch.float64))
        return (y.detach(), *grads)


class _SideError(Exception):
    """An exception raised by one side's call."""

    def __init__(self, side: str, exc: BaseException):
        super().__init__(str(exc))
        self.side = side
        self.exc = exc


def _tagged(side: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    def run():
        try:
            return fn()
        except Exception as e:
            raise _SideError(side, e) from e
    return run


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


# ---------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------

def _driver_version() -> str | None:
    try:
        import pynvml  # type: ignore

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            line = out.stdout.strip().splitlines()
            if out.returncode == 0 and line:
                return line[0].strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cudnn_version() -> str | None:
    import torch

    try:
        v = torch.backends.cudnn.version()
    except Exception:
        return None
    if not v:
        return None
    major, rest = divmod(int(v), 10000) if v >= 10000 else divmod(int(v), 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def resolve_device(spec: str = "auto") -> str:
    """"auto" -> "cuda:<current>" when a CUDA device is visible, else "cpu"."""
    import torch

    if spec in (None, "", "auto"):
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    if spec.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
        index = int(spec.split(":", 1)[1]) if ":" in spec else torch.cuda.current_device()
        return f"cuda:{index}"
    if spec != "cpu":
        raise ValueError(f"unknown device {spec!r} (use auto, cpu, cuda or cuda:N)")
    return "cpu"


def collect_environment(device: str) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "device": device,
        "gpu_name": None,
        "gpu_compute_capability": None,
        "gpu_memory_gib": None,
        "gpu_sm_count": None,
        "driver": None,
        "cuda": torch.version.cuda,
        "cudnn": None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpu_threads": torch.get_num_threads(),
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu_name=props.name,
            gpu_compute_capability=f"{props.major}.{props.minor}",
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            gpu_sm_count=props.multi_processor_count,
            driver=_driver_version(),
            cudnn=_cudnn_version(),
        )
    return env


# ---------------------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------------------

ProgressFn = Callable[[int, int, Case, Mode, "CaseResult | None"], None]


class _Stop(Exception):
    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Bench:
    """One benchmark session: a device, an implementation, hardware figures, results.

    Typical use::

        bench = Bench(BenchConfig(device="auto"), impl=None)   # None: the convt package
        bench.measure_hardware()
        run = bench.run(cases, bench.modes(["fp32"], ["default"], ["fwd"]))
    """

    def __init__(self, config: BenchConfig | None = None, impl: Any = None):
        import torch  # noqa: F401  (fail early and clearly when torch is missing)

        self.config = config or BenchConfig()
        if self.config.reps < 1:
            raise ValueError(f"reps must be at least 1, got {self.config.reps}")
        if self.config.warmup < 0:
            raise ValueError(f"warmup must be non-negative, got {self.config.warmup}")
        self.device = resolve_device(self.config.device)
        self.impl = resolve_implementation(impl)
        self.environment = collect_environment(self.device)
        self.bandwidth_gbps: float | None = None
        self.peaks: rl.Peaks | None = None
        self._flusher: L2Flusher | None = None
        self._broken: str | None = None
        self.started = _now()

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def modes(self, dtypes: Sequence[str], maths: Sequence[str],
              directions: Sequence[str]) -> list[Mode]:
        return build_modes(dtypes, maths, directions, "cuda" if self.is_cuda else "cpu")

    def prepare_cases(self, cases: Sequence[Case]) -> list[Case]:
        """The cases as they will run: scaled down on the CPU (see suite.scale_down)."""
        if self.is_cuda:
            return list(cases)
        return [scale_down(c, self.config.cpu_max_flops) for c in cases]

    def measure_hardware(self) -> None:
        """Copy bandwidth and peaks (GPU only; the CPU has no roofline here)."""
        if not self.is_cuda:
            return
        import torch

        with torch.cuda.device(self.device):
            self.bandwidth_gbps = rl.measure_copy_bandwidth(self.device)
            peaks = rl.lookup_peaks(self.environment["gpu_name"] or "")
            if peaks is None:
                peaks = rl.measure_matmul_peaks(self.device)
            self.peaks = peaks.with_overrides(self.config.peak_overrides)
            if self.config.flush_l2:
                self._flusher = L2Flusher(self.device)
            torch.cuda.empty_cache()

    def run(self, cases: Sequence[Case], modes: Sequence[Mode],
            progress: ProgressFn | None = None) -> BenchRun:
        import torch

        if self.is_cuda and self.peaks is None:
            self.measure_hardware()
        cases = self.prepare_cases(cases)
        total = len(cases) * len(modes)
        results: list[CaseResult] = []
        device_ctx = torch.cuda.device(self.device) if self.is_cuda else contextlib.nullcontext()
        with device_ctx:
            i = 0
            for mode in modes:
                for case in cases:
                    if progress:
                        progress(i, total, case, mode, None)
                    result = self.run_case(case, mode)
                    results.append(result)
                    i += 1
                    if progress:
                        progress(i, total, case, mode, result)
        notes = []
        if self.config.reps < 20:
            notes.append(f"only {self.config.reps} timed runs per side: quote medians of at "
                         f"least 20 (--reps 20)")
        return BenchRun(
            config=self.config, device=self.device, environment=self.environment,
            implementation={"name": self.impl.label, "version": self.impl.version,
                            "origin": self.impl.origin},
            bandwidth_gbps=self.bandwidth_gbps, peaks=self.peaks, modes=list(modes),
            results=results, started=self.started, finished=_now(), notes=notes,
        )

    # -- one case ------------------------------------------------------------------------
    def _new_result(self, case: Case, mode: Mode) -> CaseResult:
        budget = BUDGETS["fp32/strict"] if (not self.is_cuda and mode.dtype == "fp32") \
            else mode.budget
        result = CaseResult(
            case=case, mode=mode, budget=budget,
            flops=rl.problem_flops(case, mode.direction),
            bytes=rl.problem_bytes(case, mode.dtype, mode.direction),
            pytorch=SideResult("PyTorch"), convt=SideResult(self.impl.label),
        )
        if self.peaks is not None and self.bandwidth_gbps:
            result.peak_tflops = self.peaks.get(mode.peak_key)
            result.roofline_ms, result.bound = rl.roofline_ms(
                result.flops, result.bytes, result.peak_tflops, self.bandwidth_gbps)
        return result

    def run_case(self, case: Case, mode: Mode) -> CaseResult:
        """Check, time and re-check one case in one mode (never raises for a bad case)."""
        import torch

        result = self._new_result(case, mode)
        if self._broken:
            result.status, result.message = "SKIPPED", self._broken
            return result
        try:
            with cudnn_math(mode.math), _cudnn_benchmark(self.config.cudnn_benchmark):
                self._run_case(result)
        except _Stop as stop:
            result.status, result.message = stop.status, stop.message
        except torch.cuda.OutOfMemoryError as e:
            result.status, result.message = "SKIPPED", f"out of memory: {_describe(e)}"
        finally:
            if self.is_cuda:
                try:
                    torch.cuda.synchronize(self.device)
                    torch.cuda.empty_cache()
                except RuntimeError as e:
                    self._broken = f"the GPU is unusable after an earlier error ({_describe(e)})"
        if result.status != "ok":
            result.speedup = None
        return result

    def _device_usable(self) -> bool:
        """Whether the GPU still runs work (an error such as a rejected launch leaves it
        usable; an illegal memory access does not)."""
        if not self.is_cuda:
            return True
        import torch

        try:
            torch.cuda.synchronize(self.device)
            torch.ones(1, device=self.device).add_(1).item()
            return True
        except RuntimeError:
            return False

    def _classify(self, err: _SideError) -> _Stop:
        exc = err.exc
        text = _describe(exc)
        cuda_error = "CUDA error" in str(exc) or "illegal memory access" in str(exc)
        if cuda_error and not self._device_usable():
            self._broken = f"the GPU is unusable after an earlier error ({text})"
        if err.side == "impl":
            if isinstance(exc, NotImplementedError):
                return _Stop("UNSUPPORTED", f"{self.impl.name}: {text}")
            return _Stop("ERROR", f"{self.impl.name} raised {text}")
        return _Stop("SKIPPED", f"PyTorch raised {text}")

    def _check(self, tensors: _Tensors, calls: dict[str, Callable[[], tuple]],
               result: CaseResult) -> None:
        """Run each side once and fold its errors against the oracle into ``result``."""
        import torch

        try:
            oracle = tensors.oracle()
        except Exception as e:
            raise _Stop("SKIPPED", f"the float64 oracle failed: {_describe(e)}") from e
        names = tensors.output_names()
        for side, side_result in (("pytorch", result.pytorch), ("impl", result.convt)):
            try:
                outputs = calls[side]()
            except _SideError as e:
                raise self._classify(e) from e
            if len(outputs) != len(names):
                raise _Stop("FAILED", f"{side_result.name} returned {len(outputs)} results, "
                                      f"expected {len(names)}")
            for name, out, ref in zip(names, outputs, oracle):
                if not isinstance(out, torch.Tensor):
                    raise _Stop("FAILED", f"{side_result.name}: {name} is not a tensor")
                if out.dtype != tensors.dtype or str(out.device) != str(ref.device):
                    raise _Stop("FAILED", f"{side_result.name}: {name} is {out.dtype} on "
                                          f"{out.device}, expected {tensors.dtype} on "
                                          f"{ref.device}")
                try:
                    err = relative_error(out, ref)
                except _Mismatch as e:
                    raise _Stop("FAILED", f"{side_result.name}: {name} has {e}") from e
                side_result.errors[name] = _worst(side_result.errors.get(name), err)
                side_result.error = _worst(side_result.error, err)
            del outputs
        del oracle

    def _verdict(self, result: CaseResult) -> None:
        """FAILED unless every tensor of the implementation is finite and within its
        budget: the mode's for the output; for a gradient, the mode's or twice PyTorch's
        error on that gradient, whichever is larger."""
        for name, err in result.convt.errors.items():
            budget = result.budget
            if name != "output":
                ref = result.pytorch.errors.get(name)
                if ref is not None and math.isfinite(ref):
                    budget = max(budget, 2 * ref)
            result.budgets[name] = budget
        over = []
        for name, err in result.convt.errors.items():
            if not math.isfinite(err):
                raise _Stop("FAILED", f"{result.convt.name} gives non-finite values in "
                                      f"{name} (error {err})")
            if err > result.budgets[name]:
                over.append(f"{name} error {err:.2e} is above the budget "
                            f"{result.budgets[name]:.1e}")
        if over:
            raise _Stop("FAILED", "; ".join(over))

    def _forward_kernel(self, tensors: _Tensors) -> str | None:
        """The implementation's own account of what its forward runs here (under the
        mode's precision flags, which are set by now), or None where it gives none."""
        describe = getattr(self.impl.api, "describe_forward", None)
        if describe is None:
            return None
        case = tensors.case
        b = tensors.b.detach() if tensors.b is not None else None
        try:
            return str(describe(tensors.x.detach(), tensors.w.detach(), b, stride=case.stride,
                                padding=case.padding, output_padding=case.output_padding,
                                groups=case.groups, dilation=case.dilation))
        except Exception as e:  # an account that fails is no verdict on the op itself
            return f"describe_forward failed: {_describe(e)}"

    def _run_case(self, result: CaseResult) -> None:
        case, mode = result.case, result.mode
        backward = mode.direction == "fwd+bwd"
        try:
            tensors = _Tensors(case, mode.dtype, self.device, self.config.seed, backward)
        except Exception as e:
            if type(e).__name__ == "OutOfMemoryError":
                raise
            raise _Stop("SKIPPED", f"cannot build the inputs: {_describe(e)}") from e
        import torch.nn.functional as F

        result.convt.forward_kernel = self._forward_kernel(tensors)
        reference_op = getattr(F, f"conv_transpose{case.dims}d")
        calls = {
            "pytorch": _tagged("pytorch", tensors.make_call(reference_op)),
            "impl": _tagged("impl", tensors.make_call(self.impl.op(case.dims))),
        }
        # 1. correctness on the first values; a failing case is not timed.
        self._check(tensors, calls, result)
        self._verdict(result)
        # 2. timing, interleaved.
        try:
            samples = time_interleaved(
                [calls["pytorch"], calls["impl"]], reps=self.config.reps,
                warmup=self.config.warmup, device=self.device,
                before_each=self._flusher if self.is_cuda else None,
            )
        except _SideError as e:
            raise self._classify(e) from e
        # 3. correctness again, on new values in the same storage.
        if self.config.recheck:
            tensors.refresh(self.config.seed + 1)
            self._check(tensors, calls, result)
            self._verdict(result)
        del tensors, calls
        for side, s in zip((result.pytorch, result.convt), samples):
            side.samples_ms = [round(v, 6) for v in s.ms]
            side.ms = s.median_ms
            side.host_ms = s.median_host_ms
            if side.ms > 0:
                side.tflops = result.flops / (side.ms * 1e-3) / 1e12
                side.gbps = result.bytes / (side.ms * 1e-3) / 1e9
                if result.roofline_ms is not None:
                    side.roofline_fraction = result.roofline_ms / side.ms
        if result.pytorch.ms and result.convt.ms:
            result.speedup = result.pytorch.ms / result.convt.ms
        perr = result.pytorch.errors.get("output")
        if perr is not None and perr > result.budget:
            result.notes.append(f"PyTorch's own output error {perr:.2e} is above the budget")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
