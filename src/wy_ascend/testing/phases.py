"""Seconds per phase of the case running in this process, for the fuzz report's time breakdown.

The phases (the properties package, testing/properties/): ``inputs`` (building the case's inputs and arguments), ``kernel``
(the ops calls), ``oracle`` (the float64 reference) and ``comparison`` (metrics and tolerances).
``with phase("kernel"): ...`` (or ``@phase("oracle")`` on a function) adds the block's seconds
to that phase, less those of any phase nested in it: each second counts once, in the innermost
phase open. ``take()`` returns the seconds per phase since the last ``take`` and starts afresh;
the case runner takes them before and after each case and sends them back with its reply.
Two ``perf_counter`` calls a phase, so the CPU ci profile does not notice them.

Host time only: nothing here waits for a device (the fuzz suite allows no per-case host sync
beyond the comparison's). On cuda or an NPU a kernel launch and the oracle's float64 math return
before the device has done them, so their device time lands in the phase that first waits for
it: on cuda usually the comparison (its ``.item()``), on an NPU the oracle (its copy of the
inputs to the host, queued behind the kernels). ``kernel`` then holds the launches' host work and
any compile (which blocks the launch).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter


class _Clock:
    """The seconds per phase so far, the phases open (innermost last) and when the last one was charged."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.open: list[str] = []
        self.since = 0.0

    def charge(self) -> None:
        """Charge the time since the last charge to the innermost open phase."""
        now = perf_counter()
        if self.open:
            name = self.open[-1]
            self.seconds[name] = self.seconds.get(name, 0.0) + now - self.since
        self.since = now


_CLOCK = _Clock()


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block (or the decorated function) as phase ``name`` (module doc)."""
    _CLOCK.charge()
    _CLOCK.open.append(name)
    try:
        yield
    finally:
        _CLOCK.charge()
        _CLOCK.open.pop()


def take() -> dict[str, float]:
    """The seconds per phase since the last ``take``; the count starts again at zero."""
    seconds, _CLOCK.seconds = _CLOCK.seconds, {}
    return seconds
