"""Per-property fuzz counts: what a tally, a progress file and fuzz-report.json hold, and how
they add up.

The time breakdown accounts for every second of a process that runs cases, in columns (seconds
per property, summed over the processes: worker-seconds):

* ``generation``: the test's time outside its cases until its first failure (Hypothesis drawing
  and deciding, the tally's own bookkeeping);
* ``inputs``, ``kernel``, ``oracle``, ``comparison``: the phases of a case (building the inputs
  and arguments, the ops calls, the float64 oracle, the metrics and tolerances;
  wy_ascend.testing.phases), up to and including the test's first failing case;
* ``compile``: the ``kernel`` phase of a case that compiled a kernel;
* ``device_wait``: a case waiting for its device memory beside other processes' cases
  (wy_ascend.testing.device_memory);
* ``runner``: the rest of a case's time: starting a case runner's child, the round trip to it,
  the property's work outside the phases (all of plan_coverage's planning);
* ``cut_short``: the whole time of a case that crashed or hung its runner (no phases come back);
* ``shrinking``: everything after the test's first failing case until the test ends;

and over the whole run ``replay``, ``startup`` and ``idle`` (fuzz/accounting.py: regression replays
and other tests, workers starting, workers done before the run), ``warmup``: fuzz/profiles.py
``WARMUP_SECONDS`` (the controller's wall seconds compiling the pool before any worker runs a
case) x the workers, and ``other``: the run's wall time x its workers less all of the above
(pytest between the tests), so the columns add up to it.

No third-party imports: .ci/nightly_summary.py uses it on a runner whose setup may have failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CASE_COLUMNS = ("generation", "inputs", "compile", "kernel", "oracle", "comparison", "device_wait", "runner",
                "cut_short", "shrinking")  # per property
OUTSIDE_COLUMNS = ("replay", "startup", "idle")  # the run's time outside the property tests (fuzz/accounting.py)
RUN_COLUMNS = (*CASE_COLUMNS, *OUTSIDE_COLUMNS, "warmup", "other")  # the whole run's


def rate(cases: float, seconds: float) -> float | None:
    """Cases per second (3 decimals), None when no time was spent."""
    return round(cases / seconds, 3) if seconds else None


def case_time(seconds: float, phases: Mapping[str, float], compiled: bool, lost: bool) -> dict[str, float]:
    """A case's ``seconds`` by column: all ``cut_short`` if it crashed or hung its runner
    (``lost``), else its ``phases`` (``kernel`` as ``compile`` if it ``compiled``) and the rest
    as ``runner``."""
    if lost:
        return {"cut_short": seconds}
    columns = {name: phases.get(name, 0.0) for name in ("inputs", "oracle", "comparison", "device_wait")}
    columns["compile" if compiled else "kernel"] = phases.get("kernel", 0.0)
    columns["runner"] = seconds - sum(columns.values())
    return columns


def breakdown(properties: Mapping[str, Mapping[str, Any]], wall_seconds: float, workers: int,
              warmup_seconds: float, outside: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The run's time: ``worker_seconds`` (wall x workers) and ``columns`` (RUN_COLUMNS, 3
    decimals): the properties' columns summed, ``outside`` (OUTSIDE_COLUMNS, worker-seconds), ``warmup``
    (``warmup_seconds`` of wall time in which no worker ran a case, x the workers) and ``other``, the
    rest (>= 0 but for rounding, since every column is time some worker spent during the run)."""
    columns = {c: round(sum(p.get("time", {}).get(c, 0.0) for p in properties.values()), 3) for c in CASE_COLUMNS}
    columns.update({c: round((outside or {}).get(c, 0.0), 3) for c in OUTSIDE_COLUMNS})
    columns["warmup"] = round(warmup_seconds * workers, 3)
    total = round(wall_seconds * workers, 3)
    columns["other"] = round(total - sum(columns.values()), 3)
    return {"wall_seconds": round(wall_seconds, 3), "workers": workers, "worker_seconds": total, "columns": columns}


def pending_failures(docs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The failures found but never shrunk to a recorded minimal case, from progress files (fuzz/profiles.py
    ``Tally.found``): a run that ended while Hypothesis shrank them reports them from these."""
    return [dict(f) for doc in docs for f in doc.get("pending") or [] if isinstance(f, Mapping)]


def pool_coverage(pool: list[str] | None, specializations: Mapping[str, int]) -> dict[str, Any]:
    """The report's pool fields: ``pool`` (its labels; None: the run had no pool),
    ``pool_covered`` (how many got a case) and ``pool_without_cases`` (the others, in pool order)."""
    if pool is None:
        return {"pool": None, "pool_covered": None, "pool_without_cases": None}
    missing = [label for label in pool if not specializations.get(label)]
    return {"pool": pool, "pool_covered": len(pool) - len(missing), "pool_without_cases": missing}


# How many of the pool's specializations without a case the summary line names; the report keeps them all.
POOL_LINE_NAMES = 5


def pool_line(report: Mapping[str, Any]) -> str | None:
    """One line on the pool fields of ``report`` (``pool_coverage``); None for a run without a pool. It names
    the first POOL_LINE_NAMES specializations without a case and counts the rest: a short nightly leaves
    a hundred of them, which the terminal does not need (the report's ``pool_without_cases`` lists them)."""
    pool = report.get("pool")
    if pool is None:
        return None
    missing = report.get("pool_without_cases") or []
    named = ", ".join(missing[:POOL_LINE_NAMES]) or "none"
    if len(missing) > POOL_LINE_NAMES:
        named += f", and {len(missing) - POOL_LINE_NAMES} more (the report's pool_without_cases)"
    return (f"pool: {report.get('pool_covered')} of {len(pool)} specializations covered; "
            f"pool specializations with no case: {named}")


@dataclass
class Counts:
    """Cases, seconds and CPU seconds per property, the failures recorded, the time breakdown
    (``time``: property -> column -> seconds, module doc) and the cases per kernel
    specialization (``specializations``: label -> cases).

    ``warm_cases``/``warm_seconds`` count the cases that compiled no new kernel (under the
    interpreter: all of them), so a device run's rate "once compiled" is measured apart from
    the cases that paid for a compile.
    """

    cases: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    warm_cases: dict[str, int] = field(default_factory=dict)
    warm_seconds: dict[str, float] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    time: dict[str, dict[str, float]] = field(default_factory=dict)
    specializations: dict[str, int] = field(default_factory=dict)

    _SUMS = ("cases", "seconds", "cpu_seconds", "warm_cases", "warm_seconds")

    def add(self, prop: str, seconds: float, cpu_seconds: float, compiled: bool = False,
            time: Mapping[str, float] | None = None, labels: Iterable[str] = ()) -> None:
        """One case of ``prop``; ``compiled``: it compiled a kernel (so it is not a warm case);
        ``time``: seconds by column to add; ``labels``: the specializations it launched."""
        warm = not compiled
        self._bump(prop, (1, seconds, cpu_seconds, int(warm), seconds if warm else 0.0))
        self.add_time(prop, time or {})
        for label in labels:
            self.specializations[label] = self.specializations.get(label, 0) + 1

    def add_time(self, prop: str, columns: Mapping[str, float]) -> None:
        """Add seconds by column to ``prop``'s time breakdown."""
        table = self.time.setdefault(prop, {})
        for column, seconds in columns.items():
            table[column] = table.get(column, 0.0) + seconds

    def _bump(self, prop: str, values: tuple[float, ...]) -> None:
        for name, value in zip(self._SUMS, values):
            table = getattr(self, name)
            table[prop] = table.get(prop, 0) + value

    def merge(self, doc: Mapping[str, Any]) -> None:
        """Add the counts of ``doc``, an ``as_dict`` document (a shipped tally, a progress file);
        a document without warm counts (an older report) adds none."""
        for name in doc.get("cases", {}):
            self._bump(name, tuple(doc.get(key, {}).get(name, 0) for key in self._SUMS))
        self.failures += doc.get("failures", [])
        for name, columns in doc.get("time", {}).items():
            self.add_time(name, columns)
        for label, cases in doc.get("specializations", {}).items():
            self.specializations[label] = self.specializations.get(label, 0) + cases

    def as_dict(self) -> dict[str, Any]:
        return {**{key: getattr(self, key) for key in self._SUMS}, "failures": self.failures, "time": self.time,
                "specializations": self.specializations}

    def properties(self) -> dict[str, dict[str, Any]]:
        """``{property: {cases, seconds, cpu_seconds, warm_cases, warm_seconds, failures, time}}``,
        failures counted per property, ``time`` by CASE_COLUMNS."""
        def entry(name: str) -> dict[str, Any]:
            return {**{key: getattr(self, key).get(name, 0) for key in self._SUMS}, "failures": 0,
                    "time": {c: self.time.get(name, {}).get(c, 0.0) for c in CASE_COLUMNS}}

        out = {name: entry(name) for name in {**self.cases, **self.time}}
        for failure in self.failures:
            out.setdefault(failure.get("property", "?"), entry(failure.get("property", "?")))["failures"] += 1
        return out
