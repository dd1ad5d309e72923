"""The linearity property (``check_linearity``): with v and dw doubled, each output is its own value
times ``2 ** LINEAR_SCALES[name]`` to within one unit of its dtype (``_units_apart``); a term that takes
one tensor for another breaks that scaling however small it is."""

from __future__ import annotations

import torch

from ..case import Case
from ..failure import Metrics, PropertyFailure
from ..phases import phase
from .bounds import _read
from .common import build_inputs, run_ops

# The linearity property's scaling: v and dw doubled, everything else as it is. Each output is then its
# own value times 2 ** LINEAR_SCALES[name] (below): u = A (v*beta); dv = (A^T du) * beta; dA, and through it
# dL and every term of dk, dbeta and dg, carries exactly one factor of v or dw.
LINEAR_SCALES = {"w": 0, "u": 1, "dk": 1, "dv": 0, "dbeta": 1, "dg": 1}


def _units_apart(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """|x - y| in units in the last place of x's dtype at the larger magnitude (the subnormal spacing
    below its smallest normal), plus 64 units of float32's subnormal spacing, in float64; 0 where
    both are NaN or equal infinities."""
    info = torch.finfo(x.dtype)
    a, b = x.double(), y.double()
    mag = torch.maximum(a.abs(), b.abs()).clamp_min(info.tiny)
    unit = torch.exp2(torch.floor(torch.log2(mag))) * info.eps + 64 * 2.0**-149
    apart = (a - b).abs() / unit
    return torch.where((a == b) | (a.isnan() & b.isnan()), torch.zeros_like(apart), apart)


def check_linearity(case: Case) -> Metrics:
    """The WY step is linear in v and dw where it is linear: with v and dw doubled (k, beta, g, A, du
    as they are), u, dk, dbeta and dg double and w and dv stay (``LINEAR_SCALES``). A power of two
    scales every rounding exactly, in any order of any sum, on every backend, variant and launch,
    so each output element is its double (or itself) bit for bit, but where a float32 intermediate
    (long gates' exp2) or the output itself (float16 below 6.1e-5) falls below its dtype's normal
    range: there it may round apart, within one unit of the output's dtype. A term that takes v, dw,
    du or k for another (a wrong pointer, a mask that lets one tensor's lanes into another's tile,
    stale data in an accumulator) breaks the scaling however small it is, where the oracle's bound
    passes an error of its size."""
    inputs = build_inputs(case)
    base = run_ops(case, inputs)
    doubled = run_ops(case, inputs._replace(v=inputs.v * 2, dw=inputs.dw * 2))
    metrics: Metrics = {}
    failures = []
    with phase("comparison"):
        rows = {}  # per output: [most units apart, inexact elements], read in one transfer
        for name, scale in LINEAR_SCALES.items():
            x, y = doubled.get(name), base.get(name)  # none of the backward's for a forward-only subject
            if x is not None and y is not None and x.numel():
                apart = _units_apart(x, y * 2**scale)
                rows[name] = torch.stack((apart.max(), (apart > 0).sum().double()))
        for name, (worst, inexact) in zip(rows, _read(list(rows.values()))):
            scale = 2 ** LINEAR_SCALES[name]
            metrics[name] = {"scale": scale, "max_units_apart": worst, "inexact_elements": int(inexact)}
            if not worst <= 1.0:
                failures.append(f"{name}: {int(inexact)} elements are not {scale}x the base run's, "
                                f"up to {worst:.3g} units apart")
    if failures:
        raise PropertyFailure("with v and dw doubled: " + "; ".join(failures), metrics)
    return metrics
