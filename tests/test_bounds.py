"""The oracle property's bound on each output (properties.error_bounds, used by
compare_to_oracle): its terms are measured relative to the exact output, like the error they
bound, on outputs chosen so that each term decides the bound."""

from __future__ import annotations

import math

import pytest
import torch

from wy_ascend.testing import properties
from wy_ascend.testing.properties import FP32_RTOL, LOW_PRECISION_FACTOR, UNIT_ROUNDOFF, PropertyFailure

F64 = torch.float64
# w: exact values far below float16's smallest subnormal (6e-8): rounded to float16 they are 0,
# a rounding error of the whole output (rel_rms 1), the one place it exceeds half an ulp.
# u: an output the half-ulp nudge of the inputs triples (an ill-conditioned one): sensitivity
# ||3u - u|| / ||u|| = 2 relative to the exact u (2/3 relative to the moved one).
EXACT = {"w": torch.full((4, 3), 1e-9, dtype=F64), "u": torch.ones(4, 3, dtype=F64)}
MOVED = {"w": EXACT["w"].clone(), "u": 3 * EXACT["u"]}


@pytest.fixture
def chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    # each where it is looked up: oracle_outputs by compare_to_oracle, nudged_outputs by the bounds
    monkeypatch.setattr(properties.oracle, "oracle_outputs", lambda inputs: dict(EXACT))
    monkeypatch.setattr(properties.bounds, "nudged_outputs", lambda inputs, dtype: dict(MOVED))


def test_each_term_decides_the_bound_where_it_is_largest(chosen) -> None:
    bounds = properties.error_bounds(None, EXACT, "float16")  # type: ignore[arg-type]
    assert bounds["w"] == {"tol": LOW_PRECISION_FACTOR * 1.0, "round_err": 1.0, "sensitivity": 0.0}
    assert bounds["u"] == {"tol": 2.0, "round_err": 0.0, "sensitivity": 2.0}
    assert properties.error_bounds(None, EXACT, "float32") == {"w": {"tol": FP32_RTOL}, "u": {"tol": FP32_RTOL}}
    # Elsewhere the bound is LOW_PRECISION_FACTOR half-ulps.
    assert properties.bounds._bound("bfloat16", 0.0, 0.0) == LOW_PRECISION_FACTOR * UNIT_ROUNDOFF["bfloat16"] / 2


def test_the_comparison_uses_those_bounds(chosen) -> None:
    f16 = torch.float16
    within = {"w": torch.zeros(4, 3, dtype=f16), "u": torch.full((4, 3), 2.5, dtype=f16)}  # rel_rms 1 and 1.5
    metrics = properties.compare_to_oracle(within, None, "float16")  # type: ignore[arg-type]
    assert metrics["w"] == {"rel_rms": 1.0, "tol": 4.0, "sensitivity": 0.0}
    assert metrics["u"] == {"rel_rms": pytest.approx(1.5, rel=1e-15), "tol": 2.0, "sensitivity": 2.0}
    past = {"w": torch.zeros(4, 3, dtype=f16), "u": torch.full((4, 3), 3.5, dtype=f16)}  # u: rel_rms 2.5 > 2
    with pytest.raises(PropertyFailure, match=r"u: rel_rms 2\.500e\+00 > tol 2\.000e\+00") as info:
        properties.compare_to_oracle(past, None, "float16")  # type: ignore[arg-type]
    assert "w:" not in str(info.value)


def test_an_error_in_one_block_fails_where_the_whole_output_dilutes_it() -> None:
    """5% off in one chunk and head of 160 is 0.4% of u's norm, inside the whole-output bound
    (2u = 0.78% at least); against its own block (bound 2x 4 half-ulps) it fails, and the failure
    names the block."""
    from wy_ascend.testing.case import Case

    case = Case(B=2, T=64 * 20, H=2, HV=4, K=16, V=16, BT=64, use_g=True, dtype="bfloat16", seed=3)
    inputs = case.build_inputs()
    exact = {n: r for n, r in properties.oracle_outputs(inputs).items() if r is not None}
    got = {n: r.to(torch.bfloat16) for n, r in exact.items()}  # a kernel off by its output rounding only
    blocks = properties.blocks_of(case, torch.device("cpu"))
    properties.compare_to_oracle(got, inputs, "bfloat16", blocks)
    got["u"][1, 640:704, 2] = (exact["u"][1, 640:704, 2] * 1.05).to(torch.bfloat16)  # chunk 30: batch 1, chunk 10
    assert properties.compare_to_oracle(got, inputs, "bfloat16")["u"]["rel_rms"] < 0.005
    with pytest.raises(PropertyFailure, match=r"u: rel_rms [45]\.\d+e-02 > tol .* on the block of chunk 30 \(rows "
                       r"1920:1984 of the \[B\*T\] token axis, batch 1\) and value head 2") as info:
        properties.compare_to_oracle(got, inputs, "bfloat16", blocks)
    assert info.value.metrics["u"]["worst_block"]["tokens"] == [1920, 1984]
    assert "w:" not in str(info.value)


def test_an_output_of_another_dtype_takes_the_larger_bound(chosen) -> None:
    """dbeta and dg come back in beta's and g's dtypes, which may differ from k's: each output is
    held to the bound of the op's dtype (its dot operands and inner roundings) and of its own (its
    last rounding), the larger; float32 alone keeps FP32_RTOL."""
    assert properties.precisions("bfloat16", {"w": "bfloat16", "dg": "float32"}) == {"w": ("bfloat16",),
                                                                                    "dg": ("bfloat16",)}
    assert properties.precisions("float32", {"w": "float32", "dbeta": "bfloat16"}) == {"w": (), "dbeta": ("bfloat16",)}
    assert properties.precisions("float16", {"dg": "bfloat16"}) == {"dg": ("float16", "bfloat16")}
    bounds = properties.error_bounds(None, EXACT, "float32", {"u": "float16"})  # type: ignore[arg-type]
    assert bounds == {"w": {"tol": FP32_RTOL}, "u": {"tol": 2.0, "round_err": 0.0, "sensitivity": 2.0}}
    # a float32 op's float16 u within float16's bound passes; its float32 w is held to FP32_RTOL
    got = {"w": EXACT["w"].float(), "u": torch.full((4, 3), 2.5, dtype=torch.float16)}
    metrics = properties.compare_to_oracle(got, None, "float32")  # type: ignore[arg-type]
    assert metrics["u"]["tol"] == 2.0 and metrics["w"]["tol"] == FP32_RTOL
    got["w"] = (EXACT["w"] * (1 + 1e-4)).float()
    with pytest.raises(PropertyFailure, match=r"w: rel_rms 1\.0\d*e-04 > tol 1\.000e-05"):
        properties.compare_to_oracle(got, None, "float32")  # type: ignore[arg-type]
    # two dtypes below float32: the larger bound, and which one set it
    both = properties.compare_to_oracle({"w": EXACT["w"].to(torch.bfloat16), "u": got["u"].to(torch.bfloat16)},
                                        None, "float16")  # type: ignore[arg-type]
    assert both["u"]["bound_dtype"] in ("float16", "bfloat16") and both["u"]["tol"] == 2.0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_the_error_norms_are_float64_whatever_the_outputs_dtype(dtype: torch.dtype) -> None:
    """Every comparison's norms (``bounds._norms``) are float64 sums of the float64 difference: in the
    outputs' own dtype the norm of three differences of 2**-7 rounds at the dtype's unit (bf16: 2**-8
    relative), far past float64's 1e-15 asked here, and a bound judged on it moves with that rounding."""
    from wy_ascend.testing.properties.bounds import _norms

    ref = torch.ones(3, dtype=dtype)
    out = torch.full((3,), 1 + 2.0**-7, dtype=dtype)  # exact in all three dtypes
    norms = _norms(out, ref)
    assert norms.dtype == torch.float64
    finite, diff, scale = norms.tolist()
    assert finite == 1.0 and scale == math.sqrt(3)
    assert abs(diff - math.sqrt(3) * 2.0**-7) <= 1e-15 * diff
