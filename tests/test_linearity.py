"""The linearity property (properties.check_linearity): with v and dw doubled, u, dk, dbeta, dg double and w, dv
stay, bit for bit but where a float32 intermediate or a float16 output leaves the normal range; and a leak far
below the oracle's bound fails it."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.testing.case import DISTRIBUTIONS, Case
from wy_ascend.testing.properties import LINEAR_SCALES, PropertyFailure, check_linearity, check_oracle, linearity

pytestmark = pytest.mark.cpu_backend

GROUPED_VARLEN = Case(cu_seqlens=(0, 9, 40, 70), H=2, HV=4, K=24, V=20, BT=16, use_g=True, backend="cpu")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_every_output_scales_exactly(dist: str, dtype: str) -> None:
    metrics = check_linearity(GROUPED_VARLEN.replace(dist=dist, dtype=dtype))
    assert {name: row["scale"] for name, row in metrics.items()} == {n: 2**s for n, s in LINEAR_SCALES.items()}
    if dist != "long_gates" and dtype != "float16":  # nothing below a normal range: every element exact
        assert all(row["inexact_elements"] == 0 for row in metrics.values()), metrics


def test_a_leak_far_below_the_oracles_bound_fails_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """w taking 2^-22 of u (a v-dependent term in a v-free output): within the oracle's bound, not linear."""
    run_ops = linearity.run_ops

    def leaky(case: Case, inputs, **knobs):
        out = run_ops(case, inputs, **knobs)
        w, u = out["w"], out["u"]
        assert w is not None and u is not None
        n = min(w.shape[-1], u.shape[-1])
        out["w"] = w.clone()
        out["w"][..., :n] += u[..., :n] * 2.0**-22
        return out

    monkeypatch.setattr(linearity, "run_ops", leaky)
    case = GROUPED_VARLEN.replace(dtype="float32")
    check_oracle(case)
    with pytest.raises(PropertyFailure, match=r"with v and dw doubled: w: \d+ elements are not 1x"):
        check_linearity(case)


def test_units_apart_counts_units_of_the_dtype() -> None:
    x = torch.tensor([1.0, 1.0, 3.0, float("nan"), float("inf")], dtype=torch.bfloat16)
    y = x.clone()
    y.view(torch.int16)[1] += 1  # one bf16 unit above 1.0
    y[2] = 2.0
    apart = linearity._units_apart(x, y)
    assert apart[0] == 0 and apart[3] == 0 and apart[4] == 0
    assert apart[1] == pytest.approx(1.0, rel=1e-6)  # 2^-7 at 1: one unit
    assert apart[2] == pytest.approx(64.0, rel=1e-6)  # 1 apart at magnitude 3: 1 / 2^-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_near_zero_a_unit_holds_the_64_float32_subnormal_spacings_of_slack(dtype: torch.dtype) -> None:
    """Below the smallest normal a unit is the dtype's subnormal spacing plus 64 of float32's (2**-149 each, the
    slack for float32 intermediates that leave the normal range): a difference of exactly that is one unit, and
    one float32 spacing more is past it. (float16's spacing, 2**-24, leaves the slack below float64's precision.)"""
    info = torch.finfo(dtype)
    unit = info.tiny * info.eps + 64 * 2.0**-149
    zero = torch.zeros(2, dtype=torch.float64)
    apart = linearity._units_apart(zero.to(dtype), torch.tensor([unit, unit + 2.0**-149], dtype=torch.float64))
    assert apart.tolist() == [1.0, pytest.approx(1.0 + 2.0**-149 / unit)] and apart[1] > 1.0


@settings(max_examples=12, derandomize=True, database=None, deadline=None)
@given(st.sets(st.integers(0, 70 * 4 * 20 - 1), min_size=1, max_size=6), st.sampled_from([1, 3]))
def test_the_inexact_elements_counted_are_those_off_their_scaled_value(where: set[int], units: int) -> None:
    """The doubled run's u moved by ``units`` float32 units at drawn elements: those and only those are counted
    as inexact, the most units apart is ``units``, and the property fails (naming the count) past one unit."""
    run_ops = linearity.run_ops
    case = GROUPED_VARLEN.replace(dtype="float32")

    def moved(c: Case, inputs, **knobs):
        out = run_ops(c, inputs, **knobs)
        if inputs.v is not base_v:  # the doubled run
            flat = out["u"].view(-1)
            index = torch.tensor(sorted(where))
            flat[index] = flat[index] + units * torch.finfo(torch.float32).eps * torch.exp2(
                torch.floor(torch.log2(flat[index].abs())))
        return out

    inputs = linearity.build_inputs(case)
    base_v = inputs.v
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(linearity, "build_inputs", lambda c: inputs)
        mp.setattr(linearity, "run_ops", moved)
        if units == 1:
            metrics = check_linearity(case)
            assert metrics["u"]["inexact_elements"] == len(where)
            assert metrics["u"]["max_units_apart"] == pytest.approx(1)
        else:
            with pytest.raises(PropertyFailure, match=f"u: {len(where)} elements are not 2x") as failure:
                check_linearity(case)
            assert failure.value.metrics["u"]["inexact_elements"] == len(where)
