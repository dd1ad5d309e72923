"""What every helper process of the fuzz suite does first: bind its parent's accelerator and die
with its parent. Shared by the case runner's children (``runner``) and the compile warm-up's
workers (``warm``), so neither reaches into the other. And how many threads the processes of a
cpu run take (``share_cores``, set once by the pytest controller for every process it starts)."""

from __future__ import annotations

import os
import signal
import sys

DEVICE_ENV = "WY_ASCEND_RUNNER_DEVICE"  # "npu:N" / "cuda:N": the accelerator a child binds
THREADS_ENV = "WY_ASCEND_THREADS"  # torch's intra-op threads a process uses (default: share_cores)


# What sizes the thread pools of a process's numerical libraries when it starts (OpenMP: torch's; OpenBLAS
# and MKL: numpy's, which the interpreter's dots run on).
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def share_cores(workers: int) -> int:
    """Give the processes this one starts (pytest-xdist workers, and through them case runners and
    warm-up workers) their share of the machine's cores: the cores over the ``workers`` running at once,
    at least one, or ``WY_ASCEND_THREADS``; ``THREAD_VARS`` where unset (their libraries size their pools
    at load) and torch's threads here. Each process taking every core made two workers on two cores spin
    against each other: the ci fuzz profile ran in 152 s, and in 38 s with one thread each. Returns the
    threads. The cpu backend's runs only: a device run's host threads are left as they were (not measured
    on a device)."""
    from ..env import number

    threads = number(THREADS_ENV, max(1, (os.cpu_count() or 1) // workers), int, "threads", positive=True)
    for var in THREAD_VARS:
        os.environ.setdefault(var, str(threads))
    import torch

    torch.set_num_threads(threads)
    return threads


def xdist_workers(numprocesses: object) -> int:
    """The workers pytest-xdist starts for its ``-n`` value as a ``pytest_configure`` hook reads it: a count
    (xdist turns "auto" and "logical" into one in its ``pytest_cmdline_main``, before any configure hook runs),
    or None or 0 (none: one process does the work). Anything else is a ValueError naming it."""
    if numprocesses is None or (isinstance(numprocesses, int) and not isinstance(numprocesses, bool)):
        return max(1, numprocesses or 0)
    raise ValueError(f"numprocesses must be xdist's resolved worker count (an int) or None, got {numprocesses!r}")


def bind_device(device: str | None) -> None:
    """Make ``device`` ("npu:N" / "cuda:N") this process's current device; anything else binds nothing."""
    if not device or ":" not in device:
        return
    kind, index = device.split(":", 1)
    import torch

    if kind == "npu":
        import torch_npu  # noqa: F401

        torch.npu.set_device(int(index))  # type: ignore[attr-defined]
    elif kind == "cuda":
        torch.cuda.set_device(int(index))


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (PR_SET_PDEATHSIG), so a hung case never
    outlives a killed fuzz worker."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl
        os._exit(1)
