"""Benchmarks: one provider per benchmark (ours, fla, oracle), named cases, ratios from one run.

    pytest benchmarks/ [--backend cpu|cuda|npu|npu-cuda] --benchmark-json=out.json

* cpu (Triton interpreter): ours fwd/bwd and the float64 oracle on two small gated cases,
  the oracle's build_A, and one fuzz case (``run_property("oracle", case)``) per round.
* cuda / npu / npu-cuda: ours on every shape of ``benchmarks.shapes.SHAPES`` in bf16, fwd and
  bwd; fla-core's CUDA kernels beside it on cuda devices (skipped when ``import fla`` fails).
* everywhere: the NPU launch-plan / traffic model (benchmarks/npu_model.py), no timing.

Setup (inputs, an L2 flush on devices) is outside the timed call; the timed call ends with a
device synchronization, so pytest-benchmark's figure is a call's latency from an idle device
(host overhead included). On devices the kernels' own time is also taken with device events,
do_bench's way, and stored as ``extra_info["device_ms"]`` (median): the bandwidth figures and
the report's ours/fla ratios use it.
"""

from __future__ import annotations

import inspect
import statistics
from collections.abc import Callable
from dataclasses import asdict

import pytest
import torch

from benchmarks import npu_model
from benchmarks.shapes import H200_HBM_PEAK, SHAPES, Shape
from wy_ascend import prepare_chunk_indices, prepare_wy_repr_bwd, recompute_w_u_fwd, reference
from wy_ascend.testing.case import Case
from wy_ascend.testing.perf import L2_FLUSH_BYTES
from wy_ascend.testing.properties import DEVICE_OF, run_property

# CPU cases: small enough for the interpreter (0.1-0.5 s a call), gated, grouped heads.
CPU_CASES = {
    s.name: s
    for s in (
        Shape("cpu_B1_T64_H1_HV2_K32", B=1, T=64, H=1, HV=2, K=32, V=32, BT=32),
        Shape("cpu_B1_T256_H2_HV4_K64", B=1, T=256, H=2, HV=4, K=64, V=64, BT=64),
    )
}
# The fuzz case timed end to end (inputs, kernels, oracle, comparison): a typical small draw.
FUZZ_CASE = Case(cu_seqlens=(0, 37, 100), H=1, HV=2, K=32, V=32, BT=32, use_g=True)

CPU_ROUNDS = dict(rounds=5, warmup_rounds=1)
ORACLE_ROUNDS = dict(rounds=10, warmup_rounds=2)
DEVICE_ROUNDS = dict(rounds=50, warmup_rounds=10)  # warm-up covers compiles and CUDA autotuning


def _fwd_args(x: dict) -> tuple:
    return x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"], x["chunk_indices"]


def _bwd_args(x: dict) -> tuple:
    return x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], x["g"], x["cu_seqlens"], x["chunk_indices"]


def _inputs(shape: Shape, device: str, dtype: torch.dtype) -> dict:
    x = shape.inputs(device, dtype=dtype)
    cu = x["cu_seqlens"]
    x["chunk_indices"] = prepare_chunk_indices(cu, shape.BT) if cu is not None else None
    return x


def _bytes(shape: Shape, op: str, dtype: torch.dtype) -> int | None:
    size = torch.empty((), dtype=dtype).element_size()
    return {"fwd": shape.bytes_fwd(size), "bwd": shape.bytes_bwd(size)}.get(op)


def _record(benchmark, *, case: str, provider: str, op: str, backend: str, shape: Shape | None,
            nbytes: int | None, device_ms: float | None = None, **extra: object) -> None:
    """extra_info: who and what was timed, and bandwidth from compulsory bytes / median time."""
    if benchmark.stats is None:  # --benchmark-disable: the call ran once, untimed
        return
    wall_ms = benchmark.stats.stats.median * 1e3
    ms = device_ms if device_ms is not None else wall_ms
    info = dict(case=case, provider=provider, op=op, backend=backend, wall_ms=wall_ms, **extra)
    if shape is not None:
        info["shape"] = {k: v for k, v in asdict(shape).items() if k != "name"}
    if device_ms is not None:
        info["device_ms"] = device_ms
    if nbytes is not None:
        info.update(bytes=nbytes, GBps=nbytes / ms / 1e6, hbm_frac_h200=nbytes / (ms * 1e-3) / H200_HBM_PEAK)
    benchmark.extra_info.update(info)


# ----------------------------------------------------------------------------- CPU


@pytest.fixture(scope="module", params=list(CPU_CASES))
def cpu_case(request: pytest.FixtureRequest) -> tuple[Shape, dict]:
    shape = CPU_CASES[request.param]
    return shape, _inputs(shape, "cpu", torch.float32)


def _oracle_fns(shape: Shape, x: dict) -> dict[str, Callable[[], object]]:
    k, v, beta, A, dw, du, g, cu = (x[n] for n in ("k", "v", "beta", "A", "dw", "du", "g", "cu_seqlens"))
    return {
        "fwd": lambda: reference.wy_fwd(k, v, beta, A, g, cu),
        "bwd": lambda: reference.wy_bwd(k, v, beta, dw, du, g, cu, chunk_size=shape.BT),
        "build_A": lambda: reference.build_A(k, beta, g, cu, chunk_size=shape.BT),
    }


@pytest.mark.parametrize("op", ["fwd", "bwd"])
@pytest.mark.parametrize("provider", ["ours", "oracle"])
def test_cpu(benchmark, backend: str, cpu_case: tuple[Shape, dict], provider: str, op: str) -> None:
    """Interpreter (ours, cpu backend) vs the float64 oracle, fp32 inputs, same case."""
    shape, x = cpu_case
    if provider == "ours" and backend != "cpu":
        pytest.skip("the interpreter cases need --backend cpu (one process runs either the interpreter or "
                    "compiled kernels)")
    if provider == "ours":
        fn = (lambda: recompute_w_u_fwd(*_fwd_args(x), backend="cpu")) if op == "fwd" else (
            lambda: prepare_wy_repr_bwd(*_bwd_args(x), backend="cpu"))
    else:
        fn = _oracle_fns(shape, x)[op]
    benchmark.group = f"cpu {shape.name} {op}"
    benchmark.pedantic(fn, **(CPU_ROUNDS if provider == "ours" else ORACLE_ROUNDS))
    _record(benchmark, case=shape.name, provider=provider, op=op, backend="cpu" if provider == "ours" else "torch",
            shape=shape, nbytes=_bytes(shape, op, torch.float32))


def test_oracle_build_A(benchmark) -> None:
    """The oracle's build_A (float64 inverse per chunk and head) on the larger CPU case."""
    shape = CPU_CASES["cpu_B1_T256_H2_HV4_K64"]
    x = _inputs(shape, "cpu", torch.float32)
    benchmark.group = f"cpu {shape.name} build_A"
    benchmark.pedantic(_oracle_fns(shape, x)["build_A"], **ORACLE_ROUNDS)
    _record(benchmark, case=shape.name, provider="oracle", op="build_A", backend="torch", shape=shape, nbytes=None)


def test_fuzz_case(benchmark, backend: str) -> None:
    """Throughput of one fuzz case end to end: build inputs, run fwd + bwd, oracle, compare."""
    case = FUZZ_CASE.replace(backend=backend)
    benchmark.group = "fuzz case"
    benchmark.pedantic(lambda: run_property("oracle", case), **CPU_ROUNDS)
    _record(benchmark, case="fuzz_oracle_varlen_T100_HV2_K32", provider="ours", op="fuzz_case", backend=backend,
            shape=None, nbytes=None, fuzz_case=case.to_dict())
    if benchmark.stats is not None:
        benchmark.extra_info["cases_per_s"] = 1.0 / benchmark.stats.stats.median


# ----------------------------------------------------------------------------- devices


def _device_module(device: str):
    return getattr(torch, torch.device(device).type)  # torch.cuda or torch.npu


def _peer():
    """fla-core's wy_fast module, or the reason it cannot be used."""
    try:
        from fla.ops.gated_delta_rule import wy_fast
    except Exception as e:  # noqa: BLE001 - any import failure means "no peer"
        return None, f"fla-core not importable ({type(e).__name__}: {e}); pip install '.[peer]'"
    return wy_fast, None


def _peer_call(fn: Callable, x: dict, names: tuple[str, ...]) -> Callable[[], object]:
    """fla's op called by keyword (older fla-core releases ordered (g, A) differently): a
    signature without our argument names is skipped with the signature in the message."""
    params = inspect.signature(fn).parameters
    missing = [n for n in names if n not in params and n != "chunk_indices"]
    if missing:
        pytest.skip(f"fla-core's {fn.__name__}{inspect.signature(fn)} lacks {missing}: not the same op signature")
    kw = {n: x[n] for n in names if n in params}
    return lambda: fn(**kw)


@pytest.fixture(scope="module", params=list(SHAPES))
def device_case(request: pytest.FixtureRequest, backend: str):
    if backend == "cpu":
        pytest.skip("the named shapes need a device backend (--backend cuda or npu); the interpreter would take hours")
    device = DEVICE_OF[backend]
    shape = SHAPES[request.param]
    x = _inputs(shape, device, torch.bfloat16)
    yield shape, x, device
    del x
    _device_module(device).empty_cache()


@pytest.mark.parametrize("op", ["fwd", "bwd"])
@pytest.mark.parametrize("provider", ["ours", "fla"])
def test_device(benchmark, backend: str, device_case, provider: str, op: str) -> None:
    """Ours vs fla-core on one named shape, bf16. pytest-benchmark times the synchronized call after
    an L2 flush (setup); extra_info["device_ms"] is the kernels' time from device events."""
    shape, x, device = device_case
    if provider == "ours":
        fwd = lambda: recompute_w_u_fwd(*_fwd_args(x), backend=backend)  # noqa: E731
        bwd = lambda: prepare_wy_repr_bwd(*_bwd_args(x), backend=backend)  # noqa: E731
    else:
        if torch.device(device).type != "cuda":
            pytest.skip("fla-core's kernels run on CUDA devices only")
        peer, why = _peer()
        if peer is None:
            pytest.skip(why)
        fwd = _peer_call(peer.recompute_w_u_fwd, x, ("k", "v", "beta", "A", "g", "cu_seqlens", "chunk_indices"))
        bwd = _peer_call(peer.prepare_wy_repr_bwd, x,
                         ("k", "v", "beta", "A", "dw", "du", "g", "cu_seqlens", "chunk_indices"))
    fn = fwd if op == "fwd" else bwd
    mod = _device_module(device)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)

    def setup() -> None:
        flush.zero_()
        mod.synchronize()

    def timed() -> None:
        fn()
        mod.synchronize()

    benchmark.group = f"{shape.name} {op}"
    benchmark.pedantic(timed, setup=setup, **DEVICE_ROUNDS)
    _record(benchmark, case=shape.name, provider=provider, op=op, backend=backend if provider == "ours" else "fla",
            shape=shape, nbytes=_bytes(shape, op, torch.bfloat16),
            device_ms=_kernel_ms(fn, flush, mod, DEVICE_ROUNDS["rounds"]), device=_device_name(device))


def _kernel_ms(fn: Callable[[], object], flush: torch.Tensor, mod, reps: int) -> float:
    """Median device time of ``fn`` between events, triton.testing.do_bench's way: each call follows
    an L2 flush in the same stream with no host sync in between, so the host's launch overhead
    hides behind the flush and the events time the kernels alone (pytest-benchmark's own figure is
    the call's latency from an idle device, host overhead and synchronization included)."""
    starts = [mod.Event(enable_timing=True) for _ in range(reps)]
    ends = [mod.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        flush.zero_()
        start.record()
        fn()
        end.record()
    mod.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def _device_name(device: str) -> str:
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name()
    return device


# ----------------------------------------------------------------------------- NPU model (no timing)


def test_npu_model(benchmark, capsys: pytest.CaptureFixture) -> None:
    """The NPU launch/traffic model: ours is one kernel per call and moves less than the seed on every
    shape. It takes the benchmark fixture only so that ``--benchmark-only`` runs keep it and its
    summaries land in the JSON (extra_info["npu_model"]); the time is that of the model itself."""
    benchmark.group = "npu model (no device)"
    results = benchmark.pedantic(npu_model.model, rounds=1)
    for res in results:
        ours, seed = res["summary"]["ours"], res["summary"]["seed"]
        assert ours["kernel_launches"] == 1 and ours["compiles"] == 1, res["shape"]
        assert seed["kernel_launches"] >= 7
        assert ours["hbm_bytes"] < seed["hbm_bytes"], res["shape"]
        shape = SHAPES.get(res["shape"]) or npu_model.MODEL_ONLY[res["shape"]]
        assert ours["compulsory_bytes"] == shape.bytes_bwd(), res["shape"]
    benchmark.extra_info.update(case="npu_model", provider="model", op="npu_model",
                                npu_model={r["shape"]: r["summary"] for r in results})
    with capsys.disabled():
        print("\n" + npu_model.markdown(results, stages=False))


def test_npu_model_seq_lens_match_shapes() -> None:
    """npu_model cuts varlen shapes exactly as Shape.inputs does."""
    shape = Shape("v", B=1, T=300, H=1, HV=1, K=16, V=16, BT=16, n_seqs=5)
    cu = shape.inputs("cpu", dtype=torch.float32)["cu_seqlens"]
    assert npu_model.seq_lens(shape) == (cu[1:] - cu[:-1]).tolist()
