"""One Hypothesis test per property (wy_ascend.testing.properties), on the run's profile and backend.

A failing property is shrunk by Hypothesis; only the final replay of the minimal example
(``current_build_context().is_final``) is written to ``regressions/`` by
``wy_ascend.testing.store.record_failure``, then the failure is re-raised unchanged.

Every case runs in this process's case runner (``wy_ascend.testing.runner.CaseRunner``), a
child process started once: a case that kills it (a signal, an abort, a device fault) or runs
past the profile's per-case time limit (``CASE_TIMEOUT_S``, ``$WY_ASCEND_CASE_TIMEOUT``
overrides it) is a ``CaseCrashed``/``CaseTimeout`` failure, shrunk like any other (the next
case gets a fresh child) and recorded as ``regressions/crash-<hash>.json`` or
``timeout-<hash>.json``. The child's stderr goes to ``$WY_ASCEND_CASE_LOG`` (fuzz/conftest.py
sets ``<report>.logs/<worker>.log``). All properties run there, plan_coverage too: it cannot
crash a device (it builds no tensor), but a planner that loops forever is a timeout to catch,
and the child costs ~0.5 ms a case (1000 plan cases: ~0.5 s of a 160 s run).
``WY_ASCEND_IN_PROCESS=1`` runs the cases in the worker itself instead (a debugger, a profiler).
"""

from __future__ import annotations

import atexit
import re
import time
from typing import Any

import pytest
from hypothesis import assume, example, given, reject
from hypothesis.control import current_build_context

from fuzz.pool import run_pool
from fuzz.profiles import TALLY, current
from fuzz.strategies import (
    Sizes,
    bad_input_cases,
    case_strategy,
    example_case,
    history_cases,
    index_width_cases,
    known_defect,
    known_everywhere,
    perf_cases,
    plan_cases,
    split_cases,
    subject_corruptions,
)
from wy_ascend import subjects
from wy_ascend.backends import compiled_kernels
from wy_ascend.env import switch
from wy_ascend.errors import BackendUnavailableError
from wy_ascend.testing import history
from wy_ascend.testing.case import Case
from wy_ascend.testing.device_memory import DeviceTooSmall
from wy_ascend.testing.phases import take
from wy_ascend.testing.properties import peer_case, run_property, specialization_labels, widened
from wy_ascend.testing.runner import CaseLost, CaseRunner, Outcome, case_timeout, device_fault
from wy_ascend.testing.shrink import failing_block

RUN = current()
PROFILE, BACKEND, SIZES, SUBJECT = RUN.profile, RUN.backend, RUN.profile.sizes, RUN.subject
POOL = run_pool(BACKEND, PROFILE.pool)  # the same pool in every worker (conftest.py pins its date)
FOREIGN = subjects.get(SUBJECT).foreign


def _cases(sizes: Sizes = SIZES, **flags: Any) -> Any:
    return case_strategy(PROFILE.kind, sizes, BACKEND, pool=POOL, subject=SUBJECT, **flags)


def _note(error: BaseException, note: str) -> None:
    if hasattr(error, "add_note"):  # Python >= 3.11
        error.add_note(note)


def _first_line(error: BaseException) -> str:
    """The first line of ``error``'s message, or its type's name where it has none."""
    return str(error).splitlines()[0] if str(error) else type(error).__name__


# bad_input failures this process stored, by cause (``_cause``) -> the file: each corruption is an explicit
# example that fails on its own, and a subject that checks no dtype fails every dtype corruption alike.
_CAUSES: dict[tuple[str, ...], str] = {}


def _cause(prop: str, case: Case, error: BaseException) -> tuple[str, ...] | None:
    """A bad_input failure's cause: the op and what went wrong, without the corruption's names and the message
    of what the subject raised (``'k_int_dtype' was accepted`` and ``'v_int_dtype' was accepted`` are one cause,
    so are two shape errors torch raised where a ValueError naming the argument was due); None for the other
    properties, whose every minimal case is stored."""
    if prop != "bad_input":
        return None
    op_and_what = re.sub(r"'[^']*'", "_", _first_line(error)).split(": ")[:2]
    return (case.subject, type(error).__name__, *op_and_what)


def _record(prop: str, case: Case, error: BaseException, what: str = "minimal case") -> None:
    """Write the failing case to regressions/ and note it in the tally (never masks ``error``); a bad_input
    failure of a cause this process stored already is noted with that file, not stored again."""
    path: str | None = None
    message = _first_line(error)
    cause = _cause(prop, case, error)
    if cause is not None and cause in _CAUSES:
        _note(error, f"(the cause of {_CAUSES[cause]}, stored once)")
        TALLY.fail(prop, _CAUSES[cause], f"(same cause as {_CAUSES[cause]}) {message}", case.to_dict())
        return
    try:
        from wy_ascend.testing.store import store_failure

        recorded = store_failure(prop, case, error)
    except Exception as e:  # noqa: BLE001 - the property failure stays the error reported
        _note(error, f"(could not record the regression: {type(e).__name__}: {e})")
    else:
        path = str(recorded.path)
        if cause is not None:
            _CAUSES[cause] = path
        _note(error, recorded.note(error, what))
        if not recorded.new:  # the live FAILED line says the file is an earlier one, and what it holds
            message = f"(already stored, it recorded {recorded.then.splitlines()[0][:120]}) {message}"
    TALLY.fail(prop, path, message if what.startswith("minimal case") else f"({what}) {message}", case.to_dict())


# Properties whose first crash, timeout or device fault this process has recorded before shrinking it:
# shrinking a hang costs the time limit per candidate (900 s on a device), so a run cut short (a CI step's
# limit, a dead device) still leaves the case it saw, as libFuzzer writes a crash at once; a device fault
# may not replay alike (runner.device_fault), and Hypothesis then drops the case as flaky.
_LOST_RECORDED: set[str] = set()


# Seconds a case may run in the runner before it is a timeout: ~30x the slowest case of the
# profile on a loaded machine (ci: interpreter cases of up to a few seconds; nightly and large:
# first compiles of a specialization, 17-24 s per kernel on an H200, and host oracles of
# millions of tokens). Every shrink step of a real hang costs the limit once.
IN_PROCESS_ENV = "WY_ASCEND_IN_PROCESS"  # 1: cases run in the worker itself (below)
CASE_TIMEOUT_S = {"ci": 120.0, "dev": 120.0, "nightly": 900.0, "large": 1800.0, "perf": 900.0}
_RUNNER: list[CaseRunner] = []


class _InProcess:
    """``WY_ASCEND_IN_PROCESS=1``: cases run in the worker itself, as before the case runner (a
    debugger or a profiler sees them; a crash ends the worker and leaves no file)."""

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def run(self, prop: str, case: Case) -> Outcome:
        kernels = compiled_kernels()
        take()
        try:
            metrics = run_property(prop, case)
        except Exception as e:
            e.case_cpu_seconds, e.case_compiled, e.case_phases = 0.0, compiled_kernels() != kernels, take()  # type: ignore[attr-defined]
            raise
        return Outcome(metrics, 0.0, compiled_kernels() != kernels, take())  # its CPU time is this process's


def runner() -> CaseRunner | _InProcess:
    """This process's case runner (started on first use, stopped at exit)."""
    if switch(IN_PROCESS_ENV, False):
        return _InProcess()
    if not _RUNNER:
        # cpu: children forked from a template (a crash's shrink candidates restart in ~10 ms);
        # a device backend spawns each child (no fork near a device runtime).
        _RUNNER.append(CaseRunner(timeout_s=case_timeout(CASE_TIMEOUT_S.get(PROFILE.name, 600.0)),
                                  fork_server=BACKEND == "cpu", backend=BACKEND))
        atexit.register(_RUNNER[0].close)
    return _RUNNER[0]


def _one_block(run: CaseRunner | _InProcess, prop: str, case: Case, error: BaseException) -> tuple[Case, str]:
    """The case to store for a final failure, and what it is: its failing block alone where the failure
    names one and that block fails ``prop`` too (wy_ascend.testing.shrink), else the case itself."""
    block = failing_block(case, error)
    if block is not None:
        try:
            run.run(prop, block)
        except Exception:  # noqa: BLE001 - the block fails alone: the smaller minimal case
            return block, f"minimal case (the failing chunk of a case of {case.B * case.T} tokens)"
    return case, "minimal case"


def check(prop: str, case: Case) -> None:
    """Run property ``prop`` on ``case`` in the case runner; record the final (shrunk) failure,
    then re-raise it. Tallies the case's time (the runner's start excluded), its CPU time (the
    child's and this process's), whether it compiled a kernel (a warm case did not; a case
    that crashed or timed out counts as not warm), its time breakdown (the runner's start
    included) and the kernel specializations it launches."""
    assume(known_defect(prop, case) is None)  # a foreign subject's known defect: the store replays it
    run = runner()
    labels = specialization_labels(prop, case)
    began = time.perf_counter()
    run.start()
    start, cpu = time.perf_counter(), time.process_time()
    child_cpu, compiled, phases, failure = 0.0, True, {}, None
    try:
        outcome = run.run(prop, case)
        child_cpu, compiled, phases = outcome.cpu_seconds, outcome.compiled, outcome.phases
    except BackendUnavailableError:
        raise
    except DeviceTooSmall:
        reject()  # no verdict on this device (testing/device_memory.py): another case is drawn
    except Exception as error:
        failure = error
        if not isinstance(error, CaseLost):
            child_cpu, compiled = getattr(error, "case_cpu_seconds", 0.0), getattr(error, "case_compiled", True)
            phases = getattr(error, "case_phases", {})
        if current_build_context().is_final:
            stored, what = _one_block(run, prop, case, error)
            _record(prop, stored, error, what)
        elif (isinstance(error, CaseLost) or device_fault(error)) and prop not in _LOST_RECORDED:
            _LOST_RECORDED.add(prop)
            _record(prop, case, error, "first seen, unshrunk")
        else:
            TALLY.found(prop, f"(first failing case, not shrunk: the test ended before its minimal case) "
                        f"{type(error).__name__}: {_first_line(error)}", case.to_dict())
        raise
    finally:
        TALLY.add(prop, time.perf_counter() - start, time.process_time() - cpu + child_cpu, compiled, began=began,
                  phases=phases, failed=failure is not None, lost=isinstance(failure, CaseLost), labels=labels)


def _open(prop: str) -> Any:
    """Skip mark of a property whose every case a known defect of the run's subject fails (the store
    replays that defect's file), else nothing."""
    known = known_everywhere(prop, SUBJECT)
    if known is None:
        return lambda test: test
    return pytest.mark.skip(reason=f"every {prop} case of {SUBJECT} fails known defect regressions/{known.file}")


@PROFILE.settings_for("oracle")
@given(case=_cases())
def test_oracle(case: Case) -> None:
    check("oracle", case)


def _split_launches(test: Any) -> Any:
    """Both launch shapes split along both task axes, always run: a 3-chunk, 2-head problem under a
    1-block limit (grid: one launch per task) and 1-task launches (core grid); the draws split rarely.
    A foreign subject: its own grid limit lowered to one block (its host-side split, a launch per task),
    where it has one (``max_blocks`` among its claimed knobs; fla on cuda launches one grid, unsplit)."""
    if FOREIGN:
        splits = ({"max_blocks": 1},) if subjects.get(SUBJECT).claims.takes("max_blocks") else ()
    else:
        splits = ({"mode": "persistent", "max_tasks": 1}, {"mode": "grid", "max_blocks": 1})
    for knobs in splits:
        test = example(case=example_case(SUBJECT, BACKEND, T=40, HV=2, use_g=True, knobs=knobs))(test)
    return test


@PROFILE.settings_for("launch_invariance")
@given(case=_cases(partition_knobs=True))
@_split_launches
def test_launch_invariance(case: Case) -> None:
    check("launch_invariance", case)


@PROFILE.settings_for("memory_layout")
# A quarter of the task budget: a stride ignored shows on any size, and each case runs twice. Half
# the bytes of a large case: a laid-out argument may take twice its size (a strided view) next to it.
@given(case=_cases(SIZES.scaled(max_tasks=max(1, SIZES.max_tasks // 4), large_bytes=SIZES.large_bytes // 2),
                   memory=True))
def test_memory_layout(case: Case) -> None:
    check("memory_layout", case)


@PROFILE.settings_for("varlen_split")
@given(case=_cases(SIZES.scaled(max_seqs=SIZES.split_seqs)))
def test_varlen_split(case: Case) -> None:
    check("varlen_split", case)


@PROFILE.settings_for("grouped_heads")
@given(case=_cases(grouped=True))
def test_grouped_heads(case: Case) -> None:
    check("grouped_heads", case)


@_open("widened_gates")
@PROFILE.settings_for("widened_gates")
@given(case=_cases().filter(lambda c: widened(c) != c))  # a gate below float32 to widen
def test_widened_gates(case: Case) -> None:
    check("widened_gates", case)


@PROFILE.settings_for("containment")
# A case with tokens (a chunk to poison), in any launch split: a launch that reads or writes
# past its own tasks carries the NaN out as well.
@given(case=_cases(partition_knobs=True).filter(lambda c: c.chunk_bounds()))
@_split_launches
def test_containment(case: Case) -> None:
    check("containment", case)


@PROFILE.settings_for("linearity")
@given(case=_cases(partition_knobs=True))
def test_linearity(case: Case) -> None:
    check("linearity", case)


@PROFILE.settings_for("plan_coverage")
@given(case=plan_cases(SIZES, BACKEND))
def test_plan_coverage(case: Case) -> None:
    check("plan_coverage", case)


def _each_corruption(test: Any) -> Any:
    """Every corruption once on a plain case, as explicit examples (run first, whatever the draws)."""
    for name in reversed(subject_corruptions(SUBJECT)):
        case = example_case(SUBJECT, BACKEND, T=20, corruption=name)
        if known_defect("bad_input", case) is None:
            test = example(case=case)(test)
    return test


@_open("bad_input")
@PROFILE.settings_for("bad_input")
@given(case=bad_input_cases(SIZES, BACKEND, SUBJECT))
@_each_corruption
def test_bad_input(case: Case) -> None:
    check("bad_input", case)


@PROFILE.settings_for("compiles")
@given(case=split_cases(SIZES, BACKEND, SUBJECT))
def test_compiles(case: Case) -> None:
    check("compiles", case)


@PROFILE.settings_for("index_width")
@given(case=index_width_cases(BACKEND, SUBJECT))
def test_index_width(case: Case) -> None:
    check("index_width", case)


def _peerless(test: Any) -> Any:
    """Skip mark where no peer implementation runs on the run's backend here (fla-core not installed)."""
    if subjects.peer(SUBJECT, BACKEND) is not None:
        return test
    return pytest.mark.skip(reason=f"no peer of subject {SUBJECT!r} on backend {BACKEND!r} here "
                                   "(fla-core: pip install '.[upstream]')")(test)


@_peerless
@PROFILE.settings_for("differential")
@given(case=_cases())
def test_differential(case: Case) -> None:
    """The case on the run's subject and on its peer (wy_ascend <-> fla-core's kernels of the platform)."""
    peer = peer_case(case)
    assume(peer is not None and known_defect("differential", peer) is None)
    check("differential", case)


@pytest.mark.skipif(history.refuses(BACKEND) is not None, reason=str(history.refuses(BACKEND)))
@PROFILE.settings_for("history")
@given(case=history_cases(SUBJECT))
def test_history(case: Case) -> None:
    """Calls in one process, each against itself alone in a fresh process (wy_ascend.testing.history)."""
    check("history", case)


@PROFILE.settings_for("perf")
@given(case=perf_cases(BACKEND))
def test_perf(case: Case) -> None:
    check("perf", case)
