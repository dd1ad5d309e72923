"""Every corruption of the bad_input property is refused with its error on cases with and without a
gate, fixed and varlen, grouped or not, at any position ``corrupt_at``: the fuzz run draws some of these
triples, this holds every corruption over drawn positions (a corruption that could not be built for a
case without g went unnoticed in a generated-mutant sample; one that passed a single violating value let
a rule go unchecked over the rest of its invalid region)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import CORRUPTIONS, PropertyFailure, check_bad_input
from wy_ascend.testing.properties.bad_input import BACKWARD_ONLY
from wy_ascend.validation import SUPPORTED_BT

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


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.integers(0, 300))
def test_another_size_ranges_over_the_sizes_its_doc_names(size: int) -> None:
    """_other_size draws every size from 0 to size + 8 but ``size`` itself, size + 1 first, nothing past size + 8
    (the shape corruptions' region, documented beside them)."""
    from wy_ascend.testing.properties.bad_input import _other_size

    drawn = [_other_size(size, at) for at in range(4 * (size + 9))]
    assert drawn[0] == size + 1 and set(drawn) == set(range(size + 9)) - {size}


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(st.lists(st.integers(0, 70), max_size=5), st.sampled_from([16, 32, 64]))
def test_wrong_chunk_indices_change_one_entry_or_one_row(lengths: list[int], BT: int) -> None:
    """_wrong_chunk_indices: the valid indices with one entry moved by a nonzero amount, or exactly one row more
    (a copy of the last) or fewer, for every ``at`` of its first rounds (each entry, the row, both signs); where
    the sequences are all empty (no chunk, no row), the one row (0, 0) for every ``at``."""
    import itertools

    from wy_ascend.layout import prepare_chunk_indices
    from wy_ascend.testing.properties.bad_input import _wrong_chunk_indices

    cu = torch.tensor([0, *itertools.accumulate(lengths)])
    case = Case(cu_seqlens=tuple(int(x) for x in cu), BT=BT, H=1, HV=1, K=16, V=16)
    inputs = case.build_inputs(torch.device("cpu"))
    valid = prepare_chunk_indices(cu, BT)
    kinds = set()
    for at in range(4 * (valid.numel() + 1)):
        wrong = _wrong_chunk_indices(inputs, at)
        if valid.numel() == 0:
            assert wrong.tolist() == [[0, 0]]
        elif wrong.shape == valid.shape:
            assert (wrong != valid).sum() == 1
            i = int((wrong != valid).view(-1).nonzero()[0])
            kinds.add((i, "up" if wrong.view(-1)[i] > valid.view(-1)[i] else "down"))
        elif wrong.shape[0] == valid.shape[0] + 1:
            assert wrong[:-1].equal(valid) and wrong[-1].equal(valid[-1])
            kinds.add("row added")
        else:
            assert wrong.shape[0] == valid.shape[0] - 1 and wrong.equal(valid[:-1])
            kinds.add("row dropped")
    if valid.numel():  # every alternative of the region is drawn: each entry either way, a row more and fewer
        assert kinds == {(i, way) for i in range(valid.numel()) for way in ("up", "down")} | {"row added",
                                                                                             "row dropped"}


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=4).map(tuple))
def test_another_shape_ranges_over_the_shapes_its_doc_names(shape: tuple[int, ...]) -> None:
    """_other_shape never gives ``shape``: with its dims kept, every nonempty set of them changed; else also
    every other number of dims from 0 to ndim + 2, fewer a prefix of ``shape``, more ``shape`` then extra dims
    of one size, each of 1, 2 and 3 (the region documented beside it)."""
    import itertools

    from wy_ascend.testing.properties.bad_input import _other_shape

    n = len(shape)
    kept = [_other_shape(shape, at) for at in range(8 * 2**n)]
    subsets = {frozenset(c) for r in range(1, n + 1) for c in itertools.combinations(range(n), r)}
    assert all(len(s) == n for s in kept)
    assert {frozenset(i for i in range(n) if s[i] != shape[i]) for s in kept} == subsets
    other = [_other_shape(shape, at, same_ndim=False) for at in range(3 * (n + 3))]
    assert shape not in other and {len(s) for s in other} == set(range(n + 3))
    assert all(s == shape[:len(s)] for s in other if len(s) < n)
    assert {(s[:n], s[n:]) for s in other if len(s) > n} == {(shape, (size,) * (d - n))
                                                              for d in (n + 1, n + 2) for size in (1, 2, 3)}


@pytest.mark.parametrize("BT", SUPPORTED_BT)
def test_an_unsupported_chunk_size_ranges_over_the_sizes_its_doc_names(BT: int) -> None:
    """_unsupported_bt draws BT + 8 first, then every size from 0 to 256 outside SUPPORTED_BT (256 included),
    the multiples of 16 before the rest, each once (the region documented beside it and validation's rule)."""
    from wy_ascend.testing.properties.bad_input import _unsupported_bt

    region = set(range(257)) - set(SUPPORTED_BT)
    drawn = [int(_unsupported_bt(torch.zeros(1, 2, 1, BT), at).shape[-1]) for at in range(len(region))]
    assert drawn[0] == BT + 8 and sorted(drawn) == sorted(region)
    assert drawn[1:] == sorted(drawn[1:], key=lambda b: (b % 16 != 0, b))


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(corruption=st.one_of(st.none(), st.text(max_size=20), st.sampled_from([f"{c} " for c in CORRUPTIONS])))
def test_a_case_without_a_known_corruption_fails_the_bad_input_property(corruption: str | None) -> None:
    """bad_input runs only on a case that names one of CORRUPTIONS: any other (none, a typo) fails naming it,
    before inputs are built or any op runs."""
    assume(corruption not in CORRUPTIONS)
    with pytest.raises(PropertyFailure, match=re.escape(f"got {corruption!r}") + "$"):
        check_bad_input(CASES["fixed_no_gate"].replace(corruption=corruption))


@pytest.fixture
def forward_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """wy_ascend declared without its backward: a forward-only subject."""
    from wy_ascend import subjects

    monkeypatch.setitem(subjects.SUBJECTS, "wy_ascend", dataclasses.replace(subjects.get("wy_ascend"), backward=None))


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_forward_only_subject_is_held_to_the_forwards_corruptions_alone(forward_only: None, corruption: str) -> None:
    """A forward-only subject's bad_input runs its forward alone: refused there by name; a corruption of an
    argument only the backward takes (dw, du) is no case for it, a ValueError naming both, not a verdict."""
    case = CASES["varlen_gate"].replace(corruption=corruption, corrupt_at=corruption.__len__())
    if corruption not in BACKWARD_ONLY:
        assert set(check_bad_input(case)) == {"recompute_w_u_fwd"}
        return
    with pytest.raises(ValueError, match=f"^bad_input: corruption {corruption!r} is of an argument subject "
                                         "'wy_ascend' does not take$"):
        check_bad_input(case)


@settings(max_examples=150, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=4), at=st.integers(0, 10**6))
def test_another_ndim_is_drawn_from_any_tensor_without_error(shape: list[int], at: int) -> None:
    """The wrong-rank corruption over drawn shapes (one-element tensors among them: a B=T=H=1 beta) and
    choices: another rank than the tensor's, from 0 to ndim + 2, holding the tensor's own values in order
    (a 0-dim one its first element), so a refusal is for the rank alone."""
    from wy_ascend.testing.properties.bad_input import _other_ndim

    t = torch.arange(1, 1 + torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    out = _other_ndim(t, at)
    assert out.ndim != t.ndim and 0 <= out.ndim <= t.ndim + 2
    n = min(out.numel(), t.numel())
    assert torch.equal(out.reshape(-1)[:n], t.reshape(-1)[:n])
