"""Side-by-side timing of wy_ascend against fla-core's CUDA kernels on the named shapes.

    python benchmarks/compare_peer.py [--backend cuda] [--json out.json] [--shapes NAME ...] [--tile-cap N]
    python benchmarks/compare_peer.py --grid [--json grid.json]     # issue 13's shape grid (shapes.GRID)
    python benchmarks/compare_peer.py --all --warm-jobs 12 --json all.json   # both, compiled in 12 processes first
    python benchmarks/compare_peer.py --ours-only ...   # wy_ascend alone (a candidate beside the shipped code)

Times with triton.testing.do_bench (device-synchronized, warm-up, median; the least of
``--rounds`` medians, the providers alternating) and, as ``kernel_ms``, the device time of a call's
kernels alone (torch.profiler; the host's time between launches left out), reports
bandwidth as compulsory bytes / time against the H200's HBM peak and against the device's
measured copy bandwidth (``copy_frac``: testing/perf.py's ``device_limits``, what a pure streaming
copy moves here; a kernel that must move its compulsory bytes cannot beat it), and the ratio to fla.
Both backwards return dk per key head (fla sums its per-value-head dk over each group
inside prepare_wy_repr_bwd, as ours does), so the outputs timed are the same. Each row also
has ``first_s``: the first call's wall seconds (compile, and autotuning where it is on).
Rows are written to ``--json`` after every shape, so a run cut short keeps what it measured.

``--warm-jobs N`` first compiles every shape's kernels in N processes, one autotune config a task
(wy_ascend/testing/warm.py's ``warm_all``), so that the timing process finds every kernel in Triton's
cache: fla-core autotunes 6 to 17 s per op and shape, which made the 30-shape grid outlast a device
session. The warm-up processes share the GPU, so their picks are thrown away (each autotuner holds
one config there; fla-core's result cache is off in them); the timing process autotunes both again,
alone on the GPU. Its ``first_s`` then measures a first call with compiled kernels, not a cold compile.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import wy_ascend
from benchmarks.shapes import GRID, H200_HBM_PEAK, SHAPES
from wy_ascend.testing.perf import device_limits
from wy_ascend.testing.warm import run_config, warm_all

# Seconds the whole warm-up may take (34 shapes' ~700 compiles in 14 processes: ~2 min expected).
WARM_DEADLINE_S = 480.0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "-"


@functools.cache
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
    ap.add_argument("--shapes", nargs="*", default=None, help="names from shapes.SHAPES (or shapes.GRID with --grid)")
    ap.add_argument("--grid", action="store_true", help="the shapes of shapes.GRID instead of shapes.SHAPES")
    ap.add_argument("--all", action="store_true", help="the shapes of shapes.SHAPES and shapes.GRID")
    ap.add_argument("--warm-jobs", type=int, default=0, help="compile every shape in this many processes first")
    ap.add_argument("--rep", type=int, default=200, help="do_bench repetition ms (warm-up: a quarter of it)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="do_bench medians per op, providers alternating; the least is kept (noise only adds time)")
    ap.add_argument("--tile-cap", type=int, default=None, help="LaunchConfig.tile_cap (default: the backend's)")
    ap.add_argument("--ours-only", action="store_true", help="time wy_ascend alone, even where fla-core is installed")
    args = ap.parse_args(argv)
    peer = None if args.ours_only else _peer()
    table = {**SHAPES, **GRID} if args.all else GRID if args.grid else SHAPES
    unknown = [n for n in args.shapes or [] if n not in table]
    if unknown:
        ap.error(f"unknown shapes {unknown}; known: {sorted(table)}")
    names = args.shapes or list(table)
    if args.warm_jobs > 0:
        _warm(names, args)
    rows: list[dict] = []
    _spin_up()
    copy_bw = device_limits("cuda")[0]
    matmul = _matmul_tflops()
    print(f"copy bandwidth: {copy_bw / 1e6:.0f} GB/s; bf16 matrix product: {matmul:.0f} TFLOP/s", flush=True)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  python {platform.python_version()}")
    print(f"{'shape':34s} {'op':4s} {'provider':10s} {'ms':>8s} {'GB/s':>8s} {'HBM%':>6s} {'copy%':>6s} {'ours/fla':>8s} "
          f"{'kern ms':>8s} {'kern o/f':>8s}", flush=True)
    for name in names:
        shape = table[name]
        by_op = _calls(name, args.backend, args.tile_cap, peer is not None)
        providers = {PROVIDER_NAMES[p]: (by_op["fwd"][p], by_op["bwd"][p]) for p in by_op["fwd"]}
        calls = [(prov, op, fn, nbytes) for prov, (f, b) in providers.items()
                 for op, fn, nbytes in (("fwd", f, shape.bytes_fwd()), ("bwd", b, shape.bytes_bwd()))]
        first: dict[tuple[str, str], float] = {}
        for prov, op, fn, _ in calls:
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            first[prov, op] = time.perf_counter() - start
        # Small shapes are host-bound (do_bench then times Python's work for a call, which the
        # machine's other activity stretches): rounds alternate the providers, the least median counts.
        best = {(prov, op): triton.testing.do_bench(fn, warmup=args.rep // 4, rep=args.rep) for prov, op, fn, _ in calls}
        for _ in range(args.rounds - 1):
            for prov, op, fn, _ in calls:
                best[prov, op] = min(best[prov, op], triton.testing.do_bench(fn, warmup=args.rep // 4, rep=args.rep))
        kernel = {(prov, op): _kernel_ms(fn) for prov, op, fn, _ in calls}
        for prov, op, _, nbytes in calls:
            ms = best[prov, op]
            rows.append(dict(shape=name, provider=prov, op=op, ms=ms, GBps=nbytes / ms / 1e6,
                             hbm_frac=nbytes / (ms * 1e-3) / H200_HBM_PEAK, copy_frac=nbytes / ms / copy_bw,
                             first_s=first[prov, op], kernel_ms=kernel[prov, op],
                             **({"config": _picked(op)} if prov == PROVIDER_NAMES["ours"] else {})))
        del by_op, providers, calls
        torch.cuda.empty_cache()
        if args.json:
            _write(args.json, rows, warm_jobs=args.warm_jobs, rounds=args.rounds, copy_bw=copy_bw, matmul=matmul)
        _print_shape([r for r in rows if r["shape"] == name])  # as measured: a run cut short shows what it has
    return 0


def _print_shape(rows: list[dict]) -> None:
    """One shape's rows of the table, ours beside fla-core's where both ran (do_bench and kernel-time ratios)."""
    for r in rows:
        ratio = kratio = ""
        if r["provider"] == "wy_ascend":
            ref = [q for q in rows if q["op"] == r["op"] and q["provider"] == "fla"]
            ratio = f"{r['ms'] / ref[0]['ms']:.2f}" if ref else ""
            kratio = f"{r['kernel_ms'] / ref[0]['kernel_ms']:.2f}" if ref else ""
        print(f"{r['shape']:34s} {r['op']:4s} {r['provider']:10s} {r['ms']:8.3f} {r['GBps']:8.0f} "
              f"{100 * r['hbm_frac']:5.1f}% {100 * r['copy_frac']:5.1f}% {ratio:>8s} {r['kernel_ms']:8.4f} {kratio:>8s}",
              flush=True)


def _kernel_ms(fn: Callable[[], Any], calls: int = 20) -> float:
    """Device time of one call's kernels in ms: their durations in torch.profiler's CUDA trace over
    ``calls`` calls, summed, per call. The host's time between launches is left out: on a shape whose
    host work outlasts its kernels, do_bench times the host, which varied 2-5x between rounds on the
    H200's host (the benchmark run of 2026-12-02 in docs/ledger.md: 23-52 us for one shape whose kernels took 8.6 us)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sum(e.device_time_total for e in prof.key_averages()) / calls / 1e3


def _picked(op: str) -> str | None:
    """The config the autotuner last ran for our ``op`` (None where the launch ran one config alone)."""
    from wy_ascend import backends

    config = getattr(backends._autotuned(op, None, backends.switch(backends.AUTOTUNE_ENV, True)), "best_config", None)
    return None if config is None else str(config)


def _matmul_tflops(n: int = 8192) -> float:
    """The device's dense bf16 matrix rate in TFLOP/s: an n x n x n product of random data (do_bench median),
    the roofline's second limit (benchmarks/roofline.py) beside the copy bandwidth."""
    import triton.testing

    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ms = triton.testing.do_bench(lambda: a @ b, warmup=25, rep=100)
    return 2 * n**3 / ms / 1e9


def _spin_up(seconds: float = 2.0) -> None:
    """Keep the GPU busy for ``seconds`` first: an idle H200 starts at a low clock (345 MHz seen),
    and the first shape's first provider was timed ~15% slow while the clock came up."""
    a = torch.randn(4096, 4096, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        a @ a
        torch.cuda.synchronize()


PROVIDER_NAMES = {"ours": "wy_ascend", "fla": "fla"}  # warm.py's providers, as the JSON names them


def _calls(name: str, backend: str, tile_cap: int | None, peer: bool = True) -> dict[str, dict[str, Callable[[], Any]]]:
    """Per op, per provider ("ours", and "fla" with ``peer``): the call of shape ``name`` on its cuda inputs."""
    x = {**SHAPES, **GRID}[name].inputs("cuda")
    fwd_args = (x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"])
    bwd_args = (x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], x["g"], x["cu_seqlens"])
    config = wy_ascend.LaunchConfig(tile_cap=tile_cap)
    calls: dict[str, dict[str, Callable[[], Any]]] = {
        "fwd": {"ours": functools.partial(wy_ascend.recompute_w_u_fwd, *fwd_args, backend=backend, config=config)},
        "bwd": {"ours": functools.partial(wy_ascend.prepare_wy_repr_bwd, *bwd_args, backend=backend, config=config)},
    }
    fla = _peer() if peer else None
    if fla is not None:
        calls["fwd"]["fla"] = functools.partial(fla.recompute_w_u_fwd, *fwd_args)
        calls["bwd"]["fla"] = functools.partial(fla.prepare_wy_repr_bwd, *bwd_args)
    return calls


def _compile_config(subject: tuple[str, str, int | None, bool], op: str, provider: str, index: int) -> str:
    """A warm-up task (warm.warm_all): one config of one op of one provider on shape ``subject[0]``."""
    return run_config(subject, torch.device("cuda"), lambda: _calls(*subject), op, provider, index)


def _warm(names: list[str], args: argparse.Namespace) -> None:
    """Compile every shape's kernels in ``args.warm_jobs`` processes, one config a task, before anything
    is timed; a task's error is printed (the timing process meets it again where it is real)."""
    subjects = [(name, args.backend, args.tile_cap, not args.ours_only) for name in names]
    done = warm_all(subjects, _compile_config, args.warm_jobs, deadline=WARM_DEADLINE_S)
    print(f"warm-up of {len(names)} shapes: {done.summary()}", flush=True)


def _write(path: str, rows: list[dict], warm_jobs: int = 0, rounds: int = 1, copy_bw: float = 0.0,
           matmul: float = 0.0) -> None:
    """The rows so far with the device, versions, command, warm-up, copy bandwidth and matrix rate (replaced
    atomically)."""
    import triton

    versions = dict(torch=torch.__version__, triton=triton.__version__, python=platform.python_version(),
                    fla=_version("fla-core"))
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(dict(device=torch.cuda.get_device_name(), versions=versions,
                       command=" ".join(["python", *sys.argv]), warm_jobs=warm_jobs, rounds=rounds,
                       copy_GBps=copy_bw / 1e6, matmul_TFLOPs=matmul,
                       autotune=os.environ.get("WY_ASCEND_AUTOTUNE", "1"), rows=rows), fh, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    raise SystemExit(main())
