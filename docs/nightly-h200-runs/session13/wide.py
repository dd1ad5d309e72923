"""Session 13 call 1: WY_ASCEND_WIDE_FP32=1 on the H200. Per shape (fp32 and fp16 I/O, BT=128, fp32 dots): the first
backward call's wall time in this process (compile included, autotune on: the wide launch has one config), the oracle
property on the case, and the backward's device time against the same shape at BT=64 (the default search)."""
import json, os, sys, time
import torch
import wy_ascend
from wy_ascend.testing import perf, properties
from wy_ascend.testing.case import Case

assert os.environ.get("WY_ASCEND_WIDE_FP32") == "1"
SHAPES = [dict(B=1, T=300, H=3, HV=6, K=64, V=16), dict(B=2, T=4096, H=4, HV=4, K=128, V=128),
          dict(B=1, T=2048, H=2, HV=4, K=256, V=256), dict(B=2, T=1000, H=2, HV=6, K=64, V=32),
          dict(B=4, T=4096, H=8, HV=8, K=32, V=48)]
for dtype in ("float32", "float16"):
    for s in SHAPES:
        row = dict(dtype=dtype, **s)
        for BT in (128, 64):
            case = Case(**s, BT=BT, dtype=dtype, use_g=True, backend="cuda")
            x = case.build_inputs("cuda")
            args = (x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, None)
            fn = lambda: wy_ascend.prepare_wy_repr_bwd(*args, backend="cuda")
            t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); first = time.perf_counter() - t0
            row[f"bt{BT}_first_s"] = round(first, 2)
            row[f"bt{BT}_bwd_us"] = round(1000 * perf.device_time(fn), 1)
            if BT == 128:
                try:
                    m = properties.run_property("oracle", case)
                    row["oracle"] = "pass"
                except Exception as e:  # report, go on
                    row["oracle"] = f"FAIL {type(e).__name__}: {str(e)[:300]}"
            del x; torch.cuda.empty_cache()
        row["bt128_over_bt64"] = round(row["bt128_bwd_us"] / row["bt64_bwd_us"], 2)
        print(json.dumps(row), flush=True)
