"""Markdown summary of a nightly device run, and its verdict.

Reads what the nightly steps leave behind (fuzz-report.json from the fuzz conftest,
pytest-benchmark JSON, the regressions/ directory before and after the run) and prints a
GitHub job summary: step outcomes, cases run per property, failures with their regression
files, new regression files, benchmark deltas against a baseline from an earlier run.
When the fuzz step was killed before it wrote fuzz-report.json, the counts come from the
progress files it left next to it (``fuzz-report.json.parts/<worker>.json``, one per process
that ran cases, summed) and the summary says they are partial; a report marked
``interrupted`` is flagged the same way. Cases that crashed or hung their case runner
(``crash-*.json``/``timeout-*.json``, wy_ascend.testing.runner) are counted apart and marked
CRASH/TIMEOUT, with the runner logs' directory (``fuzz-report.json.logs/``, in the artifact).
The fuzzing section also has the run's time by column (worker-seconds per property and in total,
fuzz/counts.py), the number of kernel specializations launched and, for a run with a pool,
how much of the pool got a case and which pool specializations got none.
Exit status 1 when a step failed or a new regression file appeared (the job's verdict, since
the test steps run with continue-on-error so that every report gets written), else 0.

    python .ci/nightly_summary.py --outcome regress=success --outcome fuzz=failure \\
        --fuzz-report fuzz-report.json --bench bench.json --baseline .bench-baseline/bench.json \\
        --regressions-before .regressions-before.txt --copy-new-to nightly-out/new-regressions
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for fuzz.counts
from fuzz.counts import (  # noqa: E402  (no third-party imports: works when the setup step failed)
    CASE_COLUMNS,
    RUN_COLUMNS,
    Counts,
    breakdown,
    pending_failures,
    pool_coverage,
    pool_line,
    rate,
)

SLOWDOWN_PCT = 10.0  # a benchmark this much slower than its baseline is flagged (not failed: noise)


def load_json(path: Path | None) -> Any:
    """The parsed file, or None when it is absent or unreadable (a step that died early)."""
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def new_regressions(directory: Path, before: Path | None) -> list[Path] | None:
    """Regression files present now that were not listed in ``before`` (one path per line);
    None when there is no listing (the run died before making it)."""
    if before is None or not before.is_file():
        return None
    known = {Path(line.strip()).name for line in before.read_text().splitlines()}
    return sorted(p for p in directory.glob("*.json") if p.name not in known)


def outcomes_section(outcomes: dict[str, str]) -> list[str]:
    lines = ["| step | outcome |", "|---|---|"]
    lines += [f"| {step} | {'✅' if o == 'success' else '⏭️' if o == 'skipped' else '❌'} {o} |"
              for step, o in outcomes.items()]
    return lines


def parts_report(report: Path | None) -> dict[str, Any] | None:
    """A report summed from the progress files of a fuzz run that was killed before it wrote
    ``report`` (``<report>.parts/*.json``, fuzz/profiles.py ``Progress``); None when there are none."""
    if report is None:
        return None
    directory = report.with_name(report.name + ".parts")
    docs = [load_json(p) for p in sorted(directory.glob("*.json"))] if directory.is_dir() else []
    docs = [d for d in docs if isinstance(d, dict)]
    if not docs:
        return None
    counts = Counts()
    for doc in docs:
        counts.merge(doc)
    properties, failures = counts.properties(), counts.failures + pending_failures(docs)
    total = sum(p["cases"] for p in properties.values())
    times = [(d["started"], d["updated"]) for d in docs if isinstance(d.get("started"), (int, float))
             and isinstance(d.get("updated"), (int, float))]
    elapsed = max(u for _, u in times) - min(s for s, _ in times) if times else 0.0
    pool = next((d["pool"] for d in docs if d.get("pool") is not None), None)
    return {"profile": docs[0].get("profile"), "backend": docs[0].get("backend"), "interrupted": True,
            "parts": f"{directory.name}/ ({len(docs)} file(s))", "properties": properties, "failures": failures,
            "regressions": sorted({f["regression"] for f in failures if f.get("regression")}),
            "total_cases": total, "elapsed_seconds": elapsed,
            "cases_per_second": rate(total, elapsed),
            "workers": {str(d.get("worker")): d.get("device") for d in docs},
            "specializations": counts.specializations, **pool_coverage(pool, counts.specializations),
            # from the first progress file's start (after any warm-up) to the last one's update
            "time": breakdown(properties, elapsed, len(docs), 0.0)}


def lost_kind(failure: dict[str, Any]) -> str | None:
    """``crash`` or ``timeout`` for a failure whose case crashed or hung its case runner (by
    the regression file's name, else the runner's message), else None."""
    name = Path(str(failure.get("regression") or "")).name
    message = str(failure.get("message") or "")
    if name.startswith("crash-") or message.startswith("case crashed the runner"):
        return "crash"
    if name.startswith("timeout-") or message.startswith("case ran past the time limit"):
        return "timeout"
    return None


def fuzz_section(report: Any, logs: str = "fuzz-report.json.logs/") -> list[str]:
    if report is None:
        return ["No fuzz-report.json (the fuzz step did not get to write it)."]
    lines: list[str] = []
    if report.get("parts"):
        lines += [f"⚠️ The fuzz run was cut short before it wrote fuzz-report.json: **partial counts**, summed from "
                  f"the progress files it left (`{report['parts']}`).", ""]
    elif report.get("interrupted"):
        lines += ["⚠️ The fuzz run was cut short (interrupted, e.g. by a time limit): **partial counts**.", ""]
    workers = report.get("workers")
    n_workers = (len(workers) if isinstance(workers, dict) else workers) or 1
    lines += [f"Profile `{report.get('profile')}`, backend `{report.get('backend')}`, "
              f"{n_workers} worker(s): **{report.get('total_cases', 0)} cases** in "
              f"{report.get('elapsed_seconds') or 0:.0f} s ({report.get('cases_per_second')} cases/s).", "",
              _lost_line(report.get("failures", []), logs), "",
              "| property | cases | failures | seconds | warm cases (no new compile) | warm cases/s |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, p in sorted(report.get("properties", {}).items()):
        warm_rate = rate(p.get("warm_cases", 0), p.get("warm_seconds", 0))
        lines.append(f"| {name} | {p.get('cases', 0)} | {p.get('failures', 0)} | {p.get('seconds', 0):.1f} "
                     f"| {p.get('warm_cases', 0)} | {'-' if warm_rate is None else f'{warm_rate:.2f}'} |")
    lines += time_lines(report)
    if "specializations" in report:
        lines += ["", f"Kernel specializations launched: {len(report['specializations'])} "
                  "(cases of each: `specializations` in fuzz-report.json)."]
    pool = pool_line(report)
    if pool is not None:
        lines += ["", ("⚠️ " if report.get("pool_without_cases") else "") + pool + "."]
    if report.get("warmup_slow"):
        lines += ["", "⚠️ Pool entries left out, compiling past the warm-up deadline (a compile-time cliff): "
                  + ", ".join(report["warmup_slow"]) + "."]
    failures = report.get("failures", [])
    if failures:
        lines += ["", f"**{len(failures)} failure(s):**", ""]
        for f in failures:
            where = f"`{f['regression']}`" if f.get("regression") else "(no regression file)"
            message = (f.get("message") or "").strip().splitlines()
            kind = lost_kind(f)
            mark = f"**{kind.upper()}** " if kind else ""
            lines.append(f"- {mark}`{f.get('property')}` {where}: {message[0] if message else ''}")
    return lines


def time_lines(report: dict[str, Any]) -> list[str]:
    """The time breakdown (worker-seconds by column, a row per property and the total); none
    for a report without one (an older run)."""
    t = report.get("time")
    if not t:
        return []
    head = [c.replace("_", " ") for c in RUN_COLUMNS]
    lines = ["", f"Time in worker-seconds: {t['workers']} worker(s) x {t['wall_seconds']:.0f} s wall = "
             f"{t['worker_seconds']:.0f} s; `other` is what no column accounts for.", "",
             "| property | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for name, p in sorted(report.get("properties", {}).items()):
        cells = [f"{p.get('time', {}).get(c, 0.0):.1f}" for c in CASE_COLUMNS] + [""] * (len(RUN_COLUMNS) - len(CASE_COLUMNS))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **total** | " + " | ".join(f"{t['columns'][c]:.1f}" for c in RUN_COLUMNS) + " |")
    return lines


def _lost_line(failures: list[dict[str, Any]], logs: str) -> str:
    kinds = [lost_kind(f) for f in failures]
    crashes, timeouts = kinds.count("crash"), kinds.count("timeout")
    line = f"Crashes: **{crashes}**, timeouts: **{timeouts}** (cases that killed or hung their case runner)."
    if crashes or timeouts:
        line += f" Stack dumps: `{logs}` (in the artifact)."
    return line


def bench_means(doc: Any) -> dict[str, float]:
    """Mean seconds per benchmark (pytest-benchmark JSON), by full name."""
    if not isinstance(doc, dict):
        return {}
    return {b.get("fullname") or b["name"]: float(b["stats"]["mean"]) for b in doc.get("benchmarks", [])}


def bench_section(current: Any, baseline: Any, slowdown_pct: float) -> tuple[list[str], list[str]]:
    """The table and the names of benchmarks slower than the baseline by more than ``slowdown_pct``."""
    now, base = bench_means(current), bench_means(baseline)
    if not now:
        return ["No benchmark results."], []
    lines = [] if base else ["No baseline from an earlier run yet: this run becomes the baseline.", ""]
    lines += ["| benchmark | mean (ms) | baseline (ms) | change |", "|---|---:|---:|---:|"]
    slower = []
    for name, mean in sorted(now.items()):
        ref = base.get(name)
        if ref:
            change = 100.0 * (mean - ref) / ref
            flag = " ⚠️" if change > slowdown_pct else ""
            if flag:
                slower.append(name)
            lines.append(f"| `{name}` | {mean * 1e3:.3f} | {ref * 1e3:.3f} | {change:+.1f}%{flag} |")
        else:
            lines.append(f"| `{name}` | {mean * 1e3:.3f} | - | new |")
    return lines, slower


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--title", default="Nightly device run")
    parser.add_argument("--outcome", action="append", default=[], metavar="STEP=OUTCOME",
                        help="a step's outcome (success, failure, cancelled, skipped); repeatable")
    parser.add_argument("--fuzz-report", type=Path)
    parser.add_argument("--bench", type=Path)
    parser.add_argument("--baseline", type=Path, help="bench JSON of an earlier run")
    parser.add_argument("--regressions-dir", type=Path, default=Path("regressions"))
    parser.add_argument("--regressions-before", type=Path, help="listing of the regression files before the run")
    parser.add_argument("--copy-new-to", type=Path, help="copy new regression files here (for the artifact)")
    parser.add_argument("--slowdown-pct", type=float, default=SLOWDOWN_PCT)
    args = parser.parse_args(argv)

    outcomes = dict(o.split("=", 1) for o in args.outcome)
    failed_steps = [step for step, o in outcomes.items() if o not in ("success", "skipped")]
    new = new_regressions(args.regressions_dir, args.regressions_before)
    if args.copy_new_to and new:
        args.copy_new_to.mkdir(parents=True, exist_ok=True)
        for path in new:
            shutil.copy2(path, args.copy_new_to / path.name)
    bench_lines, slower = bench_section(load_json(args.bench), load_json(args.baseline), args.slowdown_pct)

    fuzz_report = load_json(args.fuzz_report) or parts_report(args.fuzz_report)
    logs = f"{args.fuzz_report.name}.logs/" if args.fuzz_report else "fuzz-report.json.logs/"
    ok = not failed_steps and not new
    out = [f"## {args.title}: {'✅ passed' if ok else '❌ failed'}", ""]
    if failed_steps:
        out.append(f"Failed steps: {', '.join(failed_steps)}.")
    if new:
        out.append(f"**{len(new)} new regression file(s)** (commit each with its fix; see regressions/README.md):")
        out += [f"- `{p}`" for p in new]
    elif new is None:
        out.append("New regression files: unknown (no listing of regressions/ from before the run).")
    out += ["", "### Steps", *outcomes_section(outcomes), "", "### Fuzzing", *fuzz_section(fuzz_report, logs)]
    out += ["", "### Benchmarks", *bench_lines]
    if slower:
        out += ["", f"{len(slower)} benchmark(s) more than {args.slowdown_pct:.0f}% slower than the baseline (flagged, "
                "not failed: device timings are noisy)."]
    print("\n".join(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
