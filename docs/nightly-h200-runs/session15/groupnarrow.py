"""Session 15 call 4: the grouped backward (GROUP_DK, one program per key head running its G value heads in
turn) against per value head (then one dk-sum launch), both with shared narrow tiles (the default since
16aca9b), on K,V <= 32 shapes around the perf finds. One process per (shape, way). Backward device time
(perf.device_time), its ratio to the perf bound, fla-core's device time."""
import json, os, subprocess, sys

SHAPES = {
    "find_fixed_B1_T1024_H16_HV64": dict(B=1, T=1024, H=16, HV=64),
    "find_varlen_B1_T1024_H16_HV64_cu865": dict(B=1, T=1024, H=16, HV=64, cu_seqlens=(0, 865, 1024)),
    "B1_T2048_H16_HV64": dict(B=1, T=2048, H=16, HV=64),
    "B1_T4096_H16_HV64": dict(B=1, T=4096, H=16, HV=64),
    "B1_T2048_H8_HV32": dict(B=1, T=2048, H=8, HV=32),
    "B1_T1024_H8_HV16": dict(B=1, T=1024, H=8, HV=16),
    "B1_T8192_H4_HV32": dict(B=1, T=8192, H=4, HV=32),
    "varlen_B1_T4096_H16_HV64_4seqs": dict(B=1, T=4096, H=16, HV=64, cu_seqlens=(0, 1000, 1900, 3001, 4096)),
    "K32_B1_T1024_H16_HV64": dict(B=1, T=1024, H=16, HV=64, K=32, V=32),
}


def worker(name, way):
    import torch
    from wy_ascend import prepare_wy_repr_bwd
    from wy_ascend.backends import LaunchConfig
    from wy_ascend.testing import perf
    from wy_ascend.testing.case import Case
    from wy_ascend.testing.properties import build_inputs
    dims = {"K": 16, "V": 16, **SHAPES[name]}
    case = Case(backend="cuda", BT=64, dtype="bfloat16", use_g=True, dist="realistic", **dims)
    k, v, beta, A, g, dw, du, cu = build_inputs(case)
    cfg = LaunchConfig(group_dk=(way == "grouped"))
    fn = lambda: prepare_wy_repr_bwd(k, v, beta, A, dw, du, g, cu, backend="cuda", config=cfg)
    out = [o for o in fn() if o is not None]
    torch.cuda.synchronize()
    bandwidth, floor = perf.device_limits("cuda")
    nb = sum(t.numel() * t.element_size() for t in (k, v, beta, A, g, dw, du, cu, *out) if t is not None)
    us = 1e3 * perf.device_time(fn)
    row = dict(shape=name, way=way, programs=-(-case.T // 64) * case.H if cu is None else None,
               bwd_us=round(us, 2), x_bound=round(us / 1e3 / max(nb / bandwidth, floor), 2))
    if way == "grouped":
        from fla.ops.gated_delta_rule import wy_fast as fla
        f = lambda: fla.prepare_wy_repr_bwd(k, v, beta, A, dw, du, g, cu)
        f(); torch.cuda.synchronize()
        row["fla_us"] = round(1e3 * perf.device_time(f), 2)
    torch.save([o.cpu() for o in out], f"/tmp/gn_{name}_{way}.pt")
    print(json.dumps(row), flush=True)


def driver():
    import torch
    for name in SHAPES:
        for way in ("grouped", "per_head"):
            p = subprocess.run([sys.executable, __file__, name, way], capture_output=True, text=True, timeout=120)
            lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
            print(lines[-1] if lines else json.dumps(dict(shape=name, way=way, rc=p.returncode, err=p.stderr[-300:])), flush=True)
        try:
            a, b = (torch.load(f"/tmp/gn_{name}_{w}.pt") for w in ("grouped", "per_head"))
            print(json.dumps(dict(shape=name, bit_equal=all(torch.equal(x, y) for x, y in zip(a, b)))), flush=True)
        except Exception as e:  # noqa: BLE001
            print(json.dumps(dict(shape=name, compare_error=str(e)[:200])), flush=True)


if __name__ == "__main__":
    driver() if len(sys.argv) == 1 else worker(sys.argv[1], sys.argv[2])
