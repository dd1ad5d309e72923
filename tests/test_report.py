"""benchmarks/report.py renders what the run files say (here: the fuzz throughput section)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import fuzz_markdown  # noqa: E402


def test_fuzz_section_reads_the_report(tmp_path: Path) -> None:
    report = {"profile": "ci", "backend": "cpu", "total_cases": 30, "elapsed_seconds": 10.0, "cases_per_second": 3.0,
              "workers": {"gw0": None, "gw1": None}, "failures": [],
              "properties": {"oracle": {"cases": 10, "seconds": 8.0, "cases_per_second": 1.25},
                             "bad_input": {"cases": 20, "seconds": 0.5, "cases_per_second": 40.0}}}
    path = tmp_path / "fuzz-report.json"
    path.write_text(json.dumps(report))
    text = fuzz_markdown([str(path)])
    assert ("profile `ci`, backend `cpu`, 2 worker(s): 30 cases in 10.0 s = 3.0 cases/s; the oracle property "
            "1.25 cases/s: target 5 not met" in text)
    assert "| oracle | 10 | 8.0 | 1.25 |" in text and "| bad_input | 20 | 0.5 | 40.00 |" in text
