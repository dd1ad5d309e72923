"""One op call of a named benchmark shape inside an NVTX range, for Nsight Compute.

    ncu --clock-control none --nvtx --nvtx-include 'wy_prof/' -k regex:wy_bwd -c 1 --section ... \\
        python benchmarks/ncu_target.py --shape fixed_B8_T4096_H16_K128 --op bwd [--provider fla]

The op runs ``--warm`` times first (compile and autotune, outside the range), then once inside the
NVTX range ``wy_prof``, so ncu's ``--nvtx-include 'wy_prof/'`` profiles the timed call's kernels and
none of the autotuner's. Prints the autotuner's pick and each compiled variant's registers, spills
and shared memory (what ncu's launch statistics show for the one profiled config, for all of them).
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.compare_peer import _calls
from benchmarks.shapes import GRID, SHAPES


def compiled_summary(kernel: object) -> list[str]:
    """The autotuner's picks and every compiled variant's resources of a Triton (autotuned) kernel."""
    lines = []
    for key, config in getattr(kernel, "cache", {}).items():
        lines.append(f"  pick {key}: {config}")
    fn = getattr(kernel, "fn", kernel)
    while hasattr(fn, "fn") and not hasattr(fn, "device_caches"):
        fn = fn.fn
    for per_device in getattr(fn, "device_caches", {}).values():
        for compiled in per_device[0].values():
            meta = compiled.metadata
            lines.append(f"  compiled: warps={meta.num_warps} stages={meta.num_stages} regs={compiled.n_regs} "
                         f"spills={compiled.n_spills} shared={meta.shared}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shape", required=True, help="a name from shapes.SHAPES or shapes.GRID")
    ap.add_argument("--op", choices=("fwd", "bwd"), required=True)
    ap.add_argument("--provider", choices=("ours", "fla"), default="ours")
    ap.add_argument("--warm", type=int, default=3, help="calls before the profiled one (compile, autotune)")
    args = ap.parse_args(argv)
    if args.shape not in {**SHAPES, **GRID}:
        ap.error(f"unknown shape {args.shape!r}")
    fn = _calls(args.shape, "cuda", None, peer=args.provider == "fla")[args.op][args.provider]
    for _ in range(args.warm):
        fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("wy_prof")
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    if args.provider == "ours":
        from wy_ascend import backends

        kernels = [backends._autotuned(args.op, None, True)]
    else:
        from fla.ops.gated_delta_rule import wy_fast

        kernels = [wy_fast.recompute_w_u_fwd_kernel if args.op == "fwd" else wy_fast.prepare_wy_repr_bwd_kernel]
    print(f"{args.shape} {args.op} {args.provider}:")
    for kernel in kernels:
        print("\n".join(compiled_summary(kernel)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
