"""Every corruption of the bad_input property is refused with its error on cases with and without a
gate, fixed and varlen, grouped or not, at any position ``corrupt_at``: the fuzz run draws some of these
triples, this holds every corruption over drawn positions (a corruption that could not be built for a
case without g went unnoticed in a generated-mutant sample; one that passed a single violating value let
a rule go unchecked over the rest of its invalid region)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import CORRUPTIONS, check_bad_input

pytestmark = pytest.mark.cpu_backend

CASES = {
    "fixed_no_gate": Case(B=1, T=20, H=1, HV=2, K=16, V=24, BT=16, use_g=False, backend="cpu"),
    "varlen_gate": Case(cu_seqlens=(0, 3, 3, 20), H=2, HV=2, K=24, V=16, BT=16, use_g=True, backend="cpu"),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
@pytest.mark.parametrize("case", CASES, ids=str)
@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(at=st.integers(0, 2**16))
def test_every_corruption_is_refused_by_name(case: str, corruption: str, at: int) -> None:
    metrics = check_bad_input(CASES[case].replace(corruption=corruption, corrupt_at=at))
    assert metrics  # at least one op ran and raised the expected error


def _seen(kwargs: dict[str, Any]) -> tuple:
    """What a corruption passed, comparable: each tensor's shape, dtype, device and values, else its type and repr."""
    return tuple((name, (tuple(x.shape), x.dtype, x.device.type, str(x.tolist()) if x.device.type != "meta" else None)
                  if isinstance(x, torch.Tensor) else (type(x).__name__, repr(x)[:200]))
                 for name, x in sorted(kwargs.items()))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_each_corruption_draws_its_violation(case: str) -> None:
    """No corruption passes one fixed value: its positions give several violations of its rule (the other
    device aside, on a machine whose only other device is meta)."""
    x = CASES[case].build_inputs()
    for name, corrupt in CORRUPTIONS.items():
        if name.endswith("_other_device") and x.k.device.type == "cpu":
            continue
        assert len({_seen(corrupt(x, at)[0]) for at in range(8)}) > 1, name
