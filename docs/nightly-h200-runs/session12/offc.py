"""Offline full compile (to cubin, ptxas included) of one backward spec for sm_90 with upstream Triton 3.6 on the
CPU; prints the time of each. argv: BT dtype DOT_GUARD GROUP_DK num_warps [K V]."""
import sys, time, os
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from wy_ascend import lowering as L
BT, dtype, guard, group, warps = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1", int(sys.argv[5])
K, V = (int(sys.argv[6]), int(sys.argv[7])) if len(sys.argv) > 7 else (64, 16)
s = L.Spec(kernel="bwd", BT=BT, K=K, V=V, BK=64, BV=64, H=3, HV=6, USE_G=True, IS_VARLEN=True, GATE_HEAD_MAJOR=False,
           LOWP_DOT=dtype == "bfloat16", DOT_GUARD=guard, PERSISTENT=False, dtype=dtype, gate_dtype=dtype, g_dtype=dtype, index_dtype="int64",
           footprint=0, backend="cuda", GROUP_DK=group, runtime_dims=False)
fn = L.resolve_kernels(L.KERNELS_REF)["bwd"]
sig, const = s.signature(fn)
src = ASTSource(fn=fn, signature=sig, constexprs=const, attrs={(i,): [["tt.divisibility", 16]] for i in ()})
t = time.time()
try:
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 1}); PTXL = k.asm["ptx"].count(chr(10))
    print(f"BT={BT} {dtype} guard={int(guard)} group={int(group)} warps={warps} K{K}V{V}: ok {time.time()-t:.1f} s shared={k.metadata.shared} ptx_lines={PTXL}", flush=True)
except Exception as e:
    print(f"BT={BT} {dtype} guard={int(guard)} group={int(group)} warps={warps}: {type(e).__name__} {str(e)[:200]} {time.time()-t:.1f} s", flush=True)
