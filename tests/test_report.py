"""benchmarks/report.py renders what the run files say (the fuzz throughput section; the device table's
shapes a run did not reach)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.report import compare, fuzz_markdown, peer_markdown  # noqa: E402
from benchmarks.shapes import GRID, GRID_RATIO, SHAPES


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


def test_both_ratios_are_held_to_the_target() -> None:
    """With kernel times in the file, each row has the do_bench ratio and the kernel-time ratio, each
    against its shape's target, and each group's line counts both (a host-bound row can fail one alone)."""
    name = list(GRID)[0]
    rows = [dict(shape=name, provider="ours", op="fwd", ms=3.0, GBps=1.0, hbm_frac=0.5, kernel_ms=0.9),
            dict(shape=name, provider="fla", op="fwd", ms=1.0, GBps=1.0, hbm_frac=0.5, kernel_ms=1.0),
            dict(shape=name, provider="ours", op="bwd", ms=1.0, GBps=1.0, hbm_frac=0.5, kernel_ms=2.0),
            dict(shape=name, provider="fla", op="bwd", ms=1.0, GBps=1.0, hbm_frac=0.5, kernel_ms=1.0)]
    lines = {(c["op"]): c for c in compare(rows)}
    assert (lines["fwd"]["ratio_met"], lines["fwd"]["kernel_met"]) == (False, True)
    assert (lines["bwd"]["ratio_met"], lines["bwd"]["kernel_met"]) == (True, False)
    text = peer_markdown({"meta": {}, "path": "x.json", "format": "compare_peer", "rows": rows}, None)
    assert (f"No-cliff grid: time ratio (do_bench) target met 1/2, worst against its bound: {name} fwd at 3.00x of "
            f"<= {GRID_RATIO}x; kernel-time ratio target met 1/2, worst against its bound: {name} bwd at 2.00x of "
            f"<= {GRID_RATIO}x.") in text
    assert "| 0.9000 / 1.0000 | met (0.90x) |" in text and "| 2.0000 / 1.0000 | not met (2.00x) |" in text
    old = [{k: v for k, v in r.items() if k != "kernel_ms"} for r in rows]  # files before session 18
    text = peer_markdown({"meta": {}, "path": "x.json", "format": "compare_peer", "rows": old}, None)
    assert "kernel-time" not in text and "kernels ours" not in text and "time ratio (do_bench) target met 1/2" in text


def test_the_page_without_matplotlib_says_what_to_install(tmp_path: Path, monkeypatch, capsys) -> None:
    """The page's figures need matplotlib, which the test install leaves out: asked for a figure without it,
    the generator stops before writing anything and names the extra to install, not a traceback."""
    from benchmarks import report

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out = tmp_path / "page.md"
    with pytest.raises(SystemExit) as exit_info:
        report.main(["--peer-json", str(tmp_path / "peer.json"), "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and not out.exists()
    assert "matplotlib" in err and "pip install -e '.[report]'" in err


@pytest.mark.parametrize("ops", [("fwd", "bwd"), ("bwd",)])
def test_compare_peer_prints_a_shape_s_rows_with_ours_over_fla_core_s(ops: tuple[str, ...], capsys) -> None:
    """compare_peer.py prints each shape's rows once measured (a run cut by a device's time limit shows what it
    measured): ours over fla-core's do_bench and kernel times, op by op, on our row alone; no ratio without a peer."""
    from benchmarks.compare_peer import _print_shape

    def row(op: str, provider: str, ms: float, kernel_ms: float) -> dict:
        return dict(shape="s", op=op, provider=provider, ms=ms, GBps=1.0, hbm_frac=0.5, copy_frac=0.5, kernel_ms=kernel_ms)

    rows = [row(op, "wy_ascend", 0.4 * (i + 1), 0.3 * (i + 1)) for i, op in enumerate(ops)]
    _print_shape(rows)
    assert [line.split()[-1] for line in capsys.readouterr().out.splitlines()] == [f"{0.3 * (i + 1):.4f}"
                                                                                  for i in range(len(ops))]
    rows += [row(op, "fla", 0.5 * (i + 1), 0.6 * (i + 1)) for i, op in enumerate(ops)]
    _print_shape(rows)
    ours = [line.split() for line in capsys.readouterr().out.splitlines() if " wy_ascend " in line]
    assert [(w[1], w[-3], w[-1]) for w in ours] == [(op, "0.80", "0.50") for op in ops]


def test_compare_peer_ours_only_leaves_fla_core_out_of_timing_and_warm_up(monkeypatch) -> None:
    """--ours-only never imports the peer, and its warm-up tasks build the calls without it (a candidate timed
    alone where fla-core is installed); without the flag the peer is asked for and the tasks build its calls."""
    from benchmarks import compare_peer

    class Stop(Exception):
        pass

    asked, subjects = [], []
    monkeypatch.setattr(compare_peer, "_peer", lambda: asked.append(True))

    def warm_all(given, *args, **kwargs):
        subjects.extend(given)
        raise Stop

    monkeypatch.setattr(compare_peer, "warm_all", warm_all)
    name = list(SHAPES)[0]
    for flags, peer in ((["--ours-only"], False), ([], True)):
        asked.clear(), subjects.clear()
        with pytest.raises(Stop):
            compare_peer.main([*flags, "--warm-jobs", "2", "--shapes", name])
        assert asked == ([True] if peer else []) and subjects == [(name, "cuda", None, peer)]
