"""A call's result does not depend on the calls before it (wy_ascend/testing/history.py): the history
property over drawn sequences of calls, and each cache's key against what its value depends on (the
module's list, which a scan of src/ keeps complete)."""

from __future__ import annotations

import ast
import dataclasses
import io
import itertools
import os
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fuzz.strategies import HISTORY_CHANGES, history_cases, known_defect
from wy_ascend import backends, ops, planning, subjects, validation
from wy_ascend.backends import LaunchConfig
from wy_ascend.errors import BackendUnavailableError
from wy_ascend.layout import prepare_chunk_indices
from wy_ascend.subjects import changes_in_place
from wy_ascend.testing import history
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure

ROOT = Path(__file__).resolve().parents[1]
CPU_ONLY = pytest.mark.skipif(os.environ.get("WY_ASCEND_BACKEND", "cpu") != "cpu",
                              reason="the history server forks, which only the cpu backend allows")

# ----------------------------------------------------------------------------- the history property

@pytest.fixture(scope="module")
def server() -> Iterator[history.HistoryServer]:
    running = history.HistoryServer()
    yield running
    running.close()


def _calls(case: Case) -> list[Case]:
    """A history case's calls in order, the case itself last."""
    return [*case.before, case.replace(before=())]


@CPU_ONLY
@settings(max_examples=6, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
@given(history_cases())
def test_each_call_gives_the_bits_it_gives_alone_in_a_fresh_process(server, case: Case) -> None:
    history.check_history(server, _calls(case))


FOREIGN = [name for name, subject in subjects.SUBJECTS.items() if subject.foreign and "cpu" in subject.backends]


def _needs(subject: str) -> None:
    """The test skipped, saying why, where a foreign subject is not installed."""
    if subjects.get(subject).installed_version is None:
        pytest.skip(f"subject {subject} needs fla-core: pip install '.[upstream]'")


@CPU_ONLY
@pytest.mark.parametrize("subject", FOREIGN)
@settings(max_examples=3, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_foreign_subjects_calls_give_the_bits_they_give_alone(server, subject: str, data: st.DataObject) -> None:
    """The history property over a foreign subject's own calls (its claims; no call a known defect covers, its
    stale chunk-index memo among them: regressions/history-*.json replay it); few examples, each call being
    fla's kernels under the interpreter."""
    _needs(subject)
    case = data.draw(history_cases(subject))
    assume(known_defect("history", case) is None)
    history.check_history(server, _calls(case))


FIRST = Case(cu_seqlens=(0, 5, 70, 75), H=1, HV=2, K=16, V=16, BT=16, use_g=True, backend="cpu")
EACH_CHANGE = {  # one call of each kind of change of the first, as ``history_cases`` draws them
    "BT": FIRST.replace(BT=32), "dtype": FIRST.replace(dtype="bfloat16"),
    "gate dtypes": FIRST.replace(beta_dtype="float32", g_dtype="bfloat16"), "index_dtype": FIRST.replace(index_dtype="int32"),
    "use_g": FIRST.replace(use_g=False), "knobs": FIRST.replace(knobs={"mode": "grid", "max_tasks": 2, "tile_cap": 16}),
    "heads": FIRST.replace(H=2, HV=4), "dims": FIRST.replace(K=24, V=17),
    "cu_seqlens values": FIRST.replace(cu_seqlens=(0, 20, 70, 75)), "chunk_indices": FIRST.replace(chunk_indices=True),
    "inputs": FIRST.replace(seed=5, dist="zeros"),
}


def test_each_kind_of_change_is_listed_once() -> None:
    assert tuple(EACH_CHANGE) == HISTORY_CHANGES


# Each subject's knob change: this project's launch shape, fla-ascend's grid limit and core count; fla takes none.
KNOB_CHANGE = {subjects.DEFAULT: EACH_CHANGE["knobs"].knobs, "fla-ascend": {"max_blocks": 3, "num_cores": 2}, "fla": None}


@CPU_ONLY
@pytest.mark.parametrize("subject", [subjects.DEFAULT, *FOREIGN])
def test_each_kind_of_change_in_one_sequence(server, subject: str) -> None:
    """Every kind of change once, then the first call again (its cu_seqlens object changed back in place), for
    each subject; where a known defect covers that (fla-core's stale chunk-index memo), without the changes
    in place of a cu_seqlens object."""
    if subjects.get(subject).foreign:
        _needs(subject)
    calls = [FIRST, *(c for what, c in EACH_CHANGE.items() if what != "knobs"), FIRST]
    if KNOB_CHANGE[subject] is not None:
        calls.insert(1, FIRST.replace(knobs=KNOB_CHANGE[subject]))
    calls = [c.of(subject) for c in calls]
    if known_defect("history", calls[-1].replace(before=tuple(calls[:-1]))) is not None:
        calls = [c for c in calls[:-1] if c.cu_seqlens == FIRST.cu_seqlens]
        assert not changes_in_place(calls[-1].replace(before=tuple(calls[:-1])))
    history.check_history(server, calls)


def test_the_comparison_sees_one_element() -> None:
    x = torch.arange(6, dtype=torch.bfloat16).view(2, 3)
    y = x.clone()
    y[1, 2] += 1
    assert history._differ(history._bits({"dk": x, "dg": None}), history._bits({"dk": x.clone(), "dg": None})) == []
    assert history._differ(history._bits({"dk": x}), history._bits({"dk": y})) == ["dk: 1 element(s) differ"]
    assert history._differ(history._bits({"dk": x}), history._bits({"dk": x.float()})) == [
        "dk: ('torch.bfloat16', (2, 3)) vs ('torch.float32', (2, 3))"]


class _Replies:
    """A stand-in history server: the replies of the alone runs and of the sequence, as given."""

    def __init__(self, alone: list, together: tuple) -> None:
        self.replies = alone, together

    def run(self, calls: list[Case], in_place: bool = True) -> tuple[list, tuple]:
        return self.replies


def test_calls_that_all_raise_alike_fail_the_property() -> None:
    """A call that raises alone in a fresh process is a failure, however alike the sequence raises: a sequence
    runner broken for every call (a generated mutant: its shared cu_seqlens keyed by the tensor) made each
    call raise the same TypeError in both runs, and the property compared nothing and passed."""
    raised = ("raise", "Traceback (most recent call last):\nTypeError: expected Tensor as element 0")
    broken = _Replies([("ok", [raised]), ("ok", [raised])], ("ok", [raised, raised]))
    with pytest.raises(PropertyFailure, match="call 0 of 2 .* does not run alone in a fresh process: raise"):
        history.check_history(broken, [FIRST, FIRST])
    ok = ("ok", history._bits({"dk": torch.ones(2)}))
    with pytest.raises(PropertyFailure, match="call 1 of 2 .* raise in sequence \\(TypeError\\), ok alone"):
        history.check_history(_Replies([("ok", [ok]), ("ok", [ok])], ("ok", [ok, raised])), [FIRST, FIRST])
    history.check_history(_Replies([("ok", [ok]), ("ok", [ok])], ("ok", [ok, ok])), [FIRST, FIRST])


# ----------------------------------------------------------------------------- the list is complete

DOC = history.__doc__ or ""


def _state_in_src() -> Iterator[str]:
    """``module.name`` of every memoized function (cache decorators), every name a function rebinds
    (``global``) and every module-level mutable container or instance (an empty literal, an
    OrderedDict, a ContextVar, a private class's instance) in src/."""
    for path in sorted((ROOT / "src" / "wy_ascend").rglob("*.py")):
        module = path.stem
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any("cache" in ast.unparse(d) for d in node.decorator_list):
                yield f"{module}.{node.name}"
            if isinstance(node, ast.Global):
                yield from (f"{module}.{name}" for name in node.names)
        for node in tree.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if value is None or not isinstance(target, ast.Name):
                continue
            empty = isinstance(value, (ast.Dict, ast.List, ast.Set)) and not ast.unparse(value).strip("{}[]")
            call = ast.unparse(value.func) if isinstance(value, ast.Call) else ""
            if empty or call in ("OrderedDict", "contextvars.ContextVar") or call.startswith("_") and call[1:2].isupper():
                yield f"{module}.{target.id}"


def test_every_state_in_src_is_listed_with_its_key() -> None:
    found = sorted(set(_state_in_src()))
    listed = {name for name in found if name in DOC}
    assert len(found) > 20  # the scan sees the package
    assert not set(found) - listed, f"state in src/ missing from testing/history.py's list: {set(found) - listed}"


# ----------------------------------------------------------------------------- each key covers its value

BASE = Case(cu_seqlens=(0, 5, 37), H=1, HV=2, K=24, V=20, BT=16, use_g=True, backend="cpu")
# What a _Call depends on, one at a time: every Problem field (NT through cu_seqlens' values at the same T),
# the gate and index dtypes, each launch knob.
CALL_CHANGES: dict[str, dict[str, Any]] = {
    "T": {"cu_seqlens": (0, 5, 45)}, "NT": {"cu_seqlens": (0, 20, 37)}, "B": {"cu_seqlens": None, "B": 2, "T": 20},
    "varlen": {"cu_seqlens": None, "T": 37}, "H": {"H": 2, "HV": 2}, "HV": {"HV": 4}, "K": {"K": 32}, "V": {"V": 17},
    "BT": {"BT": 32}, "use_g": {"use_g": False}, "dtype": {"dtype": "bfloat16"}, "beta_dtype": {"beta_dtype": "float32",
    "dtype": "bfloat16"}, "g_dtype": {"g_dtype": "float32", "dtype": "bfloat16"}, "index_dtype": {"index_dtype": "int32"},
    **{f"knob {k}": {"knobs": {k: v}} for k, v in (("max_blocks", 3), ("num_cores", 2), ("ub_bytes", 65536),
       ("mode", "grid"), ("tile_cap", 16), ("max_tasks", 2), ("gate_head_major", True),
       ("emulate", False), ("group_dk", True), ("lowp_dot", True), ("dk_sum_kernel", True))},
    "dot_guard": {"knobs": {"dot_guard": False, "emulate": False}},
}


def _signature(case: Case, kernel: str) -> tuple:
    """``ops._call``'s arguments for ``case`` (its validated problem)."""
    x = case.build_inputs()
    p = validation.validate(x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens)
    return kernel, p, "cpu", case.config(), x.beta, x.g, x.cu_seqlens


def _made(call: ops._Call) -> tuple:
    """What a _Call holds that its launches use."""
    return (call.plan, call.specialization, call.scalars, call.per_launch, call.kernel, call.dk_sum, call.emulate,
            call.head_major, call.group_dk)


@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
@pytest.mark.parametrize("change", list(CALL_CHANGES))
def test_the_call_memo_keys_on_each_thing_a_call_depends_on(change: str, kernel: str, monkeypatch) -> None:
    """Two calls that differ in one thing do not share a memoized _Call, and the second one's is what a fresh
    process builds for it."""
    monkeypatch.setattr(ops, "_CALLS", OrderedDict())
    first = ops._call(*_signature(BASE, kernel))
    signature = _signature(BASE.replace(**CALL_CHANGES[change]), kernel)
    second = ops._call(*signature)
    assert second is not first
    merged = backends.current_config(signature[3])
    beta, g, cu = signature[4:]
    fresh = ops._Call(kernel, signature[1], "cpu", merged, cu.dtype if cu is not None else None, beta.dtype,
                      g.dtype if g is not None else None)
    assert _made(second) == _made(fresh)


ENV_VALUES = {backends.BACKEND_ENV: "cpu", backends.LOWP_ENV: "all", backends.FP32_DOT_ENV: "ieee"}  # else "0"


@pytest.mark.parametrize("name", ops._CALL_ENV)
def test_the_call_memo_keys_on_each_environment_variable_it_reads(name: str, monkeypatch) -> None:
    """Setting one of them after a call gives the next call a _Call of its own, the one built under it."""
    monkeypatch.setattr(ops, "_CALLS", OrderedDict())
    monkeypatch.delenv(name, raising=False)
    first = ops._call(*_signature(BASE, "bwd"))
    monkeypatch.setenv(name, ENV_VALUES.get(name, "0"))
    signature = _signature(BASE, "bwd")
    second = ops._call(*signature)
    assert second is not first
    beta, g, cu = signature[4:]
    fresh = ops._Call("bwd", signature[1], "cpu", backends.current_config(signature[3]), cu.dtype, beta.dtype, g.dtype)
    assert _made(second) == _made(fresh)


def test_the_varlen_cache_keys_on_the_chunk_size_and_the_values() -> None:
    """One cu_seqlens object: another BT, then its values changed in place, then an equal distinct tensor:
    each gets the chunk indices of its own (the cache holds the last 8 objects)."""
    cu = torch.tensor([0, 5, 37])
    for BT, values in ((16, None), (32, None), (16, [0, 20, 37]), (64, None)):
        if values is not None:
            cu.copy_(torch.tensor(values))
        expected = prepare_chunk_indices(cu.clone(), BT)
        for tensor in (cu, cu.clone()):
            got, on_device = validation._varlen_chunks(tensor, 1, 37, BT)
            assert torch.equal(got, expected) and torch.equal(on_device, expected)


def test_the_plan_memo_is_the_plan() -> None:
    """plan's key is all it reads: after plans of other shapes and specs, each is what the function gives."""
    spec = backends.BACKENDS["cpu"].spec(torch.device("cpu"), LaunchConfig(num_cores=4))
    variants = [dict(kernel=kernel, NT=3, BH=2, BT=16, K=24, V=20, spec=spec) for kernel in ("fwd", "bwd")]
    variants += [{**variants[1], k: v} for k, v in (("NT", 9), ("BH", 5), ("BT", 32), ("K", 64), ("V", 128))]
    variants += [{**variants[1], "spec": dataclasses.replace(spec, **{f: v})} for f, v in
                 (("mode", "grid"), ("num_cores", 2), ("tile_cap", 16), ("max_tasks", 2), ("ub_bytes", 65536))]
    for kwargs in variants + variants[::-1]:
        assert planning.plan(**kwargs) == planning.plan.__wrapped__(**kwargs)


def test_the_merged_config_memo_is_the_merge() -> None:
    base, call = LaunchConfig(tile_cap=16), LaunchConfig(mode="grid")
    for a, b in ((base, call), (base, None), (LaunchConfig(), call), (call, base)):
        assert backends._merged(a, b) == a.merged(b)


def test_the_autotuner_memo_keys_on_the_autotune_switch() -> None:
    """WY_ASCEND_AUTOTUNE set after a first call takes effect (the cuda variant, built without a GPU in a
    process without the interpreter)."""
    script = ("import os; from wy_ascend import backends\n"
              "os.environ['WY_ASCEND_AUTOTUNE'] = '1'; a = backends.kernel_for(backends.BACKENDS['cuda'], 'fwd')\n"
              "os.environ['WY_ASCEND_AUTOTUNE'] = '0'; b = backends.kernel_for(backends.BACKENDS['cuda'], 'fwd')\n"
              "print(len(a.configs), len(b.configs))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(len(backends.CUDA_CONFIGS) + len(backends.FWD_REGISTER_CAPPED_CONFIGS)), "1"]


@CPU_ONLY
def test_a_server_that_cannot_prepare_the_calls_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A foreign subject whose module does not import in the server (fla-core missing): the caller gets the
    server's reason, not "the history server exited (1)" with the reason in a log (what a replay without
    fla-core said of the store's history files)."""
    (tmp_path / "fla").mkdir()
    (tmp_path / "fla" / "__init__.py").write_text('raise ImportError("planted: no fla-core here")\n')
    monkeypatch.syspath_prepend(str(tmp_path))  # the server's PYTHONPATH is this sys.path
    server = history.HistoryServer(reply_s=120)  # a reply dropped on this path fails in minutes, not REPLY_S
    try:
        with pytest.raises(RuntimeError, match=r"cannot run these calls: ImportError: .*planted: no fla-core here"):
            server.run([Case(T=16, subject="fla-ascend", backend="cpu")])
    finally:
        server.close()


@CPU_ONLY
def test_a_server_that_drops_its_reply_fails_the_call_at_its_deadline() -> None:
    """A server that reads a request and never replies (its reply dropped on an error path) fails the call after
    ``reply_s`` and is killed, where the caller waited for good before."""
    server = history.HistoryServer(reply_s=3)
    server.close()  # the real server goes; a silent one takes its pipes' place
    server.process = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; sys.stdin.buffer.read(1); time.sleep(120)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="sent no reply within 3 s"):
        server.run([Case(T=16, backend="cpu")])
    assert time.monotonic() - started < 60 and server.process.wait(timeout=30) != 0


@st.composite
def _offsets(draw: st.DrawFn, n: int) -> tuple[int, ...]:
    """cu_seqlens of n entries: 0, then non-decreasing, ending past 0."""
    steps = draw(st.lists(st.integers(0, 40), min_size=n - 1, max_size=n - 1).filter(lambda s: sum(s) > 0))
    return tuple(int(x) for x in [0, *itertools.accumulate(steps)])


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(st.integers(2, 6).flatmap(lambda n: st.tuples(_offsets(n), _offsets(n), _offsets(n + 1))),
       st.sampled_from(["int32", "int64"]))
def test_a_cu_seqlens_object_changes_in_place_exactly_where_an_earlier_call_shares_it(
        drawn: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], index_dtype: str) -> None:
    """changes_in_place (what fla-core's known stale memo covers): an earlier call of the same entry count and
    index dtype, laid out contiguously, passes the same tensor object (history.run_sequence), so other values are
    a change in place; the same values, another entry count, another dtype or cu_seqlens laid out other than
    contiguously (its own tensor, an offset view) are not."""
    first, second, longer = drawn
    case = Case(cu_seqlens=second, index_dtype=index_dtype)
    other_dtype = "int64" if index_dtype == "int32" else "int32"
    assert changes_in_place(case.replace(before=(case.replace(cu_seqlens=first),))) == (first != second)
    assert not changes_in_place(case.replace(before=(case,)))
    assert not changes_in_place(case.replace(before=(case.replace(cu_seqlens=longer),)))
    assert not changes_in_place(case.replace(before=(case.replace(cu_seqlens=first, index_dtype=other_dtype),)))
    assert not changes_in_place(case.replace(before=(case.replace(cu_seqlens=first, memory={"cu_seqlens": "offset"}),)))


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=6))
def test_a_call_that_raises_in_sequence_is_reported_in_its_place_and_the_rest_still_run(
        raises: list[bool]) -> None:
    """run_sequence over any pattern of raising calls: each raising call gives ("raise", its traceback) at its own
    index and every other call still runs and gives its bits (a raise dropped or the loop cut short shifts or
    loses the replies check_history compares)."""
    from wy_ascend.testing.properties import common

    class Inputs(tuple):
        cu_seqlens = None

    def run_ops(case: Case, inputs: Any) -> dict[str, torch.Tensor]:
        if raises[case.T - 1]:
            raise ValueError(f"planted at call {case.T - 1}")
        return {"dk": torch.full((2,), float(case.T))}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(common, "build_inputs", lambda case: Inputs())
        patch.setattr(common, "run_ops", run_ops)
        results = history.run_sequence([Case(T=i + 1) for i in range(len(raises))])
    assert [state for state, _ in results] == ["raise" if r else "ok" for r in raises]
    for i, (state, what) in enumerate(results):
        if state == "raise":
            assert what.rstrip().endswith(f"ValueError: planted at call {i}")
        else:
            assert what == history._bits({"dk": torch.full((2,), float(i + 1))})


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(st.integers(-64, 255))
def test_a_server_that_exits_before_its_reply_fails_the_call_with_its_exit_code(code: int) -> None:
    """A server whose reply pipe closes before a reply (it died): the call fails at once naming its exit code,
    whatever that is, not with a bare EOFError or an unbound reply."""
    read, write = os.pipe()
    os.close(write)  # the server is gone: its end of the reply pipe closed
    server = object.__new__(history.HistoryServer)
    server.reply_s = 5
    with os.fdopen(read, "rb") as stdout:
        server.process = SimpleNamespace(stdin=io.BytesIO(), stdout=stdout, wait=lambda: code)
        with pytest.raises(RuntimeError, match=rf"^the history server exited \({code}\)$"):
            server.run([Case(T=16, backend="cpu")])


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.one_of(st.sampled_from(["cuda", "npu"]), st.text(min_size=1).filter(lambda b: b != "cpu")))
def test_the_history_property_refuses_every_backend_but_the_cpu(backend: str) -> None:
    """refuses/check_history_case over backend names: the cpu (by name or None) is run, any other name is refused
    with BackendUnavailableError naming that backend (its server forks, which a device runtime must not see),
    before a server is started."""
    assert history.refuses(None) is None and history.refuses("cpu") is None
    why = history.refuses(backend)
    assert why is not None and repr(backend) in why and "forks" in why
    with pytest.raises(BackendUnavailableError, match="runs on the cpu backend only") as raised:
        history.check_history_case(Case(T=16, backend=backend))
    assert raised.value.backend == backend and str(raised.value) == why


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(st.one_of(st.dictionaries(st.text(max_size=4), st.none(), max_size=3), st.integers(), st.none(),
                 st.text().map(lambda t: f"Traceback (most recent call last):\n{t}\nKeyError: 'x'")))
def test_an_error_is_named_by_its_exception_type_or_what_it_is(result: Any) -> None:
    """_error over what a reply carries: a traceback is named by its last line's exception type, bits (a dict) by
    "bits", anything else (a crash's exit code, None) by its repr."""
    expected = "KeyError" if isinstance(result, str) else "bits" if isinstance(result, dict) else repr(result)
    assert history._error(result) == expected
