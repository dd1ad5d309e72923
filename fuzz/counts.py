"""Per-property fuzz counts: what a tally, a progress file and fuzz-report.json hold, and how
they add up.

No third-party imports: .ci/nightly_summary.py uses it on a runner whose setup may have failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Counts:
    """Cases, seconds and CPU seconds per property, and the failures recorded."""

    cases: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, prop: str, seconds: float, cpu_seconds: float, cases: int = 1) -> None:
        self.cases[prop] = self.cases.get(prop, 0) + cases
        self.seconds[prop] = self.seconds.get(prop, 0.0) + seconds
        self.cpu_seconds[prop] = self.cpu_seconds.get(prop, 0.0) + cpu_seconds

    def merge(self, doc: Mapping[str, Any]) -> None:
        """Add the counts of ``doc``, an ``as_dict`` document (a shipped tally, a progress file)."""
        for name, n in doc.get("cases", {}).items():
            self.add(name, doc.get("seconds", {}).get(name, 0.0), doc.get("cpu_seconds", {}).get(name, 0.0), n)
        self.failures += doc.get("failures", [])

    def as_dict(self) -> dict[str, Any]:
        return {"cases": self.cases, "seconds": self.seconds, "cpu_seconds": self.cpu_seconds,
                "failures": self.failures}

    def properties(self) -> dict[str, dict[str, Any]]:
        """``{property: {cases, failures, seconds, cpu_seconds}}``, failures counted per property."""
        out = {name: {"cases": n, "failures": 0, "seconds": self.seconds.get(name, 0.0),
                      "cpu_seconds": self.cpu_seconds.get(name, 0.0)} for name, n in self.cases.items()}
        for failure in self.failures:
            entry = out.setdefault(failure.get("property", "?"),
                                   {"cases": 0, "failures": 0, "seconds": 0.0, "cpu_seconds": 0.0})
            entry["failures"] += 1
        return out
