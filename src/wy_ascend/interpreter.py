"""The Triton interpreter as the cpu backend runs it: a version check, two speed-ups, and an
emulation of the Ascend NPU's semantics that the interpreter would otherwise hide.

The cpu backend runs triton-ascend 3.2's interpreter (its frontend is the NPU's). ``prepare``
applies everything here once per process, the first time the cpu backend loads its kernels.

Ascend emulation (``ascend_semantics``; on by default, ``WY_ASCEND_EMULATION=0`` or
``LaunchConfig(emulate=False)`` turns it off). Emulated, because a kernel that relies on the
opposite passes on the CPU and on CUDA and fails only on an NPU (docs/design.md section 3):

* ``tl.dot`` may overwrite its left operand in the unified buffer: after every dot the left
  operand's storage is filled with NaN (floats) or the most negative value (integers), so any
  later read of that tile (a second dot, a store, arithmetic) fails the oracle comparison.
* a dot whose two operands share storage (a tile and its transposition, two views of one
  tile) is not documented to read the right operand before the clobber: it raises
  ``AscendSemanticsError`` naming the kernel and the source line.
* a load or store whose active (unmasked) addresses leave every tensor argument's
  allocation faults the MTE ("DDR address out of range") on the NPU: it raises
  ``AscendSemanticsError`` here instead of reading or writing host memory (with the emulation
  off too: such an access is a bug on every device).
* a load of global memory that the same program stored since its last ``tl.debug_barrier()``,
  or that another program of the same launch stored (before or after the load: a store of what
  another program loaded raises too), raises ``AscendSemanticsError`` (with the emulation off
  too): on a GPU other threads of the program may read before the store lands (the barrier syncs
  them), Ascend's store and load pipes (MTE3, MTE2) are not ordered for global memory without
  one, and the programs of a launch run in any order on both. A load spanning several tensor
  arguments is checked in each. Such a
  read-after-write is exact on the interpreter, which runs one program after another.
* a store to global memory that another program of the same launch stored raises
  ``AscendSemanticsError`` (with the emulation off too): which value lands depends on the programs'
  order, so it is a race on every device. The interpreter runs the programs in order, so a store one
  row too wide into the next task's rows is overwritten by that task's program and every output
  comes out right here; a program storing an address twice is in order and allowed.
* int32 index arithmetic wraps at 2**31 as on the device: the interpreter computes int32
  values in numpy int32, which wraps already (the conformance suite checks it).
* a launch past its device's grid limit raises ``AscendSemanticsError`` before any program runs:
  with the emulation, more than ``ASCEND_MAX_BLOCKS`` blocks (the product of the grid's
  dimensions: Ascend's limit); without it, the kernels are a GPU's, more programs on an axis than
  ``GPU_MAX_GRID`` allows (CUDA's 2**31-1 on x, 65535 on y and z; a product past 65535 is fine
  there). The interpreter runs any grid, so a kernel that never splits its launch passes on the
  CPU and fails at scale on the device (fla-core's GPU kernels launch (chunks, B * HV)).

* a program id of a grid axis of 1 folds to a constexpr in Ascend's frontend: under the
  emulation ``tl.program_id`` returns one there, whose ``.to()`` raises ``AscendSemanticsError``
  (on the NPU it does not compile; ``tl.cast`` does). It stays a constexpr assigned to a name,
  passed to a helper and in arithmetic with constants, as in the frontend.

Situations each rule covers, every combination of these (tests/test_emulation_conformance.py
breaks each rule in them, drawn by Hypothesis, and checks its compliant twin passes; a load or
store's lanes are all, or one half masked off):

* clobber: dtype float32|float16|bfloat16; operand tile|transposed|permuted|reshaped; masked no|yes;
  read store|dot|arithmetic; emulation on|off
* shared: dtype float32|float16|bfloat16; pair same|transposed|transposed-left|permuted|reshaped;
  masked no|yes; emulation on|off
* bounds: access load|store; dtype float32|float16|bfloat16|int32|int64; index int32|int64; side
  below|past; masked no|yes; pointer offsets|block; emulation on|off
* barrier: programs 1|2; op store|barrier|load; length 1|2|3; lanes all|low|high; dtype
  float32|float16|bfloat16|int32|int64; index int32|int64; allocations one|two; pointer
  offsets|block; grid-axis 0|1; emulation on|off
* race: programs 1|2; op store|barrier|load; length 1|2|3; lanes all|low|high; dtype
  float32|float16|bfloat16|int32|int64; index int32|int64; allocations one|two; pointer
  offsets|block; grid-axis 0|1; emulation on|off
* wrap: op add|sub|mul; operand program-id|argument|arange; index int32|int64
* folded: axis 0|1|2; size 1|2; form direct|assigned|derived|bitwise|helper; conversion to|cast;
  emulation on|off
* grid: axis 0|1|2; blocks at|past; spread one|two; emulation on|off

(barrier and race: each program runs a sequence of ``length`` ops, each op a store, a barrier or a
load of one scratch tensor's lanes; ``allocations two``: each load also reads a second tensor (by
offsets: a block pointer spans one tensor); ``pointer block``: through ``tl.make_block_ptr``, its
boundary_check the mask;
``index``: the offsets' type; ``wrap``'s int64 is the twin that does not wrap; ``folded``'s derived
and bitwise forms: the program id in arithmetic and in bitwise operations with constants; ``grid``:
the launch has ``blocks`` at the limit (the twin that runs) or one past it on ``axis``, alone or
``spread`` over it and a second axis of 2.)

Not emulated (only the NPU shows them): whether a dot really clobbers (the emulation
assumes the worst, always); unified-buffer overflow (the UB model and the lowering gate cover
it); the numeric difference of ``exp2(a)/exp2(b)`` and ``exp2(a - b)`` and the cost of a runtime
branch between load paths (the kernels' source avoids both: tests/test_kernel_source_rules.py);
hangs and AI-core exceptions of the hardware itself.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from .env import switch
from .errors import BackendUnavailableError
from .planning import ASCEND_MAX_BLOCKS, CUDA_MAX_GRID

EMULATION_ENV = "WY_ASCEND_EMULATION"
# The Ascend rules above a subject's target may pick (wy_ascend.subjects.Target): the clobber of a dot's left
# operand, a dot's operands in one storage, Ascend's blocks-per-launch limit (else a GPU's axes), the folded
# program id. The rules of every device (addresses, races, wrap) hold whatever the emulation.
RULES = frozenset({"clobber", "shared_operands", "grid", "folded_program_id"})
INTERPRETER_DIST = "triton-ascend"


class AscendSemanticsError(RuntimeError):
    """A kernel did something that is unsafe or faults on an Ascend NPU, or on any device (raised by the
    cpu backend's emulation, ``ascend_semantics``, and by the checks that hold without it: addresses,
    races, a GPU's grid limit). Fix the kernel; the message names the line or the kernel."""


def emulation_default() -> bool:
    """Whether cpu-backend launches emulate Ascend semantics when the call does not say:
    on unless ``WY_ASCEND_EMULATION=0``."""
    return switch(EMULATION_ENV, True)


GPU_MAX_GRID = (*CUDA_MAX_GRID, CUDA_MAX_GRID[1])  # x, y, z: z holds what y does


def check_grid(grid: tuple[int, int, int], kernel: str) -> None:
    """Refuse a launch of ``kernel`` whose ``grid`` is past its device's limit (module doc): Ascend's blocks
    with the emulation, a GPU's axes without it."""
    if _rule("grid"):
        blocks = grid[0] * grid[1] * grid[2]
        if blocks > ASCEND_MAX_BLOCKS:
            raise AscendSemanticsError(
                f"a launch of {blocks} blocks (grid {grid}) is past Ascend's {ASCEND_MAX_BLOCKS} blocks a launch: "
                f"split it into launches (or loop over tasks in fewer programs); kernel {kernel}")
        return
    for axis, (n, limit) in enumerate(zip(grid, GPU_MAX_GRID, strict=True)):
        if n > limit:
            raise AscendSemanticsError(
                f"grid axis {axis} of {n} programs (grid {grid}) is past a GPU's {limit} on that axis (CUDA's grid "
                f"limit; the launch fails there): split it into launches or move the work to axis 0; kernel {kernel}")


class _State:
    """What the emulation hooks need during a launch: on or off, the allocations of the current
    launch's tensor arguments (byte ranges [start, end)), and per allocation the addresses the
    running program stored since its last barrier (``stored``), what it stored and loaded
    (``program``, keyed by ``("stored" | "loaded", allocation)``) and what the launch's earlier
    programs stored and loaded (``launch``, same keys: a flag per element of the allocation, the
    access's element size, ``itemsize``)."""

    active = False
    rules: frozenset[str] = RULES  # the Ascend rules applied while active
    kernel = "?"  # the kernel of the launch being set up
    ranges: list[tuple[int, int]] = []
    stored: dict[int, list[Any]] = {}
    program: dict[tuple[str, int], list[Any]] = {}
    launch: dict[tuple[str, int], Any] = {}
    itemsize: dict[int, int] = {}


_STATE = _State()


def _rule(name: str) -> bool:
    return _STATE.active and name in _STATE.rules


@contextlib.contextmanager
def ascend_semantics(enabled: bool, rules: frozenset[str] = RULES) -> Iterator[None]:
    """Run the interpreter launches inside the block with (or without) the Ascend emulation, applying
    ``rules`` (a subset of ``RULES``: a subject's target may call for some only)."""
    if not rules <= RULES:
        raise ValueError(f"rules must be a subset of {sorted(RULES)}, got {sorted(rules)}")
    previous = _STATE.active, _STATE.rules
    _STATE.active, _STATE.rules = enabled, frozenset(rules)
    try:
        yield
    finally:
        _STATE.active, _STATE.rules = previous


def prepare() -> None:
    """Check the interpreter and apply the speed-ups and the emulation hooks (once)."""
    check_interpreter()
    _patch_language_once()
    _memoize_np_dtypes_once()
    _round_bf16_to_nearest_once()
    _bf16_arithmetic_once()
    _install_emulation_once()


@cache
def check_interpreter() -> None:
    """The cpu backend needs triton-ascend's interpreter: upstream Triton's (3.6-3.8) differs in
    the internals patched here and was seen to fail inside a launch. Refuse it with the fix:
    where triton-ascend is missing, and where upstream triton was installed over it (both own
    the ``triton`` module; the one imported then is upstream's)."""
    try:
        ascend = metadata.version(INTERPRETER_DIST)
    except metadata.PackageNotFoundError:
        ascend = None
    try:
        upstream = metadata.version("triton")
    except metadata.PackageNotFoundError:
        upstream = None
    if ascend is not None and upstream is None:
        return
    found = (f"upstream triton {upstream}" + (f" installed over triton-ascend {ascend}" if ascend else "")
             if upstream else "a triton module of no known distribution")
    raise BackendUnavailableError(
        f"backend 'cpu' needs triton-ascend's interpreter, but this environment has {found} (both own the "
        "`triton` module). Repair it: pip uninstall -y triton && pip install --force-reinstall --no-deps "
        "triton-ascend==3.2.0 pybind11; or install into a fresh environment from a wy_ascend checkout: "
        "python -m venv .venv && . .venv/bin/activate && python install.py cpu", backend="cpu")


@cache
def _patch_language_once() -> None:
    """Make the interpreter patch ``triton.language`` once per module instead of on every call.

    The interpreter (triton-ascend 3.2, as upstream triton 3.2) calls ``_patch_lang`` on each
    call of a jit helper, re-patching ``triton.language`` through ``inspect.getmembers``: about
    half of a fuzz case's time. The patch is process-wide and never undone, so applying it once
    per calling module (``fn.__globals__``) changes nothing else. Skipped if the interpreter
    has no ``_patch_lang``.
    """
    from triton.runtime import interpreter

    patch = getattr(interpreter, "_patch_lang", None)
    if patch is None:
        return
    patched: set[int] = set()

    def patch_once(fn: object) -> None:
        key = id(fn.__globals__)  # type: ignore[attr-defined]
        if key not in patched:
            patch(fn)
            patched.add(key)

    interpreter._patch_lang = patch_once


@cache
def _memoize_np_dtypes_once() -> None:
    """Make the interpreter look numpy dtypes up instead of rebuilding its table on every call.

    The interpreter's ``_get_np_dtype`` builds a dict of 20 triton dtypes per call (~17 us,
    hashing each), called for nearly every op: about a tenth of a cpu-backend case's time. Its
    result depends on the scalar type only (a block type's is its element type's: pointers map
    to uint64 either way), so a memo keyed on that type's name (the types are not hashable)
    returns the same dtypes. Skipped if the interpreter has no ``_get_np_dtype``.
    """
    import triton.language as tl
    from triton.runtime import interpreter

    original = getattr(interpreter, "_get_np_dtype", None)
    if original is None:
        return
    memo: dict[str, object] = {}

    def get_np_dtype(tt_dtype: object) -> object:
        scalar = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        key = str(scalar)
        found = memo.get(key)
        if found is None:
            found = memo[key] = original(scalar)
        return found

    get_np_dtype.__wrapped__ = original  # type: ignore[attr-defined]
    interpreter._get_np_dtype = get_np_dtype


def _bf16_bits_to_float32(data: Any) -> Any:
    """The float32 values of bfloat16 bits (the interpreter's uint16 storage): exact, a bfloat16 is
    a float32's upper half."""
    return (np.ascontiguousarray(data).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


@cache
def _round_bf16_to_nearest_once() -> None:
    """Round float32 to bfloat16 to nearest, ties to even, as CUDA's ``cvt.rn.bf16.f32``, the NPU
    and torch do, where the interpreter truncates (its ``_convert_float`` drops the low 16 bits
    when no rounding mode is given): off by up to one ulp, biased toward zero, which the cuda
    variant's bf16 dot operands (LOWP_DOT, rounded many times per output) turn into errors up to
    1.7x the oracle's bound on the CPU (0.6x with rounding to nearest, as on the H200). NaN stays
    a quiet NaN; an explicit rounding mode keeps the interpreter's conversion. bfloat16 to float32
    (exact either way) takes a shift instead of the interpreter's per-bit loop."""
    import triton.language as tl
    from triton.runtime import interpreter

    convert = interpreter._convert_float

    def convert_float(input: Any, input_dtype: Any, output_dtype: Any, rounding_mode: Any) -> Any:
        if rounding_mode is None and input_dtype == tl.float32 and output_dtype == tl.bfloat16:
            bits = np.ascontiguousarray(input, dtype=np.float32).view(np.uint32)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            return np.where(np.isnan(input), np.uint16(0x7FC0), rounded)
        if input_dtype == tl.bfloat16 and output_dtype == tl.float32:
            return _bf16_bits_to_float32(input)
        return convert(input, input_dtype, output_dtype, rounding_mode)

    interpreter._convert_float = convert_float


@cache
def _bf16_arithmetic_once() -> None:
    """bfloat16 arithmetic of two bfloat16 operands (Triton keeps bf16 op bf16 in bfloat16) computed in
    float32 and rounded to nearest, as the devices' bf16 units do. The interpreter applied numpy's op to
    the uint16 bits it stores bfloat16 in: an integer product or sum, garbage (fla-ascend's forward,
    which multiplies bf16 v and k by a bf16 beta, came out ~1e37 off)."""
    import triton.language as tl
    from triton.runtime import interpreter

    builder = type(interpreter.interpreter_builder)
    binary_op = builder.binary_op
    arithmetic = (np.add, np.subtract, np.multiply, np.divide, np.remainder, np.minimum, np.maximum)

    def bf16_binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if op in arithmetic and lhs.dtype.scalar == tl.bfloat16 and rhs.dtype.scalar == tl.bfloat16:
            exact = op(_bf16_bits_to_float32(lhs.data), _bf16_bits_to_float32(rhs.data))
            return interpreter.TensorHandle(interpreter._convert_float(exact, tl.float32, tl.bfloat16, None),
                                            tl.bfloat16)
        return binary_op(self, lhs, rhs, op)

    builder.binary_op = bf16_binary_op


# ----------------------------------------------------------------------------- Ascend emulation

def _kernel_location() -> str:
    """``kernel (file:line) -> helper (file:line) -> ...`` of the kernel source being interpreted
    now: the frames outside triton and this module, outermost first, up to the launch."""
    import triton

    here, triton_dir = Path(__file__).resolve(), Path(triton.__file__).resolve().parent  # frames of neither
    chain = []
    frame = sys._getframe(1)
    while frame is not None and type(frame.f_locals.get("self")).__name__ != "GridExecutor":
        path = Path(frame.f_code.co_filename).resolve()
        if path != here and triton_dir not in path.parents:
            chain.append(f"{frame.f_code.co_name} ({path.name}:{frame.f_lineno})")
        frame = frame.f_back  # type: ignore[assignment]
    return " -> ".join(reversed(chain)) or "an unknown location"


# Bit patterns of NaN for float types the interpreter stores as unsigned integers (bf16).
_NAN_BITS = {16: 0x7FC0}


def _poison(handle: Any) -> None:
    """Overwrite the storage of ``handle`` (a TensorHandle) as a clobbering dot may: NaN for
    floats, the most negative value for integers."""
    data = handle.data
    if np.issubdtype(data.dtype, np.floating):
        fill: Any = np.nan
    elif handle.get_element_ty().is_floating():
        fill = _NAN_BITS[data.dtype.itemsize * 8]
    else:
        fill = np.iinfo(data.dtype).min
    if data.flags.writeable:
        data[...] = fill
    else:  # a broadcast view: no storage of its own to overwrite, so replace what it reads
        handle.data = np.full(data.shape, fill, dtype=data.dtype)


def _check_addresses(kind: str, ptrs: Any, mask: Any, itemsize: int) -> list[tuple[int, Any]]:
    """Every active address of a load/store lies inside one tensor argument's allocation. Returns
    the active addresses grouped by the allocation that holds them, ``(allocation, addresses)``."""
    if not _STATE.ranges:
        return []
    addresses = np.asarray(ptrs.data)[np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data))]
    if addresses.size == 0:
        return []
    lo, hi = int(addresses.min()), int(addresses.max()) + itemsize
    for i, (start, end) in enumerate(_STATE.ranges):
        if start <= lo and hi <= end:
            return [(i, addresses)]
    owner = np.full(addresses.shape, -1)
    for i, (start, end) in enumerate(_STATE.ranges):
        owner[(owner < 0) & (addresses >= start) & (addresses + itemsize <= end)] = i
    if (outside := addresses[owner < 0]).size:
        raise AscendSemanticsError(
            f"{kind} of {outside.size} active element(s) outside every tensor argument's allocation (the NPU's MTE "
            f"faults: DDR address out of range), first at byte address {int(outside[0]):#x}; at {_kernel_location()}")
    # the active addresses span several arguments, each inside one: each allocation's checked on its own
    return [(int(i), addresses[owner == i]) for i in np.unique(owner)]


def _check_read_after_write(addresses: Any, allocation: int) -> None:
    """A load reads no address its program stored since the last barrier, nor one an earlier
    program of the launch stored (module doc)."""
    for earlier in _STATE.stored.get(allocation, ()):
        hit = np.intersect1d(addresses, earlier)
        if hit.size:
            raise AscendSemanticsError(
                f"load of {hit.size} element(s) this program stored since its last tl.debug_barrier(), first at byte "
                f"address {int(hit[0]):#x}: without a barrier between, other threads of the program (a GPU) or the "
                f"load pipe (Ascend) may read them before the store lands; at {_kernel_location()}")
    _check_other_programs("load", addresses, allocation, "stored", "this reads either value")


def _check_other_programs(kind: str, addresses: Any, allocation: int, did: str, outcome: str) -> None:
    """No address of this load or store (``kind``) is one an earlier program of the launch stored or
    loaded (``did``; module doc)."""
    if (others := _STATE.launch.get((did, allocation))) is None:
        return
    hit = addresses[others[(addresses - _STATE.ranges[allocation][0]) // _STATE.itemsize[allocation]]]
    if hit.size:
        raise AscendSemanticsError(
            f"{kind} of {hit.size} element(s) another program of this launch {did}, first at byte address "
            f"{int(hit[0]):#x}: a launch's programs run in any order (and at once) on a device, so {outcome}; "
            f"at {_kernel_location()}")


def _record(did: str, addresses: Any, allocation: int, itemsize: int) -> None:
    """Note that the running program ``did`` ("stored" or "loaded") these addresses."""
    _STATE.program.setdefault((did, allocation), []).append(addresses)
    _STATE.itemsize[allocation] = itemsize


def _next_program() -> None:
    """Forget the running program's barrier window and add its stores and loads to the launch's."""
    for (did, allocation), arrays in _STATE.program.items():
        (start, end), size = _STATE.ranges[allocation], _STATE.itemsize[allocation]
        flags = _STATE.launch.setdefault((did, allocation), np.zeros((end - start) // size, dtype=bool))
        for addresses in arrays:
            flags[(addresses - start) // size] = True
    _STATE.stored, _STATE.program = {}, {}


def _dot_operand(x: Any) -> Any:
    """A C-contiguous copy of the dot operand ``x`` (a TensorHandle), bfloat16 widened to float32
    (exactly: its 16 bits are a float32's upper half). The interpreter stores bfloat16 as uint16
    and its dot multiplies those integers (garbage: ~1e23 relative errors on the LOWP_DOT kernels)."""
    import triton.language as tl

    if x.dtype == tl.bfloat16:
        return type(x)(_bf16_bits_to_float32(x.data), tl.float32)
    return type(x)(np.array(x.data, order="C"), x.dtype)


@cache
def _install_emulation_once() -> None:
    """Wrap the interpreter builder's dot, loads and stores and the launch's argument copy with
    the emulation hooks; each hook does nothing while ``_STATE.active`` is false."""
    import triton
    from triton.runtime import interpreter

    builder = type(interpreter.interpreter_builder)
    create_dot, masked_load, masked_store = builder.create_dot, builder.create_masked_load, builder.create_masked_store
    create_barrier, set_grid_idx, set_grid_dim = builder.create_barrier, builder.set_grid_idx, builder.set_grid_dim
    init_args = interpreter.GridExecutor._init_args_hst

    def dot(self: Any, a: Any, b: Any, *args: Any) -> Any:
        if np.may_share_memory(a.data, b.data):
            if _rule("shared_operands"):
                raise AscendSemanticsError(
                    "tl.dot with both operands in one tile's storage (a tile and its transposition, or two views of "
                    "one tile): Ascend's dot may clobber its left operand before it reads the right one; pass a copy "
                    f"taken before the dot (tile + 0.0) or a reload as one operand; at {_kernel_location()}")
        # C-contiguous copies of both operands: numpy's BLAS picks its kernel by the operands' layout
        # (x @ x.T runs a symmetric product, a transposed view a transposed gemm) and, on some CPUs,
        # those round differently: the copies keep a dot's bits independent of how its operands were
        # made (a tile, its transposition, a reload), as variants that differ only there must agree.
        out = create_dot(self, _dot_operand(a), _dot_operand(b), *args)
        if _rule("clobber"):
            _poison(a)
        return out

    # Addresses are checked with the emulation off too: an access outside every argument is a bug on
    # every device (an MTE fault, an illegal address on CUDA, or host memory read here), and the
    # unguarded cuda variant, which runs without the emulation, would otherwise read garbage that
    # only sometimes shows (a k^T load with its mask dropped passed one fuzz run and failed another).
    def load(self: Any, ptrs: Any, mask: Any, *args: Any) -> Any:
        itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        for allocation, addresses in _check_addresses("load", ptrs, mask, itemsize):
            _check_read_after_write(addresses, allocation)
            _record("loaded", addresses, allocation, itemsize)
        return masked_load(self, ptrs, mask, *args)

    def store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any) -> Any:
        itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        for allocation, addresses in _check_addresses("store", ptrs, mask, itemsize):
            _check_other_programs("store", addresses, allocation, "stored", "which value lands is a race")
            _check_other_programs("store", addresses, allocation, "loaded", "that load reads either value")
            _STATE.stored.setdefault(allocation, []).append(addresses)
            _record("stored", addresses, allocation, itemsize)
        return masked_store(self, ptrs, value, mask, *args)

    # The interpreter runs a launch's programs one after another, each from set_grid_idx.
    def barrier(self: Any) -> Any:
        _STATE.stored = {}
        return create_barrier(self)

    def grid_idx(self: Any, *idx: Any) -> Any:
        _next_program()
        return set_grid_idx(self, *idx)

    # Checked with the emulation off too, against a GPU's limits (check_grid).
    def grid_dim(self: Any, nx: int, ny: int, nz: int) -> Any:
        check_grid((nx, ny, nz), _STATE.kernel)
        return set_grid_dim(self, nx, ny, nz)

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        _STATE.kernel = getattr(self.fn, "__name__", "?")
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        tensors = [a for a in (*args_hst, *kwargs_hst.values()) if hasattr(a, "untyped_storage")]
        _STATE.ranges = [(s.data_ptr(), s.data_ptr() + s.nbytes()) for s in (t.untyped_storage() for t in tensors)]
        _STATE.stored, _STATE.program, _STATE.launch, _STATE.itemsize = {}, {}, {}, {}
        return args_hst, kwargs_hst

    class FoldedProgramId(triton.language.constexpr):
        """A program id of a grid axis of 1 as Ascend's frontend sees it: a constexpr (arithmetic with
        it works; ``tl.cast`` takes it), on which ``.to()`` does not compile. It stays one where the
        frontend keeps a constexpr: assigned to a name, and in arithmetic with constants."""

        def to(self, *args: Any, **kwargs: Any) -> Any:
            raise AscendSemanticsError(
                ".to() on a program id of a grid axis of 1: Ascend folds that program id to a constexpr, and .to() "
                f"on a constexpr does not compile there; use tl.cast; at {_kernel_location()}")

    def folding(name: str) -> Any:
        def op(self: Any, *other: Any) -> Any:
            out = getattr(triton.language.constexpr, name)(self, *other)
            return FoldedProgramId(out.value) if type(out.value) is int else out
        return op

    for name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
                 "__mod__", "__neg__", "__pos__", "__invert__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__",
                 "__pow__", "__rpow__"):
        setattr(FoldedProgramId, name, folding(name))

    def folded_program_id(axis: int, builder: Any) -> Any:
        pid = program_id(axis, builder)
        return FoldedProgramId(0) if _rule("folded_program_id") and builder.grid_dim[axis] == 1 else pid

    def kept_constexpr(x: Any, builder: Any, check_type: bool = True) -> Any:
        # The interpreter turns every assigned value into a tensor (to_tensor(..., False)); the frontend
        # keeps an assigned constexpr one.
        return x if isinstance(x, FoldedProgramId) and not check_type else to_tensor(x, builder, check_type)

    builder.create_dot = dot
    builder.create_masked_load = load
    builder.create_masked_store = store
    builder.create_barrier = barrier
    builder.set_grid_idx = grid_idx
    builder.set_grid_dim = grid_dim
    interpreter.GridExecutor._init_args_hst = init_args_hst
    program_id, to_tensor = triton.language.semantic.program_id, triton.language.semantic.to_tensor
    triton.language.semantic.program_id = folded_program_id
    triton.language.semantic.to_tensor = kept_constexpr
