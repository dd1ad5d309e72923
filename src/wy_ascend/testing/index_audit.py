"""Address audit on the Triton interpreter: index arithmetic that wraps at 2**31, at a problem's real sizes.

A kernel that computes an element offset in int32 is right until the offset passes 2**31 - 1, then
reads and writes elsewhere (docs/design.md section 3). Showing that takes the problem's real sizes, more
memory than a CPU has, and a run of hours in the interpreter. The audit needs neither:

* ``virtual_empty``: the inputs are anonymous mappings without swap reservation (``MAP_NORESERVE``),
  whose pages exist only once touched; a kernel touches a few, the rest read as zeros. Outputs the
  subject allocates itself (``torch.empty``) stay untouched but for the audited programs' stores.
* ``index_audit``: inside the block the interpreter runs, of every launch, only the programs whose
  tasks have the largest addresses (the last ``keep`` along each grid axis; all of a core grid, one axis
  of at most ``CORE_GRID``) and, of a persistent
  task loop (a ``tl.range`` whose start is the program id, not a plain int), its last ``keep``
  iterations. Skipping work changes no executed task's indices: a task's addresses come from its
  program id, its loop counter, the arguments and the index tensors it loads (chunk_indices,
  cu_seqlens), never from a skipped task (the kernels recompute every pointer per task).
* each signed integer value the kernel computes carries, where it differs, its exact value
  (computed in int64 from the operands' exact values): the kernel's own value is the one its
  types give on the device, for the interpreter evaluates Triton's type rules (the frontend that
  compiles it) in numpy's integers of the same widths, int32 wrapping as on the device.
  Shape operations carry it along, a cast keeps it (a narrowing cast that truncates is a wrap
  too), pointer arithmetic turns it into the exact address. A load or store whose active lanes
  address other memory than the exact arithmetic says raises ``IndexWrapError``, as does a
  block pointer used with a wrapped offset, shape or stride. Block pointers compute their
  element offsets as int32 offsets times int64 strides (the frontend's ``make_block_ptr`` types),
  exactly in both.

What the audit cannot see: index arithmetic in a kernel's host code (the subject's Python, run as
is) and a device compiler that narrows what the frontend types as int64. The emulation's launch-wide
bookkeeping (interpreter.py: races, bounds of tensor arguments) is off for the audited launches: it
keeps a flag per element of every argument, more memory than a real-size problem's virtual inputs.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux's value; Python's mmap module exports it from 3.13
CORE_GRID = 64  # a one-axis grid of at most this many programs (a core grid: its tasks spread over all) runs whole
MAX_AUDITED_LOOP = 4096  # iterations of one unrestricted tl.range loop: past it the audit would run for hours


class IndexWrapError(AssertionError):
    """An access whose address the kernel computed otherwise than the exact arithmetic: its index
    arithmetic wrapped (or truncated) in a narrow integer type."""


class IndexAuditError(RuntimeError):
    """The audit cannot run a launch (a loop too long to run in the interpreter, a compiled process)."""


def virtual_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A contiguous CPU tensor of ``shape`` whose pages are reserved nowhere until touched (zeros to read):
    a problem's real sizes in a few MiB of memory (module doc)."""
    numel = math.prod(shape)
    if numel == 0:  # no pages to reserve, and neither an mmap nor torch.frombuffer can be empty
        return torch.zeros(shape, dtype=dtype)
    buffer = mmap.mmap(-1, numel * dtype.itemsize, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
    return torch.frombuffer(buffer, dtype=dtype, count=numel).view(shape)


def _shape(size: tuple[Any, ...]) -> tuple[int, ...]:
    """A size given as ``torch.empty`` takes it: dims, or one tuple of them."""
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else tuple(size)


def _virtual_if_large(shape: tuple[int, ...], kwargs: dict[str, Any], like: torch.Tensor | None,
                      min_bytes: int) -> torch.Tensor | None:
    """``virtual_empty`` for an allocation of ``shape`` (dtype and device from ``kwargs``, else ``like``'s)
    that is a plain contiguous CPU tensor of at least ``min_bytes``; None for any other (allocated as asked)."""
    if set(kwargs) - {"dtype", "device", "memory_format"}:
        return None
    dtype = kwargs.get("dtype") or (like.dtype if like is not None else torch.get_default_dtype())
    device = torch.device(kwargs.get("device") or (like.device if like is not None else "cpu"))
    fmt = kwargs.get("memory_format")
    plain = fmt in (None, torch.contiguous_format) or (fmt is torch.preserve_format and like is not None
                                                       and like.is_contiguous())
    if device.type != "cpu" or not plain or math.prod(shape) * dtype.itemsize < min_bytes:
        return None
    return virtual_empty(shape, dtype)


@contextlib.contextmanager
def virtual_allocations(min_bytes: int = 2**28) -> Iterator[None]:
    """Inside the block, ``torch.empty``, ``torch.empty_like`` and ``Tensor.new_empty`` of a contiguous CPU
    tensor of at least ``min_bytes`` return a ``virtual_empty`` one (zeros where ``torch.empty`` leaves
    whatever memory held): a subject's own outputs and buffers at the real sizes of an audited problem,
    without the system refusing an allocation larger than its memory. Other allocations are as asked."""
    empty, empty_like, new_empty = torch.empty, torch.empty_like, torch.Tensor.new_empty

    def virtual_or_empty(*size: Any, **kwargs: Any) -> torch.Tensor:
        found = _virtual_if_large(_shape(size), kwargs, None, min_bytes)
        return found if found is not None else empty(*size, **kwargs)

    def virtual_or_empty_like(like: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        kwargs.setdefault("memory_format", torch.preserve_format)
        found = None if args or not like.is_contiguous() else _virtual_if_large(tuple(like.shape), kwargs, like,
                                                                               min_bytes)
        return found if found is not None else empty_like(like, *args, **kwargs)

    def virtual_or_new_empty(self: torch.Tensor, *size: Any, **kwargs: Any) -> torch.Tensor:
        found = _virtual_if_large(_shape(size), kwargs, self, min_bytes)
        return found if found is not None else new_empty(self, *size, **kwargs)

    torch.empty, torch.empty_like = virtual_or_empty, virtual_or_empty_like  # type: ignore[assignment]
    torch.Tensor.new_empty = virtual_or_new_empty  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.empty, torch.empty_like = empty, empty_like  # type: ignore[assignment]
        torch.Tensor.new_empty = new_empty  # type: ignore[method-assign]


@dataclass
class Audit:
    """What one ``index_audit`` block ran: launches, programs run of those launched, loads and stores
    checked, and the largest exact element offset a kernel added to a pointer (or a block pointer's
    offsets times strides reach past its base)."""

    keep: int
    launches: int = 0
    programs: int = 0
    programs_launched: int = 0
    accesses: int = 0
    max_offset: int = 0
    restored: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def metrics(self) -> dict[str, int]:
        return {"launches": self.launches, "programs": self.programs, "programs_launched": self.programs_launched,
                "accesses": self.accesses, "max_offset": self.max_offset}


def _exact(handle: Any) -> Any:
    """The exact values of an integer (or pointer) TensorHandle as int64: its own where nothing wrapped."""
    exact = getattr(handle, "_exact", None)
    return exact if exact is not None else np.asarray(handle.data).astype(np.int64)


def _carry(out: Any, exact: Any) -> Any:
    """Attach ``exact`` to ``out`` where it differs from ``out``'s values; returns ``out``."""
    if not np.array_equal(np.asarray(out.data).astype(np.int64), exact):
        out._exact = exact
    return out


def _signed(handle: Any) -> bool:
    return bool(handle.dtype.is_int_signed())


def _wide(handle: Any) -> Any:
    import triton.language as tl

    return type(handle)(_exact(handle), tl.int64)


def _where(kernel_values: Any, exact: Any, active: Any) -> str:
    """The first active lane where the kernel's address differs from the exact one, in words."""
    got = np.asarray(kernel_values).astype(np.int64)
    bad = np.argwhere(np.broadcast_to(active, got.shape) & (got != exact))
    lane = tuple(int(i) for i in bad[0])
    return (f"{int(bad.shape[0])} active lane(s), first {lane}: address {got[lane]:#x} where the exact arithmetic "
            f"gives {int(exact[lane]):#x} ({int(exact[lane]) - int(got[lane]):+d} bytes)")


def int64_bound(bound: Any) -> bool:
    """Whether a tl.range bound is 64-bit on a device: an int64 tensor, or a Python int (plain or constexpr)
    outside int32's range, which a compiled kernel takes as a 64-bit argument (Triton's argument types: an int
    in [-2**31, 2**31) is i32, any other i64 or u64)."""
    import triton.language as tl

    if isinstance(bound, tl.tensor):
        return bool(bound.dtype == tl.int64)
    value = bound.value if isinstance(bound, tl.constexpr) else bound
    return isinstance(value, int) and not -2**31 <= value < 2**31


def _install(audit: Audit) -> None:
    """Wrap the interpreter's builder and GridExecutor for the audit (undone by ``audit.restored``)."""
    import triton.language as tl
    from triton.runtime import interpreter

    from .. import interpreter as emulation

    builder = type(interpreter.interpreter_builder)

    def patch(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, name)
        setattr(owner, name, make(original))
        audit.restored.append(lambda: setattr(owner, name, original))

    def arithmetic(original: Any) -> Any:
        def op(self: Any, lhs: Any, rhs: Any) -> Any:
            out = original(self, lhs, rhs)
            if _signed(out):
                with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                    _carry(out, np.asarray(original(self, _wide(lhs), _wide(rhs)).data).astype(np.int64))
            return out
        return op

    for name in ("create_add", "create_sub", "create_mul", "create_sdiv", "create_udiv", "create_srem", "create_urem",
                 "create_shl", "create_minsi", "create_maxsi"):
        patch(builder, name, arithmetic)

    def int_cast(original: Any) -> Any:
        def cast(self: Any, src: Any, dst_type: Any, is_signed: bool) -> Any:
            out = original(self, src, dst_type, is_signed)
            return _carry(out, _exact(src)) if _signed(src) and _signed(out) else out
        return cast

    patch(builder, "create_int_cast", int_cast)

    def reshaping(apply: Callable[..., Any]) -> Callable[[Any], Any]:
        def wrap(original: Any) -> Any:
            def op(self: Any, arg: Any, *rest: Any) -> Any:
                out = original(self, arg, *rest)
                exact = getattr(arg, "_exact", None)
                if exact is not None:
                    out._exact = apply(exact, *rest)
                return out
            return op
        return wrap

    shapes: dict[str, Callable[..., Any]] = {
        "create_expand_dims": lambda e, axis: np.expand_dims(e, axis),
        "create_broadcast": lambda e, shape: np.broadcast_to(e, shape),
        "create_splat": lambda e, shape: np.broadcast_to(e.reshape(-1)[0], shape),
        "create_reshape": lambda e, shape, allow_reorder: e.reshape(shape),
        "create_trans": lambda e, perm: np.transpose(e, perm),
    }
    for name, apply in shapes.items():
        patch(builder, name, reshaping(apply))

    def select(original: Any) -> Any:
        def op(self: Any, cond: Any, lhs: Any, rhs: Any) -> Any:
            out = original(self, cond, lhs, rhs)
            if hasattr(lhs, "_exact") or hasattr(rhs, "_exact"):
                out._exact = np.where(np.asarray(cond.data, dtype=bool), _exact(lhs), _exact(rhs))
            return out
        return op

    patch(builder, "create_select", select)

    def addptr(original: Any) -> Any:
        def op(self: Any, ptr: Any, offset: Any) -> Any:
            out = original(self, ptr, offset)
            exact = _exact(offset)
            audit.max_offset = max(audit.max_offset, int(np.abs(exact).max(initial=0)))
            if hasattr(ptr, "_exact") or hasattr(offset, "_exact"):
                itemsize = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
                out._exact = _exact(ptr) + itemsize * exact
            return out
        return op

    patch(builder, "create_addptr", addptr)

    def check(kind: str, ptrs: Any, mask: Any) -> None:
        audit.accesses += 1
        exact = getattr(ptrs, "_exact", None)
        if exact is None:
            return
        active = np.asarray(mask.data, dtype=bool) if mask is not None else np.ones(np.shape(ptrs.data), bool)
        if not np.array_equal(np.where(active, np.asarray(ptrs.data).astype(np.int64), 0), np.where(active, exact, 0)):
            raise IndexWrapError(f"{kind} through an address whose index arithmetic wrapped: "
                                 f"{_where(ptrs.data, exact, active)}; at {_location(emulation)}")

    def masked_load(original: Any) -> Any:
        def op(self: Any, ptrs: Any, mask: Any, *rest: Any) -> Any:
            check("load", ptrs, mask)
            return original(self, ptrs, mask, *rest)
        return op

    def masked_store(original: Any) -> Any:
        def op(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
            check("store", ptrs, mask)
            return original(self, ptrs, value, mask, *rest)
        return op

    patch(builder, "create_masked_load", masked_load)
    patch(builder, "create_masked_store", masked_store)

    def make_block_ptr(original: Any) -> Any:
        def op(self: Any, base: Any, shape: Any, strides: Any, offsets: Any, *rest: Any) -> Any:
            out = original(self, base, shape, strides, offsets, *rest)
            for mine, given in zip(out.offsets, offsets):  # the builder copies the offsets (their exact values too)
                if hasattr(given, "_exact"):
                    mine._exact = given._exact
            return out
        return op

    def advance(original: Any) -> Any:
        def op(self: Any, ptr: Any, offsets: Any) -> Any:
            out = original(self, ptr, offsets)
            for mine, old, step in zip(out.offsets, ptr.offsets, offsets):
                _carry(mine, _exact(old) + _exact(step))
            return out
        return op

    def block_check(kind: str, block: Any) -> None:
        reach = sum((int(_exact(o).reshape(-1)[0]) + n - 1) * int(_exact(st).reshape(-1)[0])
                    for o, n, st in zip(block.offsets, block.tensor_shape, block.strides))
        audit.max_offset = max(audit.max_offset, reach)
        parts = [("base", block.base), *((f"shape[{i}]", h) for i, h in enumerate(block.shape)),
                 *((f"stride[{i}]", h) for i, h in enumerate(block.strides)),
                 *((f"offset[{i}]", h) for i, h in enumerate(block.offsets))]
        for name, handle in parts:
            exact = getattr(handle, "_exact", None)
            if exact is not None and not np.array_equal(np.asarray(handle.data).astype(np.int64), exact):
                got = np.asarray(handle.data).astype(np.int64).reshape(-1)[0]
                raise IndexWrapError(f"{kind} through a block pointer whose {name} wrapped: {int(got):#x} where the "
                                     f"exact arithmetic gives {int(exact.reshape(-1)[0]):#x}; at {_location(emulation)}")

    def tensor_pointer_load(original: Any) -> Any:
        def op(self: Any, ptr: Any, *rest: Any) -> Any:
            block_check("load", ptr)
            return original(self, ptr, *rest)
        return op

    def tensor_pointer_store(original: Any) -> Any:
        def op(self: Any, ptr: Any, *rest: Any) -> Any:
            block_check("store", ptr)
            return original(self, ptr, *rest)
        return op

    patch(builder, "create_make_block_ptr", make_block_ptr)
    patch(builder, "create_advance", advance)
    patch(builder, "create_tensor_pointer_load", tensor_pointer_load)
    patch(builder, "create_tensor_pointer_store", tensor_pointer_store)

    def audited_range(inner: Any) -> Any:
        def loop(arg1: Any, arg2: Any = None, step: Any = None, **kwargs: Any) -> Any:
            iterations = inner(arg1, arg2, step, **kwargs)
            if arg2 is not None and type(arg1) not in (int, tl.constexpr):  # started at the program id
                iterations = iterations[-audit.keep:]
            elif len(iterations) > MAX_AUDITED_LOOP:
                raise IndexAuditError(f"a tl.range loop of {len(iterations)} iterations that does not start at the "
                                      f"program id: too long to audit; at {_location(emulation)}")
            # The interpreter's counter is a Python int, made int32 where it fits; the device's has the bounds'
            # type: int64 bounds give int64 counters, in whose arithmetic nothing wraps at 2**31.
            if any(int64_bound(bound) for bound in (arg1, arg2, step)):
                b = interpreter.interpreter_builder
                return [tl.tensor(b.get_int64(int(i)), tl.int64) for i in iterations]
            return iterations
        return loop

    class Selected:
        """A launch's kernel function, counting the programs it runs (the launch gets only the audited sub-grid:
        ``grid_init`` below), with persistent task loops cut to their last ``keep`` iterations. Keeps the
        function's signature and globals, which the GridExecutor reads."""

        def __init__(self, fn: Any) -> None:
            self.fn, self.__signature__, self.__globals__, self.__name__ = fn, _signature(fn), fn.__globals__, fn.__name__

        def __call__(self, **kwargs: Any) -> Any:
            audit.programs += 1
            previous = tl.range
            tl.range = audited_range(previous)
            try:
                return self.fn(**kwargs)
            finally:
                tl.range = previous

    # The interpreter loops over every index of the grid it is given, in Python: skipping a program inside that
    # loop still cost a call per program (a grid of 34 M programs ran past 120 s doing nothing). The launch is
    # given the audited sub-grid instead (``_audited``: the last ``keep`` along each axis), whose indices the
    # builder shifts to their place in the real grid, and whose programs see the real grid's size.
    real: list[tuple[int, ...]] = []  # the real grid of the launch under way

    def grid_init(original: Any) -> Any:
        def init(self: Any, fn: Any, arg_names: Any, grid: Any) -> None:
            original(self, fn, arg_names, grid)
            audit.launches += 1
            self.fn = Selected(self.fn)
            given = self.grid

            def audited(args: Any) -> tuple[int, ...]:
                dims = tuple(given(args) if callable(given) else given)
                dims = dims + (1,) * (3 - len(dims))
                real[:] = [dims]
                audit.programs_launched += math.prod(dims)
                return _audited(dims, audit.keep)

            self.grid = audited
        return init

    patch(interpreter.GridExecutor, "__init__", grid_init)

    def grid_dim(original: Any) -> Any:
        def set_dim(self: Any, nx: int, ny: int, nz: int) -> None:
            original(self, *(real[0] if real else (nx, ny, nz)))
        return set_dim

    def grid_idx(original: Any) -> Any:
        def set_idx(self: Any, x: int, y: int, z: int) -> None:
            if real:
                x, y, z = (i + d - s for i, d, s in zip((x, y, z), real[0], _audited(real[0], audit.keep)))
            original(self, x, y, z)
        return set_idx

    patch(builder, "set_grid_dim", grid_dim)
    patch(builder, "set_grid_idx", grid_idx)
    audit.restored.append(real.clear)

    def init_args(original: Any) -> Any:
        def init(self: Any, *args: Any) -> Any:
            out = original(self, *args)
            emulation._STATE.ranges = []  # no per-allocation bookkeeping of the emulation (module doc)
            return out
        return init

    patch(interpreter.GridExecutor, "_init_args_hst", init_args)


def _audited(dims: tuple[int, ...], keep: int) -> tuple[int, ...]:
    """The sub-grid of a launch the audit runs: a core grid (one axis of at most CORE_GRID programs) whole, else
    the last ``keep`` programs along each axis, those whose tasks have the largest addresses."""
    if sum(d > 1 for d in dims) == 1 and max(dims) <= CORE_GRID:
        return dims
    return tuple(min(d, keep) for d in dims)


def _location(emulation: Any) -> str:
    """The emulation's kernel location (``kernel (file:line) -> helper ...``) without this module's frames."""
    return " -> ".join(p for p in emulation._kernel_location().split(" -> ") if "index_audit.py" not in p)


def _signature(fn: Any) -> Any:
    import inspect

    return inspect.signature(fn)


_ACTIVE: list[Audit] = []


@contextlib.contextmanager
def index_audit(keep: int = 2) -> Iterator[Audit]:
    """Audit every interpreter launch inside the block (module doc); yields what it ran. The process must
    run the interpreter (``TRITON_INTERPRET=1`` before triton was imported)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise IndexAuditError("the index audit runs on the Triton interpreter: set TRITON_INTERPRET=1 before "
                              "triton is imported (the cpu backend does)")
    if keep < 1:
        raise ValueError(f"keep must be a positive number of programs and iterations, got {keep}")
    if _ACTIVE:
        raise IndexAuditError("index audits do not nest")
    from ..interpreter import prepare

    prepare()  # the emulation's hooks first: the audit's checks run before them
    audit = Audit(keep)
    _install(audit)
    _ACTIVE.append(audit)
    try:
        yield audit
    finally:
        _ACTIVE.pop()
        for restore in reversed(audit.restored):
            restore()


def wrap_of(error: BaseException) -> IndexWrapError | None:
    """The IndexWrapError behind ``error`` (the interpreter re-raises a kernel's exceptions as its own)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, IndexWrapError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
