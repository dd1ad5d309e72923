"""benchmarks/report.py renders what the run files say (the fuzz throughput section; the device table's
shapes a run did not reach)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.report import fuzz_markdown, peer_markdown  # noqa: E402
from benchmarks.shapes import GRID, SHAPES


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


def test_a_run_cut_short_names_the_shapes_it_did_not_reach() -> None:
    """A compare_peer file has the shapes its run reached: the tables say which of theirs are absent."""
    reached = list(GRID)[:-2]
    rows = [dict(shape=name, provider=p, op=op, ms=1.0, GBps=1.0, hbm_frac=0.5)
            for name in [*SHAPES, *reached] for p in ("ours", "fla") for op in ("fwd", "bwd")]
    text = peer_markdown({"meta": {}, "path": "x.json", "format": "compare_peer", "rows": rows}, None)
    assert f"Not in this run (2 of {len(GRID)} shapes): {', '.join(list(GRID)[-2:])}." in text
    assert f"of {len(SHAPES)} shapes" not in text  # every headline shape is there
