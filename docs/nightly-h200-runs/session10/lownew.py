"""Lower the cuda specs the group_dk rule added (grouped backward without GROUP_DK) through upstream Triton."""
import time
from wy_ascend import lowering as L
from wy_ascend.backends import LaunchConfig
specs, _ = L.backend_specs("cuda", LaunchConfig(num_cores=1))
new = [s for s in specs if s.kernel == "bwd" and s.HV > s.H and not s.GROUP_DK and s.BT <= 64]
t = time.time()
res = [L.lower_spec(s) for s in new[::6]]
bad = [r for r in res if r.status != "PASS"]
print(len(new), "lowered", len(bad), "not passed", f"{time.time() - t:.0f} s", [(r.spec.label, r.message[:200]) for r in bad[:3]])
