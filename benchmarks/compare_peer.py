"""Side-by-side timing of wy_ascend against fla-core's CUDA kernels on the named shapes.

    python benchmarks/compare_peer.py [--backend cuda] [--json out.json] [--shapes NAME ...] [--tile-cap N]

Times with triton.testing.do_bench (device-synchronized, warm-up, median), reports
bandwidth as compulsory bytes / time against the H200's HBM peak, and the ratio to fla.
Both backwards return dk per key head (fla sums its per-value-head dk over each group
inside prepare_wy_repr_bwd, as ours does), so the outputs timed are the same.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys

import torch

import wy_ascend
from benchmarks.shapes import H200_HBM_PEAK, SHAPES


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "-"


def _peer():
    try:
        from fla.ops.gated_delta_rule import wy_fast
    except Exception as e:  # noqa: BLE001 - any import failure means "no peer"
        print(f"fla-core not available ({type(e).__name__}: {e}); timing wy_ascend only")
        return None
    return wy_fast


def main(argv: list[str] | None = None) -> int:
    import triton.testing

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--json", default=None)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--tile-cap", type=int, default=None, help="LaunchConfig.tile_cap (default: the backend's)")
    args = ap.parse_args(argv)
    config = wy_ascend.LaunchConfig(tile_cap=args.tile_cap)
    peer = _peer()
    rows = []
    for name in args.shapes:
        shape = SHAPES[name]
        x = shape.inputs("cuda")
        fwd_args = (x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"])
        bwd_args = (x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], x["g"], x["cu_seqlens"])
        providers = {"wy_ascend": (
            functools.partial(wy_ascend.recompute_w_u_fwd, *fwd_args, backend=args.backend, config=config),
            functools.partial(wy_ascend.prepare_wy_repr_bwd, *bwd_args, backend=args.backend, config=config),
        )}
        if peer is not None:
            providers["fla"] = (functools.partial(peer.recompute_w_u_fwd, *fwd_args),
                                functools.partial(peer.prepare_wy_repr_bwd, *bwd_args))
        for prov, (f, b) in providers.items():
            for op, fn, nbytes in (("fwd", f, shape.bytes_fwd()), ("bwd", b, shape.bytes_bwd())):
                ms = triton.testing.do_bench(fn, warmup=50, rep=200)
                rows.append(dict(shape=name, provider=prov, op=op, ms=ms, GBps=nbytes / ms / 1e6,
                                 hbm_frac=nbytes / (ms * 1e-3) / H200_HBM_PEAK))
        del x
        torch.cuda.empty_cache()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  python {platform.python_version()}")
    print(f"{'shape':34s} {'op':4s} {'provider':10s} {'ms':>8s} {'GB/s':>8s} {'HBM%':>6s} {'ours/fla':>8s}")
    for r in rows:
        ratio = ""
        if r["provider"] == "wy_ascend":
            ref = [q for q in rows if q["shape"] == r["shape"] and q["op"] == r["op"] and q["provider"] == "fla"]
            ratio = f"{r['ms'] / ref[0]['ms']:.2f}" if ref else ""
        print(f"{r['shape']:34s} {r['op']:4s} {r['provider']:10s} {r['ms']:8.3f} {r['GBps']:8.0f} "
              f"{100 * r['hbm_frac']:5.1f}% {ratio:>8s}")
    if args.json:
        with open(args.json, "w") as fh:
            import triton

            versions = dict(torch=torch.__version__, triton=triton.__version__, python=platform.python_version(),
                            fla=_version("fla-core"))
            json.dump(dict(device=torch.cuda.get_device_name(), versions=versions,
                           command=" ".join(["python", *sys.argv]), rows=rows), fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
