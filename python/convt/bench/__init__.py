"""``convt bench``: convt against PyTorch eager, checked against a float64 oracle and
placed against the hardware's roofline.

Modules:

- ``suite``    — cases: suite files, the built-in ``kernelbench`` suite, the ``--shape``
  grammar and the CPU scale-down rule (pure Python);
- ``roofline`` — flops, bytes, peaks and copy bandwidth;
- ``timing``   — interleaved, synchronised timing with CUDA events or ``perf_counter``;
- ``runner``   — builds the tensors, checks both sides, times them;
- ``report``   — the console table, the JSON document and the plot.

Only ``runner`` (when a run starts) and the measuring helpers import torch; nothing here
imports the compiled extension until a run needs the convt implementation.
"""

from convt.bench.suite import (  # noqa: F401
    BUILTIN_SUITES,
    Case,
    ShapeError,
    Suite,
    SuiteError,
    load_suite,
    parse_shape,
    scale_down,
    select_cases,
)
