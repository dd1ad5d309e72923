"""Crashes and hangs become files: the case runner (wy_ascend.testing.runner) end to end.

A planted abort (``os.abort()`` in ``ops._Call.launch`` for T >= 33) and a planted hang
(``time.sleep`` in ``planning.program_tasks`` for launches over 3 or more heads) are each applied to a copy of
``src/`` (as mutation/mutants.py does), which goes first on PYTHONPATH of a ``pytest fuzz/`` run
with a temp store and report. The run must end normally (the abort kills a case runner's child, not
the xdist worker), leave ``crash-*.json``/``timeout-*.json`` with the signal or the limit and
the versions, keep the child's stack dump out of the terminal (it is in the worker's log), and
``wy-ascend replay`` of the file must print CRASH / TIMEOUT and exit 1, with no traceback.
The runner's own contract (failures come back as themselves, crashes, timeouts, restarts)
is checked directly on small cases.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.testing import child
from wy_ascend.testing import runner as runner_module
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure
from wy_ascend.testing.runner import CaseCrashed, CaseRunner, CaseTimeout, RemoteTraceback

ROOT = Path(__file__).resolve().parents[1]
ABORT = ("ops.py", "        p = self.problem\n        inputs = dict(",
         "        p = self.problem\n        if p.T >= 33:\n            import os\n            os.abort()\n"
         "        inputs = dict(")
# In program_tasks (the plan_coverage property's walk over a plan), not in plan: the fuzz
# strategies plan too, in the worker itself, where no time limit applies.
HANG = ("planning.py", '    if mode == "grid":\n        x, y = program\n',
        '    if launch.bh_count >= 3:\n        import time\n        time.sleep(600)\n'
        '    if mode == "grid":\n        x, y = program\n')
PLAN_CASE = Case(T=40, HV=2)  # plan_coverage: plans only, milliseconds
# The runner's contract holds on every backend: a spawned child runs the backend under test; a
# forked one (the fork server) only ever runs the cpu backend, as no device runtime may see a fork.
FORK_SERVER = [False, pytest.param(True, marks=pytest.mark.cpu_interpreter)]


def _plant(tmp_path_factory: pytest.TempPathFactory, bug: tuple[str, str, str]) -> Path:
    """A copy of src/ with ``bug`` planted (its snippet must occur exactly once)."""
    src = tmp_path_factory.mktemp("planted") / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    file, snippet, replacement = bug
    path = src / "wy_ascend" / file
    text = path.read_text()
    assert text.count(snippet) == 1, f"{file}: the planted snippet no longer matches the source"
    path.write_text(text.replace(snippet, replacement))
    return src


@pytest.fixture(scope="module")
def aborting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _plant(tmp_path_factory, ABORT)


@pytest.fixture(scope="module")
def hanging(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _plant(tmp_path_factory, HANG)


def _env(src: Path, tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WY_ASCEND_", "PYTEST_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(src), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
               WY_ASCEND_REGRESSIONS=str(tmp / "store"), WY_ASCEND_FUZZ_REPORT=str(tmp / "report.json"),
               WY_ASCEND_FUZZ_SCALE="0.05", WY_ASCEND_BACKEND="cpu", **extra)
    return env


def _run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _replay(path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return _run(["-m", "wy_ascend.cli", "replay", str(path), *args], env)


def _shrunk(store: Path, kind: str, size: Callable[[dict], int]) -> Path:
    """The shrunk ``kind`` file of a run: the smallest case among at most two, the other being
    the first one seen, recorded before shrinking (fuzz/test_fuzz.py) when it was not minimal."""
    paths = sorted(store.glob(f"{kind}-*.json"))
    assert 1 <= len(paths) <= 2, paths
    return min(paths, key=lambda p: size(json.loads(p.read_text())["case"]))


@pytest.mark.slow  # a fuzz run in a subprocess: ~30-60 s on 2 idle cores
@pytest.mark.cpu_interpreter
def test_planted_abort_is_a_crash_file_and_replays_as_crash(aborting: Path, tmp_path: Path) -> None:
    env = _env(aborting, tmp_path)
    run = _run(["-m", "pytest", "fuzz/test_fuzz.py", "-k", "oracle or bad_input", "--profile", "ci", "-n", "2",
                "-p", "no:cacheprovider"], env)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out  # failed tests, not a crashed worker or an internal error
    assert "Fatal Python error" not in out and "Current thread" not in out and "node down" not in out, out
    path = _shrunk(tmp_path / "store", "crash", lambda case: case["T"])
    record = json.loads(path.read_text())
    assert record["property"] == "oracle" and record["failure"]["type"] == "CaseCrashed"
    assert record["failure"]["signal"] == "SIGABRT" and record["failure"]["exitcode"] == -signal.SIGABRT
    assert set(record["versions"]) >= {"wy_ascend", "torch", "triton", "python"}
    assert record["case"]["T"] == 33  # shrunk to the smallest length that aborts
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    # The stack dump is in the worker's log, named in the failure.
    log = Path(record["failure"]["log"])
    assert log.parent == tmp_path / "report.json.logs" and "Fatal Python error: Aborted" in log.read_text()
    assert "in launch" in log.read_text()
    # The run went on: bad_input ran its cases and passed; the report names the crash file.
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["properties"]["bad_input"]["cases"] > 0 and report["properties"]["bad_input"]["failures"] == 0
    assert report["regressions"] == sorted(str(p) for p in (tmp_path / "store").glob("crash-*.json"))
    assert "FAILED fuzz/test_fuzz.py::test_oracle" in out and "passed" in out.splitlines()[-1]

    replay = _replay(path, env, "--backend", "cpu")
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "CRASH: case crashed the runner: killed by SIGABRT" in replay.stdout
    assert "Traceback" not in replay.stdout + replay.stderr and "Fatal Python error" not in replay.stdout + replay.stderr


@pytest.mark.slow  # a fuzz run in a subprocess: ~30-60 s on 2 idle cores
@pytest.mark.cpu_interpreter
def test_planted_hang_is_a_timeout_file_and_replays_as_timeout(hanging: Path, tmp_path: Path) -> None:
    env = _env(hanging, tmp_path, WY_ASCEND_CASE_TIMEOUT="1")
    run = _run(["-m", "pytest", "fuzz/test_fuzz.py", "-k", "plan_coverage", "--profile", "ci", "-p", "no:xdist",
                "-p", "no:cacheprovider"], env)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    path = _shrunk(tmp_path / "store", "timeout", lambda case: case["B"] * case["HV"])
    record = json.loads(path.read_text())
    assert record["property"] == "plan_coverage" and record["failure"]["type"] == "CaseTimeout"
    assert record["failure"]["limit_s"] == 1.0 and record["case"]["B"] * record["case"]["HV"] == 3  # shrunk

    assert "time.sleep" not in out and "Thread 0x" not in out, out  # the SIGUSR1 stack dump went to the log
    assert "in program_tasks" in Path(record["failure"]["log"]).read_text()

    replay = _replay(path, env, "--timeout", "1")
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "TIMEOUT: case ran past the time limit of 1 s" in replay.stdout
    assert "Traceback" not in replay.stdout + replay.stderr


# ---------------------------------------------------------------------- the runner itself


@pytest.mark.parametrize("fork_server", FORK_SERVER, ids=["spawned", "forked"])
def test_runner_results_failures_crashes_and_timeouts(tmp_path: Path, hanging: Path, fork_server: bool,
                                                      backend: str) -> None:
    log = tmp_path / "runner.log"
    backend = "cpu" if fork_server else backend
    case = PLAN_CASE.replace(backend=backend)
    with CaseRunner(log, timeout_s=60, fork_server=fork_server, backend=backend,
                    path=[str(hanging), *sys.path]) as runner:
        outcome = runner.run("plan_coverage", case)
        assert outcome.metrics["fwd"]["tasks"] == 6 and not outcome.compiled and outcome.cpu_seconds >= 0
        # A property failure comes back as itself, raised at the child's line, the child's traceback its cause.
        with pytest.raises(PropertyFailure, match="memory_layout needs a case with memory layouts") as info:
            runner.run("memory_layout", case)
        assert isinstance(info.value.__cause__, RemoteTraceback)
        assert info.traceback[-1].path.name == "invariance.py"  # check_memory_layout
        # The cause prints as the child's traceback, on lines of its own below the parent's.
        child_tb = str(info.value.__cause__)
        assert child_tb.startswith("\nTraceback (most recent call last):") and "in run_property" in child_tb
        pid = runner.child.pid if runner.child else None
        # A signal is a crash; the next case gets a new child.
        os.kill(pid, signal.SIGSEGV)  # type: ignore[arg-type]
        with pytest.raises(CaseCrashed, match="killed by SIGSEGV") as crash:
            runner.run("plan_coverage", case)
        assert crash.value.detail["signal"] == "SIGSEGV" and crash.value.detail["log"] == str(log)
        assert runner.run("plan_coverage", case).metrics == outcome.metrics and runner.starts == 2
        # Past the limit: killed at once, a timeout, its stacks in the log. The bound: 1 s of
        # limit, DUMP_GRACE_S for the stack dump, and slack for a loaded machine, well under the
        # 30 s the runner would wait for a child it had not killed to exit by itself.
        started = time.monotonic()
        with pytest.raises(CaseTimeout, match="time limit of 1 s") as late:
            runner.run("plan_coverage", case.replace(HV=3), timeout_s=1)
        assert time.monotonic() - started < 15
        assert late.value.detail["limit_s"] == 1
        assert runner.run("plan_coverage", case).metrics == outcome.metrics and runner.starts == 3
    text = log.read_text()
    assert "Fatal Python error: Segmentation fault" in text and "in program_tasks" in text


@pytest.mark.cpu_interpreter
def test_errors_keep_the_cpu_child_and_replace_a_device_backends_child(tmp_path: Path) -> None:
    # Any error but a property failure on a device backend may leave its context unusable (a
    # device fault): the runner drops that child. On the cpu backend the child stays.
    with CaseRunner(tmp_path / "runner.log", timeout_s=60, backend="cpu") as runner:
        with pytest.raises(ValueError, match="property must be one of"):
            runner.run("no_such_property", PLAN_CASE)
        assert runner.child is not None and runner.starts == 1
        device = "npu" if torch.cuda.is_available() else "cuda"  # a device backend this machine lacks
        with pytest.raises(Exception, match=f"backend '{device}' is unavailable"):
            runner.run("oracle", PLAN_CASE.replace(backend=device))
        assert runner.child is None
        assert runner.run("plan_coverage", PLAN_CASE).metrics["fwd"]["tasks"] == 6 and runner.starts == 2


def test_a_child_that_dies_before_it_is_ready_is_a_crash(tmp_path: Path) -> None:
    # A child whose sys.path cannot import what it needs exits before its "ready": the package itself,
    # or, where an editable install finds the package without sys.path (setuptools' finder hook, as
    # install.py's .venv has it), the standard library modules the package imports.
    with CaseRunner(tmp_path / "runner.log", timeout_s=60, fork_server=False, backend="cpu",
                    path=[str(tmp_path / "nowhere")]) as runner:
        with pytest.raises(CaseCrashed, match="the case runner did not start") as info:
            runner.run("plan_coverage", PLAN_CASE)
        assert info.value.detail["exitcode"] == 1 and runner.child is None
    assert "ModuleNotFoundError: No module named " in (tmp_path / "runner.log").read_text()


def test_a_fork_server_that_hangs_at_start_is_stopped_at_its_start_timeout(tmp_path: Path, monkeypatch) -> None:
    """A fork server whose imports hang (here: a stand-in package whose serve_forks sleeps) is killed
    and reported once START_TIMEOUT_S has passed, not waited on until it exits by itself."""
    fake = tmp_path / "fake" / "wy_ascend" / "testing"
    fake.mkdir(parents=True)
    for init in (fake.parent / "__init__.py", fake / "__init__.py"):
        init.write_text("")
    (fake / "runner.py").write_text("def serve_forks():\n    import time\n    time.sleep(60)\n")
    monkeypatch.setattr(runner_module, "START_TIMEOUT_S", 1.0)
    start = time.monotonic()
    with open(tmp_path / "zygote.log", "ab") as log, pytest.raises(EOFError, match="did not start within 1 s"):
        runner_module._Zygote([str(tmp_path / "fake")], dict(os.environ), log)
    assert time.monotonic() - start < 20  # 1 s, then up to 5 s for the stopped server to exit


def test_a_child_binds_the_accelerator_its_runner_names(monkeypatch) -> None:
    """WY_ASCEND_RUNNER_DEVICE "npu:N" / "cuda:N" makes the child set that device before any case (the
    device pool's one-GPU-per-worker); "cpu" or nothing sets none. torch_npu and CUDA are stand-ins here,
    recording the calls (no accelerator on CI)."""
    import types

    calls: list[tuple[str, int]] = []
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    monkeypatch.setattr(torch, "npu", types.SimpleNamespace(set_device=lambda i: calls.append(("npu", i))), raising=False)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.append(("cuda", i)))
    for device in ("npu:3", "cuda:1", "cpu", None, ""):
        child.bind_device(device)
    assert calls == [("npu", 3), ("cuda", 1)]


def test_raise_at_raises_the_error_itself_at_the_childs_place() -> None:
    from wy_ascend.testing.runner import _raise_at

    error = ValueError("from the child")  # as unpickled: no traceback yet
    with pytest.raises(ValueError) as plain:
        _raise_at(error, None)
    assert plain.value is error
    error = ValueError("from the child")
    with pytest.raises(ValueError) as placed:
        _raise_at(error, ("/somewhere/child.py", 7))
    assert placed.value is error and (Path(placed.traceback[-1].path).name, placed.traceback[-1].lineno + 1) == ("child.py", 7)


@settings(max_examples=30, deadline=None)
@given(value=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=8)
       .filter(lambda v: v.strip() not in ("", "0", "1")))
def test_the_child_names_the_innermost_frame_as_the_place_raised(value: str) -> None:
    """raised_at, what the child sends as the place of a failure: the file and line of the raise itself, not
    of its caller. env.switch refuses any value but 0 and 1 with a raise of its own, in env.py, called from
    this file (two files); without a traceback there is no place."""
    import linecache

    from wy_ascend import env
    from wy_ascend.testing.runner import raised_at

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WY_TEST_SWITCH", value)
        with pytest.raises(ValueError, match="WY_TEST_SWITCH must be 1 or 0") as info:
            env.switch("WY_TEST_SWITCH", False)
    origin = raised_at(info.value)
    assert origin is not None and Path(origin[0]) == Path(env.__file__)
    assert linecache.getline(*origin).strip().startswith("raise ValueError"), origin
    assert raised_at(ValueError("never raised")) is None


def test_unpicklable_exception_comes_back_as_runtime_error(tmp_path: Path) -> None:
    from wy_ascend.testing.runner import _portable

    class Odd(Exception):
        def __init__(self, a: int, b: int) -> None:
            super().__init__(f"{a}/{b}")

    error = _portable(Odd(1, 2))
    assert isinstance(error, RuntimeError) and "Odd: 1/2" in str(error)
    failure = PropertyFailure("m", {"w": {"rel_rms": __import__("torch").tensor(0.5)}})
    assert _portable(failure) is failure and failure.metrics == {"w": {"rel_rms": 0.5}}


@pytest.mark.parametrize("value, error", [
    ("", None), ("2.5", None), ("0", "must be a number of seconds > 0"), ("-1", "must be a number of seconds > 0"),
    ("nan", "must be a number of seconds > 0"), ("soon", "must be a number of seconds > 0"),
])
def test_the_case_timeout_variable_takes_positive_seconds(monkeypatch, value: str, error: str | None) -> None:
    from wy_ascend.testing.runner import TIMEOUT_ENV, case_timeout

    monkeypatch.setenv(TIMEOUT_ENV, value)
    if error is None:
        assert case_timeout(7.0) == (float(value) if value else 7.0)
    else:
        with pytest.raises(ValueError, match=f"{TIMEOUT_ENV} {error}, got '{value}'"):
            case_timeout(7.0)


@pytest.mark.parametrize("fork_server", FORK_SERVER, ids=["spawned", "forked"])
def test_lost_children_leave_no_open_descriptors(tmp_path: Path, fork_server: bool, backend: str) -> None:
    """Each child that crashes or runs late is reaped with its pipes closed: a long fuzz run
    loses many (crashes, timeouts, device errors) and must not run out of descriptors."""
    def open_fds() -> set[str]:
        return set(os.listdir("/proc/self/fd"))

    backend = "cpu" if fork_server else backend
    case = PLAN_CASE.replace(backend=backend)
    with CaseRunner(tmp_path / "runner.log", timeout_s=60, fork_server=fork_server, backend=backend) as runner:
        runner.run("plan_coverage", case)  # the template (forked) and the log are open from here on
        before = open_fds()
        for _ in range(3):
            os.kill(runner.child.pid, signal.SIGKILL)  # type: ignore[union-attr]
            with pytest.raises(CaseCrashed):
                runner.run("plan_coverage", case)
            runner.run("plan_coverage", case)
        runner._stop()
        after = open_fds()
        assert runner.starts == 4 and after <= before  # nothing the three lost children had is still open
        assert len(before - after) >= 2  # and the last child's two pipe ends are closed too


def test_a_child_reads_no_stdin_and_prints_to_the_log() -> None:
    """A case child's stdin is /dev/null (a read gets end of file at once: nothing in a case can wait on
    the terminal or on the fuzz worker's pipe, a hang) and its stdout is its stderr, the log (no print
    reaches a pipe): ``_child_setup``, run in a child whose stdin is a pipe kept open."""
    code = ("from wy_ascend.testing.runner import _child_setup\n_child_setup()\nimport os\n"
            "os.write(2, b'stdin at end of file' if os.read(0, 1) == b'' else b'stdin read')\nprint(' printed')\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        assert child.wait(timeout=30) == 0  # with stdin left on the open pipe the read would block here
    finally:
        child.kill()
        assert child.stdin is not None
        child.stdin.close()
    out, err = child.stdout.read(), child.stderr.read()  # type: ignore[union-attr]
    assert out == b"" and err.decode().strip() == "stdin at end of file printed"


@pytest.mark.cpu_interpreter
def test_the_fork_servers_start_timeout_ends_with_its_start(tmp_path: Path) -> None:
    """The fork server's socket waits START_TIMEOUT_S for the start only; afterwards a request (a case's
    wait, up to its own limit, which may be longer) waits as long as it takes."""
    with CaseRunner(tmp_path / "runner.log", timeout_s=60, fork_server=True, backend="cpu") as runner:
        runner.run("plan_coverage", PLAN_CASE)
        assert runner._zygote is not None and runner._zygote.sock.gettimeout() is None


def test_a_device_fault_is_told_from_a_result_or_a_refusal() -> None:
    """A kernel's fault on a device (recorded at once by the fuzz run: its replays may differ) against the
    errors a case may raise that are no fault."""
    from wy_ascend.testing.failure import PropertyFailure
    from wy_ascend.testing.runner import device_fault

    faults = [RuntimeError("CUDA error: an illegal memory access was encountered"),
              RuntimeError("Triton Error [CUDA]: unspecified launch failure"),
              RuntimeError("CUDA error: device-side assert triggered"), type("AcceleratorError", (RuntimeError,), {})("x")]
    others = [PropertyFailure("kernel differs from the float64 oracle: dk: rel_rms 5.3"),
              ValueError("k must be 4-D"), RuntimeError("CUDA out of memory. Tried to allocate 4.14 GiB")]
    assert all(device_fault(e) for e in faults)
    assert not any(device_fault(e) for e in others)


def test_a_helper_whose_parent_is_gone_before_it_asked_to_die_with_it_exits(monkeypatch) -> None:
    """die_with_parent: the kernel's death signal covers a parent that dies after the request; one already
    gone (the child reparented to init, pid 1) must end the child at once, or it outlives the fuzz worker
    (a generated mutant comparing the parent's pid with 0 survived every CI test)."""
    import os

    from wy_ascend.testing import child

    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", lambda code: exits.append(code))
    monkeypatch.setattr(os, "getppid", lambda: 1)
    child.die_with_parent()
    assert exits == [1]
    monkeypatch.setattr(os, "getppid", lambda: 4242)
    child.die_with_parent()
    assert exits == [1]


@pytest.mark.parametrize("platform", ["darwin", "win32", "freebsd14"])
def test_die_with_parent_asks_nothing_off_linux(monkeypatch, platform: str) -> None:
    """PR_SET_PDEATHSIG is Linux's: elsewhere die_with_parent loads no library, asks for no signal and never
    ends the process (a reparented child is not a dead parent there: launchd, not init, may adopt it)."""
    import ctypes
    import os
    import sys

    from wy_ascend.testing import child

    touched: list[str] = []
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: touched.append("CDLL"))
    monkeypatch.setattr(os, "_exit", lambda code: touched.append(f"exit {code}"))
    monkeypatch.setattr(os, "getppid", lambda: 1)
    child.die_with_parent()
    assert touched == []


def _alive(pid: int) -> bool:
    """The process runs (or is stopped): it exists and is no zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.cpu_interpreter
@pytest.mark.parametrize("fork_server", [False, True], ids=["spawned", "forked"])
def test_close_ends_a_child_that_does_not_answer(tmp_path: Path, fork_server: bool) -> None:
    """close() leaves no child behind and returns within seconds, whatever the child does with the end of its
    input: here it is stopped (SIGSTOP: it cannot read the EOF, as in a case stuck in a kernel). A child left
    running would hold a worker's memory, or its device, after the run that started it is gone."""
    runner = CaseRunner(tmp_path / "runner.log", timeout_s=60, fork_server=fork_server, backend="cpu")
    runner.start()
    assert runner.child is not None
    pid = runner.child.pid
    try:
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        runner.close()
        took = time.monotonic() - started
        assert not _alive(pid), "close() left its stopped child alive"
        assert took < 20, f"close() took {took:.0f} s"  # 5 s for the EOF, then the kill's reaping
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.cpu_interpreter
@pytest.mark.parametrize("fork_server", [False, True], ids=["spawned", "forked"])
def test_a_closed_runner_starts_again_on_its_next_case_into_the_same_log(tmp_path: Path, fork_server: bool) -> None:
    """close() ends the runner's processes and its log, not the runner: its next case starts a child again (and a
    template, forked) that writes to the same log, after what the first child wrote (a replay or a fuzz worker
    that closes between uses gets a working runner back, never a child writing to a closed file)."""
    log = tmp_path / "runner.log"
    runner = CaseRunner(log, timeout_s=60, fork_server=fork_server, backend="cpu")
    try:
        pids = []
        for _ in range(2):
            runner.run("plan_coverage", PLAN_CASE)
            assert runner.child is not None
            pids.append(runner.child.pid)
            runner.close()
            assert not _alive(pids[-1])
        assert runner.starts == 2 and pids[0] != pids[1]
        started = [line for line in log.read_text().splitlines() if line.startswith("=== case runner pid ")]
        assert [int(line.split()[4]) for line in started] == pids
    finally:
        runner.close()


@pytest.mark.cpu_interpreter
def test_close_reaps_the_fork_server(tmp_path: Path) -> None:
    """close() waits for the fork server (the template each case's child is forked from) to exit on its socket's
    EOF and reaps it: none is left a zombie in the runner's process, which a fuzz worker keeps for its whole run
    while closing runners many times."""
    runner = CaseRunner(tmp_path / "runner.log", timeout_s=60, fork_server=True, backend="cpu")
    try:
        runner.run("plan_coverage", PLAN_CASE)
        zygote = runner._zygote
        assert zygote is not None
        runner.close()
        assert zygote.popen.returncode is not None and not Path(f"/proc/{zygote.popen.pid}").exists()
    finally:
        runner.close()


# ----------------------------------------------------------------------------- the runner's bookkeeping, in-process


class _Stub(runner_module._Child):
    """A child stand-in: ``wait`` answers from ``waits`` in turn; kills, releases and a sent message are recorded;
    ``send_error`` is what sending a case raises (a broken pipe: the child is gone), ``receive_error`` what
    waiting for its reply raises."""

    def __init__(self, waits: list[int | None], send_error: BaseException | None = None,
                 receive_error: BaseException | None = None) -> None:
        self.pid, self.waits, self.kills, self.released = 0, list(waits), [], False

        def send(message: object) -> None:
            if send_error is not None:
                raise send_error

        def receive(deadline: float) -> object:
            if receive_error is not None:
                raise receive_error
            return ("ready", 0)

        self.channel = SimpleNamespace(send=send, receive=receive, close=lambda: None)

    def wait(self, timeout: float) -> int | None:
        return self.waits.pop(0)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.kills.append(sig)

    def release(self) -> None:
        self.released = True


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(st.one_of(st.none(), st.integers(-200, 300)))
def test_a_return_code_is_named_by_its_signal_or_its_number(code: int | None) -> None:
    """signal_name over return codes: none for an exit (>= 0 or None), the signal's name for a known signal,
    "signal N" for a number no signal has (a crash's detail and message must not fail on it)."""
    name = runner_module.signal_name(code)
    if code is None or code >= 0:
        assert name is None
    elif -code in {int(s) for s in signal.Signals}:
        assert name == signal.Signals(-code).name and name.startswith("SIG")
    else:
        assert name == f"signal {-code}"
        assert runner_module._exit_text(code) == f"killed by signal {-code}"


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.one_of(st.none(), st.just(""), st.sampled_from(["cuda:0", "npu:3"]), st.text(min_size=1)),
       st.one_of(st.none(), st.just(""), st.sampled_from(["cpu", "cuda", "npu"])))
def test_a_childs_environment_names_the_device_and_backend_its_runner_names(device: str | None,
                                                                         backend: str | None) -> None:
    """_environment: the runner's device (WY_ASCEND_RUNNER_DEVICE) and backend are set where named (a non-empty
    name), absent otherwise, over the runner's own environment, which is kept."""
    base = {"PATH": "/bin", "KEEP": "1"}
    env = CaseRunner(Path("unused.log"), timeout_s=1, device=device, backend=backend, env=base)._environment()
    assert env.get(runner_module.DEVICE_ENV) == (device or None)
    assert env.get(runner_module.BACKEND_ENV) == (backend or None)
    assert {k: env[k] for k in base} == base and base == {"PATH": "/bin", "KEEP": "1"}


@settings(max_examples=12, derandomize=True, database=None, deadline=None)
@given(st.integers(0, 2), st.sampled_from([OSError, EOFError, BrokenPipeError]))
def test_a_dead_fork_server_is_started_again_once(failures: int, error: type[Exception]) -> None:
    """start() with a fork server whose fork fails ``failures`` times: each failed template is closed and
    forgotten and a new one started, once; a second failure is raised (and the runner holds no template)."""
    made: list[SimpleNamespace] = []
    child = _Stub([0])

    def zygote(path: list[str], env: dict[str, str], log: object) -> SimpleNamespace:
        def fork() -> _Stub:
            if len(made) <= failures:
                raise error("planted: the template is gone")
            return child

        made.append(SimpleNamespace(fork=fork, closed=False))
        made[-1].close = lambda z=made[-1]: setattr(z, "closed", True)
        return made[-1]

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner_module, "_Zygote", zygote)
        runner = CaseRunner(Path(tmp) / "runner.log", timeout_s=1, fork_server=True)
        try:
            if failures == 2:
                with pytest.raises(error, match="planted"):
                    runner.start()
                assert runner.child is None and runner._zygote is None and runner.starts == 0
            else:
                runner.start()
                assert runner.child is child and runner._zygote is made[-1] and runner.starts == 1
            assert len(made) == min(failures + 1, 2)
            assert [z.closed for z in made] == [True] * min(failures, 2) + [False] * (failures < 2)
        finally:
            runner.child = None
            runner.close()


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.integers(-64, 255), st.booleans())
def test_a_child_gone_before_its_case_is_sent_is_a_crash_with_its_exit_code(code: int, lingers: bool) -> None:
    """run() when sending the case breaks its pipe (the child is gone): a CaseCrashed naming the child's exit code
    and signal, the child reaped and forgotten; a child that does not exit within the wait is killed (SIGKILL)
    and waited on again (_reap)."""
    runner = CaseRunner(Path("unused.log"), timeout_s=1)
    runner.child = stub = _Stub([None, code] if lingers else [code], send_error=BrokenPipeError())
    with pytest.raises(CaseCrashed, match="case crashed the runner") as crashed:
        runner.run("plan_coverage", PLAN_CASE)
    assert crashed.value.detail["exitcode"] == code
    assert crashed.value.detail["signal"] == runner_module.signal_name(code)
    assert runner.child is None and stub.released and stub.waits == []
    assert stub.kills == ([signal.SIGKILL] if lingers else [])


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.sampled_from([KeyboardInterrupt, SystemExit]), st.booleans(), st.integers(-64, 255), st.booleans())
def test_an_interrupt_while_a_case_runs_kills_the_child_and_goes_on(error: type[BaseException], sending: bool,
                                                                 code: int, lingers: bool) -> None:
    """run() interrupted (Ctrl-C, an exit) while it sends the case or waits for the reply: the child, in an
    unknown state, is killed, reaped and forgotten (the next case gets a new one), and the interrupt goes on
    as itself."""
    runner = CaseRunner(Path("unused.log"), timeout_s=1)
    interrupt = error()
    runner.child = stub = _Stub([None, code] if lingers else [code], **{
        "send_error" if sending else "receive_error": interrupt})
    with pytest.raises(error) as raised:
        runner.run("plan_coverage", PLAN_CASE)
    assert raised.value is interrupt
    assert runner.child is None and stub.released and stub.waits == []
    assert stub.kills == [signal.SIGKILL] * (2 if lingers else 1)


def test_stopping_or_reaping_no_child_does_nothing() -> None:
    """_stop and _reap on a runner that has no child (never started, or already reaped): nothing to kill or wait
    for, and _reap's code is None."""
    runner = CaseRunner(Path("unused.log"), timeout_s=1)
    runner._stop()
    runner._stop(dump=True)
    assert runner._reap() is None and runner.child is None


def test_a_child_kind_says_how_it_waits_and_kill_ignores_a_child_already_gone(monkeypatch) -> None:
    """_Child is abstract in wait (each kind reaps its own way); kill of a pid that is gone (or not ours) is no
    error: a child may exit between the decision to kill it and the kill."""
    child = runner_module._Child()
    child.pid = 12345
    with pytest.raises(NotImplementedError):
        child.wait(1)
    sent: list[tuple[int, int]] = []

    def kill(pid: int, sig: int) -> None:
        sent.append((pid, sig))
        raise (ProcessLookupError if len(sent) == 1 else PermissionError)(pid)

    monkeypatch.setattr(os, "kill", kill)
    child.kill()
    child.kill(signal.SIGUSR1)
    assert sent == [(12345, signal.SIGKILL), (12345, signal.SIGUSR1)]


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(st.one_of(st.just(None), st.integers(1, runner_module._REPLY.size - 1)))
def test_a_fork_server_that_is_gone_or_replies_short_fails_the_fork_and_leaks_no_descriptor(short: int | None) -> None:
    """_Zygote.fork when the template's socket is closed (None) or its reply is cut short (``short`` bytes): an
    EOFError (start() then starts a template again), and the four pipe ends made for the child all closed."""
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    zygote = object.__new__(runner_module._Zygote)
    zygote.sock = ours
    try:
        if short is None:
            theirs.close()
        else:
            theirs.send(b"x" * short)
        before = _open_fds()
        with pytest.raises(EOFError, match="fork server is gone"):
            zygote.fork()
        assert _open_fds() == before
    finally:
        ours.close()
        theirs.close()


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.one_of(st.just("gone"), st.integers(0, runner_module._REPLY.size - 1),
                 st.tuples(st.integers(0, 2), st.integers(-64, 255))))
def test_a_fork_servers_wait_reply_is_an_exit_code_only_when_it_says_exited(reply: object) -> None:
    """_Zygote.wait over the template's answers: (1, code) is the child's exit code; still running (0, _),
    unknown pid (2, _), a reply cut short (``reply`` bytes) or a template gone are None (not yet reaped)."""
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    zygote = object.__new__(runner_module._Zygote)
    zygote.sock = ours
    try:
        if reply == "gone":
            theirs.close()
        elif isinstance(reply, int):
            theirs.send(b"x" * reply)
        else:
            theirs.send(runner_module._REPLY.pack(*reply))
        expected = reply[1] if isinstance(reply, tuple) and reply[0] == 1 else None
        assert zygote.wait(4321, 0.5) == expected
        if reply != "gone":
            assert runner_module._REQUEST.unpack(theirs.recv(64)) == (b"W", 4321, 0.5)
    finally:
        ours.close()
        theirs.close()


@settings(max_examples=10, derandomize=True, database=None, deadline=None)
@given(st.sampled_from(["cpu", "cuda", "npu"]), st.sampled_from([RuntimeError, ImportError, ValueError]))
def test_a_backend_whose_kernels_do_not_load_leaves_the_child_ready(name: str, error: type[Exception]) -> None:
    """_imports with the runner's backend named: its kernels are loaded in that backend's Triton mode; a backend
    that cannot load (any Exception) does not stop the child from starting (its first case says why)."""
    from wy_ascend import backends

    asked: list[object] = []

    def kernels(interpret: object) -> None:
        asked.append(interpret)
        raise error("planted: no such toolchain")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(backends, "_kernels", kernels)
        patch.setenv(runner_module.BACKEND_ENV, name)
        runner_module._imports()
        patch.delenv(runner_module.BACKEND_ENV)
        runner_module._imports()
    assert asked == [backends.BACKENDS[name].interpret]


@settings(max_examples=6, derandomize=True, database=None, deadline=None)
@given(st.integers(0, 255))
def test_the_fork_servers_wait_tells_exited_running_and_unknown_children(code: int) -> None:
    """_wait (the template's answer to a wait request): (1, the exit code) for its child that exited, (0, 0) for one
    still running past the wait, (2, 0) for a pid that is not its child (this process itself)."""
    done = subprocess.Popen(["sh", "-c", f"exit {code}"])
    running = subprocess.Popen(["sleep", "60"])
    try:
        assert runner_module._wait(done.pid, 30) == (1, code)
        assert runner_module._wait(running.pid, 0) == (0, 0)
        assert runner_module._wait(os.getpid(), 0) == (2, 0)
    finally:
        running.kill()
        running.wait()
        done.wait()


@pytest.mark.parametrize("failure", ["no libc", "no prctl"])
def test_die_with_parent_gives_up_quietly_where_prctl_cannot_be_asked(monkeypatch, failure: str) -> None:
    """On Linux without a loadable libc (OSError) or without its prctl (AttributeError), die_with_parent asks
    nothing and returns: it never reads the parent's pid nor ends the process (even one whose parent is init)."""
    import ctypes
    import os
    import sys
    from types import SimpleNamespace

    from wy_ascend.testing import child

    def cdll(*a, **k):
        if failure == "no libc":
            raise OSError("libc.so.6: cannot open shared object file")
        return SimpleNamespace()  # no prctl attribute

    touched: list[str] = []
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(os, "_exit", lambda code: touched.append(f"exit {code}"))
    monkeypatch.setattr(os, "getppid", lambda: touched.append("getppid") or 1)
    child.die_with_parent()
    assert touched == []
