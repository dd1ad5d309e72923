"""The differential property: one case on its subject and on the peer implementation of the backend."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from wy_ascend import subjects
from wy_ascend.testing.case import Case
from wy_ascend.testing.failure import PropertyFailure
from wy_ascend.testing.properties import peer_case, run_property

FLA = importlib.util.find_spec("fla") is not None
needs_fla = pytest.mark.skipif(not FLA, reason="fla-core is not installed (pip install '.[upstream]')")


def test_peers() -> None:
    """wy_ascend's peer is fla-core's kernels of the platform, a foreign subject's is wy_ascend; a backend
    without a foreign implementation has none."""
    assert subjects.peer("wy_ascend", "npu-cuda") is None
    assert subjects.peer("fla", "cuda").name == "wy_ascend"  # type: ignore[union-attr]
    assert subjects.peer("fla-ascend", "cpu").name == "wy_ascend"  # type: ignore[union-attr]
    if FLA:
        assert subjects.peer("wy_ascend", "cuda").name == "fla"  # type: ignore[union-attr]
        assert subjects.peer("wy_ascend", "cpu").name == "fla-ascend"  # type: ignore[union-attr]


@needs_fla
def test_the_peer_runs_what_it_claims() -> None:
    """Knobs the peer does not take are dropped for it; a case it does not claim has no peer case."""
    case = Case(T=20, backend="cpu", knobs={"max_blocks": 1, "mode": "grid"})
    assert peer_case(case).knobs == {"max_blocks": 1}  # type: ignore[union-attr]
    assert peer_case(case.replace(subject="fla-ascend")).knobs == case.knobs  # type: ignore[union-attr]
    assert peer_case(Case(T=20, backend="cpu", corruption="k_wrong_ndim")) is None



# Each claim against the one feature of a case it decides: (the claim withheld, the case given that feature).
_FEATURES = {
    "varlen": (dict(varlen=False), dict(T=40, cu_seqlens=(0, 15, 40))),
    "strided": (dict(strided=False), dict(memory={"k": "transposed:1"})),
    "dtypes": (dict(dtypes=("float32",)), dict(dtype="bfloat16")),
    "chunk_sizes": (dict(chunk_sizes=(64,)), dict(BT=16)),
    "dims": (dict(dims=(16, 256)), dict(K=8)),
    "pow2_dims": (dict(pow2_dims=True), dict(V=48)),
    "head_ratios": (dict(head_ratios=(1,)), dict(H=1, HV=2)),
    "gate_dtypes": (dict(gate_dtypes=False), dict(use_g=True, g_dtype="float32", dtype="bfloat16")),
}


@pytest.mark.parametrize("feature", sorted(_FEATURES))
def test_each_claim_decides_its_own_feature(feature: str) -> None:
    """claimed(): a case is taken by claims that allow all it is and refused by claims that withhold any one
    of its features; a claim a case does not touch never refuses it, and a corrupted case is never taken.
    For every claim, in both directions (a varlen case was once refused by every subject that claims varlen,
    and the differential left every packed batch out)."""
    from wy_ascend.testing.properties.differential import claimed

    withheld, given = _FEATURES[feature]
    base = Case(T=40, H=1, HV=1, K=16, V=16, BT=64, dtype="float32")
    case = base.replace(**given)
    everything = subjects.Claims()
    assert claimed(everything, base) and claimed(everything, case)
    assert not claimed(dataclasses.replace(everything, **withheld), case)
    assert claimed(dataclasses.replace(everything, **withheld), base)
    touched = {feature} | ({"dtypes"} if feature == "gate_dtypes" else set())  # its case is bfloat16 too
    for other, (others_withheld, _) in _FEATURES.items():  # a claim the case does not touch never refuses it
        if other not in touched:
            assert claimed(dataclasses.replace(everything, **others_withheld), case), other
    assert not claimed(everything, case.replace(corruption="k_wrong_ndim"))


@settings(max_examples=150, deadline=None)
@given(K=st.integers(1, subjects.MAX_DIM), V=st.integers(1, subjects.MAX_DIM), pow2=st.booleans())
@example(K=1, V=16, pow2=True).via("the smallest power of two, 2**0")
@example(K=48, V=16, pow2=True).via("the example above")
def test_the_power_of_two_claim_takes_exactly_the_powers_of_two(K: int, V: int, pow2: bool) -> None:
    """claimed()'s pow2_dims over every K and V a subject may claim (1 included): a case is taken exactly
    when both dims are powers of two (one bit set), or always without the claim."""
    from wy_ascend.testing.properties.differential import claimed

    case = Case(T=16, H=1, HV=1, K=K, V=V, BT=64, dtype="float32")
    claims = subjects.Claims(dims=(1, subjects.MAX_DIM), pow2_dims=pow2)
    assert claimed(claims, case) == (not pow2 or (K.bit_count() == 1 and V.bit_count() == 1))


@needs_fla
@pytest.mark.cpu_backend
def test_the_side_that_fails_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both hold the bounds: metrics of both. A bug planted in one side (fla-ascend's w scaled by 1 + 1e-3,
    100x float32's bound): the property fails naming that side and the other as holding them."""
    case = Case(T=40, HV=2, use_g=True, backend="cpu")
    metrics = run_property("differential", case)
    assert set(metrics) == {"wy_ascend", "fla-ascend"} and metrics["fla-ascend"]["w"]["rel_rms"] < 1e-5

    real = subjects.get("fla-ascend")
    forward = subjects._resolved(real, "fwd", "cpu")

    def scaled(*a, **kw):  # type: ignore[no-untyped-def]
        w, u = forward(*a, **kw)
        return w * (1 + 1e-3), u

    monkeypatch.setitem(subjects.SUBJECTS, "fla-ascend", dataclasses.replace(real, forward=scaled))
    for subject in ("wy_ascend", "fla-ascend"):
        with pytest.raises(PropertyFailure, match="fla-ascend fails where wy_ascend holds the bounds.*w: rel_rms"):
            run_property("differential", case.replace(subject=subject))


@pytest.mark.parametrize("fails", [(), ("fla-ascend",), ("wy_ascend",), ("fla-ascend", "wy_ascend")])
def test_the_verdict_names_every_side_that_fails(monkeypatch: pytest.MonkeyPatch, fails: tuple[str, ...]) -> None:
    """Over every pair of oracle verdicts (each side's check_oracle stood in): both hold, metrics of both; one
    fails, it is named against the other; both fail, both are named as the case or bound to triage; each
    side's own failure text and metrics are kept."""
    def verdict(case: Case) -> dict:
        if case.subject in fails:
            raise PropertyFailure(f"planted on {case.subject}", {"w": {"rel_rms": 1.0}})
        return {"w": {"rel_rms": 0.0}}

    from wy_ascend.testing.properties import differential
    monkeypatch.setattr(differential, "check_oracle", verdict)
    case = Case(T=20, subject="fla-ascend", backend="cpu")
    if not fails:
        assert run_property("differential", case) == {"fla-ascend": {"w": {"rel_rms": 0.0}},
                                                       "wy_ascend": {"w": {"rel_rms": 0.0}}}
        return
    expected = ("^both fla-ascend and wy_ascend fail the oracle on this case .*: fla-ascend: planted on fla-ascend; "
                "wy_ascend: planted on wy_ascend$" if len(fails) == 2 else
                f"^{fails[0]} fails where {({'fla-ascend', 'wy_ascend'} - set(fails)).pop()} holds the bounds on the "
                f"same case: planted on {fails[0]}$")
    with pytest.raises(PropertyFailure, match=expected) as info:
        differential.check_differential(case)
    assert {s: m["w"]["rel_rms"] for s, m in info.value.metrics.items()} == {
        s: float(s in fails) for s in ("fla-ascend", "wy_ascend")}


@pytest.mark.parametrize("case", [Case(T=20, backend="npu-cuda"), Case(T=20, backend="cpu", corruption="k_wrong_ndim")],
                         ids=["no-peer-on-the-backend", "unclaimed"])
def test_a_case_no_peer_takes_is_refused_by_the_differential(case: Case) -> None:
    """Where no peer runs on the case's backend, or the peer does not claim the case, there is no peer case
    and the differential refuses the case by name (ValueError, not a verdict)."""
    from wy_ascend.testing.properties.differential import check_differential

    assert peer_case(case) is None
    with pytest.raises(ValueError, match=r"^differential: no peer of subject 'wy_ascend' on backend "):
        check_differential(case)
