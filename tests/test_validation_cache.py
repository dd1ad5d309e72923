"""The varlen index cache never serves a stale layout, and serves a repeated one without reading
cu_seqlens again (the read is a device-to-host sync per call on a device)."""

from __future__ import annotations

import pytest
import torch

from wy_ascend.testing.case import Case
from wy_ascend.validation import validate


def test_in_place_change_of_cu_seqlens_is_revalidated():
    x = Case(cu_seqlens=(0, 5, 40), BT=16).build_inputs()
    cu = x.cu_seqlens.clone()
    p1 = validate(x.k, x.v, x.beta, x.A, cu_seqlens=cu)
    assert p1.NT == 4  # 1 + 3 chunks
    cu[1] = 20  # in place: same object, new version
    p2 = validate(x.k, x.v, x.beta, x.A, cu_seqlens=cu)
    assert p2.chunk_indices.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    cu[1] = 50  # now invalid: must raise although the object was validated before
    with pytest.raises(ValueError, match="non-decreasing"):
        validate(x.k, x.v, x.beta, x.A, cu_seqlens=cu)


def test_equal_but_distinct_tensor_is_checked_on_its_own():
    x = Case(cu_seqlens=(0, 5, 40), BT=16).build_inputs()
    validate(x.k, x.v, x.beta, x.A, cu_seqlens=x.cu_seqlens)
    bad = torch.tensor([0, 50, 40])
    with pytest.raises(ValueError, match="non-decreasing"):
        validate(x.k, x.v, x.beta, x.A, cu_seqlens=bad)


def test_the_same_unchanged_tensor_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from wy_ascend import validation

    x = Case(cu_seqlens=(0, 5, 40), BT=16).build_inputs()
    cu = x.cu_seqlens.clone()
    reads: list[object] = []
    check = validation._check_cu_seqlens
    monkeypatch.setattr(validation, "_check_cu_seqlens", lambda *a: reads.append(a) or check(*a))
    first = validate(x.k, x.v, x.beta, x.A, cu_seqlens=cu)
    again = validate(x.k, x.v, x.beta, x.A, cu_seqlens=cu)
    assert len(reads) == 1 and again.chunk_indices is first.chunk_indices
    validate(x.k, x.v, x.beta, x.A, cu_seqlens=cu.clone())  # an equal but distinct tensor is read
    assert len(reads) == 2
