"""The differential property: one case on its subject and on the peer implementation of the backend."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

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
    assert peer_case(Case(T=20, backend="cpu", corruption="k_3d")) is None


@needs_fla
@pytest.mark.cpu_backend
def test_the_side_that_fails_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both hold the bounds: metrics of both. A bug planted in one side (fla-ascend's w scaled by 1 + 1e-3,
    100x float32's bound): the property fails naming that side and the other as holding them."""
    case = Case(T=40, HV=2, use_g=True, backend="cpu")
    metrics = run_property("differential", case)
    assert set(metrics) == {"wy_ascend", "fla-ascend"} and metrics["fla-ascend"]["w"]["rel_rms"] < 1e-5

    real = subjects.SUBJECTS["fla-ascend"]

    def scaled(backend: str):  # type: ignore[no-untyped-def]
        forward, backward = real._calls(backend)
        return (lambda *a, **kw: tuple(x * (1 + 1e-3) if i == 0 else x for i, x in enumerate(forward(*a, **kw))),
                backward)

    monkeypatch.setitem(subjects.SUBJECTS, "fla-ascend", dataclasses.replace(real, _calls=scaled))
    for subject in ("wy_ascend", "fla-ascend"):
        with pytest.raises(PropertyFailure, match="fla-ascend fails where wy_ascend holds the bounds.*w: rel_rms"):
            run_property("differential", case.replace(subject=subject))
