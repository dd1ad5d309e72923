"""The oracle property's bound on each output (properties.error_bounds, used by
compare_to_oracle): its terms are measured relative to the exact output, like the error they
bound, on outputs chosen so that each term decides the bound."""

from __future__ import annotations

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
    monkeypatch.setattr(properties, "oracle_outputs", lambda inputs: dict(EXACT))
    monkeypatch.setattr(properties, "nudged_outputs", lambda inputs, dtype: dict(MOVED))


def test_each_term_decides_the_bound_where_it_is_largest(chosen) -> None:
    bounds = properties.error_bounds(None, EXACT, "float16")  # type: ignore[arg-type]
    assert bounds["w"] == {"tol": LOW_PRECISION_FACTOR * 1.0, "round_err": 1.0, "sensitivity": 0.0}
    assert bounds["u"] == {"tol": 2.0, "round_err": 0.0, "sensitivity": 2.0}
    assert properties.error_bounds(None, EXACT, "float32") == {"w": {"tol": FP32_RTOL}, "u": {"tol": FP32_RTOL}}
    # Elsewhere the bound is LOW_PRECISION_FACTOR half-ulps.
    assert properties._bound("bfloat16", 0.0, 0.0) == LOW_PRECISION_FACTOR * UNIT_ROUNDOFF["bfloat16"] / 2


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
