"""Cases run in a child process, so a case that kills its process or hangs is an ordinary failure.

Typical NPU failures are crashes, not wrong numbers: an MTE address fault, an AI-core exception
or a hang takes the whole process and its device context down (docs/design.md section 3). Run in
the fuzz worker itself, such a case would end the worker and leave nothing to replay. A
``CaseRunner`` runs each case in a persistent child process instead, started once (kernels
stay compiled, Triton's caches warm; on a device it is the process that does the device work)
and fed cases over a pipe:

* the child returns the property's metrics (with its CPU seconds, whether it compiled a kernel
  and its seconds per phase, ``phases.take``), or the exception it raised, which the parent
  raises again: a ``PropertyFailure`` comes back as itself (metrics included), raised at the
  file and line the child raised it from, so Hypothesis tells failures apart and shrinks
  them exactly as if the case had run in-process; the child's traceback is its ``__cause__``;
* a child that dies (a signal, an abort, a device fault, any exit) raises ``CaseCrashed``
  naming the signal or exit status; one that runs past the time limit is sent SIGUSR1 (its
  faulthandler dumps every thread's stack), killed, and ``CaseTimeout`` is raised. Either is
  a failure Hypothesis shrinks like any other; the next case starts a fresh child, so every
  shrink candidate after a crash runs in a new process;
* the child's stderr (warnings, faulthandler dumps, a line naming each case before it runs)
  goes to a log file (``log``), never the terminal; the failure message names that file.

The child is a fresh interpreter (``subprocess``, never a fork: no fork after a device was
initialized), started with the parent's ``sys.path`` and environment, in its own session (a
Ctrl-C or a CI time limit signals the parent, which then stops the child) and killed if the
parent dies (Linux). ``device`` ("npu:N"/"cuda:N", default ``$WY_ASCEND_RUNNER_DEVICE``, which
fuzz/conftest.py sets to what bind_worker_device bound) makes it bind the same accelerator as
its parent (an ``ASCEND_RT_VISIBLE_DEVICES`` binding is inherited with the environment). Per-case overhead: one pickled case
and one pickled reply over a pipe (~0.3 ms).
"""

from __future__ import annotations

import functools
import json
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

from ..env import number
from ..errors import WyAscendError
from .case import Case
from .child import DEVICE_ENV, bind_device, die_with_parent
from .device_memory import run_within_memory

TIMEOUT_ENV = "WY_ASCEND_CASE_TIMEOUT"  # seconds a case may run in the child (overrides the caller's default)
LOG_ENV = "WY_ASCEND_CASE_LOG"  # default log file of the child's stderr (fuzz/conftest.py sets it per worker)
BACKEND_ENV = "WY_ASCEND_RUNNER_BACKEND"  # the backend whose kernels the child imports before it is ready
DEFAULT_LOG = "wy-ascend-case-runner.log"
DEFAULT_TIMEOUT_S = 600.0
START_TIMEOUT_S = 600.0  # the child's imports (torch, triton, torch_npu) on a loaded machine
# After SIGUSR1 on a timeout: time for the faulthandler dump (written from the signal handler, a
# few KB) before the kill; every shrink step of a hang pays it once.
DUMP_GRACE_S = 0.25
_HEADER = struct.Struct("!Q")


def case_timeout(default: float = DEFAULT_TIMEOUT_S) -> float:
    """The per-case time limit: ``$WY_ASCEND_CASE_TIMEOUT`` (seconds) if set, else ``default``."""
    return number(TIMEOUT_ENV, default, float, "seconds", positive=True)


def default_log() -> Path:
    """Where a runner's child writes its stderr by default: ``$WY_ASCEND_CASE_LOG``, else
    ``wy-ascend-case-runner.log`` in the working directory."""
    return Path(os.environ.get(LOG_ENV) or DEFAULT_LOG)


class CaseLost(WyAscendError):
    """The child running a case returned no verdict: it died (``CaseCrashed``) or ran past the
    time limit (``CaseTimeout``). Raised by ``CaseRunner.run``; the regression store records it
    as ``crash-<hash>.json`` or ``timeout-<hash>.json`` (``store.LOST_KINDS``) with ``detail`` in the file's
    failure (regressions/README.md)."""

    def __init__(self, message: str, detail: dict[str, Any]) -> None:
        super().__init__(message)
        self.detail = detail


class CaseCrashed(CaseLost):
    """The case killed the process running it: a signal (SIGSEGV, SIGABRT, SIGKILL), an abort,
    a device fault, or any exit. ``detail``: ``signal`` (name or None), ``exitcode``, ``log``."""


class CaseTimeout(CaseLost):
    """The case ran past the per-case time limit and its process was killed.
    ``detail``: ``limit_s``, ``log``."""


class RemoteTraceback(Exception):
    """The child's traceback, as the ``__cause__`` of an exception raised again in the parent."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0]).rstrip()


@dataclass(frozen=True)
class Outcome:
    """A case that returned: its metrics, the child's CPU seconds on it, whether it compiled a
    kernel (``backends.compiled_kernels`` before and after, in the child) and its seconds per
    phase (wy_ascend.testing.phases). An exception the child raised carries the last three as
    ``case_cpu_seconds``, ``case_compiled`` and ``case_phases``."""

    metrics: dict[str, Any]
    cpu_seconds: float
    compiled: bool
    phases: dict[str, float]


def signal_name(returncode: int | None) -> str | None:
    """``SIGABRT`` for a return code of -6; None for a normal exit."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class CaseRunner:
    """One persistent child process that runs cases (module doc). Not thread-safe.

    ``run(prop, case)`` returns an ``Outcome`` or raises what the property raised, or
    ``CaseCrashed``/``CaseTimeout``; after those (and, on a device backend, after any exception
    other than a PropertyFailure: the device context may be gone) the next ``run`` starts a
    new child. ``close()`` stops the child; a runner is also a context manager.

    ``fork_server``: children are forked from a template process that imported everything and
    ran nothing (a new child in ~10 ms instead of a 3-8 s interpreter start, which is what
    shrinking a crash pays for every candidate that crashes). Only where no device is involved
    (the cpu backend): a device runtime must never see a fork, so device runs spawn each child.
    """

    def __init__(self, log: Path | str | None = None, timeout_s: float | None = None, device: str | None = None,
                 env: dict[str, str] | None = None, fork_server: bool = False,
                 path: list[str] | None = None, backend: str | None = None) -> None:
        self.log = Path(log) if log is not None else default_log()
        self.timeout_s = timeout_s if timeout_s is not None else case_timeout()
        self.device = device
        self.env = env
        self.fork_server = fork_server
        self.backend = backend  # imported (kernels in its Triton mode) before the child is ready
        self.path = list(sys.path if path is None else path)  # the child's sys.path
        self.child: _Child | None = None
        self.starts = 0  # children started so far
        self._zygote: _Zygote | None = None
        self._log_file: IO[bytes] | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> CaseRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ if self.env is None else self.env)
        if self.device:
            env[DEVICE_ENV] = self.device
        if self.backend:
            env[BACKEND_ENV] = self.backend
        return env

    def start(self) -> None:
        """Start the child and wait until it has imported everything (not part of any case's time)."""
        if self.child is not None:
            return
        self.log.parent.mkdir(parents=True, exist_ok=True)
        if self._log_file is None:
            self._log_file = open(self.log, "ab", buffering=0)  # noqa: SIM115 - kept open across children
        if self.fork_server:
            for attempt in (1, 2):  # a dead template is started again, once
                if self._zygote is None:
                    self._zygote = _Zygote(self.path, self._environment(), self._log_file)
                try:
                    self.child = self._zygote.fork()
                    break
                except (OSError, EOFError):
                    self._zygote.close()
                    self._zygote = None
                    if attempt == 2:
                        raise
        else:
            self.child = _Spawned(self.path, self._environment(), self._log_file)
        self.starts += 1
        assert self.child is not None
        reply = self.child.channel.receive(time.monotonic() + START_TIMEOUT_S)
        if not isinstance(reply, tuple) or reply[0] != "ready":
            code = self._reap()
            raise CaseCrashed(f"the case runner did not start ({_exit_text(code)}; log: {self.log})",
                              {"signal": signal_name(code), "exitcode": code, "log": str(self.log)})

    def close(self) -> None:
        """Stop the child (EOF on its input, then a kill if it does not exit at once) and the template."""
        child, self.child = self.child, None
        if child is not None:
            child.channel.close()
            if child.wait(5) is None:
                child.kill()
                child.wait(30)
            child.release()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    # ------------------------------------------------------------------ one case

    def run(self, prop: str, case: Case, timeout_s: float | None = None) -> Outcome:
        """Run property ``prop`` on ``case`` in the child (module doc)."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        self.start()
        assert self.child is not None
        try:
            try:
                self.child.channel.send(("run", prop, case))
            except OSError:  # the child is gone (a broken pipe)
                reply: Any = EOF
            else:
                reply = self.child.channel.receive(time.monotonic() + limit)
        except BaseException:  # KeyboardInterrupt while it runs: the child is in an unknown state
            self._stop()
            raise
        if reply is LATE:
            self._stop(dump=True)
            raise CaseTimeout(f"case ran past the time limit of {limit:g} s and was killed (stacks in {self.log})",
                              {"limit_s": limit, "log": str(self.log)})
        if reply is EOF:
            code = self._reap()
            raise CaseCrashed(f"case crashed the runner: {_exit_text(code)} (log: {self.log})",
                              {"signal": signal_name(code), "exitcode": code, "log": str(self.log)})
        if reply[0] == "ok":
            return Outcome(*reply[1:])
        _, error, tb_text, origin, cpu, compiled, phases = reply
        if not _is_property_failure(error) and (case.backend or "cpu") != "cpu":
            self._stop()  # a device error may leave the context unusable: the next case gets a new child
        error.__cause__ = RemoteTraceback(tb_text)
        error.case_cpu_seconds, error.case_compiled, error.case_phases = cpu, compiled, phases
        _raise_at(error, origin)

    # ------------------------------------------------------------------ the child process

    def _stop(self, dump: bool = False) -> None:
        """Kill the child (after a SIGUSR1 stack dump if ``dump``) and forget it."""
        if self.child is None:
            return
        if dump:
            self.child.kill(signal.SIGUSR1)
            self.child.wait(DUMP_GRACE_S)
        self.child.kill()
        self._reap()

    def _reap(self) -> int | None:
        """Wait for the dead (or dying) child; its return code. The runner then has no child."""
        child, self.child = self.child, None
        if child is None:
            return None
        code = child.wait(30)
        if code is None:
            child.kill()
            code = child.wait(30)
        child.release()
        return code


EOF = object()  # Channel.receive: the other end closed
LATE = object()  # Channel.receive: the deadline passed


class _Channel:
    """Length-prefixed pickles over a pair of file descriptors (read, write)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd

    def send(self, message: Any) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(self.write_fd, view):]

    def receive(self, deadline: float) -> Any:
        """The next message, EOF when the other end closed, LATE when the deadline passed."""
        header = _read(self.read_fd, _HEADER.size, deadline)
        if not isinstance(header, bytes):
            return header
        body = _read(self.read_fd, _HEADER.unpack(header)[0], deadline)
        return pickle.loads(body) if isinstance(body, bytes) else body

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.read_fd = self.write_fd = -1


def _read(fd: int, n: int, deadline: float) -> bytes | object:
    chunks, left = [], n
    while left:
        wait = None if deadline == math.inf else deadline - time.monotonic()
        if wait is not None and (wait <= 0 or not select.select([fd], [], [], wait)[0]):
            return LATE
        chunk = os.read(fd, left)
        if not chunk:
            return EOF
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _Child:
    """A process running cases: ``channel`` to it, ``wait``/``kill``/``release``."""

    channel: _Channel
    pid: int

    def wait(self, timeout: float) -> int | None:
        """Its return code (negative: the signal), None if it still runs after ``timeout`` seconds."""
        raise NotImplementedError

    def kill(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.kill(self.pid, sig)
        except OSError:
            pass

    def release(self) -> None:
        self.channel.close()


_BOOT = "import sys, json; sys.path[:] = json.loads(sys.argv[1]); from wy_ascend.testing.runner import {}; {}()"


class _Spawned(_Child):
    """A fresh interpreter running ``serve`` (a new session: signals to the parent's group miss it)."""

    def __init__(self, path: list[str], env: dict[str, str], log: IO[bytes]) -> None:
        self.popen = subprocess.Popen([sys.executable, "-c", _BOOT.format("serve", "serve"), json.dumps(path)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                      start_new_session=True, close_fds=True)
        assert self.popen.stdin is not None and self.popen.stdout is not None
        self.pid = self.popen.pid
        self.channel = _Channel(os.dup(self.popen.stdout.fileno()), os.dup(self.popen.stdin.fileno()))
        self.popen.stdin.close()
        self.popen.stdout.close()

    def wait(self, timeout: float) -> int | None:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None


# Template requests (one SOCK_SEQPACKET message each): b"F" fork (two descriptors attached: the
# child's input and output), b"W" wait for ``pid`` up to ``seconds``. Replies: (pid, 0) to a
# fork; (1, exit code), (0, 0) still running, (2, 0) unknown pid to a wait.
_REQUEST = struct.Struct("!cqd")
_REPLY = struct.Struct("!qq")


class _Zygote:
    """The fork server: a fresh interpreter that imported the package and runs ``serve_forks``."""

    def __init__(self, path: list[str], env: dict[str, str], log: IO[bytes]) -> None:
        import socket

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.popen = subprocess.Popen(
            [sys.executable, "-c", _BOOT.format("serve_forks", "serve_forks"), json.dumps(path), str(theirs.fileno())],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True, close_fds=True,
            pass_fds=(theirs.fileno(),))
        theirs.close()
        self.sock.settimeout(START_TIMEOUT_S)
        try:
            started, late = len(self.sock.recv(_REPLY.size)) == _REPLY.size, ""
        except TimeoutError:  # a hung import: stopped here, not waited on forever
            started, late = False, f" within {START_TIMEOUT_S:g} s"
        if not started:
            self.close()
            raise EOFError(f"the case runner's fork server did not start{late}")
        self.sock.settimeout(None)

    def fork(self) -> _Forked:
        import socket

        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            socket.send_fds(self.sock, [_REQUEST.pack(b"F", 0, 0.0)], [to_child_r, from_child_w])
            reply = self.sock.recv(_REPLY.size)
        except OSError:  # a broken pipe: its own two ends were left open before
            reply = b""
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        if len(reply) != _REPLY.size:
            os.close(to_child_w)
            os.close(from_child_r)
            raise EOFError("the case runner's fork server is gone")
        return _Forked(self, _REPLY.unpack(reply)[0], _Channel(from_child_r, to_child_w))

    def wait(self, pid: int, timeout: float) -> int | None:
        try:
            self.sock.send(_REQUEST.pack(b"W", pid, timeout))
            reply = self.sock.recv(_REPLY.size)
        except OSError:
            return None
        if len(reply) != _REPLY.size:
            return None
        state, code = _REPLY.unpack(reply)
        return code if state == 1 else None

    def close(self) -> None:
        self.sock.close()  # EOF: it exits
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


class _Forked(_Child):
    """A child forked by the template (its parent, which reaps it)."""

    def __init__(self, zygote: _Zygote, pid: int, channel: _Channel) -> None:
        self.zygote, self.pid, self.channel = zygote, pid, channel

    def wait(self, timeout: float) -> int | None:
        return self.zygote.wait(self.pid, timeout)


def _exit_text(code: int | None) -> str:
    name = signal_name(code)
    return f"killed by {name}" if name else f"exit status {code}"


def _is_property_failure(error: BaseException) -> bool:
    from .properties import PropertyFailure

    return isinstance(error, PropertyFailure)


# What a device's runtime says when a kernel faulted: the context is unusable after it, and a replay of the
# same case may fault again or return other values (an H200 nightly: an illegal memory access, then wrong
# gradients, and Hypothesis dropped the case as flaky).
DEVICE_FAULTS = ("illegal memory access", "illegal address", "unspecified launch failure", "device-side assert",
                 "misaligned address", "aicore exception", "aicore error")


def device_fault(error: BaseException) -> bool:
    """Whether ``error`` is a kernel's fault on a device (``DEVICE_FAULTS``), not a result or a refusal."""
    return names_device_fault(type(error).__name__, str(error))


def names_device_fault(type_name: str, message: str) -> bool:
    """``device_fault`` of an error known by its type's name and its message (a stored file's failure)."""
    text = f"{type_name}: {message}".lower()
    return type_name == "AcceleratorError" or any(fault in text for fault in DEVICE_FAULTS)


def raised_at(error: BaseException) -> tuple[str, int] | None:
    """The file and line ``error`` was raised at: its traceback's innermost frame (None without one), which
    the parent raises it at again (``_raise_at``)."""
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ is not None else []
    return (frames[-1].filename, frames[-1].lineno or 1) if frames else None


def _raise_at(error: BaseException, origin: tuple[str, int] | None) -> NoReturn:
    """Raise ``error`` from a frame at ``origin`` (the file and line the child raised it at), so
    that Hypothesis, which tells failures apart by where they were raised, sees the child's place;
    from here where the child gave no place."""
    if origin is not None:
        filename, lineno = origin
        code = compile("\n" * (max(lineno, 1) - 1) + "raise __error__", filename, "exec")
        # __tracebackhide__: pytest leaves this frame out of a report; it is a module-level frame at the
        # child's line, and pytest would print the whole module above that line as its source
        exec(code, {"__error__": error, "__tracebackhide__": True})  # noqa: S102 - a one-statement raise, compiled above
    raise error


# ---------------------------------------------------------------------- the child


def _plain(x: Any) -> Any:
    """Metrics with tensors and numpy values made Python numbers/lists (never a device tensor in a
    pickle: unpickling it would initialize the device in the parent)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):
        return x.tolist()
    return x


def _portable(error: BaseException) -> BaseException:
    """``error`` if it survives a pickle round trip (metrics made plain), else a RuntimeError
    carrying its type and message (e.g. exceptions whose constructor takes other arguments)."""
    metrics = getattr(error, "metrics", None)
    if isinstance(metrics, dict):
        error.metrics = _plain(metrics)  # type: ignore[attr-defined]
    try:
        copy = pickle.loads(pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL))
        if isinstance(copy, BaseException):
            return error
    except Exception:  # noqa: BLE001 - anything unpicklable is sent as text
        pass
    return RuntimeError(f"{type(error).__module__}.{type(error).__qualname__}: {error}")


def _child_setup() -> None:
    """In a fresh child interpreter: stdout becomes stderr (the log) so no print reaches a pipe,
    SIGINT is ignored (the parent decides when a child stops), faulthandler dumps every thread
    on a fatal signal and on SIGUSR1 (the parent's request on a timeout), and the process dies
    with its parent."""
    import faulthandler

    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    die_with_parent()


def _imports() -> None:
    """What every case needs, imported before the child says it is ready (or before the template
    forks): the properties (ops, planning, the oracle) and, when the runner names its backend,
    the kernels in that backend's Triton mode (``backends._kernels``; no device is touched)."""
    from . import properties  # noqa: F401

    name = os.environ.get(BACKEND_ENV)
    if name:
        from ..backends import BACKENDS, _kernels

        try:
            _kernels(BACKENDS[name].interpret)
        except Exception:  # noqa: BLE001 - a backend that cannot load fails in its first case, with its message
            pass


def serve() -> None:
    """A spawned child: the protocol on its stdin/stdout, everything printed to stderr (the log)."""
    channel = _Channel(os.dup(0), os.dup(1))
    _child_setup()
    bind_device(os.environ.get(DEVICE_ENV))
    _imports()
    _serve(channel)


def serve_forks() -> None:
    """The fork server (``_Zygote``): imports everything, touches no device, then forks a case
    child per request on the socket whose descriptor is ``sys.argv[2]``, and reaps them."""
    import socket

    sock = socket.socket(fileno=int(sys.argv[2]))
    _child_setup()
    _imports()
    sock.send(_REPLY.pack(0, 0))
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, _REQUEST.size, 2)
        except OSError:
            return
        if len(message) != _REQUEST.size:
            return  # the runner closed the socket
        op, pid, seconds = _REQUEST.unpack(message)
        if op == b"F":
            child = os.fork()
            if child == 0:
                code = 0
                try:
                    sock.close()
                    die_with_parent()
                    _serve(_Channel(fds[0], fds[1]))
                except BaseException:  # noqa: BLE001 - a child never returns into the server's loop
                    traceback.print_exc()
                    code = 1
                finally:
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            sock.send(_REPLY.pack(child, 0))
        elif op == b"W":
            sock.send(_REPLY.pack(*_wait(pid, seconds)))


def _wait(pid: int, seconds: float) -> tuple[int, int]:
    deadline = time.monotonic() + seconds
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 2, 0
        if done:
            return 1, os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return 0, 0
        time.sleep(0.005)


def _serve(channel: _Channel) -> None:
    """Read a case, run it, reply; return on EOF."""
    from ..backends import compiled_kernels
    from .phases import take
    from .properties import run_property

    print(f"=== case runner pid {os.getpid()} started {time.strftime('%Y-%m-%d %H:%M:%S')}", file=sys.stderr,
          flush=True)
    channel.send(("ready", os.getpid()))
    while True:
        request = channel.receive(math.inf)
        if not isinstance(request, tuple):
            return
        _, prop, case = request
        print(f"--- {prop} {json.dumps(case.to_dict(), separators=(',', ':'))}", file=sys.stderr, flush=True)
        take()  # nothing timed before the case is its time
        cpu, kernels = time.process_time(), compiled_kernels()
        try:
            # beside every other process's cases on this device; out of memory there: again alone (device_memory.py)
            metrics = run_within_memory(case, prop, functools.partial(run_property, prop, case))
        except Exception as e:  # noqa: BLE001 - every failure goes back to the parent
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            channel.send(("raise", _portable(e), text, raised_at(e), time.process_time() - cpu,
                          compiled_kernels() != kernels, take()))
        else:
            channel.send(("ok", _plain(metrics), time.process_time() - cpu, compiled_kernels() != kernels, take()))
