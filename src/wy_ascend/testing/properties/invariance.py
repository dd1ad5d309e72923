"""The properties that run one problem two ways and compare the results bit for bit (``_bitwise``): the
partition knobs against the defaults (``launch_invariance``), memory layouts against contiguous
arguments (``memory_layout``), a packed batch against its sequences alone and a fixed batch against
its rows packed (``varlen_split``), float32 gates against narrow ones (``widened_gates``) and grouped
heads against repeated keys (``grouped_heads``). Where the two ways are two compiles of one task body
they are held to the rounding of two compiles instead (``_compiles``, ``_compile_tolerances``)."""

from __future__ import annotations

import math
from typing import Any

import torch

from ...backends import BACKENDS
from ..case import Case, Inputs, float64_device
from ..failure import Metrics, PropertyFailure
from ..phases import phase
from .bounds import UNIT_ROUNDOFF, _norms, _ratio, _read, rel_rms
from .common import BWD_NAMES, FWD_NAMES, _groups_dk, backend_name, build_inputs, run_ops, subject_of

# Knobs that re-partition the same work, or pick a kernel variant (operand reloads, the beta/g
# layout, the Ascend emulation's bookkeeping), without changing any arithmetic.
PARTITION_KNOBS = ("max_blocks", "num_cores", "mode", "max_tasks", "dot_guard", "gate_head_major", "emulate")


@phase("comparison")
def _bitwise(label: str, a: dict[str, torch.Tensor | None], b: dict[str, torch.Tensor | None],
             names: tuple[str, ...], within: dict[str, float] | None = None) -> Metrics:
    """``a`` and ``b`` equal bit for bit in each output of ``names``, or, for an output in ``within``, within
    that rel_rms (``_compile_tolerances``); PropertyFailure naming every output that is not."""
    within = within or {}
    rows = {}  # per output of equal shapes: [mismatched elements, *_norms], read in one transfer
    for name in names:
        x, y = a.get(name), b.get(name)
        if x is None and y is None:  # not passed (g), or an op the subject does not implement
            continue
        assert x is not None and y is not None
        if x.shape == y.shape:
            device = float64_device(x.device)
            rows[name] = torch.cat(((x.to(device) != y.to(device)).sum().to(torch.float64).view(1), _norms(x, y)))
    read = dict(zip(rows, _read(list(rows.values()))))
    metrics: Metrics = {}
    failures = []
    for name in names:
        if a.get(name) is None and b.get(name) is None:
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
    # Each sequence alone runs the packed batch's backward program: by its smaller task grid alone it may
    # take the other grouped-dk program (Backend.groups_dk), a second compile whose dg rounds apart (an
    # H200 nightly: 555 dg elements one fp32 unit apart, regressions/varlen_split-ecc014ec64e9.json).
    same = ({"group_dk": _groups_dk(BACKENDS[backend_name(case)], case)}
            if case.HV > case.H and "group_dk" not in case.knobs and not subject_of(case).foreign else {})
    metrics: Metrics = {}
    for i, (a, b) in enumerate(zip(case.cu_seqlens[:-1], case.cu_seqlens[1:])):
        if a == b:
            continue
        alone = run_ops(case.replace(T=b - a, cu_seqlens=(0, b - a)), _slice_tokens(inputs, a, b), **same)
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
    if "dk" not in grouped:  # a forward-only subject
        return metrics
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
        x = out.get(name)
        if x is not None:
            low = 0.0 if x.dtype == torch.float32 else UNIT_ROUNDOFF[str(x.dtype).removeprefix("torch.")]
            tols[name] = _compile_rounding(BT) + low
    return tols
