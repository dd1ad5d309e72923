"""Grouped (GROUP_DK) and per-value-head backward on cuda: equal bit for bit now that the per-head sum adds heads in order?"""
import json, torch
from wy_ascend import ops
from wy_ascend.backends import LaunchConfig
from wy_ascend.testing import properties
from wy_ascend.testing.case import Case
for dtype in ("bfloat16", "float32", "float16"):
    for H, HV in ((2, 16), (1, 8), (3, 6)):
        case = Case(B=2, T=300, H=H, HV=HV, K=64, V=32, BT=64, dtype=dtype, use_g=True, backend="cuda", dist="realistic", seed=3)
        x = properties.build_inputs(case)
        outs = [ops.prepare_wy_repr_bwd(x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, None, backend="cuda",
                                        config=LaunchConfig(group_dk=gd)) for gd in (True, False)]
        print(json.dumps(dict(dtype=dtype, H=H, HV=HV, equal={n: bool(torch.equal(a, b)) for n, a, b in zip(("dk", "dv", "dbeta", "dg"), *outs)})), flush=True)
