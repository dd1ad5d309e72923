"""Every corruption of the bad_input property is refused with its error on cases with and without a
gate, fixed and varlen, grouped or not: the fuzz run draws some of these pairs, this holds all of them
(a corruption that could not be built for a case without g went unnoticed in a generated-mutant sample)."""

from __future__ import annotations

import pytest

from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import CORRUPTIONS, check_bad_input

pytestmark = pytest.mark.cpu_backend

CASES = {
    "fixed_no_gate": Case(B=1, T=20, H=1, HV=2, K=16, V=24, BT=16, use_g=False, backend="cpu"),
    "varlen_gate": Case(cu_seqlens=(0, 3, 3, 20), H=2, HV=2, K=24, V=16, BT=16, use_g=True, backend="cpu"),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_corruption_is_refused_by_name(case: str) -> None:
    for name in CORRUPTIONS:
        metrics = check_bad_input(CASES[case].replace(corruption=name))
        assert metrics, name  # at least one op ran and raised the expected error
