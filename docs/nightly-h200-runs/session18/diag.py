"""Session 18 call 2: why grouped_B2_T2048_H4_HV8_K128's forward read 1.83x fla-core in call 1 (55.7 us against
15.9 us in session 14), and whether call 1's small shapes (2-3x slower than session 17 for both providers) were
the host: per shape, the autotuner's picks, do_bench's times (host-inclusive, as compare_peer), and the device
time of one call's kernels (torch.profiler), with a pure-Python reference of the host's speed."""

import time

import torch
import triton.testing

from benchmarks.compare_peer import _calls, _spin_up
from wy_ascend import backends

t = time.perf_counter()
sum(range(10**7))
print(f"host: sum(range(1e7)) {time.perf_counter() - t:.3f} s", flush=True)
_spin_up()


def small(label: str) -> None:
    """do_bench of the smallest grid shape's forward, both providers (host-bound: the host's time per call)."""
    calls = _calls("varlen_T2048_N8_H2_HV8_K16_V16", "cuda", None)
    for prov, fn in calls["fwd"].items():
        print(f"{label}: small fwd {prov} do_bench us",
              [round(triton.testing.do_bench(fn, warmup=25, rep=100) * 1e3, 1) for _ in range(3)], flush=True)


for name in ["grouped_B2_T2048_H4_HV8_K128", "grouped_B2_T2048_H4_HV8_K64", "fixed_B4_T4096_H4_K128_V128",
             "varlen_T2048_N8_H2_HV8_K16_V16", "fixed_B8_T4096_H16_K128"]:
    calls = _calls(name, "cuda", None)
    for op in ("fwd", "bwd"):
        for prov, fn in calls[op].items():
            fn()
            torch.cuda.synchronize()
            bench = [triton.testing.do_bench(fn, warmup=25, rep=100) * 1e3 for _ in range(3)]
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
            dev = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total > 0) / 20
            kernels = sorted({e.key[:40] for e in prof.key_averages() if e.device_time_total > 0})
            print(f"{name:32s} {op} {prov:5s} do_bench us {[round(b, 1) for b in bench]} device us/call {dev:.1f} "
                  f"{kernels}", flush=True)
    for kname in ("fwd", "bwd"):
        for warps in (None,):
            tuner = backends._autotuned(kname, warps)
            print(f"  ours {kname} picks:", {k[:12]: str(c) for k, c in tuner.cache.items()}, flush=True)
    del calls
    torch.cuda.empty_cache()

small("no warm-up workers")
from concurrent.futures import wait  # noqa: E402

from wy_ascend.testing import warm  # noqa: E402

pool = warm._POOL.get(14)
wait([pool.submit(time.sleep, 1.0) for _ in range(28)])
small("14 idle warm-up workers")
