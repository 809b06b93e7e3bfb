"""``convt kernelbench-check``: the KernelBench protocol for a problem and a solution.

For a problem file (``Model``, ``get_inputs``, ``get_init_inputs``) and a solution file
(``ModelNew``), as KernelBench's harness does:

1. build ``Model(*get_init_inputs())`` and ``ModelNew(*get_init_inputs())``, each right
   after ``torch.manual_seed(seed)``; nothing is copied between them, and the check
   reports whether their parameters and buffers are identical (names, shapes, values);
2. move both to the GPU;
3. per precision mode, run ``--trials`` fresh ``get_inputs()`` draws (seeded) through
   both and compare the outputs with ``torch.allclose(atol=rtol=tol)``: tol = 1e-2 with
   PyTorch's default precision (``torch.backends.cudnn.allow_tf32 = True``, so both sides
   may use TF32), 1e-4 with TF32 disabled (``torch.backends.cudnn.allow_tf32 =
   torch.backends.cuda.matmul.allow_tf32 = False``);
4. check the gradients of both models (inputs and parameters, one seeded cotangent)
   with the same tolerance, as max|diff| / max|ref| (``--no-backward`` skips this); a
   gradient that misses the tolerance against Model's is judged against a float64 run of
   Model instead, since Model's own float32 gradient can be off by more than the
   tolerance (long reductions: cuDNN's strict-fp32 weight gradient of KernelBench 57 is
   about 5e-4 from the exact one), and passes if it is within the tolerance of that;
5. time both on the same inputs with CUDA events: interleaved, after warm-up, median of
   ``--reps`` runs, the L2 cache evicted before each timed call (as ``convt bench``
   does; ``--no-flush-l2`` keeps it), and report the speedup Model / ModelNew.

Inputs are drawn with the problem's own ``get_inputs()`` under ``torch.device(device)``,
so ``torch.rand(...)`` creates them on the GPU directly.

The check needs a CUDA device (``--device cpu`` runs it on the CPU for small problems;
no TF32 there, and the timing is wall-clock).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .problems import ProblemError, ProblemFile, load_module, load_problem

__all__ = ["CheckConfig", "CheckResult", "CheckSetupError", "ModeResult", "format_report", "run_check"]

#: Precision modes: (label, torch.backends.cudnn.allow_tf32, tolerance).
MODES = {
    "default": ("fp32, TF32 allowed (PyTorch's default)", True, 1e-2),
    "strict": ("fp32, TF32 disabled", False, 1e-4),
}


class CheckSetupError(RuntimeError):
    """The check cannot run (no device, an unusable problem file): exit status 2."""


@dataclasses.dataclass
class CheckConfig:
    device: str = "cuda"
    trials: int = 5
    reps: int = 20
    warmup: int = 5
    seed: int = 42
    maths: Sequence[str] = ("default", "strict")
    backward: bool = True
    timing: bool = True
    flush_l2: bool = True


@dataclasses.dataclass
class ModeResult:
    math: str
    label: str
    tolerance: float
    trials: int = 0
    trials_passed: int = 0
    max_abs_diff: float = 0.0
    max_rel_err: float = 0.0  # max |new - ref| / max |ref| over trials and outputs
    correct: bool = False
    message: str | None = None
    backward: dict[str, float] | None = None  # gradient name -> max|diff| / max|ref|
    backward_ok: bool | None = None
    backward_message: str | None = None
    model_ms: float | None = None
    model_new_ms: float | None = None
    speedup: float | None = None
    kernels: list[tuple[str, str]] | None = None

    @property
    def ok(self) -> bool:
        return self.correct and self.backward_ok is not False


@dataclasses.dataclass
class CheckResult:
    problem: str
    solution: str
    device: str
    environment: dict[str, Any]
    config: dict[str, Any]
    load_seconds: float = 0.0
    weights_identical: bool = False
    weights_message: str = ""
    modes: list[ModeResult] = dataclasses.field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.weights_identical and bool(self.modes) and all(m.ok for m in self.modes)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["ok"] = self.ok
        for m, md in zip(self.modes, d["modes"]):
            md["ok"] = m.ok
        return d


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def precision(math_mode: str) -> Iterator[None]:
    """Set PyTorch's float32 switches for a mode ("default": cuDNN may use TF32, matmul
    does not, PyTorch's defaults; "strict": neither), restoring them afterwards."""
    import torch

    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    allow = MODES[math_mode][1]
    try:
        saved = ("legacy", cudnn.allow_tf32, matmul.allow_tf32)
    except RuntimeError:  # the flags were set through torch's fp32_precision API
        saved = ("precision", cudnn.conv.fp32_precision, matmul.fp32_precision)
    try:
        if saved[0] == "legacy":
            cudnn.allow_tf32 = allow
            matmul.allow_tf32 = False
        else:
            cudnn.conv.fp32_precision = "tf32" if allow else "ieee"
            matmul.fp32_precision = "ieee"
        yield
    finally:
        if saved[0] == "legacy":
            cudnn.allow_tf32, matmul.allow_tf32 = saved[1], saved[2]
        else:
            cudnn.conv.fp32_precision, matmul.fp32_precision = saved[1], saved[2]


def _resolve_device(spec: str) -> str:
    import torch

    spec = (spec or "cuda").strip().lower()
    if spec == "cpu":
        return "cpu"
    if not spec.startswith("cuda"):
        raise CheckSetupError(f"unknown device {spec!r} (use cuda, cuda:N or cpu)")
    if not torch.cuda.is_available():
        raise CheckSetupError(
            "no CUDA device: kernelbench-check runs the KernelBench protocol on a GPU "
            "(PyTorch sees none here). --device cpu runs the correctness checks on the CPU "
            "for small problems."
        )
    index = spec.partition(":")[2]
    if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
        raise CheckSetupError(f"{spec}: no such CUDA device ({torch.cuda.device_count()} visible)")
    return spec if index else "cuda:0"


def _environment(device: str) -> dict[str, Any]:
    import platform

    import torch

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        env["gpu"] = props.name
        env["capability"] = f"{props.major}.{props.minor}"
    return env


def _to(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def _draw_inputs(problem: ProblemFile, device: str, seed: int) -> list:
    import torch

    torch.manual_seed(seed)
    with torch.device(device):
        inputs = problem.inputs()
    return [_to(v, device) for v in inputs]


def _flatten(out: Any) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in _flatten(out[k])]
    return []


def _rel_err(new, ref) -> float:
    """max |new - ref| / max |ref| in float64 (0 for empty tensors)."""
    if ref.numel() == 0:
        return 0.0
    ref64, new64 = ref.detach().double(), new.detach().double()
    scale = ref64.abs().max().item()
    err = (new64 - ref64).abs().max().item()
    return err / scale if scale > 0 else err


def _compare(ref_out: Any, new_out: Any, tol: float) -> tuple[bool, float, float, str | None]:
    """(allclose, max abs diff, max rel err, message) of two model outputs."""
    import torch

    refs, news = _flatten(ref_out), _flatten(new_out)
    if len(refs) != len(news) or not refs:
        return False, math.inf, math.inf, f"ModelNew returned {len(news)} tensors, Model {len(refs)}"
    ok, max_abs, max_rel = True, 0.0, 0.0
    for i, (r, n) in enumerate(zip(refs, news)):
        if r.shape != n.shape:
            return False, math.inf, math.inf, f"output {i}: shape {tuple(n.shape)}, expected {tuple(r.shape)}"
        if r.dtype != n.dtype:
            return False, math.inf, math.inf, f"output {i}: dtype {n.dtype}, expected {r.dtype}"
        if r.numel():
            max_abs = max(max_abs, (n.detach().double() - r.detach().double()).abs().max().item())
            max_rel = max(max_rel, _rel_err(n, r))
        if not torch.allclose(n, r, atol=tol, rtol=tol):
            ok = False
    return ok, max_abs, max_rel, None if ok else f"torch.allclose(atol=rtol={tol:g}) fails"


def _state(model) -> dict:
    return dict(model.state_dict(keep_vars=False))


def _compare_weights(ref, new) -> tuple[bool, str]:
    import torch

    a, b = _state(ref), _state(new)
    if list(a) != list(b):
        only_a = [k for k in a if k not in b]
        only_b = [k for k in b if k not in a]
        if only_a or only_b:
            return False, (f"different parameter/buffer names: only in Model {only_a}, only in ModelNew {only_b}")
        return False, "the same parameter/buffer names in a different order"
    for k in a:
        if a[k].shape != b[k].shape:
            return False, f"{k}: shape {tuple(b[k].shape)} in ModelNew, {tuple(a[k].shape)} in Model"
        if a[k].dtype != b[k].dtype:
            return False, f"{k}: dtype {b[k].dtype} in ModelNew, {a[k].dtype} in Model"
        if not torch.equal(a[k], b[k]):
            return False, f"{k}: different values under the same seed"
    names = ", ".join(a) if len(a) <= 4 else ", ".join(list(a)[:4]) + ", ..."
    return True, f"identical under the same seed: {len(a)} tensors ({names})"


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _free(device: str) -> None:
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _backward_check(problem: ProblemFile, ref, new, device: str, seed: int, tol: float) -> tuple[bool, dict, str | None]:
    """Gradients of both models (floating-point inputs and parameters) for one seeded
    cotangent, compared as max|diff| / max|ref| against ``tol``.

    A gradient off by more than ``tol`` from Model's is compared with the gradient of a
    float64 copy of Model (the same inputs and cotangent, converted exactly): it passes
    when within ``tol`` of that, the difference being Model's own float32 rounding. The
    returned errors stay those against Model's gradient; the message tells both."""
    import torch

    base = _draw_inputs(problem, device, seed)

    def grads(model, dtype=None):
        inputs = [v.detach().to(dtype=dtype or v.dtype, copy=True).requires_grad_(True)
                  if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in base]
        leaves = [v for v in inputs if isinstance(v, torch.Tensor) and v.requires_grad]
        names = [f"input {i}" for i, v in enumerate(inputs) if isinstance(v, torch.Tensor) and v.requires_grad]
        params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        leaves += [p for _, p in params]
        names += [f"grad of {n}" for n, _ in params]
        outs = [o for o in _flatten(model(*inputs)) if o.requires_grad]
        if not outs:
            return names, None
        gen = torch.Generator(device=device).manual_seed(seed + 7919)
        cotangents = [torch.rand(o.shape, generator=gen, device=device, dtype=torch.float32).mul_(2).sub_(1).to(o.dtype)
                      for o in outs]
        return names, torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)

    names, ref_grads = grads(ref)
    _, new_grads = grads(new)
    if ref_grads is None:
        return True, {}, "Model's output does not require a gradient"
    if new_grads is None:
        return False, {}, "ModelNew's output does not require a gradient (no autograd)"
    errors, ok, bad, notes = {}, True, [], []
    above: list[tuple[int, str, float]] = []  # (index, label, error against Model's gradient)
    for i, (name, r, n) in enumerate(zip(names, ref_grads, new_grads)):
        label = name.replace("grad of ", "") if name.startswith("grad of ") else name
        if r is None and n is None:
            continue
        if r is None or n is None or r.shape != n.shape:
            ok = False
            bad.append(f"{label}: missing or misshapen gradient")
            continue
        err = _rel_err(n, r)
        errors[label] = err
        if not err <= tol:
            above.append((i, label, err))
    if above:
        exact, why = None, None
        try:
            ref64 = copy.deepcopy(ref).to(torch.float64)
            _, exact = grads(ref64, torch.float64)
            del ref64
        except Exception as e:  # no float64 kernels, out of memory, ...: Model's gradient stands
            why = f"{type(e).__name__}: {e}".splitlines()[0]
        for i, label, err in above:
            e64 = exact[i] if exact is not None else None
            if e64 is None or e64.shape != new_grads[i].shape:
                ok = False
                bad.append(f"{label} {err:.1e}" + (f" (no float64 reference: {why})" if why else ""))
                continue
            new_err, ref_err = _rel_err(new_grads[i], e64), _rel_err(ref_grads[i], e64)
            detail = (f"{label} {err:.1e} from Model's gradient, {new_err:.1e} from float64 "
                      f"(Model's own {ref_err:.1e})")
            if new_err <= tol:
                notes.append(detail)
            else:
                ok = False
                bad.append(detail)
        del exact
    if not ok:
        message = "gradient error above the tolerance: " + ", ".join(bad + notes)
    elif notes:
        message = "within the tolerance of a float64 reference: " + ", ".join(notes)
    else:
        message = None
    return ok, errors, message


def _time(fns: Sequence[Callable[[], Any]], device: str, reps: int, warmup: int, flush_l2: bool) -> list[float]:
    """Median ms of each callable: interleaved, after warm-up, CUDA events on a GPU."""
    from convt.bench.timing import L2Flusher, time_interleaved

    before = L2Flusher(device) if (flush_l2 and device.startswith("cuda")) else None
    samples = time_interleaved(fns, reps=reps, warmup=warmup, device=device, before_each=before)
    del before
    return [s.median_ms for s in samples]


# ---------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------

def run_check(problem_path: str | Path, solution_path: str | Path, config: CheckConfig | None = None,
              progress: Callable[[str], None] | None = None) -> CheckResult:
    """Run the protocol; raises CheckSetupError when it cannot run at all."""
    import torch

    config = config or CheckConfig()
    say = progress or (lambda _msg: None)
    for m in config.maths:
        if m not in MODES:
            raise CheckSetupError(f"unknown precision mode {m!r} (choose from {', '.join(MODES)})")
    if config.trials < 1 or config.reps < 1 or config.warmup < 0:
        raise CheckSetupError("--trials and --reps must be at least 1, --warmup at least 0")
    device = _resolve_device(config.device)
    try:
        problem = load_problem(problem_path)
    except ProblemError as e:
        raise CheckSetupError(str(e)) from None
    result = CheckResult(problem=str(problem_path), solution=str(solution_path), device=device,
                         environment=_environment(device), config=dataclasses.asdict(config))
    result.config["maths"] = list(config.maths)

    say(f"loading {solution_path} (this compiles its extension the first time)")
    t0 = time.perf_counter()
    try:
        with torch.cuda.device(device) if device.startswith("cuda") else contextlib.nullcontext():
            solution = load_module(solution_path, "solution")
    except ProblemError as e:
        result.error = f"the solution does not load: {e}"
        return result
    result.load_seconds = time.perf_counter() - t0
    model_new_cls = getattr(solution, "ModelNew", None)
    if not isinstance(model_new_cls, type) or not issubclass(model_new_cls, torch.nn.Module):
        result.error = f"{solution_path}: defines no class ModelNew(nn.Module)"
        return result

    init = problem.init_inputs()
    try:
        torch.manual_seed(config.seed)
        ref = problem.Model(*init)
        torch.manual_seed(config.seed)
        new = model_new_cls(*init)
    except Exception as e:
        result.error = f"building the models raised {type(e).__name__}: {e}"
        return result
    result.weights_identical, result.weights_message = _compare_weights(ref, new)
    ref, new = ref.to(device), new.to(device)
    report = getattr(solution, "_convt_kernel_report", None)

    for math_mode in config.maths:
        label, _, tol = MODES[math_mode]
        mode = ModeResult(math=math_mode, label=label, tolerance=tol)
        result.modes.append(mode)
        with precision(math_mode), (torch.cuda.device(device) if device.startswith("cuda")
                                    else contextlib.nullcontext()):
            try:
                say(f"{label}: {config.trials} trials")
                for trial in range(config.trials):
                    inputs = _draw_inputs(problem, device, config.seed + 1 + trial)
                    with torch.no_grad():
                        out_ref = ref(*inputs)
                        out_new = new(*inputs)
                    _sync(device)
                    ok, max_abs, max_rel, message = _compare(out_ref, out_new, tol)
                    mode.trials += 1
                    mode.trials_passed += int(ok)
                    mode.max_abs_diff = max(mode.max_abs_diff, max_abs)
                    mode.max_rel_err = max(mode.max_rel_err, max_rel)
                    if message and mode.message is None:
                        mode.message = f"trial {trial}: {message}"
                    del inputs, out_ref, out_new
                    _free(device)
                mode.correct = mode.trials_passed == mode.trials
                if report is not None:
                    inputs = _draw_inputs(problem, device, config.seed)
                    try:
                        mode.kernels = [(n, k) for n, k in report(new, *inputs)]
                    except Exception as e:  # informational only
                        mode.kernels = [("?", f"kernel report failed: {type(e).__name__}: {e}")]
                    del inputs
                if config.backward:
                    say(f"{label}: gradients")
                    mode.backward_ok, mode.backward, mode.backward_message = _backward_check(
                        problem, ref, new, device, config.seed, tol)
                    _free(device)
                if config.timing and mode.correct:
                    say(f"{label}: timing ({config.reps} runs each)")
                    inputs = _draw_inputs(problem, device, config.seed)
                    with torch.no_grad():
                        ms = _time([lambda: ref(*inputs), lambda: new(*inputs)], device, config.reps,
                                   config.warmup, config.flush_l2)
                    mode.model_ms, mode.model_new_ms = ms
                    mode.speedup = ms[0] / ms[1] if ms[1] > 0 else None
                    del inputs
                    _free(device)
            except Exception as e:
                mode.correct = False
                mode.message = f"raised {type(e).__name__}: {e}"
                _free(device)
    return result


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_report(result: CheckResult) -> str:
    env = result.environment
    where = f"{env.get('gpu', '')} ({result.device})" if result.device.startswith("cuda") else "CPU"
    lines = [
        f"problem   {result.problem}",
        f"solution  {result.solution}" + (f" (loaded in {result.load_seconds:.1f} s)" if result.load_seconds else ""),
        f"device    {where}, torch {env.get('torch')}, CUDA {env.get('cuda')}",
    ]
    if result.error:
        lines.append(f"error     {result.error}")
        lines.append("result    FAIL")
        return "\n".join(lines)
    lines.append(f"weights   {result.weights_message}")
    for m in result.modes:
        for name, kernel in m.kernels or []:
            lines.append(f"kernels   [{m.math}] {name or '(model)'}: {kernel}")
    header = (f"{'mode':<38} {'tol':>6} {'trials':>7} {'max abs diff':>12} {'max rel err':>11} "
              f"{'correct':>7} {'backward':>9} {'Model ms':>9} {'ModelNew ms':>11} {'speedup':>8}")
    lines += ["", header]
    for m in result.modes:
        back = "-" if m.backward_ok is None else ("ok" if m.backward_ok else "FAIL")
        lines.append(
            f"{m.label:<38} {m.tolerance:>6.0e} {m.trials_passed:>3}/{m.trials:<3} "
            f"{_fmt(m.max_abs_diff, '.2e'):>12} {_fmt(m.max_rel_err, '.2e'):>11} "
            f"{'yes' if m.correct else 'NO':>7} {back:>9} {_fmt(m.model_ms, '.3f'):>9} "
            f"{_fmt(m.model_new_ms, '.3f'):>11} {(_fmt(m.speedup, '.2f') + 'x') if m.speedup else '-':>8}"
        )
    for m in result.modes:
        if m.message:
            lines.append(f"  {m.label}: {m.message}")
        if m.backward_message:
            lines.append(f"  {m.label}: backward: {m.backward_message}")
        if m.backward:
            worst = max(m.backward.items(), key=lambda kv: kv[1])
            lines.append(f"  {m.label}: largest gradient error {worst[1]:.1e} ({worst[0]})")
    lines.append("")
    lines.append(f"result    {'PASS' if result.ok else 'FAIL'}")
    return "\n".join(lines)


def write_json(result: CheckResult, path: str | Path) -> None:
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(clean(result.to_json()), indent=1) + "\n", encoding="utf-8")
