"""Session 13 call 3: fp32-dot launches with WY_ASCEND_FP32_WARPS (argv[1] 'on': the switch on, autotune on; 'off': the
switch off with WY_ASCEND_AUTOTUNE=0, i.e. 4 warps alone, BT=64 only). Per shape: the first forward and first backward
call's wall time (compile included; each shape's specialization is new to the process), device times, and (on) the
oracle property."""
import json, os, sys, time
import torch
import wy_ascend
from wy_ascend import backends
from wy_ascend.testing import perf, properties
from wy_ascend.testing.case import Case

mode = sys.argv[1]
assert (os.environ.get("WY_ASCEND_FP32_WARPS") == "1") == (mode == "on")
SHAPES = [("float32", dict(B=1, T=300, H=3, HV=6, K=64, V=16)), ("float32", dict(B=2, T=4096, H=4, HV=4, K=128, V=128)),
          ("float16", dict(B=1, T=1000, H=2, HV=4, K=48, V=80)), ("float32", dict(B=1, T=2048, H=2, HV=4, K=256, V=256))]
for BT in ((64, 128) if mode == "on" else (64,)):
    for dtype, s in SHAPES:
        case = Case(**s, BT=BT, dtype=dtype, use_g=True, backend="cuda")
        row = dict(mode=mode, dtype=dtype, BT=BT, **s)
        x = case.build_inputs("cuda")
        ops = {"fwd": lambda: wy_ascend.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, x.g, backend="cuda"),
               "bwd": lambda: wy_ascend.prepare_wy_repr_bwd(x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, None, backend="cuda")}
        for name, fn in ops.items():
            spec = case.specializations()[name]
            row[f"{name}_warps"] = backends.fp32_dot_warps(name, BT, max(spec.BK, spec.BV), spec.LOWP_DOT)
            t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); row[f"{name}_first_s"] = round(time.perf_counter() - t0, 2)
            row[f"{name}_us"] = round(1000 * perf.device_time(fn), 1)
        if mode == "on":
            try:
                properties.run_property("oracle", case); row["oracle"] = "pass"
            except Exception as e:  # report and go on
                row["oracle"] = f"FAIL {type(e).__name__}: {str(e)[:300]}"
        print(json.dumps(row), flush=True)
        del x; torch.cuda.empty_cache()
