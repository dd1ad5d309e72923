"""The compiles property (testing/compiles.py, testing/scaling.py): a split launch whose offsets are
constexprs or specialized integers compiles per launch chunk, and the property says so; offsets in
``do_not_specialize`` compile once, as this project's kernels do."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

if os.environ.get("WY_ASCEND_BACKEND", "cpu") != "cpu":
    pytest.skip("keys launches of the interpreter (the cpu backend)", allow_module_level=True)

import triton  # noqa: E402  (after conftest set TRITON_INTERPRET)
import triton.language as tl  # noqa: E402
from triton.runtime.autotuner import Autotuner  # noqa: E402

from wy_ascend import backends  # noqa: E402
from wy_ascend.testing.case import Case  # noqa: E402
from wy_ascend.testing.compiles import differing, distinct, record_launch, recorded_launches  # noqa: E402
from wy_ascend.testing.failure import PropertyFailure  # noqa: E402
from wy_ascend.testing.scaling import Ops, check_compiles  # noqa: E402

backends.kernel_for(backends.BACKENDS["cpu"], "fwd")  # the interpreter, prepared


@triton.jit
def _offset_constexpr(x, OFFSET: tl.constexpr, BLOCK: tl.constexpr):
    o = (OFFSET + tl.program_id(0)) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + o, tl.load(x + o) + 1)


@triton.jit
def _offset_specialized(x, offset, BLOCK: tl.constexpr):
    o = (offset + tl.program_id(0)) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + o, tl.load(x + o) + 1)


@triton.jit(do_not_specialize=["offset"])
def _offset_runtime(x, offset, BLOCK: tl.constexpr):
    o = (offset + tl.program_id(0)) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + o, tl.load(x + o) + 1)


BLOCK = 16


def _split(kernel: object, x: torch.Tensor, limit: int, as_constexpr: bool = False) -> None:
    """x += 1 in launches of at most ``limit`` programs, each given its first program's index."""
    programs = x.numel() // BLOCK
    for start in range(0, programs, limit):
        grid = (min(limit, programs - start),)
        if as_constexpr:
            kernel[grid](x, OFFSET=start, BLOCK=BLOCK)  # type: ignore[index]
        else:
            kernel[grid](x, start, BLOCK=BLOCK)  # type: ignore[index]


@pytest.mark.parametrize(("kernel", "limit", "keys"), [
    (_offset_constexpr, 2, {"OFFSET": ["=0", "=2", "=4", "=6"]}),
    (_offset_specialized, 1, {"offset": ["i32:D", "i32:1", "i32:N"]}),
    (_offset_runtime, 1, {}),
])
def test_a_split_launch_is_keyed_as_triton_caches_it(kernel: object, limit: int, keys: dict[str, list[str]]) -> None:
    """Eight programs in launches of ``limit``: a constexpr offset takes a key per launch; a specialized int
    one per class (0 a multiple of 16, 1, the rest: Triton's compute_spec_key); a do_not_specialize one a
    single key. Each launch still computes its own chunk."""
    x = torch.zeros(8 * BLOCK)
    with recorded_launches() as launches:
        _split(kernel, x, limit, as_constexpr=kernel is _offset_constexpr)
    assert torch.equal(x, torch.ones_like(x))
    assert len(launches) == 8 // limit
    fn = kernel.fn  # type: ignore[attr-defined]
    specs = distinct(launches)[f"{fn.__module__}.{fn.__qualname__}"]
    assert len(specs) == max(1, len(next(iter(keys.values()), [])))
    assert differing(specs) == keys


SPECS = st.lists(st.dictionaries(st.sampled_from("abcd"), st.sampled_from(["i32:", "i32:D", "=1", "?"]),
                                 max_size=4).map(lambda d: tuple(d.items())), min_size=1, max_size=5)


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(SPECS)
def test_differing_names_each_parameter_whose_key_part_differs_and_no_other(specs: list) -> None:
    """Over drawn keys, parameters present in some keys only included: a parameter is reported exactly
    when two keys disagree on it (a value against another or against its absence), with each key's value
    in order ("?" where absent), the parameters in the order they first appear."""
    keys = [dict(s) for s in specs]
    got = differing(specs)
    seen = list(dict.fromkeys(name for key in keys for name in key))
    assert list(got) == [name for name in seen if name in got]
    for name in seen:
        values = [key.get(name) for key in keys]
        assert (name in got) == (len(set(values)) > 1), (name, values)
        if name in got:
            assert got[name] == ["?" if v is None else v for v in values]


def test_nothing_is_recorded_outside_the_block() -> None:
    x = torch.zeros(2 * BLOCK)
    with recorded_launches() as launches:
        _split(_offset_runtime, x, 1)
    _split(_offset_runtime, x, 1)
    assert len(launches) == 2 and torch.equal(x, torch.full_like(x, 2.0))


def _toy_ops(kernel: object, as_constexpr: bool) -> Ops:
    """A subject whose forward and backward each add one to the first ``8 * BLOCK`` elements of v in
    launches of one program (its launch limit lowered to one program a launch)."""
    def forward(k: torch.Tensor, v: torch.Tensor, *rest: object) -> tuple[torch.Tensor, ...]:
        _split(kernel, v.reshape(-1)[:8 * BLOCK], 1, as_constexpr)
        return v, v

    def backward(k: torch.Tensor, v: torch.Tensor, *rest: object) -> tuple[torch.Tensor | None, ...]:
        forward(k, v)
        return k, v, None, None

    return Ops(forward, backward, torch.device("cpu"))


CASE = Case(T=64, HV=2, K=16, V=16, BT=16)  # v: 64 x 2 x 16 elements, 8 * BLOCK of them touched


def test_the_property_fails_a_subject_that_recompiles_per_launch_chunk() -> None:
    with pytest.raises(PropertyFailure, match=r"_offset_constexpr compiles 8 times .* in 8 launches.*OFFSET"):
        check_compiles(CASE, _toy_ops(_offset_constexpr, True))
    with pytest.raises(PropertyFailure, match=r"_offset_specialized compiles 3 times"):
        check_compiles(CASE, _toy_ops(_offset_specialized, False))


def test_the_property_passes_runtime_offsets_and_counts_launches() -> None:
    metrics = check_compiles(CASE, _toy_ops(_offset_runtime, False))
    assert metrics["fwd._offset_runtime"] == {"launches": 8, "compiles": 1}


def test_the_property_needs_a_split_launch() -> None:
    with pytest.raises(PropertyFailure, match="needs a case whose launches split"):
        check_compiles(CASE.replace(backend="cpu"))


@pytest.mark.parametrize("knobs", [{"mode": "grid", "max_blocks": 1}, {"mode": "persistent", "max_tasks": 1}])
def test_wy_ascend_compiles_each_kernel_once_in_every_split(knobs: dict[str, object]) -> None:
    """This project's launch offsets and counts are do_not_specialize arguments (kernels.RUNTIME_ARGS):
    a grid split into a launch per (chunk, head) task, or a core grid of one task a launch, keeps one key."""
    metrics = check_compiles(CASE.replace(T=40, use_g=True, backend="cpu", knobs=knobs))
    assert metrics["fwd.wy_fwd_kernel"] == {"launches": 6, "compiles": 1}
    assert metrics["bwd.wy_bwd_kernel"] == {"launches": 6, "compiles": 1}


def test_a_launch_that_bypasses_tritons_run_is_keyed_from_its_arguments() -> None:
    """cuda's compiled launches after a call's first skip JITFunction.run (ops.py): record_launch keys them
    from the kernel and its arguments as run would (an autotuner's or heuristics' jit function inside)."""
    x = torch.zeros(4 * BLOCK)
    with recorded_launches() as launches:
        record_launch(_offset_constexpr, {"x": x, "OFFSET": 3, "BLOCK": BLOCK})
        _offset_constexpr[(1,)](x, OFFSET=3, BLOCK=BLOCK)
    assert len(launches) == 2 and launches[0] == launches[1]
    assert dict(launches[0].specialization)["OFFSET"] == "=3"


def _wrapped(kernel: object, kinds: list[str]) -> object:
    """``kernel`` inside Triton's launch wrappers, innermost first: a heuristics (triton.heuristics) or an
    autotuner (the real class; its constructor needs an active driver, which the interpreter lacks: given
    the ``fn`` and ``arg_names`` it sets)."""
    for kind in kinds:
        if kind == "heuristics":
            kernel = triton.heuristics({})(kernel)
        else:
            tuner = Autotuner.__new__(Autotuner)
            tuner.fn, tuner.arg_names = kernel, kernel.arg_names  # type: ignore[attr-defined]
            kernel = tuner
    return kernel


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(kinds=st.lists(st.sampled_from(["heuristics", "autotuner"]), max_size=4), offset=st.integers(0, 7))
def test_record_launch_keys_a_wrapped_kernel_as_the_jit_function_inside(kinds: list[str], offset: int) -> None:
    """ops.py hands record_launch what kernel_for returns, on cuda an autotuner or heuristics around the
    jit function: over drawn stacks of wrappers it unwraps each (``.fn``) and records the same launch as
    the bare jit function's (a loop that never unwraps spins: an alarm ends it)."""
    def spun(signum: int, frame: object) -> None:
        raise TimeoutError(f"record_launch did not reach the jit function inside {kinds}")

    x = torch.zeros(BLOCK)
    previous = signal.signal(signal.SIGALRM, spun)
    signal.alarm(2)
    try:
        with recorded_launches() as launches:
            record_launch(_wrapped(_offset_constexpr, kinds), {"x": x, "OFFSET": offset, "BLOCK": BLOCK})
            record_launch(_offset_constexpr, {"x": x, "OFFSET": offset, "BLOCK": BLOCK})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert len(launches) == 2 and launches[0] == launches[1]
    assert launches[0].kernel.endswith("._offset_constexpr")


def test_a_launch_is_keyed_from_upstream_triton_s_per_device_binder(monkeypatch) -> None:
    """Triton 3.3 on (the cuda backend's upstream Triton 3.6) keeps a binder per device in
    ``device_caches`` that returns one (type, specialization) pair per parameter: keyed by parameter
    as triton-ascend 3.2's binder is (an H200 nightly failed every compiles case on ``jit.binder``,
    which 3.6 does not have). The pairs are the ones 3.6's binder returned for this signature."""
    import types

    from triton.runtime import driver

    from wy_ascend.testing import compiles

    def binder(*args, **kwargs):
        n = args[2]
        return None, [("*fp32", "D"), ("i32", None), ("i32", "D" if n % 16 == 0 else ""), ("constexpr", 16)], \
            {"num_warps": 4}

    params = [types.SimpleNamespace(name=n) for n in ("x", "T", "n", "BT")]
    jit = types.SimpleNamespace(device_caches={0: ({}, {}, None, None, binder)}, params=params,
                                fn=types.SimpleNamespace(__name__="k"))
    monkeypatch.setattr(driver, "_active", types.SimpleNamespace(get_current_device=lambda: 0), raising=False)
    monkeypatch.setattr(type(driver), "active", property(lambda self: self._active), raising=False)
    key32, options = compiles._named_key(jit, (None, 17, 32), {})
    key33, _ = compiles._named_key(jit, (None, 18, 33), {})
    assert key32 == (("x", "*fp32:D"), ("T", "i32"), ("n", "i32:D"), ("BT", "=16")) and options == "num_warps=4"
    assert compiles.differing([key32, key33]) == {"n": ["i32:D", "i32:"]}


def _stand_in_device(mp: pytest.MonkeyPatch) -> None:
    """Triton's driver answering device 0 as current (as test_a_launch_is_keyed_from_upstream_triton_s_per_device_binder)."""
    import types

    from triton.runtime import driver

    mp.setattr(driver, "_active", types.SimpleNamespace(get_current_device=lambda: 0), raising=False)
    mp.setattr(type(driver), "active", property(lambda self: self._active), raising=False)


PARAM = st.builds(lambda c, d: (c, d), st.booleans(), st.booleans())  # (is_constexpr, do_not_specialize)


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(flags=st.lists(PARAM, min_size=1, max_size=5), extra=st.integers(-2, 2), which=st.sampled_from(["sig", "const"]),
       device=st.booleans())
def test_a_binder_key_of_another_layout_is_refused_naming_the_triton_it_follows(
        flags: list[tuple[bool, bool]], extra: int, which: str, device: bool) -> None:
    """_named_key over drawn signatures (constexpr and unspecialized parameters) with the binder's answer
    ``extra`` parts off: a per-device binder (triton 3.3 on) or a 3.2 binder whose parts do not match the
    parameters is a RuntimeError naming the kernel and the Triton layout followed; a matching one is keyed
    with a part per parameter."""
    import types

    from wy_ascend.testing import compiles

    params = [types.SimpleNamespace(name=f"p{i}", is_constexpr=c, do_not_specialize=d) for i, (c, d) in enumerate(flags)]
    runtime = [p for p in params if not p.is_constexpr]
    specialized = [p for p in runtime if not p.do_not_specialize]
    constexprs = [p for p in params if p.is_constexpr]
    fn = types.SimpleNamespace(__name__="kern")
    if device:
        pairs = [("constexpr", 1) if p.is_constexpr else ("i32", None) for p in params]
        pairs = pairs + [("i32", None)] * extra if extra > 0 else pairs[:max(0, len(params) + extra)]
        jit = types.SimpleNamespace(device_caches={0: (lambda *a, **k: (None, pairs, {}),)}, params=params, fn=fn)
        follows, wrong, names = "triton 3.6's create_function_from_signature", extra != 0, params
    else:
        sig = ["i32"] * max(0, len(runtime) + len(specialized) + (extra if which == "sig" else 0))
        const = [1] * max(0, len(constexprs) + (extra if which == "const" else 0))
        jit = types.SimpleNamespace(binder=lambda *a, **k: (None, sig, const, None, {}), params=params, fn=fn)
        follows = "triton 3.2's JITFunction.create_binder"
        wrong = (len(sig), len(const)) != (len(runtime) + len(specialized), len(constexprs))
        names = runtime + constexprs
    with pytest.MonkeyPatch.context() as mp:
        _stand_in_device(mp)
        if wrong:
            with pytest.raises(RuntimeError, match=f"binder of kern returned a key of an unknown layout; "
                                                   f"this module follows {follows}"):
                compiles._named_key(jit, (), {})
        else:
            key, _ = compiles._named_key(jit, (), {})
            assert [name for name, _ in key] == [p.name for p in names]


def test_without_an_npu_or_cuda_triton_backend_the_interpreter_cannot_be_keyed(monkeypatch) -> None:
    """_interpreter_backend where no installed Triton backend supports an Ascend or a CUDA target (stand-in:
    none installed) is a RuntimeError naming both targets."""
    import triton.backends

    from wy_ascend.testing import compiles

    monkeypatch.setattr(triton.backends, "backends", {})
    with pytest.raises(RuntimeError, match=r"no installed Triton backend supports \['npu', 'cuda'\]"):
        compiles._interpreter_backend.__wrapped__()


def test_a_launch_of_a_kernel_that_is_not_module_level_cannot_be_keyed() -> None:
    """_interpreted: a GridExecutor whose function is no module-level @triton.jit function (here a nested
    function, a module-level function that is no kernel, and a function named as a module-level kernel that is
    not that kernel's rewritten function) is a RuntimeError naming it."""
    import types

    from wy_ascend.testing import compiles

    def nested(x: object) -> None:
        return None

    def impostor(x: object) -> None:
        return None

    impostor.__name__ = _offset_specialized.__name__  # found at module level: a kernel, but not this one
    for fn in (nested, _stand_in_device, impostor):
        with pytest.raises(RuntimeError, match=f"cannot key the launch of {fn.__name__}: it is not a module-level"):
            compiles._interpreted(types.SimpleNamespace(fn=fn))


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(recording=st.booleans(), binder=st.sampled_from([None, "made"]), args=st.lists(st.integers(), max_size=3))
def test_a_compiled_launch_is_recorded_with_a_binder_made_first_where_triton_makes_it_late(
        recording: bool, binder: str | None, args: list[int]) -> None:
    """The wrapper _install puts on JITFunction.run (a compiled backend's launches; a stand-in run and kernel):
    inside a recorded_launches block it makes a missing binder first (triton 3.2 makes it at the first run) from
    the current target's backend, records the launch's arguments, then runs it; outside one it only runs it."""
    import types

    import triton.compiler
    from triton.runtime import interpreter, jit

    from wy_ascend.testing import compiles

    events: list[tuple] = []

    def run(self: object, *a: object, grid: object, warmup: object, **kw: object) -> str:
        events.append(("run", a, grid, warmup, kw))
        return "ran"

    kernel = types.SimpleNamespace(binder=binder, create_binder=lambda backend: events.append(("binder", backend)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(interpreter.GridExecutor, "__call__", interpreter.GridExecutor.__call__)
        mp.setattr(jit.JITFunction, "run", run)
        compiles._install.__wrapped__()
        _stand_in_device(mp)
        mp.setattr(type(triton.runtime.driver), "active",
                   property(lambda self: types.SimpleNamespace(get_current_target=lambda: "target")), raising=False)
        mp.setattr(triton.compiler, "make_backend", lambda target: f"backend of {target}")
        mp.setattr(compiles, "_record", lambda j, a, kw: events.append(("record", j, a, kw)))
        mp.setattr(compiles, "_RECORDS", [[]] if recording else [])
        assert jit.JITFunction.run(kernel, *args, grid=(1,), warmup=False, BLOCK=16) == "ran"
    made = [("binder", "backend of target")] if recording and binder is None else []
    recorded = [("record", kernel, tuple(args), {"BLOCK": 16})] if recording else []
    assert events == [*made, *recorded, ("run", tuple(args), (1,), False, {"BLOCK": 16})]
