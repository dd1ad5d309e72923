"""The containment property's choice of the poisoned block and its refusal of a case without one
(the property itself runs in the fuzz suite; the catalog's mask and offset mutants are what it catches)."""

from __future__ import annotations

import pytest

from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, check_containment, poisoned_block

pytestmark = pytest.mark.cpu_backend


def test_a_case_without_chunks_is_refused_by_name() -> None:
    with pytest.raises(PropertyFailure, match="containment needs a case with at least one chunk"):
        check_containment(Case(cu_seqlens=(0, 0), backend="cpu"))


@pytest.mark.parametrize(("seed", "block"), [(0, (0, 0, 16, 0)), (1, (0, 16, 20, 0)), (2, (1, 0, 16, 0)),
                                             (4, (0, 0, 16, 1)), (7, (1, 16, 20, 1))])
def test_the_block_is_the_seeds_chunk_and_key_head(seed: int, block: tuple[int, int, int, int]) -> None:
    """B2 T20 BT16: chunks (batch 0: 0-16, 16-20; batch 1: 0-16, 16-20), tokens per batch row; H2."""
    assert poisoned_block(Case(B=2, T=20, BT=16, H=2, HV=2, seed=seed)) == block


def test_the_property_passes_on_a_grouped_varlen_case() -> None:
    metrics = check_containment(Case(cu_seqlens=(0, 5, 37), H=2, HV=4, BT=16, use_g=True, seed=3, backend="cpu"))
    assert metrics["block"] == {"batch": 0, "tokens": [0, 5], "key_head": 1}  # chunk 3 mod 3, head 3 // 3 mod 2
