"""Run profiles of the fuzz suite (Hypothesis settings, example budgets, case sizes) and the run's tally.

=========  ==========  ===========================================================================
profile    runs on     what it does
=========  ==========  ===========================================================================
ci         CPU         derandomized (the same examples every run, no database), a fixed budget
                       (CI: 2 xdist workers; the store is left to regress); its summary gives its time.
dev        CPU         the local default: random examples, the shared example database, ci's budget.
nightly    npu / cuda  long: ~20x ci's budget, cases up to 64k tokens, hundreds of sequences and
                       HV up to 32, one case in eight an accelerator-sized one (see ``large``);
                       every case from a pool of NIGHTLY_POOL entries rotated by date and compiled
                       before the run (fuzz/pool.py), so cases run warm.
large      npu / cuda  few examples sized near device memory: launches past the 65535-block
                       limit, packed batches of millions of tokens.
=========  ==========  ===========================================================================

Selection: ``--profile NAME`` (pytest option) > ``WY_ASCEND_PROFILE`` > ``dev``; the backend:
``--backend NAME`` > ``WY_ASCEND_BACKEND`` > ``cpu``; the subject (wy_ascend.subjects):
``--subject NAME`` > ``WY_ASCEND_SUBJECT`` > ``wy_ascend`` (a name, an entry point's or an import path
``package.module:name``: the run then goes by the name it declares). A foreign subject runs every profile
with its own budget (``for_subject``), the properties its declaration leaves nothing to skipped with
their reason (``properties.applies_to``). ``WY_ASCEND_FUZZ_SCALE`` multiplies every
example budget; ``WY_ASCEND_LARGE_BYTES`` bounds the host bytes of a large case (default 96 GiB).
The profiles are also registered as Hypothesis settings profiles under the same names. The
example database (all but ``ci``) is a ``DirectoryBasedExampleDatabase`` at
``WY_ASCEND_HYPOTHESIS_DB`` (default ``.hypothesis/examples`` in this checkout, or, the suite installed,
in the directory the run started in: ``home``), one directory
that every xdist worker shares. It is a cache; minimized failures are stored as JSON in
``regressions/`` (wy_ascend.testing.store).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from fuzz.counts import Counts, case_time
from fuzz.strategies import CPU_SIZES, SMALL_DIMS, Sizes
from wy_ascend import subjects
from wy_ascend.env import number

PROFILE_ENV = "WY_ASCEND_PROFILE"
BACKEND_ENV = "WY_ASCEND_BACKEND"
SUBJECT_ENV = "WY_ASCEND_SUBJECT"
DATABASE_ENV = "WY_ASCEND_HYPOTHESIS_DB"
REPORT_ENV = "WY_ASCEND_FUZZ_REPORT"
SCALE_ENV = "WY_ASCEND_FUZZ_SCALE"  # multiplies every example budget (e.g. 0.1 for a smoke run, 5 for a soak)
DEFAULT_PROFILE = "dev"
DEFAULT_BACKEND = "cpu"
DEFAULT_REPORT = "fuzz-report.json"
REPO = Path(__file__).resolve().parents[1]
PROPERTY_NAMES = ("oracle", "launch_invariance", "memory_layout", "varlen_split", "grouped_heads", "widened_gates",
                  "containment", "linearity", "plan_coverage", "bad_input", "compiles", "index_width", "differential",
                  "history", "perf")
PERF = "perf"  # the device-time property: only the perf profile runs it, and it runs nothing else

# Cases can be slow (interpreter) and large (many sequences); neither is a test smell here.
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
               HealthCheck.large_base_example]


@dataclass(frozen=True)
class Profile:
    """One run profile: Hypothesis settings, examples per property, case sizes and strategy kind."""

    name: str
    description: str
    examples: dict[str, int]
    sizes: Sizes = CPU_SIZES
    kind: str = "small"  # strategies.case_strategy: "small", "mixed" (some large cases) or "large"
    derandomize: bool = False
    accelerator: bool = False  # meant for --backend npu/cuda/npu-cuda (a CPU run would take hours)
    pool: int | None = None  # specialization pool entries on a compiling backend (fuzz/pool.py); None: no pool
    extra: dict[str, Any] = field(default_factory=dict)
    skips: dict[str, str] = field(default_factory=dict)  # properties that do not apply to the run's subject: why

    def hypothesis_settings(self) -> settings:
        """The profile's Hypothesis settings (max_examples is set per test)."""
        kw: dict[str, Any] = dict(deadline=None, print_blob=True, suppress_health_check=_SUPPRESSED,
                                  max_examples=max(self.examples.values()), **self.extra)
        if self.accelerator:
            # No explain phase: after a failure it reruns ~20 variants of the failing case, each a
            # compile and a device run (284 s of a 350 s perf run on the H200, session 9).
            kw["phases"] = [p for p in Phase if p is not Phase.explain]
        if self.derandomize:
            kw["derandomize"] = True  # implies database=None: CI runs the same examples every time
        else:
            kw["database"] = example_database()
        return settings(**kw)

    def budget(self, prop: str) -> int:
        """Examples of property ``prop``: the profile's times ``WY_ASCEND_FUZZ_SCALE`` (default 1), at least 1."""
        return max(1, round(self.examples[prop] * number(SCALE_ENV, 1.0, float, "times the examples", positive=True)))

    def settings_for(self, prop: str) -> Any:
        """Decorator of one property's test: its settings (its ``budget``), or a skip mark where
        the profile does not run the property."""
        if prop in self.skips:
            return pytest.mark.skip(reason=self.skips[prop])
        if prop not in self.examples:
            return pytest.mark.skip(reason=f"profile {self.name!r} does not run property {prop!r}")
        chosen = settings(self.hypothesis_settings(), max_examples=self.budget(prop))
        if prop in NO_EXPLAIN:
            chosen = settings(chosen, phases=[p for p in chosen.phases if p is not Phase.explain])
        return chosen


# Properties whose failures are not explained: each case is a real-size problem (seconds, a foreign subject's
# host copies of GiBs), and the explain phase reruns ~100 variants of the failing one (20 min on fla-ascend).
NO_EXPLAIN = frozenset({"index_width"})


# Budgets measured on the 2-core CPU (`nox -s fuzz -- --profile ci`, 2 xdist workers, each process one
# thread: testing/child.py share_cores): 1,589 cases, 53 s of CPU time, 38 s of wall time on an idle machine,
# longer on one shared with other jobs (fuzz-report.json's cpu_seconds per property tells which to trim).
# The per-case figures below were measured before share_cores, when two threads a process spun against the
# other worker's: about 4x the CPU time of now, in the same proportions.
# memory_layout: two op runs a case at a quarter of the task budget, ~1 s of CPU (about the oracle's
# case): 12 cases add ~7% of the CPU time. Each case lays out about half of its arguments, so each
# argument is laid out in ~6 cases, and an ignored stride fails any case that lays that argument out.
# containment: two op runs a case, no oracle (~1.3 s of CPU a case, as grouped_heads); linearity the same.
# compiles: two op calls of a small split case, ~0.3 s of CPU. index_width: a real-size problem (2**31
# elements and more) under the interpreter's address audit, 0.1-2 s for wy_ascend; a foreign subject's
# own host copies (fla-ascend's transposed gates: 4.4 GiB written) take up to ~15 s.
# differential: the case on wy_ascend and on fla-core's kernels of the platform (fla-ascend on the cpu: ~1 s
# of CPU a case more than the oracle's), 6 cases, ~3% of the ci run's CPU.
# history: 3 to 5 small calls, each run alone and all in sequence in children of a fresh interpreter (its
# server), ~1 s of wall time a case (8 cases: 10 s on one worker; fla-ascend's 5: 8 s); about one case in six
# changes a cu_seqlens tensor in place so that its chunks change (8 catch a varlen cache that ignores in-place
# changes; 3 did not). The cpu backend only.
CI_EXAMPLES = {"oracle": 90, "launch_invariance": 35, "memory_layout": 12, "varlen_split": 30, "grouped_heads": 30,
               "widened_gates": 25, "containment": 30, "linearity": 25, "plan_coverage": 1000, "bad_input": 250,
               "compiles": 8, "index_width": 4, "differential": 6, "history": 8}
# A foreign subject's ci budget (the other profiles scale it as they scale CI_EXAMPLES): fla-ascend on the
# interpreter, 2 workers on the 2-core CPU, within 4 minutes.
# fla-ascend's interpreted kernels cost about twice wy_ascend's CPU a case at half its task budget (its
# backward is six launches of mostly unfused kernels): 147 cases, 27 s of CPU, 20 s of wall time with 2
# workers on the idle 2-core machine (bad_input and widened_gates skipped: known defects).
FOREIGN_EXAMPLES = {"oracle": 40, "launch_invariance": 15, "memory_layout": 10, "varlen_split": 15,
                    "grouped_heads": 15, "widened_gates": 15, "containment": 15, "linearity": 15, "bad_input": 60,
                    "compiles": 8, "index_width": 2, "differential": 10, "history": 5}
NIGHTLY_SIZES = Sizes(max_tokens=65536, max_tasks=16384, max_seqs=512, split_seqs=128, max_batch=8, max_heads=8,
                      max_value_heads=32, dims=(64, 128, 16, 32, 256, 48, 100, 80), max_dim=256,
                      plan_tasks=200_000, large_tokens=2**21, large_bytes=32 * 2**30)
LARGE_SIZES = Sizes(max_tokens=2**20, max_tasks=2**20, max_seqs=2000, split_seqs=300, max_batch=8, max_heads=4,
                    max_value_heads=32, dims=(64, 128), plan_tasks=2**20, large_tokens=2**24,
                    large_bytes=number("WY_ASCEND_LARGE_BYTES", 96 * 2**30, int, "bytes", positive=True))

# Nightly pool: 24 entries (~130 specializations, compiled in parallel before the run); the cuda
# enumeration's 384 entries take 16 nights to cover, the npu one's 576 take 24 (fuzz/pool.py).
NIGHTLY_POOL = 24

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("ci", "CPU CI: derandomized, a fixed number of examples per property", CI_EXAMPLES, derandomize=True),
        Profile("dev", "local default: random, shared database, ci's budget", CI_EXAMPLES),
        # Not index_width: on a device it runs the problem at its real size (2**31 elements and more), tens
        # of GiB a case (36-60 GiB processes ran an H200 nightly out of memory); the large profile runs it.
        # differential at 4x, not 20x: fla on cuda autotunes 9 configs at each new shape (~10 s a case on an H200).
        # Not history: the cpu backend's only (its server forks).
        Profile("nightly", "accelerator, long",
                {k: v * (4 if k == "differential" else 20) for k, v in CI_EXAMPLES.items()
                 if k not in ("index_width", "history")},
                NIGHTLY_SIZES,
                kind="mixed", accelerator=True, pool=NIGHTLY_POOL),
        Profile("large", "accelerator, sizes near device memory, few examples",
                {"oracle": 6, "launch_invariance": 4, "memory_layout": 2, "varlen_split": 3, "grouped_heads": 3,
                 "widened_gates": 2, "containment": 3, "linearity": 2, "plan_coverage": 100, "bad_input": 50,
                 "compiles": 2, "index_width": 2, "differential": 2},
                LARGE_SIZES, kind="large", accelerator=True),
        # 24 shapes of issue 13's grid, each timed forward and backward (and fla-core's where installed):
        # ~1 min of first-call compiles and autotuning plus ~1 s of timing a shape on an H200.
        Profile("perf", "device times against the bandwidth bound and fla-core (testing/perf.py)", {PERF: 24},
                accelerator=True),
    )
}


def example_database() -> DirectoryBasedExampleDatabase:
    """The example database every worker shares (``WY_ASCEND_HYPOTHESIS_DB`` or ``.hypothesis/examples``)."""
    return DirectoryBasedExampleDatabase(os.environ.get(DATABASE_ENV) or str(home() / ".hypothesis" / "examples"))


def home() -> Path:
    """Where a run keeps its example database: this checkout, or (the suite installed, run from a subject's own
    repository: ``wy-ascend fuzz``) the directory the run started in."""
    return REPO if (REPO / "src" / "wy_ascend").is_dir() else Path.cwd()


for _profile in PROFILES.values():
    settings.register_profile(_profile.name, _profile.hypothesis_settings())


@dataclass
class RunConfig:
    """What this run fuzzes with: the profile, the backend and the subject (wy_ascend.subjects)."""

    profile: Profile
    backend: str
    subject: str = subjects.DEFAULT


_RUN: RunConfig | None = None
# Set by fuzz/conftest.py for the report: the run's pool labels (None: no pool) and the seconds
# this process spent compiling it before the first case (fuzz/pool.py warm_up).
POOL_LABELS: list[str] | None = None
WARMUP_SECONDS: float = 0.0
WARMUP_SLOW: list[str] = []  # pool entries whose compiles outlasted the warm-up deadline (left out)


def for_subject(profile: Profile, subject: str) -> Profile:
    """``profile`` as it runs on ``subject``: itself for wy_ascend; for a foreign subject its own budget
    (FOREIGN_EXAMPLES, the profile's multiple of ci's), sizes at half the task budget that also draw K/V
    below 16 (strategies.SMALL_DIMS), no pool (it is wy_ascend's compiles), and the properties tied to
    wy_ascend's internals skipped with their reason (properties.WY_ASCEND_ONLY)."""
    from wy_ascend.testing.properties import PROPERTIES, applies_to

    if not subjects.get(subject).foreign:
        return profile
    if PERF in profile.examples:
        raise ValueError(f"profile {profile.name!r} times wy_ascend's kernels; it does not run subject {subject!r}")
    skipped = {prop: why for prop in PROPERTIES if (why := applies_to(prop, subjects.get(subject))) is not None}
    scale = max(profile.examples.values()) / max(CI_EXAMPLES.values())
    examples = {prop: max(1, round(n * scale)) for prop, n in FOREIGN_EXAMPLES.items() if prop in profile.examples}
    return dataclasses.replace(
        profile, examples=examples, pool=None,
        sizes=profile.sizes.scaled(small_dims=SMALL_DIMS, max_tasks=max(1, profile.sizes.max_tasks // 2)),
        skips={prop: f"property {prop!r} does not apply to subject {subject!r}: {why}" for prop, why in skipped.items()})


def select(profile: str | None = None, backend: str | None = None, subject: str | None = None) -> RunConfig:
    """Fix this process's profile, backend and subject (explicit > environment > defaults) and load
    the profile's Hypothesis settings; raises ValueError for an unknown profile or subject name, the
    perf profile on the cpu backend or on a foreign subject, or a subject that does not run on the backend."""
    global _RUN
    name = profile or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    if name not in PROFILES:
        raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {name!r} (--profile or {PROFILE_ENV})")
    backend = backend or os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND
    if PERF in PROFILES[name].examples and backend == "cpu":
        raise ValueError(f"profile {name!r} times device kernels: run it with --backend cuda, npu-cuda or npu")
    spec = subject or os.environ.get(SUBJECT_ENV) or subjects.DEFAULT
    try:
        chosen = subjects.get(spec)  # a name or an import path; ValueError naming the subjects
    except ImportError as e:
        raise ValueError(str(e)) from e
    subject = chosen.name
    if backend not in chosen.backends:
        raise ValueError(f"subject {subject!r} runs on the backends {list(chosen.backends)}, not {backend!r} "
                         f"(--backend or {BACKEND_ENV})")
    _RUN = RunConfig(for_subject(PROFILES[name], subject), backend, subject)
    settings.load_profile(name)
    return _RUN


def current() -> RunConfig:
    """The selected run configuration (selected from the environment if nothing chose one yet)."""
    return _RUN if _RUN is not None else select()


@dataclass
class Progress:
    """This process's cumulative counts per property (never drained), kept on disk as it goes.

    ``write`` rewrites ``path`` (tmp + ``os.replace``: a reader or a kill never sees half a file)
    with ``{worker, device, pid, profile, backend, test, started, updated, pool}`` (``POOL_LABELS``),
    the counts (``Counts.as_dict``: cases, seconds, cpu_seconds, warm_cases, warm_seconds,
    failures, time, specializations) and ``pending`` (``Tally.found``). The tally calls it after every case, but a case alone
    rewrites it at most every ``CASE_WRITE_S`` (a write takes up to ~0.5 ms once hundreds of
    specializations are counted), a failure and the end of a test at once; so a run killed
    mid-property still leaves the counts of its in-flight items but for their last 0.1 s
    (fuzz/conftest.py merges them into fuzz-report.json; .ci/nightly_summary.py reads them when
    that was not written).
    """

    CASE_WRITE_S = 0.1

    path: Path
    worker: str
    profile: str = ""
    backend: str = ""
    device: str | None = None  # what the worker bound (fuzz/conftest.py bind_worker_device)
    test: str | None = None  # nodeid of the item running (or last run), noted on failures
    counts: Counts = field(default_factory=Counts)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)  # property -> its first failing case (Tally)
    started: float = field(default_factory=time.time)
    written: float = -math.inf  # time.monotonic() of the last write

    def fail(self, failure: dict[str, Any]) -> None:
        self.counts.failures.append({**failure, "test": self.test})
        self.write()

    def write(self, every: float = 0.0) -> None:
        """Rewrite the file unless that was done less than ``every`` seconds ago; a failed write
        (e.g. the directory is gone: the run ended) is skipped."""
        if time.monotonic() - self.written < every:
            return
        self.written = time.monotonic()
        doc = {"worker": self.worker, "device": self.device, "pid": os.getpid(), "profile": self.profile,
               "backend": self.backend, "test": self.test, "started": self.started, "updated": time.time(),
               "pool": POOL_LABELS, **self.counts.as_dict(), "pending": list(self.pending.values())}
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(doc, default=str))
            os.replace(tmp, self.path)
        except OSError:
            pass


@dataclass
class Tally:
    """Cases run, seconds spent and failures recorded per property since the last ``drain``.

    The tests add to it; conftest drains it after each test and ships the counts on the test's
    report, so counts from xdist workers reach the controller that writes fuzz-report.json.
    When ``progress`` is set, every case and failure is also added to it (cumulative, on disk).

    Time breakdown (fuzz/counts.py): conftest calls ``begin`` and ``end`` around each property
    test's call; every second between them goes to one column, once: ``add`` charges the time
    since the test's previous case (or its start) to ``generation`` and the case's own time to
    its columns (``case_time``), and once a case has failed, all time to the test's end to
    ``shrinking``.

    ``interrupt``: the signal that asked this process to stop, set by fuzz/conftest.py's handler
    when it raises KeyboardInterrupt and cleared once pytest has that interrupt. Until then every
    case that ends raises it again: a KeyboardInterrupt raised while Python runs a finalizer (a
    generator closed on its last reference, a ``__del__``) is printed as "Exception ignored" and
    lost, and the run then went on to the end of its budget (tests/test_fuzz_report.py hung so).
    """

    counts: Counts = field(default_factory=Counts)
    progress: Progress | None = field(default=None, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    interrupt: str | None = None
    running: str | None = None  # the property whose test is running (``begin``)
    mark: float = 0.0  # perf_counter up to which that test's time is accounted
    failed: bool = False  # a case of that test failed: the rest of it is shrinking

    def _apply(self, change: Callable[[Counts], None], every: float = 0.0) -> None:
        """Make ``change`` to the counts and to the progress file's (``Progress.write(every)``)."""
        with self.lock:
            change(self.counts)
            if self.progress is not None:
                change(self.progress.counts)
                self.progress.write(every)

    def begin(self, prop: str) -> None:
        """A test of property ``prop`` starts: its time is accounted from now."""
        self.running, self.mark, self.failed = prop, time.perf_counter(), False

    def end(self) -> None:
        """The running test ends: the time since its last case is ``shrinking`` after a failure,
        else ``generation``."""
        if self.running is None:
            return
        prop, spent = self.running, {"shrinking" if self.failed else "generation": time.perf_counter() - self.mark}
        self.running = None
        self._apply(lambda counts: counts.add_time(prop, spent))

    def add(self, prop: str, seconds: float, cpu_seconds: float, compiled: bool = False, *,
            began: float | None = None, phases: Mapping[str, float] | None = None, failed: bool = False,
            lost: bool = False, labels: Sequence[str] = ()) -> None:
        """One case that took ``seconds``; ``compiled``: it compiled a new kernel (Counts.add);
        ``began``: the perf_counter when the test turned to it (its runner's start included;
        default ``seconds`` ago); ``phases``: its seconds per phase; ``failed``: it raised,
        ``lost``: it crashed or hung its runner; ``labels``: the specializations it launched.
        Raises KeyboardInterrupt after counting it while an ``interrupt`` is pending."""
        now = time.perf_counter()
        began = now - seconds if began is None else began
        spent = case_time(now - began, phases or {}, compiled, lost)
        if self.running is not None:
            spent = {"shrinking": now - self.mark} if self.failed else {**spent, "generation": began - self.mark}
            self.mark, self.failed = now, self.failed or failed
        self._apply(lambda counts: counts.add(prop, seconds, cpu_seconds, compiled, spent, labels),
                    Progress.CASE_WRITE_S)
        if self.interrupt is not None:
            raise KeyboardInterrupt(self.interrupt)

    def fail(self, prop: str, regression: str | None, message: str, case: dict[str, Any]) -> None:
        """A recorded failure of ``prop`` on ``case`` (its pending one, if any, is dropped: ``found``)."""
        with self.lock:
            failure = {"property": prop, "regression": regression, "message": message, "case": case}
            self.counts.failures.append(failure)
            if self.progress is not None:
                self.progress.pending.pop(prop, None)
                self.progress.fail(failure)

    def found(self, prop: str, message: str, case: dict[str, Any]) -> None:
        """The running test's first failing case of ``prop``, before Hypothesis shrinks it: kept in the progress
        file's ``pending`` (one a property) until ``fail`` records the minimal case, so a run cut short while
        shrinking (the nightly's SIGTERM) still reports what it found (``counts.pending_failures``), as an H200
        nightly did not (its differential property was shrinking fla's failure at the cut and the report said
        no failure). A process without a progress file ships its tallies at the test's end, by when the
        minimal case is recorded."""
        with self.lock:
            if self.progress is None or prop in self.progress.pending:
                return
            self.progress.pending[prop] = {"property": prop, "regression": None, "message": message, "case": case,
                                           "pending": True, "test": self.progress.test}
            self.progress.write()

    def drain(self) -> dict[str, Any]:
        """The counts since the last drain (``Counts.as_dict``), reset."""
        with self.lock:
            out, self.counts = self.counts.as_dict(), Counts()
        return out


TALLY = Tally()
