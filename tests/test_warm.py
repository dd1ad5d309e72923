"""The perf warm-up's parts on the CPU (wy_ascend/testing/warm.py): the one-config hold on Triton's
autotuner, the jobs rule, and the process pool end to end (spawned workers, a runaway killed at the
deadline, errors recorded). Its speed-up is a device matter: docs/ledger.md, session 17."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest
import triton
from hypothesis import given, settings
from hypothesis import strategies as st
from triton.runtime.autotuner import Autotuner

from wy_ascend.testing import warm
from wy_ascend.testing.case import Case


def _tuner(warps: tuple[int, ...]) -> Autotuner:
    """An autotuner's search state alone (its constructor wants an active device driver)."""
    tuner = Autotuner.__new__(Autotuner)
    tuner.configs = [triton.Config({}, num_warps=w) for w in warps]
    tuner.early_config_prune = tuner.perf_model = None
    tuner.nargs = {}
    return tuner


def test_only_config_holds_each_autotuner_to_one_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside ``only_config(i)`` an autotuner searches its i-th config alone and one with fewer
    configs raises before launching anything; outside, Triton's own methods are back."""
    ran: list[Autotuner] = []
    monkeypatch.setattr(Autotuner, "run", lambda self, *a, **k: ran.append(self))
    run, prune = Autotuner.run, Autotuner.prune_configs
    three, one = _tuner((1, 2, 4)), _tuner((4,))
    for i in range(3):
        with warm.only_config(i):
            assert [c.num_warps for c in three.prune_configs({})] == [(1, 2, 4)[i]]
            three.run()
            if i == 0:
                one.run()
            else:
                with pytest.raises(warm._Beyond):
                    one.run()
    with warm.only_config(3):
        for call in (three.run, lambda: three.prune_configs({})):
            with pytest.raises(warm._Beyond):
                call()
    assert ran == [three, one, three, three]
    assert (Autotuner.run, Autotuner.prune_configs) == (run, prune)
    assert [c.num_warps for c in three.prune_configs({})] == [1, 2, 4]


def test_jobs_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warm.JOBS_ENV, raising=False)
    monkeypatch.setattr(warm.os, "cpu_count", lambda: 16)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert (warm.default_jobs("cuda"), warm.default_jobs("npu-cuda")) == (15, 15)
    assert (warm.default_jobs("npu"), warm.default_jobs("cpu")) == (0, 0)  # not run on an NPU; nothing compiles
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert warm.default_jobs("cuda") == 7  # the CPUs shared among the xdist workers
    monkeypatch.setattr(warm.os, "cpu_count", lambda: 128)
    assert warm.default_jobs("cuda") == warm.MAX_JOBS == 15
    monkeypatch.setenv(warm.JOBS_ENV, "4")
    assert warm.default_jobs("npu") == 4
    assert warm.warm(Case(backend="cuda"), jobs=1) is None  # one process would only compile in series
    for bad in ("-1", "two"):
        monkeypatch.setenv(warm.JOBS_ENV, bad)
        with pytest.raises(ValueError, match=warm.JOBS_ENV):
            warm.default_jobs("cuda")


@pytest.mark.cpu_interpreter
def test_warm_runs_every_task_in_worker_processes() -> None:
    """On the cpu backend (the interpreter: no autotuner, so every index runs the op; no fla-core,
    so its tasks are absent): each (op, provider, config) is one task in a worker."""
    case = Case(B=1, T=20, H=1, HV=2, K=16, V=16, BT=16, use_g=True, backend="cpu")
    try:
        done = warm.warm(case, jobs=2)
    finally:
        warm._POOL.close()
    assert done is not None and not done.errors and not done.late
    n = warm.MAX_CONFIGS * len(warm.OPS)
    assert done.outcomes == {warm.COMPILED: n, warm.ABSENT: n}
    assert "2 processes" in done.summary()


def _task(case: Case, op: str, provider: str, index: int) -> str:
    """A stand-in task: index 0 runs away, index 1 fails, the rest finish."""
    if index == 0 and op == "fwd" and provider == "ours":
        time.sleep(60)
    if index == 1:
        raise RuntimeError("no such compile")
    return warm.COMPILED


def test_a_runaway_task_is_killed_at_the_deadline_and_errors_are_kept() -> None:
    start = time.perf_counter()
    try:
        done = warm.warm_all([Case(backend="cpu")], _task, jobs=3, deadline=20.0)
    finally:
        warm._POOL.close(kill=True)
    elapsed = time.perf_counter() - start
    assert done is not None and elapsed < 45
    assert 20.0 <= done.seconds <= elapsed  # its wall time, the deadline it waited out included
    assert done.late == ["fwd/ours/0"]
    assert "; past 20 s: ['fwd/ours/0']" in done.summary()  # the deadline it ran under, not the default
    assert set(done.errors) == {f"{op}/{p}/1" for op in warm.OPS for p in warm.PROVIDERS}
    assert all("no such compile" in e for e in done.errors.values())
    assert done.outcomes[warm.COMPILED] == len(warm.OPS) * len(warm.PROVIDERS) * warm.MAX_CONFIGS - 5
    assert warm._POOL.executor is None  # the runaway's workers are gone; the next warm-up starts afresh


_ORPHAN = """
import os, sys, time
from wy_ascend.testing import warm
executor = warm._POOL.get(2)
executor.submit(os.getpid).result()
print(*executor._processes, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_die_with_the_process_that_started_them() -> None:
    """A case runner killed at its time limit takes its warm-up workers with it: they would otherwise
    wait on their task queue forever, each holding a device context."""
    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]  # type: ignore[union-attr]
        assert pids and all(_alive(p) for p in pids)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids)


def test_the_summary_line() -> None:
    done = warm.Warmed(jobs=3, outcomes={warm.COMPILED: 2}, errors={"fwd/ours/8": "OutOfMemoryError: " + "x" * 500 + "\nmore"})
    line = done.summary()
    assert line.startswith("warm-up: 3 processes, 0.0 s (2 compiled); errors: {'fwd/ours/8': 'OutOfMemoryError: x")
    assert "more" not in line and len(line) < 260


def _failing(case: Case, op: str, provider: str, index: int) -> str:
    if index == 1:
        raise RuntimeError("device context spoilt")
    return warm.BEYOND


def test_an_error_alone_also_retires_the_workers() -> None:
    """A failed task may leave its worker's device context unusable (an illegal address poisons a CUDA
    context): the next warm-up starts fresh workers."""
    try:
        done = warm.warm_all([Case(backend="cpu")], _failing, jobs=2)
        assert done.errors and not done.late and warm._POOL.executor is None
    finally:
        warm._POOL.close(kill=True)


def _building(subject: tuple[str, int], op: str, provider: str, index: int) -> str:
    """A task whose input build (in ``subject[0]``, a folder) marks itself there for 0.2 s and records
    how many builds it saw at once."""
    import os
    from pathlib import Path

    import torch

    def make_calls() -> warm.Calls:
        folder, mark = Path(subject[0]), Path(subject[0]) / f"building-{os.getpid()}"
        mark.touch()
        time.sleep(0.2)
        at_once = len(list(folder.glob("building-*")))
        (folder / f"saw-{os.getpid()}-{subject[1]}").write_text(str(at_once))
        mark.unlink()
        return {"fwd": {}, "bwd": {}}

    return warm.run_config(subject, torch.device("cpu"), make_calls, op, provider, index)


def test_workers_build_inputs_a_few_at_a_time(tmp_path) -> None:
    """Every worker builds each subject's inputs, but no more than BUILDS_AT_ONCE at once: 15 float64
    draws of one large case at once ran the H200 out of memory."""
    try:
        done = warm.warm_all([(str(tmp_path), i) for i in range(3)], _building, jobs=4)
    finally:
        warm._POOL.close()
    assert not done.errors and not done.late and set(done.outcomes) == {warm.ABSENT}
    seen = [int(p.read_text()) for p in tmp_path.glob("saw-*")]
    assert len(seen) >= 3 and max(seen) <= warm.BUILDS_AT_ONCE == 2


def test_warm_takes_its_jobs_from_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warm.JOBS_ENV, raising=False)
    assert warm.warm(Case(backend="cpu")) is None  # the interpreter compiles nothing
    monkeypatch.setenv(warm.JOBS_ENV, "1")
    assert warm.warm(Case(backend="cuda")) is None


def test_a_worker_keeps_one_subjects_inputs_between_its_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_config builds a subject's calls once and reuses them for every task of that subject (the inputs of a
    large case take seconds and GiBs to build), and builds again for another subject; the calls it runs are
    the current subject's."""
    import torch

    monkeypatch.setattr(warm, "_CALLS", None)
    built: list[str] = []
    ran: list[str] = []

    def calls_of(subject: str):  # noqa: ANN202
        def make() -> warm.Calls:
            built.append(subject)
            return {"fwd": {"ours": lambda: ran.append(subject)}, "bwd": {}}
        return make

    for subject in ("a", "a", "a", "b", "b", "a"):
        assert warm.run_config(subject, torch.device("cpu"), calls_of(subject), "fwd", "ours", 0) == warm.COMPILED
    assert built == ["a", "b", "a"] and ran == ["a", "a", "a", "b", "b", "a"]


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(tasks=st.lists(st.tuples(st.sampled_from([Case(T=16), Case(T=64, HV=2), "not a case"]),
                                st.sampled_from(["cpu", "cuda"]), st.booleans()), min_size=1, max_size=6))
def test_a_worker_reserves_device_memory_for_each_case_it_builds_and_a_config_beyond_is_told(
        tasks: list[tuple[Any, str, bool]]) -> None:
    """Over drawn task sequences of cases on cpu and cuda (and a subject that is no case): run_config reserves
    case_bytes in the case's device ledger (a stand-in) each time it builds a device case's inputs, never for
    the cpu or a non-case subject nor for a task reusing the built inputs; a call whose autotuner has no config
    at the task's index answers BEYOND (one that runs: COMPILED)."""
    import torch

    import wy_ascend.testing.device_memory as dm

    reserved: list[int] = []
    ledgers: list[Any] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(warm, "_CALLS", None)
        mp.setattr(warm, "ledger_for", lambda case: ledgers.append(case) or (
            SimpleNamespace(reserve=reserved.append) if case.backend == "cuda" else None))
        want: list[int] = []
        last = None
        now = {"beyond": False}  # the task's: a reused build's call is the first build's

        def call() -> None:
            if now["beyond"]:
                raise warm._Beyond

        for subject, backend, beyond in tasks:
            subject = subject.replace(backend=backend) if isinstance(subject, Case) else subject
            if subject != last and isinstance(subject, Case) and backend == "cuda":
                want.append(dm.case_bytes(subject))
            now["beyond"] = beyond
            got = warm.run_config(subject, torch.device("cpu"), lambda: {"fwd": {"ours": call}, "bwd": {}},
                                  "fwd", "ours", 0)
            assert got == (warm.BEYOND if beyond else warm.COMPILED)
            last = subject
    assert reserved == want and all(isinstance(c, Case) for c in ledgers)
