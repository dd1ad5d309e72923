"""What every helper process of the fuzz suite does first: bind its parent's accelerator and die
with its parent. Shared by the case runner's children (``runner``) and the compile warm-up's
workers (``warm``), so neither reaches into the other."""

from __future__ import annotations

import os
import signal
import sys

DEVICE_ENV = "WY_ASCEND_RUNNER_DEVICE"  # "npu:N" / "cuda:N": the accelerator a child binds


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
