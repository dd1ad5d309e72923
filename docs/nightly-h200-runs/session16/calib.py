"""Session 16 call 2: the perf bound's model calibrated on the ideal streaming kernel. Device copies (torch
copy_, the kernel device_limits takes the bandwidth from) of 64 KiB .. 1 GiB moved (read + written), each timed as
perf.device_time times an op (L2 flushed, host hidden); and a one-program Triton store (the launch floor). Per size:
the time against max(floor, bytes/bw) (the bound before) and floor + bytes/bw (the bound after)."""
import json
import torch
from wy_ascend.testing import perf

bw, floor = perf.device_limits("cuda")
print(json.dumps(dict(copy_GBps=bw / 1e6, floor_us=floor * 1e3)), flush=True)
for e in range(16, 31, 1):
    n = 1 << e
    src = torch.empty(n // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = perf.device_time(lambda: dst.copy_(src))
    print(json.dumps(dict(bytes=n, us=round(t * 1e3, 2), x_max_model=round(t / max(floor, n / bw), 3),
                          x_sum_model=round(t / (floor + n / bw), 3))), flush=True)
