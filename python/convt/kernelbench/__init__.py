"""KernelBench export: self-contained single-file ``ModelNew`` solutions on convt's kernels.

* :func:`export_file` / :func:`export_dir` (``convt export-kernelbench``): write a
  solution for a KernelBench problem file (or a folder of them). The solution inlines
  convt's C++/CUDA sources, compiles them with ``torch.utils.cpp_extension.load_inline``
  and imports nothing from convt.
* :func:`run_check` (``convt kernelbench-check``): the KernelBench protocol for a problem
  and a solution: same seed for both models, several random trials, ``torch.allclose``
  at 1e-2 (TF32 allowed) and 1e-4 (TF32 disabled), CUDA-event timing of both.
* :func:`write_suite_problems`: problem files for a benchmark suite (the 17 KernelBench
  level-1 transposed convolutions: ``kernelbench``).

See docs/kernelbench.md.
"""

from .amalgamate import AmalgamationError, ConvtSources, convt_sources, find_source_root
from .export import ExportError, ExportResult, analyse, export_dir, export_file, render_solution
from .problems import ProblemError, load_module, load_problem, problem_source, write_suite_problems


def run_check(*args, **kwargs):
    """See :func:`convt.kernelbench.check.run_check`."""
    from .check import run_check as _run_check

    return _run_check(*args, **kwargs)


__all__ = [
    "AmalgamationError",
    "ConvtSources",
    "ExportError",
    "ExportResult",
    "ProblemError",
    "analyse",
    "convt_sources",
    "export_dir",
    "export_file",
    "find_source_root",
    "load_module",
    "load_problem",
    "problem_source",
    "render_solution",
    "run_check",
    "write_suite_problems",
]
