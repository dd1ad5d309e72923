"""Grid vs persistent backward (the launch_invariance find's specialization): PTX instruction counts."""
import collections, re, sys, json
sys.argv += []
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource
from wy_ascend import kernels, lowering
from wy_ascend.backends import BACKENDS
b = BACKENDS["cuda"]
out = {}
for persistent in (False, True):
    spec = lowering.Spec(kernel="bwd", BT=64, K=80, V=100, BK=128, BV=128, H=4, HV=4, USE_G=True, IS_VARLEN=False,
                         GATE_HEAD_MAJOR=False, LOWP_DOT=b.lowp_dot(torch.bfloat16, 80, 100, 128, 128),
                         DOT_GUARD=False, PERSISTENT=persistent, dtype="bfloat16", gate_dtype="bfloat16",
                         index_dtype=None, footprint=0, backend="cuda")
    fn = kernels.KERNELS["bwd"]
    sig, consts = spec.signature(fn)
    attrs = {(i,): [["tt.divisibility", 16]] for i in lowering.divisibility_hints(fn, sig, frozenset(spec.aligned()))}
    k = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, num_stages=1))
    ptx = k.asm["ptx"]
    ops = collections.Counter(re.findall(r"^\s+((?:fma|mul|add|sub|ex2|cvt)\.[a-z0-9.]+)", ptx, re.M))
    out[persistent] = ops
    open(f"/tmp/bwd_persistent{int(persistent)}.ptx", "w").write(ptx)
    ttgir = k.asm["ttgir"]
    open(f"/tmp/bwd_persistent{int(persistent)}.ttgir", "w").write(ttgir)
keys = sorted(set(out[False]) | set(out[True]))
for key in keys:
    a, c = out[False][key], out[True][key]
    print(f"{key:24s} grid {a:6d} persistent {c:6d}{'  <--' if a != c else ''}")
