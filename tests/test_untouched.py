"""The ops leave their arguments alone, and every kernel property checks it (properties.run_ops).

An in-place edit of an argument can leave every output right: the oracle is evaluated on the
edited inputs afterwards, and an edit confined to bytes no output depends on (A's dead columns, a
memory layout's padding) changes nothing it compares. Only a comparison of the arguments' storage
before and after the call sees it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from wy_ascend import ops
from wy_ascend.testing.case import MEMORY_ARGS, Case
from wy_ascend.testing.properties import PropertyFailure, check_oracle, common, run_property

# A partial chunk (A's dead columns hold NaN), grouped heads, a gate, two sequences.
CASE = Case(cu_seqlens=(0, 7, 20), H=1, HV=2, K=16, V=24, BT=16, use_g=True)


@pytest.fixture
def case(backend: str) -> Case:
    """CASE on the backend under test: every backend's launch goes through ``ops._aligned``."""
    return CASE.replace(backend=backend)


def _zero_nans_in_place(x: torch.Tensor | None) -> torch.Tensor | None:
    """The catalog's A_dead_columns_zeroed_in_place, planted: the launch sanitizes its float
    arguments in place (a no-op on every input but A, whose dead columns hold NaN)."""
    return x.nan_to_num_(0.0) if x is not None and x.is_floating_point() else x


def test_a_clean_call_passes(case: Case) -> None:
    assert set(check_oracle(case)) == {"w", "u", "dk", "dv", "dbeta", "dg"}


def test_in_place_edit_of_a_fails_naming_op_and_argument(monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    monkeypatch.setattr(ops, "_aligned", _zero_nans_in_place)
    with pytest.raises(PropertyFailure, match=r"recompute_w_u_fwd wrote to its arguments: A \(\d+ of \d+ bytes"):
        check_oracle(case)


def test_the_oracle_alone_misses_it(monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    """Why the check exists: without it the planted edit passes the oracle property."""
    monkeypatch.setattr(ops, "_aligned", _zero_nans_in_place)
    monkeypatch.setattr(common, "_untouched", lambda op, before: None)
    check_oracle(case)


def test_a_copied_argument_is_not_the_callers(monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    """A strided A reaches the launch as a copy (``.contiguous()``): editing the copy is no
    edit of the caller's tensor, and the check says nothing."""
    monkeypatch.setattr(ops, "_aligned", _zero_nans_in_place)
    check_oracle(case.replace(memory={"A": "strided:1"}))


@pytest.mark.parametrize(("op", "name"), [
    (op, name) for op in ("recompute_w_u_fwd", "prepare_wy_repr_bwd") for name in sorted(MEMORY_ARGS)
    if op == "prepare_wy_repr_bwd" or name not in ("dw", "du")])
def test_a_write_into_padding_fails(monkeypatch: pytest.MonkeyPatch, case: Case, op: str, name: str) -> None:
    """One byte written into the padding before an argument's view (the "offset" memory layout),
    which no output reads, by either op (the forward takes no dw, du): named with the op and the
    argument."""
    real = getattr(ops, op)  # the wy_ascend subject calls the ops by their module attribute

    def writes_padding(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        common._bytes(kwargs[name])[0] ^= 1  # the element before the view: padding
        return out

    monkeypatch.setattr(ops, op, writes_padding)
    with pytest.raises(PropertyFailure, match=rf"{op} wrote to its arguments: {name} \(1 of "):
        run_property("oracle", case.replace(memory={name: "offset"}, chunk_indices=name == "chunk_indices"))


# ----------------------------------------------------------------------------- outputs in memory of their own


def _returns(monkeypatch: pytest.MonkeyPatch, op: str, change: Any) -> None:
    """``op`` planted to return ``change(its outputs, its arguments)`` instead of its outputs."""
    real = getattr(ops, op)

    def planted(*args: Any, **kwargs: Any) -> Any:
        return change(real(*args, **kwargs), kwargs)

    monkeypatch.setattr(ops, op, planted)


def test_an_output_that_is_an_argument_fails_naming_both(monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    """u returned as v itself (K = V would give them one shape): the caller's v changes with its u."""
    _returns(monkeypatch, "recompute_w_u_fwd", lambda out, kw: (out[0], kw["v"]))
    with pytest.raises(PropertyFailure, match=r"outputs share memory: u with argument v$"):
        check_oracle(case.replace(V=16))


def test_outputs_that_overlap_fail_and_outputs_cut_from_one_buffer_pass(
        monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    """dg in dbeta's memory fails; dbeta and dg copied into two halves of one allocation pass (their right
    values, disjoint bytes); a view of dk's memory offset by one element overlaps it."""
    def halves(out: tuple, kw: dict) -> tuple:
        dk, dv, dbeta, dg = out
        both = torch.stack([dbeta, dg])
        return dk, dv, both[0], both[1]

    _returns(monkeypatch, "prepare_wy_repr_bwd", lambda out, kw: (*out[:3], out[2]))
    with pytest.raises(PropertyFailure, match=r"outputs share memory: dbeta with dg"):
        check_oracle(case)
    monkeypatch.undo()
    _returns(monkeypatch, "prepare_wy_repr_bwd", halves)
    check_oracle(case)
    rows = common._reach(torch.zeros(4, 3)[1:3])
    assert rows is not None and rows[1:] == (12, 36)
    assert common._overlap(rows, common._reach(torch.zeros(4, 3)[2:])) is False  # another tensor's storage
    base = torch.zeros(12)
    assert common._overlap(common._reach(base[:6]), common._reach(base[5:7]))
    assert not common._overlap(common._reach(base[:6]), common._reach(base[6:]))
    assert not common._overlap(common._reach(base[:0]), common._reach(base))  # an empty tensor reaches nothing
