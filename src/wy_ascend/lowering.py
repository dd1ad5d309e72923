"""Lowering gate: lower every kernel specialization the npu and cuda backends can launch, on the CPU.

Every distinct constexpr combination is a separate compile, and a specialization that Triton's
frontend or ``triton-adapter-opt`` rejects only shows up on the first launch that draws it, on
the device. This module enumerates the specializations each backend can launch (tiles from the
same planner the ops use) and lowers each ahead of time with triton-ascend's own compiler
stages (no CANN needed; only the last stage, ``npubin``, needs ``bishengir-compile``): npu
specializations through the frontend, ``ttir`` and ``ttadapter``; cuda ones (their own flags:
LOWP_DOT for bf16 I/O, tiles >= 64, DOT_GUARD off, beta/g time-major) through
the frontend and ``ttir`` only (``ttadapter`` is Ascend's), which catches the frontend's type
errors (e.g. a jit helper whose returns differ in type) before a GPU does. It checks each npu
tile's modeled UB footprint against the capacity (cuda has no UB) and exits non-zero on any
failure, naming the backend, the kernel, the specialization and the compiler's message.

The enumeration (``enumerate_specs``, per backend ``backend_specs``) crosses the axes that
change the lowered program's structure (control flow, tensor shapes and element types, which
arguments exist): kernel, BT, USE_G, IS_VARLEN, GATE_HEAD_MAJOR, PERSISTENT (both backends
launch both shapes: LaunchConfig(mode=...)) and the I/O dtype; LOWP_DOT and DOT_GUARD are the
backend's (npu: False, True). K and V enter as the tiles BK/BV, the trip counts NK/NV and their
values (compile-time by default; with ``Backend.runtime_dims`` only where they fill their tiles,
else their alignment class), H and HV as compile-time row strides, beta/g's dtype and
cu_seqlens's as the element type of a load. These are covered along n specializations per
structural combination instead of crossed (their full product is ~60x larger, hours on a 2-core
CPU), and specs that compile the same program (``Spec.specialization``: same tiles, trip counts,
classes, flags, dtypes) are lowered once: with the representative dims d_0 < ... < d_n-1
(ODD_DIMS plus every tile width the planner can pick), specialization i has (K, V) =
(d_i, d_(i + 1) mod n) (neighbours: with 64, 80, 100 and 128 in a row, full and partial last tiles
meet in all four ways), and one more has SQUARE (the headline K = V = 128: both tiles full), and
with cuda's shared narrow tiles (``Backend.narrow_tiles``) one more (t, t) for each shared width t no
neighbour pair gives (K = V = 16),
(H, HV) the (i mod m)-th of the m ratios of HEADS with that GATE_HEAD_MAJOR, beta's dtype
FLOAT_DTYPES[i mod 3], g's FLOAT_DTYPES[(i // 3 + j) mod 3] with j the I/O dtype's index (all nine
pairs over the I/O dtypes: flash-linear-attention passes a float32 g with bfloat16 k and beta) and
cu_seqlens dtype INDEX_DTYPES[(i // m) mod 2] (each head ratio with both index dtypes).
So every K and V value (hence every tile BK/BV the planner picks; on cuda 64 and 128, bf16 with
LOWP_DOT in one and in several tile iterations) appears with every structural combination, and
every head ratio, gate dtype and index dtype with every combination of the other structural axes,
each index dtype there with every head ratio and every beta dtype. BT values whose tiles the npu
UB model cannot fit are reported as skipped.

Lowering runs in spawned worker processes (``--jobs``), which also keeps a compiler crash from
taking the gate down. Results that lowered are cached (JSON, keyed on kernels.py, the toolchain
and the specialization's label, which names its backend), so an unchanged tree re-checks in seconds.

Usage: ``python -m wy_ascend.lowering [--ub-bytes N] [--jobs N] [--cache-dir DIR] [--no-cache]
[--list] [--report FILE]``; ``--jobs`` defaults to the CPU count, at most 8.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import hashlib
import importlib
import inspect
import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import torch

from . import kernels as kernels_module
from .backends import BACKENDS, LaunchConfig, group_dk_min_programs
from .planning import MIN_TILE, UB_SAFETY_MARGIN, DeviceSpec, UnsupportedProblemError, next_power_of_2, plan, shared_narrow_dim
from .specialization import Specialization, cdiv, const_dim, int_class

# The target the npu backend compiles for (910B, A2); the arch only matters to npubin.
TARGET_ARCH = "Ascend910B3"
# Axes of the enumeration (module doc). ODD_DIMS are K/V sizes real models use plus
# non-power-of-two ones (partial tiles); every tile width the planner can pick is added to them.
BTS = (16, 32, 64, 128)
# 80: an aligned partial tile, 100: an unaligned one (int_class); 192: cuda's forward in three 64-wide tiles
# (Backend.halve_padded), two 128-wide ones elsewhere
ODD_DIMS = (16, 64, 80, 100, 128, 192, 256)
SQUARE = (128, 128)
# (H, HV): one head; grouped heads with G = HV // H a power of two (the key head i_h // G a shift) over one key
# head and not one (a division) over several; several heads ungrouped (tests/test_lowering.py holds these classes)
HEADS = ((1, 1), (1, 2), (2, 6), (4, 4))
FLOAT_DTYPES = ("float32", "bfloat16", "float16")
INDEX_DTYPES = ("int32", "int64")
TRITON_TYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int32": "i32", "int64": "i64"}
# Which dtype each pointer argument of the entry kernels has (the ops' contract, ops.py):
# "io" the I/O dtype, "gate" beta's, "g" g's, "dk" fp32 when HV > H without GROUP_DK (summed over
# heads later), "float32" dk_acc, "index" cu_seqlens's, "int64" chunk_indices. g/dg are None
# without USE_G, the varlen index None without IS_VARLEN, dk_acc None without GROUP_DK. An
# argument missing here fails the gate loudly.
ARG_DTYPES = {
    "k": "io", "v": "io", "A": "io", "w": "io", "u": "io", "dw": "io", "du": "io", "dv": "io",
    "dk": "dk", "dk_acc": "float32", "beta": "gate", "dbeta": "gate", "g": "g", "dg": "g",
    "cu_seqlens": "index", "chunk_indices": "int64",
}
OPTIONAL_ARGS = {"g": "USE_G", "dg": "USE_G", "cu_seqlens": "IS_VARLEN", "chunk_indices": "IS_VARLEN",
                 "dk_acc": "GROUP_DK"}
# The compiler stages lowered per backend: the npu backend's full CPU pipeline; for cuda only
# the stages Triton's frontend shares across targets (ttadapter is Ascend's).
STAGES = {"npu": ("ttir", "ttadapter"), "cuda": ("ttir",)}
# Under upstream Triton (``toolchain() == "upstream"``: a cuda environment, ``nox -s lower_cuda``) the
# cuda specializations go through NVIDIA's own frontend and passes for an H200 (sm_90) down to
# ttgir: upstream's frontend rejects code triton-ascend's accepts (session 9: a jit helper's str
# default, which failed every cuda compile on the H200). The npu ones need triton-ascend.
UPSTREAM_STAGES = ("ttir", "ttgir")
UPSTREAM_TARGET = ("cuda", 90, 32)
CACHE_VERSION = 2
CACHE_FILES_KEPT = 10
# The kernels lowered by default, as a reference the worker processes import.
KERNELS_REF = "wy_ascend.kernels:KERNELS"
MESSAGE_CHARS = 4000  # of each failure's message in the summary (--report keeps all of it)
CHUNK = 8  # specializations per worker task: amortizes IPC, keeps results streaming
# triton-adapter-opt 3.2.0 crashes now and then (SIGSEGV/SIGABRT in its triton-to-unstructure
# pass) on input that lowers on a rerun: 6 of 300 runs of one fwd specialization's TTIR, 1 of
# 150 of a bwd one. A lowering killed by a signal is retried this many times.
CRASH_RETRIES = 2
# One lowering takes well under a second (a few seconds on a loaded machine); past this the
# compiler is taken as hung, killed (subprocess.run kills its child on the exception) and the
# lowering retried like a crash.
LOWER_TIMEOUT_S = 120
# The entry kernels' constexprs, flags last (Spec.label prints them as 0/1).
FLAGS = ("USE_G", "IS_VARLEN", "GATE_HEAD_MAJOR", "LOWP_DOT", "DOT_GUARD", "PERSISTENT", "GROUP_DK")
CONSTEXPRS = ("H", "HV", "BT", "BK", "BV", "NK", "NV", "K_CONST", "V_CONST", *FLAGS)


@dataclass(frozen=True)
class Spec:
    """One specialization to lower, for ``backend`` (a key of STAGES): its representative runtime
    dims (K, V) and everything the compile is keyed on (``specialization``)."""

    kernel: str
    BT: int
    K: int
    V: int
    BK: int
    BV: int
    H: int
    HV: int
    USE_G: bool
    IS_VARLEN: bool
    GATE_HEAD_MAJOR: bool
    LOWP_DOT: bool
    DOT_GUARD: bool
    PERSISTENT: bool
    dtype: str
    gate_dtype: str
    g_dtype: str | None  # None without USE_G
    index_dtype: str | None  # cu_seqlens; None without IS_VARLEN
    footprint: int  # modeled UB bytes of one program (planning.ub_footprint); 0 without a UB
    backend: str = "npu"
    GROUP_DK: bool = False
    runtime_dims: bool = False  # K and V runtime arguments (Backend.runtime_dims)

    @property
    def label(self) -> str:
        flags = " ".join(f"{f}={int(getattr(self, f))}" for f in FLAGS)
        return (f"{self.backend} {self.kernel} BT={self.BT} K={self.K} V={self.V} BK={self.BK} BV={self.BV} "
                f"H={self.H} HV={self.HV} {flags} dtype={self.dtype} beta={self.gate_dtype} g={self.g_dtype or '-'} "
                f"cu_seqlens={self.index_dtype or '-'}"
                + (" runtime-dims" if self.runtime_dims else ""))

    @property
    def stages(self) -> tuple[str, ...]:
        return UPSTREAM_STAGES if toolchain() == "upstream" else STAGES[self.backend]

    @property
    def has_ub(self) -> bool:
        """Whether the backend has a unified buffer (footprint checked against it)."""
        return BACKENDS[self.backend].ub_bytes is not None

    @property
    def NK(self) -> int:
        return cdiv(self.K, self.BK)

    @property
    def NV(self) -> int:
        return cdiv(self.V, self.BV)

    @property
    def K_CONST(self) -> int:
        return const_dim(self.K, self.BK, not self.runtime_dims)

    @property
    def V_CONST(self) -> int:
        return const_dim(self.V, self.BV, not self.runtime_dims)

    @property
    def K_class(self) -> str:
        return int_class(self.K)

    @property
    def V_class(self) -> str:
        return int_class(self.V)

    @property
    def specialization(self) -> Specialization:
        """The compile this spec stands for (specialization.py), each field this spec's own
        attribute of that name: specs that share it lower the same program."""
        return Specialization(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Specialization)})

    def constants(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in CONSTEXPRS}

    def aligned(self) -> set[str]:
        """The class-specialized integer arguments that are multiples of 16 (the JIT's "D")."""
        return {n for n in kernels_module.CLASSED_ARGS if int_class(getattr(self, n)) == "D"}

    def arg_dtype(self, name: str) -> str | None:
        """The dtype of pointer argument ``name`` (None: passed as None)."""
        if name in OPTIONAL_ARGS and not getattr(self, OPTIONAL_ARGS[name]):
            return None
        if name not in ARG_DTYPES:
            raise KeyError(f"kernel argument {name!r} has no dtype rule in wy_ascend.lowering.ARG_DTYPES")
        role = ARG_DTYPES[name]
        if role == "dk":
            return "float32" if self.HV > self.H and not self.GROUP_DK else self.dtype
        return {"io": self.dtype, "gate": self.gate_dtype, "g": self.g_dtype, "index": self.index_dtype}.get(role, role)

    def signature(self, fn: Any) -> tuple[dict[str, str], dict[str, Any]]:
        """Triton signature and constants of ``fn`` for this specialization, as the JIT builds
        them at launch: runtime ints i32, None pointers ``*i8`` and constant None."""
        known = self.constants()
        signature: dict[str, str] = {}
        constants: dict[str, Any] = {}
        for p in fn.params:
            if p.is_constexpr:
                if p.name not in known:
                    raise KeyError(f"constexpr {p.name!r} of {fn.__name__} has no value in wy_ascend.lowering.Spec")
                signature[p.name] = "constexpr"
                constants[p.name] = known[p.name]
            elif p.name in kernels_module.RUNTIME_ARGS or p.name in kernels_module.CLASSED_ARGS:
                signature[p.name] = "i32"
            else:
                dtype = self.arg_dtype(p.name)
                signature[p.name] = "*i8" if dtype is None else "*" + TRITON_TYPES[dtype]
                if dtype is None:
                    constants[p.name] = None
        return signature, constants


@dataclass(frozen=True)
class Skip:
    """Specializations the UB model cannot tile (the planner refuses them before any launch)."""

    kernel: str
    BT: int
    count: int
    reason: str


@dataclass(frozen=True)
class Result:
    """Outcome of one specialization: status PASS, FLAKY (passed after a compiler crash), CACHED or
    FAIL, with the failing stage and the compiler's message (for FLAKY: the crash's)."""

    spec: Spec
    status: str
    seconds: float
    stage: str | None = None
    message: str = ""


def representative_dims(tile_cap: int) -> tuple[int, ...]:
    """ODD_DIMS plus every tile width the planner can pick (the powers of two from MIN_TILE to
    ``tile_cap``, the UB model's narrower tiles included), each a K/V value too (full tiles)."""
    tiles = {1 << n for n in range(MIN_TILE.bit_length() - 1, tile_cap.bit_length())}
    return tuple(sorted(set(ODD_DIMS) | tiles))


def narrow_squares(pairs: list[tuple[int, int]], dims: tuple[int, ...], spec: DeviceSpec) -> list[tuple[int, int]]:
    """(t, t) for each shared narrow tile width t (planning.shared_narrow_dim) that none of ``pairs`` plans."""
    def shared(K: int, V: int) -> int | None:
        dim = shared_narrow_dim(K, V, spec)
        return None if dim is None else next_power_of_2(dim)

    planned = {shared(k, v) for k, v in pairs}
    return [(t, t) for t in dims if shared(t, t) == t and t not in planned]


def enumerate_specs(ub_bytes: int | None = None) -> tuple[list[Spec], list[Skip]]:
    """Every specialization the npu and the cuda backend can launch (module doc), npu first, and
    the npu ones the UB model skips.

    ``ub_bytes`` overrides the npu backend's unified buffer size."""
    ub_bytes = ub_bytes or BACKENDS["npu"].ub_bytes
    npu, skips = backend_specs("npu", LaunchConfig(num_cores=1, ub_bytes=ub_bytes))
    cuda, _ = backend_specs("cuda", LaunchConfig(num_cores=1))  # no UB: nothing skipped
    return npu + cuda, skips


def backend_specs(backend: str, config: LaunchConfig) -> tuple[list[Spec], list[Skip]]:
    """The specializations ``backend`` launches under ``config`` (module doc), and those its UB
    model skips."""
    b = BACKENDS[backend]
    # Tiles come from the planner the ops call; num_cores given so no device is queried.
    device_spec = b.spec(torch.device("cpu"), config)
    dims = representative_dims(device_spec.tile_cap)
    # (K, V) pairs (module doc): the same for every structural combination below
    pairs = [(k, dims[(i + 1) % len(dims)]) for i, k in enumerate(dims)] + [SQUARE]
    pairs += narrow_squares(pairs, dims, device_spec)
    # head-major beta/g with several value heads, dk summed in the kernel or fp32 per value head for
    # grouped heads: the rules of ops.py
    head_majors = sorted({b.gate_head_major and hv > 1 for _, hv in HEADS})
    specs: list[Spec] = []
    seen: set[Specialization] = set()
    skipped: dict[tuple[str, int], list[str]] = {}
    for kernel, bt, use_g, varlen, head_major, dtype, persistent in itertools.product(
        kernels_module.KERNELS, BTS, (False, True), (False, True), head_majors, FLOAT_DTYPES, (True, False)
    ):
        heads = [(h, hv) for h, hv in HEADS if (b.gate_head_major and hv > 1) == head_major]
        for i, (k, v) in enumerate(pairs):
            h, hv = heads[i % len(heads)]
            try:
                p = plan(kernel, NT=1, BH=hv, BT=bt, K=k, V=v, spec=device_spec)
            except UnsupportedProblemError as e:
                skipped.setdefault((kernel, bt), []).append(str(e))
                continue
            # grouped heads: the backward's grouped-dk choice depends on the grid's size (Backend.groups_dk)
            sizes = (1, group_dk_min_programs(h, hv))
            for group_dk in sorted({kernel == "bwd" and b.groups_dk(config, h, hv, n) for n in sizes}):
                spec = Spec(
                    kernel=kernel, BT=bt, K=k, V=v, BK=p.BK, BV=p.BV, H=h, HV=hv, USE_G=use_g, IS_VARLEN=varlen,
                    GATE_HEAD_MAJOR=head_major, LOWP_DOT=b.lowp_dot(getattr(torch, dtype), k, v, p.BK, p.BV),
                    DOT_GUARD=b.dot_guard, GROUP_DK=group_dk,
                    PERSISTENT=persistent, dtype=dtype, gate_dtype=FLOAT_DTYPES[i % len(FLOAT_DTYPES)],
                    g_dtype=FLOAT_DTYPES[(i // 3 + FLOAT_DTYPES.index(dtype)) % 3] if use_g else None,
                    index_dtype=INDEX_DTYPES[(i // len(heads)) % len(INDEX_DTYPES)] if varlen else None,
                    footprint=p.ub_footprint if device_spec.ub_bytes is not None else 0, backend=backend,
                    runtime_dims=b.runtime_dims(config),
                )
                if spec.specialization not in seen:  # one lowering per compile (with runtime dims, K pairs share some)
                    seen.add(spec.specialization)
                    specs.append(spec)
    skips = [Skip(kernel, bt, len(reasons), reasons[0]) for (kernel, bt), reasons in skipped.items()]
    return specs, skips


# ----------------------------------------------------------------------------- lowering


@functools.cache
def toolchain() -> str:
    """"ascend" where the installed triton is triton-ascend's, else "upstream" (NVIDIA's backend)."""
    import importlib.util

    return "ascend" if importlib.util.find_spec("triton.backends.ascend") is not None else "upstream"


@functools.cache
def _toolchain() -> tuple[Any, Any, Any, dict[str, Callable[..., Any]]]:
    """(target, backend, options, stages) of triton-ascend's npu compiler, or under upstream Triton
    of its cuda compiler for UPSTREAM_TARGET, built once per process."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    target = GPUTarget("npu", TARGET_ARCH, 0) if toolchain() == "ascend" else GPUTarget(*UPSTREAM_TARGET)
    backend = make_backend(target)
    options = backend.parse_options({})
    stages: dict[str, Callable[..., Any]] = {}
    if toolchain() == "ascend":
        backend.add_stages(stages, options)
    else:
        from triton.backends.compiler import Language

        backend.add_stages(stages, options, Language.TRITON)
    return target, backend, options, stages


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in this (main) thread after ``seconds``; a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"lowering took longer than {seconds} s; the compiler was killed")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _capture_stderr() -> Iterator[Callable[[], str]]:
    """Redirect file descriptor 2 (where MLIR prints its diagnostics) into a temp file."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:

        def read() -> str:
            tmp.seek(0)
            return tmp.read().decode(errors="replace")

        os.dup2(tmp.fileno(), 2)
        try:
            yield read
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _error_text(e: BaseException) -> str:
    if isinstance(e, subprocess.CalledProcessError):
        out = b"".join(x for x in (e.stderr, e.output) if isinstance(x, bytes)).decode(errors="replace").strip()
        return f"{Path(str(e.cmd[0])).name} exited with status {e.returncode}:\n{out or '(no output)'}"
    return f"{type(e).__name__}: {e}"


def divisibility_hints(fn: Any, signature: dict[str, str], aligned: frozenset[str]) -> dict[int, int]:
    """Parameter index -> 16 for what the JIT would specialize as divisible by 16: every pointer
    (torch allocations are 16-byte aligned, and ops.py copies a view that is not) and the
    integers in ``aligned`` (multiples of 16: Spec.aligned)."""
    return {p.num: 16 for p in fn.params if signature.get(p.name, "").startswith("*") or p.name in aligned}


def lower(
    fn: Any, signature: dict[str, str], constants: dict[str, Any], stages: tuple[str, ...] = STAGES["npu"],
    aligned: frozenset[str] = frozenset(),
) -> tuple[str | None, str, bool]:
    """Lower ``fn`` through triton-ascend's frontend, then its compiler ``stages`` (of ``ttir``, ``ttadapter``).

    Returns (None, "", False) on success, else (stage, message, crashed) with the compiler's own
    diagnostics, ``crashed`` when a compiler process was killed by a signal or timed out; never
    raises for a compile error. Needs a process whose triton was imported without
    TRITON_INTERPRET=1 (see _Workers)."""
    from triton._C.libtriton import ir
    from triton.compiler.compiler import ASTSource

    target, backend, options, stage_fns = _toolchain()
    hints = divisibility_hints(fn, signature, aligned)
    if toolchain() == "ascend":
        from triton.backends.ascend.compiler import AscendAttrsDescriptor

        src = ASTSource(fn, signature, constants, AscendAttrsDescriptor.from_hints(hints))
        make_ir_args: tuple[Any, ...] = (options,)
        codegen = backend.get_codegen_implementation()
    else:  # upstream: constants and attributes keyed by parameter path, None arguments as constexprs
        index = {p.name: p.num for p in fn.params}
        signature = {name: "constexpr" if name in constants else ty for name, ty in signature.items()}
        src = ASTSource(fn, signature, {(index[n],): v for n, v in constants.items()},
                        {(i,): [["tt.divisibility", 16]] for i in hints})
        make_ir_args = (target, options)
        codegen = backend.get_codegen_implementation(options)
    # a fixed "hash": make_ttir would otherwise hash the printed module (slow, unused here)
    metadata = {"hash": "wy_ascend.lowering", "target": target, **options.__dict__}
    stage = "frontend"
    with _capture_stderr() as captured:
        try:
            with _deadline(LOWER_TIMEOUT_S):
                context = ir.context()
                ir.load_dialects(context)
                backend.load_dialects(context)
                module = src.make_ir(*make_ir_args, codegen, backend.get_module_map(), context)
                for stage in stages:
                    module = stage_fns[stage](module, metadata)
        except Exception as e:  # every compiler error is a reported failure, not a crash
            diagnostics = captured().strip()
            crashed = isinstance(e, TimeoutError) or (isinstance(e, subprocess.CalledProcessError) and e.returncode < 0)
            return stage, _error_text(e) + (f"\n{diagnostics}" if diagnostics else ""), crashed
    return None, "", False


def resolve_kernels(ref: str) -> dict[str, Any]:
    """The kernel dict named by ``ref`` ("module:attribute")."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def lower_spec(spec: Spec, kernels: str = KERNELS_REF) -> Result:
    """Lower one specialization of ``resolve_kernels(kernels)[spec.kernel]``, in this process."""
    start = time.perf_counter()
    try:
        fn = resolve_kernels(kernels)[spec.kernel]
        if not hasattr(fn, "params"):
            raise TypeError(f"{kernels}[{spec.kernel!r}] is a {type(fn).__name__}, not a JITFunction (was "
                            "TRITON_INTERPRET=1 set when triton was imported?)")
        signature, constants = spec.signature(fn)
    except Exception as e:  # a kernel module that does not import or does not match the spec
        return Result(spec, "FAIL", 0.0, "signature", f"{type(e).__name__}: {e}")
    aligned = frozenset(spec.aligned())
    stage, message, crashed = lower(fn, signature, constants, spec.stages, aligned)
    for _ in range(CRASH_RETRIES if crashed else 0):
        if lower(fn, signature, constants, spec.stages, aligned)[0] is None:
            return Result(spec, "FLAKY", time.perf_counter() - start, stage, message)
    return Result(spec, "FAIL" if stage else "PASS", time.perf_counter() - start, stage, message)


def _lower_chunk(specs: list[Spec], kernels: str) -> list[Result]:
    return [lower_spec(s, kernels) for s in specs]


class _Workers:
    """A pool of ``jobs`` spawned worker processes that never see TRITON_INTERPRET.

    Lowering needs a process whose triton was imported in compile mode (with TRITON_INTERPRET=1,
    even triton.language's own helpers such as tl.zeros become interpreter functions), and the
    cpu test suite sets it. Workers start on submit, so the variable is left out of the
    environment around each submit. Spawned, not forked: no inherited MLIR state."""

    def __init__(self, jobs: int) -> None:
        self.pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, specs: list[Spec], kernels: str) -> Future[list[Result]]:
        saved = os.environ.pop("TRITON_INTERPRET", None)
        try:
            return self.pool.submit(_lower_chunk, specs, kernels)
        finally:
            if saved is not None:
                os.environ["TRITON_INTERPRET"] = saved


def _lower_isolated(specs: list[Spec], kernels: str) -> Iterator[Result]:
    """One spec at a time in a one-worker pool, so a compiler crash names its specialization."""
    workers: _Workers | None = None
    for spec in specs:
        workers = workers or _Workers(1)
        try:
            yield workers.submit([spec], kernels).result()[0]
        except BrokenProcessPool:
            workers = None
            yield Result(spec, "FAIL", 0.0, "crash", "the lowering process died (a compiler crash) on this spec")
    if workers is not None:
        workers.pool.shutdown()


def lower_all(specs: list[Spec], jobs: int, kernels: str = KERNELS_REF) -> Iterator[Result]:
    """Lower ``specs`` in chunks across ``jobs`` worker processes, yielding results as they finish;
    the chunks of a pool that broke (a worker died) are retried one spec at a time."""
    broken: list[Spec] = []
    workers = _Workers(jobs)
    with workers.pool:
        chunks = [specs[i:i + CHUNK] for i in range(0, len(specs), CHUNK)]
        pending = {workers.submit(chunk, kernels): chunk for chunk in chunks}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                chunk = pending.pop(future)
                try:
                    yield from future.result()
                except BrokenProcessPool:
                    broken.extend(chunk)
    yield from _lower_isolated(broken, kernels)


# ----------------------------------------------------------------------------- cache


def _sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_salt() -> str:
    """Hash of what a lowering result depends on besides the spec: kernels.py (which imports nothing of the
    project) and the switch it reads (FP32_DOT_TF32X3), triton-ascend
    (frontend, language, passes: triton's own cache key; the adapter binary) and the compile options."""
    target, _, options, _ = _toolchain()
    if toolchain() == "ascend":
        from triton.backends.ascend.utils import _get_triton_adapter_opt_path
        from triton.compiler.compiler import triton_key

        tools = [_sha256_file(_get_triton_adapter_opt_path())]
    else:
        from triton.runtime.cache import triton_key  # where upstream 3.6 keeps it

        tools = []
    parts = [str(CACHE_VERSION), _sha256_file(inspect.getfile(kernels_module)), str(kernels_module.FP32_DOT_TF32X3),
             triton_key(), str(target), options.hash(), *tools]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class ResultCache:
    """Seconds of the specializations that lowered, by label (which names the backend, hence the
    stages run), in ``<dir>/<salt>.json``.

    Failures are never cached (they re-run, so a transient error cannot stick). Files of
    other salts beyond the newest CACHE_FILES_KEPT are removed when saving."""

    def __init__(self, directory: Path | None, salt: str) -> None:
        self.salt = salt
        self.path = directory / f"lowering-{salt[:32]}.json" if directory else None
        self.passed: dict[str, float] = {}
        if self.path and self.path.exists():
            with contextlib.suppress(OSError, ValueError):
                self.passed = {str(k): float(v) for k, v in json.loads(self.path.read_text()).items()}

    def get(self, spec: Spec) -> float | None:
        return self.passed.get(spec.label)

    def put(self, result: Result) -> None:
        if result.status in ("PASS", "FLAKY"):
            self.passed[result.spec.label] = round(result.seconds, 4)

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.passed, indent=0, sort_keys=True))
        tmp.replace(self.path)
        old = sorted(self.path.parent.glob("lowering-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in old[CACHE_FILES_KEPT:]:
            stale.unlink(missing_ok=True)


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wy_ascend" / "lowering"


# ----------------------------------------------------------------------------- run and report


def run(
    specs: list[Spec],
    *,
    jobs: int = 1,
    cache: ResultCache | None = None,
    kernels: str = KERNELS_REF,
    out: TextIO = sys.stdout,
) -> list[Result]:
    """Lower ``specs`` (cache hits reported as CACHED), printing one line per specialization.

    ``kernels`` names another kernel dict ("module:attribute", tests); the cache is then unused."""
    cache = cache if kernels == KERNELS_REF else None
    cached: list[Result] = []
    todo: list[Spec] = []
    for spec in specs:
        seconds = cache.get(spec) if cache else None
        if seconds is None:
            todo.append(spec)
        else:
            cached.append(Result(spec, "CACHED", seconds))
    results: list[Result] = []
    width = len(str(len(specs)))
    fresh = lower_all(todo, jobs, kernels) if todo else iter(())
    for r in itertools.chain(cached, fresh):
        results.append(r)
        if cache:
            cache.put(r)
        print(f"[{len(results):>{width}}/{len(specs)}] {r.status:<6} {r.seconds:6.3f}s  {r.spec.label}",
              file=out, flush=True)
        if r.status in ("FAIL", "FLAKY"):
            print(f"    {r.stage}: {r.message.splitlines()[0] if r.message else ''}", file=out, flush=True)
    if cache and cache.salt == cache_salt():
        cache.save()
    elif cache:
        print("kernels.py or the toolchain changed during the run: results not cached", file=out)
    return results


def _skip_line(s: Skip) -> str:
    return f"skipped by the UB model: {s.kernel} BT={s.BT} ({s.count} specializations): {s.reason}"


def _counts(specs: list[Spec]) -> str:
    """E.g. "npu 2352 (fwd 1344, bwd 1008) + cuda 1344 (fwd 672, bwd 672)"."""
    by_backend: dict[str, Counter[str]] = {}
    for spec in specs:
        by_backend.setdefault(spec.backend, Counter())[spec.kernel] += 1
    return " + ".join(f"{b} {sum(c.values())} ({', '.join(f'{k} {n}' for k, n in c.items())})"
                     for b, c in by_backend.items())


def summarize(results: list[Result], skips: list[Skip], ub_bytes: int, wall: float, jobs: int, out: TextIO) -> int:
    """Print the summary (counts per backend, UB skips, largest footprint, flaky crashes, every failure
    with its message); return the exit code: 1 on a failed lowering or a footprint over the UB budget
    (``ub_bytes``: the npu backend's; specializations of a backend without UB are not checked)."""
    budget = int(ub_bytes * UB_SAFETY_MARGIN)
    counts = Counter(r.status for r in results)
    with_ub = [r for r in results if r.spec.has_ub]
    over = [r for r in with_ub if r.spec.footprint > budget]
    failed = [r for r in results if r.status == "FAIL"]
    print("\n== lowering summary ==", file=out)
    print(f"specializations: {len(results)} = {_counts([r.spec for r in results])}; "
          f"passed {counts['PASS']}, flaky {counts['FLAKY']}, cached {counts['CACHED']}, failed {counts['FAIL']}; "
          f"{wall:.1f} s wall with {jobs} job(s)", file=out)
    for s in skips:
        print(_skip_line(s), file=out)
    if with_ub:
        top = max(with_ub, key=lambda r: r.spec.footprint)
        print(f"largest UB footprint: {top.spec.footprint} B of {budget} B ({ub_bytes} B x {UB_SAFETY_MARGIN}) "
              f"for {top.spec.label}", file=out)
    for r in over:
        print(f"UB OVERFLOW: {r.spec.label}: modeled footprint {r.spec.footprint} B > {budget} B", file=out)
    for r in results:
        if r.status == "FLAKY":
            print(f"FLAKY (passed on retry after [{r.stage}] {r.message.splitlines()[0]}): {r.spec.label}", file=out)
    for r in failed:
        message = r.message if len(r.message) <= MESSAGE_CHARS else r.message[:MESSAGE_CHARS] + "\n[... cut: --report]"
        print(f"\nFAILED [{r.stage}] {r.spec.label}\n{message}", file=out)
    ok = not failed and not over
    print(f"\nlowering gate: {'OK' if ok else 'FAILED'}", file=out)
    return 0 if ok else 1


def write_report(path: Path, results: list[Result], skips: list[Skip], ub_bytes: int) -> None:
    """Machine-readable results (CI artifact)."""
    doc = {
        "ub_bytes": ub_bytes,
        "results": [{**dataclasses.asdict(r.spec), "label": r.spec.label, "status": r.status,
                     "seconds": r.seconds, "stage": r.stage, "message": r.message} for r in results],
        "skipped": [dataclasses.asdict(s) for s in skips],
    }
    path.write_text(json.dumps(doc, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wy_ascend.lowering", description=__doc__.splitlines()[0])
    parser.add_argument("--ub-bytes", type=int, default=BACKENDS["npu"].ub_bytes,
                        help="unified buffer bytes per core for tile sizing (default: the npu backend's)")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="worker processes")
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(), help="cache of passed lowerings")
    parser.add_argument("--no-cache", action="store_true", help="lower everything, read and write no cache")
    parser.add_argument("--list", action="store_true", help="print the specializations and exit")
    parser.add_argument("--report", type=Path, help="write every result as JSON to this file")
    args = parser.parse_args(argv)
    if args.ub_bytes is None or args.ub_bytes < 1 or args.jobs < 1:
        parser.error("--ub-bytes and --jobs must be positive")
    specs, skips = enumerate_specs(args.ub_bytes)
    if toolchain() == "upstream":  # NVIDIA's compiler: the cuda specializations only (the npu ones need triton-ascend)
        specs, skips = [s for s in specs if s.backend == "cuda"], []
    if args.list:
        for spec in specs:
            print(spec.label)
        for s in skips:
            print(_skip_line(s))
        print(f"{len(specs)} specializations = {_counts(specs)}, {sum(s.count for s in skips)} skipped by the UB model")
        return 0
    import triton

    cache = None if args.no_cache else ResultCache(args.cache_dir, cache_salt())
    target = f"npu {TARGET_ARCH}" if toolchain() == "ascend" else f"cuda sm_{UPSTREAM_TARGET[1]} (stages {UPSTREAM_STAGES})"
    name = "triton-ascend" if toolchain() == "ascend" else "triton"
    print(f"{name} {triton.__version__}, target {target}, ub_bytes {args.ub_bytes}, "
          f"jobs {args.jobs}, cache {cache.path if cache else 'off'}; {len(specs)} specializations = {_counts(specs)}",
          flush=True)
    start = time.perf_counter()
    results = run(specs, jobs=args.jobs, cache=cache)
    code = summarize(results, skips, args.ub_bytes, time.perf_counter() - start, args.jobs, sys.stdout)
    if args.report:
        write_report(args.report, results, skips, args.ub_bytes)
    return code


if __name__ == "__main__":
    sys.exit(main())
