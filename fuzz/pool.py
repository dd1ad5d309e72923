"""The specialization pool of a device fuzz run: compile once, test many.

On a device every distinct specialization (specialization.py) is a compile of seconds (minutes
through bishengir), while a warm case runs in milliseconds. A pooled run therefore draws each
case's *structure* from a small pool and varies only what never recompiles:

* the pool's unit is an ``Entry``: heads, chunk size, dtype, gate, varlen, the tiles and trip
  counts of both kernels, whether the last tiles are full and the K/V alignment classes; its
  ``labels`` are the specializations a case of it can launch (fwd and bwd, each in both launch
  shapes, since the launch shape is a drawn knob, and with grouped heads the H = HV twin that
  grouped_heads compares with);
* the entries come from the lowering gate's enumeration (``lowering.backend_specs``), so the
  pools of consecutive nights cover every specialization that gate lowers: ``select`` rotates
  through the sorted entries by date, ``size`` a night, so ``ceil(len(entries) / size)``
  consecutive nights cover them all;
* a case of an entry varies the exact K and V (any value with the same tiles, trip counts and
  class: ``Entry.K_choices``), lengths, layouts, values and the runtime launch knobs; its heads
  are the entry's (they are compile-time: kernels.py says why).

``warm_up`` compiles the pool in parallel processes into Triton's persistent cache before the run.
Profiles set the pool size (profiles.py); ``WY_ASCEND_POOL`` overrides it (0: no pool, every case
drawn freely), ``WY_ASCEND_POOL_DATE`` (YYYY-MM-DD) sets the rotation's date (default: today, UTC).
Interpreter backends compile nothing, so they never pool.
"""

from __future__ import annotations

import datetime
import functools
import math
import multiprocessing
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from wy_ascend.backends import BACKENDS, LaunchConfig
from wy_ascend.planning import UnsupportedProblemError
from wy_ascend.testing.case import Case

POOL_ENV = "WY_ASCEND_POOL"
DATE_ENV = "WY_ASCEND_POOL_DATE"
MIN_DIM, MAX_DIM = 16, 256  # the K/V range of fuzz draws (strategies.dims)
MODES = ("grid", "persistent")


@dataclass(frozen=True)
class Entry:
    """One pool entry: a case structure and the specializations its cases launch."""

    template: Case  # the lowering gate's representative of this structure (mode knob unset)
    labels: tuple[str, ...]  # sorted specialization labels (``_labels``)

    @property
    def name(self) -> str:
        return min(self.labels)

    @functools.cached_property
    def K_choices(self) -> tuple[int, ...]:
        return self._choices("K")

    @functools.cached_property
    def V_choices(self) -> tuple[int, ...]:
        return self._choices("V")

    def _choices(self, dim: str) -> tuple[int, ...]:
        """Every value of ``dim`` in [MIN_DIM, MAX_DIM] whose cases launch the same specializations."""
        want = self.template.specializations()
        return tuple(x for x in range(MIN_DIM, MAX_DIM + 1)
                     if self.template.replace(**{dim: x}).specializations() == want)

    def accepts(self, case: Case) -> bool:
        """Whether ``case`` launches only this entry's specializations (in its own launch shape)."""
        return {s.label for s in case.specializations().values()} <= set(self.labels)


def _labels(case: Case) -> tuple[str, ...]:
    """Both kernels in both launch shapes, and with grouped heads the same with every key head
    repeated (grouped_heads runs that twin, H = HV)."""
    twins = [case, case.replace(H=case.HV)] if case.H < case.HV else [case]
    return tuple(sorted({s.label for c in twins for mode in MODES
                         for s in c.replace(knobs={**c.knobs, "mode": mode}).specializations().values()}))


@functools.cache
def entries(backend: str) -> tuple[Entry, ...]:
    """Every entry of ``backend``, in a fixed shuffled order: one per distinct set of specializations among the
    lowering gate's specs for it (their gate dtype taken as the I/O dtype and cu_seqlens int64, as
    cases build them), those whose both kernels plan."""
    from wy_ascend.lowering import backend_specs

    specs, _ = backend_specs(backend, LaunchConfig(num_cores=1))
    found: dict[tuple[str, ...], Entry] = {}
    for s in specs:
        template = Case(H=s.H, HV=s.HV, K=s.K, V=s.V, BT=s.BT, dtype=s.dtype, use_g=s.USE_G, backend=backend,
                        cu_seqlens=(0, s.BT + 1) if s.IS_VARLEN else None, T=s.BT + 1, B=1)
        try:
            labels = _labels(template)
        except UnsupportedProblemError:  # the other kernel does not fit (npu bwd at BT=128): no case has it
            continue
        found.setdefault(labels, Entry(template, labels))
    ordered = sorted(found.values(), key=lambda e: e.name)
    random.Random(0).shuffle(ordered)  # a fixed mix, so each night's block of entries is a varied one
    return tuple(ordered)


def pool_size(default: int | None) -> int | None:
    """The run's pool size: ``WY_ASCEND_POOL`` if set (0 or empty: none), else the profile's."""
    raw = os.environ.get(POOL_ENV)
    if raw is None or raw == "":
        return default
    try:
        size = int(raw)
    except ValueError:
        raise ValueError(f"{POOL_ENV} must be a whole number of pool entries (0: no pool), got {raw!r}") from None
    if size < 0:
        raise ValueError(f"{POOL_ENV} must be >= 0, got {size}")
    return size or None


def rotation_day(today: datetime.date | None = None) -> int:
    """Days since 1970-01-01 of ``WY_ASCEND_POOL_DATE`` (YYYY-MM-DD), else of ``today`` (UTC)."""
    raw = os.environ.get(DATE_ENV)
    if raw:
        try:
            today = datetime.date.fromisoformat(raw)
        except ValueError:
            raise ValueError(f"{DATE_ENV} must be a date YYYY-MM-DD, got {raw!r}") from None
    today = today or datetime.datetime.now(datetime.timezone.utc).date()
    return (today - datetime.date(1970, 1, 1)).days


def select(all_entries: tuple[Entry, ...], size: int, day: int) -> tuple[Entry, ...]:
    """Night ``day``'s pool: ``size`` consecutive entries (wrapping) starting at ``day * size``, so
    nights d, d+1, ..., d + ceil(n / size) - 1 together hold every entry."""
    n = len(all_entries)
    if size >= n:
        return all_entries
    start = (day * size) % n
    return tuple(all_entries[(start + i) % n] for i in range(size))


def nights_to_cover(n: int, size: int) -> int:
    return math.ceil(n / size)


def run_pool(backend: str, default_size: int | None) -> tuple[Entry, ...] | None:
    """This run's pool on ``backend`` (None: no pool: an interpreter backend, or size none)."""
    size = pool_size(default_size)
    if size is None or BACKENDS[backend].interpret:
        return None
    return select(entries(backend), size, rotation_day())


# ----------------------------------------------------------------------------- warm-up


def _compile(template: Case) -> float:
    """Launch every specialization of ``template``'s entry (``_labels``: one tiny instance each),
    so their compiles land in Triton's persistent cache; returns the seconds taken."""
    from wy_ascend.testing.properties import device_of, run_ops

    start = time.perf_counter()
    for case in ([template, template.replace(H=template.HV)] if template.H < template.HV else [template]):
        inputs = case.build_inputs(device_of(case))
        for mode in MODES:
            run_ops(case.replace(knobs={**case.knobs, "mode": mode}), inputs)
    return time.perf_counter() - start


def warm_up(pool: tuple[Entry, ...], jobs: int, out=sys.stderr) -> float:
    """Compile every specialization of ``pool`` in ``jobs`` spawned processes, with a progress
    line; returns the wall seconds. A failing compile is reported and left to the fuzz run
    (its cases then fail where it shows, shrunk and stored like any failure)."""
    start = time.perf_counter()
    templates = [e.template for e in pool]
    done = 0
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(templates))), mp_context=ctx) as ex:
        futures = {ex.submit(_compile, t): e for t, e in zip(templates, pool)}
        for f in as_completed(futures):
            done += 1
            error = f.exception()
            if error is not None:
                print(f"\nwarm-up: {futures[f].name}: {type(error).__name__}: {error}", file=out)
            bar = "#" * (30 * done // len(templates))
            print(f"\rwarm-up [{bar:<30}] {done}/{len(templates)} entries {time.perf_counter() - start:.0f} s",
                  end="", file=out, flush=True)
    print(file=out)
    return time.perf_counter() - start


def describe(pool: tuple[Entry, ...] | None, backend: str) -> str:
    if pool is None:
        return "pool: none (every case drawn freely)"
    n = len(entries(backend))
    return (f"pool: {len(pool)} of {n} entries ({sum(len(e.labels) for e in pool)} specializations), day "
            f"{rotation_day()}; {nights_to_cover(n, len(pool))} nights cover every entry")
