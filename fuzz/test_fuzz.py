"""One Hypothesis test per property (wy_ascend.testing.properties), on the run's profile and backend.

A failing property is shrunk by Hypothesis; only the final replay of the minimal example
(``current_build_context().is_final``) is written to ``regressions/`` by
``wy_ascend.testing.store.record_failure``, then the failure is re-raised unchanged.
"""

from __future__ import annotations

import time
from typing import Any

from hypothesis import example, given
from hypothesis.control import current_build_context

from fuzz.profiles import TALLY, current
from fuzz.strategies import Sizes, bad_input_cases, case_strategy, perf_cases, plan_cases
from wy_ascend.backends import compiled_kernels
from wy_ascend.errors import BackendUnavailableError
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import CORRUPTIONS, run_property

RUN = current()
PROFILE, BACKEND, SIZES = RUN.profile, RUN.backend, RUN.profile.sizes


def _cases(sizes: Sizes = SIZES, **flags: Any) -> Any:
    return case_strategy(PROFILE.kind, sizes, BACKEND, **flags)


def _note(error: BaseException, note: str) -> None:
    if hasattr(error, "add_note"):  # Python >= 3.11
        error.add_note(note)


def _record(prop: str, case: Case, error: BaseException) -> None:
    """Write the minimal failing case to regressions/ and note it in the tally (never masks ``error``)."""
    path: str | None = None
    try:
        from wy_ascend.testing.store import record_failure

        path = str(record_failure(prop, case, error))
    except Exception as e:  # noqa: BLE001 - the property failure stays the error reported
        _note(error, f"(could not record the regression: {type(e).__name__}: {e})")
    else:
        _note(error, f"minimal case recorded in {path}")
    TALLY.fail(prop, path, str(error).splitlines()[0] if str(error) else type(error).__name__, case.to_dict())


def check(prop: str, case: Case) -> None:
    """Run property ``prop`` on ``case``; record the final (shrunk) failure, then re-raise it.
    Tallies the case's time and whether it compiled a kernel (a warm case did not)."""
    start, cpu, kernels_before = time.perf_counter(), time.process_time(), compiled_kernels()
    try:
        run_property(prop, case)
    except BackendUnavailableError:
        raise
    except Exception as error:
        if current_build_context().is_final:
            _record(prop, case, error)
        raise
    finally:
        TALLY.add(prop, time.perf_counter() - start, time.process_time() - cpu, compiled_kernels() != kernels_before)


@PROFILE.settings_for("oracle")
@given(case=_cases())
def test_oracle(case: Case) -> None:
    check("oracle", case)


@PROFILE.settings_for("launch_invariance")
@given(case=_cases(partition_knobs=True))
# Both launch shapes split along both task axes, always run: a 3-chunk, 2-head problem
# under a 1-block limit (grid: one launch per task) and 1-task launches (core grid).
@example(case=Case(T=40, HV=2, use_g=True, backend=BACKEND, knobs={"mode": "grid", "max_blocks": 1}))
@example(case=Case(T=40, HV=2, use_g=True, backend=BACKEND, knobs={"mode": "persistent", "max_tasks": 1}))
def test_launch_invariance(case: Case) -> None:
    check("launch_invariance", case)


@PROFILE.settings_for("memory_layout")
# A quarter of the task budget: a stride ignored shows on any size, and each case runs twice.
@given(case=_cases(SIZES.scaled(max_tasks=max(1, SIZES.max_tasks // 4)), memory=True))
def test_memory_layout(case: Case) -> None:
    check("memory_layout", case)


@PROFILE.settings_for("varlen_split")
@given(case=_cases(SIZES.scaled(max_seqs=SIZES.split_seqs), varlen=True))
def test_varlen_split(case: Case) -> None:
    check("varlen_split", case)


@PROFILE.settings_for("grouped_heads")
@given(case=_cases(grouped=True))
def test_grouped_heads(case: Case) -> None:
    check("grouped_heads", case)


@PROFILE.settings_for("plan_coverage")
@given(case=plan_cases(SIZES, BACKEND))
def test_plan_coverage(case: Case) -> None:
    check("plan_coverage", case)


def _each_corruption(test: Any) -> Any:
    """Every corruption once on a plain case, as explicit examples (run first, whatever the draws)."""
    for name in reversed(tuple(CORRUPTIONS)):
        test = example(case=Case(T=20, backend=BACKEND, corruption=name))(test)
    return test


@PROFILE.settings_for("bad_input")
@given(case=bad_input_cases(SIZES, BACKEND))
@_each_corruption
def test_bad_input(case: Case) -> None:
    check("bad_input", case)


@PROFILE.settings_for("perf")
@given(case=perf_cases(BACKEND))
def test_perf(case: Case) -> None:
    check("perf", case)
