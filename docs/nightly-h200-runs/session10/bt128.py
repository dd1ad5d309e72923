"""Lower the call-4 timeout case's backward (cuda, fp32, BT=128, H3 HV6, K64 V16, varlen) to llir with
GROUP_DK on or off (argv[1]), upstream Triton 3.6, sm_90, on the CPU: how long Triton's own passes take."""
import sys, time
from wy_ascend import lowering as L
g = sys.argv[1] == "1"
s = L.Spec(kernel="bwd", BT=128, K=64, V=16, BK=64, BV=64, H=3, HV=6, USE_G=False, IS_VARLEN=True, GATE_HEAD_MAJOR=False,
           LOWP_DOT=False, DOT_GUARD=False, PERSISTENT=False, dtype="float32", gate_dtype="float32", index_dtype="int64",
           footprint=0, backend="cuda", GROUP_DK=g, runtime_dims=False)
fn = L.resolve_kernels(L.KERNELS_REF)["bwd"]
sig, const = s.signature(fn)
for stages in (("ttir", "ttgir"), ("ttir", "ttgir", "llir")):
    t = time.time()
    st, msg, _ = L.lower(fn, sig, const, stages, frozenset(s.aligned()))
    print(f"GROUP_DK={int(g)} {stages[-1]}: {st or 'ok'} {msg[:80]} {time.time() - t:.1f} s", flush=True)
