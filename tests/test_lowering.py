"""The Ascend lowering gate (wy_ascend.lowering): its enumeration covers every constexpr value
the npu backend can launch, real specializations lower, and compiler errors and crashes are
reported with the specialization instead of crashing the gate."""

from __future__ import annotations

import io
import stat
import textwrap
import time
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("triton.backends.ascend", reason="the lowering gate needs triton-ascend")

from triton.runtime.jit import JITFunction  # noqa: E402

from wy_ascend import lowering  # noqa: E402
from wy_ascend.backends import BACKENDS  # noqa: E402
from wy_ascend.planning import UB_SAFETY_MARGIN, ub_tile  # noqa: E402

UB = BACKENDS["npu"].ub_bytes
STRUCTURAL = ("kernel", "BT", "USE_G", "IS_VARLEN", "GATE_HEAD_MAJOR", "PERSISTENT", "dtype")


@pytest.fixture(scope="module")
def specs() -> list[lowering.Spec]:
    return lowering.enumerate_specs()[0]


def spec_where(specs: list[lowering.Spec], **fields: object) -> lowering.Spec:
    return next(s for s in specs if all(getattr(s, k) == v for k, v in fields.items()))


def values(specs: list[lowering.Spec], field: str) -> set[object]:
    return {getattr(s, field) for s in specs}


# ----------------------------------------------------------------------------- enumeration


def test_enumeration_covers_every_constexpr_value(specs) -> None:
    dims = set(lowering.representative_dims(UB))
    assert set(lowering.ODD_DIMS) <= dims
    for kernel in ("fwd", "bwd"):
        ks = [s for s in specs if s.kernel == kernel]
        assert values(ks, "BT") == {bt for bt in lowering.BTS if ub_tile(bt, 16, kernel, UB, 128) is not None}
        for flag in ("USE_G", "IS_VARLEN", "GATE_HEAD_MAJOR", "PERSISTENT"):
            assert values(ks, flag) == {False, True}, flag
        assert values(ks, "LOWP_DOT") == {False}
        assert values(ks, "DOT_GUARD") == {True}
        assert values(ks, "dtype") == values(ks, "gate_dtype") == set(lowering.FLOAT_DTYPES)
        assert values(ks, "index_dtype") == {None, *lowering.INDEX_DTYPES}
        assert {(s.H, s.HV) for s in ks} == set(lowering.HEADS)
        assert values(ks, "K") == values(ks, "V") == dims
        # every tile width the UB model yields for these dims and BTs is lowered
        tiles = {ub_tile(s.BT, d, kernel, UB, 128) for s in ks for d in dims}
        assert values(ks, "BK") | values(ks, "BV") == tiles
    assert all(s.footprint <= UB * UB_SAFETY_MARGIN for s in specs)


def test_bwd_bt128_is_skipped_by_the_ub_model() -> None:
    _, skips = lowering.enumerate_specs()
    assert [(s.kernel, s.BT) for s in skips] == [("bwd", 128)]
    assert "does not fit the bwd kernel in the unified buffer" in skips[0].reason


def test_paired_axes_appear_with_every_structural_combination(specs) -> None:
    """The module doc's covering argument: K and V values with every structural combination;
    head ratios, gate and index dtypes with every combination of the other structural axes."""
    dims = set(lowering.representative_dims(UB))
    by_combo: dict[tuple, list[lowering.Spec]] = defaultdict(list)
    by_combo_but_heads: dict[tuple, list[lowering.Spec]] = defaultdict(list)
    for s in specs:
        by_combo[tuple(getattr(s, f) for f in STRUCTURAL)].append(s)
        by_combo_but_heads[tuple(getattr(s, f) for f in STRUCTURAL if f != "GATE_HEAD_MAJOR")].append(s)
    assert len(by_combo) == 2 * 2 * 2 * 3 * 2 * (4 + 3)  # flags x dtypes x persistent x (fwd + bwd BTs)
    for group in by_combo.values():
        assert values(group, "K") == values(group, "V") == dims
        assert values(group, "gate_dtype") == set(lowering.FLOAT_DTYPES)
        if group[0].IS_VARLEN:
            assert values(group, "index_dtype") == set(lowering.INDEX_DTYPES)
    for group in by_combo_but_heads.values():
        assert {(s.H, s.HV) for s in group} == set(lowering.HEADS)


def test_ub_bytes_option_changes_tiles_and_skips() -> None:
    small = 64 * 1024
    specs, skips = lowering.enumerate_specs(small)
    assert {(s.kernel, s.BT) for s in skips} == {("fwd", 128), ("bwd", 64), ("bwd", 128)}
    assert max(s.footprint for s in specs) <= small * UB_SAFETY_MARGIN
    assert all(s.BK == ub_tile(s.BT, s.K, s.kernel, small, 128) for s in specs)


def test_signature_follows_the_ops_dtype_contract(specs) -> None:
    s = spec_where(specs, kernel="bwd", H=2, HV=6, USE_G=False, IS_VARLEN=True, dtype="bfloat16")
    # JITFunction of the raw function: conftest.py may have made the kernels interpreter functions
    fn = JITFunction(lowering.kernels_module.KERNELS["bwd"].fn)
    signature, constants = s.signature(fn)
    assert signature["k"] == signature["dv"] == "*bf16"
    assert signature["dk"] == "*fp32"  # grouped heads accumulate dk in fp32
    assert signature["beta"] == signature["dbeta"] == "*" + lowering.TRITON_TYPES[s.gate_dtype]
    assert signature["g"] == signature["dg"] == "*i8" and constants["g"] is constants["dg"] is None
    assert signature["cu_seqlens"] == "*" + lowering.TRITON_TYPES[s.index_dtype]
    assert signature["chunk_indices"] == "*i64"
    assert all(signature[a] == "i32" for a in lowering.kernels_module.RUNTIME_ARGS)
    assert constants["BK"] == s.BK and constants["GATE_HEAD_MAJOR"] is True


def test_list_option(capsys) -> None:
    assert lowering.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].endswith("skipped by the UB model")
    n = int(lines[-1].split()[0])
    assert n == len(lowering.enumerate_specs()[0]) == sum(1 for line in lines if line.startswith(("fwd ", "bwd ")))


# ----------------------------------------------------------------------------- lowering


REAL = [
    dict(kernel="fwd", BT=64, H=2, HV=6, USE_G=True, IS_VARLEN=True, PERSISTENT=True, dtype="bfloat16"),
    dict(kernel="bwd", BT=32, H=4, HV=4, USE_G=True, IS_VARLEN=False, PERSISTENT=False, dtype="float16"),
]


def first_spec(specs: list[lowering.Spec], kernel: str = "fwd") -> lowering.Spec:
    return spec_where(specs, kernel=kernel, BT=16)


def test_specializations_lower_in_workers_and_cache(specs, tmp_path) -> None:
    """Real specializations lower in two worker processes; a second run is all cache hits."""
    chosen = [spec_where(specs, **f) for f in REAL]
    chosen += [s for s in specs if s.kernel == "fwd" and s.BT == 16][: lowering.CHUNK]
    salt = lowering.cache_salt()
    assert salt == lowering.cache_salt()
    out = io.StringIO()
    first = lowering.run(chosen, jobs=2, cache=lowering.ResultCache(tmp_path, salt), out=out)
    assert sorted(r.spec.label for r in first) == sorted(s.label for s in chosen)
    assert all(r.status in ("PASS", "FLAKY") for r in first), [r.message for r in first if r.status == "FAIL"]
    assert len(out.getvalue().splitlines()) >= len(chosen)
    again = lowering.run(chosen, cache=lowering.ResultCache(tmp_path, salt), out=io.StringIO())
    assert {r.status for r in again} == {"CACHED"}
    assert lowering.ResultCache(tmp_path, "another-kernels-source").get(chosen[0]) is None


def kernel_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> str:
    """Write an importable module (workers import kernels by reference) and return its reference."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers inherit sys.path
    return f"{name}:KERNELS"


BROKEN = """
    import triton
    import triton.language as tl


    @triton.jit
    def broken(k, w, T, BT: tl.constexpr, K: tl.constexpr):
        o = tl.arange(0, BT)
        tl.store(w + o, tl.load(k + o) + "not a tensor")  # type error: caught by the frontend


    @triton.jit
    def odd(k, scratch, BT: tl.constexpr):
        tl.store(scratch + tl.arange(0, BT), tl.load(k + tl.arange(0, BT)))


    KERNELS = {"fwd": broken, "bwd": odd}
"""


def test_broken_kernel_is_reported_not_raised(specs, tmp_path, monkeypatch) -> None:
    ref = kernel_module(tmp_path, monkeypatch, "broken_kernels", BROKEN)
    chosen = [first_spec(specs), first_spec(specs, "bwd")]
    out = io.StringIO()
    fwd, bwd = sorted(lowering.run(chosen, kernels=ref, out=out), key=lambda r: r.spec.kernel, reverse=True)
    assert (fwd.status, fwd.stage) == ("FAIL", "frontend")
    assert "not a tensor" in fwd.message and "AttributeError" in fwd.message
    # an argument the gate has no dtype rule for is a reported failure too
    assert (bwd.status, bwd.stage) == ("FAIL", "signature") and "'scratch'" in bwd.message
    assert lowering.summarize([fwd, bwd], [], UB, 0.0, 1, out) == 1
    text = out.getvalue()
    assert f"FAILED [frontend] {chosen[0].label}" in text and "lowering gate: FAILED" in text


def fake_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, setup: str = "") -> str:
    """A kernels module that, once imported by a worker, points triton-ascend at a fake
    triton-adapter-opt script (the real kernels through a misbehaving adapter) and runs ``setup``."""
    script = tmp_path / "triton-adapter-opt"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return kernel_module(tmp_path, monkeypatch, "fake_adapter_kernels", f"""
        from triton.backends import backends
        from wy_ascend import lowering
        from wy_ascend.kernels import KERNELS

        # the globals of the compiler module make_backend uses (loaded apart from triton.backends.ascend)
        backends["ascend"].compiler.add_stages.__globals__["_get_triton_adapter_opt_path"] = lambda: {str(script)!r}
        {setup}
    """)


def test_adapter_error_is_reported_with_its_message(specs, tmp_path, monkeypatch) -> None:
    ref = fake_adapter(tmp_path, monkeypatch, "echo \"error: 'tt.dot' op not supported on this target\" >&2; exit 1")
    (result,) = lowering.run([first_spec(specs)], kernels=ref, out=io.StringIO())
    assert (result.status, result.stage) == ("FAIL", "ttadapter")
    assert "exited with status 1" in result.message and "'tt.dot' op not supported" in result.message


def test_adapter_crash_is_retried_then_flaky(specs, tmp_path, monkeypatch) -> None:
    """triton-adapter-opt 3.2.0 segfaults now and then; a crash that passes on retry is FLAKY."""
    from triton.backends.ascend.utils import _get_triton_adapter_opt_path

    marker = tmp_path / "crashed-once"
    body = f'[ -e {marker} ] || {{ touch {marker}; kill -SEGV $$; }}\nexec {_get_triton_adapter_opt_path()} "$@"'
    (result,) = lowering.run([first_spec(specs)], kernels=fake_adapter(tmp_path, monkeypatch, body), out=io.StringIO())
    assert (result.status, result.stage) == ("FLAKY", "ttadapter"), result.message
    assert "status -11" in result.message


def test_a_hung_adapter_is_killed_and_reported(specs, tmp_path, monkeypatch) -> None:
    setup = "lowering.LOWER_TIMEOUT_S, lowering.CRASH_RETRIES = 1, 0"
    ref = fake_adapter(tmp_path, monkeypatch, "exec sleep 600", setup=setup)
    start = time.monotonic()
    (result,) = lowering.run([first_spec(specs)], kernels=ref, out=io.StringIO())
    assert (result.status, result.stage) == ("FAIL", "ttadapter") and "TimeoutError" in result.message
    assert time.monotonic() - start < 60  # one 1 s attempt, not 600 s


def test_a_dying_worker_is_reported_not_raised(specs, tmp_path, monkeypatch) -> None:
    """A compiler crash inside a worker (here: the kernels module kills its process) breaks the
    pool; the spec is retried alone and reported as a crash, and the gate goes on."""
    ref = kernel_module(tmp_path, monkeypatch, "dying_kernels", """
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    """)
    (result,) = lowering.run([first_spec(specs)], kernels=ref, out=io.StringIO())
    assert (result.status, result.stage) == ("FAIL", "crash")
