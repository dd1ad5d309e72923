"""Session 13 call 3: the perf find perf-07b876f7e3f6 (B1 T1024 H16 HV64 K=V=16 bf16 backward, 10.0x its bound,
grouped) and two neighbours: backward device time grouped (GROUP_DK) and per value head (with the one-launch dk sum)."""
import json
import torch
import wy_ascend
from wy_ascend.testing.case import Case
from wy_ascend.testing.perf import device_time
for B, T, H, HV, K, V in [(1, 1024, 16, 64, 16, 16), (1, 1024, 8, 32, 16, 16), (1, 1024, 16, 64, 64, 64)]:
    case = Case(B=B, T=T, H=H, HV=HV, K=K, V=V, BT=64, dtype="bfloat16", use_g=True, backend="cuda")
    x = case.build_inputs("cuda")
    row = dict(shape=f"B{B} T{T} H{H} HV{HV} K{K} V{V}", programs=(T // 64) * B * H)
    for name, gdk in (("grouped", True), ("per_head", False), ("rule", None)):
        cfg = wy_ascend.LaunchConfig(group_dk=gdk)
        fn = lambda: wy_ascend.prepare_wy_repr_bwd(x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, None, backend="cuda", config=cfg)
        fn()
        row[name + "_us"] = round(1000 * device_time(fn), 1)
    print(json.dumps(row), flush=True)
    del x; torch.cuda.empty_cache()
