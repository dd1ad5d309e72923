"""The perf property of the source tree on PYTHONPATH, on the K=V=256 shape issue 13 measured."""
import json, sys
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, run_property
case = Case(B=4, T=8192, H=4, HV=4, K=256, V=256, BT=64, dtype="bfloat16", use_g=True, backend="cuda")
try:
    print("PASS", json.dumps(run_property("perf", case)))
except PropertyFailure as e:
    print("FAIL", e, json.dumps(getattr(e, "metrics", None)))
