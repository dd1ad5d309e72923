"""Drawing examples of a strategy outside a Hypothesis test, the same ones every run."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

QUIET = settings(database=None, derandomize=True, deadline=None, phases=[Phase.generate],
                 suppress_health_check=list(HealthCheck))


def draw_many(strategy: st.SearchStrategy, n: int) -> list:
    """``n`` examples of ``strategy`` (deterministic: derandomized, no database)."""
    out: list = []

    @settings(QUIET, max_examples=n)
    @given(strategy)
    def collect(x: object) -> None:
        out.append(x)

    collect()
    return out
