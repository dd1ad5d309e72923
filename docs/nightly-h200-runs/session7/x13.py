"""Issue 13 experiment: per variant (a src copy on PYTHONPATH, env set by the caller), oracle
property and perf property on cliff and headline shapes, bf16 with gate, BT=64."""
import json, os, sys, time
import torch
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, run_property

label = sys.argv[1]
names = sys.argv[2].split(",")
C = dict(dtype="bfloat16", use_g=True, backend="cuda", BT=64)
SH = {
    "K256": Case(B=4, T=8192, H=4, HV=4, K=256, V=256, **C),
    "K64V32": Case(B=2, T=1000, H=2, HV=6, K=64, V=32, **C),
    "K192V48": Case(B=4, T=256, H=4, HV=8, K=192, V=48, **C),
    "K128V256": Case(B=4, T=4096, H=4, HV=8, K=128, V=256, **C),
    "K48V80": Case(B=4, T=4096, H=4, HV=4, K=48, V=80, **C),
    "K16": Case(B=8, T=4096, H=8, HV=16, K=16, V=16, **C),
    "head_fixed": Case(B=8, T=4096, H=16, HV=16, K=128, V=128, **C),
    "head_grouped": Case(B=8, T=4096, H=8, HV=32, K=128, V=128, **C),
    "head_varlen": Case(B=1, T=32768, H=16, HV=16, K=128, V=128, cu_seqlens=tuple(range(0, 32769, 2048)), **C),
}
out = []
for n in names:
    case = SH[n]
    row = {"variant": label, "shape": n}
    t = time.time()
    try:
        m = run_property("oracle", case); row["oracle"] = "PASS"
    except PropertyFailure as e:
        m = e.metrics; row["oracle"] = "FAIL " + str(e)[:300]
    except Exception as e:
        m = {}; row["oracle"] = f"ERROR {type(e).__name__}: {str(e)[:300]}"
    row["err_over_tol"] = {k: round(v["rel_rms"] / v["tol"], 3) for k, v in m.items() if isinstance(v, dict) and "tol" in v}
    row["first_s"] = round(time.time() - t, 1)
    try:
        p = run_property("perf", case); row["perf"] = "PASS"
    except PropertyFailure as e:
        p = e.metrics; row["perf"] = "FAIL"
    except Exception as e:
        p = {}; row["perf"] = f"ERROR {type(e).__name__}: {str(e)[:200]}"
    for op in ("fwd", "bwd"):
        if op in p:
            r = p[op]
            row[op] = {"us": round(r["time_ms"] * 1e3, 1), "fla_us": round(r.get("peer_ms", float("nan")) * 1e3, 1),
                       "x_fla": round(r["time_ms"] / r["peer_ms"], 3) if r.get("peer_ms") else None,
                       "x_bound": round(r["time_ms"] / r["bound_ms"], 2)}
    print(json.dumps(row), flush=True)
    out.append(row)
    torch.cuda.empty_cache()
with open(os.path.join(os.environ["OUT"], f"x13-{label}.json"), "w") as f:
    json.dump(out, f, indent=1)
