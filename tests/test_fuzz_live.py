"""The live failure line of the fuzz suite (fuzz/conftest.py ``LiveFailures``).

A planted failure (a plugin makes ``plan_coverage`` fail on every case, and keeps the item busy
for ``LINGER_S`` after its minimal case is recorded) must print ``FAILED plan_coverage (<case>):
<message> -> <file>`` (the case as ``store.describe_case`` gives it) within 5 s of the file's
modification time, while the item is still running, with and without xdist. The run is a
subprocess with its report, Hypothesis storage and regression store in a temp directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from wy_ascend.testing.store import describe_case, load

ROOT = Path(__file__).resolve().parents[1]
NODE = "fuzz/test_fuzz.py::test_plan_coverage"
LINGER_S = 8.0
PLUGIN = f'''
import time

import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    from fuzz.profiles import TALLY
    from wy_ascend.testing import properties

    def fail(case):
        raise properties.PropertyFailure("planted: plan_coverage fails on every case")

    properties.PROPERTIES["plan_coverage"] = fail
    try:
        from wy_ascend.testing.runner import CaseRunner
    except ImportError:
        pass  # cases run in this process
    else:  # cases run in a child process: the failure is planted where their results come back
        run = CaseRunner.run

        def planted(self, prop, case, *args, **kwargs):
            return fail(case) if prop == "plan_coverage" else run(self, prop, case, *args, **kwargs)

        CaseRunner.run = planted
    record = TALLY.fail

    def record_then_linger(*args, **kwargs):
        record(*args, **kwargs)
        time.sleep({LINGER_S})  # the item goes on after the file is written (as while Hypothesis works)

    TALLY.fail = record_then_linger
'''


@pytest.mark.cpu_interpreter  # a fuzz run of the cpu backend in a subprocess
@pytest.mark.parametrize("workers", [None, 2], ids=["no-xdist", "xdist-2"])
def test_a_failure_prints_its_line_while_the_item_still_runs(tmp_path, workers) -> None:
    (tmp_path / "planted_failure.py").write_text(PLUGIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "WY_ASCEND_"))}
    env.update(WY_ASCEND_FUZZ_SCALE="0.01", WY_ASCEND_REGRESSIONS=str(tmp_path / "regressions"),
               HYPOTHESIS_STORAGE_DIRECTORY=str(tmp_path / "hypothesis"), TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(filter(None, (str(tmp_path), env.get("PYTHONPATH")))))
    cmd = [sys.executable, "-m", "pytest", NODE, "--profile", "ci", "--backend", "cpu", "-p", "planted_failure",
           "-p", "no:cacheprovider", "-q", "--fuzz-report", str(tmp_path / "r.json"),
           *(["-n", str(workers)] if workers else ["-p", "no:xdist"])]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.time(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    out = "\n".join(line for _, line in lines)
    assert proc.returncode == 1, out[-3000:]
    live = [(t, line) for t, line in lines if " -> " in line and line.startswith("FAILED plan_coverage (")]
    assert len(live) == 1, out[-3000:]  # one line per recorded minimal case
    seen_at, line = live[0]
    match = re.fullmatch(r"FAILED plan_coverage \((.+)\): planted: plan_coverage fails on every case -> (\S+)", line)
    assert match, line
    files = list((tmp_path / "regressions").glob("plan_coverage-*.json"))
    assert len(files) == 1 and files[0].samefile(Path(ROOT, match.group(2)))
    assert match.group(1) == describe_case(load(files[0]).case)  # the case: layout, heads, dims, dtypes
    written = files[0].stat().st_mtime
    # within 5 s of the file, so before the item ended (LINGER_S after it), not with its report
    assert -0.5 <= seen_at - written <= 5.0, (seen_at - written, out[-3000:])
    assert "wy_ascend fuzz summary" in out[out.index(line):]  # the end-of-run summary still follows
