"""A chunk of a large case is a case of its own size with the same inputs (``Case.offset``, ``Case.block``).

The fuzz suite shrinks a failure confined to one block of a large case to that block (fuzz/test_fuzz.py):
the H200 nightly's million-token oracle find did not shrink below a million tokens, for a shorter T cuts
the streams' inputs at their end, never at the failing chunk's start.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.testing import rng
from wy_ascend.testing.case import DISTRIBUTIONS, Case


def _same(x: torch.Tensor, y: torch.Tensor) -> bool:
    return torch.equal(torch.nan_to_num(x.double(), 7.0), torch.nan_to_num(y.double(), 7.0))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(dist=st.sampled_from(DISTRIBUTIONS), use_g=st.booleans(), B=st.integers(1, 3), T=st.integers(1, 70),
       HV=st.sampled_from((1, 2, 3)), K=st.integers(1, 20), BT=st.sampled_from((16, 32)), varlen=st.booleans(),
       seed=st.integers(0, 9), pick=st.integers(0, 10**6))
def test_a_block_alone_has_the_inputs_it_has_in_its_case(dist, use_g, B, T, HV, K, BT, varlen, seed, pick) -> None:
    """Every input tensor of the block case equals the block's rows of the case's, bit for bit (NaN where
    they are NaN: A's columns past a partial chunk), fixed and packed layouts, every distribution."""
    cu = tuple(sorted({0, B * T, *(t for t in range(3, B * T, 7))})) if varlen else None
    case = Case(B=B, T=T, HV=HV, K=K, V=K + 1, BT=BT, use_g=use_g, dist=dist, seed=seed, cu_seqlens=cu, offset=pick % 5)
    chunks = case.chunk_bounds()
    _, t0, t1 = chunks[pick % len(chunks)]
    x, y = case.build_inputs(), case.block(t0, t1).build_inputs()
    for name, a, b in zip(x._fields, x, y):
        if a is not None and name != "cu_seqlens":
            assert _same(a.reshape(1, -1, *a.shape[2:])[:, t0:t1], b), name


def test_a_block_is_one_of_the_cases_chunks() -> None:
    case = Case(B=2, T=40, BT=16)
    assert case.block(56, 72) == case.replace(B=1, T=16, offset=56)
    with pytest.raises(ValueError, match="not a chunk"):
        case.block(50, 66)


def test_offset_is_validated_and_round_trips() -> None:
    assert Case(offset=7).to_dict()["offset"] == 7 and "offset" not in Case().to_dict()  # stored names unchanged
    assert Case.from_dict(Case(offset=7).to_dict()) == Case(offset=7)
    for bad in (-1, True, 1.5):
        with pytest.raises((ValueError, TypeError), match="offset"):
            Case.from_dict({"offset": bad})


@pytest.mark.parametrize("start", [0, 1, 2, 5])
def test_draws_from_a_start_are_the_stream_from_there(start) -> None:
    """Element i of a draw from ``start`` is element start + i of the stream, for uniforms and for
    Box-Muller's pairs (an odd start splits a pair)."""
    cpu = torch.device("cpu")
    for kind in (rng.uniform, rng.normal):
        whole, = kind(3, [(1, (12,))], cpu)
        part, = kind(3, [(1, (5,))], cpu, [start])
        assert torch.equal(part, whole[start:start + 5])


def test_a_failure_past_a_block_bound_names_its_block() -> None:
    """``failing_block`` takes the first output whose worst block is past its bound; none where every
    block is within (a whole-output failure) or the case is one block already."""
    from wy_ascend.testing.properties import PropertyFailure
    from wy_ascend.testing.shrink import failing_block

    case = Case(T=64, BT=16)
    within = {"rel_rms": 1e-3, "tol": 1e-2, "worst_block": {"tokens": [0, 16], "rel_rms": 1e-3, "tol": 2e-2}}
    past = {"rel_rms": 1e-3, "tol": 1e-2, "worst_block": {"tokens": [32, 48], "rel_rms": 3e-2, "tol": 2e-2}}
    assert failing_block(case, PropertyFailure("x", {"w": within, "dg": past})) == case.replace(T=16, offset=32)
    assert failing_block(case, PropertyFailure("x", {"w": within})) is None
    assert failing_block(case, ValueError("no metrics")) is None
    assert failing_block(Case(T=16), PropertyFailure("x", {"dg": {**past, "worst_block": {**past["worst_block"],
                                                                                        "tokens": [0, 16]}}})) is None


def test_a_case_moved_to_a_compiled_backend_drops_the_interpreters_knobs() -> None:
    """The interpreter-only knobs ask the cpu backend to do what a compiled backend does by its own rule;
    a replay on cuda drops them (cuda refuses them) and keeps every other knob."""
    case = Case(backend="cpu", knobs={"lowp_dot": True, "emulate": False, "max_blocks": 3})
    assert case.on("cuda") == case.replace(backend="cuda", knobs={"max_blocks": 3})
    assert case.on("cpu") == case


_ROW = st.tuples(st.sampled_from(("w", "u", "dk", "dv", "dbeta", "dg")), st.booleans(),
                 st.one_of(st.floats(0.0, 1.0), st.just(float("nan"))), st.floats(1e-6, 1.0), st.integers(0, 10**6))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(B=st.integers(1, 3), T=st.integers(1, 70), BT=st.sampled_from((16, 32)), varlen=st.booleans(),
       rows=st.lists(_ROW, max_size=5, unique_by=lambda r: r[0]), raised=st.booleans())
def test_the_block_shrunk_to_is_the_first_outputs_whose_worst_block_is_past_its_bound(B, T, BT, varlen, rows,
                                                                                      raised) -> None:
    """For any case and any metrics (outputs in any order, each with or without a worst block, a block's error
    within, past or NaN against its bound, at any of the case's chunks), ``failing_block`` gives the block case
    of the first output whose worst block is not within its bound (NaN is not within), or None where there is
    none, where the case is that block already, or where the error carries no metrics."""
    from wy_ascend.testing.properties import PropertyFailure
    from wy_ascend.testing.shrink import failing_block

    cu = tuple(sorted({0, B * T, *range(5, B * T, 11)})) if varlen else None
    case = Case(B=1 if varlen else B, T=B * T if varlen else T, BT=BT, cu_seqlens=cu)
    chunks = [(t0, t1) for _, t0, t1 in case.chunk_bounds()]
    metrics, expected = {}, None
    for name, has_block, err, tol, pick in rows:
        row = {"rel_rms": 0.0, "tol": 1.0}
        if has_block:
            t0, t1 = chunks[pick % len(chunks)]
            row["worst_block"] = {"tokens": [t0, t1], "rel_rms": err, "tol": tol}
            if expected is None and not err <= tol:
                block = case.block(t0, t1)
                expected = block if block != case else False
        metrics[name] = row
    got = failing_block(case, PropertyFailure("x", metrics) if raised else ValueError("no metrics"))
    assert got == (expected or None if raised else None)
