"""``wy-ascend``: replay and list the regression store.

    wy-ascend replay regressions/<file>.json [--backend cpu|cuda|npu|npu-cuda]
    wy-ascend list [DIR]

``replay`` prints the case, runs its property and prints PASS or FAIL with the metrics;
it exits 0 on pass, 1 on fail, 2 when the file is malformed or the backend cannot run.
Without ``--backend`` the case runs on ``$WY_ASCEND_BACKEND``, else the file's backend.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .backends import BACKEND_ENV, BACKENDS, resolve_backend
from .errors import BackendUnavailableError, RegressionFileError

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3e}"
    if isinstance(x, (dict, list)):
        return json.dumps(x)
    return str(x)


def metrics_rows(metrics: dict[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Flatten nested metrics to (row label, {column: value}) rows: a dict of scalars is one row."""
    rows: list[tuple[str, dict[str, Any]]] = []
    scalars = {k: v for k, v in metrics.items() if not isinstance(v, dict)}
    if scalars:
        rows.append((prefix or "-", scalars))
    for k, v in metrics.items():
        if isinstance(v, dict):
            rows.extend(metrics_rows(v, f"{prefix}.{k}" if prefix else str(k)))
    return rows


def format_metrics(metrics: dict[str, Any]) -> str:
    """The metrics as an aligned text table (one row per output, one column per metric)."""
    rows = metrics_rows(metrics)
    if not rows:
        return "  (no metrics)"
    columns: list[str] = []
    for _, cells in rows:
        columns.extend(c for c in cells if c not in columns)
    table = [["", *columns]] + [[label, *(_fmt(cells[c]) if c in cells else "" for c in columns)]
                                for label, cells in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table)


def format_case(case: Any) -> str:
    """Every field of a case, one per line."""
    d = case.to_dict()
    width = max(len(k) for k in d)
    return "\n".join(f"  {k.ljust(width)}  {json.dumps(v)}" for k, v in d.items())


def _replay(args: argparse.Namespace) -> int:
    from .testing.properties import PropertyFailure, device_of
    from .testing.store import load, replay

    try:
        stored = load(args.file)
    except RegressionFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    backend = args.backend or os.environ.get(BACKEND_ENV) or stored.backend
    print(f"file      {stored.path}")
    print(f"property  {stored.property}")
    print(f"recorded  {stored.date} on backend {stored.backend}; versions {json.dumps(stored.versions)}")
    print(f"failure   {stored.failure['type']}: {stored.failure['message']}")
    print(f"backend   {backend} (this run)")
    print("case")
    print(format_case(stored.case))
    try:
        resolve_backend(backend, device_of(stored.case.replace(backend=backend)))
    except (BackendUnavailableError, ValueError) as e:
        print(f"error: cannot run on backend {backend!r}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        metrics = replay(stored, backend=backend)
    except PropertyFailure as e:
        print(f"FAIL: {e}")
        print(format_metrics(e.metrics))
        return EXIT_FAIL
    except Exception as e:  # noqa: BLE001 - a crash replays as a failure, with its traceback
        print(f"FAIL (crash): {type(e).__name__}: {e}")
        traceback.print_exc()
        return EXIT_FAIL
    print("PASS")
    print(format_metrics(metrics))
    return EXIT_PASS


def _list(args: argparse.Namespace) -> int:
    from .testing.store import describe_case, iter_store, load, regressions_dir

    directory = Path(args.dir) if args.dir else regressions_dir()
    paths = iter_store(directory)
    if not paths:
        print(f"no regression files in {directory}")
        return EXIT_PASS
    status = EXIT_PASS
    for path in paths:
        try:
            s = load(path)
        except RegressionFileError as e:
            print(f"{path.name}  MALFORMED: {e}")
            status = EXIT_BAD_INPUT
            continue
        print(f"{path.name}  {s.property}  {s.backend}  {s.date}  {describe_case(s.case)}")
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wy-ascend", description="Replay and list wy_ascend regression files.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("replay", help="run one stored case; exit 0 pass, 1 fail, 2 malformed file")
    p.add_argument("file", type=Path, help="a regressions/<property>-<hash>.json file")
    p.add_argument("--backend", choices=sorted(BACKENDS),
                   help=f"backend to run on (default: ${BACKEND_ENV}, else the file's backend)")
    p.set_defaults(func=_replay)
    p = sub.add_parser("list", help="list stored cases (file, property, backend, date, case)")
    p.add_argument("dir", nargs="?", help="store directory (default: $WY_ASCEND_REGRESSIONS, else ./regressions)")
    p.set_defaults(func=_list)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``wy-ascend`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
