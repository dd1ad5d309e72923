"""Narrow claims: every strategy of the fuzz suite draws, for a subject that claims one chunk size, one dtype,
packed batches only, fixed ones only, no gate, a gate always, or K and V above a strategy's sizes (tiles of
64 to 128), only calls it claims, and never fails to draw (the history strategy once raised ``Cannot sample
from a length-zero sequence`` for one chunk size, and again for dims above its sizes'). Draws only: no kernel
runs, so the subjects here are declarations around a stub."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from fuzz.strategies import (
    CPU_SIZES,
    bad_input_cases,
    cases,
    example_case,
    history_cases,
    index_width_cases,
    large_cases,
    split_cases,
    subject_corruptions,
)
from wy_ascend import subjects
from wy_ascend.subjects import Calling, Claims, Subject
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import claimed


def _stub(*a: Any, **kw: Any) -> Any:
    raise AssertionError("a draw runs no kernel")


NO_GATE = Calling(keywords={"cu_seqlens": "cu_seqlens", "chunk_indices": "chunk_indices"}, gate_units="none")
NARROW = {
    "one-bt": (Calling(), Claims(chunk_sizes=(64,))),
    "one-dtype": (Calling(), Claims(dtypes=("bfloat16",))),
    "varlen-only": (Calling(), Claims(fixed=False)),
    "fixed-only": (Calling(), Claims(varlen=False)),
    "no-gate": (NO_GATE, Claims()),
    "ln-gate-inside": (Calling(gate_units="ln", chunk_indices="inside", keywords={"g": "g", "cu_seqlens": "cu_seqlens"}),
                       Claims(gate_dtypes=False)),
    "inside-varlen-only": (Calling(chunk_indices="inside", keywords={"g": "g", "cu_seqlens": "cu_seqlens"}),
                           Claims(fixed=False)),
    "large-tiles": (Calling(), Claims(dims=(64, 128), pow2_dims=True)),  # above the history sizes' dims
    "large-dims": (Calling(), Claims(dims=(64, 256))),
    "gate-required": (Calling(gate_units="ln"), Claims(gateless=False)),
    "all-narrow": (NO_GATE, Claims(chunk_sizes=(32,), dtypes=("float16",), fixed=False, dims=(16, 64), pow2_dims=True,
                                   head_ratios=(1, 4), strided=False, knobs=())),
}


@pytest.fixture(params=sorted(NARROW))
def narrow(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Subject:
    calling, claims = NARROW[request.param]
    subject = Subject(f"narrow-{request.param}", _stub, _stub, ("cpu",), calling, claims, version="1")
    monkeypatch.setitem(subjects.SUBJECTS, subject.name, subject)
    return subject


def _within(subject: Subject, case: Case) -> None:
    """``case`` and each earlier call of it is one the subject claims (its declaration, all of it)."""
    for call in (*case.before, case):
        assert call.subject == subject.name
        assert claimed(subject.claims, call.replace(corruption=None), subject.forced_g_dtype), call
        assert subject.claims.fixed or call.cu_seqlens is not None, call
        assert subject.gated or not call.use_g, call
        assert subject.claims.gateless or call.use_g, call
        if call.use_g and subject.calling.gate_units == "ln":
            assert call.dtype_of("g") == __import__("torch").float32, call
        if subject.calling.chunk_indices != "optional":
            assert not call.chunk_indices, call


STRATEGIES = {
    "cases": lambda s: cases(CPU_SIZES, "cpu", subject=s),
    "cases_grouped_partitioned": lambda s: cases(CPU_SIZES, "cpu", grouped=True, partition_knobs=True, subject=s),
    "cases_memory": lambda s: cases(CPU_SIZES, "cpu", memory=True, subject=s),
    "cases_varlen": lambda s: cases(CPU_SIZES, "cpu", varlen=True, subject=s),
    "cases_fixed": lambda s: cases(CPU_SIZES, "cpu", varlen=False, subject=s),
    "large_cases": lambda s: large_cases(CPU_SIZES, "cpu", subject=s),
    "history_cases": lambda s: history_cases(s),
    "split_cases": lambda s: split_cases(CPU_SIZES, "cpu", s),
    "index_width_cases": lambda s: index_width_cases("cpu", s),
}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_draws_only_what_a_narrow_subject_claims(narrow: Subject, strategy: str) -> None:
    @settings(max_examples=12, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data: st.DataObject) -> None:
        _within(narrow, data.draw(STRATEGIES[strategy](narrow.name)))
    draw()


def test_a_memory_layout_case_lays_out_some_argument_it_takes(narrow: Subject) -> None:
    """memory_layout's draws (``memory=True``) lay out some argument, or pass chunk indices, for a subject that
    claims strided views: a subject whose chunk indices are computed inside once got cases of neither (the
    one layout drawn was its chunk indices', then dropped), and memory_layout stored each as a failure
    ('needs a case with memory layouts'). ``find`` searches for such a case, shrinking toward it."""
    if not narrow.claims.strided:
        return
    with pytest.raises(NoSuchExample):
        find(cases(CPU_SIZES, "cpu", memory=True, subject=narrow.name), lambda c: not c.memory and not c.chunk_indices,
             settings=settings(max_examples=200, database=None, derandomize=True, deadline=None,
                               suppress_health_check=list(HealthCheck)))


def test_bad_input_draws_only_corruptions_of_arguments_a_subject_takes(narrow: Subject,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A validating narrow subject's bad_input cases: its claims, and no corruption of what it does not take
    (g without a gate, wy_ascend's chunk indices where they are not the caller's, cu_seqlens where it takes fixed
    batches only, the backward's arguments for a forward-only one); the explicit examples too."""
    forward_only = narrow.__class__(**{**narrow.__dict__, "backward": None, "loaded": ""})
    monkeypatch.setitem(subjects.SUBJECTS, narrow.name, forward_only)
    corruptions = subject_corruptions(narrow.name)
    assert corruptions and not any(c.startswith(("dw_", "du_")) for c in corruptions)
    assert narrow.gated or not any(c.startswith("g_") for c in corruptions)
    assert narrow.claims.varlen or not any(c.startswith(("cu_", "chunk_indices_")) for c in corruptions)

    @settings(max_examples=12, database=None, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
    @given(bad_input_cases(CPU_SIZES, "cpu", narrow.name))
    def draw(case: Case) -> None:
        assert case.corruption in corruptions
        _within(narrow, case)
    draw()
    for name in corruptions:
        _within(narrow, example_case(narrow.name, "cpu", T=20, corruption=name))
    _within(narrow, example_case(narrow.name, "cpu", T=40, HV=2, use_g=True, knobs={}))
