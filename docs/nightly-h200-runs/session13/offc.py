"""Offline full compile (to cubin, ptxas included) of one spec for sm_90 with upstream Triton 3.6 on the CPU (session 12's
offc.py with the kernel and tiles as arguments). argv: kernel BT dtype num_warps K V BK BV [GROUP_DK]."""
import sys, time
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from wy_ascend import lowering as L
kernel, BT, dtype, warps, K, V, BK, BV = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), *map(int, sys.argv[5:9])
group = len(sys.argv) > 9 and sys.argv[9] == "1"
s = L.Spec(kernel=kernel, BT=BT, K=K, V=V, BK=BK, BV=BV, H=3, HV=6, USE_G=True, IS_VARLEN=True, GATE_HEAD_MAJOR=False,
           LOWP_DOT=dtype == "bfloat16", DOT_GUARD=False, PERSISTENT=False, dtype=dtype, gate_dtype=dtype, g_dtype=dtype,
           index_dtype="int64", footprint=0, backend="cuda", GROUP_DK=group, runtime_dims=False)
fn = L.resolve_kernels(L.KERNELS_REF)[kernel]
sig, const = s.signature(fn)
src = ASTSource(fn=fn, signature=sig, constexprs=const)
t = time.time()
tag = f"{kernel} BT={BT} {dtype} warps={warps} K{K} V{V} BK{BK} BV{BV} group={int(group)}"
try:
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 1})
    print(f"{tag}: ok {time.time()-t:.1f} s shared={k.metadata.shared} ptx_lines={k.asm['ptx'].count(chr(10))}", flush=True)
except Exception as e:
    print(f"{tag}: {type(e).__name__} {str(e)[:200]} {time.time()-t:.1f} s", flush=True)
