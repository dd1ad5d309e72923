"""Backends: which Triton build runs the kernels, where, and under which launch limits.

=========  ===========  ==========================================================
name       tensors on   what runs
=========  ===========  ==========================================================
npu        npu          triton-ascend on an Ascend NPU: persistent core grid of
                        ``num_aicore`` programs, 65535-block launch limit, tiles
                        from the 192 KiB UB model, head-major beta/g, fp32 dots.
cuda       cuda         upstream Triton on NVIDIA: one program per (chunk, head),
                        autotuned warps/stages, bf16 tensor-core dot operands for bf16
                        (``lowp_dot``; K or V below 64 in 64-wide masked tiles),
                        A held in registers (no Ascend reload guard).
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
import functools
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TypeVar

import torch

from .env import number, switch
from .errors import BackendUnavailableError
from .planning import ASCEND_MAX_BLOCKS, CUDA_MAX_BLOCKS, CUDA_MAX_GRID, INT32_MAX, MIN_TILE, DeviceSpec, LaunchMode

T = TypeVar("T")

BACKEND_ENV = "WY_ASCEND_BACKEND"
ASCEND_UB_BYTES = 192 * 1024  # unified buffer per core on 910B (A2)
# The interpreter has no cores; 4 programs make every persistent loop run several tasks.
CPU_INTERPRETER_CORES = 4
# Narrowest tile whose dots take bf16 operands on cuda by default (a narrower K or V is
# padded to it there, Backend.min_tile, unless both are narrower: Backend.narrow_tiles), and the
# switch that narrows or widens where they are used (Backend.lowp_dot says what each mode does and why).
LOWP_MIN_TILE = 64
LOWP_ENV = "WY_ASCEND_LOWP"
# A grouped backward runs grouped (Backend.groups_dk) from this many programs (chunks x B x H) per
# value head of a group up: from 64 G programs, G = HV / H. A constant, so that every machine, device
# or not, makes one choice. Measured on the H200 (bf16, device time, 21 shapes; docs/ledger.md
# sessions 10 and 11): grouped programs run their G value heads one after another, so per value head
# wins while its G-times larger grid still fits the device: G=4 at 16 programs 1.6-2.3x, G=4 at 128
# 1.01-1.09x (3 shapes; a fourth 0.99x), G=8 at 128 1.3x; grouped wins from there: G=2 at 128
# 1.15-1.18x, G=4 at 256 1.1-1.3x, G=8 at 512 1.1x (at 256: even), G=4 from 512 up 1.0-1.25x.
GROUP_DK_PROGRAMS_PER_HEAD = 64
RUNTIME_DIMS_ENV = "WY_ASCEND_RUNTIME_DIMS"
# K and V that both pad to min_tile share one narrower tile instead (Backend.narrow_tiles), with bf16 dot
# operands for bfloat16 I/O and this many warps alone. Measured on the H200 (docs/ledger.md session 15,
# calls 1 and 2, bf16, device time): on seven shapes with K, V <= 32 (the perf find B1 T1024 H16 HV64 K=V=16,
# fixed, grouped, varlen) 4-17% faster forward and 11-24% backward than 64-wide padded tiles (the find's backward
# 44.1 -> 33.5 us, 9.8x -> 7.5x its bound), first calls 0.3-1.3 s where padded ones autotuned for 2-9 s, outputs
# bit-equal forward and within 2e-8 (relative RMS) backward. 2 warps were slower; 8 warps gave a wrong backward
# (0.12 relative off, K=V=16) and once an illegal memory access (Triton 3.6, sm_90): so no search over warps.
NARROW_TILES_ENV = "WY_ASCEND_NARROW_TILES"
NARROW_WARPS = 4
LOWP_MODES = ("one-tile", "multi-tile", "all")


@dataclass(frozen=True)
class LaunchConfig:
    """Launch knobs; None keeps the backend's own value.

    ``dot_guard`` and ``gate_head_major`` choose the kernel variant a backend would otherwise
    fix (DOT_GUARD: reload the tiles a dot may clobber; head-major beta/g). ``emulate`` (cpu
    backend only) runs the interpreter with Ascend semantics (interpreter.py; default on unless
    ``WY_ASCEND_EMULATION=0``); an unguarded variant is only correct where dots never clobber,
    so it needs ``emulate=False``. ``lowp_dot`` (cpu backend only) runs the cuda variant's bf16 dot
    operands (LOWP_DOT) for bfloat16 I/O on the interpreter, at any tile width: the kernel code
    only cuda takes otherwise. ``group_dk``: the backward sums grouped heads' dk in the kernel
    (``Backend.groups_dk``). ``poison_outputs`` fills outputs with NaN before launching
    so an element no kernel wrote cannot pass a test. ``runtime_dims``: K and V as runtime kernel
    arguments (``Backend.runtime_dims``). ``dk_sum_kernel`` (cpu backend only) sums a backward's
    per-value-head dk with cuda's sum kernel on the interpreter (``Backend.sums_dk_in_kernel``)."""

    max_blocks: int | None = None
    num_cores: int | None = None
    ub_bytes: int | None = None
    mode: LaunchMode | None = None
    tile_cap: int | None = None
    max_tasks: int | None = None
    dot_guard: bool | None = None
    gate_head_major: bool | None = None
    emulate: bool | None = None
    lowp_dot: bool | None = None
    group_dk: bool | None = None
    poison_outputs: bool | None = None
    runtime_dims: bool | None = None
    dk_sum_kernel: bool | None = None

    def merged(self, other: LaunchConfig | None) -> LaunchConfig:
        """``other``'s explicit (not None) values over this one's."""
        if other is None:
            return self
        changes = {f.name: v for f in dataclasses.fields(other) if (v := getattr(other, f.name)) is not None}
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
    """The context's knobs with the per-call ones on top (memoized: every op call asks)."""
    return _merged(_CONTEXT_CONFIG.get(), call)


@functools.lru_cache(maxsize=256)
def _merged(base: LaunchConfig, call: LaunchConfig | None) -> LaunchConfig:
    return base.merged(call)


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
    bwd_tile_cap: int | None  # the backward's own cap where it differs (DeviceSpec.cap)
    min_tile: int  # the planner pads a narrower K or V to this tile width (DeviceSpec.min_tile)
    halve_padded: bool  # half-wide tiles where they pad a multi-tile K or V less (DeviceSpec.halve_padded)
    gate_head_major: bool  # beta/g passed as [B,HV,T] (contiguous per-head loads)
    lowp_dot_for_bf16: bool  # dot operands rounded to bf16 when the I/O dtype is bf16
    dot_guard: bool  # reload A before each dot (Ascend's dot may clobber its left operand)
    group_dk: bool  # the backward sums each key head's dk over its value heads in one program
    dk_sum_kernel: bool  # otherwise the per-value-head dk is summed by one Triton launch, not torch's sum and cast
    autotune: bool
    interpret: bool

    def device(self) -> torch.device:
        """The device this backend runs on; BackendUnavailableError (with the reason) where it cannot
        run here, before ``torch.device("npu")`` fails without torch_npu."""
        check_available(self)
        return torch.device(self.device_type)

    def num_cores(self, device: torch.device) -> int:
        """Persistent core-grid size of ``device`` (read once per device; an unindexed npu or cuda device is
        the current one, torch's meaning, resolved on each call so a later change of device is seen)."""
        index = device.index
        if index is None and self.name == "npu":
            index = torch.npu.current_device()  # type: ignore[attr-defined]
        elif index is None and self.device_type == "cuda":
            index = torch.cuda.current_device()
        return _device_cores(self.name, self.device_type, index)

    def spec(self, device: torch.device, config: LaunchConfig) -> DeviceSpec:
        """The planner's view of this backend on ``device`` with ``config``'s overrides."""
        return DeviceSpec(
            name=self.name,
            mode=_given(config.mode, self.mode),
            max_grid=self.max_grid,
            max_blocks=_given(config.max_blocks, self.max_blocks),
            num_cores=config.num_cores if config.num_cores is not None else self.num_cores(device),
            ub_bytes=_given(config.ub_bytes, self.ub_bytes),
            tile_cap=_given(config.tile_cap, self.tile_cap),
            # an explicit config.tile_cap caps both ops
            bwd_tile_cap=self.bwd_tile_cap if config.tile_cap is None else None,
            max_tasks=_given(config.max_tasks, INT32_MAX),
            min_tile=self.min_tile,
            narrow_tiles=self.narrow_tiles(),
            halve_padded=self.halve_padded,
        )

    def variant(self, config: LaunchConfig) -> tuple[bool, bool, bool]:
        """(DOT_GUARD, GATE_HEAD_MAJOR, Ascend emulation) of a launch with ``config``."""
        if config.emulate and not self.interpret:
            raise ValueError(f"config.emulate=True needs the cpu backend (the Triton interpreter), not {self.name!r}")
        dot_guard = _given(config.dot_guard, self.dot_guard)
        emulate = self.interpret and (config.emulate if config.emulate is not None else _emulation_default())
        if emulate and not dot_guard:
            raise ValueError("config.dot_guard=False (tiles reused as dot operands) is wrong under Ascend semantics, "
                             "where a dot may clobber its left operand: pass emulate=False with it")
        return dot_guard, _given(config.gate_head_major, self.gate_head_major), emulate

    def groups_dk(self, config: LaunchConfig, H: int, HV: int, programs: int) -> bool:
        """With grouped heads (HV > H), whether the backward runs one program per key head whose
        value heads go in order, summing dk in an fp32 buffer and rounding it once (GROUP_DK,
        kernels.py), instead of writing an fp32 dk per value head for a torch sum. On cuda it
        saves the sum's pass over the G-times larger buffer (docs/ledger.md session 8), where
        the grouped grid's ``programs`` (chunks x B x H) number at least GROUP_DK_PROGRAMS_PER_HEAD
        times the group size G = HV / H: a smaller grid leaves SMs idle while each program runs its
        value heads one after another (session 10: B1 T1024 H1 HV4 K=V=16, 16 programs of 4 heads,
        took 8.3x the perf property's bound; 4.9x per value head). On cuda both ways give the same
        dk bit for bit: the per-head dk sum (``Backend.dk_sum_kernel``) adds the value heads in
        the running sum's order (session 12: G = 8, 3 and 6, bf16 and fp32; before it, torch's sum
        of eight fp32 dk took another order). Their other outputs come from two compiles, which may
        round apart (session 16: one dg element of 65,536 one bf16 unit apart, H16 HV64 K=V=16).
        ``config.group_dk`` decides where given. The NPU keeps the per-head tasks, which
        its core grid balances (not run on an NPU)."""
        return HV > H and _given(config.group_dk, self.group_dk and programs >= group_dk_min_programs(H, HV))

    def sums_dk_in_kernel(self, config: LaunchConfig) -> bool:
        """Whether a grouped backward run per value head sums their fp32 dk with
        kernels.wy_dk_group_sum_kernel (in head order, rounded once: GROUP_DK's arithmetic, so both
        ways give the same bits) rather than torch's sum and cast (``dk_sum_kernel``: cuda).
        ``config.dk_sum_kernel`` (the interpreter only) decides where given: the cpu fuzz runs cuda's sum."""
        if config.dk_sum_kernel is not None and not self.interpret:
            raise ValueError(f"config.dk_sum_kernel is for the cpu backend (the interpreter), not {self.name!r}")
        return _given(config.dk_sum_kernel, self.dk_sum_kernel)

    def runtime_dims(self, config: LaunchConfig) -> bool:
        """K and V as runtime kernel arguments (one compile per tiles, trip counts and alignment
        class: specialization.py) rather than compile-time values (one compile per K and V):
        ``config.runtime_dims``, else ``WY_ASCEND_RUNTIME_DIMS`` (1 or 0), else on for the
        interpreter only. On the compiling backends it stays off until a device run checks its
        results: on the H200 it timed equal (docs/ledger.md session 5), but no device test
        or fuzz case has run it there."""
        if config.runtime_dims is not None:
            return config.runtime_dims
        return switch(RUNTIME_DIMS_ENV, self.interpret)

    def narrow_tiles(self) -> bool:
        """Whether a K and a V that both pad to ``min_tile`` share one narrower tile
        (planning.shared_narrow_dim), its dots with bf16 operands for bfloat16 I/O (``lowp_dot``) and
        NARROW_WARPS warps (``launch_warps``): on unless ``WY_ASCEND_NARROW_TILES=0`` (session 15 on
        the H200: the cuda device tests with it, the perf find replayed within its bound). Only where
        ``min_tile`` is above MIN_TILE (cuda): elsewhere a narrow K or V has its own narrow tile already."""
        return switch(NARROW_TILES_ENV, True) and self.min_tile > MIN_TILE

    def lowp_dot(self, dtype: torch.dtype, K: int, V: int, BK: int, BV: int, config: LaunchConfig | None = None) -> bool:
        """bf16 dot operands for bfloat16 I/O, where ``WY_ASCEND_LOWP`` allows them:
        ``multi-tile`` (the default) for tiles >= LOWP_MIN_TILE wide in any number of tile-loop
        iterations, ``one-tile`` only where such tiles cover K and V whole (the rule before
        session 7), ``all`` for every width. float16 keeps exact fp32 dots (its range is too
        narrow for the unscaled intermediates of the backward).

        Measured on an H200 with triton 3.6 (docs/ledger.md sessions 4 and 7). Multi-tile
        loops gave wrong dg/dbeta while Triton software-pipelined them: the pipeliner let the
        next iteration's async copy overwrite the shared buffer of a dot operand that an async
        ``warp_group_dot`` was still reading (a write-after-read race in Triton's TTGIR; minimal
        reproducer tests/test_triton_bf16_repro.py). The tile loops are not pipelined since
        (``num_stages=1``, kernels.py): K=V=256 then passed the oracle (dg at 0.42x its bound, 1.25x
        pipelined) and ran at 1.7x/1.4x fla-core's time where fp32 dots took 120x/230x.
        Narrow tiles: BT=64 with BK=64, BV=32 gave dk/dv/dbeta/dg ~100% off (tests/test_large.py::
        NARROW_FINDS). Cause (session 14): triton 3.6 on sm_90 gets a bf16 dot of the held A^T tile
        wrong when a wider bf16 dot ran before it (tests/test_triton_narrow_repro.py: Triton's). Tiles
        of one narrow width (BK = BV = 16 or 32) were right, bit-equal to padded ones, but not clearly
        faster in session 14's (noisy) timings; so ``all`` is for investigation only, and cuda pads a
        narrow K or V to 64-wide tiles (``min_tile``), which passed the oracle on K64/V32, K48/V80, K16/V16,
        or, with ``narrow_tiles``, gives K and V one shared narrow tile, whose dots take bf16 operands.
        ``config.lowp_dot`` (the interpreter only) decides where given, for bfloat16 I/O."""
        if config is not None and config.lowp_dot is not None:
            if not self.interpret:
                raise ValueError(f"config.lowp_dot is for the cpu backend (the interpreter), not {self.name!r}: "
                                 f"{LOWP_ENV} sets the rule on cuda")
            return config.lowp_dot and dtype == torch.bfloat16
        if not (self.lowp_dot_for_bf16 and dtype == torch.bfloat16):
            return False
        mode = os.environ.get(LOWP_ENV) or "multi-tile"
        if mode not in LOWP_MODES:
            raise ValueError(f"{LOWP_ENV} must be one of {LOWP_MODES}, got {mode!r}")
        if mode == "all":
            return True
        if min(BK, BV) >= LOWP_MIN_TILE:
            return mode == "multi-tile" or (K <= BK and V <= BV)
        return BK == BV and K <= BK and V <= BV and self.narrow_tiles()  # one shared narrow tile each


def group_dk_min_programs(H: int, HV: int) -> int:
    """The fewest programs (chunks x B x H) a grouped backward runs grouped with on cuda: 64 per
    value head of a group (GROUP_DK_PROGRAMS_PER_HEAD)."""
    return GROUP_DK_PROGRAMS_PER_HEAD * (HV // H)


def _given(value: T | None, default: T) -> T:
    """``value`` unless it is None (False and 0 are values: a bad 0 then fails validation)."""
    return default if value is None else value


def _emulation_default() -> bool:
    from .interpreter import emulation_default

    return emulation_default()


@cache
def _device_cores(name: str, device_type: str, index: int | None) -> int:
    """Cube cores (npu), SMs (cuda) of device ``index``, or the interpreter's nominal count (cpu)."""
    if name == "npu":
        import triton.runtime.driver as driver

        return int(driver.active.utils.get_device_properties(index)["num_aicore"])
    if device_type == "cuda":
        return int(torch.cuda.get_device_properties(index).multi_processor_count)
    return CPU_INTERPRETER_CORES


_NPU_SHAPE = dict(
    mode="persistent",
    max_grid=(ASCEND_MAX_BLOCKS, ASCEND_MAX_BLOCKS),
    max_blocks=ASCEND_MAX_BLOCKS,
    ub_bytes=ASCEND_UB_BYTES,
    tile_cap=128,
    bwd_tile_cap=None,
    min_tile=MIN_TILE,
    halve_padded=False,
    gate_head_major=True,
    lowp_dot_for_bf16=False,
    dot_guard=True,
    group_dk=False,
    dk_sum_kernel=False,
    autotune=False,
)

BACKENDS: dict[str, Backend] = {
    "npu": Backend(name="npu", device_type="npu", interpret=False, **_NPU_SHAPE),  # type: ignore[arg-type]
    "cuda": Backend(
        name="cuda",
        device_type="cuda",
        mode="grid",
        max_grid=CUDA_MAX_GRID,
        max_blocks=CUDA_MAX_BLOCKS,
        ub_bytes=None,
        # The forward in tiles up to 128 wide (K=V=128 in one tile), the backward up to 64: with
        # unpipelined tile loops the backward's 64-wide tiles ran 1.2-1.4x faster than 128-wide
        # ones (K=V=80..256, 23% on B8 T4096 H16 K=V=128) and the forward's 7-10% slower on an
        # H200 (docs/ledger.md session 8).
        tile_cap=128,
        bwd_tile_cap=LOWP_MIN_TILE,
        # Narrow K or V in 64-wide masked tiles: bf16 dot operands need them (lowp_dot); fp32
        # and fp16 I/O pay the padded width in their exact fp32 dots.
        min_tile=LOWP_MIN_TILE,
        # A K or V of 129-192 in three 64-wide forward tiles, not two 128-wide ones padding it to 256 (the
        # backward's tiles are 64 wide already): on an H100 the grid's K=V=192 forward took 0.0114 -> 0.0083 ms,
        # its K=192/V=48 one 0.0071 -> 0.0064 (docs/ledger.md session 38).
        halve_padded=True,
        gate_head_major=False,
        lowp_dot_for_bf16=True,
        dot_guard=False,
        group_dk=True,
        # The per-value-head dk summed in one launch: torch's reduction and cast took two, and each
        # launch costs the small grouped backwards about 3 us of device time (B1 T1024 H8 HV32 K=V=16:
        # 30.2 -> 25.4 us; docs/ledger.md session 12).
        dk_sum_kernel=True,
        autotune=True,
        interpret=False,
    ),
    # The interpreter has no UB: ub_bytes None lets every BT run; the fuzz suite sets
    # ub_bytes to replay the NPU's tile choices.
    "cpu": Backend(name="cpu", device_type="cpu", interpret=True, **{**_NPU_SHAPE, "ub_bytes": None}),  # type: ignore[arg-type]
    "npu-cuda": Backend(name="npu-cuda", device_type="cuda", interpret=False, **_NPU_SHAPE),  # type: ignore[arg-type]
}
_BY_DEVICE = {"npu": "npu", "cuda": "cuda", "cpu": "cpu"}


# What each backend needs, for BackendUnavailableError's advice (install.py is in the repository root).
NEEDS = {
    "cpu": "triton-ascend's interpreter (python install.py cpu, in a fresh environment)",
    "cuda": "an NVIDIA GPU, torch built with CUDA and upstream triton 3.6-3.8 (python install.py cuda)",
    "npu-cuda": "an NVIDIA GPU, torch built with CUDA and upstream triton 3.6-3.8 (python install.py cuda)",
    "npu": "an Ascend NPU, torch_npu for its CANN toolkit and triton-ascend (python install.py npu)",
}


def _unavailable(name: str, reason: str) -> BackendUnavailableError:
    """The error for backend ``name`` (or a device type no backend runs): the reason, the backends
    that do run here, and what ``name`` needs."""
    needs = f" {name!r} needs {NEEDS[name]}." if name in NEEDS else ""
    return BackendUnavailableError(f"backend {name!r} is unavailable: {reason}. Available here: "
                                   f"{', '.join(runnable()) or 'none'}.{needs} Valid backends: {sorted(BACKENDS)}.",
                                   backend=name)


@cache
def _missing(backend: Backend) -> str | None:
    """Why ``backend`` cannot run here, None where it can (the cpu interpreter's own check aside)."""
    if importlib.util.find_spec("triton") is None:
        return "the `triton` module is not installed"
    if backend.device_type == "npu":
        if importlib.util.find_spec("torch_npu") is None:
            return "torch_npu is not installed"
        import torch_npu  # noqa: F401

        if not torch.npu.is_available():  # type: ignore[attr-defined]
            return "torch_npu sees no NPU"
    if backend.device_type == "cuda" and not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def runnable() -> list[str]:
    """The backends that can run here, by name."""
    from .interpreter import check_interpreter

    def runs(backend: Backend) -> bool:
        if _missing(backend) is not None:
            return False
        try:
            if backend.interpret:
                check_interpreter()
        except BackendUnavailableError:
            return False
        return True

    return [name for name, backend in sorted(BACKENDS.items()) if runs(backend)]


@cache
def check_available(backend: Backend) -> None:
    """Raise BackendUnavailableError with the reason if ``backend`` cannot run here."""
    reason = _missing(backend)
    if reason is not None:
        raise _unavailable(backend.name, reason)
    if backend.interpret:
        from .interpreter import check_interpreter

        check_interpreter()  # its own message: which triton is installed, and the repair


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
            "mode (one process runs either the interpreter or compiled kernels)", backend="cpu" if interpret else None,
        )
    if interpret:
        from . import interpreter

        interpreter.prepare()
    return kernels


AUTOTUNE_ENV = "WY_ASCEND_AUTOTUNE"
# Warps x stages searched per shape on CUDA. WY_ASCEND_AUTOTUNE=0 keeps only the first
# (compile once per specialization: test and fuzz runs, where compile time dominates). Every
# loop of the kernels sets its own num_stages=1 (kernels.py), so the launch's num_stages
# changes no code, only the cache key: the search is over warps alone. (With pipelined tile
# loops, 9 warps x stages configs made a first backward call sit in ptxas for minutes.)
CUDA_CONFIGS = [(4, 1), (8, 1), (2, 1)]
# (num_warps, maxnreg) the forward's search adds to CUDA_CONFIGS: a register cap a thread. A bf16 forward block of
# 4 warps at K=V=128 takes 169 registers (offline sm_90 compile), so an SM's 64K registers hold it twice; capped at
# 168 (registers go by 8 a thread) three times. Measured with them in the search, one run each: the H200's forwards
# 5% faster on two headline shapes (fixed 0.1683 -> 0.1599 ms, grouped 0.3035 -> 0.2878), the others within noise
# (session 24); the H100's grouped forward 4.6% faster (session 25). The backward spills when capped (244 registers
# at 4 warps) and the autotuner took no capped config for it: its search stays CUDA_CONFIGS.
# Invariant of every entry (tests/test_cuda_variant.py): its cap is a multiple of 8 (the allocation granule), at most
# 255 (a thread's most), and the largest such at which the SM's 64K registers hold its number of blocks: 8 more
# hold one block fewer (4 warps: 3 blocks at 168, 2 at 176; 8 warps: 2 at 128, 1 at 136).
FWD_REGISTER_CAPPED_CONFIGS = [(4, 168), (8, 128)]


# Launches of fp32 dots on cuda (fp32 or fp16 I/O; bf16 in tiles narrower than LOWP_MIN_TILE): an exact fp32
# dot is an FMA loop unrolled per thread, so a program's code grows with BT x BT x its widest tile over its
# threads, and a first call compiles every config it searches. Offline sm_90 compiles (Triton 3.6 and its ptxas
# on this project's 2-core CPU, a fresh cache each; docs/ledger.md session 13), by that work per thread:
# forward 1024 -> 2.2-2.7 s, 2048 -> 4.5-4.7 s, 4096 -> 9-15 s, 8192 -> 177 s; backward 1024 -> 7.5-15 s,
# 2048 -> 30-44 s, 4096 -> over 600 s (stopped). The search [4, 8, 2] warps took minutes at BT=128, and 90 s
# for an fp32 BT=64 backward on the H200. Such a launch runs one config alone (WY_ASCEND_FP32_WARPS=0: the
# search): the fewest warps (4 to 32) that keep its work per thread within FP32_DOT_WORK. On the H200
# (session 13, 8 shapes, fp32 and fp16, BT=64 and 128): first calls 1.9-5.8 s forward and 8.1-18.3 s backward
# (the BT=128 timeout finds replay in 29-67 s, oracle included, where they ran past 120 s), every case within
# its oracle bound; at BT=64 against 4 warps alone (WY_ASCEND_AUTOTUNE=0's config) the backward 1.7-9.9x and
# the forward 1.0-8.9x faster, and on B2 T4096 H4 K=V=128 level with session 11's autotuned search (835/655 us
# forward/backward against 841/665).
FP32_WARPS_ENV = "WY_ASCEND_FP32_WARPS"
FP32_DOT_WORK = {"fwd": 2048, "bwd": 1024}


def dot_work(kernel_name: str, BT: int, tile: int) -> int:
    """Multiply-adds of a program's widest dot: the forward's A (BT x BT) times a tile (BT x tile);
    the backward's also ``dA A^T`` and ``A^T dA``, BT x BT x BT whatever the tiles. Counting the tile
    alone there gave a backward of 16-wide tiles at BT=128 8 warps where its BT^3 dots need 32: it
    compiled for minutes on the H200 (a nightly's warm-up left it out after 90 s)."""
    return BT * BT * (max(tile, BT) if kernel_name == "bwd" else tile)


def fp32_dot_warps(kernel_name: str, BT: int, tile: int, lowp_dot: bool) -> int | None:
    """The warps a cuda launch of fp32 dots (``not lowp_dot``) whose widest tile is ``tile`` runs alone
    (None: ``WY_ASCEND_FP32_WARPS=0``, or the dots take bf16 operands): the fewest that keep ``dot_work``
    per thread within FP32_DOT_WORK."""
    if not switch(FP32_WARPS_ENV, True) or lowp_dot:
        return None
    warps = 4
    while warps < 32 and dot_work(kernel_name, BT, tile) > FP32_DOT_WORK[kernel_name] * 32 * warps:
        warps *= 2
    return warps


def launch_warps(kernel_name: str, BT: int, BK: int, BV: int, lowp_dot: bool) -> int | None:
    """The warps a cuda launch runs alone, or None for the autotuner's search: NARROW_WARPS for bf16
    dots in one shared narrow tile (``Backend.narrow_tiles``), else ``fp32_dot_warps``."""
    if lowp_dot and BK == BV < LOWP_MIN_TILE:
        return NARROW_WARPS
    return fp32_dot_warps(kernel_name, BT, max(BK, BV), lowp_dot)


def search_configs(warps: int | None, autotune: bool | None = None) -> list[tuple[int, int]]:
    """The (num_warps, num_stages) the cuda autotuner tries: CUDA_CONFIGS (its first alone without
    ``autotune``, by default WY_ASCEND_AUTOTUNE), or ``warps`` alone where ``launch_warps`` gives them."""
    if warps is not None:
        return [(warps, 1)]
    return CUDA_CONFIGS if (switch(AUTOTUNE_ENV, True) if autotune is None else autotune) else CUDA_CONFIGS[:1]


@cache
def _autotuned(kernel_name: str, warps: int | None = None, autotune: bool = True) -> object:
    """The CUDA variant of an entry kernel, autotuned over warps and stages per shape (``search_configs``;
    ``autotune`` is part of the memo's key, so WY_ASCEND_AUTOTUNE changed later takes effect)."""
    import triton

    kernels = _kernels(interpret=False)
    search = search_configs(warps, autotune)
    configs = [triton.Config({}, num_warps=w, num_stages=s) for w, s in search]
    if kernel_name == "fwd" and len(search) > 1:
        configs += [triton.Config({}, num_warps=w, num_stages=1, maxnreg=r) for w, r in FWD_REGISTER_CAPPED_CONFIGS]
    # PERSISTENT is left out of the key: both launch shapes then run one config, so
    # switching shape cannot change the arithmetic (results stay bit-identical).
    key = ["H", "HV", "K", "V", "BT", "BK", "BV", "USE_G", "IS_VARLEN", "LOWP_DOT", "DOT_GUARD", "GROUP_DK"]
    return triton.autotune(configs=configs, key=key, do_bench=bench_config)(kernels.KERNELS[kernel_name])


# Milliseconds of calls in each of the 10 timed CUDA-graph replays of one config (Triton's
# do_bench_cudagraph; its own default). Triton's autotuner with use_cuda_graph=True replays 100 ms
# ten times: 1 s a config, 3 s of every first call of a shape even with every config compiled
# (compare_peer's first_s on the H200, session 17), most of a benchmark row's time.
AUTOTUNE_REP_MS = 20


def bench_config(kernel_call: Callable[[], object], quantiles: tuple[float, ...]) -> object:
    """The autotuner's timing of one config: device time by CUDA-graph replay. Timed by plain launches,
    a small shape's configs all read as the host's time per call, and a 2-warp config with twice the
    device time of the 4-warp one was picked at random (the H200 grid run of session 8: K64/V32
    forward 1.97x)."""
    from triton.testing import do_bench_cudagraph

    return do_bench_cudagraph(kernel_call, rep=AUTOTUNE_REP_MS, quantiles=quantiles)


# A first launch that autotunes runs ptxas under this deadline per config (seconds; 0: none): a
# config whose compile runs away then fails (PTXASError), and Triton's autotuner times it as inf and
# takes the next. Our compiles take 1-4 s on the H200's host (a K=V=256 backward's 3 configs compiled
# and timed in 9.8 s, docs/ledger.md session 7); the runaway of issue 13 sat in ptxas > 3 min.
PTXAS_TIMEOUT_ENV = "WY_ASCEND_PTXAS_TIMEOUT"
PTXAS_TIMEOUT_S = 20.0
_PTXAS_WRAPPER = """\
import subprocess, sys
try:
    sys.exit(subprocess.run([{real!r}, *sys.argv[1:]], timeout={limit!r}).returncode)
except subprocess.TimeoutExpired:
    sys.stderr.write("wy_ascend: ptxas ran past {limit} s ({env}); stopped, so the autotuner takes the next config\\n")
    sys.exit(124)
"""


def ptxas_timeout() -> float:
    """The per-config ptxas deadline in seconds (``WY_ASCEND_PTXAS_TIMEOUT``; 0 turns it off)."""
    return number(PTXAS_TIMEOUT_ENV, PTXAS_TIMEOUT_S, float, "seconds")


@cache
def ptxas_wrapper(real: str, limit: float) -> str:
    """Path of an executable that runs ``real`` (a ptxas) with its arguments and kills it past
    ``limit`` seconds, exiting 124 with a message on stderr (which Triton puts in its error)."""
    import tempfile

    path = os.path.join(tempfile.mkdtemp(prefix="wy_ascend_ptxas_"), "ptxas")
    with open(path, "w") as fh:
        fh.write(f"#!{sys.executable}\n" + _PTXAS_WRAPPER.format(real=real, limit=limit, env=PTXAS_TIMEOUT_ENV))
    os.chmod(path, 0o755)
    return path


@contextlib.contextmanager
def ptxas_deadline(kernel: object) -> Iterator[None]:
    """Compiles inside run ptxas under ``ptxas_timeout()`` where ``kernel`` autotunes over several
    configs (a runaway config then fails fast and the next one is tried); else nothing changes.
    Scoped to the ``with`` block (Triton's knobs scope): other kernels of the process keep their ptxas."""
    limit = ptxas_timeout()
    if len(getattr(kernel, "configs", ())) < 2 or not limit:
        yield
        return
    from triton import knobs

    with knobs.nvidia.scope():
        knobs.nvidia.ptxas = ptxas_wrapper(knobs.nvidia.ptxas.path, limit)
        yield


def compiled_kernels() -> int:
    """Kernels compiled in this process so far, all devices and both entry kernels (0 before
    any device launch, and under the interpreter, which compiles nothing). The fuzz tally and
    the recompile test compare it before and after a call."""
    kernels = sys.modules.get(f"{__package__}.kernels")
    if kernels is None:
        return 0
    caches = (getattr(k, "device_caches", {}) for k in kernels.KERNELS.values())
    return sum(len(entry[0]) for per_device in caches for entry in per_device.values())


FP32_DOT_ENV = "WY_ASCEND_FP32_DOT"
FP32_DOT_MODES = ("ieee", "tf32x3")


def check_fp32_dot(backend: Backend) -> None:
    """``WY_ASCEND_FP32_DOT`` (kernels.FP32_DOT_TF32X3) is valid, is the value the kernels were
    imported with, and asks for tf32x3 on the cuda backend only (triton-ascend and the
    interpreter are not known to have it; npu-cuda stands for the NPU)."""
    mode = os.environ.get(FP32_DOT_ENV) or "ieee"
    if mode not in FP32_DOT_MODES:
        raise ValueError(f"{FP32_DOT_ENV} must be one of {FP32_DOT_MODES}, got {mode!r}")
    if mode == "tf32x3" and backend.name != "cuda":
        raise ValueError(f"{FP32_DOT_ENV}=tf32x3 is for the cuda backend, not {backend.name!r}")
    kernels = sys.modules.get(f"{__package__}.kernels")
    if kernels is not None and bool(kernels.FP32_DOT_TF32X3) != (mode == "tf32x3"):
        raise ValueError(f"{FP32_DOT_ENV}={mode} was set after the kernels were imported; set it before the "
                         "process first uses wy_ascend's kernels")


def kernel_for(backend: Backend, kernel_name: str, warps: int | None = None) -> object:
    """The launchable kernel object of ``kernel_name`` ("fwd"/"bwd") on ``backend`` (``warps``: that
    many alone where the backend autotunes, ``launch_warps``)."""
    check_fp32_dot(backend)
    if backend.autotune:
        return _autotuned(kernel_name, warps, switch(AUTOTUNE_ENV, True))
    return _kernels(backend.interpret).KERNELS[kernel_name]


def dk_sum_kernel(backend: Backend) -> object:
    """The grouped backward's dk sum (kernels.wy_dk_group_sum_kernel) in ``backend``'s Triton mode."""
    return _kernels(backend.interpret).wy_dk_group_sum_kernel


# Devices each backend plans for, as data: (backend, the core count its device query returns, UB
# bytes or None for the backend's own). Planning needs no device, so the fuzz suite plans for
# all of them on any machine. Ascend: cube cores (``num_aicore``) of the 910B3/910B4 (20) and
# 910B1/910B2 (24) of the A2 series and of one 910_93 die (24) of the A3 series, each with a
# 192 KiB unified buffer; cuda: SMs of an H200 (132) and an A100 (108); cpu: the interpreter's.
DEVICES: dict[str, tuple[str, int, int | None]] = {
    "npu-910B3-A2": ("npu", 20, ASCEND_UB_BYTES),
    "npu-910B2-A2": ("npu", 24, ASCEND_UB_BYTES),
    "npu-910_93-A3": ("npu", 24, ASCEND_UB_BYTES),
    "cuda-H200": ("cuda", 132, None),
    "cuda-A100": ("cuda", 108, None),
    "npu-cuda-H200": ("npu-cuda", 132, None),
    "cpu": ("cpu", CPU_INTERPRETER_CORES, None),
}


def device_spec(device: str, config: LaunchConfig) -> DeviceSpec:
    """The planner's spec of ``device`` (a DEVICES name) with ``config``'s knobs over its own
    core count and UB, without querying any device."""
    backend, cores, ub_bytes = DEVICES[device]
    own = LaunchConfig(num_cores=cores, ub_bytes=ub_bytes)
    return BACKENDS[backend].spec(torch.device("cpu"), own.merged(config))
