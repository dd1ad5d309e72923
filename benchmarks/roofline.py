"""Roofline of the headline shapes from one compare_peer.py run: each op's FLOPs and compulsory bytes
against the device's two limits, the measured copy bandwidth and dense bf16 matrix rate.

    python -m benchmarks.roofline --json docs/data/bench-h200.json --png docs/roofline_h200.png [--md table.md]

Each op of a shape sits at one arithmetic intensity (``Shape.flops_*`` / ``Shape.bytes_*``: the products
the kernels compute per chunk and value head, and each input read once, each output written once), the
same for both libraries; its height is those FLOPs over the kernel time of one call (``kernel_ms``,
torch.profiler's). The roof is min(matrix rate, intensity x copy bandwidth): a point's distance below it
is the fraction of its bound the kernel reaches. The limits are the run's own (``copy_GBps``,
``matmul_TFLOPs``; ``--matmul-tflops`` for a JSON from before compare_peer measured the rate).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.shapes import SHAPES

MARKERS = {"wy_ascend": "o", "fla": "x"}


def points(run: dict) -> list[dict]:
    """Per headline row of ``run``: shape, op, provider, GFLOP, GB, intensity, achieved TFLOP/s and the
    fraction of its roofline bound (bound time / kernel time)."""
    copy = run["copy_GBps"] * 1e9
    peak = run["matmul_TFLOPs"] * 1e12
    out = []
    for r in run["rows"]:
        shape = SHAPES.get(r["shape"])
        if shape is None:
            continue
        flops = shape.flops_fwd() if r["op"] == "fwd" else shape.flops_bwd()
        nbytes = shape.bytes_fwd() if r["op"] == "fwd" else shape.bytes_bwd()
        seconds = r["kernel_ms"] * 1e-3
        bound = max(nbytes / copy, flops / peak)
        out.append(dict(shape=r["shape"], op=r["op"], provider=r["provider"], gflop=flops / 1e9, gb=nbytes / 1e9,
                        intensity=flops / nbytes, tflops=flops / seconds / 1e12, us=seconds * 1e6,
                        bound_us=bound * 1e6, of_bound=bound / seconds,
                        limit="memory" if nbytes / copy >= flops / peak else "matrix"))
    return out


def markdown(run: dict) -> str:
    """The points as a table for the benchmark page."""
    lines = [f"Limits of this run: copy bandwidth {run['copy_GBps']:,.0f} GB/s, dense bf16 matrix rate "
             f"{run['matmul_TFLOPs']:,.0f} TFLOP/s (ridge at {run['matmul_TFLOPs'] * 1e3 / run['copy_GBps']:.0f} "
             "FLOP/byte).", "",
             "| shape | op | provider | GFLOP | GB | FLOP/byte | kernel us | bound us (limit) | TFLOP/s | of bound |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for p in points(run):
        lines.append(f"| {p['shape']} | {p['op']} | {p['provider']} | {p['gflop']:.1f} | {p['gb']:.3f} | "
                     f"{p['intensity']:.0f} | {p['us']:.1f} | {p['bound_us']:.1f} ({p['limit']}) | {p['tflops']:.0f} | "
                     f"{100 * p['of_bound']:.0f}% |")
    return "\n".join(lines)


def plot(run: dict, path: Path) -> None:
    """The roofline figure: the two limits and every headline point, ours and fla-core's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    copy = run["copy_GBps"] * 1e9
    peak = run["matmul_TFLOPs"] * 1e12
    pts = points(run)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [10.0, 500.0]
    ridge = peak / copy
    ax.plot([xs[0], ridge, xs[1]], [xs[0] * copy / 1e12, peak / 1e12, peak / 1e12], "k-", lw=1.5,
            label=f"roof: {run['copy_GBps']:,.0f} GB/s copy, {run['matmul_TFLOPs']:,.0f} TFLOP/s bf16")
    colors = dict(zip(sorted({p["shape"] for p in pts}), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for p in pts:  # forward hollow, backward filled; the table gives each point's numbers
        c = colors[p["shape"]]
        marker = MARKERS.get(p["provider"], "s")
        fill = {"color": c} if marker == "x" else {"facecolors": c if p["op"] == "bwd" else "none", "edgecolors": c}
        ax.scatter(p["intensity"], p["tflops"], marker=marker, s=70, **fill)
    for name, c in colors.items():
        ax.scatter([], [], color=c, marker="s", label=name)
    for prov, m in MARKERS.items():
        ax.scatter([], [], color="grey", marker=m, label=prov)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xs)
    ax.set_ylim(30, 1.5 * peak / 1e12)
    ax.set_xlabel("arithmetic intensity (FLOP per compulsory byte)")
    ax.set_ylabel("achieved TFLOP/s (matrix-product FLOPs / kernel time)")
    ax.set_title(f"{run['device']}: forward (hollow o) and backward (filled o) against the two limits")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", required=True, help="a compare_peer.py --json file")
    ap.add_argument("--png", default=None, help="write the figure here")
    ap.add_argument("--md", default=None, help="write the table here (else print it)")
    ap.add_argument("--matmul-tflops", type=float, default=None, help="the matrix rate where the JSON has none")
    args = ap.parse_args(argv)
    run = json.loads(Path(args.json).read_text())
    if args.matmul_tflops is not None:
        run["matmul_TFLOPs"] = args.matmul_tflops
    if not run.get("matmul_TFLOPs"):
        ap.error(f"{args.json} records no matmul_TFLOPs: give --matmul-tflops")
    table = markdown(run)
    if args.md:
        Path(args.md).write_text(table + "\n")
    else:
        print(table)
    if args.png:
        plot(run, Path(args.png))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
