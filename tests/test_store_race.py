"""The store's no-overwrite rule, by behaviour: processes racing to write one file name with
different contents leave exactly one of the contents, whole; a reader polling the name meanwhile
never sees a partial file, and never sees it change once it is there."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.synchronize
from pathlib import Path

from wy_ascend.testing import store
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure

WRITERS = 4
ROUNDS = 3  # each writer tries this many times after the start signal
CASE = Case(T=20, cu_seqlens=(0, 5, 20), HV=2)


def big_text(i: int) -> str:
    """Writer ``i``'s content: 16 MiB, long enough to write that a reader polling meanwhile catches a
    file created in place before it is complete."""
    return f"writer {i}\n" + chr(ord("a") + i) * 2**24 + "\nend\n"


def _write_new(path: str, i: int, go: multiprocessing.synchronize.Event) -> None:
    go.wait()
    for _ in range(ROUNDS):
        store._write_new(Path(path), big_text(i))


def _record_failure(path: str, i: int, go: multiprocessing.synchronize.Event) -> None:
    go.wait()
    for _ in range(ROUNDS):
        store.record_failure("oracle", CASE, PropertyFailure(f"writer {i}"), Path(path).parent)


def race(target: object, path: Path) -> list[str]:
    """Start WRITERS forked processes running ``target`` on ``path`` at once; return every
    content a reader saw under ``path`` while they ran, and the final one."""
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    procs = [ctx.Process(target=target, args=(str(path), i, go)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    go.set()
    seen = []
    while any(p.is_alive() for p in procs):
        try:
            seen.append(path.read_text())
        except FileNotFoundError:
            continue
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return [*seen, path.read_text()]


# A race shows a broken writer in most runs, not all: one that creates the file in place (no temp
# file) was caught in 2 runs of 3, one that publishes with os.replace (overwriting) in 3 of 3.
RACES = 3


def test_racing_writers_of_different_contents_leave_one_whole_and_never_overwrite(tmp_path: Path) -> None:
    for n in range(RACES):
        path = tmp_path / str(n) / "oracle-000000000000.json"
        path.parent.mkdir()
        seen = race(_write_new, path)
        assert seen[-1] in {big_text(i) for i in range(WRITERS)}  # one writer's content, whole
        assert set(seen) == {seen[-1]}  # every read, from the first: that content (never partial, never replaced)
        assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def test_racing_records_of_one_case_with_different_failures_leave_one_record(tmp_path: Path) -> None:
    path = tmp_path / store.file_name("oracle", CASE)
    seen = race(_record_failure, path)
    assert set(seen) == {seen[-1]}
    record = json.loads(seen[-1])
    assert record["failure"]["message"] in {f"writer {i}" for i in range(WRITERS)}
    assert store.load(path).case == CASE
    assert [p.name for p in tmp_path.iterdir()] == [path.name]

