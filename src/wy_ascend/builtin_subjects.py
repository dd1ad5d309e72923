"""The built-in subjects, declared with the public API (wy_ascend.subjects) like anyone's: they are the
worked examples of a declaration, registered as entry points of group ``wy_ascend.subjects``
(pyproject.toml) and resolved by the same loader.

* ``wy_ascend``: this project's ops (the default).
* ``fla-ascend``: flash-linear-attention's Ascend kernels, fla-core's
  ``fla/ops/gated_delta_rule/backends/triton_ascend/wy_fast.py`` (``recompute_w_u_fwd_npu``,
  ``prepare_wy_repr_bwd_npu``): on ``npu`` natively, on ``cpu`` under triton-ascend's interpreter with
  the Ascend emulation (``Target``: triton-ascend 3.2's rules).
* ``fla``: fla-core's Triton kernels for GPUs, ``fla/ops/gated_delta_rule/wy_fast.py``, on ``cuda``, and
  on ``cpu`` under the interpreter without the Ascend rules (a GPU's dots do not clobber; the
  out-of-bounds, race and wrap checks of every device stay).

fla-core comes from the ``upstream`` extra (``pip install .[upstream]``) and is imported, never copied.
Its calls take this project's layouts unchanged (``Calling()``'s defaults); on the cpu its ``around``
supplies only what a CPU lacks (``cpu_shims``) and never changes what the subject computes. Its one
knob, ``max_blocks``, lowers fla-ascend's own grid limit (``ASCEND_MAX_GRID_DIM``) for the call, so its
host-side launch splitting runs at small sizes; ``num_cores`` sets the core count its core-grid launches
see on the cpu. Their known defects (docs/findings-fla.md) are data here: each entry's file holds the
minimal case the suite found.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import types
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import torch

from .backends import BACKENDS, LaunchConfig
from .subjects import BWD_ARGS, GPU, Calling, Claims, Known, Subject, Target

FLA_DIST = "fla-core"
FLA_ASCEND_MODULE = "fla.ops.gated_delta_rule.backends.triton_ascend.wy_fast"
FLA_MODULE = "fla.ops.gated_delta_rule.wy_fast"
GRID_LIMIT = "ASCEND_MAX_GRID_DIM"  # fla-ascend's programs per grid launch, read by _launch_wy_kernel at each call
# The unified buffer fla-ascend plans its tiles for on the cpu, through its own override
# (ASCEND_UB_CAPACITY_BITS): the 192 KiB of an Atlas A2 (910B) AI core, the device its comments
# calibrate against ("BK=256 overflows 192KB UB"). Without it fla falls back to 64 KiB, a device
# that does not exist, and plans other tiles than on an NPU.
UB_CAPACITY_BITS = 192 * 1024 * 8
# AI cores the stub device reports on the cpu when the call sets none (``num_cores``): an 910B's 24.
CPU_CORES = 24


class _StubDriver:
    """The active Triton driver on a machine without a device, offering only what fla asks of one:
    ``get_benchmarker`` (its autotune decorators call it at import) and the device properties its
    Ascend launches read (``utils.get_device_properties``: the AI core count, all fla-core 0.6.0's
    WY kernels read of it)."""

    def __init__(self) -> None:
        self.cores = CPU_CORES
        self.utils = types.SimpleNamespace(get_device_properties=self._properties)

    def _properties(self, device: int) -> dict[str, int]:
        return {"num_aicore": self.cores}

    def get_benchmarker(self) -> Callable[..., Any]:
        return _untimed


def _untimed(fn: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
    """An autotuner's benchmark on the cpu, where no config is faster than another (the interpreter runs
    every config's program alike): every config takes 0, so it keeps its first, without running any."""
    return [0.0] * len(quantiles) if quantiles else 0.0


_STUB = _StubDriver()


@contextlib.contextmanager
def cpu_shims(num_cores: int | None = None) -> Iterator[None]:
    """What fla-core needs of a device that a CPU lacks, for the block only: the stub driver as
    Triton's active one (an autotuner's benchmark keeps its first config: ``_untimed``),
    ``torch.npu.current_device`` (where torch has no ``npu``), ``ASCEND_UB_CAPACITY_BITS`` (where
    unset), and the interpreter dropping every launch option of an autotuner's config.
    ``num_cores``: the AI cores its launches see."""
    from triton import Config
    from triton.runtime import driver, interpreter

    previous_driver = driver.active
    previous_reserved = list(interpreter.RESERVED_KWS)
    # An autotuner's config passes every launch option to the kernel; the interpreter drops only some
    # (RESERVED_KWS), and fla's configs reach it with the others (num_buffers_warp_spec, ...).
    interpreter.RESERVED_KWS[:] = sorted(set(previous_reserved) | set(Config({}).all_kwargs()))
    had_npu = hasattr(torch, "npu")
    previous_ub = os.environ.get("ASCEND_UB_CAPACITY_BITS")
    driver.set_active(_STUB)  # type: ignore[arg-type]
    _STUB.cores = num_cores or CPU_CORES
    if not had_npu:
        torch.npu = types.SimpleNamespace(current_device=lambda: 0)  # type: ignore[attr-defined]
    if previous_ub is None:
        os.environ["ASCEND_UB_CAPACITY_BITS"] = str(UB_CAPACITY_BITS)
    try:
        yield
    finally:
        driver.set_active(previous_driver)
        interpreter.RESERVED_KWS[:] = previous_reserved
        if not had_npu:
            del torch.npu  # type: ignore[attr-defined]
        if previous_ub is None:
            os.environ.pop("ASCEND_UB_CAPACITY_BITS", None)


@cache
def _fla_module(name: str, backend: str) -> types.ModuleType:
    """fla-core's module ``name``, imported for ``backend`` (on the cpu under ``cpu_shims``). Called inside the
    subject's context, which on the cpu loads the interpreter first, as for any declared subject
    (``Subject.context``)."""
    try:
        with cpu_shims() if backend == "cpu" else contextlib.nullcontext():
            return importlib.import_module(name)
    except ImportError as e:
        raise ImportError(f"subject on {backend!r} needs fla-core ({e}); install it with pip install '.[upstream]' "
                          f"(fla-core=={_FLA_VERSION})") from e


_FLA_VERSION = "0.6.0"


@contextlib.contextmanager
def _grid_limit(module: types.ModuleType, config: LaunchConfig | None) -> Iterator[None]:
    """fla-ascend's own grid limit lowered to ``config.max_blocks`` for the block (where set)."""
    limit = config.max_blocks if config is not None else None
    if limit is None:
        yield
        return
    if not hasattr(module, GRID_LIMIT):
        raise ValueError(f"knob max_blocks: {module.__name__} has no grid limit ({GRID_LIMIT}) to lower")
    previous = getattr(module, GRID_LIMIT)
    setattr(module, GRID_LIMIT, limit)
    try:
        yield
    finally:
        setattr(module, GRID_LIMIT, previous)


def _fla_around(module_name: str) -> Callable[[str, LaunchConfig | None], Any]:
    """fla-core's ``around``: on the cpu its shims (``num_cores`` the cores its stub device reports), on
    every backend its grid limit lowered to ``max_blocks`` where the call sets it."""
    @contextlib.contextmanager
    def around(backend: str, config: LaunchConfig | None) -> Iterator[None]:
        cores = config.num_cores if config is not None else None
        with cpu_shims(cores) if backend == "cpu" else contextlib.nullcontext():
            if config is None or config.max_blocks is None:
                yield
                return
            with _grid_limit(_fla_module(module_name, backend), config):
                yield
    return around


def _wy_ascend_op(name: str) -> Callable[..., Any]:
    def op(*args: Any, **kw: Any) -> Any:
        from . import ops

        return getattr(ops, name)(*args, **kw)
    op.__name__ = name
    return op


WY_ASCEND = Subject(
    "wy_ascend", _wy_ascend_op("recompute_w_u_fwd"), _wy_ascend_op("prepare_wy_repr_bwd"), tuple(BACKENDS),
    # every argument by keyword, as its ops name them (a test's mutant of an op reads them so)
    Calling(forward=(), backward=(), keywords={name: name for name in BWD_ARGS}, backend="backend", config="config"),
    Claims(), Target.for_triton_ascend("3.2", applied=False),
    distribution="wy_ascend", about="this project's ops")

# fla-ascend's claims, from its source: BT any power of two its UB model tiles (64 in fla's chunk
# path; 16 to 128 here), K and V any size (tiles of at least 8, boundary-checked; Claims' default
# dims: every size the fuzz draws), any integer head ratio, varlen with or without chunk_indices,
# gates in any float dtype. Its backward has no input_guard (the forward's makes arguments
# contiguous), but it claims nothing about views, so strided arguments are drawn: a wrong result
# from a view is a finding. It validates nothing.
FLA_ASCEND_CLAIMS = Claims(validates=False, knobs=("max_blocks", "num_cores"), zero_dead_A=True)
FLA_CLAIMS = Claims(validates=False, knobs=(), zero_dead_A=True)
_V = "0.6.0"
_STRIDED = "strided"
_NARROW_G = "use_g and g_dtype != 'float32'"

FLA_ASCEND = Subject(
    "fla-ascend", f"{FLA_ASCEND_MODULE}:recompute_w_u_fwd_npu", f"{FLA_ASCEND_MODULE}:prepare_wy_repr_bwd_npu",
    ("npu", "cpu"), Calling(), FLA_ASCEND_CLAIMS, Target.for_triton_ascend("3.2"), distribution=FLA_DIST,
    about=f"fla-core's Ascend kernels ({FLA_ASCEND_MODULE})", around=_fla_around(FLA_ASCEND_MODULE),
    known=(
        Known(_V, "oracle-b2acbef20dc8.json", "min(K, V) < 16", why="8-wide tiles: tl.dot needs 16"),
        Known(_V, "oracle-fe0763164a17.json", f"{_NARROW_G} and not varlen",
              why="a fixed batch's backward rounds exp2(g) to g's dtype"),
        Known(_V, "memory_layout-c6889efdbfaa.json", _STRIDED,
              why="the backward has no input_guard: views read as contiguous"),
        Known(_V, "bad_input-a16fbc8e67e5.json", None, frozenset({"bad_input"}), why="no argument is validated"),
        Known(_V, "widened_gates-7892ef11f294.json", None, frozenset({"widened_gates"}),
              why="dbeta, dg, dk summed across kernels in the output dtype"),
        Known(_V, "compiles-9f70b5da7a75.json", "not varlen or B * HV > max_blocks", frozenset({"compiles"}),
              why="NT_OFFSET/BH_OFFSET constexpr: a compile per launch chunk, but for a packed batch, whose chunks "
                  "it slices (NT_OFFSET stays 0), unless its B*HV heads split too"),
        Known(_V, "index_width-204dcbb35d06.json", "HV > 1 and (HV - 1) * T >= 2**31", frozenset({"index_width"}),
              why="the head-major gate base i_h * T_seq in int32"),
        Known(_V, "history-9ac938e3a912.json", "changes_in_place", frozenset({"history"}),
              why="chunk indices memoized on cu_seqlens' identity (fla.utils.tensor_cache): an in-place change "
                  "gets the old ones"),
    ))

FLA = Subject(
    "fla", f"{FLA_MODULE}:recompute_w_u_fwd", f"{FLA_MODULE}:prepare_wy_repr_bwd", ("cuda", "cpu"), Calling(),
    FLA_CLAIMS, GPU, distribution=FLA_DIST, about=f"fla-core's Triton kernels ({FLA_MODULE})",
    around=_fla_around(FLA_MODULE),
    known=(  # found by the cuda nightly's fla runs and a dev run on the cpu (docs/findings-fla.md)
        Known(_V, "oracle-ec988a9f0192.json", "dtype == 'float32'", frozenset({"oracle", "differential"}),
              why="float32 dots at TF32 (w and the backward's; u's at fp32)"),
        Known(_V, "memory_layout-9e527edf870c.json", _STRIDED,
              why="neither op has input_guard: views read as contiguous"),
        Known(_V, "widened_gates-259772790a3d.json", "use_g and dtype != 'float32'", frozenset({"widened_gates"}),
              why="w rounds k*beta to k's dtype before the gate factor"),
        Known(_V, "widened_gates-2663ec4dbc31.json", _NARROW_G, frozenset({"widened_gates"}),
              why="the backward's exp2 of g in g's dtype"),
        # the same cause past float16's dk bound on the device (g in float32: passes); the interpreter's dots hold it
        Known(_V, "differential-3e9f66b84eb4.json", f"{_NARROW_G} and dtype == 'float16'",
              frozenset({"oracle", "differential"}), frozenset({"cuda"}),
              why="the backward's exp2 of g in g's dtype, on cuda: float16 dk past its bound"),
        Known(_V, "bad_input-7d893b3a8690.json", None, frozenset({"bad_input"}), why="no argument is validated"),
        Known(_V, "linearity-36837c6b131e.json", "dtype == 'float16'", frozenset({"linearity"}),
              why="dA rounded to float16 between the dots: subnormals"),
        # by its likely cause (a 16- or 32-wide tile beside BT-wide dots, the mix triton 3.6 miscompiles) every
        # dim up to 32; the interpreter runs the kernels right
        Known(_V, "oracle-351afae366d1.json", "min(K, V) <= 32", None, frozenset({"cuda"}),
              why="an illegal memory access with K = V = 16 on triton 3.6 / sm_90"),
        # on the cpu the interpreter's GPU grid rule refuses the launch (tests/test_subjects.py)
        Known(_V, "oracle-b3dc7546df6d.json", "not varlen and B * HV > 65535",
              why="a grid of (NT, B * HV): a CUDA grid's second dimension holds 65,535 blocks"),
        Known(_V, "history-3a17b385d062.json", "changes_in_place", frozenset({"history"}), why="as fla-ascend's"),
        # (float16's 8x finer rounding is still drawn: the float32 mark above leaves the oracle nothing else)
        Known(_V, "oracle-7bd8126907c0.json", "dtype == 'bfloat16'", frozenset({"oracle"}),
              why="dA rounded to k's dtype between the backward's dots (the linearity file's cause): its accuracy "
                  "in bfloat16"),
    ))
