"""Backends: which Triton build runs the kernels, where, and under which launch limits.

=========  ===========  ==========================================================
name       tensors on   what runs
=========  ===========  ==========================================================
npu        npu          triton-ascend on an Ascend NPU: persistent core grid of
                        ``num_aicore`` programs, 65535-block launch limit, tiles
                        from the 192 KiB UB model, head-major beta/g, fp32 dots.
cuda       cuda         upstream Triton on NVIDIA: one program per (chunk, head),
                        autotuned warps/stages, bf16 tensor-core dot operands for bf16
                        where one tile covers K and V (``lowp_dot``), A held in
                        registers (no Ascend reload guard).
cpu        cpu          the Triton interpreter (triton-ascend's when installed, so
                        CPU runs go through the NPU frontend) with the NPU's launch
                        shape: core grid, block limit, head-major beta/g, fp32 dots.
npu-cuda   cuda         the npu path (kernels, core grid, host chunking, UB tiles,
                        fp32 dots) on a CUDA device: exercises the NPU index math
                        and launch planning at real scale where no NPU is at hand.
=========  ===========  ==========================================================

Selection: ``backend=`` argument, else ``WY_ASCEND_BACKEND``, else the tensors' device.
Launch knobs (block limit, core count, UB bytes, launch mode, tile cap) are overridden
per call (``config=LaunchConfig(...)``) or per context (``with launch_config(...)``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib.util
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from types import ModuleType

import torch

from .errors import BackendUnavailableError
from .planning import INT32_MAX, DeviceSpec, LaunchMode

BACKEND_ENV = "WY_ASCEND_BACKEND"
ASCEND_MAX_BLOCKS = 65535
ASCEND_UB_BYTES = 192 * 1024  # unified buffer per core on 910B (A2)
CUDA_MAX_GRID = (INT32_MAX, 65535)  # grid x, grid y
# The interpreter has no cores; 4 programs make every persistent loop run several tasks.
CPU_INTERPRETER_CORES = 4
# Narrowest tile whose dots take bf16 operands on cuda (Backend.lowp_dot says why).
LOWP_MIN_TILE = 64


@dataclass(frozen=True)
class LaunchConfig:
    """Launch knobs; None keeps the backend's own value. ``poison_outputs`` fills
    outputs with NaN before launching so an element no kernel wrote cannot pass a test."""

    max_blocks: int | None = None
    num_cores: int | None = None
    ub_bytes: int | None = None
    mode: LaunchMode | None = None
    tile_cap: int | None = None
    max_tasks: int | None = None
    poison_outputs: bool = False

    def merged(self, other: LaunchConfig | None) -> LaunchConfig:
        """``other``'s explicit values over this one's."""
        if other is None:
            return self
        changes = {f.name: getattr(other, f.name) for f in dataclasses.fields(other) if getattr(other, f.name)}
        return dataclasses.replace(self, **changes)


_CONTEXT_CONFIG: contextvars.ContextVar[LaunchConfig] = contextvars.ContextVar("wy_ascend_launch", default=LaunchConfig())


@contextlib.contextmanager
def launch_config(**overrides: object) -> Iterator[LaunchConfig]:
    """Override launch knobs for the calls made inside the ``with`` block."""
    cfg = _CONTEXT_CONFIG.get().merged(LaunchConfig(**overrides))  # type: ignore[arg-type]
    token = _CONTEXT_CONFIG.set(cfg)
    try:
        yield cfg
    finally:
        _CONTEXT_CONFIG.reset(token)


def current_config(call: LaunchConfig | None = None) -> LaunchConfig:
    """The context's knobs with the per-call ones on top."""
    return _CONTEXT_CONFIG.get().merged(call)


@dataclass(frozen=True)
class Backend:
    """One backend's fixed properties. Limits are data; the core count is read from
    the device on first use (never at import)."""

    name: str
    device_type: str
    mode: LaunchMode
    max_grid: tuple[int, int]
    max_blocks: int | None
    ub_bytes: int | None
    tile_cap: int
    gate_head_major: bool  # beta/g passed as [B,HV,T] (contiguous per-head loads)
    lowp_dot_for_bf16: bool  # dot operands rounded to bf16 when the I/O dtype is bf16
    dot_guard: bool  # reload A before each dot (Ascend's dot may clobber its left operand)
    autotune: bool
    interpret: bool

    def num_cores(self, device: torch.device) -> int:
        """Persistent core-grid size of ``device`` (read once per device)."""
        return _device_cores(self.name, self.device_type, device.index)

    def spec(self, device: torch.device, config: LaunchConfig) -> DeviceSpec:
        """The planner's view of this backend on ``device`` with ``config``'s overrides."""
        return DeviceSpec(
            name=self.name,
            mode=config.mode or self.mode,
            max_grid=self.max_grid,
            max_blocks=config.max_blocks or self.max_blocks,
            num_cores=config.num_cores or self.num_cores(device),
            ub_bytes=config.ub_bytes or self.ub_bytes,
            tile_cap=config.tile_cap or self.tile_cap,
            max_tasks=config.max_tasks or INT32_MAX,
        )

    def lowp_dot(self, dtype: torch.dtype, K: int, V: int, BK: int, BV: int) -> bool:
        """bf16 dot operands for bfloat16 I/O, only where they were verified on an H200
        (triton 3.6): tiles >= LOWP_MIN_TILE wide that cover K and V whole (one iteration of
        each tile loop). float16 keeps exact fp32 dots (its range is too narrow for the
        unscaled intermediates of the backward). Measured failures otherwise, none of them
        explained by bf16 rounding (a float64 emulation of the bf16 operands stays at
        0.2-0.5x the bound on each): 16-wide tiles (w off by 75%); 32-wide tiles in two
        iterations (a nightly fuzz find); 64-wide tiles in two and four iterations (dg 4-9e-2,
        6-12x the bound, on the 4.5M-token test with K=V=128; dbeta 2x on K=V=256). One tile
        per loop matched the emulation to 4 digits (regressions/oracle-295735d84e54.json)."""
        return (self.lowp_dot_for_bf16 and dtype == torch.bfloat16 and min(BK, BV) >= LOWP_MIN_TILE
                and K <= BK and V <= BV)


@cache
def _device_cores(name: str, device_type: str, index: int | None) -> int:
    """Cube cores (npu), SMs (cuda) or the interpreter's nominal count (cpu)."""
    if name == "npu":
        import triton.runtime.driver as driver

        idx = index if index is not None else torch.npu.current_device()  # type: ignore[attr-defined]
        return int(driver.active.utils.get_device_properties(idx)["num_aicore"])
    if device_type == "cuda":
        return int(torch.cuda.get_device_properties(index if index is not None else 0).multi_processor_count)
    return CPU_INTERPRETER_CORES


_NPU_SHAPE = dict(
    mode="persistent",
    max_grid=(ASCEND_MAX_BLOCKS, ASCEND_MAX_BLOCKS),
    max_blocks=ASCEND_MAX_BLOCKS,
    ub_bytes=ASCEND_UB_BYTES,
    tile_cap=128,
    gate_head_major=True,
    lowp_dot_for_bf16=False,
    dot_guard=True,
    autotune=False,
)

BACKENDS: dict[str, Backend] = {
    "npu": Backend(name="npu", device_type="npu", interpret=False, **_NPU_SHAPE),  # type: ignore[arg-type]
    "cuda": Backend(
        name="cuda",
        device_type="cuda",
        mode="grid",
        max_grid=CUDA_MAX_GRID,
        max_blocks=None,
        ub_bytes=None,
        # 128: K=V=128 in one tile, so bf16 keeps its bf16 dot operands (lowp_dot: one tile
        # per loop); the configuration of the last all-green H200 test run (f99ab59). The
        # faster cap 64 (backward 0.72-0.99x fla's time against 0.98-1.32x) took bf16
        # operands in two-tile loops, which gave wrong dg/dbeta there (docs/benchmarks.md).
        tile_cap=128,
        gate_head_major=False,
        lowp_dot_for_bf16=True,
        dot_guard=False,
        autotune=True,
        interpret=False,
    ),
    # The interpreter has no UB: ub_bytes None lets every BT run; the fuzz suite sets
    # ub_bytes to replay the NPU's tile choices.
    "cpu": Backend(name="cpu", device_type="cpu", interpret=True, **{**_NPU_SHAPE, "ub_bytes": None}),  # type: ignore[arg-type]
    "npu-cuda": Backend(name="npu-cuda", device_type="cuda", interpret=False, **_NPU_SHAPE),  # type: ignore[arg-type]
}
_BY_DEVICE = {"npu": "npu", "cuda": "cuda", "cpu": "cpu"}


def _unavailable(name: str, reason: str) -> BackendUnavailableError:
    return BackendUnavailableError(f"backend {name!r} is unavailable: {reason}; valid backends: {sorted(BACKENDS)}")


@cache
def check_available(backend: Backend) -> None:
    """Raise BackendUnavailableError with the reason if ``backend`` cannot run here."""
    if importlib.util.find_spec("triton") is None:
        raise _unavailable(backend.name, "the `triton` module is not installed (pip install '.[cpu]' or '.[cuda]')")
    if backend.device_type == "npu":
        if importlib.util.find_spec("torch_npu") is None:
            raise _unavailable(backend.name, "torch_npu is not installed (pip install '.[npu]')")
        import torch_npu  # noqa: F401

        if not torch.npu.is_available():  # type: ignore[attr-defined]
            raise _unavailable(backend.name, "torch_npu sees no NPU")
    if backend.device_type == "cuda" and not torch.cuda.is_available():
        raise _unavailable(backend.name, "torch sees no CUDA device")


def resolve_backend(name: str | None, device: torch.device) -> Backend:
    """The backend named by ``name`` (else WY_ASCEND_BACKEND, else ``device``'s type).

    A name asked for explicitly must exist and be runnable, and the tensors must live on
    its device; otherwise a clear error says why and lists the valid names.
    """
    requested = name or os.environ.get(BACKEND_ENV) or None
    if requested is None:
        requested = _BY_DEVICE.get(device.type)
        if requested is None:
            raise _unavailable(device.type, f"no backend runs tensors on device type {device.type!r}")
    if requested not in BACKENDS:
        source = "backend" if name else BACKEND_ENV
        raise ValueError(f"{source} must be one of {sorted(BACKENDS)}, got {requested!r}")
    backend = BACKENDS[requested]
    check_available(backend)
    if device.type != backend.device_type:
        raise ValueError(
            f"backend {backend.name!r} runs on {backend.device_type!r} tensors, but the inputs are on {device}"
        )
    return backend


INTERPRET_ENV = "TRITON_INTERPRET"


def _kernels(interpret: bool) -> ModuleType:
    """kernels.py, checked to be in the mode the backend needs.

    Triton decides at import time whether ``@triton.jit`` (its own standard library
    included) builds interpreter or compiled functions, from TRITON_INTERPRET. So a
    process runs either the cpu backend or the device backends: the first use of the cpu
    backend sets TRITON_INTERPRET=1 if triton is not imported yet; any other mix is an
    error that says how to start the process.
    """
    if interpret and "triton" not in sys.modules:
        os.environ[INTERPRET_ENV] = "1"
    from triton.runtime.interpreter import InterpretedFunction

    from . import kernels

    if isinstance(kernels.wy_fwd_kernel, InterpretedFunction) != interpret:
        need = "TRITON_INTERPRET=1 set before triton is first imported" if interpret else "TRITON_INTERPRET unset"
        raise BackendUnavailableError(
            f"backend {'cpu' if interpret else 'npu/cuda'} needs {need}; this process imported triton in the other "
            "mode (one process runs either the interpreter or compiled kernels)"
        )
    if interpret:
        _patch_language_once()
        _memoize_np_dtypes_once()
    return kernels


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


AUTOTUNE_ENV = "WY_ASCEND_AUTOTUNE"
# Warps x stages searched per shape on CUDA. WY_ASCEND_AUTOTUNE=0 keeps only the first
# (compile once per specialization: test and fuzz runs, where compile time dominates).
CUDA_CONFIGS = [(4, 2), (8, 2), (4, 1), (8, 3), (2, 2), (2, 3), (4, 3), (2, 4), (4, 4)]


@cache
def _autotuned(kernel_name: str) -> object:
    """The CUDA variant of an entry kernel, autotuned over warps and stages per shape."""
    import triton

    kernels = _kernels(interpret=False)
    search = CUDA_CONFIGS if os.environ.get(AUTOTUNE_ENV, "1") != "0" else CUDA_CONFIGS[:1]
    configs = [triton.Config({}, num_warps=w, num_stages=s) for w, s in search]
    # PERSISTENT is left out of the key: both launch shapes then run one config, so
    # switching shape cannot change the arithmetic (results stay bit-identical).
    key = ["H", "HV", "K", "V", "BT", "BK", "BV", "USE_G", "IS_VARLEN", "LOWP_DOT", "DOT_GUARD"]
    return triton.autotune(configs=configs, key=key)(kernels.KERNELS[kernel_name])


def compiled_kernels() -> int:
    """Kernels compiled in this process so far, all devices and both entry kernels (0 before
    any device launch, and under the interpreter, which compiles nothing). The fuzz tally and
    the recompile test compare it before and after a call."""
    kernels = sys.modules.get(f"{__package__}.kernels")
    if kernels is None:
        return 0
    caches = (getattr(k, "device_caches", {}) for k in kernels.KERNELS.values())
    return sum(len(entry[0]) for per_device in caches for entry in per_device.values())


def kernel_for(backend: Backend, kernel_name: str) -> object:
    """The launchable kernel object of ``kernel_name`` ("fwd"/"bwd") on ``backend``."""
    if backend.autotune:
        return _autotuned(kernel_name)
    return _kernels(backend.interpret).KERNELS[kernel_name]
