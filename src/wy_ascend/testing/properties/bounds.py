"""How far an output may be from the float64 oracle: the tolerances (``FP32_RTOL``, ``UNIT_ROUNDOFF``,
``LOW_PRECISION_FACTOR``, ``BLOCK_SLACK``; the package docstring says why), each output's bound from its
rounding error and its rounding sensitivity (``_bound``, ``precisions``, ``error_bounds``,
``nudged_outputs``), and the relative RMS error they bound, read from the device in one transfer
(``_norms``, ``_ratio``, ``_read``, ``rel_rms``). The oracle property applies them; the invariance
properties' compile tolerances are built from the same unit roundoffs."""

from __future__ import annotations

import math
from typing import Any

import torch

from .. import rng
from ..case import Inputs, float64_device
from .exact import _oracle_on

FP32_RTOL = 1e-5
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}
LOW_PRECISION_FACTOR = 4.0
BLOCK_SLACK = 2.0  # the block bound's factor over the whole-output formula below float32 (_worst_block)


def _norms(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """``[out all finite, ||out - ref||, ||ref||]`` in float64 on ``float64_device``, left there:
    a comparison gathers these and reads them all in one transfer (``_read``), not one per output."""
    device = float64_device(out.device)
    out, ref = out.detach().to(device, torch.float64), ref.detach().to(device, torch.float64)
    return torch.stack((torch.isfinite(out).all().to(torch.float64), torch.linalg.vector_norm(out - ref),
                        torch.linalg.vector_norm(ref)))


def _ratio(finite: float, diff: float, scale: float) -> float:
    """rel_rms from ``_norms`` read on the host."""
    if not finite:
        return math.inf
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def _read(rows: list[torch.Tensor]) -> list[list[float]]:
    """The host values of 1-D tensors, in one device-to-host transfer (a row on the host, after an
    out-of-memory fallback, is first moved to the first row's device)."""
    if not rows:
        return []
    flat = torch.cat([r.to(rows[0].device, torch.float64) for r in rows]).tolist()
    ends = torch.tensor([r.numel() for r in rows]).cumsum(0).tolist()
    return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def rel_rms(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; 0 when both are zero, inf on any NaN."""
    return _ratio(*_read([_norms(out, ref)])[0])


def _bound(dtype: str, round_err: float, sensitivity: float) -> float:
    """The bound on rel_rms for an output of ``dtype``, given its rounding error ``round_err``
    (rel_rms of the exact output rounded to ``dtype``) and ``sensitivity`` (``error_bounds``).

    float32 (an output held to no dtype below it: ``precisions``): FP32_RTOL, or LOW_PRECISION_FACTOR
    times ``sensitivity`` where that is larger. An fp32 output that cancels (a sum of terms far larger
    than itself) is off by the roundings of its terms and partial sums, not of its value, in any fp32
    kernel: a cuda H100 nightly found dg of one token, a 16-term dot cancelling 1,160-fold, 1.23e-5
    off (the interpreter: 7.4e-6), where moving the multiplicands by half an fp32 ulp moves it
    2.43e-5; that dot summed in fp32 in 200 random orders was off by 0.8x that sensitivity (median)
    to 3.2x (tests/test_bounds.py checks every order within the bound). On outputs that do not
    cancel the sensitivity is about u/2 (3e-8): 4x that is far below FP32_RTOL, which stays.

    Below float32: LOW_PRECISION_FACTOR times the larger of the output's own
    rounding error and half an ulp, or ``sensitivity`` if that is larger: how far the exact
    output moves when its multiplicands move by half an ulp. An error below that is one the
    problem's conditioning makes of the roundings any kernel in ``dtype`` does. It matters for
    ill-conditioned inputs (repeated keys, where ``w = A (k*beta)`` cancels: there a kernel that
    rounds ``k*beta`` to a bf16 dot operand, as fla's does and the cuda backend's LOWP_DOT does,
    is off by more than 4x half an ulp; a nightly H200 find matched a float64 emulation of those
    roundings to 4 digits, at 0.52x its sensitivity; tests/test_lowp_dot_error.py). On the
    emulation test's case it is 0.3-0.9x the first term for every input distribution, so there
    the bound is what it was. The rounding error exceeds half an ulp only where the output
    underflows (or overflows) ``dtype``. FP32_RTOL is the floor of every dtype's bound: below float32
    the term is at least LOW_PRECISION_FACTOR x half an ulp (about 1e-3 for float16), far above it.
    """
    return max(FP32_RTOL, _term(dtype, round_err, sensitivity))


def _term(dtype: str, round_err: Any, sensitivity: Any) -> Any:
    """``_bound`` without its FP32_RTOL floor, of floats or of float64 tensors alike (``_worst_block``'s per
    block): the one statement of the formula. float32 does not read ``round_err`` (None there)."""
    if dtype == "float32":
        return LOW_PRECISION_FACTOR * sensitivity
    return _maximum(LOW_PRECISION_FACTOR * _maximum(round_err, UNIT_ROUNDOFF[dtype] / 2), sensitivity)


def _maximum(a: Any, b: Any) -> Any:
    """The larger of two floats, or elementwise of a tensor and a tensor or a float."""
    if isinstance(a, torch.Tensor):
        return torch.maximum(a, b) if isinstance(b, torch.Tensor) else a.clamp(min=b)
    return max(a, b)


NUDGED = ("k", "v", "beta", "A", "dw", "du")  # what the kernels multiply (g only enters through exp2)


Precisions = dict[str, tuple[str, ...]]  # per output: the dtypes whose bound applies


def precisions(dtype: str, out_dtypes: dict[str, str]) -> Precisions:
    """Per output: the dtypes whose bound it is held to, those below float32, or float32 alone where
    there are none. One is the op's I/O dtype ``dtype`` (k's: the dot operands and every rounding
    inside), one the output's own (its last rounding: dbeta, dg take beta's and g's dtypes, which may
    differ). The bound is the larger: an output rounded to its own dtype is off by that rounding
    whatever the op computed in, and one computed from ``dtype``'s operands by their roundings
    whatever it is stored in (a float32 dg of the cuda backend's bf16-operand dots)."""
    return {name: tuple(d for d in dict.fromkeys((dtype, own)) if d != "float32") or ("float32",)
            for name, own in out_dtypes.items()}


def _moved(inputs: Inputs, precs: Precisions) -> dict[str, dict[str, torch.Tensor | None]]:
    """``nudged_outputs`` in each dtype some bound uses."""
    return {d: nudged_outputs(inputs, d) for d in sorted({d for ds in precs.values() for d in ds})}


def _bound_rows(ref: dict[str, torch.Tensor], moved: dict[str, dict[str, torch.Tensor | None]],
                precs: Precisions) -> list[torch.Tensor]:
    """``_norms`` rows of the bounds of the exact outputs ``ref``: per output and dtype of its
    ``precs``, its rounding to that dtype, then its ``moved`` (nudged) value in it. Both relative
    to the exact output, like the error they bound."""
    return [row for name, r in ref.items() for d in precs[name]
            for row in (_norms(r.to(getattr(torch, d)), r), _norms(moved[d][name], r))]  # type: ignore[arg-type]


def _bounds(precs: Precisions, ratios: list[float]) -> list[dict[str, float]]:
    """Per output of ``precs``: ``tol``, the ``round_err`` and the ``sensitivity`` of the dtype whose
    bound is largest (its name as ``bound_dtype`` where there are two), from the ratios of
    ``_bound_rows``."""
    out: list[dict[str, Any]] = []
    at = 0
    for dtypes in precs.values():
        terms = []
        for d in dtypes:
            round_err, sensitivity = ratios[at], ratios[at + 1]
            at += 2
            terms.append({"tol": _bound(d, round_err, sensitivity), "round_err": round_err, "sensitivity": sensitivity,
                          **({"bound_dtype": d} if len(dtypes) > 1 else {})})
        out.append(max(terms, key=lambda t: t["tol"]))
    return out


def error_bounds(inputs: Inputs, ref: dict[str, torch.Tensor], dtype: str,
                 out_dtypes: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    """Per output of ``ref`` (the exact outputs of ``inputs``): the bound ``compare_to_oracle``
    puts on its rel_rms (``tol``) and its terms (``_bounds``), for an op in ``dtype`` whose
    outputs have ``out_dtypes`` (default: ``dtype``)."""
    precs = precisions(dtype, {name: (out_dtypes or {}).get(name, dtype) for name in ref})
    ratios = [_ratio(*row) for row in _read(_bound_rows(ref, _moved(inputs, precs), precs))]
    return dict(zip(ref, _bounds(precs, ratios), strict=True))


def nudged_outputs(inputs: Inputs, dtype: str) -> dict[str, torch.Tensor | None]:
    """The exact outputs of the inputs with each element of ``NUDGED`` moved by half an ulp of
    ``dtype`` (``x * (1 +- u/2)``, random signs from ``rng``, seed 0: the same on every device).
    Float64 on ``float64_device``; the factor too (in float32, 1 + 2**-25 is 1: float32's nudge vanished)."""
    half_ulp = UNIT_ROUNDOFF[dtype] / 2

    def nudged_oracle(device: torch.device) -> dict[str, torch.Tensor | None]:
        xs = [getattr(inputs, name) for name in NUDGED]
        signs = rng.uniform(0, [(i, tuple(x.shape)) for i, x in enumerate(xs)], device)  # stream i: NUDGED[i]
        return _oracle_on(inputs._replace(**{
            name: x.to(device, torch.float64) * (1 + half_ulp * torch.where(u < 0.5, 1.0, -1.0).to(torch.float64))
            for name, x, u in zip(NUDGED, xs, signs)}), device)

    return nudged_oracle(float64_device(inputs.k.device))
