"""Device memory shared by every process that runs cases on one accelerator: a ledger of reservations.

The nightly runs several xdist workers per device, each with a case runner, and regression replays
beside them; a large case (a float64 oracle of millions of tokens on the GPU) next to others ran the
H200 out of memory, and an out-of-memory error is no verdict. So each case reserves its estimated
bytes (``case_bytes``) in a ledger that all processes of the machine share (a JSON file per device
under the temporary directory, locked with ``flock``) before it runs, and waits while the
reservations held would go past the budget (``BUDGET_FRACTION`` of the device's memory). A case
larger than the budget runs alone. Waiting is first come, first served: a request that does not
fit takes a ticket, and a later one fits only beside the held reservations and every earlier
waiter's bytes. Without the queue a request waiting to run alone could wait for ever, every small
case of the other workers slipping in between its polls (the likely reason an H200 nightly's replay
of a 360k-token case did not end in the run's six minutes of tests). Reservations and tickets of
processes that died are dropped on the next read. The wait is the case's ``device_wait`` phase (the
fuzz report's column of that name). The compile warm-up's workers (testing/warm.py), which keep a
case's inputs between their tasks, hold a reservation for them as long as they do: in an H200 run
they held 5.6 GiB each outside the ledger.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .case import Case
from .phases import phase

BUDGET_FRACTION = 0.8  # of the device's memory: the rest for CUDA contexts, Triton's modules and fragmentation
MIN_RESERVATION = 512 * 2**20  # a case's floor: its launches' modules and the allocator's first blocks
POLL_S = 0.2
T = TypeVar("T")
LEDGER_ENV = "WY_ASCEND_DEVICE_LEDGER_DIR"  # where the ledgers live (default: the temporary directory)


def case_bytes(case: Case, prop: str | None = None) -> int:
    """Device bytes a run of property ``prop`` on ``case`` may hold at once: its inputs, outputs and
    arguments in their dtypes, and the float64 oracle (on the GPU itself: testing.case.float64_device)
    with its autograd intermediates, about six float64 copies of the inputs (what fuzz/strategies.py
    bounds a large case's host bytes by); a perf run holds the timing's own buffers beside them
    (``perf.SCRATCH_BYTES``: the copy-bandwidth probe's source and destination and the L2 flush). A property
    of EXACT_BYTES holds what its own count says (index_width: ``real_size_bytes``)."""
    if prop in EXACT_BYTES:
        return max(MIN_RESERVATION, real_size_bytes(case))
    elements = case.H * case.K + case.HV * (2 * case.K + 2 * case.V + case.BT + 3)
    nbytes = max(MIN_RESERVATION, case.B * case.T * elements * 8 * 6)
    if prop == "perf":
        from .perf import SCRATCH_BYTES  # here: perf imports torch and the ops, which the ledger needs not

        nbytes += SCRATCH_BYTES
    return nbytes


class DeviceTooSmall(Exception):  # noqa: N818 - an outcome, not a defect: the case has no verdict here
    """A case whose run needs more than its device's ledger budget (``Ledger.budget``) even alone: no
    verdict on this device; the fuzz suite rejects the case (fuzz/test_fuzz.py ``check``)."""


def real_size_bytes(case: Case) -> int:
    """Device bytes index_width's real-size run (testing/scaling.py ``real_size_check``) holds at once: both
    ops' inputs and outputs at the case's real sizes (k and dk [B,T,H,K]; w, dw [B,T,HV,K]; v, u, du, dv
    [B,T,HV,V]; A [B,T,HV,BT]; beta, dbeta, g, dg [B,T,HV]) and, for grouped heads, a float32 dk per value
    head (the backward's partial sums); its oracle is of one chunk."""
    tokens, io = case.B * case.T, case.torch_dtype.itemsize
    gates = 2 * case.dtype_of("beta").itemsize + (2 * case.dtype_of("g").itemsize if case.use_g else 0)
    per_token = (io * (2 * case.H * case.K + case.HV * (2 * case.K + 4 * case.V + case.BT)) + case.HV * gates
                 + (4 * case.HV * case.K if case.HV > case.H else 0))
    return tokens * per_token


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Ledger:
    """The reservations on one device (``name``, e.g. "cuda0"), ``budget`` bytes in all. The file holds
    ``held`` (pid -> bytes), ``waiting`` (pid -> [ticket, bytes]) and the ``next`` ticket."""

    def __init__(self, name: str, budget: int, directory: Path | None = None) -> None:
        root = directory or Path(os.environ.get(LEDGER_ENV) or tempfile.gettempdir())
        self.path, self.budget = root / f"wy-ascend-memory-{name}.json", budget

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The ledger's state (the dead processes' entries dropped), written back on exit, under the lock."""
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                try:
                    state = json.loads(self.path.read_text())
                    held = {pid: int(n) for pid, n in state["held"].items() if _alive(int(pid))}
                    waiting = {pid: [int(t), int(n)] for pid, (t, n) in state["waiting"].items() if _alive(int(pid))}
                    state = {"held": held, "waiting": waiting, "next": int(state["next"])}
                except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):
                    state = {"held": {}, "waiting": {}, "next": 0}  # none yet, or a file of another format
                yield state
                tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(state))
                os.replace(tmp, self.path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def try_reserve(self, nbytes: int) -> bool:
        """Reserve ``nbytes`` for this process (replacing what it held) if they fit beside the others'
        reservations and the bytes of every waiter ahead of it (or nothing is held and nobody is ahead);
        else it holds nothing and keeps, or takes, its place in the queue (``withdraw`` leaves it)."""
        with self._locked() as state:
            me, held, waiting = str(os.getpid()), state["held"], state["waiting"]
            held.pop(me, None)
            mine = waiting[me][0] if me in waiting else state["next"]  # not queued yet: behind every waiter
            ahead = sum(n for pid, (ticket, n) in waiting.items() if ticket < mine and pid != me)
            others = sum(held.values())
            if (others or ahead) and others + ahead + nbytes > self.budget:
                if me not in waiting:
                    waiting[me] = [mine, nbytes]
                    state["next"] = mine + 1
                return False
            waiting.pop(me, None)
            held[me] = nbytes
            return True

    def withdraw(self) -> None:
        """Leave the queue (a wait given up)."""
        with self._locked() as state:
            state["waiting"].pop(str(os.getpid()), None)

    def reserve(self, nbytes: int) -> None:
        """Hold ``nbytes`` for this process until ``release`` or its end, waiting (``device_wait``) for room
        and for the waiters ahead of it."""
        with phase("device_wait"):
            try:
                while not self.try_reserve(nbytes):
                    time.sleep(POLL_S)
            except BaseException:
                self.withdraw()
                raise

    def release(self) -> None:
        with self._locked() as state:
            state["held"].pop(str(os.getpid()), None)

    @contextlib.contextmanager
    def reserved(self, nbytes: int) -> Iterator[None]:
        """Hold ``nbytes`` for the block, waiting (phase ``device_wait``) until they fit."""
        self.reserve(nbytes)
        try:
            yield
        finally:
            self.release()


NO_TENSORS = frozenset({"plan_coverage"})  # properties that build no tensor: they reserve nothing
# Properties whose case_bytes is the exact count of what they hold, not an estimate's upper bound: past the
# budget they cannot run even alone, and their reservation raises DeviceTooSmall instead of waiting for the
# device to empty (a device run of index_width drew a case needing hundreds of GiB and ran out of memory).
EXACT_BYTES = frozenset({"index_width"})


@contextlib.contextmanager
def reserved_for(case: Case, prop: str | None = None, alone: bool = False) -> Iterator[None]:
    """``case``'s reservation for a run of property ``prop`` on its backend's device for the block (with
    ``alone``, the whole budget: it waits until no other process holds any); nothing on the cpu backend or
    for a property in NO_TENSORS (in the H200 nightly plan_coverage's cases waited 104 s for room they never
    used). Before the reservation goes, the allocator's cached blocks go back to the device: a process
    that kept them held memory no ledger entry named (an H200 nightly ran out of memory beside three
    processes holding 55, 33 and 27 GiB). A property of EXACT_BYTES whose count passes the budget raises
    DeviceTooSmall before it reserves anything."""
    ledger = _ledger(case, prop)
    if ledger is None:
        yield
        return
    need = case_bytes(case, prop)
    if prop in EXACT_BYTES and need > ledger.budget:
        raise DeviceTooSmall(f"{prop} on this case holds {need:,} bytes ({need / 2**30:.1f} GiB), past this device's "
                             f"budget of {ledger.budget:,} bytes: no verdict here")
    with ledger.reserved(ledger.budget if alone else need):
        try:
            yield
        except BaseException as error:
            # The error's traceback holds the block's frames and so its tensors: their locals go first
            # (the text of the traceback keeps every line), or the cache returned keeps them, and the
            # process holds their memory outside the ledger until its next case ends (an H100 nightly's
            # case ran out of memory alone beside other processes holding 2-18 GiB each).
            traceback.clear_frames(error.__traceback__)
            # The block's error is the verdict: after a device fault the context is gone and returning the
            # cache raises the fault again, which hid the kernel's own error in an H200 nightly's record.
            with contextlib.suppress(Exception):
                _return_cached(case)
            raise
        _return_cached(case)


def _return_cached(case: Case) -> None:
    """The allocator's cached blocks back to the device; what the process still holds after it (live
    tensors: memory outside the ledger once the reservation goes) is said on stderr, the case log."""
    import gc

    import torch

    gc.collect()  # tensors held only by reference cycles (a failure's traceback frames) first
    device = torch.npu if case.backend == "npu" else torch.cuda  # type: ignore[attr-defined]
    device.empty_cache()
    kept = device.memory_reserved()
    if kept > MIN_RESERVATION:
        sys.stderr.write(f"wy_ascend: {kept / 2**30:.2f} GiB still held by this process after its case, outside "
                         "the device-memory ledger\n")


def out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is the device running out of memory (torch's allocator, or a kernel launch's
    "out of memory" from Triton's driver)."""
    import torch

    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()


def run_within_memory(case: Case, prop: str | None, run: Callable[[], T]) -> T:
    """``run()`` under ``case``'s reservation. Out of memory beside other processes' cases is no verdict
    (the estimate or another process's use was off): the case runs again alone on the device, where an
    out-of-memory error is its own (the case does not fit the device)."""
    try:
        with reserved_for(case, prop):
            return run()
    except Exception as error:  # noqa: BLE001 - re-raised unless it is out of memory on a shared device
        if not out_of_memory(error) or _ledger(case, prop) is None:
            raise
    with reserved_for(case, prop, alone=True):
        return run()


def _ledger(case: Case, prop: str | None) -> Ledger | None:
    """The ledger a run of property ``prop`` on ``case`` reserves in (None: it reserves nothing)."""
    return ledger_for(case) if prop not in NO_TENSORS else None


def ledger_for(case: Case) -> Ledger | None:
    """The ledger of the device ``case``'s backend runs on in this process (None: the cpu backend).
    A backend that cannot run here raises its BackendUnavailableError first (not torch_npu's
    import error or torch's "not compiled with CUDA")."""
    backend = case.backend or "cpu"
    if backend == "cpu":
        return None
    import torch

    from ..backends import BACKENDS, check_available

    check_available(BACKENDS[backend])

    if backend == "npu":
        import torch_npu  # noqa: F401

        index = torch.npu.current_device()  # type: ignore[attr-defined]
        total = torch.npu.get_device_properties(index).total_memory  # type: ignore[attr-defined]
    else:
        index = torch.cuda.current_device()
        total = torch.cuda.get_device_properties(index).total_memory
    return Ledger(f"{'npu' if backend == 'npu' else 'cuda'}{index}", int(total * BUDGET_FRACTION))
