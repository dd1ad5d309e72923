"""pytest wiring of the fuzz suite: run options, worker devices, statistics and fuzz-report.json.

Options (each also read from the environment):

* ``--profile NAME`` / ``WY_ASCEND_PROFILE``: ci, dev (default), nightly, large (fuzz/profiles.py).
* ``--backend NAME`` / ``WY_ASCEND_BACKEND``: cpu (default), cuda, npu, npu-cuda.
* ``--subject NAME`` / ``WY_ASCEND_SUBJECT``: whose ops the cases run (wy_ascend.subjects): wy_ascend
  (default), fla-ascend, fla, an entry point of group ``wy_ascend.subjects`` or an import path
  ``package.module:name``.
* ``--store DIR`` / ``WY_ASCEND_REGRESSIONS``: where failures are stored and replayed from (default
  ``regressions/`` of the directory the run started in; this checkout's for its own replay).
* ``--fuzz-report PATH`` / ``WY_ASCEND_FUZZ_REPORT``: where the machine-readable report goes
  (default ``fuzz-report.json`` in the directory pytest was started from).

Multi-device runs: with pytest-xdist (``-n N``) worker ``gwK`` binds accelerator ``K`` before any
test runs. npu: if ``ASCEND_RT_VISIBLE_DEVICES`` lists devices, the worker keeps only entry
``K mod len``; otherwise it calls ``torch.npu.set_device(K mod count)``. cuda and npu-cuda:
``torch.cuda.set_device(K mod count)``. Tensors built on ``"npu"``/``"cuda"`` then land on the
worker's device. ``WY_ASCEND_NO_DEVICE_MAP=1`` turns the binding off.

Every run prints the reason of every skip and a summary (``summary_lines``: cases, failures, seconds
and cases per second per property, the failures, where the report is; with ``-v`` also the time
breakdown and Hypothesis' statistics) and writes the report: ``{profile, backend, interrupted, properties: {name: {cases,
failures, seconds, cpu_seconds, cases_per_second, warm_cases, warm_seconds,
warm_cases_per_second}}, regressions: [paths], failures: [...], elapsed_seconds, total_cases,
cases_per_second, warm_cases_per_second_per_worker, workers: {worker: device}, tests: {nodeid:
outcome}}`` (outcome ``interrupted``: the item was running when the run stopped). Warm cases
are those that compiled no new kernel (fuzz/counts.py): their rate is the suite's speed once
compiled. Also ``specializations: {label: cases}`` (the kernel specializations the cases
launched, wy_ascend.specialization), ``pool``, ``pool_covered`` and ``pool_without_cases`` (the
run's pool, fuzz/profiles.py ``POOL_LABELS``, and which of it got no case; None without a pool),
``warmup_slow`` (pool entries whose compiles outlasted the warm-up's deadline, left out of the run)
and ``time`` (every worker-second of the run by column, per property under each property's
``time`` and in total, ``other`` the rest: fuzz/counts.py). The report is only
written when a property test ran (a replay of regressions/ alone leaves an earlier report in
place).

Live failure lines: the controller (or the main process) polls the progress files below every
half second and prints ``FAILED <property> (<case>): <message> -> <regression file>`` for each minimal
failing case a worker records, within a second of its file being written, while the run goes on
(the ``F`` and the full report come when the item ends, after Hypothesis has finished with it).
A line per final minimal case only: the examples Hypothesis sees failing while it shrinks are
many and none of them is written anywhere (``LiveFailures``).

Case runners: each process that runs cases runs them in a child process (fuzz/test_fuzz.py,
wy_ascend.testing.runner), which binds the same device (``WY_ASCEND_RUNNER_DEVICE``) and
writes its stderr (warnings, the stack dump of a crash or a timeout) to
``<report>.logs/<worker>.log`` (``WY_ASCEND_CASE_LOG``), not the terminal. The controller
clears that directory when the run starts; the logs stay after it.

Killed runs: every process that runs cases (each xdist worker, or the main process) rewrites
its cumulative counts to ``<report>.parts/<worker>.json`` as it goes (after a case at most every
0.1 s, at once after a failure and at a test's end; ``main`` without xdist; fuzz/profiles.py
``Progress``). The controller clears that directory when the run starts
and removes it once the report is written. It turns SIGTERM (``timeout``, a CI step's time
limit) into KeyboardInterrupt, so pytest still ends the session and writes the report; any
further SIGTERM or SIGINT is ignored while it does (``nox -s fuzz`` passes a SIGTERM it gets on
to pytest as SIGINT and waits for the report). The counts come from the parts files where they exist
(they include the items still running when the run stopped) and from the tallies shipped on
the test reports otherwise, per worker, never both. ``interrupted`` is true when the session
was interrupted (a signal, Ctrl-C, or xdist stopping early): its counts are partial. When even
that fails (SIGKILL), the parts directory stays behind; .ci/nightly_summary.py reads it.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis.errors import Unsatisfiable

from fuzz import profiles
from fuzz.accounting import Accounting
from fuzz.counts import CASE_COLUMNS, RUN_COLUMNS, Counts, breakdown, pending_failures, pool_coverage, pool_line, rate
from fuzz.profiles import DEFAULT_REPORT, PROPERTY_NAMES, REPORT_ENV, TALLY, Progress, RunConfig, select
from fuzz.strategies import KNOWN_LEFT_OUT
from wy_ascend import subjects
from wy_ascend.env import number, switch
from wy_ascend.testing import runner
from wy_ascend.testing.child import share_cores, xdist_workers

_KEY = "wy_fuzz"
_WORKER_KEY = "wy_fuzz_worker"
_PATH_KEY = "wy_fuzz_report"  # the controller's report path, handed to xdist workers


def _add(group: Any, *args: Any, **kwargs: Any) -> None:
    try:
        group.addoption(*args, **kwargs)
    except ValueError:  # another conftest (e.g. tests/) already defines it
        pass


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wy_ascend fuzz")
    _add(group, "--profile", default=None, help="fuzz profile: ci, dev, nightly, large (env WY_ASCEND_PROFILE)")
    _add(group, "--backend", default=None, help="backend: cpu, cuda, npu, npu-cuda (env WY_ASCEND_BACKEND)")
    _add(group, "--subject", default=None,
         help="subject (whose ops run): wy_ascend, fla-ascend, fla, an entry point's name or an import path "
              "package.module:name (env WY_ASCEND_SUBJECT)")
    _add(group, "--store", default=None, help="regression store directory (env WY_ASCEND_REGRESSIONS)")
    _add(group, "--fuzz-report", default=None, help="path of fuzz-report.json (env WY_ASCEND_FUZZ_REPORT)")


def bind_worker_device(backend: str) -> str | None:
    """Bind xdist worker gwK to accelerator K (mod the count); returns what it did, None if nothing."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or switch("WY_ASCEND_NO_DEVICE_MAP", False):
        return None
    index = int(worker[2:])
    if backend == "npu":
        visible = [d for d in os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").split(",") if d.strip()]
        if visible:
            os.environ["ASCEND_RT_VISIBLE_DEVICES"] = visible[index % len(visible)]
            return f"ASCEND_RT_VISIBLE_DEVICES={os.environ['ASCEND_RT_VISIBLE_DEVICES']}"
        import torch
        import torch_npu  # noqa: F401

        device = index % torch.npu.device_count()  # type: ignore[attr-defined]
        torch.npu.set_device(device)  # type: ignore[attr-defined]
        return f"npu:{device}"
    if backend in ("cuda", "npu-cuda"):
        import torch

        if torch.cuda.is_available():
            device = index % torch.cuda.device_count()
            torch.cuda.set_device(device)
            return f"cuda:{device}"
    return None


def _check_backend(backend: str) -> None:
    from wy_ascend.backends import BACKENDS, resolve_backend
    from wy_ascend.errors import BackendUnavailableError
    from wy_ascend.testing.properties import DEVICE_OF

    if backend not in BACKENDS:
        raise pytest.UsageError(f"--backend must be one of {sorted(BACKENDS)}, got {backend!r}")
    try:
        resolve_backend(backend, __import__("torch").device(DEVICE_OF[backend]))
    except BackendUnavailableError as e:
        raise pytest.UsageError(str(e)) from e


def pytest_configure(config: pytest.Config) -> None:
    started = time.perf_counter()  # the report's wall time starts here (a warm-up in configure included)
    from wy_ascend.testing.store import STORE_ENV

    if config.getoption("--store"):  # the workers and case runners this run starts inherit it
        os.environ[STORE_ENV] = str(Path(config.invocation_params.dir, config.getoption("--store")).resolve())
    # the interpreter's harmless warning (pyproject.toml's filter, for a run from another repository too)
    config.addinivalue_line("filterwarnings",
                            "ignore:Conversion of an array with ndim > 0 to a scalar:DeprecationWarning")
    try:
        run = select(config.getoption("--profile"), config.getoption("--backend"), config.getoption("--subject"))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e
    bound = bind_worker_device(run.backend)
    if run.backend == "cpu" and not hasattr(config, "workerinput"):  # before the workers start (testing/child.py)
        share_cores(xdist_workers(config.getoption("numprocesses", None)))
    _check_backend(run.backend)
    _prepare_pool(config, run)
    # Hypothesis' statistics (some 100 lines a run) behind -v; every skip's reason shown
    config.option.hypothesis_show_statistics = config.option.hypothesis_show_statistics or config.option.verbose > 0
    _show_skip_reasons(config)
    config.pluginmanager.register(FuzzReport(config, run, bound, started), "wy_fuzz_report")


def _show_skip_reasons(config: pytest.Config) -> None:
    """``-rs`` unless the command line turned the summary off (``-rN``): a skipped property says why."""
    chars = config.option.reportchars or ""
    if "N" in chars:
        return
    config.option.reportchars = chars + "s"
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None and "s" not in terminal.reportchars:  # configured before this conftest was
        terminal.reportchars += "s"


def _prepare_pool(config: pytest.Config, run: RunConfig) -> None:
    """The run's specialization pool (fuzz/pool.py): its date pinned for the xdist workers (a run
    that passes midnight keeps one pool), its labels noted for the report and, in the controller,
    compiled in parallel before any case (``WY_ASCEND_WARMUP_JOBS`` processes, default the CPU
    count - 1; 0 skips it)."""
    from fuzz import pool, profiles

    os.environ.setdefault(pool.DATE_ENV, datetime.datetime.now(datetime.timezone.utc).date().isoformat())
    try:
        entries = pool.run_pool(run.backend, run.profile.pool)
        jobs = number("WY_ASCEND_WARMUP_JOBS", max(1, (os.cpu_count() or 2) - 1), int, "processes", positive=True)
        deadline = number("WY_ASCEND_WARMUP_DEADLINE", pool.ENTRY_DEADLINE_S, float, "seconds", positive=True)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e
    if entries and jobs > 0 and not hasattr(config, "workerinput"):
        print(pool.describe(entries, run.backend), file=sys.stderr)
        warm = pool.warm_up(entries, jobs, deadline)
        profiles.WARMUP_SECONDS = warm.seconds
        profiles.WARMUP_SLOW = [e.name for e in warm.slow]
        if warm.slow:  # the workers (started after this) leave them out too
            os.environ[pool.SKIP_ENV] = ",".join(str(entries.index(e)) for e in warm.slow)
            entries = pool.run_pool(run.backend, run.profile.pool)
    profiles.POOL_LABELS = sorted(label for e in entries for label in e.labels) if entries else None



def failure_message(longrepr: Any) -> str:
    """What a failed test's report says went wrong, in one line: its ``E`` lines (every exception of a
    group: Hypothesis' several distinct failures, each with its own), else the crash line, else the last
    line. The last line alone of a group's report is its frame (``+-----``), which says nothing."""
    if not longrepr:
        return "failed"
    lines = str(longrepr).strip().splitlines()
    cores = [line.strip().lstrip("|").strip() for line in lines]  # a group's members are framed by "|"
    errors = [e for e in dict.fromkeys(c[1:].strip() for c in cores if c.startswith("E ")) if e]
    if errors:
        return " | ".join(errors)[:2000]
    crash = getattr(longrepr, "reprcrash", None)
    return crash.message.splitlines()[0] if crash is not None and crash.message else lines[-1]

class FuzzReport:
    """Collects the tally shipped on each test's report and writes the summary and the JSON report.

    In every process that runs cases it also keeps the progress file (``Progress``); in the
    controller (or the main process) it clears stale progress files, turns the first SIGTERM or
    SIGINT into KeyboardInterrupt (ignoring the rest) and merges the progress files into the report.
    """

    def __init__(self, config: pytest.Config, run: RunConfig, bound: str | None, started: float) -> None:
        self.config = config
        self.run = run
        self.bound = bound
        self.start = started  # perf_counter when pytest_configure began
        self.is_worker = hasattr(config, "workerinput")
        self.worker = config.workerinput["workerid"] if self.is_worker else "main"  # type: ignore[attr-defined]
        self.shipped: dict[str, Counts] = {}  # worker -> its tallies shipped on test reports, summed
        self.unrecorded: list[dict[str, Any]] = []  # failed property tests whose tally recorded no failure
        self.tests: dict[str, str] = {}
        self.devices: dict[str, str | None] = {}
        self.nodes: set[str] = set()  # the xdist workers started
        self.accounting = Accounting(lambda nodeid: _property_of(nodeid) is not None)  # the controller's
        self.final: dict[str, Any] | None = None
        self.interrupted = False
        self.path = self.report_path()
        self.parts = self.path.with_name(self.path.name + ".parts")
        logs = self.path.with_name(self.path.name + ".logs")  # the case runners' stderr, one file per worker
        self._interrupt_seen = False
        self._previous: dict[int, Any] = {}  # signal -> the handler it had before
        if not self.is_worker:
            shutil.rmtree(self.parts, ignore_errors=True)  # a killed earlier run's files (workers start later)
            shutil.rmtree(logs, ignore_errors=True)
            self._install_sigterm()
        os.environ[runner.LOG_ENV] = str(logs / f"{self.worker}.log")
        if bound and ":" in bound:  # npu:K / cuda:K; an ASCEND_RT_VISIBLE_DEVICES binding is inherited as it is
            os.environ[runner.DEVICE_ENV] = bound
        try:
            self.parts.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # no progress files then (Progress.write skips); the shipped tallies still make the report
        TALLY.progress = Progress(self.parts / f"{self.worker}.json", self.worker, run.profile.name, run.backend,
                                  bound)
        self.live = None if self.is_worker else LiveFailures(self.parts, Path(config.invocation_params.dir))

    def pytest_sessionstart(self) -> None:
        if self.live is not None:
            terminal = self.config.pluginmanager.get_plugin("terminalreporter")
            self.live.start(markup=terminal is not None and self.config.get_terminal_writer().hasmarkup)

    # ------------------------------------------------------------------ SIGTERM/SIGINT -> KeyboardInterrupt

    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal works in the main thread only (e.g. not under an in-thread runner)
        self._previous = {sig: signal.signal(sig, self._on_interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        # Once, whichever signal comes first: timeout(1) signals its child and then the child's
        # process group, and `nox -s fuzz` passes its own SIGTERM on as SIGINT (noxfile.py), so
        # more signals often follow the first; they must not interrupt the report being written.
        # The interrupt stays pending in the tally (Tally.interrupt) until pytest has it, in case
        # this KeyboardInterrupt is raised inside a finalizer, where Python drops it.
        if self._interrupt_seen:
            return
        self._interrupt_seen = True
        TALLY.interrupt = signal.Signals(signum).name
        raise KeyboardInterrupt(TALLY.interrupt)

    def pytest_keyboard_interrupt(self) -> None:
        TALLY.interrupt = None  # pytest has it: the session ends and writes the report

    def pytest_unconfigure(self) -> None:
        TALLY.progress = None
        if self.live is not None:
            self.live.stop()
        if threading.current_thread() is threading.main_thread():
            for sig, previous in self._previous.items():  # None: a handler set outside Python
                signal.signal(sig, signal.SIG_DFL if previous is None else previous)
            self._previous = {}

    # ------------------------------------------------------------------ collection of the counts

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller: workers write their progress next to the controller's report."""
        node.workerinput[_PATH_KEY] = str(self.path)
        self.nodes.add(node.workerinput["workerid"])
        self.accounting.node_created(node.workerinput["workerid"])

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        self.accounting.node_ready(node.workerinput["workerid"])

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.accounting.node_down(node.workerinput["workerid"])

    def pytest_report_header(self) -> list[str]:
        p = self.run.profile
        lines = [
            f"wy_ascend fuzz: profile {p.name} ({p.description}), backend {self.run.backend}, "
            f"subject {self.run.subject} {subjects.get(self.run.subject).installed_version}, "
            f"examples {({prop: p.budget(prop) for prop in p.examples})}",
            f"versions: python {sys.version.split()[0]}, torch {_version('torch')}, triton {_version('triton')}, "
            f"hypothesis {_version('hypothesis')}",
        ]
        if p.accelerator and self.run.backend == "cpu":
            lines.append(f"warning: profile {p.name!r} is sized for an accelerator; on the cpu backend it takes hours")
        return lines

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if not self.is_worker:  # the controller hears of each worker's test start
            self.accounting.started(nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.accounting.test_started()
        if TALLY.progress is not None:
            TALLY.progress.test = item.nodeid

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        """A property test's call is accounted to its time breakdown (Tally.begin/end)."""
        prop = _property_of(item.nodeid)
        if prop is not None:
            TALLY.begin(prop)
        try:
            return (yield)
        except Unsatisfiable:
            left_out = KNOWN_LEFT_OUT.get(prop or "")
            if not left_out:
                raise
            pytest.skip(f"every {prop} case drawn is one a known defect covers (its cases are left out of the draws): "
                        f"the store replays {', '.join(f'regressions/{f}' for f in sorted(left_out))}")
        finally:
            TALLY.end()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if report.when == "call":
            tally = TALLY.drain()
            if tally["cases"] or tally["failures"]:
                report.user_properties.append((_KEY, tally))
            report.user_properties.append((_WORKER_KEY, {"worker": self.worker, "device": self.bound}))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        self.accounting.report(report.nodeid, report.when, report.duration)
        prop = _property_of(report.nodeid)
        if report.when == "call" or report.failed:
            self.tests[report.nodeid] = report.outcome
        props: dict[str, Any] = dict(report.user_properties)
        worker = props.get(_WORKER_KEY, {}).get("worker", "main")
        if _WORKER_KEY in props:
            self.devices[worker] = props[_WORKER_KEY]["device"]
        tally = props.get(_KEY)
        if tally is not None:
            failures = [{**f, "test": report.nodeid} for f in tally["failures"]]
            self.shipped.setdefault(worker, Counts()).merge({**tally, "failures": failures})
        if prop is not None and report.failed and not self._has_failure(report.nodeid):
            # A failure that never reached the final replay of a property (e.g. a strategy or health-check error).
            message = failure_message(report.longrepr)
            self.unrecorded.append({"property": prop, "regression": None, "message": message, "case": None,
                                    "test": report.nodeid})

    def _has_failure(self, nodeid: str) -> bool:
        recorded = (f for t in self.shipped.values() for f in t.failures)
        return any(f["test"] == nodeid for f in (*recorded, *self.unrecorded))

    def read_parts(self) -> dict[str, dict[str, Any]]:
        """The progress files of this run, by worker (unreadable ones skipped)."""
        parts: dict[str, dict[str, Any]] = {}
        for path in sorted(self.parts.glob("*.json")) if self.parts.is_dir() else []:
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict):
                parts[str(doc.get("worker", path.stem))] = doc
        return parts

    def counts(self, parts: dict[str, dict[str, Any]]) -> Counts:
        """The run's counts and failures, each worker's from its progress file when that
        covers what it shipped (it does unless a write failed; it adds the items cut short by an
        interruption), else from its shipped tallies: never both, so nothing is counted twice."""
        sources = {worker: shipped.as_dict() for worker, shipped in self.shipped.items()}
        for worker, part in parts.items():
            shipped = self.shipped.get(worker, Counts())
            if all(part.get("cases", {}).get(name, 0) >= n for name, n in shipped.cases.items()) and len(
                    part.get("failures", [])) >= len(shipped.failures):
                sources[worker] = part
        total = Counts()
        for _, doc in sorted(sources.items()):
            total.merge(doc)
        total.failures += pending_failures(parts.values()) + self.unrecorded
        return total

    def summary(self) -> dict[str, Any]:
        parts = self.read_parts()
        counts = self.counts(parts)
        properties, failures = counts.properties(), counts.failures
        for worker, part in parts.items():  # workers that were stopped before they finished an item
            self.devices.setdefault(worker, part.get("device"))
            if part.get("test"):  # the item it ran last; no outcome: the run stopped while it ran
                self.tests.setdefault(part["test"], "interrupted")
        elapsed = time.perf_counter() - self.start
        total = sum(p["cases"] for p in properties.values())
        props = {
            name: {**{k: round(v, 3) if isinstance(v, float) else v for k, v in p.items()},
                   # microseconds: a phase of one fast case (drawing it, the runner's round trip) can
                   # take under half a millisecond, which a millisecond rounding reported as no time
                   "time": {c: round(v, 6) for c, v in p["time"].items()},
                   "cases_per_second": rate(p["cases"], p["seconds"]),
                   "warm_cases_per_second": rate(p["warm_cases"], p["warm_seconds"])}
            for name, p in sorted(properties.items())
        }
        warm = [sum(p[k] for p in properties.values()) for k in ("warm_cases", "warm_seconds")]
        return {
            "profile": self.run.profile.name,
            "backend": self.run.backend,
            "subject": self.run.subject,
            "interrupted": self.interrupted,  # the session was cut short: partial counts
            "properties": props,
            "regressions": sorted({f["regression"] for f in failures if f["regression"]}),
            "failures": failures,
            "total_cases": total,
            "elapsed_seconds": round(elapsed, 3),
            "cases_per_second": rate(total, elapsed),
            # per process: the cases that compiled nothing, over the seconds they took (kernel + oracle + comparison)
            "warm_cases_per_second_per_worker": rate(*warm),
            "workers": dict(sorted(self.devices.items())),  # xdist worker -> device it bound (None: none)
            "tests": dict(sorted(self.tests.items())),
            "specializations": dict(sorted(counts.specializations.items())),
            **pool_coverage(profiles.POOL_LABELS, counts.specializations),
            "warmup_slow": profiles.WARMUP_SLOW,
            "time": breakdown(props, elapsed, len(self.nodes | set(self.devices)) or 1, profiles.WARMUP_SECONDS,
                              self.accounting.columns(self.start + elapsed, self.start + profiles.WARMUP_SECONDS)),
        }

    def report_path(self) -> Path:
        workerinput = getattr(self.config, "workerinput", {})
        if _PATH_KEY in workerinput:
            return Path(workerinput[_PATH_KEY])
        path = self.config.getoption("--fuzz-report") or os.environ.get(REPORT_ENV) or DEFAULT_REPORT
        return Path(self.config.invocation_params.dir, path)

    @pytest.hookimpl(trylast=True)  # after Hypothesis' statistics
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or self.final is None:
            return
        terminalreporter.section("wy_ascend fuzz summary")
        for line, markup in summary_lines(self.final, self.path, verbose=self.config.option.verbose > 0):
            terminalreporter.write_line(line, **markup)

    @pytest.hookimpl(trylast=True)  # after xdist's sessionfinish, which stops the workers
    def pytest_sessionfinish(self, exitstatus: int) -> None:
        if self.is_worker:
            return
        self.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if self.live is not None:
            self.live.stop()  # a last look: failures of the last half second get their line too
        final = self.summary()
        if final["properties"]:
            self.final = final
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(final, indent=2) + "\n")
            tmp.replace(self.path)
        shutil.rmtree(self.parts, ignore_errors=True)  # in the report now (or nothing ran)


def summary_lines(s: dict[str, Any], path: Path, verbose: bool = False) -> list[tuple[str, dict[str, bool]]]:
    """The end-of-run summary of report ``s`` (written to ``path``): the run's cases and time, a row per
    property (cases, failures, seconds, cases/s), the failures, where the report is; with ``verbose`` also
    the warm rates and where every worker-second went (the report holds them all). Lines with their markup."""
    out: list[tuple[str, dict[str, bool]]] = []

    def line(text: str, **markup: bool) -> None:
        out.append((text, markup))

    if s["interrupted"]:
        line("interrupted: partial counts (the properties cut short included)", yellow=True)
    line(f"profile {s['profile']}, backend {s['backend']}, subject {s.get('subject', 'wy_ascend')}: "
         f"{s['total_cases']} cases in {s['elapsed_seconds']:.1f} s ({s['cases_per_second']} cases/s)")
    if verbose:
        line(f"warm cases (no new compile): {s['warm_cases_per_second_per_worker']} cases/s per worker")
    line(f"{'property':<20}{'cases':>8}{'failures':>10}{'seconds':>10}{'cases/s':>10}"
         + (f"{'cpu s':>10}{'warm':>8}{'warm/s':>10}" if verbose else ""))
    for name, p in s["properties"].items():
        rate, warm = (f"{r:.2f}" if r else "-" for r in (p["cases_per_second"], p["warm_cases_per_second"]))
        line(f"{name:<20}{p['cases']:>8}{p['failures']:>10}{p['seconds']:>10.1f}{rate:>10}"
             + (f"{p['cpu_seconds']:>10.1f}{p['warm_cases']:>8}{warm:>10}" if verbose else ""))
    if verbose:
        out.extend((text, {}) for text in time_lines(s))
        line(f"kernel specializations launched: {len(s['specializations'])}")
    pool = pool_line(s)
    if pool is not None:
        line(pool, yellow=bool(s["pool_without_cases"]))
    if s["warmup_slow"]:
        line(f"pool entries left out, compiling past the warm-up deadline: {', '.join(s['warmup_slow'])}", yellow=True)
    for f in s["failures"]:
        line(f"FAILED {f['property']} ({_described(f.get('case'))}): {f['message']}", red=True)
        line(f"    regression file: {f['regression'] or '(not recorded)'}")
    line(f"report: {path}" + ("" if verbose else "; -v adds the time by phase and Hypothesis' statistics"))
    return out


def time_lines(s: dict[str, Any]) -> list[str]:
    """The time breakdown: a row per property and the run's columns (worker-seconds)."""
    t = s["time"]
    width = max(11, *(len(c) + 2 for c in CASE_COLUMNS))  # a space between any two column names
    lines = [f"time in worker-seconds ({t['workers']} worker(s) x {t['wall_seconds']:.1f} s wall = "
             f"{t['worker_seconds']:.1f} s):",
             f"{'property':<20}" + "".join(f"{c.replace('_', ' '):>{width}}" for c in CASE_COLUMNS)]
    lines += [f"{name:<20}" + "".join(f"{p['time'][c]:>{width}.1f}" for c in CASE_COLUMNS)
              for name, p in s["properties"].items()]
    return [*lines, ", ".join(f"{c.replace('_', ' ')} {t['columns'][c]:.1f}" for c in RUN_COLUMNS)]


class LiveFailures:
    """Prints a line for each failure recorded in the progress files, as it is recorded.

    A failure's regression file is written in the process that ran the case (an xdist worker,
    or the main process) just before ``Tally.fail`` rewrites that process's progress file
    (fuzz/test_fuzz.py ``_record``). A thread of the controller reads the progress files every
    ``POLL_S`` seconds and writes ``FAILED <property> (<case>): <message> -> <file>`` for each failure
    it has not printed yet. It writes to a copy of file descriptor 1 taken at configure time:
    without xdist the tests run in this process, and pytest's capture points fd 1 elsewhere
    while an item runs.
    """

    POLL_S = 0.5

    def __init__(self, parts: Path, root: Path) -> None:
        self.parts = parts
        self.root = root
        self.markup = False  # red lines where pytest colours its own
        self.printed: dict[str, int] = {}  # progress file -> failures printed from it
        self.fd: int | None = None
        self.done = threading.Event()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def start(self, markup: bool) -> None:
        self.markup = markup
        try:
            self.fd = os.dup(1)
        except OSError:
            return  # no stdout: the summary at the end still lists every failure
        self.thread = threading.Thread(target=self._run, name="wy-fuzz-live-failures", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.thread is None:
            return
        self.done.set()
        self.thread.join(timeout=10)
        self.thread = None
        self.poll()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _run(self) -> None:
        while not self.done.wait(self.POLL_S):
            self.poll()

    def poll(self) -> None:
        with self.lock:
            for path in sorted(self.parts.glob("*.json")) if self.parts.is_dir() else []:
                try:
                    failures = json.loads(path.read_text()).get("failures", [])
                except (OSError, ValueError, AttributeError):
                    continue  # gone (the run ended) or not a progress document
                for failure in failures[self.printed.get(path.name, 0):]:
                    self.write(self.line(failure))
                self.printed[path.name] = max(self.printed.get(path.name, 0), len(failures))

    def line(self, failure: dict[str, Any]) -> str:
        file = failure.get("regression")
        if file and Path(file).is_absolute() and Path(file).is_relative_to(self.root):
            file = str(Path(file).relative_to(self.root))
        return f"FAILED {failure.get('property')} ({_described(failure.get('case'))}): {failure.get('message')} " \
               f"-> {file or '(not recorded)'}"

    def write(self, line: str) -> None:
        if self.fd is None:
            return
        text = f"\x1b[31m{line}\x1b[0m" if self.markup else line
        try:
            os.write(self.fd, f"\n{text}\n".encode(errors="replace"))
        except OSError:
            pass


def _described(case: Any) -> str:
    """The failing case in one line (store.describe_case: layout, heads, dims, dtypes, knobs), or what it is."""
    from wy_ascend.testing.case import Case
    from wy_ascend.testing.store import describe_case

    try:
        return describe_case(Case.from_dict(case))
    except Exception:  # noqa: BLE001 - a line about a failure never fails; the file holds the case
        return "case not readable"


def _property_of(nodeid: str) -> str | None:
    """The property a test of test_fuzz.py checks; its node id is ``::test_NAME`` where the run's rootdir is not
    above the suite (``wy-ascend fuzz`` from a subject's own repository)."""
    where, _, name = nodeid.rpartition("::")
    prop = name.split("[", 1)[0].removeprefix("test_")
    return prop if prop in PROPERTY_NAMES and ("test_fuzz" in where or where == "") else None


def _version(dist: str) -> str:
    """Installed version of ``dist`` ("triton": whichever distribution owns the module)."""
    from importlib.metadata import PackageNotFoundError, version

    for name in ("triton-ascend", "triton") if dist == "triton" else (dist,):
        try:
            return f"{version(name)}" + (f" ({name})" if dist == "triton" else "")
        except PackageNotFoundError:
            continue
    return "not installed"
