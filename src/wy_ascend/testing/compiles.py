"""Kernel compiles per op call, counted from Triton's own cache keys, on every backend.

A Triton kernel compiles once per cache key of ``JITFunction.run``: the launch's signature and
specialization (the argument types, and per specialized integer or pointer whether it is 1 or
divisible by 16), its constexpr values and its launch options. ``recorded_launches`` records,
for every launch made inside the block, the kernel and that key as Triton's own binder
(``JITFunction.create_binder``) computes it:

* compiled (npu, cuda): around ``JITFunction.run``, with the binder of the launched function
  itself (its device's backend);
* the interpreter (cpu): it compiles nothing and keeps no cache, so each launch is keyed by a
  ``JITFunction`` built on the interpreted function's own source and ``@triton.jit`` arguments
  (``do_not_specialize`` ...) with the binder of an installed backend for the device the
  interpreter stands for (Ascend's where triton-ascend is installed). The key is the one a
  device compile of that launch would look up.

A kernel launched with N distinct keys compiles N times on a cold cache. For one op call on one
problem shape a second key is a recompile: a launch offset passed as a constexpr or as a
specialized integer (1, a multiple of 16, or neither: three compiles) makes every split launch
of a large grid a compile of seconds on an NPU (docs/design.md section 3). Launch options (warps,
stages) are counted apart: an autotuner compiles one key per config by design.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the kernel (module.name), its specialization (per parameter: the type and
    specialization class of a runtime argument, the value of a constexpr) and its launch options."""

    kernel: str
    specialization: tuple[tuple[str, str], ...]
    options: str


def distinct(launches: list[Launch]) -> dict[str, list[tuple[tuple[str, str], ...]]]:
    """Per kernel, its distinct specializations in launch order (each one compile on a cold cache)."""
    out: dict[str, list[tuple[tuple[str, str], ...]]] = {}
    for launch in launches:
        seen = out.setdefault(launch.kernel, [])
        if launch.specialization not in seen:
            seen.append(launch.specialization)
    return out


def differing(specs: list[tuple[tuple[str, str], ...]]) -> dict[str, list[str]]:
    """The parameters whose part of the key differs between ``specs``, with their values in order ("?" where a
    key lacks the parameter); every spec's parameters, in the order they first appear."""
    keys = [dict(s) for s in specs]
    names = dict.fromkeys(name for key in keys for name in key)
    return {name: [key.get(name, "?") for key in keys] for name in names if len({key.get(name) for key in keys}) > 1}


def _named_key(jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[tuple[str, str], ...], str]:
    """The cache key Triton's binder gives a launch of ``jit`` with ``args``/``kwargs``, each part named by its
    parameter (``_key_of_binder``: triton 3.2, triton-ascend's; ``_key_of_device_binder``: triton 3.3 on,
    upstream's, whose JITFunction keeps a binder per device instead)."""
    if getattr(jit, "binder", None) is None and hasattr(jit, "device_caches"):
        return _key_of_device_binder(jit, args, kwargs)
    return _key_of_binder(jit, args, kwargs)


def _options(excess: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(excess.items()) if k not in ("grid", "warmup"))


def _key_of_device_binder(jit: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> tuple[tuple[tuple[str, str], ...], str]:
    """Triton 3.3 on: ``device_caches[device]`` ends in the binder, which returns the bound arguments, one
    (type, specialization) pair per parameter (``("constexpr", value)`` for a constexpr, a None
    specialization for one not specialized) and the launch options."""
    from triton.runtime import driver

    binder = jit.device_caches[driver.active.get_current_device()][-1]
    _, specialization, excess = binder(*args, **kwargs)
    if len(specialization) != len(jit.params):
        raise RuntimeError(f"Triton's binder of {jit.fn.__name__} returned a key of an unknown layout; "
                           "this module follows triton 3.6's create_function_from_signature")
    parts = {p.name: f"={spec!r}" if kind == "constexpr" else str(kind) if spec is None else f"{kind}:{spec}"
             for p, (kind, spec) in zip(jit.params, specialization)}
    return tuple(parts.items()), _options(excess)


def _key_of_binder(jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[tuple[str, str], ...], str]:
    """Triton 3.2: the binder returns the runtime parameters' types, then the specialized ones' classes, then
    the constexpr values (JITFunction.create_binder's order)."""
    _, sig_and_spec, constexpr_vals, _, excess = jit.binder(*args, **kwargs)
    runtime = [p for p in jit.params if not p.is_constexpr]
    specialized = [p for p in runtime if not p.do_not_specialize]
    constexprs = [p for p in jit.params if p.is_constexpr]
    if len(sig_and_spec) != len(runtime) + len(specialized) or len(constexpr_vals) != len(constexprs):
        raise RuntimeError(f"Triton's binder of {jit.fn.__name__} returned a key of an unknown layout; "
                           "this module follows triton 3.2's JITFunction.create_binder")
    types, classes = sig_and_spec[:len(runtime)], sig_and_spec[len(runtime):]
    parts = {p.name: str(t) for p, t in zip(runtime, types)}
    for p, c in zip(specialized, classes):
        parts[p.name] += f":{c}"
    parts.update({p.name: f"={v!r}" for p, v in zip(constexprs, constexpr_vals)})
    return tuple(parts.items()), _options(excess)


@cache
def _interpreter_backend() -> Any:
    """The installed Triton backend the interpreter's launches are keyed with: one for an Ascend NPU
    (triton-ascend), else one for CUDA. Only its ``compute_spec_key`` is used."""
    from triton.backends import backends
    from triton.backends.compiler import GPUTarget

    targets = (GPUTarget("npu", "Ascend910B", 0), GPUTarget("cuda", 90, 32))
    for target in targets:
        for found in backends.values():
            if found.compiler.supports_target(target):
                return found.compiler(target)
    raise RuntimeError(f"no installed Triton backend supports {[t.backend for t in targets]}")


_SHADOWS: dict[Any, Any] = {}


def _shadow(interpreted: Any) -> Any:
    """A JITFunction of an InterpretedFunction's source with its ``@triton.jit`` arguments, its binder made."""
    from triton.runtime.jit import JITFunction

    jit = _SHADOWS.get(interpreted.fn)
    if jit is None:
        jit = JITFunction(interpreted.fn, **interpreted.rewriter.kwargs)
        jit.create_binder(_interpreter_backend())
        _SHADOWS[interpreted.fn] = jit
    return jit


def _interpreted(executor: Any) -> Any:
    """The InterpretedFunction a GridExecutor runs (its rewritten function's module-level name, through any
    heuristics or autotuner wrapping it)."""
    from triton.runtime.interpreter import InterpretedFunction

    fn = executor.fn
    found = fn.__globals__.get(fn.__name__)
    while found is not None and not isinstance(found, InterpretedFunction):
        found = getattr(found, "fn", None)
    if found is None or InterpretedFunction.rewritten_fn.get(found.fn) is not fn:
        raise RuntimeError(f"cannot key the launch of {fn.__name__}: it is not a module-level @triton.jit function")
    return found


_RECORDS: list[list[Launch]] = []


def _record(jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    spec, options = _named_key(jit, args, kwargs)
    launch = Launch(f"{jit.fn.__module__}.{jit.fn.__qualname__}", spec, options)
    for record in _RECORDS:
        record.append(launch)


def record_launch(kernel: Any, kwargs: dict[str, Any]) -> None:
    """Record a launch of ``kernel`` (a jit function, interpreted or compiled, or an autotuner or heuristics
    around one) with ``kwargs`` that bypasses Triton's launch path: a compiled kernel called directly
    (ops.py's cuda launches after a call's first), which Triton's run never sees."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    while not isinstance(kernel, (JITFunction, InterpretedFunction)):
        kernel = kernel.fn
    if _RECORDS:
        _record(_shadow(kernel) if isinstance(kernel, InterpretedFunction) else kernel, (), kwargs)


@cache
def _install() -> None:
    """Wrap the interpreter's GridExecutor call and the compiled JITFunction's run with ``_record``
    (each does nothing more while no ``recorded_launches`` block is open)."""
    from triton.runtime import interpreter, jit

    grid_call = interpreter.GridExecutor.__call__
    run = jit.JITFunction.run

    def recorded_grid_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _RECORDS:
            _record(_shadow(_interpreted(self)), args, kwargs)
        return grid_call(self, *args, **kwargs)

    def recorded_run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        if _RECORDS:
            if getattr(self, "binder", False) is None:  # triton 3.2 makes it at the first run (3.3 on: per device)
                from triton.compiler import make_backend
                from triton.runtime import driver

                self.create_binder(make_backend(driver.active.get_current_target()))
            _record(self, args, kwargs)
        return run(self, *args, grid=grid, warmup=warmup, **kwargs)

    interpreter.GridExecutor.__call__ = recorded_grid_call
    jit.JITFunction.run = recorded_run


@contextlib.contextmanager
def recorded_launches() -> Iterator[list[Launch]]:
    """The list of every Triton kernel launch made inside the block (interpreted or compiled), in order."""
    _install()
    record: list[Launch] = []
    _RECORDS.append(record)
    try:
        yield record
    finally:
        _RECORDS.remove(record)
