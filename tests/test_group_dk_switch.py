"""The WY_ASCEND_GROUP_DK switch (kernels.GROUP_DK_SUM): read when the kernels are imported, "acc" (the
running sum through dk_acc) by default, "sum" the candidate grouped backward G2 (kernels._bwd_key_head).

Each mode runs in a process of its own (the switch is read at import): forced-grouped cases on the cpu
backend (``group_dk`` knob) against the float64 oracle, and the two modes against each other: the
forward and dv are the same code in both (bit for bit), dk takes another summation order under "sum"
(the bit-exact grouped-heads tests of test_dk_group_sum.py pin the "acc" order and fail under "sum")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

GROUP_DK_ENV = "WY_ASCEND_GROUP_DK"


def _env(mode: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != GROUP_DK_ENV}
    return env | ({GROUP_DK_ENV: mode} if mode is not None else {})


@pytest.mark.parametrize("mode,want", [(None, False), ("acc", False), ("sum", True)])
def test_the_kernels_read_the_switch_when_imported(mode: str | None, want: bool) -> None:
    out = subprocess.run([sys.executable, "-c", "import wy_ascend.kernels as k; print(bool(k.GROUP_DK_SUM))"],
                         env=_env(mode), capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(want)


CALL = """
import os, torch
from wy_ascend.ops import recompute_w_u_fwd
from wy_ascend.testing.case import Case
x = Case(backend="cpu", T=16, H=1, HV=2, K=16, V=16).build_inputs()
recompute_w_u_fwd(x.k, x.v, x.beta, x.A, backend="cpu")
os.environ["WY_ASCEND_GROUP_DK"] = os.environ.get("LATE", os.environ.get("WY_ASCEND_GROUP_DK", ""))
recompute_w_u_fwd(x.k, x.v, x.beta, x.A, backend="cpu")
print("ran")
"""


@pytest.mark.parametrize("mode,late,error", [
    ("summ", None, "WY_ASCEND_GROUP_DK must be one of ('acc', 'sum'), got 'summ'"),
    ("ACC", None, "WY_ASCEND_GROUP_DK must be one of ('acc', 'sum'), got 'ACC'"),
    (None, "sum", "WY_ASCEND_GROUP_DK=sum was set after the kernels were imported"),
    ("sum", "acc", "WY_ASCEND_GROUP_DK=acc was set after the kernels were imported"),
    ("sum", None, None), (None, None, None),
])
def test_a_mode_the_kernels_did_not_take_is_refused_by_name(mode: str | None, late: str | None,
                                                           error: str | None) -> None:
    """Any value but "acc" or "sum", or a change after the kernels' import (which fixed the body), is a
    ValueError naming the variable at the next call, not the default body run silently."""
    env = _env(mode) | {"TRITON_INTERPRET": "1"} | ({"LATE": late} if late is not None else {})
    proc = subprocess.run([sys.executable, "-c", CALL], env=env, capture_output=True, text=True)
    if error is None:
        assert proc.returncode == 0 and proc.stdout.strip() == "ran", proc.stderr[-2000:]
    else:
        assert proc.returncode != 0 and f"ValueError: {error}" in proc.stderr, proc.stderr[-2000:]


# Forced-grouped cases: fp32, bf16 with and without the cuda variant's bf16 dot operands (lowp_dot), fp16;
# with and without g; G 2 to 4, one and two key heads; varlen and fixed; odd K and V, multi-tile loops
# (tile_cap 32) with NK == NV (the fused loop under lowp_dot) and NK != NV; DOT_GUARD with the Ascend
# emulation, and the cuda variant's held tiles (dot_guard off, emulation off).
CASES = """[
 dict(cu_seqlens=(0, 5, 40, 101), H=1, HV=3, K=80, V=48, BT=32, use_g=True, dtype="float32", dist="long_gates",
      knobs=dict(group_dk=True, tile_cap=32)),
 dict(B=2, T=37, H=2, HV=4, K=48, V=80, BT=16, dtype="float32",
      knobs=dict(group_dk=True, dot_guard=False, emulate=False)),
 dict(cu_seqlens=(0, 0, 1, 18, 18, 50, 83), H=1, HV=4, K=96, V=96, BT=32, use_g=True, dtype="bfloat16",
      knobs=dict(group_dk=True, tile_cap=32, lowp_dot=True)),
 dict(cu_seqlens=(0, 5, 40, 101), H=1, HV=2, K=96, V=96, BT=32, use_g=True, dtype="bfloat16", dist="repeated_keys",
      knobs=dict(group_dk=True, tile_cap=32, lowp_dot=True, dot_guard=False, emulate=False)),
 dict(B=2, T=37, H=1, HV=3, K=48, V=80, BT=64, use_g=True, dtype="bfloat16",
      knobs=dict(group_dk=True, gate_head_major=False, mode="grid")),
 dict(cu_seqlens=(0, 5, 40, 101), H=2, HV=4, K=80, V=16, BT=16, use_g=True, dtype="float16", dist="beta_extremes",
      knobs=dict(group_dk=True, tile_cap=32)),
]"""

SCRIPT = f"""
import hashlib, json
import torch
from wy_ascend import kernels
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import build_inputs, check_oracle, run_ops

out = {{"sum": bool(kernels.GROUP_DK_SUM), "cases": []}}
for fields in {CASES}:
    case = Case(backend="cpu", **fields)
    assert case.specializations()["bwd"].GROUP_DK, case
    metrics = check_oracle(case)  # raises PropertyFailure past the oracle's bounds
    got = run_ops(case, build_inputs(case))
    out["cases"].append({{
        "bits": {{n: hashlib.sha256(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()
                  for n, t in got.items() if t is not None}},
        "q": {{n: max(m["rel_rms"] / m["tol"], m["worst_block"]["rel_rms"] / m["worst_block"]["tol"])
               for n, m in metrics.items() if isinstance(m, dict) and "worst_block" in m}},
    }})
print(json.dumps(out))
"""


def _run(mode: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=_env(mode) | {"TRITON_INTERPRET": "1"},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.cpu_interpreter
def test_both_modes_pass_the_oracle_and_differ_only_where_g2_changes_the_code() -> None:
    acc, g2 = _run("acc"), _run("sum")
    assert (acc["sum"], g2["sum"]) == (False, True)
    assert len(acc["cases"]) == len(g2["cases"]) == 6
    for i, (a, s) in enumerate(zip(acc["cases"], g2["cases"], strict=True)):
        assert all(q <= 1 for q in s["q"].values()), (i, s["q"])
        for name in ("w", "u", "dv"):  # the forward, and dv (the V loop's _bwd_v_tile), are the same code
            assert a["bits"][name] == s["bits"][name], (i, name)
    # dk summed another way: its fp32 bits differ (a switch the kernels ignored would give acc's)
    assert all(acc["cases"][i]["bits"]["dk"] != g2["cases"][i]["bits"]["dk"] for i in (0, 1))
