"""End to end: a planted bug is found by Hypothesis, shrunk, stored, replayed, and passes once fixed.

The bug (test-only, through monkeypatch): the op drops the last launch of its plan when the
plan has more than one, the classic host-side chunking slip. Outputs are NaN-poisoned, so the
oracle property sees the unwritten tasks. The search runs with ``derandomize=True`` (which
implies no example database in Hypothesis: nothing is read from or written to ``.hypothesis/``)
and stores into a temp directory, never the real ``regressions/``.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context

import wy_ascend.ops
from wy_ascend.cli import main
from wy_ascend.planning import plan
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, common, run_property
from wy_ascend.testing.store import iter_store, load, record_failure, replay


def _drop_last_launch(*args: object, **kwargs: object):  # noqa: ANN202 - same return as plan
    p = plan(*args, **kwargs)  # type: ignore[arg-type]
    if len(p.launches) > 1:
        p = dataclasses.replace(p, launches=p.launches[:-1])
    return p


def plant(monkeypatch: pytest.MonkeyPatch, launch_check: bool = False) -> None:
    # ops does `from .planning import plan`: patch the name where ops looks it up.
    monkeypatch.setattr(wy_ascend.ops, "plan", _drop_last_launch)
    monkeypatch.setattr(wy_ascend.ops, "_CALLS", OrderedDict())  # no call planned before the plant
    if not launch_check:  # it names the dropped launch first (below); off, the oracle must find it alone
        monkeypatch.setattr(common, "_launched_as_asked", lambda case, kernel, launches: None)


def test_the_launch_check_names_the_dropped_launch(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    plant(monkeypatch, launch_check=True)
    with pytest.raises(PropertyFailure, match=r"fwd: the launches run 1 of the 2 x 1 \(chunk, head\) tasks never"):
        # two launches in either launch shape: 1-task launches of a core grid (npu, cpu), 1-block grids (cuda)
        run_property("oracle", Case(T=17, knobs={"max_tasks": 1, "max_blocks": 1}, backend=backend))


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A small space that shrinks toward the simplest case: dims first (so they shrink
    first), then the layout, then the launch knobs that split work into several launches."""
    K = draw(st.sampled_from([16, 24, 32]))
    V = draw(st.sampled_from([16, 40]))
    H, HV = draw(st.sampled_from([(1, 1), (1, 2), (2, 2)]))
    dtype = draw(st.sampled_from(["float32", "bfloat16"]))
    use_g = draw(st.booleans())
    T = draw(st.integers(1, 64))
    knobs = draw(st.sampled_from([{}, {"max_tasks": 1}, {"max_tasks": 3}, {"mode": "grid", "max_blocks": 2}]))
    return Case(T=T, H=H, HV=HV, K=K, V=V, BT=16, dtype=dtype, use_g=use_g, knobs=knobs, backend="cpu")


def search(store: Path) -> None:
    """Hypothesis over ``cases`` with the oracle; the final shrunk failure goes to ``store``."""

    @settings(max_examples=25, derandomize=True, deadline=None, print_blob=False,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=[HealthCheck.too_slow])
    @given(case=cases())
    def oracle_holds(case: Case) -> None:
        try:
            run_property("oracle", case)
        except PropertyFailure as e:
            if current_build_context().is_final:
                record_failure("oracle", case, e, store)
            raise

    oracle_holds()


@pytest.mark.cpu_backend  # the search's cases on the interpreter; a compiled backend would compile each shape
def test_planted_bug_is_found_shrunk_stored_and_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "regressions"
    search(store)  # the real code passes: nothing stored
    assert iter_store(store) == []

    plant(monkeypatch)
    with pytest.raises(PropertyFailure, match="kernel differs from the float64 oracle"):
        search(store)
    (path,) = iter_store(store)
    stored = load(path)
    case = stored.case
    assert path.name.startswith("oracle-") and stored.property == "oracle"
    assert "inf" in path.read_text()  # NaN-poisoned outputs were never written
    # Minimal: the smallest dims, no gate, float32, default data ...
    assert (case.K, case.V, case.H, case.HV, case.BT) == (16, 16, 1, 1, 16)
    assert (case.dtype, case.use_g, case.dist, case.seed, case.cu_seqlens) == ("float32", False, "realistic", 0, None)
    # ... and the smallest layout that triggers the bug: two tasks (T=17: one full chunk and
    # a one-token tail), split into two launches by the first knob that splits them.
    assert (case.B, case.T) == (1, 17)
    assert case.knobs == {"max_tasks": 1}

    # Replay reproduces the failure while the bug is planted ...
    with pytest.raises(PropertyFailure):
        replay(stored, backend="cpu")
    assert main(["replay", str(path), "--backend", "cpu", "--in-process"]) == 1  # where the monkeypatch is
    assert "FAIL" in capsys.readouterr().out

    # ... and passes once it is removed: the file stays, as the regression test of the fix.
    monkeypatch.undo()
    assert replay(load(path), backend="cpu")["w"]["rel_rms"] < 1e-5
    assert main(["replay", str(path), "--backend", "cpu"]) == 0  # in the runner's child process
    assert "PASS" in capsys.readouterr().out


def test_mutant_catalog_matches_the_source() -> None:
    """Every planted bug of mutation/mutants.py still applies exactly once (the catalog follows the code)."""
    from mutation import mutants

    assert mutants.check_catalog() == []
    assert len([m for m in mutants.MUTANTS if m.needs == "ci"]) >= 15
