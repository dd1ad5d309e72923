"""Subjects: the implementations of the two ops the fuzz suite can test.

A subject is one implementation of ``recompute_w_u_fwd`` and ``prepare_wy_repr_bwd``: a name, its
version, the two callables (this project's argument conventions: k [B,T,H,K], v [B,T,HV,V],
beta and g [B,T,HV], A [B,T,HV,BT], dw [B,T,HV,K], du [B,T,HV,V], optional cu_seqlens and
chunk_indices; keyword ``backend`` and ``config``), the backends it runs on and what it claims to
support (``Claims``). The fuzz strategies draw only what a subject claims, so every failure is a
defect of the subject, not a call it never promised to take.

Built in:

* ``wy_ascend``: this project's ops (the default).
* ``fla-ascend``: flash-linear-attention's Ascend kernels, fla-core's
  ``fla/ops/gated_delta_rule/backends/triton_ascend/wy_fast.py`` (``recompute_w_u_fwd_npu``,
  ``prepare_wy_repr_bwd_npu``): on ``npu`` natively, on ``cpu`` under triton-ascend's
  interpreter (with this project's Ascend emulation, interpreter.py).
* ``fla``: fla-core's Triton kernels for GPUs, ``fla/ops/gated_delta_rule/wy_fast.py``, on ``cuda``,
  and on ``cpu`` under the interpreter without the Ascend emulation (a GPU's dots do not clobber;
  the out-of-bounds, race and wrap checks of every device stay).

fla-core comes from the ``upstream`` extra (``pip install .[upstream]``) and is imported, never
copied. The adapter (``_fla_calls``) passes the arguments through in fla's layouts (the same as
this project's) and, on the cpu, supplies only what a CPU lacks (``cpu_shims``); it never changes
what the subject computes. Its one knob, ``max_blocks``, lowers fla-ascend's own grid limit
(``ASCEND_MAX_GRID_DIM``) for the call, so its host-side launch splitting runs at small sizes;
``num_cores`` sets the core count its core-grid launches see on the cpu.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any

import torch

from .backends import BACKENDS, LaunchConfig, check_available, kernel_for

DEFAULT = "wy_ascend"
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

Forward = Callable[..., tuple[torch.Tensor, torch.Tensor]]
Backward = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]]


@dataclass(frozen=True)
class Claims:
    """What a subject claims to support; the fuzz strategies draw nothing else for it.

    ``dims``: the K and V it takes (inclusive range); ``pow2_dims``: only powers of two in it.
    ``head_ratios``: the HV/H it takes (None: any integer ratio); ``varlen``: packed batches (with or
    without chunk_indices). ``gate_dtypes``: beta and g may
    have a dtype other than k's. ``strided``: arguments may be non-contiguous views. ``validates``:
    a malformed call raises a TypeError/ValueError naming the argument (bad_input holds it to that).
    ``knobs``: the launch knobs it takes (``LaunchConfig`` fields). ``zero_dead_A``: it reads A's
    columns past a partial chunk's end and needs them zero, as fla's own ``solve_tril`` writes them
    (this project's ops never read them; the suite fills them with NaN for its own subject)."""

    dtypes: tuple[str, ...] = ("float32", "bfloat16", "float16")
    chunk_sizes: tuple[int, ...] = (16, 32, 64, 128)
    dims: tuple[int, int] = (1, 256)
    pow2_dims: bool = False
    head_ratios: tuple[int, ...] | None = None
    varlen: bool = True
    gate_dtypes: bool = True
    strided: bool = True
    validates: bool = True
    knobs: tuple[str, ...] | None = None  # None: every LaunchConfig knob
    zero_dead_A: bool = False

    def takes(self, knob: str) -> bool:
        """Whether the subject takes launch knob ``knob`` (``knobs``; None: every one)."""
        return self.knobs is None or knob in self.knobs


@dataclass(frozen=True)
class Subject:
    """One implementation of the two ops (module doc)."""

    name: str
    backends: tuple[str, ...]
    claims: Claims
    _calls: Callable[[str], tuple[Forward, Backward]]
    _version: Callable[[], str | None]
    about: str = ""

    @property
    def foreign(self) -> bool:
        """Not this project's ops: the properties tied to its internals skip it."""
        return self.name != DEFAULT

    @property
    def version(self) -> str | None:
        return self._version()

    def check(self, backend: str) -> None:
        """BackendUnavailableError/ValueError where the subject cannot run on ``backend`` here."""
        if backend not in self.backends:
            raise ValueError(f"subject {self.name!r} runs on the backends {list(self.backends)}, not {backend!r}")
        check_available(BACKENDS[backend])

    def ops(self, backend: str) -> tuple[Forward, Backward]:
        """(forward, backward) on ``backend``: ``forward(k, v, beta, A, g=None, cu_seqlens=None,
        chunk_indices=None, *, config=None) -> (w, u)``, ``backward(k, v, beta, A, dw, du, g=None,
        cu_seqlens=None, chunk_indices=None, *, config=None) -> (dk, dv, dbeta, dg)``."""
        self.check(backend)
        return self._calls(backend)


def _wy_ascend_calls(backend: str) -> tuple[Forward, Backward]:
    from .ops import prepare_wy_repr_bwd, recompute_w_u_fwd

    def forward(*args: Any, config: LaunchConfig | None = None, **kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return recompute_w_u_fwd(*args, backend=backend, config=config, **kw)

    def backward(*args: Any, config: LaunchConfig | None = None, **kw: Any) -> Any:
        return prepare_wy_repr_bwd(*args, backend=backend, config=config, **kw)
    return forward, backward


def _version(dist: str) -> Callable[[], str | None]:
    def version() -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None
    return version


class _StubDriver:
    """The active Triton driver on a machine without a device, offering only what fla asks of one:
    ``get_benchmarker`` (its autotune decorators call it at import) and the device properties its
    Ascend launches read (``utils.get_device_properties``: the AI core counts)."""

    def __init__(self) -> None:
        self.cores = CPU_CORES
        self.utils = types.SimpleNamespace(get_device_properties=self._properties)

    def _properties(self, device: int) -> dict[str, int]:
        return {"num_aicore": self.cores, "num_vectorcore": 2 * self.cores}

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
    """fla-core's module ``name``, imported for ``backend`` (on the cpu: the interpreter loaded first,
    then fla under ``cpu_shims``)."""
    if backend == "cpu":
        kernel_for(BACKENDS["cpu"], "fwd")  # TRITON_INTERPRET and the Ascend emulation, before fla imports triton
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


def _fla_calls(module_name: str, fwd: str, bwd: str, ascend: bool) -> Callable[[str], tuple[Forward, Backward]]:
    """The calls of fla-core's ``fwd``/``bwd`` in ``module_name``; on the cpu under the shims, with the
    Ascend emulation for Ascend kernels (``ascend``) and without it for GPU kernels, whose dots do not
    clobber (the rules of every device stay: interpreter.py)."""
    def calls(backend: str) -> tuple[Forward, Backward]:
        module = _fla_module(module_name, backend)
        forward_fn, backward_fn = getattr(module, fwd), getattr(module, bwd)

        @contextlib.contextmanager
        def around(config: LaunchConfig | None) -> Iterator[None]:
            cores = config.num_cores if config is not None else None
            if backend != "cpu":
                with _grid_limit(module, config):
                    yield
                return
            from .interpreter import ascend_semantics

            with cpu_shims(cores), ascend_semantics(ascend), _grid_limit(module, config):
                yield

        def forward(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, A: torch.Tensor,
                    g: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None,
                    chunk_indices: torch.Tensor | None = None, *, config: LaunchConfig | None = None) -> Any:
            with around(config):
                return forward_fn(k, v, beta, A, g=g, cu_seqlens=cu_seqlens, chunk_indices=chunk_indices)

        def backward(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, A: torch.Tensor, dw: torch.Tensor,
                     du: torch.Tensor, g: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None,
                     chunk_indices: torch.Tensor | None = None, *, config: LaunchConfig | None = None) -> Any:
            with around(config):
                return backward_fn(k, v, beta, A, dw, du, g=g, cu_seqlens=cu_seqlens, chunk_indices=chunk_indices)
        return forward, backward
    return calls


# fla-ascend's claims, from its source: BT any power of two its UB model tiles (64 in fla's chunk
# path; 16 to 128 here), K and V any size (tiles of at least 8, boundary-checked), any integer head
# ratio, varlen with or without chunk_indices, gates in any float dtype. Its backward has no
# input_guard (the forward's makes arguments contiguous), but it claims nothing about views, so
# strided arguments are drawn: a wrong result from a view is a finding. It validates nothing.
FLA_ASCEND_CLAIMS = Claims(dims=(1, 256), validates=False, knobs=("max_blocks", "num_cores"), zero_dead_A=True)
FLA_CLAIMS = Claims(dims=(1, 256), validates=False, knobs=(), zero_dead_A=True)

SUBJECTS: dict[str, Subject] = {
    s.name: s for s in (
        Subject(DEFAULT, tuple(BACKENDS), Claims(), _wy_ascend_calls, _version("wy_ascend"),
                "this project's ops"),
        Subject("fla-ascend", ("npu", "cpu"), FLA_ASCEND_CLAIMS,
                _fla_calls(FLA_ASCEND_MODULE, "recompute_w_u_fwd_npu", "prepare_wy_repr_bwd_npu", ascend=True),
                _version(FLA_DIST), f"fla-core's Ascend kernels ({FLA_ASCEND_MODULE})"),
        Subject("fla", ("cuda", "cpu"), FLA_CLAIMS,
                _fla_calls(FLA_MODULE, "recompute_w_u_fwd", "prepare_wy_repr_bwd", ascend=False),
                _version(FLA_DIST), f"fla-core's Triton kernels ({FLA_MODULE})"),
    )
}


# The foreign subject of each platform: wy_ascend's peer in the differential property (testing/properties).
PLATFORM_PEERS = {"cpu": "fla-ascend", "npu": "fla-ascend", "cuda": "fla"}


def peer(name: str, backend: str) -> Subject | None:
    """The other implementation of the ops that runs on ``backend``: a foreign subject's is wy_ascend,
    wy_ascend's is fla-core's kernels of that platform (``PLATFORM_PEERS``) where fla-core is installed;
    None where there is none."""
    other = get(DEFAULT) if get(name).foreign else SUBJECTS.get(PLATFORM_PEERS.get(backend, ""))
    if other is None or backend not in other.backends or (other.foreign and other.version is None):
        return None
    return other


def get(name: str | None) -> Subject:
    """The subject called ``name`` (None: the default); ValueError naming the known ones."""
    subject = SUBJECTS.get(name or DEFAULT)
    if subject is None:
        raise ValueError(f"subject must be one of {sorted(SUBJECTS)}, got {name!r}")
    return subject

