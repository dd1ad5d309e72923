"""pytest wiring of the fuzz suite: run options, worker devices, statistics and fuzz-report.json.

Options (each also read from the environment):

* ``--profile NAME`` / ``WY_ASCEND_PROFILE``: ci, dev (default), nightly, large (fuzz/profiles.py).
* ``--backend NAME`` / ``WY_ASCEND_BACKEND``: cpu (default), cuda, npu, npu-cuda.
* ``--fuzz-report PATH`` / ``WY_ASCEND_FUZZ_REPORT``: where the machine-readable report goes
  (default ``fuzz-report.json`` in the directory pytest was started from).

Multi-device runs: with pytest-xdist (``-n N``) worker ``gwK`` binds accelerator ``K`` before any
test runs. npu: if ``ASCEND_RT_VISIBLE_DEVICES`` lists devices, the worker keeps only entry
``K mod len``; otherwise it calls ``torch.npu.set_device(K mod count)``. cuda and npu-cuda:
``torch.cuda.set_device(K mod count)``. Tensors built on ``"npu"``/``"cuda"`` then land on the
worker's device. ``WY_ASCEND_NO_DEVICE_MAP=1`` turns the binding off.

Every run prints Hypothesis' statistics and a summary (cases per property, failures, cases per
second) and writes the report: ``{profile, backend, properties: {name: {cases, failures,
seconds, cpu_seconds, cases_per_second}}, regressions: [paths], failures: [...], elapsed_seconds,
total_cases, cases_per_second, workers: {worker: device}, tests: {nodeid: outcome}}``. It is
only written when a property test ran (a replay of regressions/ alone leaves an earlier
report in place).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fuzz.profiles import DEFAULT_REPORT, PROPERTY_NAMES, REPORT_ENV, TALLY, RunConfig, select

_KEY = "wy_fuzz"
_WORKER_KEY = "wy_fuzz_worker"


def _add(group: Any, *args: Any, **kwargs: Any) -> None:
    try:
        group.addoption(*args, **kwargs)
    except ValueError:  # another conftest (e.g. tests/) already defines it
        pass


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wy_ascend fuzz")
    _add(group, "--profile", default=None, help="fuzz profile: ci, dev, nightly, large (env WY_ASCEND_PROFILE)")
    _add(group, "--backend", default=None, help="backend: cpu, cuda, npu, npu-cuda (env WY_ASCEND_BACKEND)")
    _add(group, "--fuzz-report", default=None, help="path of fuzz-report.json (env WY_ASCEND_FUZZ_REPORT)")


def bind_worker_device(backend: str) -> str | None:
    """Bind xdist worker gwK to accelerator K (mod the count); returns what it did, None if nothing."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or os.environ.get("WY_ASCEND_NO_DEVICE_MAP") == "1":
        return None
    index = int(worker[2:])
    if backend == "npu":
        visible = [d for d in os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").split(",") if d.strip()]
        if visible:
            os.environ["ASCEND_RT_VISIBLE_DEVICES"] = visible[index % len(visible)]
            return f"ASCEND_RT_VISIBLE_DEVICES={os.environ['ASCEND_RT_VISIBLE_DEVICES']}"
        import torch
        import torch_npu  # noqa: F401

        device = index % torch.npu.device_count()  # type: ignore[attr-defined]
        torch.npu.set_device(device)  # type: ignore[attr-defined]
        return f"npu:{device}"
    if backend in ("cuda", "npu-cuda"):
        import torch

        if torch.cuda.is_available():
            device = index % torch.cuda.device_count()
            torch.cuda.set_device(device)
            return f"cuda:{device}"
    return None


def _check_backend(backend: str) -> None:
    from wy_ascend.backends import BACKENDS, resolve_backend
    from wy_ascend.errors import BackendUnavailableError
    from wy_ascend.testing.properties import DEVICE_OF

    if backend not in BACKENDS:
        raise pytest.UsageError(f"--backend must be one of {sorted(BACKENDS)}, got {backend!r}")
    try:
        resolve_backend(backend, __import__("torch").device(DEVICE_OF[backend]))
    except BackendUnavailableError as e:
        raise pytest.UsageError(str(e)) from e


def pytest_configure(config: pytest.Config) -> None:
    try:
        run = select(config.getoption("--profile"), config.getoption("--backend"))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from e
    bound = bind_worker_device(run.backend)
    _check_backend(run.backend)
    config.option.hypothesis_show_statistics = True
    config.pluginmanager.register(FuzzReport(config, run, bound), "wy_fuzz_report")


class FuzzReport:
    """Collects the tally shipped on each test's report and writes the summary and the JSON report."""

    def __init__(self, config: pytest.Config, run: RunConfig, bound: str | None) -> None:
        self.config = config
        self.run = run
        self.bound = bound
        self.start = time.perf_counter()
        self.properties: dict[str, dict[str, Any]] = {}
        self.failures: list[dict[str, Any]] = []
        self.tests: dict[str, str] = {}
        self.devices: dict[str, str | None] = {}
        self.is_worker = hasattr(config, "workerinput")
        self.final: dict[str, Any] | None = None

    def pytest_report_header(self) -> list[str]:
        p = self.run.profile
        lines = [
            f"wy_ascend fuzz: profile {p.name} ({p.description}), backend {self.run.backend}, "
            f"examples {p.examples}",
            f"versions: python {sys.version.split()[0]}, torch {_version('torch')}, triton {_version('triton')}, "
            f"hypothesis {_version('hypothesis')}",
        ]
        if p.accelerator and self.run.backend == "cpu":
            lines.append(f"warning: profile {p.name!r} is sized for an accelerator; on the cpu backend it takes hours")
        return lines

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if report.when == "call":
            tally = TALLY.drain()
            if tally["cases"] or tally["failures"]:
                report.user_properties.append((_KEY, tally))
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            report.user_properties.append((_WORKER_KEY, {"worker": worker, "device": self.bound}))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        prop = _property_of(report.nodeid)
        if report.when == "call" or report.failed:
            self.tests[report.nodeid] = report.outcome
        for key, tally in report.user_properties:
            if key == _WORKER_KEY:
                self.devices[tally["worker"]] = tally["device"]
            if key != _KEY:
                continue
            for name, n in tally["cases"].items():
                entry = self._entry(name)
                entry["cases"] += n
                entry["seconds"] += tally["seconds"].get(name, 0.0)
                entry["cpu_seconds"] += tally.get("cpu_seconds", {}).get(name, 0.0)
            for failure in tally["failures"]:
                self._entry(failure["property"])["failures"] += 1
                self.failures.append({**failure, "test": report.nodeid})
        if prop is not None and report.failed and not any(f["test"] == report.nodeid for f in self.failures):
            # A failure that never reached the final replay of a property (e.g. a strategy or health-check error).
            self._entry(prop)["failures"] += 1
            message = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "failed"
            self.failures.append({"property": prop, "regression": None, "message": message, "case": None,
                                  "test": report.nodeid})

    def _entry(self, name: str) -> dict[str, Any]:
        return self.properties.setdefault(name, {"cases": 0, "failures": 0, "seconds": 0.0, "cpu_seconds": 0.0})

    def summary(self) -> dict[str, Any]:
        elapsed = time.perf_counter() - self.start
        total = sum(p["cases"] for p in self.properties.values())
        props = {
            name: {**p, "seconds": round(p["seconds"], 3), "cpu_seconds": round(p["cpu_seconds"], 3),
                   "cases_per_second": round(p["cases"] / p["seconds"], 3) if p["seconds"] else None}
            for name, p in sorted(self.properties.items())
        }
        return {
            "profile": self.run.profile.name,
            "backend": self.run.backend,
            "properties": props,
            "regressions": sorted({f["regression"] for f in self.failures if f["regression"]}),
            "failures": self.failures,
            "total_cases": total,
            "elapsed_seconds": round(elapsed, 3),
            "cases_per_second": round(total / elapsed, 3) if elapsed else None,
            "workers": dict(sorted(self.devices.items())),  # xdist worker -> device it bound (None: none)
            "tests": dict(sorted(self.tests.items())),
        }

    def report_path(self) -> Path:
        path = self.config.getoption("--fuzz-report") or os.environ.get(REPORT_ENV) or DEFAULT_REPORT
        return Path(self.config.invocation_params.dir, path)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or not self.properties:
            return
        s = self.final or self.summary()
        tr = terminalreporter
        tr.section("wy_ascend fuzz summary")
        tr.write_line(f"profile {s['profile']}, backend {s['backend']}, {s['total_cases']} cases in "
                      f"{s['elapsed_seconds']:.1f} s ({s['cases_per_second']} cases/s)")
        tr.write_line(f"{'property':<20}{'cases':>8}{'failures':>10}{'seconds':>10}{'cpu s':>10}{'cases/s':>10}")
        for name, p in s["properties"].items():
            rate = f"{p['cases_per_second']:.2f}" if p["cases_per_second"] else "-"
            tr.write_line(f"{name:<20}{p['cases']:>8}{p['failures']:>10}{p['seconds']:>10.1f}"
                          f"{p['cpu_seconds']:>10.1f}{rate:>10}")
        for f in s["failures"]:
            tr.write_line(f"FAILED {f['property']}: {f['message']}", red=True)
            tr.write_line(f"    regression file: {f['regression'] or '(not recorded)'}")
        tr.write_line(f"report: {self.report_path()}")

    def pytest_sessionfinish(self) -> None:
        if self.is_worker or not self.properties:
            return
        self.final = self.summary()
        path = self.report_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.final, indent=2) + "\n")
        tmp.replace(path)


def _property_of(nodeid: str) -> str | None:
    name = nodeid.rsplit("::", 1)[-1].split("[", 1)[0]
    prop = name.removeprefix("test_")
    return prop if prop in PROPERTY_NAMES and "test_fuzz" in nodeid else None


def _version(dist: str) -> str:
    """Installed version of ``dist`` ("triton": whichever distribution owns the module)."""
    from importlib.metadata import PackageNotFoundError, version

    for name in ("triton-ascend", "triton") if dist == "triton" else (dist,):
        try:
            return f"{version(name)}" + (f" ({name})" if dist == "triton" else "")
        except PackageNotFoundError:
            continue
    return "not installed"
