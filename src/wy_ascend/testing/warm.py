"""Compile a perf case's kernels in parallel processes before it is timed: one autotune config a task.

A first call of a shape on a compiling backend autotunes, and each config it tries is a compile run
one after another: ours up to 5 a forward and 3 a backward (backends.CUDA_CONFIGS, FWD_REGISTER_CAPPED_CONFIGS),
fla-core's 9 forward and 6 backward.
On the H200 that made a perf case's first calls take 26-39 s, 97% of a perf run's time, so a 24-case
profile outlasted a 10-minute device session (docs/ledger.md, session 16).

``warm(case)`` hands every (op, provider, config index) of the case to a pool of ``jobs`` spawned
processes. Each calls that op on the case's own inputs (the same specialization, hence the same
compile) with Triton's autotuner held to that one config (``only_config``), so the compile lands in
Triton's persistent cache. The timing process's first call then autotunes over every config as
before, loading each compile from the cache. Nothing timed changes: the workers' picks are thrown
away (their autotuners see one config; fla-core's result cache is off in them) and they use the
GPU only while the timing process waits for them, and build inputs ``BUILDS_AT_ONCE`` at a time.

``WY_ASCEND_COMPILE_JOBS`` sets the processes (0 or 1: no warm-up). By default cuda and npu-cuda use
the host's CPUs less one, shared among pytest-xdist workers, at most ``MAX_JOBS`` (what ran on the
H200); npu none (not run on an NPU, where a config compiles through bishengir for minutes: set the
variable to try it); the interpreter compiles nothing. A warm-up still running at its deadline
(``DEADLINE_S`` a case) ends, its processes killed: the timing process compiles what is left itself,
as without a warm-up. benchmarks/compare_peer.py warms its shapes through ``warm_all`` the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ALL_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import torch

from ..backends import BACKENDS
from ..env import number
from .case import Case
from .child import DEVICE_ENV, bind_device, die_with_parent
from .device_memory import case_bytes, ledger_for

JOBS_ENV = "WY_ASCEND_COMPILE_JOBS"
# Configs tried per kernel at most: fla-core's forward, 3 warps x 3 stages (ours: 3).
MAX_CONFIGS = 9
OPS = ("fwd", "bwd")
PROVIDERS = ("ours", "fla")
# Default processes at most: 15 ran on the H200 (16 CPUs; docs/ledger.md session 17), each holding a device
# context and a case's inputs; a case has 21 compiles at most (ours 3 + 3, fla-core's 9 + 6).
MAX_JOBS = 15
# Input builds at once across a pool's workers: a large perf case's float64 draw takes ~11 GiB of the
# device, and 15 workers drawing at once ran the H200 out of memory (session 17); the bf16 inputs each
# worker keeps are a fraction of that.
BUILDS_AT_ONCE = 2
# Seconds the warm-up of one case may take: a config compiles in 1-4 s on the H200's host, an fp32
# backward's in up to ~15 s (backends.FP32_DOT_WORK); a task past this is a runaway.
DEADLINE_S = 120.0
# What a task did: its config compiled (and ran), there is no such config (index past the kernel's
# search), or the provider is not installed.
COMPILED, BEYOND, ABSENT = "compiled", "beyond", "absent"


class _Beyond(Exception):
    """Raised in a worker when the kernel launched has fewer configs than the task's index."""


@contextlib.contextmanager
def only_config(index: int) -> Iterator[None]:
    """Hold every Triton autotuner in this process to its ``index``-th config (``_Beyond`` where it
    has fewer): the one compile a warm-up task makes."""
    from triton.runtime.autotuner import Autotuner

    run, prune = Autotuner.run, Autotuner.prune_configs

    def run_one(self: Any, *args: Any, **kwargs: Any) -> Any:
        if index >= len(self.configs):
            raise _Beyond
        return run(self, *args, **kwargs)

    def prune_one(self: Any, kwargs: Any) -> list[Any]:
        configs = prune(self, kwargs)
        if index >= len(configs):
            raise _Beyond
        return [configs[index]]

    Autotuner.run, Autotuner.prune_configs = run_one, prune_one  # type: ignore[method-assign]
    try:
        yield
    finally:
        Autotuner.run, Autotuner.prune_configs = run, prune  # type: ignore[method-assign]


def default_jobs(backend: str) -> int:
    """Warm-up processes for ``backend``: ``WY_ASCEND_COMPILE_JOBS``, else the module doc's default."""
    jobs = number(JOBS_ENV, -1, int, "processes")
    if jobs >= 0:
        return jobs
    if BACKENDS[backend].interpret or backend == "npu":
        return 0
    share = (os.cpu_count() or 1) // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))
    return max(0, min(MAX_JOBS, share - 1))


# ----------------------------------------------------------------------------- the workers

Calls = dict[str, dict[str, Callable[[], Any]]]  # per op, per provider: the call (perf.op_calls' shape)
_CALLS: tuple[Any, Calls] | None = None  # a worker's calls of the subject it is warming, made once
_BUILDS: Any = None  # the pool's semaphore over input builds (BUILDS_AT_ONCE)


def _worker_setup(builds: Any) -> None:
    """A worker: no fla-core result cache (its one-config picks must not be kept), dies with its
    parent, binds the parent's device, builds inputs under the pool's ``builds`` semaphore."""
    global _BUILDS
    _BUILDS = builds
    os.environ["FLA_CACHE_RESULTS"] = "0"
    die_with_parent()
    bind_device(os.environ.get(DEVICE_ENV))


def run_config(subject: Any, device: torch.device, make_calls: Callable[[], Calls], op: str, provider: str,
               index: int) -> str:
    """A worker's task: call ``op`` of ``provider`` with every autotuner held to config ``index``; the
    calls (their inputs on ``device``) made by ``make_calls`` once per ``subject``. COMPILED, BEYOND
    or ABSENT."""
    global _CALLS
    backend = getattr(torch, device.type)
    # Only the inputs stay: 15 workers keeping what their allocators reserved for the float64 input
    # build and the outputs (10 GiB each on large cases) ran the H200 out of memory.
    empty_cache = getattr(backend, "empty_cache", lambda: None)
    if _CALLS is None or _CALLS[0] != subject:
        _CALLS = None  # the last subject's tensors freed before this one's are made
        ledger = ledger_for(subject) if isinstance(subject, Case) else None
        if ledger is not None:  # held while this worker keeps the inputs (device_memory.py)
            ledger.reserve(case_bytes(subject))
        with _BUILDS if _BUILDS is not None else contextlib.nullcontext():
            _CALLS = (subject, make_calls())
            empty_cache()
    call = _CALLS[1][op].get(provider)
    if call is None:
        return ABSENT
    try:
        with only_config(index):
            call()
        backend.synchronize()
    except _Beyond:
        return BEYOND
    finally:
        empty_cache()
    return COMPILED


def compile_one(case: Case, op: str, provider: str, index: int) -> str:
    """``run_config`` of a perf case: its inputs and ``perf.op_calls``."""
    from .perf import op_calls

    device = BACKENDS[case.backend or "cpu"].device()
    return run_config(case, device, lambda: op_calls(case, case.build_inputs(device)), op, provider, index)


# ----------------------------------------------------------------------------- the pool


@dataclass
class Warmed:
    """What one warm-up did: its seconds and tasks by outcome (errors by task, those past its deadline)."""

    seconds: float = 0.0
    jobs: int = 0
    deadline: float = DEADLINE_S
    outcomes: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    late: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: processes, seconds, outcomes, each error's first line (cut at 160 characters)."""
        counts = ", ".join(f"{n} {k}" for k, n in sorted(self.outcomes.items()))
        errors = {task: e.splitlines()[0][:160] for task, e in self.errors.items()}
        extra = (f"; errors: {errors}" if errors else "") + (f"; past {self.deadline:g} s: {self.late}"
                                                            if self.late else "")
        return f"warm-up: {self.jobs} processes, {self.seconds:.1f} s ({counts}){extra}"


class _Pool:
    """The process's warm-up workers, started at the first warm-up and kept (torch, triton and the
    device start once a worker), killed at a deadline and at exit."""

    def __init__(self) -> None:
        self.executor: ProcessPoolExecutor | None = None
        self.jobs = 0

    def get(self, jobs: int) -> ProcessPoolExecutor:
        if self.executor is None or self.jobs != jobs:
            self.close()
            import multiprocessing

            spawn = multiprocessing.get_context("spawn")
            self.executor = ProcessPoolExecutor(jobs, mp_context=spawn, initializer=_worker_setup,
                                                initargs=(spawn.BoundedSemaphore(BUILDS_AT_ONCE),))
            self.jobs = jobs
        return self.executor

    def close(self, kill: bool = False) -> None:
        if self.executor is None:
            return
        if kill:
            for proc in list(getattr(self.executor, "_processes", {}).values()):
                proc.kill()
        self.executor.shutdown(wait=not kill, cancel_futures=True)
        self.executor = None


_POOL = _Pool()
atexit.register(_POOL.close, True)


def warm(case: Case, jobs: int | None = None, deadline: float = DEADLINE_S) -> Warmed | None:
    """Compile ``case``'s kernels (ours and fla-core's, forward and backward, every config) in
    ``jobs`` processes (default ``default_jobs``); None where that is fewer than 2."""
    jobs = default_jobs(case.backend or "cpu") if jobs is None else jobs
    return warm_all([case], compile_one, jobs, deadline) if jobs >= 2 else None


def warm_all(subjects: list[Any], task: Callable[[Any, str, str, int], str], jobs: int,
             deadline: float = DEADLINE_S) -> Warmed:
    """``task(subject, op, provider, index)`` for every subject, op, provider and config index in
    ``jobs`` processes, subject by subject (a worker makes a subject's inputs once for its tasks).
    A task's error is recorded, not raised: the timing process's own call meets it again where it
    is real. Tasks are named op/provider/index, after ``subject:`` where there are several."""
    start = time.perf_counter()
    executor = _POOL.get(jobs)
    futures: dict[Future[str], str] = {}
    for subject in subjects:
        prefix = f"{subject}:" if len(subjects) > 1 else ""
        for name in [(op, provider, i) for i in range(MAX_CONFIGS) for op in OPS for provider in PROVIDERS]:
            futures[executor.submit(task, subject, *name)] = prefix + "/".join(map(str, name))
    done, late = wait(futures, timeout=deadline, return_when=ALL_COMPLETED)
    result = Warmed(jobs=jobs, deadline=deadline, late=sorted(futures[f] for f in late))
    for f in done:
        error = f.exception()
        if error is None:
            result.outcomes[f.result()] = result.outcomes.get(f.result(), 0) + 1
        else:
            result.errors[futures[f]] = f"{type(error).__name__}: {error}"
    if late or result.errors:  # a runaway, or a worker whose device context an error may have spoilt
        _POOL.close(kill=True)
    result.seconds = time.perf_counter() - start
    return result
