"""Per-property fuzz counts: what a tally, a progress file and fuzz-report.json hold, and how
they add up.

No third-party imports: .ci/nightly_summary.py uses it on a runner whose setup may have failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def rate(cases: float, seconds: float) -> float | None:
    """Cases per second (3 decimals), None when no time was spent."""
    return round(cases / seconds, 3) if seconds else None


@dataclass
class Counts:
    """Cases, seconds and CPU seconds per property, and the failures recorded.

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

    _SUMS = ("cases", "seconds", "cpu_seconds", "warm_cases", "warm_seconds")

    def add(self, prop: str, seconds: float, cpu_seconds: float, compiled: bool = False) -> None:
        """One case of ``prop``; ``compiled``: it compiled a kernel (so it is not a warm case)."""
        warm = not compiled
        self._bump(prop, (1, seconds, cpu_seconds, int(warm), seconds if warm else 0.0))

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

    def as_dict(self) -> dict[str, Any]:
        return {**{key: getattr(self, key) for key in self._SUMS}, "failures": self.failures}

    def properties(self) -> dict[str, dict[str, Any]]:
        """``{property: {cases, seconds, cpu_seconds, warm_cases, warm_seconds, failures}}``,
        failures counted per property."""
        out = {name: {**{key: getattr(self, key).get(name, 0) for key in self._SUMS}, "failures": 0}
               for name in self.cases}
        for failure in self.failures:
            entry = out.setdefault(failure.get("property", "?"), {**{key: 0 for key in self._SUMS}, "failures": 0})
            entry["failures"] += 1
        return out
