"""The history property: a call gives the bits it gives alone in a fresh process, whatever the process
called before it.

Every other property starts from a fresh call of one case, so a result that depends on an earlier call
(a cache keyed on less than what its value depends on) passes them all. ``check_history`` runs a
sequence of calls (each a case's forward and backward, ``properties.run_ops``) one after another in one
process, varlen calls passing one ``cu_seqlens`` tensor object wherever their entry count and dtype
agree (changed in place where the values differ, so the varlen cache sees both a hit and an in-place
change), and each call alone in a process that has called nothing; any output whose bits differ fails
with the calls before it. Both run in children forked from a ``HistoryServer``: a fresh interpreter
that imported the package and the kernels and never calls anything (as the case runner's fork server,
cpu backend only: a device runtime must not see a fork). The cpu backend is the only one of its process
(its Triton mode is the interpreter's, tests/test_triton_mode.py); cuda and npu-cuda share a compiled
process, which would need a spawned process per call alone: not done.

It is a property of the fuzz suite like the others (``history`` in the registry): a case carries the calls
made before it (``Case.before``), so Hypothesis draws and shrinks a whole sequence, and the store keeps it
as one file. Every subject is held to it on the cpu (a foreign subject's module is imported by the server
before it forks); a foreign subject's state is its own: fla-core 0.6.0 memoizes chunk indices on the
identity of cu_seqlens (``fla.utils.tensor_cache``), so a cu_seqlens changed in place gets the chunks of its
old values (docs/findings-fla.md 16, stored and marked known).

State that outlives a call, in src/ (each memo's key, and what its value depends on;
tests/test_history.py holds each key to its list, and a scan of src/ keeps this list complete):

* ``ops._CALLS`` (the _Call memo, the last 64): key op, Problem (B, T, H, HV, K, V, BT, NT, varlen,
  use_g, dtype, device), backend name, merged LaunchConfig, beta's, g's and cu_seqlens' dtypes, and the
  environment variables ``ops._CALL_ENV``; the value (plan, kernel, specialization, scalars) depends on
  exactly those. chunk_indices are per call, never memoized.
* ``validation._VARLEN_CACHE`` (the last 8): key id(cu_seqlens), B, T, BT, a hit needing the same
  object at the same version counter; the value (checked chunk indices, on the host and the device)
  depends on cu_seqlens' values and device, B, T and BT.
* ``backends._merged``: key both LaunchConfigs (frozen), a pure merge. ``planning.plan``: key every
  argument (DeviceSpec frozen), a pure function.
* ``backends._autotuned``: key kernel name, warps and the autotune switch (WY_ASCEND_AUTOTUNE, read
  per call), its configs from those alone.
* ``backends._device_cores`` (the device's core count), ``backends.check_available`` and
  ``backends._missing`` (installed modules and devices, the process's Triton mode),
  ``backends.ptxas_wrapper`` (a script of its two arguments), ``lowering.toolchain`` and
  ``lowering._toolchain`` (the installed triton), ``interpreter.check_interpreter`` (the installed
  distributions): fixed for the process.
* the interpreter's patches, applied once (``interpreter._patch_language_once``,
  ``interpreter._memoize_np_dtypes_once`` whose memo keys a scalar type's name, the dtype being that
  type's alone, ``interpreter._round_bf16_to_nearest_once``, ``interpreter._bf16_arithmetic_once``,
  ``interpreter._install_emulation_once``); ``interpreter._STATE``, reset by every launch and holding that
  launch's allocations and accesses only.
* ``kernels.FP32_DOT_TF32X3``: read from WY_ASCEND_FP32_DOT at import, a later change refused
  (``backends.check_fp32_dot``).
* ``subjects._ZEROS`` (``zeros_converted`` blocks of the index-width audit, undone on exit).
* ``backends._CONTEXT_CONFIG`` (``launch_config`` blocks, undone on exit) and ``ops._OBSERVERS``
  (``observed`` blocks; the ops never read what observers see).
* ``subjects._RESOLVED`` and ``subjects.SUBJECTS`` (a subject's declaration and imported functions: the
  installed package), ``builtin_subjects._fla_module`` (fla-core's module per name and backend) and
  ``builtin_subjects._STUB`` (the stub driver fla sees on the cpu, its core count set by every ``cpu_shims``
  block before use).
* held by the objects above: ``_Call.compiled`` (the cuda backend's direct launches, one per launch of
  the plan, keyed as its _Call), the autotuner's chosen config per its key (timings; PERSISTENT left out
  so that both launch shapes run one config, ``backends._autotuned``) and Triton's JIT cache per kernel
  (argument dtypes, constexprs, integers equal to 1 or divisible by 16, pointers' 16-byte alignment:
  ``ops._aligned`` copies a misaligned view).
* testing only, never read by a result: ``perf.device_time`` and ``perf.device_limits`` (timings),
  ``warm._CALLS``, ``warm._BUILDS`` and ``warm._POOL`` (a warm-up worker's subject and pool),
  ``history._SERVERS`` (the history property's server of a process), ``compiles._interpreter_backend``,
  ``compiles._install``, ``compiles._SHADOWS`` (per kernel function)
  and ``compiles._RECORDS``, ``index_audit._ACTIVE``, ``phases._CLOCK`` (audits and clocks of a run).
"""

from __future__ import annotations

import functools
import os
import pickle
import select
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import IO, Any

import torch

from ..errors import BackendUnavailableError
from .case import Case
from .failure import PropertyFailure

Bits = dict[str, tuple[str, tuple[int, ...], bytes] | None]  # per output: dtype, shape, raw bytes


def _bits(outputs: dict[str, torch.Tensor | None]) -> Bits:
    return {name: None if x is None else (str(x.dtype), tuple(x.shape), x.detach().cpu().contiguous().view(torch.uint8)
                                          .numpy().tobytes()) for name, x in outputs.items()}


def run_sequence(calls: Sequence[Case]) -> list[tuple[str, Any]]:
    """Run ``calls`` in order in this process, varlen calls sharing ``cu_seqlens`` objects (module doc):
    per call ("ok", its output bits) or ("raise", the traceback)."""
    from .properties.common import build_inputs, run_ops

    shared: dict[tuple[int, torch.dtype], torch.Tensor] = {}
    results: list[tuple[str, Any]] = []
    for case in calls:
        try:
            inputs = build_inputs(case)
            cu = inputs.cu_seqlens
            if cu is not None and "cu_seqlens" not in case.memory:
                kept = shared.setdefault((cu.numel(), cu.dtype), cu)
                if kept is not cu and not torch.equal(kept, cu):
                    kept.copy_(cu)  # the same object, its values changed in place
                inputs = inputs._replace(cu_seqlens=kept)
            results.append(("ok", _bits(run_ops(case, inputs))))
        except Exception:  # noqa: BLE001 - reported with the call
            results.append(("raise", traceback.format_exc()))
    return results


def _forked(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``fn()`` in a forked child: ("ok", its result), ("raise", the traceback) or ("crash", the status)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the server
        os.close(read)
        try:
            try:
                reply: tuple[str, Any] = ("ok", fn())
            except BaseException:  # noqa: BLE001 - reported to the parent
                reply = ("raise", traceback.format_exc())
            with os.fdopen(write, "wb") as out:
                pickle.dump(reply, out)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as data:
        raw = data.read()
    _, status = os.waitpid(pid, 0)
    return pickle.loads(raw) if raw else ("crash", os.waitstatus_to_exitcode(status))


def serve() -> None:
    """The server process: imports, then per request (a list of cases on stdin) forks a child per case
    alone and one for the sequence, and replies (alone, sequence) on its stdout (everything printed goes
    to stderr)."""
    requests, replies = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from .. import subjects
    from ..backends import BACKENDS, _kernels
    from .properties.common import run_ops  # noqa: F401  (imported before any fork, as a fresh process's first call does)

    _kernels(BACKENDS["cpu"].interpret)
    while True:
        try:
            calls = pickle.load(requests)
        except EOFError:
            return
        try:
            for name in {case.subject for case in calls}:
                subjects.get(name).ops("cpu")  # a foreign subject's module imported here, before the forks
        except Exception:  # noqa: BLE001 - told to the caller (fla-core not installed, say), not a dead server
            pickle.dump((None, traceback.format_exc()), replies)
        else:
            alone = [_forked(functools.partial(run_sequence, [case])) for case in calls]
            together = _forked(functools.partial(run_sequence, calls))
            pickle.dump((alone, together), replies)
        replies.flush()


# Seconds a history request waits for its reply: past it the server is killed and the call fails. A server that
# dropped a reply (a mutant of serve's error path) otherwise left its caller waiting for good (70 minutes, until a
# mutation run's own limit). Every call of a request runs in the interpreter (the cpu backend), within the case
# runner's time limit where the fuzz suite runs it; this bounds the other callers (tests, a replay).
REPLY_S = 900.0


class HistoryServer:
    """A fresh interpreter running ``serve`` (module doc); ``run(calls)`` returns what it replies, or fails
    after ``reply_s`` seconds without one."""

    def __init__(self, reply_s: float = REPLY_S) -> None:
        env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
        self.reply_s = reply_s
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from wy_ascend.testing.history import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def run(self, calls: Sequence[Case]) -> tuple[list[tuple[str, Any]], tuple[str, Any]]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        pickle.dump(list(calls), stdin)
        stdin.flush()
        if not select.select([stdout], [], [], self.reply_s)[0]:  # one reply a request: nothing is read ahead
            self.process.kill()
            raise RuntimeError(f"the history server sent no reply within {self.reply_s:g} s (killed)")
        try:
            alone, together = pickle.load(stdout)
        except EOFError:
            raise RuntimeError(f"the history server exited ({self.process.wait()})") from None
        if alone is None:  # the server could not prepare the calls: its traceback
            raise RuntimeError(f"the history server cannot run these calls: {together.strip().splitlines()[-1]}")
        return alone, together

    def close(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            _close(pipe)
        self.process.wait(timeout=30)


def _close(pipe: IO[bytes] | None) -> None:
    if pipe is not None:
        pipe.close()


def _differ(a: Bits, b: Bits) -> list[str]:
    """The outputs of ``a`` and ``b`` that are not bit for bit equal, with how many elements differ."""
    out = []
    for name in a:
        x, y = a[name], b.get(name)
        if x == y:
            continue
        if x is None or y is None or x[:2] != y[:2]:
            out.append(f"{name}: {x and x[:2]} vs {y and y[:2]}")
            continue
        size = getattr(torch, x[0].removeprefix("torch.")).itemsize
        flat = [torch.frombuffer(bytearray(z[2]), dtype=torch.uint8).view(-1, size) for z in (x, y)]
        out.append(f"{name}: {int((flat[0] != flat[1]).any(1).sum())} element(s) differ")
    return out


def check_history(server: HistoryServer, calls: Sequence[Case]) -> None:
    """Each of ``calls`` (valid calls: each runs alone), run in sequence, gives the bits it gives alone in
    a fresh process (module doc). PropertyFailure naming the first call that does not, and the calls
    before it; or the first call that does not run alone (a history of calls that all raise alike would
    compare nothing: a broken sequence runner once made every call raise and the property pass)."""
    alone, together = server.run(calls)
    for i, case in enumerate(calls):
        (state, first), (in_sequence, then) = _one(alone[i]), _one(together, i)
        if state != "ok":
            raise PropertyFailure(f"call {i} of {len(calls)} ({case.brief()}) does not run alone in a fresh process: "
                                  f"{state} ({_error(first)})", {"call": i})
        if in_sequence == "ok":
            differ = _differ(then, first)
        else:
            differ = [f"{in_sequence} in sequence ({_error(then)}), ok alone"]
        if differ:
            before = "; ".join(f"({c.brief()})" for c in calls[:i])
            raise PropertyFailure(f"call {i} of {len(calls)} ({case.brief()}) gives another result after the calls before it "
                                  f"than alone in a fresh process: {', '.join(differ)}; before it: {before}",
                                  {"call": i, "differ": differ})


_SERVERS: dict[int, HistoryServer] = {}  # the property's server of this process (by pid: a fork starts its own)


def refuses(backend: str | None) -> str | None:
    """Why the history property cannot run on ``backend`` (None: the cpu's), or None where it can (module doc)."""
    if (backend or "cpu") == "cpu":
        return None
    return f"the history property runs on the cpu backend only, not {backend!r}: its server forks, which a device " \
           "runtime must not see"


def check_history_case(case: Case) -> dict[str, Any]:
    """The history property of one case (a drawn or stored one): its earlier calls (``Case.before``), then the
    case itself, in one process, each giving the bits it gives alone in a fresh one (``check_history``, its
    cu_seqlens objects shared and changed in place as ``run_sequence`` does). The cpu backend only (module
    doc); the server starts with the first such case of a process and ends when the process does (its
    requests' pipe closes)."""
    why = refuses(case.backend)
    if why is not None:
        raise BackendUnavailableError(why, case.backend)
    server = _SERVERS.get(os.getpid())
    if server is None or server.process.poll() is not None:
        server = _SERVERS[os.getpid()] = HistoryServer()
    calls = [*case.before, case.replace(before=())]
    check_history(server, calls)
    return {"calls": len(calls)}


def _one(reply: tuple[str, Any], i: int = 0) -> tuple[str, Any]:
    """Call ``i``'s ("ok", bits) or ("raise", traceback) from a forked child's reply, or the child's
    ("raise" | "crash", what) where it failed as a whole (module doc)."""
    state, result = reply
    return result[i] if state == "ok" else (state, result)


def _error(result: Any) -> str:
    """The exception type a traceback ends with (its message may name addresses), or what is not one."""
    if not isinstance(result, str):
        return "bits" if isinstance(result, dict) else repr(result)
    return result.strip().splitlines()[-1].split(":")[0]
