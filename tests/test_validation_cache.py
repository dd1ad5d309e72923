"""The varlen index cache never serves a stale layout, and serves a repeated one without reading
cu_seqlens again (the read is a device-to-host sync per call on a device)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.testing.case import Case
from wy_ascend.validation import SUPPORTED_BT, validate


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


FIELDS = {"which": st.integers(0, 2), "write": st.one_of(st.none(), st.integers(0, 3)), "value": st.integers(-2, 70),
          "B": st.sampled_from((1, 1, 1, 2)), "dT": st.sampled_from((0, 0, 0, 1, -1)), "BT": st.sampled_from(SUPPORTED_BT)}


@st.composite
def call_sequences(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Calls of validate sharing a few cu_seqlens objects: which object, an in-place write before the call (an
    entry or None) and its value, B, T less the object's last entry, BT. Each call after the first is the one
    before it with one field drawn again, so a cache key that leaves out a field meets a call differing in it
    alone; B and T are mostly valid (a hit), sometimes not (a refusal due)."""
    calls = [{name: draw(field) for name, field in FIELDS.items()}]
    for _ in range(draw(st.integers(0, 10))):
        name = draw(st.sampled_from(sorted(FIELDS)))
        calls.append({**calls[-1], "write": None, name: draw(FIELDS[name])})
    return calls


def _outcome(cu: torch.Tensor, B: int, T: int, BT: int) -> tuple:
    k, v = torch.zeros(B, T, 1, 16), torch.zeros(B, T, 1, 16)
    try:
        p = validate(k, v, torch.zeros(B, T, 1), torch.zeros(B, T, 1, BT), cu_seqlens=cu)
    except (TypeError, ValueError) as e:
        return type(e).__name__, str(e)
    return p.NT, p.chunk_indices.tolist()


@settings(max_examples=200, deadline=None)
@given(calls=call_sequences())
def test_a_cached_call_gives_what_a_fresh_tensor_gives(calls) -> None:
    """Whatever the sequence of calls, in-place writes, batch sizes, lengths and chunk sizes, a call with a
    cu_seqlens the cache has seen gives what the same values in a tensor it has not seen give (every key
    field of the cache is one a call can change without changing the object)."""
    pool = [torch.tensor(c) for c in ((0, 5, 40), (0, 17, 17, 64), (0, 1))]
    for call in calls:
        cu = pool[call["which"]]
        if call["write"] is not None:
            cu[min(call["write"], len(cu) - 1)] = call["value"]  # in place: the object's version changes
        T = max(int(cu[-1]) + call["dT"], 0)
        assert _outcome(cu, call["B"], T, call["BT"]) == _outcome(cu.clone(), call["B"], T, call["BT"]), call
