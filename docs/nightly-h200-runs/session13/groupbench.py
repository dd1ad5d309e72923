"""Session 13 (from session 10's groupbench.py): backward device time (perf.device_time: host work hidden, L2 flushed) with grouped heads: GROUP_DK on,
off, and the shipped rule (Backend.groups_dk), per shape; bf16, gate, BT=64; outputs compared."""
import json, os, sys
import torch
import wy_ascend
from wy_ascend.backends import group_dk_min_programs
from wy_ascend.testing.case import Case
from wy_ascend.testing.perf import device_time
SHAPES = [(1, 1024, 1, 4, 16, 16), (1, 1024, 8, 32, 16, 16), (1, 1024, 1, 4, 128, 128), (1, 2048, 4, 8, 64, 64), (1, 8192, 1, 4, 64, 64),
          (2, 4096, 2, 8, 128, 128), (1, 16384, 1, 2, 128, 128), (1, 8192, 4, 16, 128, 128), (8, 4096, 8, 32, 128, 128)]
out = []
for B, T, H, HV, K, V in SHAPES:
    case = Case(B=B, T=T, H=H, HV=HV, K=K, V=V, BT=64, dtype="bfloat16", use_g=True, backend="cuda")
    x = case.build_inputs("cuda")
    args = (x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, None)
    row = dict(shape=f"B{B} T{T} H{H} HV{HV} K{K} V{V}", programs=(T // 64) * B * H, min_programs=group_dk_min_programs(H, HV))
    res = {}
    for name, gdk in (("grouped", True), ("per_head", False), ("rule", None)):
        cfg = wy_ascend.LaunchConfig(group_dk=gdk)
        fn = lambda: wy_ascend.prepare_wy_repr_bwd(*args, backend="cuda", config=cfg)
        res[name] = fn()
        row[name + "_us"] = 1000 * device_time(fn)
    row["max_rel_diff"] = max(float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-30))
                              for a, b in zip(res["grouped"], res["per_head"]) if a is not None)
    out.append(row); print(json.dumps(row), flush=True)
    del x; torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "groupbench.json"), "w"), indent=1)
