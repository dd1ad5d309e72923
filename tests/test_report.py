"""benchmarks/report.py renders what the run files say (here: the fuzz throughput section)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.report import fuzz_markdown  # noqa: E402


def test_fuzz_section_reads_the_report(tmp_path: Path) -> None:
    """The verdict is the oracle property's warm rate (once compiled), not its overall rate."""
    report = {"profile": "nightly", "backend": "cuda", "total_cases": 30, "elapsed_seconds": 10.0,
              "cases_per_second": 3.0, "warm_cases_per_second_per_worker": 6.0,
              "workers": {"gw0": "cuda:0", "gw1": "cuda:1"}, "failures": [],
              "properties": {"oracle": {"cases": 10, "seconds": 8.0, "cases_per_second": 1.25, "warm_cases": 4,
                                        "warm_seconds": 0.05, "warm_cases_per_second": 80.0},
                             "bad_input": {"cases": 20, "seconds": 0.5, "cases_per_second": 40.0, "warm_cases": 20,
                                           "warm_seconds": 0.5, "warm_cases_per_second": 40.0}}}
    path = tmp_path / "fuzz-report.json"
    path.write_text(json.dumps(report))
    text = fuzz_markdown([str(path)])
    assert ("profile `nightly`, backend `cuda`, 2 worker(s): 30 cases in 10.0 s = 3.0 cases/s; warm cases 6.00 "
            "cases/s per worker; the oracle property's warm rate 80.00 cases/s per worker (over 4 warm cases): "
            "target 50 met" in text)
    assert "| oracle | 10 | 8.0 | 1.25 | 4 | 80.00 |" in text and "| bad_input | 20 | 0.5 | 40.00 | 20 | 40.00 |" in text
