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
* a case of an entry varies the exact K and V where the backend takes them at run time (any
  value with the same tiles, trip counts and class: ``Entry.K_choices``; else the entry's own),
  lengths, layouts, values and the runtime launch knobs; its heads are the entry's (they are
  compile-time: kernels.py says why).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from wy_ascend.backends import BACKENDS, LaunchConfig
from wy_ascend.env import number
from wy_ascend.planning import UnsupportedProblemError
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import widened

POOL_ENV = "WY_ASCEND_POOL"
DATE_ENV = "WY_ASCEND_POOL_DATE"
SKIP_ENV = "WY_ASCEND_POOL_SKIP"  # indices into the night's pool left out (set by the warm-up for its workers)
MIN_DIM, MAX_DIM = 16, 256  # the K/V range of fuzz draws (strategies.dims)
MODES = ("grid", "persistent")
# Seconds one entry's compiles may take in the warm-up (WY_ASCEND_WARMUP_DEADLINE): an entry of
# ~8 specializations compiled in ~12 s on the H200; one took over 75 s (docs/ledger.md).
ENTRY_DEADLINE_S = 90.0


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


def _instances(case: Case) -> list[Case]:
    """The cases whose launches make up ``case``'s entry: both launch shapes, and with grouped
    heads the same with every key head repeated (grouped_heads runs that twin, H = HV) and, where
    the backend has the variant, the backward grouped and per value head (Backend.groups_dk picks by
    the grid's size; a pooled case may also draw the ``group_dk`` knob); with a gate below float32,
    the twin with float32 gates in the default launch shape (``properties.widened``: widened_gates
    runs it)."""
    twins = [case, case.replace(H=case.HV)] if case.H < case.HV else [case]
    if case.H < case.HV and case.backend != "npu":
        twins += [case.replace(knobs={**case.knobs, "group_dk": g}) for g in (False, True)]
    shapes = [c.replace(knobs={**c.knobs, "mode": mode}) for c in twins for mode in MODES]
    return shapes + [widened(c) for c in twins if c.H == case.H and widened(c) != c]  # not grouped_heads' twin


def _labels(case: Case) -> tuple[str, ...]:
    """The sorted specialization labels of both kernels of every ``_instances`` case."""
    return tuple(sorted({s.label for c in _instances(case) for s in c.specializations().values()}))


def entries(backend: str) -> tuple[Entry, ...]:
    """``_entries`` of ``backend`` with its runtime-dims rule as it stands (Backend.runtime_dims)."""
    return _entries(backend, BACKENDS[backend].runtime_dims(LaunchConfig()))


@functools.cache
def _entries(backend: str, runtime_dims: bool) -> tuple[Entry, ...]:
    """Every entry of ``backend``, in a fixed shuffled order: one per distinct set of specializations among the
    lowering gate's specs for it (with their beta, g and cu_seqlens dtypes), those whose both kernels plan."""
    from wy_ascend.lowering import backend_specs

    specs, _ = backend_specs(backend, LaunchConfig(num_cores=1, runtime_dims=runtime_dims))
    found: dict[tuple[str, ...], Entry] = {}
    for s in specs:
        template = Case(H=s.H, HV=s.HV, K=s.K, V=s.V, BT=s.BT, dtype=s.dtype, use_g=s.USE_G, backend=backend,
                        cu_seqlens=(0, s.BT + 1) if s.IS_VARLEN else None, T=s.BT + 1, B=1,
                        **{name: d if d != s.dtype else None for name, d in (("beta_dtype", s.gate_dtype),
                                                                             ("g_dtype", s.g_dtype))},
                        index_dtype=s.index_dtype or "int64")
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
    size = number(POOL_ENV, -1, int, "pool entries (0: no pool)")
    return default if size < 0 else size or None


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
    skip = {int(i) for i in (os.environ.get(SKIP_ENV) or "").split(",") if i.strip()}
    return tuple(e for i, e in enumerate(select(entries(backend), size, rotation_day())) if i not in skip)


# ----------------------------------------------------------------------------- warm-up


def _compile(case: Case) -> float:
    """Run both ops on ``case`` (one ``_instances`` case of an entry, a tiny problem), so its
    compiles land in Triton's persistent cache; returns the seconds taken."""
    from wy_ascend.testing.properties import device_of, run_ops

    start = time.perf_counter()
    run_ops(case, case.build_inputs(device_of(case)))
    return time.perf_counter() - start


def _serve_compiles(conn: Any, target: Callable[[Case], float]) -> None:
    """A warm-up process: ``target(case)`` for each case received until None; answers each with
    an error text (None: compiled). One process serves many cases, so torch, triton and the
    device start once per process, not once per case."""
    while (case := conn.recv()) is not None:
        try:
            target(case)
            conn.send(None)
        except BaseException as e:  # noqa: BLE001 - reported by the parent
            conn.send(f"{type(e).__name__}: {e}")


@dataclass
class WarmUp:
    """What a warm-up did: its wall seconds, the entries compiled, failed and cut at the deadline."""

    seconds: float = 0.0
    compiled: list[Entry] = field(default_factory=list)
    failed: list[Entry] = field(default_factory=list)
    slow: list[Entry] = field(default_factory=list)


@dataclass
class _Busy:
    """A warm-up process's current case: its entry and when it started."""

    entry: Entry
    began: float


def warm_up(pool: tuple[Entry, ...], jobs: int, deadline: float = ENTRY_DEADLINE_S, out: TextIO | None = None,
            target: Callable[[Case], float] = _compile) -> WarmUp:
    """Compile every specialization of ``pool`` in ``jobs`` spawned processes that take the
    ``_instances`` cases of the entries one at a time (an entry's launch shapes and grouped-heads
    twin compile in parallel), with a progress line on ``out`` (default: stderr at call time).

    A case still compiling after ``deadline`` seconds is killed with its process (a fresh one
    takes its place) and its entry listed as ``slow``, its other cases stopped or never started:
    on the H200 a few specializations compile for minutes (docs/ledger.md sessions 5-6),
    and a warm-up that waits for them never starts the run; the fuzz run then leaves the entry out
    of its pool (a compile-time cliff the summary names). An entry with a failing compile (an
    error, or its process dying) is listed as ``failed`` and stays in the pool: its cases fail
    where it shows, shrunk and stored like any failure. The others are ``compiled``, in the order
    they finished."""
    from multiprocessing.connection import wait

    out = out or sys.stderr
    ctx = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    result = WarmUp()
    waiting = [(entry, case) for entry in pool for case in _instances(entry.template)]
    left = {entry.name: sum(e is entry for e, _ in waiting) for entry in pool}
    failed: set[str] = set()
    idle: list[tuple[Any, Any]] = []  # (process, connection) waiting for a case
    busy: dict[Any, tuple[Any, _Busy]] = {}  # connection -> (process, its case)

    def spawn() -> tuple[Any, Any]:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve_compiles, args=(child, target), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def finish(entry: Entry, verdict: list[Entry]) -> None:
        verdict.append(entry)
        done = len(result.compiled) + len(result.failed) + len(result.slow)
        print(f"\rwarm-up [{'#' * (30 * done // len(pool)):<30}] {done}/{len(pool)} entries "
              f"{time.perf_counter() - start:.0f} s", end="", file=out, flush=True)

    def case_done(entry: Entry, error: str | None) -> None:
        if error is not None and entry.name not in failed:
            failed.add(entry.name)
            print(f"\nwarm-up: {entry.name}: failed ({error})", file=out)
        left[entry.name] -= 1
        if left[entry.name] == 0:
            finish(entry, result.failed if entry.name in failed else result.compiled)

    try:
        while waiting or busy:
            while waiting and len(busy) < max(1, jobs):
                proc, conn = idle.pop() if idle else spawn()
                entry, case = waiting.pop(0)
                conn.send(case)
                busy[conn] = (proc, _Busy(entry, time.perf_counter()))
            for conn in wait(list(busy), timeout=0.05):
                proc, job = busy.pop(conn)
                try:
                    error = conn.recv()
                except EOFError:  # the process died inside the compile
                    proc.join()
                    error = f"its process exited with code {proc.exitcode}"
                else:
                    idle.append((proc, conn))
                case_done(job.entry, error)
            now = time.perf_counter()
            for entry in {job.entry.name: job.entry for _, job in busy.values() if now - job.began >= deadline}.values():
                print(f"\nwarm-up: {entry.name}: still compiling after {deadline:.0f} s, left out of the pool", file=out)
                for conn, (proc, job) in list(busy.items()):
                    if job.entry is entry:
                        proc.kill()
                        proc.join()
                        del busy[conn]
                waiting = [(e, c) for e, c in waiting if e is not entry]
                finish(entry, result.slow)
    finally:
        for _, conn in idle:
            conn.send(None)
        for proc, _ in [*idle, *busy.values()]:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    print(file=out)
    result.seconds = time.perf_counter() - start
    return result


def describe(pool: tuple[Entry, ...] | None, backend: str) -> str:
    if pool is None:
        return "pool: none (every case drawn freely)"
    n = len(entries(backend))
    return (f"pool: {len(pool)} of {n} entries ({sum(len(e.labels) for e in pool)} specializations), day "
            f"{rotation_day()}; {nights_to_cover(n, len(pool))} nights cover every entry")
