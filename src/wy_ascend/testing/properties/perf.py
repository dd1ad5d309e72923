"""The perf property (``check_perf``): a device backend's forward and backward times within the bounds
of testing/perf.py, which measures and judges them; here only the property around it (the kernels
compiled first, in parallel, by testing/warm.py, and a slow result raised as a PropertyFailure)."""

from __future__ import annotations

import sys

from ..case import Case
from ..failure import Metrics, PropertyFailure
from ..phases import phase
from .common import build_inputs, device_of


def check_perf(case: Case) -> Metrics:
    """Forward and backward times within the bounds of perf.py (a device backend's property)."""
    from ..perf import PerfFailure, confirmed, measure
    from ..warm import warm

    if device_of(case).type == "cpu":
        raise PropertyFailure("perf times a device backend's kernels; the cpu backend (the interpreter) has none")
    with phase("kernel"):  # compiles, in parallel processes (testing/warm.py)
        warmed = warm(case)
    if warmed is not None:
        print(warmed.summary(), file=sys.stderr, flush=True)
    inputs = build_inputs(case)

    def measured() -> dict[str, dict[str, float]]:
        with phase("kernel"):
            return measure(case, inputs)

    try:
        return confirmed(measured)
    except PerfFailure as e:
        raise PropertyFailure(f"slower than the bound: {e.args[0]}", e.args[1]) from None
