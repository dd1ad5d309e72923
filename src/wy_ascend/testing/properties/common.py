"""The helpers every property shares: the case's backend and device (``backend_name``, ``device_of``),
its inputs (``build_inputs``), the UB model the planner is checked against (``ub_need`` .. ``supported``), and
``run_ops``, the one way a property runs the ops, with the checks every run makes on the way: that the ops
leave their arguments alone (``_untouched``), return outputs in memory of their own (``_own_memory``) and
each in its dtype, and launch what the case and knobs ask for (``_launched_as_asked``). They are one
module because every property module of the package uses them and none of them uses a property."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from ... import subjects
from ...backends import BACKENDS, CPU_INTERPRETER_CORES, Backend, LaunchConfig, _given, check_available, device_spec
from ...ops import observed
from ...planning import MIN_TILE, UB_SAFETY_MARGIN, DeviceSpec, batch_heads
from ...subjects import Subject
from ...validation import SUPPORTED_BT
from ..case import Case, Inputs
from ..failure import PropertyFailure
from ..phases import phase

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


def widest_tile(kernel: str, BT: int, dim: int, tile_cap: int, ub_bytes: int | None, min_tile: int = MIN_TILE,
                halve_padded: bool = False) -> int:
    """The widest power-of-two tile, at least MIN_TILE, over a K or V axis of ``dim`` that the
    UB model fits (``ub_need`` within the margin), capped by ``tile_cap`` and by ``dim`` rounded up
    to a power of two or ``min_tile`` if that is wider (a device's padded width): what the planner
    must pick (a narrower tile is only slower), except that with ``halve_padded`` (cuda) a tile half as
    wide, not below ``min_tile``, is the pick where its whole tiles cover ``dim`` with fewer padded columns."""
    top = max(MIN_TILE, min(tile_cap, max(min_tile, 1 << max(0, dim - 1).bit_length())))
    tiles = [t for t in (MIN_TILE << n for n in range(8)) if t <= top]
    widest = max((t for t in tiles if ub_bytes is None or ub_need(kernel, BT, t) <= ub_bytes * UB_SAFETY_MARGIN),
                 default=MIN_TILE)
    half = widest // 2
    if halve_padded and half >= max(min_tile, MIN_TILE) and math.ceil(dim / half) * half < math.ceil(dim / widest) * widest:
        return half
    return widest


def plannable(kernel: str, BT: int, ub_bytes: int | None) -> bool:
    """Whether a plan of ``kernel`` exists: BT is supported and, with a UB, the narrowest tile
    (MIN_TILE, what every dot needs) fits the capacity the planner may use (UB_SAFETY_MARGIN)."""
    return BT in SUPPORTED_BT and (ub_bytes is None or ub_need(kernel, BT, MIN_TILE) <= ub_bytes * UB_SAFETY_MARGIN)


def plan_spec(case: Case) -> DeviceSpec:
    """The spec a case plans with: its device's (``Case.device``) or its backend's with the
    interpreter's cores (CPU_INTERPRETER_CORES: what a cpu run plans with), under the case's knobs
    (no device is queried)."""
    if case.device is not None:
        return device_spec(case.device, case.config())
    cores = case.knobs.get("num_cores") or CPU_INTERPRETER_CORES
    return BACKENDS[backend_name(case)].spec(torch.device("cpu"), case.config(num_cores=cores))


def supported(case: Case) -> bool:
    """Whether both kernels of the case can be planned, by the model (``plannable``), not by
    asking the planner: a planner that wrongly refuses must fail a property, not narrow the draws."""
    ub = plan_spec(case).ub_bytes
    return all(plannable(kernel, case.BT, ub) for kernel in LIVE_FP32)


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
    (``_untouched``), return outputs in memory of their own (``_own_memory``), each in its dtype and, for
    this project's ops, launch what the case and knobs ask for (``_launched_as_asked``). A forward-only
    subject's outputs are w and u alone (no key for the backward's)."""
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
    outputs: dict[str, torch.Tensor | None] = dict(w=w, u=u)
    if backward is not None:
        with phase("kernel"), observed(lambda *launch: seen["bwd"].append(launch)):
            dk, dv, dbeta, dg = backward(**args, dw=dw, du=du, config=config)
        _untouched("prepare_wy_repr_bwd", before)
        outputs.update(dk=dk, dv=dv, dbeta=dbeta, dg=dg)
    if not subject_of(case).foreign:  # what reaches a launch is this project's (a foreign one's is its own)
        for kernel, launches in seen.items():
            _launched_as_asked(asked, kernel, launches)
    _own_memory(outputs, before)
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
    from ...interpreter import emulation_default

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


def _reach(x: torch.Tensor) -> tuple[int, int, int] | None:
    """(storage address, first byte, end byte) of the bytes ``x`` can address; None for an empty tensor."""
    if x.numel() == 0:
        return None
    first = int(x.storage_offset()) * x.element_size()
    span = sum((int(n) - 1) * stride for n, stride in zip(x.shape, x.stride())) * x.element_size() + x.element_size()
    return x.untyped_storage().data_ptr(), first, first + span


@phase("comparison")
def _own_memory(outputs: dict[str, torch.Tensor | None],
                before: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    """PropertyFailure naming every output whose memory overlaps an argument's or another output's. A caller
    owns what the ops return and writes it (gradients accumulate in place): that must change no argument and
    no other output, whatever the values returned. Outputs carved from one allocation without overlap pass."""
    reach = {name: _reach(x) for name, x in outputs.items() if x is not None}
    reach |= {f"argument {name}": _reach(x) for name, (x, _) in before.items()}
    names = list(reach)
    shared = [f"{a} with {b}" for i, a in enumerate(names) if a in outputs for b in names[i + 1:]
              if _overlap(reach[a], reach[b])]
    if shared:
        raise PropertyFailure(f"outputs share memory: {', '.join(shared)}", {"shared": shared})


def _overlap(a: tuple[int, int, int] | None, b: tuple[int, int, int] | None) -> bool:
    return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


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
