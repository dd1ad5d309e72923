"""The lowering gate (wy_ascend.lowering): its enumeration covers every constexpr value the npu
and cuda backends can launch, real specializations lower (cuda ones without the Ascend-only
stage), and compiler errors and crashes are reported with the specialization instead of
crashing the gate."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import os
import signal
import stat
import sys
import tempfile
import textwrap
import threading
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("triton.backends.ascend", reason="the lowering gate needs triton-ascend")

from triton.runtime.jit import JITFunction  # noqa: E402

from wy_ascend import lowering  # noqa: E402
from wy_ascend.backends import BACKENDS, LaunchConfig, device_spec  # noqa: E402
from wy_ascend.planning import (  # noqa: E402
    MIN_TILE,
    UB_SAFETY_MARGIN,
    DeviceSpec,
    UnsupportedProblemError,
    next_power_of_2,
    plan,
    shared_narrow_dim,
    ub_tile,
)

UB = BACKENDS["npu"].ub_bytes
STRUCTURAL = ("kernel", "BT", "USE_G", "IS_VARLEN", "GATE_HEAD_MAJOR", "PERSISTENT", "dtype")


@pytest.fixture(scope="module")
def all_specs() -> list[lowering.Spec]:
    return lowering.enumerate_specs()[0]


@pytest.fixture(scope="module")
def specs(all_specs) -> list[lowering.Spec]:
    """The npu specializations."""
    return [s for s in all_specs if s.backend == "npu"]


@pytest.fixture(scope="module")
def cuda_specs(all_specs) -> list[lowering.Spec]:
    return [s for s in all_specs if s.backend == "cuda"]


def spec_where(specs: list[lowering.Spec], **fields: object) -> lowering.Spec:
    return next(s for s in specs if all(getattr(s, k) == v for k, v in fields.items()))


def values(specs: list[lowering.Spec], field: str) -> set[object]:
    return {getattr(s, field) for s in specs}


# ----------------------------------------------------------------------------- enumeration


def test_enumeration_covers_every_constexpr_value(all_specs, specs) -> None:
    assert values(all_specs, "backend") == {"npu", "cuda"}
    assert all_specs[: len(specs)] == specs  # npu first
    dims = set(lowering.representative_dims(128))
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
        assert all(s.K_CONST == s.K and s.V_CONST == s.V for s in ks)  # npu: dims compile-time (runtime_dims)
        # every tile width the UB model yields for these dims and BTs is lowered
        tiles = {ub_tile(s.BT, d, kernel, UB, 128) for s in ks for d in dims}
        assert values(ks, "BK") | values(ks, "BV") == tiles
    assert all(s.footprint <= UB * UB_SAFETY_MARGIN for s in specs)


def test_head_ratios_cover_each_class_of_key_head_lookup() -> None:
    """HEADS, the (H, HV) the enumeration lowers: one head, several heads ungrouped, and grouped heads both where the
    group size G = HV // H is a power of two (the compiled key-head index i_h // G a shift) and where it is not (a
    division), over a single key head and over several (a key head past the first); each HV a multiple of H."""
    assert all(hv % h == 0 for h, hv in lowering.HEADS)
    grouped = [(h, hv // h) for h, hv in lowering.HEADS if hv > h]
    assert (1, 1) in lowering.HEADS and any(h == hv > 1 for h, hv in lowering.HEADS)
    assert {g & (g - 1) == 0 for _, g in grouped} == {True, False}  # a shift and a division
    assert {h == 1 for h, _ in grouped} == {True, False}  # one key head and several


def _planned_tiles(spec: DeviceSpec, kernel: str, BT: int, dims: list[int]) -> set[int]:
    """The tiles BK and BV the planner picks on ``spec`` for K = V = each of ``dims`` and for each
    neighbouring (K, V) pair of them (none where it refuses BT)."""
    tiles: set[int] = set()
    for K, V in [(d, d) for d in dims] + list(zip(dims, dims[1:])):
        try:
            p = plan(kernel, NT=1, BH=1, BT=BT, K=K, V=V, spec=spec)
        except UnsupportedProblemError:
            continue
        tiles |= {p.BK, p.BV}
    return tiles


@st.composite
def _planner_specs(draw: st.DrawFn) -> DeviceSpec:
    """Device specs the planner may tile for: a power-of-two cap, a narrower min_tile and backward cap,
    any unified buffer or none, shared narrow tiles or not."""
    cap = 1 << draw(st.integers(MIN_TILE.bit_length() - 1, 10))
    below = st.integers(MIN_TILE.bit_length() - 1, cap.bit_length() - 1).map(lambda n: 1 << n)
    return DeviceSpec("drawn", "grid", (1, 1), None, 1, draw(st.none() | st.integers(8 * 1024, 512 * 1024)),
                      tile_cap=cap, min_tile=draw(below), bwd_tile_cap=draw(st.none() | below),
                      narrow_tiles=draw(st.booleans()))


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(spec=_planner_specs(), kernel=st.sampled_from(["fwd", "bwd"]), BT=st.sampled_from(lowering.BTS),
       dims=st.lists(st.integers(1, 2048), min_size=1, max_size=6))
def test_representative_dims_are_the_tiles_the_planner_can_pick(spec, kernel, BT, dims) -> None:
    """The gate lowers the tiles the planner can pick under a tile cap, and no wider: over drawn specs,
    representative_dims(cap) is ODD_DIMS plus every tile the planner picks for some dim under that cap
    (K = V = each dim up to twice the cap, no UB), and holds every tile of a drawn spec with that cap
    (a narrower min_tile or backward cap, a UB, shared narrow tiles) for drawn dims."""
    cap = spec.tile_cap
    dims_of_gate = set(lowering.representative_dims(cap))
    every = _planned_tiles(DeviceSpec("widest", "grid", (1, 1), None, 1, None, tile_cap=cap), "fwd", 16,
                           list(range(1, 2 * cap + 1)))
    assert dims_of_gate == set(lowering.ODD_DIMS) | every
    assert _planned_tiles(spec, kernel, BT, sorted(dims)) <= dims_of_gate


def test_cuda_enumeration_covers_the_cuda_flags(cuda_specs) -> None:
    """cuda: its own LOWP_DOT (bf16 I/O; tiles >= LOWP_MIN_TILE, a narrower dim padded to them, or one
    shared narrow tile where K and V are both narrower) and DOT_GUARD off, time-major beta/g, both launch
    shapes, every BT (no UB: nothing skipped) and every tile up to each op's cap (the backward's is
    narrower), those below min_tile shared by K and V."""
    cuda = BACKENDS["cuda"]
    spec = device_spec("cuda-H200", LaunchConfig())
    assert spec.narrow_tiles  # the default (tests/test_narrow_tiles.py)
    tiles = {op: {t for t in (16, 32, 64, 128, 256) if t <= spec.cap(op)} for op in ("fwd", "bwd")}
    assert tiles == {"fwd": {16, 32, 64, 128}, "bwd": {16, 32, 64}}
    assert all(s.BK == s.BV for s in cuda_specs if min(s.BK, s.BV) < cuda.min_tile)
    dims = set(lowering.representative_dims(cuda.tile_cap))
    assert dims == set(lowering.ODD_DIMS) | {16, 32, 64, 128}
    for kernel in ("fwd", "bwd"):
        ks = [s for s in cuda_specs if s.kernel == kernel]
        assert values(ks, "BT") == set(lowering.BTS)
        for flag in ("USE_G", "IS_VARLEN"):
            assert values(ks, flag) == {False, True}, flag
        assert values(ks, "GATE_HEAD_MAJOR") == values(ks, "DOT_GUARD") == {False}
        assert values(ks, "PERSISTENT") == {False, True}
        assert values(ks, "LOWP_DOT") == {False, True}
        assert values(ks, "dtype") == values(ks, "gate_dtype") == set(lowering.FLOAT_DTYPES)
        assert values(ks, "index_dtype") == {None, *lowering.INDEX_DTYPES}
        assert {(s.H, s.HV) for s in ks} == set(lowering.HEADS)
        assert values(ks, "K") == values(ks, "V") == dims
        assert values(ks, "BK") | values(ks, "BV") == tiles[kernel]
    # every bf16 specialization takes bf16 dot operands, in one tile loop or several; no other dtype does
    assert all(s.LOWP_DOT == (s.dtype == "bfloat16") for s in cuda_specs)
    assert {(s.K > s.BK or s.V > s.BV) for s in cuda_specs if s.LOWP_DOT} == {False, True}
    by_combo: dict[tuple, set[bool]] = defaultdict(set)
    for s in cuda_specs:
        by_combo[tuple(getattr(s, f) for f in STRUCTURAL)].add(s.LOWP_DOT)
    assert len(by_combo) == 2 * 2 * 3 * 2 * (4 + 4)  # flags x dtypes x persistent x (fwd + bwd BTs)
    assert all(lowp == {combo[-1] == "bfloat16"} for combo, lowp in by_combo.items())
    assert {s.footprint for s in cuda_specs} == {0} and not any(s.has_ub for s in cuda_specs)
    assert all(s.stages == ("ttir",) and s.label.startswith("cuda ") for s in cuda_specs)
    # the grouped backward both ways (Backend.groups_dk picks by the grid's size); never without groups
    assert {s.GROUP_DK for s in cuda_specs if s.kernel == "bwd" and s.HV > s.H} == {False, True}
    assert not any(s.GROUP_DK for s in cuda_specs if s.kernel == "fwd" or s.HV == s.H)
    # the forward's halved tiles (Backend.halve_padded: K or V = 192 in three 64-wide tiles) are lowered too
    assert any(s.kernel == "fwd" and (s.BK == 64 < s.K or s.BV == 64 < s.V) for s in cuda_specs)
    # a frontend + ttir lowering each (0.1-0.5 s): minutes at most; 192 of them are K = V = 16's shared tile
    assert len(cuda_specs) <= 2400
    assert all(s.K_CONST == s.K and s.V_CONST == s.V for s in cuda_specs)  # dims compile-time (runtime_dims)


@pytest.mark.parametrize("backend", ["npu", "cuda"])
def test_runtime_dims_specs_cover_full_aligned_and_unaligned_tiles(backend) -> None:
    """With runtime K and V, each dim is lowered full (a constant), aligned-partial and unaligned
    (Triton's int classes), the two dims' full and partial last tiles meet in all four ways, also
    with bf16 dots on cuda, and a sample of them lowers."""
    specs, _ = lowering.backend_specs(backend, LaunchConfig(num_cores=1, runtime_dims=True))
    for dim in ("K", "V"):
        states = {(getattr(s, f"{dim}_CONST") > 0, getattr(s.specialization, f"{dim}_class")) for s in specs}
        assert states == {(True, "D"), (False, "D"), (False, "N")}, dim
    for group in (specs, [s for s in specs if s.LOWP_DOT] or specs):
        assert {(s.K_CONST > 0, s.V_CONST > 0) for s in group} == {(a, b) for a in (False, True) for b in (False, True)}
    sample = {}
    for s in specs:
        sample.setdefault((s.kernel, s.K_CONST > 0, s.V_CONST > 0, s.LOWP_DOT, s.PERSISTENT), s)
    results = lowering.run(list(sample.values()), jobs=2, out=io.StringIO())
    assert [r.status for r in results] == ["PASS"] * len(sample), [r.message for r in results if r.status != "PASS"]


def test_bwd_bt128_is_skipped_by_the_ub_model() -> None:
    _, skips = lowering.enumerate_specs()
    assert [(s.kernel, s.BT) for s in skips] == [("bwd", 128)]
    assert "does not fit the bwd kernel in the unified buffer" in skips[0].reason


@pytest.mark.parametrize("backend", ["npu", "cuda"])
def test_paired_axes_appear_with_every_structural_combination(all_specs, backend) -> None:
    """The module doc's covering argument: K and V values with every structural combination;
    head ratios, gate and index dtypes with every combination of the other structural axes, and
    with it each index dtype with every head ratio and every beta dtype (axes cycled on one index
    must not tie one's value to another's)."""
    dims = set(lowering.representative_dims(128))
    by_combo: dict[tuple, list[lowering.Spec]] = defaultdict(list)
    by_combo_but_heads: dict[tuple, list[lowering.Spec]] = defaultdict(list)
    for s in all_specs:
        if s.backend == backend:
            by_combo[tuple(getattr(s, f) for f in STRUCTURAL)].append(s)
            by_combo_but_heads[tuple(getattr(s, f) for f in STRUCTURAL if f != "GATE_HEAD_MAJOR")].append(s)
    # flags x dtypes x persistent x (fwd + bwd BTs); cuda: one GATE_HEAD_MAJOR, bwd BT=128
    assert len(by_combo) == (2 * 2 * 2 * 3 * 2 * (4 + 3) if backend == "npu" else 2 * 2 * 3 * 2 * (4 + 4))
    for group in by_combo.values():
        assert values(group, "K") == values(group, "V") == dims
        assert values(group, "gate_dtype") == set(lowering.FLOAT_DTYPES)
        if group[0].IS_VARLEN:
            heads = {(s.H, s.HV) for s in group}
            assert {((s.H, s.HV), s.index_dtype) for s in group} == set(itertools.product(heads, lowering.INDEX_DTYPES))
            assert {(s.gate_dtype, s.index_dtype) for s in group} == set(
                itertools.product(lowering.FLOAT_DTYPES, lowering.INDEX_DTYPES))
    for group in by_combo_but_heads.values():
        assert {(s.H, s.HV) for s in group} == set(lowering.HEADS)


@settings(max_examples=25, derandomize=True, database=None, deadline=None)
@given(odd=st.sets(st.integers(1, 300), min_size=1, max_size=7), backend=st.sampled_from(["npu", "cuda"]),
       tile_cap=st.sampled_from([None, 32, 64, 256]), ub_bytes=st.sampled_from([None, 64 * 1024]))
def test_each_dim_is_lowered_as_k_beside_the_next_dim_as_v(odd, backend, tile_cap, ub_bytes) -> None:
    """The module doc's (K, V) pairing, over drawn ODD_DIMS, backends, tile caps and UBs (compile-time
    dims: no two pairs share a program): every structural combination lowers each representative dim
    d_i as K beside d_(i + 1) mod n as V (the neighbour whose tiles its own meet), and SQUARE; any
    further pair is a square (t, t) of a narrow tile K and V share (cuda's narrow_tiles)."""
    config = LaunchConfig(num_cores=1, tile_cap=tile_cap, ub_bytes=ub_bytes, runtime_dims=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lowering, "ODD_DIMS", tuple(sorted(odd)))
        specs, _ = lowering.backend_specs(backend, config)
        spec = BACKENDS[backend].spec(torch.device("cpu"), config)
        dims = lowering.representative_dims(spec.tile_cap)
    neighbours = {(d, dims[(i + 1) % len(dims)]) for i, d in enumerate(dims)} | {lowering.SQUARE}
    by_combo: dict[tuple, set[tuple[int, int]]] = defaultdict(set)
    for s in specs:
        by_combo[tuple(getattr(s, f) for f in STRUCTURAL)].add((s.K, s.V))
    assert by_combo
    for combo, pairs in by_combo.items():
        assert neighbours <= pairs, combo
        for K, V in pairs - neighbours:
            assert K == V and shared_narrow_dim(K, V, spec) == K == next_power_of_2(K), (combo, K)


def test_g_dtype_pairs_with_every_io_dtype_and_flas_triple(all_specs) -> None:
    """The module doc's g dtype promise, per backend and kernel with a gate: every (I/O dtype, g dtype)
    pair is lowered, and so is flash-linear-attention's call (bfloat16 k, v and beta with a float32 g),
    the configuration most callers run. A rotation that tied g's dtype to beta's (g's index i mod 3
    instead of i // 3) kept the nine pairs and every single dtype, but lowered fla's triple nowhere."""
    for backend in ("npu", "cuda"):
        for kernel in ("fwd", "bwd"):
            gated = [s for s in all_specs if s.backend == backend and s.kernel == kernel and s.USE_G]
            pairs = {(s.dtype, s.g_dtype) for s in gated}
            assert pairs == set(itertools.product(lowering.FLOAT_DTYPES, repeat=2)), (backend, kernel)
            assert ("bfloat16", "bfloat16", "float32") in {(s.dtype, s.gate_dtype, s.g_dtype) for s in gated}, (
                backend, kernel)


def test_ub_bytes_option_changes_tiles_and_skips() -> None:
    small = 64 * 1024
    specs, skips = lowering.enumerate_specs(small)
    npu = [s for s in specs if s.backend == "npu"]
    assert {(s.kernel, s.BT) for s in skips} == {("fwd", 128), ("bwd", 64), ("bwd", 128)}
    assert max(s.footprint for s in npu) <= small * UB_SAFETY_MARGIN
    assert all(s.BK == ub_tile(s.BT, s.K, s.kernel, small, 128) for s in npu)
    # cuda has no UB: its specializations do not depend on the npu's
    assert [s for s in specs if s.backend == "cuda"] == [s for s in lowering.enumerate_specs()[0] if s.backend == "cuda"]


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
    assert n == len(lowering.enumerate_specs()[0]) == sum(1 for line in lines if line.startswith(("npu ", "cuda ")))
    npu = sum(1 for line in lines if line.startswith("npu "))
    assert f"= npu {npu} (fwd " in lines[-1] and f" + cuda {n - npu} (fwd " in lines[-1]


# ----------------------------------------------------------------------------- lowering


REAL = [
    dict(kernel="fwd", BT=64, H=2, HV=6, USE_G=True, IS_VARLEN=True, PERSISTENT=True, dtype="bfloat16"),
    dict(kernel="bwd", BT=32, H=4, HV=4, USE_G=True, IS_VARLEN=False, PERSISTENT=False, dtype="float16"),
]


def first_spec(specs: list[lowering.Spec], kernel: str = "fwd") -> lowering.Spec:
    return spec_where(specs, kernel=kernel, BT=16)


def test_specializations_lower_in_workers_and_cache(specs, cuda_specs, tmp_path) -> None:
    """Real specializations of both backends lower in two worker processes; a second run is all
    cache hits, and an npu result is no cache hit for its cuda twin (different stages)."""
    chosen = [spec_where(specs, **f) for f in REAL]
    chosen += [spec_where(cuda_specs, kernel=kernel, LOWP_DOT=True, **f) for kernel in ("fwd", "bwd")
               for f in (dict(BT=64, USE_G=True, IS_VARLEN=True), dict(BT=128, USE_G=False, IS_VARLEN=False))]
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
    twin = dataclasses.replace(chosen[0], backend="cuda")
    assert twin.label != chosen[0].label and lowering.ResultCache(tmp_path, salt).get(twin) is None


def test_without_a_cache_directory_nothing_is_read_or_written(specs, tmp_path, monkeypatch) -> None:
    """--no-cache (directory None): a run's passes are kept in memory only; saving writes no file anywhere
    (and does not fail), and a later cache of the same salt knows none of them."""
    monkeypatch.chdir(tmp_path)
    cache = lowering.ResultCache(None, "salt")
    cache.put(lowering.Result(specs[0], "PASS", 1.0))
    assert cache.get(specs[0]) == 1.0
    cache.save()
    assert list(tmp_path.iterdir()) == [] and lowering.ResultCache(tmp_path, "salt").get(specs[0]) is None


def kernel_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> str:
    """Write an importable module (workers import kernels by reference) and return its reference."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers inherit sys.path
    return f"{name}:KERNELS"


BROKEN = """
    import triton
    import triton.language as tl


    @triton.jit
    def broken(k, w, T, K, BT: tl.constexpr):
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


# Broken only for the cuda flags, like the kernels.py that reached a GPU: a jit helper whose two
# returns differ in type once LOWP_DOT keeps the bf16 load (only reached without DOT_GUARD).
CUDA_ONLY_BROKEN = """
    import triton
    import triton.language as tl


    @triton.jit
    def _load_operand(ptr, LOWP_DOT: tl.constexpr):
        x = tl.load(ptr)
        if LOWP_DOT:
            return x
        return x.to(tl.float32)


    @triton.jit
    def _A_held(ptr, LOWP_DOT: tl.constexpr, DOT_GUARD: tl.constexpr):
        if DOT_GUARD:
            a = tl.load(ptr).to(tl.float32)
        else:
            a = _load_operand(ptr, LOWP_DOT)
        return a


    @triton.jit
    def fwd(k, w, BT: tl.constexpr, LOWP_DOT: tl.constexpr, DOT_GUARD: tl.constexpr):
        o = tl.arange(0, BT)
        tl.store(w + o, _A_held(k + o, LOWP_DOT, DOT_GUARD))


    KERNELS = {"fwd": fwd, "bwd": fwd}
"""


def test_a_kernel_broken_only_for_the_cuda_flags_fails_the_gate(specs, cuda_specs, tmp_path, monkeypatch) -> None:
    ref = kernel_module(tmp_path, monkeypatch, "cuda_only_broken_kernels", CUDA_ONLY_BROKEN)
    same = dict(kernel="fwd", BT=64, USE_G=False, IS_VARLEN=False, dtype="bfloat16")
    npu = spec_where(specs, GATE_HEAD_MAJOR=False, PERSISTENT=False, **same)
    lowp = spec_where(cuda_specs, LOWP_DOT=True, **same)
    exact = dataclasses.replace(lowp, LOWP_DOT=False)  # bf16 with exact dots: a tile_cap below 64 launches it
    out = io.StringIO()
    results = {r.spec: r for r in lowering.run([npu, lowp, exact], kernels=ref, out=out)}
    assert results[npu].status == results[exact].status == "PASS", [r.message for r in results.values()]
    failed = results[lowp]
    assert (failed.status, failed.stage) == ("FAIL", "frontend") and "Inconsistent return types" in failed.message
    assert lowering.summarize(list(results.values()), [], UB, 0.0, 1, out) == 1
    text = out.getvalue()
    assert f"FAILED [frontend] {lowp.label}" in text and lowp.label.startswith("cuda fwd ")
    assert "specializations: 3 = npu 1 (fwd 1) + cuda 2 (fwd 2); passed 2" in text


def test_cuda_footprints_are_not_checked_against_the_ub(specs, cuda_specs) -> None:
    """cuda has no UB: its modeled footprint neither fails the gate nor is the largest reported."""
    npu, cuda = first_spec(specs), dataclasses.replace(first_spec(cuda_specs), footprint=10 * UB)
    out = io.StringIO()
    assert lowering.summarize([lowering.Result(npu, "PASS", 0.1), lowering.Result(cuda, "PASS", 0.1)],
                              [], UB, 0.0, 1, out) == 0
    text = out.getvalue()
    assert f"largest UB footprint: {npu.footprint} B" in text and "UB OVERFLOW" not in text


@pytest.mark.parametrize("extra, cut", [(0, False), (1, True)])
def test_a_failure_message_is_cut_only_past_its_limit(specs, extra: int, cut: bool) -> None:
    message = "x" * (lowering.MESSAGE_CHARS - 1) + "y" + "z" * extra
    out = io.StringIO()
    assert lowering.summarize([lowering.Result(first_spec(specs), "FAIL", 0.1, "ttadapter", message)],
                              [], UB, 0.0, 1, out) == 1
    text = out.getvalue()
    shown = message[:lowering.MESSAGE_CHARS] + "\n[... cut: --report]" if cut else message
    assert f"\n{shown}\n\nlowering gate: FAILED" in text


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


def test_adapter_error_is_reported_with_its_message(specs, cuda_specs, tmp_path, monkeypatch) -> None:
    """... for an npu specialization; a cuda one never runs the (Ascend-only) adapter."""
    ref = fake_adapter(tmp_path, monkeypatch, "echo \"error: 'tt.dot' op not supported on this target\" >&2; exit 1")
    npu, cuda = first_spec(specs), first_spec(cuda_specs)
    results = {r.spec: r for r in lowering.run([npu, cuda], kernels=ref, out=io.StringIO())}
    result, cuda = results[npu], results[cuda]
    assert (result.status, result.stage) == ("FAIL", "ttadapter")
    assert "exited with status 1" in result.message and "'tt.dot' op not supported" in result.message
    assert cuda.status == "PASS", cuda.message


@pytest.mark.parametrize("signal", ["HUP", "ABRT", "KILL", "SEGV"])
def test_adapter_crash_is_retried_then_flaky(specs, tmp_path, monkeypatch, signal) -> None:
    """triton-adapter-opt 3.2.0 segfaults now and then; a crash that passes on retry is FLAKY. A crash is the
    compiler killed by any signal (a negative exit status), the lowest-numbered one (SIGHUP, -1) included."""
    import signal as signals
    import sys

    from triton.backends.ascend.utils import _get_triton_adapter_opt_path

    marker = tmp_path / "crashed-once"
    # The signal's default action restored first: a shell started under nohup (as CI may be) ignores
    # SIGHUP and cannot undo that, so the dying adapter is a Python process.
    die = (f"import os, signal; s = signal.SIG{signal}; s == signal.SIGKILL or signal.signal(s, signal.SIG_DFL); "
           "os.kill(os.getpid(), s)")
    body = (f'[ -e {marker} ] || {{ touch {marker}; exec {sys.executable} -c "{die}"; }}\n'
            f'exec {_get_triton_adapter_opt_path()} "$@"')
    (result,) = lowering.run([first_spec(specs)], kernels=fake_adapter(tmp_path, monkeypatch, body), out=io.StringIO())
    assert (result.status, result.stage) == ("FLAKY", "ttadapter"), result.message
    assert f"status -{getattr(signals, 'SIG' + signal).value}" in result.message


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


def test_specs_after_a_crash_lower_in_a_fresh_worker(specs, tmp_path, monkeypatch) -> None:
    """A crash while lowering specs one at a time breaks that worker only: the next spec gets a
    fresh one and passes (here the kernels module kills the first two processes that import it:
    the chunk's worker, then the first spec's own)."""
    count = tmp_path / "imports"
    ref = kernel_module(tmp_path, monkeypatch, "dies_twice", f"""
        import os
        import signal
        from pathlib import Path

        count = Path({str(count)!r})
        n = int(count.read_text()) if count.exists() else 0
        count.write_text(str(n + 1))
        if n < 2:
            os.kill(os.getpid(), signal.SIGKILL)
        from wy_ascend.kernels import KERNELS
    """)
    spec, other = first_spec(specs), spec_where(specs, kernel="bwd", BT=16)
    results = lowering.run([spec, other], kernels=ref, out=io.StringIO(), jobs=1)
    assert [(r.spec, r.status, r.stage) for r in results] == [(spec, "FAIL", "crash"), (other, "PASS", None)]


def test_compiler_diagnostics_on_fd_2_are_captured_whole_and_fd_2_comes_back() -> None:
    """MLIR prints to file descriptor 2: the capture returns every byte written there, and
    afterwards fd 2 is the original file again (not the closed capture file)."""
    before = os.fstat(2)
    with lowering._capture_stderr() as read:
        os.write(2, b"error: 'tt.dot' op operand #0 mismatch\n")
        text = read()
    assert text == "error: 'tt.dot' op operand #0 mismatch\n"
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)


def test_divisibility_hints_mark_every_pointer_and_each_aligned_int(specs) -> None:
    """The lowering sees the alignment the JIT specializes on: all pointers and the K/V that are
    multiples of 16, nothing else."""
    fn = JITFunction(lowering.kernels_module.KERNELS["bwd"].fn)
    for s in (spec_where(specs, kernel="bwd", K=100), spec_where(specs, kernel="bwd", K=64)):
        signature, _ = s.signature(fn)
        hinted = {p.name for p in fn.params if p.num in lowering.divisibility_hints(fn, signature, frozenset(s.aligned()))}
        pointers = {n for n, t in signature.items() if t.startswith("*")}
        assert hinted == pointers | {n for n in ("K", "V") if getattr(s, n) % 16 == 0}


def test_the_cache_salt_hashes_file_contents(tmp_path) -> None:
    """A changed kernels.py must miss the cache: the salt's file hash is of the bytes."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_bytes(b"x = 1\n" * 300_000)  # more than one 1 MiB block
    b.write_bytes(b"x = 1\n" * 299_999 + b"x = 2\n")
    assert lowering._sha256_file(a) == hashlib.sha256(a.read_bytes()).hexdigest() != lowering._sha256_file(b)


def _change_salt_ingredient(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Change one thing a lowering result depends on, as a new release or a switch would."""
    import triton.compiler.compiler as compiler

    from wy_ascend import kernels

    target, backend, options, stages = lowering._toolchain()
    if name == "cache version":
        monkeypatch.setattr(lowering, "CACHE_VERSION", lowering.CACHE_VERSION + 1)
    elif name == "kernels.py":
        changed = tmp_path / "kernels.py"
        changed.write_bytes(Path(kernels.__file__).read_bytes() + b"# changed\n")
        real = lowering.inspect.getfile
        monkeypatch.setattr(lowering.inspect, "getfile", lambda obj: str(changed) if obj is kernels else real(obj))
    elif name == "tf32x3 switch":
        monkeypatch.setattr(kernels, "FP32_DOT_TF32X3", not kernels.FP32_DOT_TF32X3)
    elif name == "triton":
        key = compiler.triton_key()
        monkeypatch.setattr(compiler, "triton_key", lambda: key + "-changed")
    elif name == "target":
        monkeypatch.setattr(lowering, "_toolchain", lambda: (dataclasses.replace(target, arch=f"{target.arch}x"),
                                                             backend, options, stages))
    elif name == "options":
        monkeypatch.setattr(lowering, "_toolchain", lambda: (target, backend, dataclasses.replace(
            options, num_warps=options.num_warps * 2), stages))
    elif name == "adapter binary":
        from triton.backends.ascend import utils

        other = tmp_path / "adapter"
        other.write_bytes(b"another build")
        monkeypatch.setattr(utils, "_get_triton_adapter_opt_path", lambda: str(other))


@pytest.mark.skipif(lowering.toolchain() != "ascend", reason="the salt's ingredients of triton-ascend's toolchain")
@pytest.mark.parametrize("name", ["cache version", "kernels.py", "tf32x3 switch", "triton",
                                  "target", "options", "adapter binary"])
def test_each_thing_a_lowering_depends_on_changes_the_cache_salt(name, monkeypatch, tmp_path) -> None:
    """Every ingredient of ``cache_salt`` (the cache's key besides the spec) changes it alone: a cached PASS of
    one toolchain, kernel source or switch never answers for another."""
    before = lowering.cache_salt()
    _change_salt_ingredient(name, monkeypatch, tmp_path)
    assert lowering.cache_salt() != before


def test_report_option_writes_every_result(specs, tmp_path, monkeypatch) -> None:
    """``--report FILE`` writes each specialization's result as JSON (lowering itself stubbed)."""
    chosen = specs[:2]
    monkeypatch.setattr(lowering, "enumerate_specs", lambda ub_bytes=None: (chosen, []))
    monkeypatch.setattr(lowering, "run", lambda specs, **kw: [lowering.Result(s, "PASS", 0.5) for s in specs])
    path = tmp_path / "gate.json"
    assert lowering.main(["--no-cache", "--jobs", "1", "--report", str(path)]) == 0
    doc = json.loads(path.read_text())
    assert [r["label"] for r in doc["results"]] == [s.label for s in chosen]
    assert {r["status"] for r in doc["results"]} == {"PASS"}


def test_ub_bytes_and_jobs_must_be_positive(capsys) -> None:
    """Any positive --ub-bytes is taken (1 byte: every specialization skipped by the UB model);
    zero or a negative one, and --jobs 0, are usage errors."""
    assert lowering.main(["--list", "--ub-bytes", "1"]) == 0
    assert "skipped by the UB model" in capsys.readouterr().out
    for argv in (["--ub-bytes", "0"], ["--ub-bytes", "-5"], ["--jobs", "0"]):
        with pytest.raises(SystemExit) as e:
            lowering.main(["--list", *argv])
        assert e.value.code == 2 and "must be positive" in capsys.readouterr().err


# ----------------------------------------------------------------------------- guards and summaries, in-process


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True))
def test_a_constexpr_the_spec_has_no_value_for_is_refused_by_name(specs, name: str) -> None:
    """Spec.signature over constexpr names: one the spec gives a value is a constant with that value; any other
    is a KeyError naming it and the kernel (a kernel's new constexpr must get a value before it is lowered)."""
    spec = first_spec(specs)
    known = spec.constants()
    fn = SimpleNamespace(__name__="planted_kernel", params=[SimpleNamespace(name=name, is_constexpr=True)])
    if name in known:
        assert spec.signature(fn) == ({name: "constexpr"}, {name: known[name]})
    else:
        with pytest.raises(KeyError, match=f"constexpr {name!r} of planted_kernel has no value"):
            spec.signature(fn)


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(value=st.one_of(st.none(), st.integers(), st.text(max_size=5), st.just(print), st.just(lambda: None)))
def test_a_kernel_that_is_no_jit_function_fails_at_the_signature_naming_its_type(specs, value: object) -> None:
    """lower_spec where the kernel dict holds something other than a JITFunction (TRITON_INTERPRET=1 at triton's
    import makes them InterpretedFunctions): a FAIL at the signature stage whose TypeError names the entry and its
    type, not an AttributeError from deep inside."""
    spec = first_spec(specs)
    module = SimpleNamespace(KERNELS={spec.kernel: value})
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "planted_kernels", module)
        result = lowering.lower_spec(spec, "planted_kernels:KERNELS")
    assert (result.status, result.stage) == ("FAIL", "signature")
    assert result.message.startswith(f"TypeError: planted_kernels:KERNELS[{spec.kernel!r}] is a "
                                     f"{type(value).__name__}, not a JITFunction")


def test_the_lowering_deadline_is_a_no_op_off_the_main_thread() -> None:
    """_deadline: on the main thread an alarm is armed for its seconds and the SIGALRM handler restored after;
    off it (a worker's thread) the body runs with no alarm and no handler (which only the main thread may set),
    and what the body raises comes through."""
    before = signal.getsignal(signal.SIGALRM)
    with lowering._deadline(30):
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
        assert signal.getsignal(signal.SIGALRM) is not before
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0 and signal.getsignal(signal.SIGALRM) is before
    seen: list[object] = []

    def body() -> None:
        try:
            with lowering._deadline(30):
                seen.append(signal.getitimer(signal.ITIMER_REAL)[0])
            with lowering._deadline(30):
                raise LookupError("planted")
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            seen.append(e)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen[0] == 0 and isinstance(seen[1], LookupError) and str(seen[1]) == "planted"


@settings(max_examples=15, derandomize=True, database=None, deadline=None)
@given(old=st.integers(0, lowering.CACHE_FILES_KEPT + 5))
def test_saving_a_cache_keeps_only_the_newest_files(specs, old: int) -> None:
    """ResultCache.save beside ``old`` files of other salts: the newest CACHE_FILES_KEPT lowering-*.json files
    (the one saved among them) stay, older ones are removed, and other files are left alone."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        stale = [directory / f"lowering-old{i:02d}.json" for i in range(old)]
        for i, path in enumerate(stale):
            path.write_text("{}")
            os.utime(path, (1_000_000 + i, 1_000_000 + i))  # older first, all older than the file saved
        (directory / "other.json").write_text("{}")
        cache = lowering.ResultCache(directory, "salt")
        cache.put(lowering.Result(specs[0], "PASS", 1.0))
        cache.save()
        kept = stale[len(stale) - min(old, lowering.CACHE_FILES_KEPT - 1):] if old else []
        assert sorted(directory.iterdir()) == sorted([cache.path, directory / "other.json", *kept])


@settings(max_examples=4, derandomize=True, database=None, deadline=None)
@given(changed=st.booleans())
def test_results_are_cached_only_where_the_salt_is_unchanged_at_the_end(specs, changed: bool) -> None:
    """run(): when kernels.py or the toolchain changed during the run (the salt differs at its end) nothing is
    saved and the run says so; otherwise the results are saved, silently."""
    chosen = specs[:3]
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        cache = lowering.ResultCache(Path(tmp), "salt at the start")
        cache.passed = {s.label: 1.0 for s in chosen}  # all cached: nothing is lowered
        patch.setattr(lowering, "cache_salt", lambda: "salt at the end" if changed else "salt at the start")
        out = io.StringIO()
        assert [r.status for r in lowering.run(chosen, cache=cache, out=out)] == ["CACHED"] * 3
        said = "kernels.py or the toolchain changed during the run: results not cached" in out.getvalue()
        assert said == changed and cache.path.exists() == (not changed)


@settings(max_examples=25, derandomize=True, database=None, deadline=None)
@given(drawn=st.lists(st.tuples(st.sampled_from(["PASS", "FLAKY", "CACHED", "FAIL"]), st.floats(0, 2),
                                st.sampled_from(["npu", "cuda"])), min_size=1, max_size=5),
       skips=st.lists(st.builds(lowering.Skip, st.sampled_from(["fwd", "bwd"]), st.sampled_from([64, 128]),
                                st.integers(1, 99), st.text("abc xyz", min_size=1, max_size=20)), max_size=3))
def test_the_summary_lists_each_skip_overflow_and_flaky_result(specs, drawn, skips) -> None:
    """summarize over drawn results: each UB skip gets its line, each specialization of a backend with a UB whose
    footprint is over the budget an UB OVERFLOW line, each FLAKY result its crash's first line; the gate fails
    exactly on a FAIL or an overflow."""
    budget = int(UB * UB_SAFETY_MARGIN)
    results = [lowering.Result(dataclasses.replace(specs[i], backend=backend, footprint=int(share * budget)),
                               status, 0.1, "ttadapter" if status in ("FAIL", "FLAKY") else None,
                               f"crash {i}\nsecond line" if status in ("FAIL", "FLAKY") else "")
               for i, (status, share, backend) in enumerate(drawn)]
    out = io.StringIO()
    code = lowering.summarize(results, skips, UB, 0.0, 1, out)
    lines = out.getvalue().splitlines()
    over = [r for r in results if r.spec.backend == "npu" and r.spec.footprint > budget]
    for s in skips:
        assert f"skipped by the UB model: {s.kernel} BT={s.BT} ({s.count} specializations): {s.reason}" in lines
    assert [line for line in lines if line.startswith("UB OVERFLOW")] == [
        f"UB OVERFLOW: {r.spec.label}: modeled footprint {r.spec.footprint} B > {budget} B" for r in over]
    assert [line for line in lines if line.startswith("FLAKY")] == [
        f"FLAKY (passed on retry after [ttadapter] crash {i}): {r.spec.label}"
        for i, r in enumerate(results) if r.status == "FLAKY"]
    assert code == int(bool(over) or any(r.status == "FAIL" for r in results))


def test_under_upstream_triton_only_the_cuda_specializations_are_listed(monkeypatch, capsys, all_specs) -> None:
    """main --list where the installed triton is upstream's (NVIDIA's compiler, `nox -s lower_cuda`): the cuda
    specializations alone, and no UB skip (those are npu ones, which need triton-ascend)."""
    monkeypatch.setattr(lowering, "toolchain", lambda: "upstream")
    assert lowering.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    cuda = [s.label for s in all_specs if s.backend == "cuda"]
    assert cuda and lines[:-1] == cuda
    assert lines[-1] == f"{len(cuda)} specializations = {lowering._counts(all_specs[-len(cuda):])}, 0 skipped by the UB model"


@settings(max_examples=25, derandomize=True, database=None, deadline=None)
@given(cpus=st.one_of(st.none(), st.integers(1, 1024)))
def test_the_default_jobs_are_the_cpu_count_at_most_eight(cpus: int | None) -> None:
    """The module doc's default for ``--jobs`` (the CPU count, at most 8; 1 where it is unknown), over drawn
    CPU counts: what main hands the lowering and prints."""
    seen: list[int] = []

    def run(specs: list[object], jobs: int, cache: object) -> list[object]:
        seen.append(jobs)
        return []

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lowering.os, "cpu_count", lambda: cpus)
        mp.setattr(lowering, "enumerate_specs", lambda ub_bytes: ([], []))
        mp.setattr(lowering, "run", run)
        mp.setattr(lowering, "summarize", lambda *args: 0)
        assert lowering.main(["--no-cache"]) == 0
    assert seen == [min(8, cpus or 1)]


def test_the_command_line_help_says_what_the_gate_is(capsys) -> None:
    """``python -m wy_ascend.lowering --help`` opens with the module doc's summary line (the gate's one-line
    description), before its options."""
    with pytest.raises(SystemExit) as done:
        lowering.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    summary = lowering.__doc__.splitlines()[0]
    assert summary.startswith("Lowering gate:") and summary in " ".join(out.split())
    assert out.index("Lowering gate:") < out.index("options:")
