"""The nightly device workflow: valid against GitHub's workflow schema (check-jsonschema's vendored
copy, offline), with the structure the nightly run relies on; and its summary script's verdicts."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly-npu.yml"
SUMMARY_SCRIPT = ROOT / ".ci" / "nightly_summary.py"


def test_workflow_matches_the_github_schema() -> None:
    if importlib.util.find_spec("check_jsonschema") is None:
        pytest.skip("check-jsonschema is not installed (pip install check-jsonschema)")
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    ruamel = pytest.importorskip("ruamel.yaml", reason="ruamel.yaml (installed with check-jsonschema) parses YAML 1.2")
    return ruamel.YAML(typ="safe").load(WORKFLOW.read_text())


@pytest.fixture(scope="module")
def job(workflow) -> dict[str, Any]:
    (job,) = workflow["jobs"].values()
    return job


def step(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in job["steps"] if s.get("name") == name)


def test_schedule_and_dispatch_inputs(workflow) -> None:
    assert workflow["on"]["schedule"][0]["cron"].split()[2:] == ["*", "*", "*"]  # every night
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert inputs["runner_label"]["default"] == "ascend-910b"
    assert inputs["profile"]["default"] == "nightly"
    assert inputs["backend"]["default"] == "npu"


def test_runs_on_self_hosted_npu_and_gpu_hosts_in_containers(job) -> None:
    platforms = {entry["platform"]: entry for entry in job["strategy"]["matrix"]["include"]}
    assert set(platforms) == {"npu", "cuda"}
    assert platforms["npu"]["extras"] == "npu,test,upstream" and platforms["cuda"]["extras"] == "cuda,test,upstream"
    assert "ascendai/cann" in platforms["npu"]["image"] and "/dev/davinci_manager" in platforms["npu"]["options"]
    assert job["runs-on"][0] == "self-hosted" and "matrix.label" in job["runs-on"][1]
    assert "matrix.image" in job["container"]["image"]
    assert job["strategy"]["fail-fast"] is False


def test_every_step_and_the_job_have_timeouts(job) -> None:
    assert 0 < job["timeout-minutes"] <= 6 * 60
    assert all(isinstance(s.get("timeout-minutes"), int) for s in job["steps"]), [
        s.get("name") for s in job["steps"] if "timeout-minutes" not in s
    ]


def test_device_checks_and_nox_sessions(job) -> None:
    npu_check = step(job, "Check the NPU is visible")["run"]
    assert "npu-smi info" in npu_check and "torch.npu.is_available()" in npu_check
    assert "WY_ASCEND_NUM_DEVICES=" in npu_check
    assert "-s tests -- --backend" in step(job, "Tests")["run"]
    assert "-s regress -- --backend" in step(job, "Replay regressions")["run"]
    fuzz = step(job, "Fuzz")["run"]
    assert '-s fuzz -- --profile "$PROFILE"' in fuzz and '-n "${WY_ASCEND_NUM_DEVICES' in fuzz
    assert "-s bench -- --backend" in step(job, "Benchmark")["run"] and "--benchmark-json bench.json" in step(
        job, "Benchmark")["run"]
    # the test steps keep going so every report is written; the summary step gives the verdict
    for name in ("Tests", "Replay regressions", "Fuzz", "Benchmark"):
        s = step(job, name)
        assert s["continue-on-error"] is True and f"steps.{s['id']}.outcome" in step(job, "Summary")["run"]


def test_summary_and_artifacts_always_run(job) -> None:
    summary = step(job, "Summary")
    assert summary["if"] == "always()"
    assert ".ci/nightly_summary.py" in summary["run"] and "$GITHUB_STEP_SUMMARY" in summary["run"]
    upload = step(job, "Upload reports")
    assert upload["uses"] == "actions/upload-artifact@v4" and upload["if"] == "always()"
    paths = upload["with"]["path"].split()
    for artifact in ("fuzz-report.json", "bench.json", "nightly-out/new-regressions/", ".hypothesis/"):
        assert artifact in paths
    assert upload["with"]["include-hidden-files"] is True  # .hypothesis/
    baseline = step(job, "Baseline benchmarks (latest earlier night)")
    assert baseline["uses"].startswith("actions/cache/restore@") and "--baseline .bench-baseline/bench.json" in (
        summary["run"])


# ----------------------------------------------------------------------------- .ci/nightly_summary.py


@pytest.fixture(scope="module")
def summary() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nightly_summary", SUMMARY_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench(means: dict[str, float]) -> dict[str, Any]:
    return {"benchmarks": [{"name": n, "fullname": f"bench.py::{n}", "stats": {"mean": m}} for n, m in means.items()]}


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


REPORT = {
    "profile": "nightly", "backend": "npu", "workers": 8, "total_cases": 1200, "elapsed_seconds": 600.0,
    "cases_per_second": 2.0,
    "properties": {"oracle": {"cases": 1000, "failures": 1, "seconds": 500.0},
                   "varlen": {"cases": 200, "failures": 0, "seconds": 100.0}},
    "failures": [{"property": "oracle", "message": "kernel differs from the float64 oracle: dk",
                  "regression": "regressions/oracle-0123456789ab.json", "test": "fuzz/test_fuzz.py::test_oracle"}],
}


def test_summary_fails_on_a_new_regression_and_a_failed_step(summary, tmp_path, capsys) -> None:
    regressions = tmp_path / "regressions"
    regressions.mkdir()
    (regressions / "oracle-old.json").write_text("{}")
    before = tmp_path / "before.txt"
    before.write_text("regressions/oracle-old.json\n")
    (regressions / "oracle-0123456789ab.json").write_text("{}")
    code = summary.main([
        "--outcome", "regress=success", "--outcome", "fuzz=failure", "--outcome", "bench=success",
        "--fuzz-report", str(write(tmp_path / "fuzz-report.json", REPORT)),
        "--bench", str(write(tmp_path / "bench.json", bench({"fwd": 0.0022, "bwd": 0.004}))),
        "--baseline", str(write(tmp_path / "base.json", bench({"fwd": 0.002, "bwd": 0.004}))),
        "--regressions-dir", str(regressions), "--regressions-before", str(before),
        "--copy-new-to", str(tmp_path / "new"),
    ])
    out = capsys.readouterr().out
    assert code == 1
    assert "❌ failed" in out and "Failed steps: fuzz." in out
    assert "1 new regression file(s)" in out and "oracle-0123456789ab.json" in out
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["oracle-0123456789ab.json"]
    assert "**1200 cases**" in out and "| oracle | 1000 | 1 | 500.0 |" in out
    assert "+10.0% ⚠️" in out  # fwd 2.2 ms against 2.0 ms


def test_summary_passes_a_clean_night_without_baseline(summary, tmp_path, capsys) -> None:
    regressions = tmp_path / "regressions"
    regressions.mkdir()
    before = tmp_path / "before.txt"
    before.write_text("")
    clean = {**REPORT, "failures": [], "properties": {"oracle": {"cases": 5, "failures": 0, "seconds": 1.0}}}
    code = summary.main([
        "--outcome", "regress=success", "--outcome", "fuzz=success", "--outcome", "bench=success",
        "--fuzz-report", str(write(tmp_path / "fuzz-report.json", clean)),
        "--bench", str(write(tmp_path / "bench.json", bench({"fwd": 0.002}))),
        "--baseline", str(tmp_path / "missing.json"),
        "--regressions-dir", str(regressions), "--regressions-before", str(before),
    ])
    out = capsys.readouterr().out
    assert code == 0 and "✅ passed" in out
    assert "No baseline from an earlier run yet" in out and "| `bench.py::fwd` | 2.000 | - | new |" in out


def test_summary_falls_back_to_the_progress_files_of_a_killed_fuzz_run(summary, tmp_path, capsys) -> None:
    parts = tmp_path / "fuzz-report.json.parts"  # no fuzz-report.json: the step was killed
    parts.mkdir()
    failure = {"property": "oracle", "regression": "regressions/oracle-0123456789ab.json", "message": "dk differs",
               "case": {}, "test": "fuzz/test_fuzz.py::test_oracle"}
    write(parts / "gw0.json", {"worker": "gw0", "device": "cuda:0", "profile": "nightly", "backend": "cuda",
                               "started": 1000.0, "updated": 1400.0, "cases": {"oracle": 5, "bad_input": 40},
                               "seconds": {"oracle": 300.0, "bad_input": 20.0}, "failures": [failure]})
    write(parts / "gw1.json", {"worker": "gw1", "device": "cuda:1", "profile": "nightly", "backend": "cuda",
                               "started": 1001.0, "updated": 1500.0, "cases": {"oracle": 3},
                               "seconds": {"oracle": 150.5}, "failures": []})
    (parts / "gw1.json.tmp").write_text("{half a fi")  # a write the kill cut short: ignored
    args = ["--outcome", "fuzz=failure", "--fuzz-report", str(tmp_path / "fuzz-report.json"),
            "--regressions-dir", str(tmp_path)]
    assert summary.main(args) == 1  # the verdict is still the steps' (and new regression files')
    out = capsys.readouterr().out
    assert "cut short before it wrote fuzz-report.json: **partial counts**" in out
    assert "`fuzz-report.json.parts/ (2 file(s))`" in out
    assert "Profile `nightly`, backend `cuda`, 2 worker(s): **48 cases** in 500 s" in out
    assert "| oracle | 8 | 1 | 450.5 |" in out and "| bad_input | 40 | 0 | 20.0 |" in out
    assert "`regressions/oracle-0123456789ab.json`: dk differs" in out
    assert summary.main(["--outcome", "fuzz=success", *args[2:]]) == 0  # partial counts alone fail nothing
    capsys.readouterr()


def test_summary_flags_an_interrupted_report(summary, tmp_path, capsys) -> None:
    report = write(tmp_path / "fuzz-report.json", {**REPORT, "interrupted": True, "workers": {"gw0": None}})
    assert summary.main(["--fuzz-report", str(report), "--regressions-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cut short (interrupted" in out and "1 worker(s)" in out and "No fuzz-report.json" not in out


def test_compiled_kernels_persist_between_nights(workflow, job) -> None:
    """The Triton cache is restored before the device steps and saved after them, keyed on kernels.py."""
    assert workflow["env"]["TRITON_CACHE_DIR"].endswith("/.triton-cache")
    names = [s.get("name") for s in job["steps"]]
    restore, save = step(job, "Compiled kernels (latest earlier night, same kernels.py)"), step(job, "Store compiled kernels")
    assert names.index(restore["name"]) < names.index("Replay regressions") < names.index("Benchmark") < names.index(
        save["name"])
    assert restore["uses"].startswith("actions/cache/restore@") and save["uses"].startswith("actions/cache/save@")
    assert save["if"] == "always()"
    for s in (restore, save):
        assert s["with"]["path"] == ".triton-cache" and "hashFiles('src/wy_ascend/kernels.py')" in s["with"]["key"]
