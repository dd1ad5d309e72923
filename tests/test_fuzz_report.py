"""fuzz-report.json survives a killed fuzz run (fuzz/conftest.py FuzzReport, fuzz/profiles.py Progress).

Each test runs a short fuzz session of ``test_plan_coverage`` (planning only: no kernel runs, a few
ms a case) in a subprocess, without xdist, on the cpu backend, with the report, the Hypothesis
storage and the regression store in a temp directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
NODE = "fuzz/test_fuzz.py::test_plan_coverage"
# The subprocess runs the cpu backend (planning only, no warm-up of compiled kernels): where the
# interpreter is missing (a GPU machine) these tests skip, saying so.
CPU_RUN = pytest.mark.cpu_interpreter


def fuzz_cmd(report: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", NODE, "--profile", "ci", "--backend", "cpu", "-p", "no:xdist",
            "-p", "no:cacheprovider", "-q", "--fuzz-report", str(report)]


def verbose(cmd: list[str]) -> list[str]:
    """``cmd`` with -v for -q."""
    return [("-v" if arg == "-q" else arg) for arg in cmd]


def fuzz_env(tmp: Path, scale: float) -> dict[str, str]:
    # Not this test run's xdist worker identity, addopts or profile: the child is a run of its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "WY_ASCEND_"))}
    env.update(WY_ASCEND_FUZZ_SCALE=str(scale), WY_ASCEND_REGRESSIONS=str(tmp / "regressions"),
               HYPOTHESIS_STORAGE_DIRECTORY=str(tmp / "hypothesis"), TRITON_INTERPRET="1",
               # nox --no-venv runs ``python`` from PATH: this interpreter's, as in an activated environment
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return env


@CPU_RUN
def test_a_finished_run_writes_the_report_and_removes_its_progress_files(tmp_path) -> None:
    report = tmp_path / "r.json"
    stale = tmp_path / "r.json.parts"
    stale.mkdir()  # a killed earlier run's progress file: must not count in this run
    (stale / "gw7.json").write_text(json.dumps({"worker": "gw7", "cases": {"oracle": 999}, "failures": []}))
    proc = subprocess.run(fuzz_cmd(report), cwd=ROOT, env=fuzz_env(tmp_path, 0.01), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(report.read_text())
    assert not stale.exists()
    assert doc["interrupted"] is False
    assert set(doc["properties"]) == {"plan_coverage"}  # not the stale oracle counts
    assert doc["properties"]["plan_coverage"]["cases"] == doc["total_cases"] == 10  # 1000 x 0.01, counted once
    assert doc["tests"] == {NODE: "passed"} and doc["workers"] == {"main": None}


def nox_fuzz_cmd(report: Path) -> list[str]:
    """The same run through ``nox -s fuzz`` in this environment (as the nightly workflow runs it)."""
    return [sys.executable, "-m", "nox", "--no-venv", "--no-install", "-s", "fuzz", "--", "-k", "test_plan_coverage",
            *fuzz_cmd(report)[4:]]


@CPU_RUN
@pytest.mark.parametrize("through", ["pytest", pytest.param("nox", marks=pytest.mark.skipif(
    importlib.util.find_spec("nox") is None, reason="nox is not installed in this environment"))])
def test_sigterm_still_writes_the_report_with_the_counts_so_far(tmp_path, through) -> None:
    """timeout(1)'s way of stopping a run: SIGTERM to its child, then to the child's process group."""
    report = tmp_path / "r.json"
    part = tmp_path / "r.json.parts" / "main.json"
    cmd = fuzz_cmd(report) if through == "pytest" else nox_fuzz_cmd(report)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=fuzz_env(tmp_path, 100.0), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not part.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not part.exists():  # say why: the run ended early (its output) or is still starting after 90 s
            ended = proc.poll() is not None
            state = f"exited with {proc.returncode}:\n{proc.communicate()[0][-3000:]}" if ended else "was still running"
            pytest.fail(f"no progress file appeared; the run {state}")
        time.sleep(0.5)
        seen = json.loads(part.read_text())["cases"]["plan_coverage"]
        proc.send_signal(signal.SIGTERM)
        os.killpg(proc.pid, signal.SIGTERM)  # nox: reaches pytest too, as it does under timeout(1)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the process group this test started
            proc.communicate()
    assert proc.returncode == (2 if through == "pytest" else 130), out[-3000:]  # pytest and nox: interrupted
    doc = json.loads(report.read_text())
    assert doc["interrupted"] is True
    assert doc["properties"]["plan_coverage"]["cases"] >= seen > 0  # the in-flight item's partial count
    assert doc["tests"] == {NODE: "interrupted"}
    assert not part.parent.exists()
    assert "interrupted: partial counts" in out


def test_cases_that_compiled_are_not_warm_and_counts_add_up_across_documents() -> None:
    """fuzz/counts.py: a compiling case counts in cases and seconds but not in the warm
    counts; merging shipped documents sums every count; an older document without warm
    counts adds none."""
    from fuzz.counts import Counts, rate

    worker = Counts()
    worker.add("oracle", 5.0, 4.0, compiled=True)
    worker.add("oracle", 0.25, 0.2)
    worker.add("oracle", 0.25, 0.2)
    total = Counts()
    total.merge(worker.as_dict())
    total.merge({"cases": {"oracle": 3}, "seconds": {"oracle": 1.5}, "failures": []})  # no warm counts
    oracle = total.properties()["oracle"]
    assert (oracle["cases"], oracle["seconds"], oracle["warm_cases"], oracle["warm_seconds"]) == (6, 7.0, 2, 0.5)
    assert rate(oracle["warm_cases"], oracle["warm_seconds"]) == 4.0 and rate(1, 0.0) is None


def test_an_interrupt_lost_on_its_way_stops_the_run_after_the_next_case() -> None:
    """Why the SIGTERM test hung (3 in ~20 runs on a loaded machine): the handler's
    KeyboardInterrupt, raised while Python ran a finalizer (a generator closed on its last
    reference), was printed as "Exception ignored" and lost, and the handler ignored every later
    signal, so the run went on through its 100000 plan cases. The interrupt now stays pending in
    the tally: the next case to end raises it again, until pytest has it."""
    from types import SimpleNamespace

    from fuzz.conftest import FuzzReport
    from fuzz.profiles import TALLY

    report: Any = SimpleNamespace(_interrupt_seen=False)
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            FuzzReport._on_interrupt(report, signal.SIGTERM, None)  # the exception a finalizer may swallow
        FuzzReport._on_interrupt(report, signal.SIGINT, None)  # later signals: ignored, as before
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            TALLY.add("plan_coverage", 0.01, 0.01)  # the next case to end raises it again
        assert TALLY.drain()["cases"] == {"plan_coverage": 1}  # counted before it raised
        FuzzReport.pytest_keyboard_interrupt(report)  # pytest has it: the report is being written
        TALLY.add("plan_coverage", 0.01, 0.01)
    finally:
        TALLY.interrupt = None
        TALLY.drain()


# A pytest plugin for the child run: the first case to end sends this process SIGTERM from inside
# a generator's finalizer, where the handler's KeyboardInterrupt is raised and then dropped by
# Python ("Exception ignored"): the way the SIGTERM test hung, made certain instead of rare.
LOSE_THE_INTERRUPT = """
import os, signal
from fuzz.profiles import Tally

_add, _sent = Tally.add, []


def _finalized():
    try:
        yield
    finally:
        if not _sent:
            _sent.append(signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10000):  # the handler runs here, between two bytecodes of the finalizer
                pass


def add(self, *args, **kwargs):
    gen = _finalized()
    next(gen)
    del gen
    return _add(self, *args, **kwargs)


Tally.add = add
"""


@CPU_RUN
def test_an_interrupt_lost_in_a_finalizer_still_stops_the_run(tmp_path) -> None:
    (tmp_path / "lose_the_interrupt.py").write_text(LOSE_THE_INTERRUPT)
    report = tmp_path / "r.json"
    env = fuzz_env(tmp_path, 100.0)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    proc = subprocess.run([*fuzz_cmd(report), "-p", "lose_the_interrupt"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)  # without the pending interrupt: 100000 cases, far longer
    out = proc.stdout + proc.stderr
    assert "Exception ignored" in out and "KeyboardInterrupt: SIGTERM" in out, out[-3000:]  # it was lost
    assert proc.returncode == 2, out[-3000:]
    doc = json.loads(report.read_text())
    assert doc["interrupted"] is True and doc["tests"] == {NODE: "interrupted"}


# A plugin for the child run: plan_coverage fails on every case, and the run is sent SIGTERM at its third
# case, while Hypothesis shrinks the first failure (a nightly's limit met mid-shrink).
CUT_WHILE_SHRINKING = """
import os, signal
from wy_ascend.testing.properties import PropertyFailure
from wy_ascend.testing.runner import CaseRunner

_seen = []


def planted(self, prop, case, *args, **kwargs):
    _seen.append(case)
    if len(_seen) == 3:
        os.kill(os.getpid(), signal.SIGTERM)
    raise PropertyFailure("planted: plan_coverage fails on every case")


def pytest_sessionstart(session):
    CaseRunner.run = planted
"""


@CPU_RUN
def test_a_run_cut_while_shrinking_reports_the_failure_it_found(tmp_path) -> None:
    """The first failing case is in the report of a run cut short before its minimal case was recorded
    (an H200 nightly reported no failure while its differential property was shrinking one), named as
    not shrunk, with its case; the store gets nothing (only a minimal case is stored)."""
    (tmp_path / "cut_while_shrinking.py").write_text(CUT_WHILE_SHRINKING)
    env = fuzz_env(tmp_path, 1.0)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    report = tmp_path / "r.json"
    proc = subprocess.run([*fuzz_cmd(report), "-p", "cut_while_shrinking"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]  # interrupted
    doc = json.loads(report.read_text())
    assert doc["interrupted"] is True and doc["tests"] == {NODE: "interrupted"}
    [failure] = doc["failures"]
    assert failure["property"] == "plan_coverage" and failure["pending"] is True and failure["case"]["T"] >= 1
    assert failure["message"].startswith("(first failing case, not shrunk") and "planted" in failure["message"]
    assert not list((tmp_path / "regressions").glob("*.json"))

# ----------------------------------------------------------------------------- time, specializations, pool

# A plugin for the child run: a pool, as fuzz/pool.py notes one for a pooled run, and plan_coverage
# failing on every case (where the case runner's results come back), so that it shrinks.
POOL_AND_FAILURE = """
from fuzz import profiles
from wy_ascend.testing.properties import PropertyFailure
from wy_ascend.testing.runner import CaseRunner

_run = CaseRunner.run


def planted(self, prop, case, *args, **kwargs):
    if prop == "plan_coverage":
        raise PropertyFailure("planted: plan_coverage fails on every case")
    return _run(self, prop, case, *args, **kwargs)


def pytest_sessionstart(session):
    profiles.POOL_LABELS = ["cpu:fwd never launched"]
    CaseRunner.run = planted
"""


@CPU_RUN
def test_the_report_accounts_for_the_wall_time_and_counts_specializations_and_the_pool(tmp_path) -> None:
    """A run of one oracle case and a plan_coverage that fails and shrinks: the columns add up
    to the wall time (one worker), the oracle's phases came back from the case runner's child,
    its two kernels are counted under their labels, plan_coverage's cases under none, and the
    pool's label that no case launched is named."""
    from fuzz.counts import CASE_COLUMNS, RUN_COLUMNS

    (tmp_path / "pool_and_failure.py").write_text(POOL_AND_FAILURE)
    env = fuzz_env(tmp_path, 0.01)  # oracle: 1 case
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    report = tmp_path / "r.json"
    cmd = [*verbose(fuzz_cmd(report)), "fuzz/test_fuzz.py::test_oracle", "-p", "pool_and_failure"]  # the time table
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and list((tmp_path / "regressions").glob("plan_coverage-*.json")), (
        proc.stdout[-3000:] + proc.stderr[-3000:])
    doc = json.loads(report.read_text())
    t = doc["time"]
    assert (t["workers"], t["wall_seconds"]) == (1, doc["elapsed_seconds"]) and t["worker_seconds"] == t["wall_seconds"]
    assert list(t["columns"]) == list(RUN_COLUMNS) and t["columns"]["other"] >= -0.01
    assert sum(t["columns"].values()) == pytest.approx(t["worker_seconds"], abs=0.01)
    for c in CASE_COLUMNS:  # the run's columns are the properties' summed
        assert t["columns"][c] == pytest.approx(sum(p["time"][c] for p in doc["properties"].values()), abs=0.01)
    oracle, plan = doc["properties"]["oracle"]["time"], doc["properties"]["plan_coverage"]["time"]
    assert all(oracle[c] > 0 for c in ("generation", "inputs", "kernel", "oracle", "comparison", "runner")), oracle
    assert oracle["compile"] == oracle["cut_short"] == oracle["shrinking"] == 0  # the interpreter compiles nothing
    assert sum(oracle.values()) >= doc["properties"]["oracle"]["seconds"]  # the case's time, and the test's around it
    assert plan["generation"] > 0 and plan["shrinking"] > 0 and plan["kernel"] == plan["inputs"] == 0
    labels = doc["specializations"]
    assert sorted(label.split()[0] for label in labels) == ["cpu:bwd", "cpu:fwd"] and set(labels.values()) == {1}
    assert doc["pool"] == doc["pool_without_cases"] == ["cpu:fwd never launched"] and doc["pool_covered"] == 0
    assert "pool: 0 of 1 specializations covered; pool specializations with no case: cpu:fwd never launched" in proc.stdout
    assert "time in worker-seconds (1 worker(s)" in proc.stdout and "kernel specializations launched: 2" in proc.stdout


@CPU_RUN
def test_a_passing_run_prints_a_screen_and_the_rest_behind_verbose(tmp_path) -> None:
    """A passing run prints, after pytest's own lines, every skip with its reason and a summary of a few lines:
    cases, failures, seconds and cases/s per property, where the report is. Hypothesis' statistics (some 100
    lines for a ci run) and the time breakdown come with -v, its columns apart."""
    report = tmp_path / "r.json"
    cmd = [*fuzz_cmd(report), "fuzz/test_fuzz.py::test_perf"]  # perf: skipped by the ci profile
    proc = subprocess.run(cmd, cwd=ROOT, env=fuzz_env(tmp_path, 0.01), capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "SKIPPED [1] fuzz/test_fuzz.py" in out and "profile 'ci' does not run property 'perf'" in out
    assert "Hypothesis Statistics" not in out and "time in worker-seconds" not in out
    summary = out.split("wy_ascend fuzz summary", 1)[1].split("short test summary")[0].splitlines()[1:-1]
    assert len(out.splitlines()) <= 30 and len(summary) <= 8, out
    rows = {line.split()[0]: line.split()[1:] for line in summary}
    assert rows["property"] == ["cases", "failures", "seconds", "cases/s"] and rows["plan_coverage"][:2] == ["10", "0"]
    assert summary[0].endswith("10 cases in " + f"{json.loads(report.read_text())['elapsed_seconds']:.1f} s " +
                               summary[0].rsplit(" s ", 1)[1]) and summary[-1].startswith(f"report: {report}")
    more = subprocess.run(verbose(cmd), cwd=ROOT, env=fuzz_env(tmp_path, 0.01), capture_output=True, text=True,
                          timeout=300).stdout
    assert "Hypothesis Statistics" in more and "time in worker-seconds" in more
    header = next(line for line in more.splitlines() if line.startswith("property") and "generation" in line)
    assert "comparison  device wait" in header, header  # each column name apart from the next


def test_a_tests_time_goes_to_one_column_each_second_shrinking_after_its_first_failure() -> None:
    """fuzz/profiles.py Tally: between begin and end every second lands in one column: the time
    between cases in generation, each case's phases (kernel as compile when it compiled), the
    rest of it in runner, a crashed case whole in cut_short, after the first failure shrinking."""
    from fuzz.profiles import Tally

    tally = Tally()

    def case(seconds: float, **kw: Any) -> None:
        began = time.perf_counter()
        time.sleep(seconds)
        tally.add("oracle", seconds, 0.0, began=began, **kw)

    outer = time.perf_counter()
    tally.begin("oracle")
    inner = time.perf_counter()
    time.sleep(0.02)
    case(0.03, compiled=True, phases={"inputs": 0.005, "kernel": 0.01}, labels=["fwd a", "bwd a"])
    case(0.02, phases={"kernel": 0.004, "oracle": 0.003, "comparison": 0.002}, labels=["fwd a", "bwd b"])
    case(0.02, failed=True, lost=True, labels=["fwd c", "bwd c"])  # the first failure: a crash
    case(0.02, failed=True, phases={"kernel": 0.5}, labels=["fwd c", "bwd c"])  # a shrink candidate
    time.sleep(0.01)
    inner_end = time.perf_counter()
    tally.end()
    outer_end = time.perf_counter()
    doc = tally.drain()
    t = doc["time"]["oracle"]
    assert (t["compile"], t["kernel"], t["inputs"], t["oracle"], t["comparison"]) == (0.01, 0.004, 0.005, 0.003, 0.002)
    assert t["runner"] >= 0.03 + 0.02 - 0.024 and t["cut_short"] >= 0.02
    assert t["generation"] >= 0.02 and t["shrinking"] >= 0.03
    assert inner_end - inner <= sum(t.values()) <= outer_end - outer
    assert doc["specializations"] == {"fwd a": 2, "bwd a": 1, "bwd b": 1, "fwd c": 2, "bwd c": 2}
    assert doc["cases"] == {"oracle": 4} and doc["warm_cases"] == {"oracle": 3}


def test_a_failure_found_is_reported_even_when_the_run_ends_before_its_shrinking(tmp_path) -> None:
    """fuzz/profiles.py Tally.found: a test's first failing case goes to the progress file's ``pending`` at once
    (what the report merges when the run is cut: an H200 nightly's SIGTERM came while the differential property
    shrank fla's failure, and the report said no failure), one a property; the minimal case's record drops it;
    the recorded failures (what the live FAILED lines count by position) are never rewritten; another
    property's pending one stays and is what ``pending_failures`` reads."""
    import json

    from fuzz.counts import pending_failures
    from fuzz.profiles import Progress, Tally

    tally = Tally()
    tally.progress = Progress(tmp_path / "gw0.json", "gw0")
    tally.found("oracle", "first", {"T": 63})
    tally.found("oracle", "second", {"T": 5})  # a later failing candidate: no second entry
    tally.found("linearity", "other", {"T": 1})

    def on_file() -> dict[str, Any]:
        return json.loads((tmp_path / "gw0.json").read_text())

    assert [(f["property"], f["message"]) for f in on_file()["pending"]] == [("oracle", "first"), ("linearity", "other")]
    assert on_file()["failures"] == []
    tally.fail("oracle", "regressions/oracle-x.json", "minimal", {"T": 1})
    doc = on_file()
    assert [f["message"] for f in doc["failures"]] == ["minimal"]
    assert [(f["property"], f["pending"]) for f in pending_failures([doc])] == [("linearity", True)]
    assert [f["message"] for f in tally.drain()["failures"]] == ["minimal"]  # the shipped tally: recorded ones only
    bare = Tally()
    bare.found("oracle", "first", {"T": 1})  # no progress file: nothing (its tallies ship at the test's end)
    assert bare.drain()["failures"] == []

def test_specialization_counts_and_times_merge_across_workers(tmp_path, capsys) -> None:
    """Two workers' progress files (fuzz/profiles.py Progress) sum per label and per column, in
    fuzz-report.json's merge (fuzz/conftest.py FuzzReport.counts) and in .ci/nightly_summary.py's
    report of a killed run, which also names the pool labels no case reached."""
    from types import SimpleNamespace

    from fuzz import profiles
    from fuzz.conftest import FuzzReport

    parts = tmp_path / "r.json.parts"
    parts.mkdir()
    for worker, labels in (("gw0", ["fwd a", "bwd a"]), ("gw1", ["fwd a", "bwd b"])):
        progress = profiles.Progress(parts / f"{worker}.json", worker, started=time.time() - 10)  # a 10 s run
        progress.counts.add("oracle", 1.0, 1.0, time={"kernel": 0.75, "runner": 0.25}, labels=labels)
        progress.counts.add_time("oracle", {"generation": 0.5})
        progress.write()
    docs = {p.stem: json.loads(p.read_text()) for p in parts.glob("*.json")}
    merged = FuzzReport.counts(SimpleNamespace(shipped={}, unrecorded=[]), docs)
    assert merged.specializations == {"fwd a": 2, "bwd a": 1, "bwd b": 1}
    assert merged.properties()["oracle"]["time"]["kernel"] == 1.5 and merged.properties()["oracle"]["cases"] == 2

    import importlib.util

    spec = importlib.util.spec_from_file_location("nightly_summary", ROOT / ".ci" / "nightly_summary.py")
    assert spec is not None and spec.loader is not None
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    for doc in docs.values():  # a pooled run: every process noted the pool
        doc["pool"] = ["fwd a", "bwd b", "fwd z"]
        (parts / f"{doc['worker']}.json").write_text(json.dumps(doc))
    report = summary.parts_report(tmp_path / "r.json")
    assert report["specializations"] == {"fwd a": 2, "bwd a": 1, "bwd b": 1}
    assert report["pool_covered"] == 2 and report["pool_without_cases"] == ["fwd z"]
    t = report["time"]
    assert t["workers"] == 2 and sum(t["columns"].values()) == pytest.approx(t["worker_seconds"], abs=0.01)
    assert t["worker_seconds"] >= 20 and t["columns"]["other"] >= 0
    assert t["columns"]["kernel"] == 1.5 and t["columns"]["generation"] == 1.0
    text = "\n".join(summary.fuzz_section(report))
    assert "pool: 2 of 3 specializations covered; pool specializations with no case: fwd z" in text
    assert "Kernel specializations launched: 3" in text and "| oracle | 1.0 | 0.0 | 0.0 | 1.5 |" in text


def test_phases_count_each_second_once_in_the_innermost_phase() -> None:
    from wy_ascend.testing.phases import phase, take

    take()
    with phase("comparison"):
        time.sleep(0.02)
        with phase("oracle"):
            time.sleep(0.03)
    seconds = take()
    assert set(seconds) == {"comparison", "oracle"} and take() == {}
    assert 0.02 <= seconds["comparison"] < 0.03 <= seconds["oracle"]


def test_specialization_labels_are_the_kernels_a_property_launches() -> None:
    from wy_ascend.testing.case import Case
    from wy_ascend.testing.properties import specialization_labels

    case = Case(T=20, backend="cpu")
    fwd, bwd = specialization_labels("oracle", case)
    assert fwd.startswith("cpu:fwd H=1 HV=1 BT=16 ") and bwd.startswith("cpu:bwd H=1 HV=1 BT=16 ")
    assert specialization_labels("plan_coverage", case) == specialization_labels("bad_input", case) == []
    assert specialization_labels("oracle", case.replace(knobs={"ub_bytes": 4096})) == []  # no plan fits


def test_the_time_outside_the_properties_is_named() -> None:
    """Replays and other tests, worker start-up and idle workers have columns of their own
    (fuzz/accounting.py); with them, ``other`` is what is left of the run's worker-seconds."""
    from fuzz.accounting import Accounting
    from fuzz.counts import OUTSIDE_COLUMNS, RUN_COLUMNS, breakdown

    acc = Accounting(lambda nodeid: "test_fuzz.py" in nodeid)
    acc.began = 0.0
    acc.report("fuzz/test_regressions.py::test_replay[a]", "call", 3.0)
    acc.report("fuzz/test_fuzz.py::test_oracle", "call", 50.0)  # a property test: its cases' columns hold it
    acc.created, acc.ready, acc.down = {"gw0": 10.0, "gw1": 10.0}, {"gw0": 14.0, "gw1": 12.0}, {"gw0": 90.0}
    outside = acc.columns(now=100.0, warmup_end=11.0)
    assert outside == {"replay": 3.0, "startup": 4.0, "idle": 10.0}  # startup after the warm-up: 3 + 1
    t = breakdown({"oracle": {"time": {"kernel": 80.0}}}, 100.0, 2, 1.0, outside)
    assert set(t["columns"]) == set(RUN_COLUMNS) and set(OUTSIDE_COLUMNS) <= set(t["columns"])
    assert t["columns"]["other"] == 200.0 - 80.0 - 17.0 - 2.0


def test_a_replay_cut_short_by_the_runs_end_is_named(monkeypatch) -> None:
    """A replay still running when the run is cut (SIGTERM at the nightly's limit) never reports: its
    time up to the cut, less its phases already reported, is ``replay``; one that ended adds nothing
    more; a property test's start adds nothing (its cases' columns hold it)."""
    import fuzz.accounting as accounting
    from fuzz.accounting import Accounting

    clock = iter([10.0, 20.0, 30.0])
    monkeypatch.setattr(accounting.time, "perf_counter", lambda: next(clock))
    acc = Accounting(lambda nodeid: "test_fuzz.py" in nodeid)  # began at 10
    acc.started("fuzz/test_regressions.py::test_replay[cut]")  # at 20
    acc.report("fuzz/test_regressions.py::test_replay[cut]", "setup", 1.0)
    acc.started("fuzz/test_regressions.py::test_replay[done]")  # at 30
    acc.report("fuzz/test_regressions.py::test_replay[done]", "call", 4.0)
    acc.report("fuzz/test_regressions.py::test_replay[done]", "teardown", 0.5)
    acc.started("fuzz/test_fuzz.py::test_oracle")
    assert acc.columns(now=100.0, warmup_end=0.0)["replay"] == 1.0 + 4.5 + (100.0 - 20.0 - 1.0)


def test_a_group_of_failures_is_reported_by_its_errors_not_its_frame() -> None:
    """Hypothesis' several distinct failures come as an exception group whose report ends in its frame
    (``+-----``): the report's message is each member's ``E`` line (a nightly once showed only frames)."""
    from fuzz.conftest import failure_message

    longrepr = ("  + Exception Group Traceback (most recent call last):\n"
                "  |   File \"x.py\", line 1, in f\n"
                "  | ExceptionGroup: Hypothesis found 2 distinct failures. (2 sub-exceptions)\n"
                "  +-+---------------- 1 ----------------\n"
                "    | E   wy_ascend.testing.failure.PropertyFailure: dg: 3 elements differ\n"
                "    +---------------- 2 ----------------\n"
                "    | E   RuntimeError: CUDA out of memory\n"
                "    +------------------------------------")
    message = failure_message(longrepr)
    assert "dg: 3 elements differ" in message and "CUDA out of memory" in message, message
    assert failure_message("E   ValueError: bad\nlast line") == "ValueError: bad"
    assert failure_message(None) == "failed"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text("abcxyz:=", min_size=1, max_size=6), unique=True, max_size=40), st.data())
def test_the_pool_line_names_a_few_uncovered_specializations_and_counts_the_rest(labels: list[str], data: Any) -> None:
    """The summary's pool line stays one short line however many pool specializations got no case (a cut
    nightly leaves a hundred): it names the first POOL_LINE_NAMES in pool order and counts the others."""
    from fuzz.counts import POOL_LINE_NAMES, pool_coverage, pool_line

    covered = data.draw(st.sets(st.sampled_from(labels)) if labels else st.just(set()))
    report = pool_coverage(labels, {label: 1 for label in covered})
    line = pool_line(report)
    missing = [label for label in labels if label not in covered]
    assert line.startswith(f"pool: {len(labels) - len(missing)} of {len(labels)} specializations covered; ")
    listed = line.split("pool specializations with no case: ", 1)[1]
    shown = missing[:POOL_LINE_NAMES]
    assert listed.startswith(", ".join(shown) or "none")
    rest = len(missing) - len(shown)
    assert (f"and {rest} more (the report's pool_without_cases)" in listed) == (rest > 0)
    assert all(label not in listed.split(", ") for label in missing[POOL_LINE_NAMES:])
