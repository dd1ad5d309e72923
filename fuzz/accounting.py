"""The run's time outside the properties' cases, by what it was spent on (the report's run columns).

A property test's time is its cases' phases, drawing and shrinking (fuzz/counts.py). The rest of a
run's worker-seconds, which the report once left in ``other`` (36% of an H200 nightly), is named here
by the xdist controller (or the one process of a run without xdist):

* ``replay``: the regression replays (fuzz/test_regressions.py) and every other test that is no
  property test, setup and teardown included, and the part of such a test still running when the run
  was cut short (SIGTERM at the nightly's limit: its report never comes; an H200 nightly left 16% of
  its worker-seconds unnamed, most of it likely in replays cut mid-way);
* ``startup``: a worker's start until it is ready to run tests (interpreter, imports, collection);
* ``idle``: a worker's end until the run's (the others still run their last tests).

``other`` keeps the remainder: pytest between tests, a property test's setup and teardown.
"""

from __future__ import annotations

import time
from typing import Any


class Accounting:
    """Timestamps and durations the controller sees; ``columns`` turns them into worker-seconds."""

    def __init__(self, is_property: Any) -> None:
        self.is_property = is_property  # nodeid -> whether it is a property test
        self.began = time.perf_counter()
        self.replay = 0.0
        self.created: dict[str, float] = {}
        self.ready: dict[str, float] = {}
        self.down: dict[str, float] = {}
        self.first_test: float | None = None
        self.running: dict[str, list[float]] = {}  # non-property test started -> [start, seconds reported]

    def node_created(self, worker: str) -> None:
        self.created.setdefault(worker, time.perf_counter())

    def node_ready(self, worker: str) -> None:
        self.ready.setdefault(worker, time.perf_counter())

    def node_down(self, worker: str) -> None:
        self.down[worker] = time.perf_counter()

    def test_started(self) -> None:
        if self.first_test is None:
            self.first_test = time.perf_counter()

    def started(self, nodeid: str) -> None:
        """Test ``nodeid`` began on some worker."""
        if not self.is_property(nodeid):
            self.running[nodeid] = [time.perf_counter(), 0.0]

    def report(self, nodeid: str, when: str, duration: float) -> None:
        """Phase ``when`` (setup, call or teardown) of test ``nodeid`` took ``duration`` seconds on some worker."""
        if self.is_property(nodeid):
            return
        self.replay += duration
        if when == "teardown":
            self.running.pop(nodeid, None)
        elif nodeid in self.running:
            self.running[nodeid][1] += duration

    def columns(self, now: float, warmup_end: float) -> dict[str, float]:
        """Worker-seconds of ``replay``, ``startup`` and ``idle`` up to ``now`` (perf_counter); a worker's
        start counts from its creation or the warm-up's end, whichever is later; a test still running
        counts up to ``now``, less its phases already reported."""
        if self.created:
            startup = sum(max(0.0, self.ready.get(w, now) - max(t, warmup_end)) for w, t in self.created.items())
            idle = sum(max(0.0, now - t) for t in self.down.values())
        else:  # one process: its collection before the first test
            startup = max(0.0, (self.first_test or now) - max(self.began, warmup_end))
            idle = 0.0
        cut = sum(max(0.0, now - start - reported) for start, reported in self.running.values())
        return {"replay": round(self.replay + cut, 3), "startup": round(startup, 3), "idle": round(idle, 3)}
