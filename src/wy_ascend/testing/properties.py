"""Properties the fuzz suite checks on a case; each returns metrics or raises PropertyFailure.

Tolerances (relative RMS error, ||out - ref|| / ||ref||, against the float64 oracle
evaluated on the very inputs the kernel saw, i.e. with the given, rounded A):

* float32: 1e-5. The kernels compute in fp32 (exact fp32 dot operands): each output is a
  chain of at most three dots of <= 256 terms (unit roundoff 6e-8, so ~1e-6 worst-case
  growth per chain), measured 1e-7 to 4e-7 on realistic inputs; docs/design.md section 2: 1e-5
  on strongly gated adversarial inputs, hence the bound.
* bfloat16 / float16: the irreducible error is the rounding of each output to the
  dtype. ``err <= 4 * max(round_err, u / 2)`` where ``round_err`` is the relative RMS
  error of the exact result rounded (to nearest) to the dtype and ``u`` the unit
  roundoff (2**-8, 2**-11): fp32 arithmetic inside adds orders of magnitude less; the
  bf16 dot operands of the cuda backend (bf16 I/O only) add at most 0.61x the bound in
  a float64 emulation over every input distribution, so 4x leaves room for both. The floor ``u / 2`` (so a bound of at
  least 2u, one ulp) covers tensors of a few elements whose exact values happen to be
  nearly representable, where round_err says little: triton-ascend's interpreter
  converted fp32 to bf16 by truncation, off by up to one ulp (found by the fuzzer:
  regressions/oracle-72a9ba7cd5ae.json, a single dbeta one ulp off); the cpu backend now
  rounds to nearest like the devices (interpreter.py), and the floor stays for such tensors.

Each bound holds for a whole output and, with its terms measured on the block, for every block
(a chunk and a head: the WY step's unit of work), so an error confined to a few rows of a large
case cannot hide in the whole output's norm (``_worst_block``; below float32 a block's bound is
``BLOCK_SLACK`` = 2x the formula: a block of a few elements does not average its roundings).

Launch knobs that only re-partition work (block limit, cores, mode, tasks per launch) and
the kernel-variant knobs (dot_guard, gate_head_major, emulate) must not change a single bit;
knobs that change tile widths (ub_bytes, tile_cap) change summation order and are checked
against the oracle only. Every run of the ops checks that each knob reached the launch
(``_launched_as_asked``): otherwise a dropped knob would make those comparisons compare a launch
with itself.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import torch

from .. import reference, subjects
from ..backends import BACKENDS, Backend, LaunchConfig, _given, check_available, device_spec, resolve_backend
from ..layout import prepare_chunk_indices
from ..ops import observed
from ..planning import MIN_TILE, UB_SAFETY_MARGIN, DeviceSpec, UnsupportedProblemError, batch_heads, plan, program_tasks
from ..subjects import Subject
from ..validation import SUPPORTED_BT
from . import rng
from .case import Case, Inputs, float64_device
from .failure import Metrics, PropertyFailure
from .phases import phase
from .scaling import check_compiles, check_index_width

T = TypeVar("T")

FP32_RTOL = 1e-5
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24}
LOW_PRECISION_FACTOR = 4.0
BLOCK_SLACK = 2.0  # the block bound's factor over the whole-output formula below float32 (_worst_block)
# Knobs that re-partition the same work, or pick a kernel variant (operand reloads, the beta/g
# layout, the Ascend emulation's bookkeeping), without changing any arithmetic.
PARTITION_KNOBS = ("max_blocks", "num_cores", "mode", "max_tasks", "dot_guard", "gate_head_major", "emulate")
DEVICE_OF = {"cpu": "cpu", "cuda": "cuda", "npu-cuda": "cuda", "npu": "npu"}
FWD_NAMES = ("w", "u")
BWD_NAMES = ("dk", "dv", "dbeta", "dg")


def backend_name(case: Case) -> str:
    return case.backend or "cpu"


def device_of(case: Case) -> torch.device:
    """The device of the case's backend; BackendUnavailableError (with the reason) where that
    backend cannot run, before ``torch.device("npu")`` fails without torch_npu."""
    name = backend_name(case)
    check_available(BACKENDS[name])
    return torch.device(DEVICE_OF[name])


# The UB model, restated here from the kernels' live fp32 buffers (kernels.py) on purpose: it
# is what the planner is checked against, so it must not be the planner's own code. Per
# kernel, (BT x BT matrices, BT x tile buffers) alive in one program; the forward holds A and
# 4 tile buffers, the backward A, dA, k k^T, dL and 6 tile buffers.
LIVE_FP32 = {"fwd": (1, 4), "bwd": (4, 6)}


def ub_need(kernel: str, BT: int, tile: int) -> int:
    """Bytes of unified buffer one program of ``kernel`` needs with chunk BT and a K/V tile width."""
    mats, tiles = LIVE_FP32[kernel]
    return 4 * (mats * BT * BT + tiles * BT * tile)


def widest_tile(kernel: str, BT: int, dim: int, tile_cap: int, ub_bytes: int | None, min_tile: int = MIN_TILE) -> int:
    """The widest power-of-two tile, at least MIN_TILE, over a K or V axis of ``dim`` that the
    UB model fits (``ub_need`` within the margin), capped by ``tile_cap`` and by ``dim`` rounded up
    to a power of two or ``min_tile`` if that is wider (a device's padded width): what the planner
    must pick (a narrower tile is only slower)."""
    top = max(MIN_TILE, min(tile_cap, max(min_tile, 1 << max(0, dim - 1).bit_length())))
    tiles = [t for t in (MIN_TILE << n for n in range(8)) if t <= top]
    return max((t for t in tiles if ub_bytes is None or ub_need(kernel, BT, t) <= ub_bytes * UB_SAFETY_MARGIN),
               default=MIN_TILE)


def plannable(kernel: str, BT: int, ub_bytes: int | None) -> bool:
    """Whether a plan of ``kernel`` exists: BT is supported and, with a UB, the narrowest tile
    (MIN_TILE, what every dot needs) fits the capacity the planner may use (UB_SAFETY_MARGIN)."""
    return BT in SUPPORTED_BT and (ub_bytes is None or ub_need(kernel, BT, MIN_TILE) <= ub_bytes * UB_SAFETY_MARGIN)


def plan_spec(case: Case) -> DeviceSpec:
    """The spec a case plans with: its device's (``Case.device``) or its backend's with 4 cores,
    under the case's knobs (no device is queried)."""
    if case.device is not None:
        return device_spec(case.device, case.config())
    return BACKENDS[backend_name(case)].spec(torch.device("cpu"), case.config(num_cores=case.knobs.get("num_cores") or 4))


def supported(case: Case) -> bool:
    """Whether both kernels of the case can be planned, by the model (``plannable``), not by
    asking the planner: a planner that wrongly refuses must fail a property, not narrow the draws."""
    ub = plan_spec(case).ub_bytes
    return all(plannable(kernel, case.BT, ub) for kernel in LIVE_FP32)


def _norms(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """``[out all finite, ||out - ref||, ||ref||]`` in float64 on ``float64_device``, left there:
    a comparison gathers these and reads them all in one transfer (``_read``), not one per output."""
    device = float64_device(out.device)
    out, ref = out.detach().to(device, torch.float64), ref.detach().to(device, torch.float64)
    return torch.stack((torch.isfinite(out).all().to(torch.float64), torch.linalg.vector_norm(out - ref),
                        torch.linalg.vector_norm(ref)))


def _ratio(finite: float, diff: float, scale: float) -> float:
    """rel_rms from ``_norms`` read on the host."""
    if not finite:
        return math.inf
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def _read(rows: list[torch.Tensor]) -> list[list[float]]:
    """The host values of 1-D tensors, in one device-to-host transfer (a row on the host, after an
    out-of-memory fallback, is first moved to the first row's device)."""
    if not rows:
        return []
    flat = torch.cat([r.to(rows[0].device, torch.float64) for r in rows]).tolist()
    ends = torch.tensor([r.numel() for r in rows]).cumsum(0).tolist()
    return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def rel_rms(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; 0 when both are zero, inf on any NaN."""
    return _ratio(*_read([_norms(out, ref)])[0])


def _bound(dtype: str, round_err: float, sensitivity: float) -> float:
    """The bound on rel_rms for an output of ``dtype``, given its rounding error ``round_err``
    (rel_rms of the exact output rounded to ``dtype``) and ``sensitivity`` (``error_bounds``).

    float32: FP32_RTOL. bf16/fp16: LOW_PRECISION_FACTOR times the larger of the output's own
    rounding error and half an ulp, or ``sensitivity`` if that is larger: how far the exact
    output moves when its multiplicands move by half an ulp. An error below that is one the
    problem's conditioning makes of the roundings any kernel in ``dtype`` does. It matters for
    ill-conditioned inputs (repeated keys, where ``w = A (k*beta)`` cancels: there a kernel that
    rounds ``k*beta`` to a bf16 dot operand, as fla's does and the cuda backend's LOWP_DOT does,
    is off by more than 4x half an ulp; a nightly H200 find matched a float64 emulation of those
    roundings to 4 digits, at 0.52x its sensitivity; tests/test_lowp_dot_error.py). On the
    emulation test's case it is 0.3-0.9x the first term for every input distribution, so there
    the bound is what it was. The rounding error exceeds half an ulp only where the output
    underflows (or overflows) ``dtype``.
    """
    if dtype == "float32":
        return FP32_RTOL
    return max(LOW_PRECISION_FACTOR * max(round_err, UNIT_ROUNDOFF[dtype] / 2), sensitivity)


NUDGED = ("k", "v", "beta", "A", "dw", "du")  # what the kernels multiply (g only enters through exp2)


Precisions = dict[str, tuple[str, ...]]  # per output: the dtypes below float32 whose bound applies


def precisions(dtype: str, out_dtypes: dict[str, str]) -> Precisions:
    """Per output: the dtypes whose bound it is held to, those below float32 (none: FP32_RTOL). One
    is the op's I/O dtype ``dtype`` (k's: the dot operands and every rounding inside), one the
    output's own (its last rounding: dbeta, dg take beta's and g's dtypes, which may differ). The
    bound is the larger: an output rounded to its own dtype is off by that rounding whatever the
    op computed in, and one computed from ``dtype``'s operands by their roundings whatever it is
    stored in (a float32 dg of the cuda backend's bf16-operand dots)."""
    return {name: tuple(d for d in dict.fromkeys((dtype, own)) if d != "float32") for name, own in out_dtypes.items()}


def _moved(inputs: Inputs, precs: Precisions) -> dict[str, dict[str, torch.Tensor | None]]:
    """``nudged_outputs`` in each dtype some bound uses (below float32)."""
    return {d: nudged_outputs(inputs, d) for d in sorted({d for ds in precs.values() for d in ds})}


def _bound_rows(ref: dict[str, torch.Tensor], moved: dict[str, dict[str, torch.Tensor | None]],
                precs: Precisions) -> list[torch.Tensor]:
    """``_norms`` rows of the bounds of the exact outputs ``ref``: per output and dtype of its
    ``precs``, its rounding to that dtype, then its ``moved`` (nudged) value in it. Both relative
    to the exact output, like the error they bound."""
    return [row for name, r in ref.items() for d in precs[name]
            for row in (_norms(r.to(getattr(torch, d)), r), _norms(moved[d][name], r))]  # type: ignore[arg-type]


def _bounds(precs: Precisions, ratios: list[float]) -> list[dict[str, float]]:
    """Per output of ``precs``: ``tol`` and, below float32, the ``round_err`` and ``sensitivity``
    of the dtype whose bound is largest (its name as ``bound_dtype`` where there are two), from the
    ratios of ``_bound_rows``."""
    out: list[dict[str, Any]] = []
    at = 0
    for dtypes in precs.values():
        terms = []
        for d in dtypes:
            round_err, sensitivity = ratios[at], ratios[at + 1]
            at += 2
            terms.append({"tol": _bound(d, round_err, sensitivity), "round_err": round_err, "sensitivity": sensitivity,
                          **({"bound_dtype": d} if len(dtypes) > 1 else {})})
        out.append(max(terms, key=lambda t: t["tol"]) if terms else {"tol": FP32_RTOL})
    return out


def error_bounds(inputs: Inputs, ref: dict[str, torch.Tensor], dtype: str,
                 out_dtypes: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    """Per output of ``ref`` (the exact outputs of ``inputs``): the bound ``compare_to_oracle``
    puts on its rel_rms (``tol``) and its terms (``_bounds``), for an op in ``dtype`` whose
    outputs have ``out_dtypes`` (default: ``dtype``)."""
    precs = precisions(dtype, {name: (out_dtypes or {}).get(name, dtype) for name in ref})
    ratios = [_ratio(*row) for row in _read(_bound_rows(ref, _moved(inputs, precs), precs))]
    return dict(zip(ref, _bounds(precs, ratios), strict=True))


def nudged_outputs(inputs: Inputs, dtype: str) -> dict[str, torch.Tensor | None]:
    """The exact outputs of the inputs with each element of ``NUDGED`` moved by half an ulp of
    ``dtype`` (``x * (1 +- u/2)``, random signs from ``rng``, seed 0: the same on every device).
    Float64 on ``float64_device``, on the host when that is out of memory."""
    half_ulp = UNIT_ROUNDOFF[dtype] / 2

    def nudged_oracle(device: torch.device) -> dict[str, torch.Tensor | None]:
        xs = [getattr(inputs, name) for name in NUDGED]
        signs = rng.uniform(0, [(i, tuple(x.shape)) for i, x in enumerate(xs)], device)  # stream i: NUDGED[i]
        return _oracle_on(inputs._replace(**{
            name: x.to(device, torch.float64) * torch.where(u < 0.5, 1 + half_ulp, 1 - half_ulp)
            for name, x, u in zip(NUDGED, xs, signs)}), device)

    return _on_float64_device(nudged_oracle, inputs.k.device)


def build_inputs(case: Case) -> Inputs:
    """The case's inputs on its backend's device (the ``inputs`` phase)."""
    with phase("inputs"):
        return case.build_inputs(device_of(case))


def subject_of(case: Case) -> Subject:
    return subjects.get(case.subject)


def run_ops(case: Case, inputs: Inputs, **knob_overrides: Any) -> dict[str, torch.Tensor | None]:
    """Forward and backward of the case's subject on its backend (arguments in the case's memory
    layouts, with chunk_indices if it passes them: ``Case.arguments``); outputs by name. Every
    property that runs the ops checks through here that they leave their arguments alone
    (``_untouched``), return each output in its dtype and, for this project's ops, launch what the
    case and knobs ask for (``_launched_as_asked``)."""
    asked = case.replace(knobs={k: v for k, v in {**case.knobs, **knob_overrides}.items() if v is not None})
    backend, config = backend_name(case), asked.config()
    with phase("inputs"):
        args = case.arguments(inputs)
        before = _storages(args)
    dw, du = args.pop("dw"), args.pop("du")
    seen: dict[str, Seen] = {"fwd": [], "bwd": []}
    forward, backward = subject_of(case).ops(backend)
    with phase("kernel"), observed(lambda *launch: seen["fwd"].append(launch)):
        w, u = forward(**args, config=config)
    _untouched("recompute_w_u_fwd", before)
    with phase("kernel"), observed(lambda *launch: seen["bwd"].append(launch)):
        dk, dv, dbeta, dg = backward(**args, dw=dw, du=du, config=config)
    _untouched("prepare_wy_repr_bwd", before)
    if not subject_of(case).foreign:  # what reaches a launch is this project's (a foreign one's is its own)
        for kernel, launches in seen.items():
            _launched_as_asked(asked, kernel, launches)
    outputs = dict(w=w, u=u, dk=dk, dv=dv, dbeta=dbeta, dg=dg)
    wrong = {name: f"{x.dtype} (expected {case.dtype_of(name)})" for name, x in outputs.items()
             if x is not None and x.dtype != case.dtype_of(name)}
    if wrong:  # w, u, dk, dv in k's dtype; dbeta and dg in beta's and g's (the ops' contract)
        raise PropertyFailure(f"outputs of the wrong dtype: {wrong}", {"dtypes": wrong})
    return outputs


def _chunk_rows(case: Case) -> int:
    """The task grid's first axis: chunks per batch row (fixed length) or chunks of the packed batch
    (varlen); its second is ``planning.batch_heads`` (B x HV, or B x H for a backward that sums
    grouped dk in the kernel)."""
    return -(-case.T // case.BT) if case.cu_seqlens is None else len(case.chunk_bounds())


def _groups_dk(backend: Backend, case: Case) -> bool:
    """Whether ``backend`` runs the case's backward grouped (``Backend.groups_dk`` on its task grid)."""
    return backend.groups_dk(case.config(), case.H, case.HV, _chunk_rows(case) * case.B * case.H)


# What ops.observed hands over per launch: the op's _Call, the grid and the kernel's arguments.
Seen = list[tuple[Any, tuple[int, ...], dict[str, Any]]]


def _knob_flags(case: Case, kernel: str, backend: Backend, config: LaunchConfig) -> dict[str, bool]:
    """The kernel flags the case's knobs fix, each stated from its knob (else the backend's table
    value) alone, not by the code that plans and specializes the call (backends, specialization)."""

    flags = {"DOT_GUARD": _given(config.dot_guard, backend.dot_guard),
             "GATE_HEAD_MAJOR": _given(config.gate_head_major, backend.gate_head_major) and case.HV > 1,
             "PERSISTENT": _given(config.mode, backend.mode) == "persistent"}
    if kernel == "bwd" and (config.group_dk is not None or case.HV == case.H):
        flags["GROUP_DK"] = bool(config.group_dk) and case.HV > case.H
    if backend.interpret:
        flags["LOWP_DOT"] = bool(config.lowp_dot) and case.dtype == "bfloat16"
    elif not backend.lowp_dot_for_bf16:
        flags["LOWP_DOT"] = False
    return flags


def _launched_as_asked(case: Case, kernel: str, launches: Seen) -> None:
    """Every launch of one op is the one its case and knobs ask for: each knob reaches the launch (a
    knob that is dropped on its way leaves every output right, every plan and variant being correct,
    and the properties that vary knobs then compare a launch with itself), the compiled kernel is the
    case's (``Case.specializations``), the launch limits hold, and together the launches run every
    (chunk, head) task exactly once. Holds for every case, backend and knob by construction."""
    from ..interpreter import emulation_default

    backend, config = BACKENDS[backend_name(case)], case.config()
    flags = _knob_flags(case, kernel, backend, config)
    spec = dataclasses.asdict(case.specializations()[kernel])
    max_blocks, ub_bytes = _given(config.max_blocks, backend.max_blocks), _given(config.ub_bytes, backend.ub_bytes)
    NT = _chunk_rows(case)
    BH = batch_heads(kernel, case.B, case.H, case.HV, flags.get("GROUP_DK", spec.get("GROUP_DK", False)))
    runs = torch.zeros(NT, BH, dtype=torch.int32)
    for call, grid, kw in launches:
        where = f"{kernel} launch at chunk {kw['t_offset']}, head {kw['bh_offset']} (grid {grid})"
        wrong = {n: (kw[n], v) for n, v in {**spec, **flags}.items() if n in kw and kw[n] != v}
        if backend.interpret and call.emulate != _given(config.emulate, emulation_default()):
            wrong["emulate"] = (call.emulate, not call.emulate)
        if kernel == "bwd":  # a per-value-head grouped backward's dk sum: the kernel's where asked, else torch's
            sums = case.HV > case.H and not kw["GROUP_DK"] and _given(config.dk_sum_kernel, backend.dk_sum_kernel)
            if (call.dk_sum is not None) != sums:
                wrong["dk_sum_kernel"] = (call.dk_sum is not None, sums)
        if wrong:
            raise PropertyFailure(f"{where} is not the one the case's knobs {case.knobs} ask for: "
                                  + ", ".join(f"{n}={got} (asked: {want})" for n, (got, want) in wrong.items()),
                                  {"launched_vs_asked": {n: list(p) for n, p in wrong.items()}})
        blocks, tile = math.prod(grid), max(kw["BK"], kw["BV"])
        limits = [(max_blocks is not None and blocks > max_blocks, f"{blocks} blocks > max_blocks {max_blocks}"),
                  (config.tile_cap is not None and tile > max(MIN_TILE, config.tile_cap),
                   f"a {tile}-wide tile > tile_cap {config.tile_cap}"),
                  (ub_bytes is not None and ub_need(kernel, case.BT, tile) > ub_bytes * UB_SAFETY_MARGIN,
                   f"a {tile}-wide tile overflows the UB of {ub_bytes} bytes")]
        if flags["PERSISTENT"]:
            rows, rest = divmod(kw["num_tasks"], kw["bh_count"])
            extent, width = rows + (rest > 0), kw["bh_count"]
            limits += [(config.num_cores is not None and grid[0] > config.num_cores,
                        f"{grid[0]} programs > num_cores {config.num_cores}"),
                       (config.max_tasks is not None and kw["num_tasks"] > config.max_tasks,
                        f"{kw['num_tasks']} tasks > max_tasks {config.max_tasks}"),
                       (kw["num_programs"] != grid[0], f"num_programs {kw['num_programs']} != its grid's {grid[0]}")]
        else:
            (extent, width), rows, rest = grid[:2], grid[0], 0
            limits.append((any(g > m for g, m in zip(grid, backend.max_grid)), f"the grid exceeds {backend.max_grid}"))
        limits.append((kw["t_offset"] + extent > NT or kw["bh_offset"] + width > BH,
                       f"tasks past the {NT} x {BH} task grid"))
        broken = [text for bad, text in limits if bad]
        if broken:
            raise PropertyFailure(f"{where}: " + "; ".join(broken))
        t0, b0 = kw["t_offset"], kw["bh_offset"]
        runs[t0:t0 + rows, b0:b0 + width] += 1
        if rest:
            runs[t0 + rows, b0:b0 + rest] += 1
    if not bool((runs == 1).all()):
        raise PropertyFailure(f"{kernel}: the launches run {int((runs == 0).sum())} of the {NT} x {BH} (chunk, head) "
                              f"tasks never and {int((runs > 1).sum())} more than once",
                              {"never": int((runs == 0).sum()), "repeated": int((runs > 1).sum())})


def _bytes(x: torch.Tensor) -> torch.Tensor:
    """The whole storage under ``x`` (a memory layout's padding included) as a uint8 tensor."""
    return torch.empty(0, dtype=torch.uint8, device=x.device).set_(x.untyped_storage())


def _storages(args: dict[str, torch.Tensor | None]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each tensor argument's storage and a copy of its bytes, by name."""
    return {name: (x, _bytes(x).clone()) for name, x in args.items() if x is not None}


@phase("comparison")
def _untouched(op: str, before: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    """PropertyFailure naming every argument whose storage ``op`` changed. The ops only read their
    arguments, so this holds for every case, layout and variant: a store through a wrong base or
    stride, past a view into its padding, or an in-place edit in the host code shows here even
    where the outputs come out right."""
    changed = {name: int((_bytes(x) != copy).sum()) for name, (x, copy) in before.items()}
    written = {name: n for name, n in changed.items() if n}
    if written:
        raise PropertyFailure(f"{op} wrote to its arguments: " + ", ".join(
            f"{name} ({n} of {before[name][1].numel()} bytes of its storage changed)" for name, n in written.items()),
            {"written_bytes": written})


def oracle_outputs(inputs: Inputs) -> dict[str, torch.Tensor | None]:
    """The float64 oracle on exactly the kernel's inputs (given A), by output name.

    It runs on ``float64_device`` (on a GPU, so that GPU runs do not wait on a host oracle
    for every large case), and on the host when the GPU has no memory left for the float64
    copies."""
    return _on_float64_device(lambda device: _oracle_on(inputs, device), inputs.k.device)


def _on_float64_device(fn: Callable[[torch.device], T], device: torch.device) -> T:
    """``fn(float64_device(device))``, or ``fn(host)`` when that GPU is out of memory."""
    f64_device = float64_device(device)
    if f64_device.type != "cpu":
        try:
            return fn(f64_device)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
    return fn(torch.device("cpu"))


@phase("oracle")
def _oracle_on(inputs: Inputs, device: torch.device) -> dict[str, torch.Tensor | None]:
    def f64(x: torch.Tensor) -> torch.Tensor:
        return x.to(device=device, dtype=torch.float64)

    k, v, beta, A, dw, du = (f64(x) for x in (inputs.k, inputs.v, inputs.beta, inputs.A, inputs.dw, inputs.du))
    g = f64(inputs.g) if inputs.g is not None else None
    # cu_seqlens as given: the oracle's layout reads them on the host (no device read if given there).
    w, u = reference.wy_fwd(k, v, beta, A, g, inputs.cu_seqlens)
    dk, dv, dbeta, dg = reference.wy_bwd_given_A(k, v, beta, A, dw, du, g, inputs.cu_seqlens)
    return dict(w=w, u=u, dk=dk, dv=dv, dbeta=dbeta, dg=dg)


def check_oracle(case: Case) -> Metrics:
    """Forward and backward outputs match the float64 oracle within ``error_bounds``, as wholes
    and block by block (``Blocks``)."""
    inputs = build_inputs(case)
    got = run_ops(case, inputs)
    host_cu = torch.tensor(case.cu_seqlens) if case.cu_seqlens is not None else None  # the oracle's, read from the case
    return compare_to_oracle(got, inputs._replace(cu_seqlens=host_cu), case.dtype,
                             blocks_of(case, float64_device(inputs.k.device)))


class Blocks(NamedTuple):
    """The oracle check's blocks: (chunk, head) pairs, the unit of work of the WY step. ``chunk``
    maps each token row of the flattened [B*T] axis to its chunk (on the oracle's device);
    ``bounds`` lists each chunk's (batch, first token, end token) (``Case.chunk_bounds``)."""

    chunk: torch.Tensor
    bounds: list[tuple[int, int, int]]


def blocks_of(case: Case, device: torch.device) -> Blocks:
    """The blocks of ``case``, their token map built on ``device``."""
    cu = torch.arange(case.B + 1, device=device) * case.T if case.cu_seqlens is None else \
        torch.tensor(case.cu_seqlens, device=device)
    return Blocks(case.token_chunks(cu)[1], case.chunk_bounds())


def _block_norms(x: torch.Tensor, chunk: torch.Tensor, n_chunks: int) -> torch.Tensor:
    """||x|| per (chunk, head) of x [B, T, heads, ...]: [n_chunks, heads]."""
    sq = x.reshape(chunk.numel(), x.shape[2], -1).square().sum(-1)
    return sq.new_zeros(n_chunks, x.shape[2]).index_add_(0, chunk, sq).sqrt()


def _worst_block(out: torch.Tensor, ref: torch.Tensor, moved: dict[str, torch.Tensor], dtypes: tuple[str, ...],
                 blocks: Blocks, device: torch.device) -> torch.Tensor:
    """``[q, block, rel_rms, tol]`` of the block (flat index ``chunk * heads + head``) whose error
    is largest against its bound (q = rel_rms / tol), computed on ``device`` in float64.

    A block's rel_rms and bound are the whole output's (``_bound``, its terms measured on the block)
    relative to the block's scale: its own norm, or its share of the whole output's norm,
    ``||ref|| sqrt(block elements / elements)``, where that is larger. Rounding error is local (a
    block's outputs come from its own dots), so a kernel's error on a block scales with the block's
    magnitudes like the whole output's with the whole; the share keeps a block whose exact values
    cancel to nearly zero from being judged against its own tiny norm. Below float32 the bound is
    ``BLOCK_SLACK`` times that formula (the largest over ``dtypes``, the output's ``precisions``, each
    with its ``moved`` output): a block of a few elements does not average its roundings as
    a whole output does, and the cuda backend's bf16 dot operands (emulated in
    tests/test_lowp_dot_error.py) reached 1.01x the unslackened bound on one 6-token block's dg in
    ~600 blocks, the whole outputs at most 0.71x."""
    chunk = blocks.chunk.to(device)
    n = len(blocks.bounds)
    ref = ref.detach().to(device, torch.float64)
    out = out.detach().to(device, torch.float64)

    def norms(x: torch.Tensor) -> torch.Tensor:
        return _block_norms(x, chunk, n)

    per_row = ref[0, 0, 0].numel() if ref.numel() else 1
    elems = torch.bincount(chunk, minlength=n).to(torch.float64)[:, None] * per_row
    share = torch.linalg.vector_norm(ref) * torch.sqrt(elems / max(ref.numel(), 1))
    scale = torch.maximum(norms(ref), share)

    def rel(diff: torch.Tensor) -> torch.Tensor:
        e = norms(diff)
        return torch.where(scale > 0, e / scale, torch.where(e == 0, 0.0, math.inf))

    err = rel(out - ref)
    tol = torch.full_like(err, FP32_RTOL)
    for d in dtypes:
        rounded = rel(ref.to(getattr(torch, d)).to(torch.float64) - ref)
        sensitivity = rel(moved[d].to(device, torch.float64) - ref)
        tol = torch.maximum(tol, BLOCK_SLACK * torch.maximum(
            LOW_PRECISION_FACTOR * rounded.clamp(min=UNIT_ROUNDOFF[d] / 2), sensitivity))
    q = torch.nan_to_num(err / tol, nan=math.inf).flatten()
    i = torch.argmax(q)
    return torch.stack((q[i], i.to(torch.float64), err.flatten()[i], tol.flatten()[i]))


@phase("comparison")
def compare_to_oracle(got: dict[str, torch.Tensor | None], inputs: Inputs, dtype: str,
                      blocks: Blocks | None = None) -> Metrics:
    """Metrics of the outputs ``got`` of ``inputs`` against the oracle; PropertyFailure naming
    every output past its bound (``_bound``, with the rounding sensitivity for bf16/fp16), as a
    whole or, given ``blocks``, on any one block (``_worst_block``): an error confined to one
    chunk and head of a large case dilutes in the whole output's rel_rms, not in its block's.
    Everything stays on the oracle's device up to one read of all the norms."""
    ref = {name: r for name, r in oracle_outputs(inputs).items() if r is not None}
    outs = {name: got[name] for name in ref}
    precs = precisions(dtype, {name: str(out.dtype).removeprefix("torch.") for name, out in outs.items()
                               if out is not None})
    if set(precs) != set(ref):
        raise PropertyFailure(f"outputs missing: {sorted(set(ref) - set(precs))}")
    moved = _moved(inputs, precs)
    rows = [_norms(out, ref[name]) for name, out in outs.items()]  # type: ignore[arg-type]
    worst = [_on_float64_device(functools.partial(_worst_block, out, r,
                                                  {d: moved[d][name] for d in precs[name]},  # type: ignore[misc]
                                                  precs[name], blocks),
                                out.device)  # on the host where the oracle's GPU is out of memory
             for name, r in ref.items() if (out := outs[name]) is not None] if blocks is not None and blocks.bounds else []
    n = len(ref)
    read = _read(rows + _bound_rows(ref, moved, precs) + worst)
    ratios = [_ratio(*row) for row in read[:len(read) - len(worst)]]
    metrics: Metrics = {}
    failures = []
    for err, name, bound in zip(ratios[:n], ref, _bounds(precs, ratios[n:]), strict=True):
        tol = bound["tol"]
        metrics[name] = {"rel_rms": err, "tol": tol, **{k: v for k, v in bound.items() if k in ("sensitivity", "bound_dtype")}}
        if not err <= tol:
            failures.append(f"{name}: rel_rms {err:.3e} > tol {tol:.3e}")
    for name, (q, flat, err, tol) in zip(ref, read[len(read) - len(worst):]):
        chunk, head = divmod(int(flat), ref[name].shape[2])
        b, t0, t1 = blocks.bounds[chunk]  # type: ignore[union-attr]
        where = {"chunk": chunk, "batch": b, "tokens": [t0, t1], "head": head}
        metrics[name]["worst_block"] = {**where, "rel_rms": err, "tol": tol}
        if not q <= 1:
            failures.append(f"{name}: rel_rms {err:.3e} > tol {tol:.3e} on the block of chunk {chunk} (rows {t0}:{t1} "
                            f"of the [B*T] token axis, batch {b}) and {'key' if name == 'dk' else 'value'} head {head}")
    if failures:
        raise PropertyFailure("kernel differs from the float64 oracle: " + "; ".join(failures), metrics)
    return metrics


@phase("comparison")
def _bitwise(label: str, a: dict[str, torch.Tensor | None], b: dict[str, torch.Tensor | None],
             names: tuple[str, ...], within: dict[str, float] | None = None) -> Metrics:
    """``a`` and ``b`` equal bit for bit in each output of ``names``, or, for an output in ``within``, within
    that rel_rms (``_compile_tolerances``); PropertyFailure naming every output that is not."""
    within = within or {}
    rows = {}  # per output of equal shapes: [mismatched elements, *_norms], read in one transfer
    for name in names:
        x, y = a[name], b[name]
        if x is None and y is None:
            continue
        assert x is not None and y is not None
        if x.shape == y.shape:
            device = float64_device(x.device)
            rows[name] = torch.cat(((x.to(device) != y.to(device)).sum().to(torch.float64).view(1), _norms(x, y)))
    read = dict(zip(rows, _read(list(rows.values()))))
    metrics: Metrics = {}
    failures = []
    for name in names:
        if a[name] is None and b[name] is None:
            continue
        mismatches, rel = (int(read[name][0]), _ratio(*read[name][1:])) if name in read else (-1, None)
        metrics[name] = {"mismatched_elements": mismatches, "rel_rms": rel}
        if name in within and rel is not None:
            metrics[name]["tol"] = within[name]
            if not rel <= within[name]:
                failures.append(f"{name}: rel_rms {rel:.3e} > {within[name]:.3e}")
        elif mismatches:
            failures.append(f"{name}: {mismatches} elements differ")
    if failures:
        raise PropertyFailure(f"{label}: " + "; ".join(failures), metrics)
    return metrics


def check_launch_invariance(case: Case) -> Metrics:
    """The case's partition knobs give bit-identical results to the backend's defaults."""
    inputs = build_inputs(case)
    got = run_ops(case, inputs)
    defaults = {knob: None for knob in PARTITION_KNOBS}
    base_case = case.replace(knobs={k: v for k, v in case.knobs.items() if k not in PARTITION_KNOBS})
    base = run_ops(base_case, inputs, **defaults)
    return _bitwise("results change with the launch knobs", got, base, FWD_NAMES + BWD_NAMES)


def check_memory_layout(case: Case) -> Metrics:
    """Arguments in the case's memory layouts (strided, sliced, offset or transposed-back views,
    precomputed chunk_indices) give bit-identical results to the plain call: contiguous
    tensors, no optional arguments."""
    if not case.memory and not case.chunk_indices:
        raise PropertyFailure("memory_layout needs a case with memory layouts or chunk_indices")
    inputs = build_inputs(case)
    plain = run_ops(case.replace(memory={}, chunk_indices=False), inputs)
    return _bitwise("results change with the arguments' memory layout", run_ops(case, inputs), plain,
                    FWD_NAMES + BWD_NAMES)


def _slice_tokens(inputs: Inputs, a: int, b: int) -> Inputs:
    k, v, beta, A, g, dw, du, cu_seqlens = inputs
    s = slice(a, b)
    cu = torch.tensor([0, b - a], dtype=cu_seqlens.dtype if cu_seqlens is not None else torch.int64, device=k.device)
    return Inputs(k[:, s], v[:, s], beta[:, s], A[:, s], g[:, s] if g is not None else None, dw[:, s], du[:, s], cu)


def _one_row(x: torch.Tensor | None) -> torch.Tensor | None:
    """A [B, T, ...] tensor (input or output) as one row of B x T tokens, the rows one after another."""
    return x.reshape(1, -1, *x.shape[2:]) if x is not None else None


def _packed(case: Case, inputs: Inputs) -> tuple[Case, Inputs]:
    """A fixed B x T batch as one packed batch: its rows one after another, B sequences of T tokens."""
    tokens = case.B * case.T
    packed = case.replace(B=1, T=tokens, cu_seqlens=tuple(range(0, tokens + 1, case.T)), memory={})
    cu = torch.arange(0, tokens + 1, case.T, dtype=case.dtype_of("cu_seqlens"), device=inputs.k.device)
    return packed, Inputs._make([*map(_one_row, inputs[:-1]), cu])  # cu_seqlens last


def _compiles(case: Case) -> bool:
    """Whether the case's backend compiles its kernels: there two specializations of one task body are two
    compiles, which may round apart (``_compile_tolerances``); the interpreter runs one program for both."""
    return not BACKENDS[backend_name(case)].interpret


def _two_programs(case: Case) -> bool:
    """Whether a fixed batch and a packed one run two programs of one task body: two compiles on a
    compiled backend (the varlen index math), and two host paths in a foreign subject (fla-ascend's
    backward takes exp2 of a fixed batch's gates in torch, of a packed one's in the kernel)."""
    return _compiles(case) or subject_of(case).foreign


def check_varlen_split(case: Case) -> Metrics:
    """A packed varlen batch equals its sequences run alone, and a fixed batch its rows packed as
    sequences, bit for bit. Packed and fixed launches are two programs (``_two_programs``): there
    they are held to the rounding of two compiles (``_compile_tolerances``)."""
    inputs = build_inputs(case)
    if case.cu_seqlens is None:
        fixed = run_ops(case, inputs)
        packed = run_ops(*_packed(case, inputs))
        rows = {n: _one_row(x) for n, x in fixed.items()}
        names = FWD_NAMES + BWD_NAMES
        return _bitwise("a fixed batch differs from its rows packed as sequences", rows, packed, names,
                        _compile_tolerances(rows, names, case.BT) if _two_programs(case) else None)
    packed = run_ops(case, inputs)
    metrics: Metrics = {}
    for i, (a, b) in enumerate(zip(case.cu_seqlens[:-1], case.cu_seqlens[1:])):
        if a == b:
            continue
        alone = run_ops(case.replace(T=b - a, cu_seqlens=(0, b - a)), _slice_tokens(inputs, a, b))
        part = {n: (x[:, a:b] if x is not None else None) for n, x in packed.items()}
        metrics[f"seq{i}"] = _bitwise(f"sequence {i} (tokens {a}:{b}) differs when run alone", part, alone,
                                      FWD_NAMES + BWD_NAMES)
    return metrics


def widened(case: Case) -> Case:
    """``case`` with beta and g passed in float32, in the backend's default launch shape (the twin
    ``check_widened_gates`` runs: one more compile on a device, not two; launch_invariance holds the
    shapes equal); ``case`` itself where the gates are float32 already (the fields name only dtypes
    other than k's)."""
    if all(case.dtype_of(gate) == torch.float32 for gate in (("beta", "g") if case.use_g else ("beta",))):
        return case
    other = None if case.dtype == "float32" else "float32"
    return case.replace(beta_dtype=other, g_dtype=other if case.use_g else None,
                        knobs={k: v for k, v in case.knobs.items() if k != "mode"})


def check_widened_gates(case: Case) -> Metrics:
    """beta and g passed in float32 (their values unchanged: every float dtype widens exactly)
    give the same w, u, dk, dv bit for bit, and dbeta, dg that round to the case's, bit for bit.

    The kernels compute in float32 whatever the gates' dtype, so this holds for every case, layout
    and variant. A step done in a gate's own dtype instead (exp2 of a bfloat16 g rounded to
    bfloat16, a sum rounded before it is used again) is an error of that dtype's size, which the
    oracle's bound for a bfloat16 or float16 case admits; here it changes bits.

    The twin is another specialization (the gates' dtypes are in its key), so on a compiled backend
    it is another compile of the same task body, held like varlen_split's to two compiles' rounding
    (``_compile_tolerances``): the H200 nightly saw 3 float32 dg elements of B1 T1 H4 K=V=128 bf16
    differ (regressions/widened_gates-a3ead19903c4.json), the bf16 outputs bit-equal; with the
    backward's beta applied after its dots that case is bit-equal on the H200, and nothing in a
    compiler's contract makes two compiles' fp32 sums agree bit for bit. The interpreter runs one
    program for both, so the cpu backend keeps the bitwise check."""
    wide = widened(case)
    if wide == case:
        raise PropertyFailure("widened_gates needs a case whose beta or g is below float32")
    inputs = build_inputs(case)
    got = run_ops(case, inputs)
    wide_inputs = inputs._replace(beta=inputs.beta.float(), g=inputs.g.float() if inputs.g is not None else None)
    with phase("comparison"):
        back = {name: x.to(case.dtype_of(name)) if x is not None and name in ("dbeta", "dg") else x
                for name, x in run_ops(wide, wide_inputs).items()}
    names = FWD_NAMES + BWD_NAMES
    return _bitwise("beta and g widened to float32 change the results", got, back, names,
                    _compile_tolerances(got, names, case.BT) if _compiles(case) else None)


def _dk_ways(case: Case) -> tuple[bool, dict[str, Any] | None]:
    """How the case's backward adds its value heads' fp32 dk, and the other way to compare it with bit for bit.

    The first: whether it adds them in head order (GROUP_DK's running sum, or the sum kernel after a run per
    value head: ``Backend.sums_dk_in_kernel``); else torch's sum, in an order of its own (for G = 8 not
    the heads' on the CPU). The second: the knobs of the other in-order way (grouped <-> per value head),
    which must give the same bits, or None where the backend has none (the npu: no grouped variant;
    npu-cuda: torch's sum per value head) or the case's own way is torch's."""
    backend = BACKENDS[backend_name(case)]
    grouped = _groups_dk(backend, case)
    in_order = grouped or backend.sums_dk_in_kernel(case.config())
    if not in_order or backend.name == "npu":
        return in_order, None
    if not grouped:
        return True, {"group_dk": True}
    if backend.interpret:
        return True, {"group_dk": False, "dk_sum_kernel": True}
    return True, {"group_dk": False} if backend.dk_sum_kernel else None


def check_grouped_heads(case: Case) -> Metrics:
    """HV/H grouped heads equal the same problem with every key head repeated HV/H times.

    w, u, dv, dbeta, dg must match bit for bit; dk (summed over each group) must equal
    the expanded problem's per-head dk summed in fp32 in the backward's own order (``_dk_ways``):
    bitwise in float32, and within the rounding of G low-precision terms (2u sqrt(G)) otherwise,
    since the expanded run rounds each head's dk to the dtype before the sum. Where the other
    grouped-dk way also adds in head order, it must give the same backward bit for bit. On a
    compiled backend the backward's dv, dbeta, dg (and dk's comparison with the expanded run) are
    held to the rounding of two compiles instead (``_compile_tolerances``): grouped and per value head,
    or H and HV key heads, are different kernels, and the H200 showed them round apart; the other
    way's dk, the in-order sum's claim, stays bit for bit there too.
    """
    G = case.HV // case.H
    compiled = _compiles(case)
    rounded = ("dv", "dbeta", "dg") if compiled else ()
    inputs = build_inputs(case)
    grouped = run_ops(case, inputs)
    expanded_case = case.replace(H=case.HV)
    expanded = run_ops(expanded_case, inputs._replace(k=inputs.k.repeat_interleave(G, dim=2)))
    metrics = _bitwise("grouped heads differ from repeated keys", grouped, expanded, ("w", "u", "dv", "dbeta", "dg"),
                       _compile_tolerances(grouped, rounded, case.BT))
    dk = grouped["dk"]
    assert dk is not None
    in_order, other = _dk_ways(case) if not subject_of(case).foreign else (False, None)  # a foreign sum: its own
    with phase("comparison"):
        heads = expanded["dk"].float().view(case.B, case.T, case.H, G, case.K)  # type: ignore[union-attr]
        if in_order:
            dk_sum = heads[:, :, :, 0].clone()
            for j in range(1, G):
                dk_sum += heads[:, :, :, j]
        else:
            dk_sum = heads.sum(3)
        err = rel_rms(dk.float(), dk_sum)
    tol = (0.0 if case.dtype == "float32" else 2 * UNIT_ROUNDOFF[case.dtype] * math.sqrt(G)) + (
        _compile_rounding(case.BT) if compiled else 0.0)
    metrics["dk"] = {"rel_rms": err, "tol": tol}
    if not err <= tol:
        raise PropertyFailure(f"grouped dk differs from the summed expanded dk: rel_rms {err:.3e} > {tol:.3e}", metrics)
    if other is not None:
        both = _bitwise(f"the other grouped-dk way ({other}) changes the backward", grouped,
                        run_ops(case, inputs, **other), BWD_NAMES, _compile_tolerances(grouped, rounded, case.BT))
        metrics.update({f"{name}.other_dk_way": row for name, row in both.items()})
    return metrics


def _compile_rounding(BT: int) -> float:
    """rel_rms two compiles of one task body may differ by in fp32: each may contract and order its
    arithmetic its own way (the compiler's choice), BT-term sums reordered with each term rounded once
    more or less, 2 sqrt(BT) units of float32 for the two sides."""
    return 2 * math.sqrt(BT) * UNIT_ROUNDOFF["float32"]


def _compile_tolerances(out: dict[str, torch.Tensor | None], names: tuple[str, ...], BT: int) -> dict[str, float]:
    """Per output of ``names``: how far one task body's output from two compiled kernels may differ,
    ``_compile_rounding`` plus one unit of the output's dtype below float32 (where the fp32 values
    straddle a rounding boundary). Measured on the H200 (docs/ledger.md session 16): the grouped
    and per-value-head backwards of B1 T1024 H16 HV64 K=V=16 bf16 had one dg element of 65,536 one bf16
    unit apart, every other output bit-equal. A wrong head or chunk is off by O(1)."""
    tols = {}
    for name in names:
        x = out[name]
        if x is not None:
            low = 0.0 if x.dtype == torch.float32 else UNIT_ROUNDOFF[str(x.dtype).removeprefix("torch.")]
            tols[name] = _compile_rounding(BT) + low
    return tols


def poisoned_block(case: Case) -> tuple[int, int, int, int]:
    """The block ``check_containment`` poisons: (batch, first token, end token, key head) of one chunk
    of the case, picked from its seed (the chunk ``seed mod chunks``, the key head ``seed // chunks mod H``)."""
    chunks = case.chunk_bounds()
    if not chunks:
        raise PropertyFailure("containment needs a case with at least one chunk")
    b, start, end = chunks[case.seed % len(chunks)]
    return b, start - b * case.T, end - b * case.T, (case.seed // len(chunks)) % case.H


def check_containment(case: Case) -> Metrics:
    """NaN in every input of one chunk and key head (k of that head; v, beta, g, A, dw, du of its
    HV/H value heads) stays inside that chunk and those heads: every other output element is
    bit-identical to the clean run's. The WY step is local to a chunk and a head group by its
    math, so this holds for any layout, variant and launch; a read across a chunk's or a head's
    bounds (a mask one row too wide, a wrong stride, a neighbour's rows multiplied by zero) or a
    store outside its task carries the NaN out. The oracle's relative RMS can miss an error
    confined to a few rows of a large case; this cannot."""
    b, t0, t1, hk = poisoned_block(case)
    G = case.HV // case.H
    heads = slice(hk * G, (hk + 1) * G)
    inputs = build_inputs(case)
    clean = run_ops(case, inputs)
    with phase("inputs"):
        poisoned = {}
        for name in ("k", "v", "beta", "A", "g", "dw", "du"):
            x = getattr(inputs, name)
            if x is not None:
                x = x.clone()
                x[b, t0:t1, hk if name == "k" else heads] = float("nan")
                poisoned[name] = x
    dirty = run_ops(case, inputs._replace(**poisoned))
    u_block = dirty["u"]
    assert u_block is not None
    if not bool(torch.isnan(u_block[b, t0:t1, heads]).all()):  # every row of A there is NaN: so is u
        raise PropertyFailure("containment: the poisoned block's u is not all NaN (the NaN never reached the kernel)")

    def outside(out: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor | None]:
        """The outputs with the poisoned block zeroed (dk per key head, the others per value head)."""
        kept: dict[str, torch.Tensor | None] = {}
        for name, x in out.items():
            if x is not None:
                x = x.clone()
                x[b, t0:t1, hk if name == "dk" else heads] = 0
            kept[name] = x
        return kept

    metrics = _bitwise(f"NaN in chunk tokens {t0}:{t1} of batch {b}, key head {hk} reached other outputs",
                       outside(dirty), outside(clean), FWD_NAMES + BWD_NAMES)
    metrics["block"] = {"batch": b, "tokens": [t0, t1], "key_head": hk}
    return metrics


# The linearity property's scaling: v and dw doubled, everything else as it is. Each output is then its
# own value times 2 ** LINEAR_SCALES[name] (below): u = A (v*beta); dv = (A^T du) * beta; dA, and through it
# dL and every term of dk, dbeta and dg, carries exactly one factor of v or dw.
LINEAR_SCALES = {"w": 0, "u": 1, "dk": 1, "dv": 0, "dbeta": 1, "dg": 1}


def _units_apart(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """|x - y| in units in the last place of x's dtype at the larger magnitude (the subnormal spacing
    below its smallest normal), plus 64 units of float32's subnormal spacing, in float64; 0 where
    both are NaN or equal infinities."""
    info = torch.finfo(x.dtype)
    a, b = x.double(), y.double()
    mag = torch.maximum(a.abs(), b.abs()).clamp_min(info.tiny)
    unit = torch.exp2(torch.floor(torch.log2(mag))) * info.eps + 64 * 2.0**-149
    apart = (a - b).abs() / unit
    return torch.where((a == b) | (a.isnan() & b.isnan()), torch.zeros_like(apart), apart)


def check_linearity(case: Case) -> Metrics:
    """The WY step is linear in v and dw where it is linear: with v and dw doubled (k, beta, g, A, du
    as they are), u, dk, dbeta and dg double and w and dv stay (``LINEAR_SCALES``). A power of two
    scales every rounding exactly, in any order of any sum, on every backend, variant and launch,
    so each output element is its double (or itself) bit for bit, but where a float32 intermediate
    (long gates' exp2) or the output itself (float16 below 6.1e-5) falls below its dtype's normal
    range: there it may round apart, within one unit of the output's dtype. A term that takes v, dw,
    du or k for another (a wrong pointer, a mask that lets one tensor's lanes into another's tile,
    stale data in an accumulator) breaks the scaling however small it is, where the oracle's bound
    passes an error of its size."""
    inputs = build_inputs(case)
    base = run_ops(case, inputs)
    doubled = run_ops(case, inputs._replace(v=inputs.v * 2, dw=inputs.dw * 2))
    metrics: Metrics = {}
    failures = []
    with phase("comparison"):
        rows = {}  # per output: [most units apart, inexact elements], read in one transfer
        for name, scale in LINEAR_SCALES.items():
            x, y = doubled[name], base[name]
            if x is not None and y is not None and x.numel():
                apart = _units_apart(x, y * 2**scale)
                rows[name] = torch.stack((apart.max(), (apart > 0).sum().double()))
        for name, (worst, inexact) in zip(rows, _read(list(rows.values()))):
            scale = 2 ** LINEAR_SCALES[name]
            metrics[name] = {"scale": scale, "max_units_apart": worst, "inexact_elements": int(inexact)}
            if not worst <= 1.0:
                failures.append(f"{name}: {int(inexact)} elements are not {scale}x the base run's, "
                                f"up to {worst:.3g} units apart")
    if failures:
        raise PropertyFailure("with v and dw doubled: " + "; ".join(failures), metrics)
    return metrics


def check_plan_coverage(case: Case) -> Metrics:
    """On the case's device spec (``plan_spec``), the planner plans each kernel exactly when the
    UB model says it fits (``plannable``); every plan covers each (chunk, head) task exactly once
    within the limits, and its tiles are the widest that fit the unified buffer (the model with
    its margin)."""
    spec = plan_spec(case)
    NT = _chunk_rows(case)
    group_dk = _groups_dk(BACKENDS[spec.name], case)
    metrics: Metrics = {}
    for kernel in ("fwd", "bwd"):
        BH = batch_heads(kernel, case.B, case.H, case.HV, group_dk)
        fits = plannable(kernel, case.BT, spec.ub_bytes)
        try:
            p = plan(kernel, NT=NT, BH=BH, BT=case.BT, K=case.K, V=case.V, spec=spec)
        except UnsupportedProblemError as e:
            if fits:
                raise PropertyFailure(f"{kernel}: the planner refuses BT={case.BT} on {spec.name} (UB "
                                      f"{spec.ub_bytes}), which the UB model says fits: {e}") from e
            metrics[kernel] = {"refused": True}
            continue
        if not fits:
            raise PropertyFailure(f"{kernel}: the planner planned BT={case.BT} on {spec.name} although even "
                                  f"{MIN_TILE}-wide tiles overflow its UB of {spec.ub_bytes} bytes")
        # with narrow tiles (cuda), K and V that both pad to min_tile share the wider one's tile instead
        shared = spec.narrow_tiles and max(case.K, case.V) <= spec.min_tile // 2
        for dim, tile in (("K", p.BK), ("V", p.BV)):
            size, least = (max(case.K, case.V), MIN_TILE) if shared else (getattr(case, dim), spec.min_tile)
            widest = widest_tile(kernel, case.BT, size, spec.cap(kernel), spec.ub_bytes, least)
            if tile != widest:
                raise PropertyFailure(f"{kernel}: B{dim}={tile} for {dim}={getattr(case, dim)}, but the widest tile "
                                      f"the UB model fits is {widest} (UB {spec.ub_bytes}, cap {spec.cap(kernel)}, "
                                      f"min {spec.min_tile})")
        # (each tile the widest the model fits, so the tiles fit: a plan where none fits failed above)
        seen: dict[tuple[int, int], int] = {}
        for launch in p.launches:
            blocks = math.prod(launch.grid)  # stated here, not by the plan under test
            if spec.max_blocks is not None and blocks > spec.max_blocks:
                raise PropertyFailure(f"{kernel}: a launch has {blocks} blocks > max_blocks {spec.max_blocks}")
            if any(d < 1 for d in launch.grid):
                raise PropertyFailure(f"{kernel}: launch grid {launch.grid} has an empty axis")
            if p.mode == "grid":
                if launch.grid[0] > spec.max_grid[0] or launch.grid[1] > spec.max_grid[1]:
                    raise PropertyFailure(f"{kernel}: grid {launch.grid} exceeds the per-axis limit {spec.max_grid}")
                programs: list[tuple[int, ...]] = [(x, y) for x in range(launch.grid[0])
                                                   for y in range(launch.grid[1])]
            else:
                if launch.tasks > spec.max_tasks:
                    raise PropertyFailure(f"{kernel}: a launch has {launch.tasks} tasks > max_tasks {spec.max_tasks}")
                programs = [(p_,) for p_ in range(launch.grid[0])]
            for prog in programs:
                for task in program_tasks(launch, p.mode, prog):
                    seen[task] = seen.get(task, 0) + 1
        expected = {(t, bh) for t in range(NT) for bh in range(BH)}
        missing = expected - set(seen)
        extra = set(seen) - expected
        twice = [t for t, n in seen.items() if n > 1]
        if missing or extra or twice:
            raise PropertyFailure(
                f"{kernel}: plan covers tasks wrongly: {len(missing)} missing (e.g. {sorted(missing)[:3]}), "
                f"{len(extra)} outside the grid (e.g. {sorted(extra)[:3]}), {len(twice)} run twice (e.g. {twice[:3]})"
            )
        metrics[kernel] = {"launches": p.num_launches, "tasks": NT * BH, "BK": p.BK, "BV": p.BV}
    return metrics


# A corruption maps valid inputs and a position (``Case.corrupt_at``, taken modulo the places
# the corruption can land) to the op's arguments, the exception expected and a fragment of its message.
Corruption = Callable[[Inputs, int], tuple[dict[str, Any], type[Exception], str]]


def _kw(inputs: Inputs, **changes: Any) -> dict[str, Any]:
    d = dict(inputs._asdict())
    d.update(changes)
    return d


# The ops' tensor arguments, each of which a caller may pass wrongly in the same ways (not a tensor, on
# another device, the float ones in an integer dtype: ``_passed_wrongly``): these corruptions exist for
# every argument by construction.
ARGUMENTS = ("k", "v", "beta", "A", "g", "dw", "du", "cu_seqlens", "chunk_indices")


def _with(inputs: Inputs, name: str) -> dict[str, Any]:
    """The valid arguments of ``inputs`` with ``name`` passed: a zero gate where the case has none,
    cu_seqlens (of the fixed batch where it has none) for cu_seqlens and chunk_indices."""
    kw = _kw(inputs)
    if name in ("cu_seqlens", "chunk_indices"):
        kw["cu_seqlens"] = _cu_tensor(inputs).to(inputs.cu_seqlens.dtype if inputs.cu_seqlens is not None else torch.int64)
    if name == "chunk_indices":
        kw["chunk_indices"] = prepare_chunk_indices(kw["cu_seqlens"], inputs.A.shape[-1])
    if name == "g" and inputs.g is None:
        kw["g"] = torch.zeros_like(inputs.beta)
    return kw


def _passed_wrongly(name: str, change: Callable[[torch.Tensor, Inputs], Any], error: type[Exception],
                    fragment: str) -> Corruption:
    """The corruption passing argument ``name`` as ``change(tensor, inputs)``, the rest valid (``_with``)."""
    def corrupt(x: Inputs, at: int) -> tuple[dict[str, Any], type[Exception], str]:
        kw = _with(x, name)
        return {**kw, name: change(kw[name], x)}, error, fragment
    return corrupt


CORRUPTIONS: dict[str, Corruption] = {
    **{f"{name}_not_tensor": _passed_wrongly(name, lambda t, x: t.tolist(), TypeError, f"{name} must be a torch.Tensor")
       for name in ARGUMENTS},
    **{f"{name}_other_device": _passed_wrongly(name, lambda t, x: t.to("meta" if x.k.device.type == "cpu" else "cpu"),
                                               ValueError, f"{name} must be on k's device")
       for name in ARGUMENTS if name != "k"},  # k's device is the one
    **{f"{name}_int_dtype": _passed_wrongly(name, lambda t, x: t.to(torch.int32), TypeError, f"{name} must have")
       for name in ARGUMENTS[:7]},  # the float ones
    "k_3d": lambda x, at: (_kw(x, k=x.k[0]), ValueError, "k must be 4-D"),
    "v_wrong_T": lambda x, at: (_kw(x, v=x.v[:, :-1]), ValueError, "v must share"),
    "hv_not_multiple": lambda x, at: (_kw(x, k=x.k.repeat(1, 1, x.v.shape[2] + 1, 1), v=x.v), ValueError, "multiple"),
    "bt_not_power_of_2": lambda x, at: (_kw(x, A=torch.cat([x.A, x.A[..., :8]], -1)), ValueError, "BT"),
    "beta_wrong_shape": lambda x, at: (_kw(x, beta=x.beta[..., None]), ValueError, "beta"),
    "g_wrong_shape": lambda x, at: (_kw(x, g=x.beta[:, :, :1].expand(-1, -1, 2).contiguous()
                                    if x.beta.shape[2] == 1 else x.beta[:, :, :1]), ValueError, "g must have shape"),
    "A_wrong_dtype": lambda x, at: (_kw(x, A=x.A.to(torch.float64)), TypeError, "A must have the dtype"),
    "dw_wrong_shape": lambda x, at: (_kw(x, dw=x.dw[..., :-1]), ValueError, "dw must have shape"),
    # A first entry of 1, -1, 2, -2, 3 or -3 (by position).
    "cu_not_starting_at_0": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: c.__setitem__(
        0, (1 + at // 2 % 3) * (-1) ** at))), ValueError, "cu_seqlens must start at 0"),
    "cu_decreasing": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: _decrease_pair(c, at))), ValueError,
                                    "cu_seqlens must be non-decreasing"),
    "cu_not_ending_at_T": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: c.__setitem__(-1, c[-1] + 1))), ValueError,
                                     "cu_seqlens must end at T"),
    "cu_float": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x).float()), TypeError, "cu_seqlens must have"),
    "cu_2d": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x)[None]), ValueError,
                        "cu_seqlens must be 1-D"),
    "cu_with_batch_2": lambda x, at: (_kw(x, k=torch.cat([x.k, x.k]), v=torch.cat([x.v, x.v]),
                                      beta=torch.cat([x.beta, x.beta]), A=torch.cat([x.A, x.A]),
                                      g=torch.cat([x.g, x.g]) if x.g is not None else None,
                                      dw=torch.cat([x.dw, x.dw]), du=torch.cat([x.du, x.du]),
                                      cu_seqlens=_cu_tensor(x)),
                                  ValueError, "B == 1"),
    "chunk_indices_wrong": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x), chunk_indices=_wrong_chunk_indices(x, at)),
                                          ValueError, "chunk_indices must equal"),
    "chunk_indices_without_cu": lambda x, at: (_kw(x, cu_seqlens=None, chunk_indices=torch.zeros(1, 2, dtype=torch.int64)),
                                           ValueError, "chunk_indices was given without cu_seqlens"),
}


# Corruptions of arguments only the backward takes.
BACKWARD_ONLY = frozenset(name for name in CORRUPTIONS if name.startswith(("dw_", "du_")))


def _cu(inputs: Inputs, edit: Callable[[list[int]], None]) -> list[int]:
    """The case's cu_seqlens (or [0, T] for a fixed batch of one) as a list, edited in place."""
    c = inputs.cu_seqlens.tolist() if inputs.cu_seqlens is not None else [0, int(inputs.k.shape[1])]
    edit(c)
    return c


def _cu_tensor(inputs: Inputs, edit: Callable[[list[int]], None] = lambda c: None) -> torch.Tensor:
    return torch.tensor(_cu(inputs, edit), device=inputs.k.device)


def _decrease_pair(cu: list[int], at: int) -> None:
    """Make pair ``at`` (mod the pairs) of ``cu`` decrease: cu[i + 1] = cu[i] - 1 (i = 0: a negative
    first length; the last pair: an end below its start)."""
    i = at % (len(cu) - 1)
    cu[i + 1] = cu[i] - 1


def _wrong_chunk_indices(inputs: Inputs, at: int) -> torch.Tensor:
    """The chunk_indices of the inputs' cu_seqlens with entry ``at`` (mod their count, row-major)
    one too large, or an extra row when there are none."""
    ci = prepare_chunk_indices(_cu_tensor(inputs), inputs.A.shape[-1])
    if ci.numel() == 0:
        return torch.tensor([[0, 0]], device=ci.device)
    ci.view(-1)[at % ci.numel()] += 1
    return ci


def _in_a_kernel(error: BaseException) -> bool:
    """Whether ``error`` was raised inside a Triton launch (a frame of the triton package on its way)."""
    tb = error.__traceback__
    while tb is not None:
        if "/triton/" in tb.tb_frame.f_code.co_filename.replace("\\", "/"):
            return True
        tb = tb.tb_next
    return False


def check_bad_input(case: Case) -> Metrics:
    """A corrupted input raises the expected TypeError/ValueError naming the argument, from both ops,
    before any kernel runs; never another exception or a result. A foreign subject that claims no
    validation (``subjects.Claims.validates``) is held to less: some exception before any kernel runs.
    A result (a malformed call accepted: its output is garbage, silently) or an error from inside a
    launch (on a device: a fault, or worse, a read of other memory) fails."""
    if case.corruption not in CORRUPTIONS:
        raise PropertyFailure(f"bad_input needs corruption in {sorted(CORRUPTIONS)}, got {case.corruption!r}")
    inputs = build_inputs(case)
    with phase("inputs"):
        kwargs, exc_type, fragment = CORRUPTIONS[case.corruption](inputs, case.corrupt_at)
    config = case.config()
    forward, backward = subject_of(case).ops(backend_name(case))
    calls = {
        "recompute_w_u_fwd": lambda: forward(kwargs["k"], kwargs["v"], kwargs["beta"], kwargs["A"], kwargs["g"],
                                             kwargs["cu_seqlens"], kwargs.get("chunk_indices"), config=config),
        "prepare_wy_repr_bwd": lambda: backward(kwargs["k"], kwargs["v"], kwargs["beta"], kwargs["A"], kwargs["dw"],
                                                kwargs["du"], kwargs["g"], kwargs["cu_seqlens"],
                                                kwargs.get("chunk_indices"), config=config),
    }
    if case.corruption in BACKWARD_ONLY:
        del calls["recompute_w_u_fwd"]
    if not subject_of(case).claims.validates:
        exc_type, fragment = Exception, ""
    metrics: Metrics = {}
    for name, call in calls.items():
        try:
            with phase("kernel"):
                call()
        except exc_type as e:
            if _in_a_kernel(e):
                raise PropertyFailure(f"{name}: corruption {case.corruption!r} reached a kernel, which raised "
                                      f"{type(e).__name__}: {str(e)[:300]}") from e
            if fragment not in str(e):
                raise PropertyFailure(f"{name}: {exc_type.__name__} without {fragment!r}: {e}") from e
            metrics[name] = str(e)
            continue
        except Exception as e:  # noqa: BLE001 - any other exception is the failure being checked
            raise PropertyFailure(f"{name}: expected {exc_type.__name__}, got {type(e).__name__}: {e}") from e
        raise PropertyFailure(f"{name}: corruption {case.corruption!r} was accepted (expected {exc_type.__name__})")
    return metrics


def check_perf(case: Case) -> Metrics:
    """Forward and backward times within the bounds of perf.py (a device backend's property)."""
    from .perf import PerfFailure, confirmed, measure
    from .warm import warm

    if device_of(case).type == "cpu":
        raise PropertyFailure("perf times a device backend's kernels; the cpu backend (the interpreter) has none")
    with phase("kernel"):  # compiles, in parallel processes (testing/warm.py)
        warmed = warm(case)
    if warmed is not None:
        print(warmed.summary(), file=sys.stderr, flush=True)
    inputs = build_inputs(case)

    def measured() -> dict[str, dict[str, float]]:
        with phase("kernel"):
            return measure(case, inputs)

    try:
        return confirmed(measured)
    except PerfFailure as e:
        raise PropertyFailure(f"slower than the bound: {e.args[0]}", e.args[1]) from None


# Properties that launch no kernel (the others run the case's forward and backward kernels).
KERNEL_FREE = frozenset({"plan_coverage", "bad_input"})


def specialization_labels(prop: str, case: Case) -> list[str]:
    """Labels of the kernel specializations property ``prop`` launches on ``case`` (its forward's
    and backward's, ``Case.specializations``): none where it launches no kernel or the case has no plan."""
    if prop in KERNEL_FREE or subject_of(case).foreign:  # a foreign subject's kernels are its own
        return []
    try:
        return [s.label for s in case.specializations().values()]
    except UnsupportedProblemError:
        return []


PROPERTIES: dict[str, Callable[[Case], Metrics]] = {
    "oracle": check_oracle,
    "launch_invariance": check_launch_invariance,
    "memory_layout": check_memory_layout,
    "varlen_split": check_varlen_split,
    "grouped_heads": check_grouped_heads,
    "widened_gates": check_widened_gates,
    "containment": check_containment,
    "linearity": check_linearity,
    "plan_coverage": check_plan_coverage,
    "bad_input": check_bad_input,
    "perf": check_perf,
    "compiles": check_compiles,
    "index_width": check_index_width,
}


# Properties of this project's own machinery, with why a foreign subject (subjects.Subject.foreign)
# has nothing for them to check.
WY_ASCEND_ONLY = {
    "plan_coverage": "it checks wy_ascend's launch planner, which a foreign subject does not use",
    "perf": "its bounds are wy_ascend's performance targets on a device backend",
}


def applies(name: str, case: Case) -> str | None:
    """Why property ``name`` does not apply to ``case``'s subject, or None where it does."""
    return WY_ASCEND_ONLY.get(name) if subject_of(case).foreign else None


def run_property(name: str, case: Case) -> Metrics:
    """Run property ``name`` on ``case`` (raises PropertyFailure when it does not hold; ValueError
    where it does not apply to the case's subject or the subject cannot run on its backend)."""
    if name not in PROPERTIES:
        raise ValueError(f"property must be one of {sorted(PROPERTIES)}, got {name!r}")
    why = applies(name, case)
    if why is not None:
        raise ValueError(f"property {name!r} does not apply to subject {case.subject!r}: {why}")
    subject_of(case).check(backend_name(case))
    resolve_backend(backend_name(case), device_of(case))
    return PROPERTIES[name](case)
