"""How a property says it does not hold: ``PropertyFailure`` with its metrics (a module of its own, so
that property modules outside the properties package (testing/scaling.py) raise it without importing it)."""

from __future__ import annotations

from typing import Any

Metrics = dict[str, Any]


class PropertyFailure(AssertionError):
    """A property does not hold for a case; ``metrics`` holds the measured errors."""

    def __init__(self, message: str, metrics: Metrics | None = None) -> None:
        super().__init__(message)
        self.metrics = metrics or {}
