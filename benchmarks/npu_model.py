"""NPU launch-plan and HBM-traffic model of the backward: our fused kernel vs the seed's 7 stages.

    python -m benchmarks.npu_model [--num-cores 24] [--json out.json]

No device is needed: everything is a pure function of a problem's dimensions and a
``planning.DeviceSpec`` (the npu backend's, with 910B numbers). Traffic is counted
pessimistically: no L2, so every load a kernel issues is HBM traffic, including each value
head's own read of its key head's ``k`` and every re-read of ``k``, ``dw`` and ``A``. Partial
chunks are counted as full rows (``BT`` columns of A per token). Host-side torch ops (layout
transposes, zero-filled scratch, group sums) count as launches and as traffic.

Our backward (ops.prepare_wy_repr_bwd on the npu backend):
  host    beta, g -> [B,HV,T] (HV > 1)                  read + write
  kernel  wy_bwd_kernel: k, dw read twice (two K loops), A read nK + nV + 2 times,
          v, du, beta, g once; writes dk per value head (fp32 when HV > H), dv, dbeta, dg
  host    dk group sum (HV > H): sum over groups (fp32) then cast
  host    dbeta, dg -> [B,T,HV] (HV > 1)

The seed (/work/shared/seed/wy_fast_seed.py, prepare_wy_repr_bwd_npu): beta/g transposes,
exp2(g) precompute (fixed length), zero-filled fp32 scratch dA_scr, dA_mid, dA_out, a2_scr
[B,T,HV,BT] and col_acc [B,NT,HV,BT]; stages kv (core grid), da_mask_dot1, da_dot2, da_gate
(grid, chunked under the 65535-block limit with NT_OFFSET/BH_OFFSET constexpr: one compile per
chunk), finalize_k (core grid), finalize_a2, finalize_dg (grid); then the dk group sum and the
dbeta/dg transposes back.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, field

import torch

from benchmarks.shapes import SHAPES, Shape
from wy_ascend.backends import ASCEND_MAX_BLOCKS, ASCEND_UB_BYTES, BACKENDS, LaunchConfig
from wy_ascend.planning import DeviceSpec, plan

NPU_910B_CORES = 24  # cube cores of a 910B (A2)
SEED_DG_BLOCK = 16  # the seed's _DG_BLK: sub-block of the da_gate / finalize_dg stages
FP32 = 4
# Model-only problem (never timed): large enough that the seed's grid stages pass the
# 65535-block limit and chunk on the host (NT_OFFSET constexpr: one compile per chunk).
MODEL_ONLY = {s.name: s for s in (Shape("limit_B64_T16384_H16_K128", B=64, T=16384, H=16, HV=16, K=128, V=128),)}


@dataclass(frozen=True)
class Problem:
    """Dimensions of one backward call. ``NT`` chunks per batch row (varlen: all chunks, B == 1)."""

    name: str
    B: int
    T: int
    H: int
    HV: int
    K: int
    V: int
    BT: int
    NT: int
    varlen: bool
    use_g: bool = True
    itemsize: int = 2  # k, v, A, beta, dw, du and their gradients (bf16)
    gate_itemsize: int = 4  # g and dg (fp32)

    @property
    def rows(self) -> int:
        """(token, value head) pairs: the unit of every per-head tensor."""
        return self.B * self.T * self.HV

    @property
    def BH(self) -> int:
        return self.B * self.HV

    @property
    def tasks(self) -> int:
        return self.NT * self.BH


@dataclass(frozen=True)
class Stage:
    """One launch group of a design: a Triton kernel or a host-side torch op."""

    name: str
    kind: str  # "kernel" or "host"
    launches: int
    compiles: int
    reads: dict[str, int] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)
    scratch: int = 0  # bytes of temporary buffers this stage allocates

    @property
    def bytes(self) -> int:
        return sum(self.reads.values()) + sum(self.writes.values())


def seq_lens(shape: Shape, seed: int = 0) -> list[int]:
    """Sequence lengths of ``shape`` exactly as ``Shape.inputs`` cuts them (checked by a test)."""
    if not shape.n_seqs:
        return [shape.T] * shape.B
    cuts = torch.randperm(shape.T - 1, generator=torch.Generator().manual_seed(seed))[: shape.n_seqs - 1] + 1
    cu = [0, *sorted(int(c) for c in cuts), shape.T]
    return [b - a for a, b in zip(cu[:-1], cu[1:])]


def problem_of(shape: Shape, use_g: bool = True) -> Problem:
    """The model's view of a benchmark shape (bf16 I/O, fp32 gate, as ``Shape.inputs`` builds it)."""
    nt = sum(math.ceil(n / shape.BT) for n in seq_lens(shape)) if shape.n_seqs else math.ceil(shape.T / shape.BT)
    return Problem(shape.name, shape.B, shape.T, shape.H, shape.HV, shape.K, shape.V, shape.BT, nt,
                   varlen=bool(shape.n_seqs), use_g=use_g)


def npu_spec(num_cores: int = NPU_910B_CORES) -> DeviceSpec:
    """The planner's spec as the npu backend builds it, with ``num_cores`` given (no device query)."""
    return BACKENDS["npu"].spec(torch.device("cpu"), LaunchConfig(num_cores=num_cores))


def compulsory_bwd(p: Problem) -> int:
    """Bytes the backward must move: read k, v, beta, g, A, dw, du once; write dk, dv, dbeta, dg."""
    n, s, gs = p.B * p.T, p.itemsize, p.gate_itemsize
    reads = n * (s * (p.H * p.K + p.HV * (2 * p.V + 1 + p.BT + p.K)) + gs * p.HV * p.use_g)
    writes = n * (s * (p.H * p.K + p.HV * (p.V + 1)) + gs * p.HV * p.use_g)
    return reads + writes


def _transpose(name: str, rows: int, itemsize: int) -> Stage:
    """A [B,T,HV] <-> [B,HV,T] contiguous copy."""
    return Stage(name, "host", 1, 0, {name.split()[0]: rows * itemsize}, {name.split()[0]: rows * itemsize},
                 scratch=rows * itemsize)


def _gate_transposes(p: Problem, beta: str, g: str, layout: str) -> list[Stage]:
    """The head-major layout's host transposes of ``beta`` and (gated) ``g`` into ``layout``."""
    if p.HV == 1:
        return []
    out = [_transpose(f"{beta} -> {layout}", p.rows, p.itemsize)]
    if p.use_g:
        out.append(_transpose(f"{g} -> {layout}", p.rows, p.gate_itemsize))
    return out


def _layout_in(p: Problem) -> list[Stage]:
    return _gate_transposes(p, "beta", "g", "[B,HV,T]")


def _layout_out(p: Problem) -> list[Stage]:
    return _gate_transposes(p, "dbeta", "dg", "[B,T,HV]")


def ours_bwd(p: Problem, spec: DeviceSpec) -> list[Stage]:
    """Stages of our backward on ``spec`` (ops.prepare_wy_repr_bwd with the npu backend)."""
    lp = plan("bwd", NT=p.NT, BH=p.BH, BT=p.BT, K=p.K, V=p.V, spec=spec)
    nK, nV = math.ceil(p.K / lp.BK), math.ceil(p.V / lp.BV)
    r, s, gs = p.rows, p.itemsize, p.gate_itemsize
    grouped = p.HV != p.H
    dk_size = FP32 if grouped else s
    reads = dict(k=2 * r * p.K * s, dw=2 * r * p.K * s, A=(nK + nV + 2) * r * p.BT * s,
                 v=r * p.V * s, du=r * p.V * s, beta=r * s)
    writes = dict(dk=r * p.K * dk_size, dv=r * p.V * s, dbeta=r * s)
    if p.use_g:
        reads["g"] = r * gs
        writes["dg"] = r * gs
    stages = _layout_in(p)
    stages.append(Stage(f"wy_bwd_kernel (BK={lp.BK}, BV={lp.BV}, {lp.launches[0].grid[0]} programs)", "kernel",
                        lp.num_launches, 1, reads, writes, scratch=r * p.K * FP32 if grouped else 0))
    if grouped:
        n_hk = p.B * p.T * p.H * p.K
        stages.append(Stage("dk group sum (fp32) + cast", "host", 2, 0,
                            {"dk_hv": r * p.K * FP32, "dk_sum": n_hk * FP32},
                            {"dk_sum": n_hk * FP32, "dk": n_hk * s}, scratch=n_hk * FP32))
    return stages + _layout_out(p)


def seed_grid_launches(NT: int, BH: int, max_grid: int = ASCEND_MAX_BLOCKS) -> list[tuple[int, int, int, int]]:
    """(nt_off, nt_len, bh_off, bh_len) of the seed's ``_launch_wy_kernel`` host chunking."""
    out = []
    max_nt = max(1, max_grid // max(BH, 1))
    for nt_off in range(0, NT, max_nt):
        nt_len = min(max_nt, NT - nt_off)
        max_bh = max(1, max_grid // max(nt_len, 1))
        out.extend((nt_off, nt_len, bh_off, min(max_bh, BH - bh_off)) for bh_off in range(0, BH, max_bh))
    return out


def seed_bwd(p: Problem, max_grid: int = ASCEND_MAX_BLOCKS) -> list[Stage]:
    """Stages of the seed's prepare_wy_repr_bwd_npu (7 kernels with a gate, 4 without)."""
    r, s, gs, BT = p.rows, p.itemsize, p.gate_itemsize, p.BT
    n_sub = BT // SEED_DG_BLOCK
    A32 = r * BT * FP32  # one [B,T,HV,BT] fp32 scratch
    grid = seed_grid_launches(p.NT, p.BH, max_grid)
    # NT_OFFSET / BH_OFFSET are constexpr: each distinct pair compiles a new kernel (varlen: NT_OFFSET 0).
    compiles = len({(0 if p.varlen else t, b) for t, _, b, _ in grid})

    def grid_stage(name: str, reads: dict[str, int], writes: dict[str, int]) -> Stage:
        return Stage(name, "kernel", len(grid), compiles, reads, writes)

    col = p.B * p.NT * p.HV * BT * FP32
    stages = _layout_in(p)
    if p.use_g and not p.varlen:
        stages.append(Stage("exp2(g) precompute", "host", 1, 0, {"g": r * gs}, {"exp2(g)": r * gs}, scratch=r * gs))
    for name in ("dA_scr", "dA_mid", "dA_out", "a2_scr"):
        stages.append(Stage(f"zero {name} [B,T,HV,BT] fp32", "host", 1, 0, {}, {name: A32}, scratch=A32))
    stages.append(Stage("zero col_acc [B,NT,HV,BT] fp32", "host", 1, 0, {}, {"col_acc": col}, scratch=col))
    kv_reads = dict(k=r * p.K * s, dw=r * p.K * s, v=r * p.V * s, du=r * p.V * s, A=r * BT * s, beta=r * s)
    kv_writes = dict(dk=r * p.K * s, dv=r * p.V * s, dA_scr=A32, db=r * s)
    if p.use_g:
        kv_reads["g"] = r * gs
        kv_writes["dg"] = r * gs
    # dk [B,T,HV,K] in k's dtype: an extra buffer only with grouped heads (else it is the output).
    dk_scratch = r * p.K * s if p.HV != p.H else 0
    stages.append(Stage("kv (core grid)", "kernel", 1, 1, kv_reads, kv_writes, scratch=dk_scratch))
    stages.append(grid_stage("da_mask_dot1", {"A": r * BT * s, "dA_scr": A32}, {"dA_mid": A32}))
    stages.append(grid_stage("da_dot2", {"A": r * BT * s, "dA_mid": A32}, {"dA_out": A32}))
    if p.use_g:
        stages.append(grid_stage("da_gate", {"g": (1 + n_sub) * r * gs, "dA_out": A32}, {"dA_out": A32}))
    stages.append(Stage("finalize_k (core grid)", "kernel", 1, 1,
                        dict(beta=r * s, db=r * s, dA_out=A32, k=r * p.K * s, dk=r * p.K * s),
                        dict(dk=r * p.K * s, db=r * s)))
    if p.use_g:
        stages.append(grid_stage("finalize_a2", {"beta": r * s, "k": r * p.K * s}, {"a2_scr": A32}))
        stages.append(grid_stage("finalize_dg", {"dA_out": A32, "a2_scr": A32, "col_acc": (n_sub + 1) * r * FP32,
                                                 "dg": 2 * r * gs},
                                 {"col_acc": (n_sub + 1) * r * FP32, "dg": 2 * r * gs}))
    if p.HV != p.H:
        n_hk = p.B * p.T * p.H * p.K
        stages.append(Stage("dk group sum", "host", 1, 0, {"dk_hv": r * p.K * s}, {"dk": n_hk * s}))
    return stages + _layout_out(p)


@dataclass(frozen=True)
class Summary:
    """Totals of one design on one problem."""

    design: str
    kernel_launches: int
    host_ops: int
    compiles: int
    hbm_bytes: int
    compulsory_bytes: int
    scratch_bytes: int

    @property
    def over_compulsory(self) -> float:
        return self.hbm_bytes / self.compulsory_bytes


def summarize(design: str, p: Problem, stages: list[Stage]) -> Summary:
    kernels = [st for st in stages if st.kind == "kernel"]
    return Summary(design, sum(st.launches for st in kernels), sum(st.launches for st in stages if st.kind == "host"),
                   sum(st.compiles for st in kernels), sum(st.bytes for st in stages), compulsory_bwd(p),
                   sum(st.scratch for st in stages))


def _summary_dict(s: Summary) -> dict:
    return dict(asdict(s), over_compulsory=s.over_compulsory)


def model(num_cores: int = NPU_910B_CORES, shapes: dict[str, Shape] | None = None) -> list[dict]:
    """For every shape (default: SHAPES and MODEL_ONLY): the problem, the npu spec, both designs'
    stages and summaries (JSON-ready)."""
    spec = npu_spec(num_cores)
    out = []
    for shape in (shapes or {**SHAPES, **MODEL_ONLY}).values():
        p = problem_of(shape)
        designs = {"ours": ours_bwd(p, spec), "seed": seed_bwd(p, spec.max_blocks or ASCEND_MAX_BLOCKS)}
        out.append(dict(
            shape=shape.name, model_only=shape.name in MODEL_ONLY, problem=asdict(p), tasks=p.tasks,
            spec=dict(num_cores=spec.num_cores, max_blocks=spec.max_blocks, ub_bytes=spec.ub_bytes),
            stages={d: [dict(asdict(st), bytes=st.bytes) for st in sts] for d, sts in designs.items()},
            summary={d: _summary_dict(summarize(d, p, sts)) for d, sts in designs.items()},
        ))
    return out


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f}"


def markdown(results: list[dict], stages: bool = True) -> str:
    """Summary table (one row per shape and design) and, with ``stages``, per-stage tables."""
    spec = results[0]["spec"] if results else {}
    lines = [
        f"NPU spec: {spec.get('num_cores')} cores (910B), max {spec.get('max_blocks')} blocks per launch, "
        f"UB {spec.get('ub_bytes', ASCEND_UB_BYTES) // 1024} KiB. Traffic in MiB, pessimistic (no L2).",
        "",
        "| shape | design | kernel launches | host ops | compiles | HBM MiB | compulsory MiB | x compulsory "
        "| scratch MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for res in results:
        name = res["shape"] + (" (model only)" if res.get("model_only") else "")
        for d in ("seed", "ours"):
            s = res["summary"][d]
            lines.append(f"| {name} | {d} | {s['kernel_launches']} | {s['host_ops']} | {s['compiles']} | "
                         f"{_mb(s['hbm_bytes'])} | {_mb(s['compulsory_bytes'])} | {s['over_compulsory']:.2f} | "
                         f"{_mb(s['scratch_bytes'])} |")
        o, sd = res["summary"]["ours"], res["summary"]["seed"]
        lines.append(f"| {name} | **ours / seed** | {o['kernel_launches']}/{sd['kernel_launches']} | "
                     f"{o['host_ops']}/{sd['host_ops']} | {o['compiles']}/{sd['compiles']} | "
                     f"**{o['hbm_bytes'] / sd['hbm_bytes']:.2f}x** | | | "
                     f"{o['scratch_bytes'] / max(sd['scratch_bytes'], 1):.2f}x |")
    if stages:
        for res in results:
            lines += ["", f"Stages, {res['shape']} ({res['tasks']:,} (chunk, head) tasks):", "",
                      "| design | stage | kind | launches | reads MiB | writes MiB | total MiB | of compulsory |",
                      "|---|---|---|---:|---:|---:|---:|---:|"]
            comp = res["summary"]["ours"]["compulsory_bytes"]
            for d in ("seed", "ours"):
                for st in res["stages"][d]:
                    rd = ", ".join(f"{k} {_mb(v)}" for k, v in st["reads"].items()) or "-"
                    wr = ", ".join(f"{k} {_mb(v)}" for k, v in st["writes"].items()) or "-"
                    lines.append(f"| {d} | {st['name']} | {st['kind']} | {st['launches']} | {rd} | {wr} | "
                                 f"{_mb(st['bytes'])} | {st['bytes'] / comp:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-cores", type=int, default=NPU_910B_CORES)
    ap.add_argument("--json", default=None, help="also write the model as JSON here")
    ap.add_argument("--no-stages", action="store_true", help="summary table only")
    args = ap.parse_args(argv)
    results = model(args.num_cores)
    print(markdown(results, stages=not args.no_stages))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
