"""Offline: compile the cuda backward of the perf find's shape (bf16, BT=64, K=V=16 in 64-wide tiles, H8 HV32, per value
head) for sm_90 with upstream Triton 3.6 and print registers, spills and shared memory per num_warps / maxnreg."""
import sys, time, subprocess, tempfile, os, re
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from wy_ascend import lowering as L
K = int(sys.argv[1]) if len(sys.argv) > 1 else 16
s = L.Spec(kernel="bwd", BT=64, K=K, V=K, BK=64, BV=64, H=8, HV=32, USE_G=True, IS_VARLEN=False, GATE_HEAD_MAJOR=False,
           LOWP_DOT=True, DOT_GUARD=False, PERSISTENT=False, dtype="bfloat16", gate_dtype="bfloat16", g_dtype="bfloat16",
           index_dtype="int64", footprint=0, backend="cuda", GROUP_DK=False, runtime_dims=False)
fn = L.resolve_kernels(L.KERNELS_REF)["bwd"]
sig, const = s.signature(fn)
cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
for warps, maxnreg in [(4, 168), (4, 128), (8, None), (8, 168), (8, 128), (8, 96)]:
    src = ASTSource(fn=fn, signature=sig, constexprs=const)
    opts = {"num_warps": warps, "num_stages": 1}
    if maxnreg: opts["maxnreg"] = maxnreg
    t = time.time()
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    out = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    loc = re.findall(r'LOCAL:(\d+)', out)
    res = re.findall(r"REG:(\d+).*?SHARED:(\d+)", out)
    print(out.strip().splitlines()[-1][:300]); print(f"K{K} warps={warps} maxnreg={maxnreg}: {time.time()-t:.1f} s, triton shared={k.metadata.shared}, resource={res} local={loc}", flush=True)
