"""The counter-based generator (wy_ascend.testing.rng) and the inputs and oracle comparison built
on it: values a pure function of (seed, stream, index), fixed golden numbers, sane statistics;
build_inputs draws from it alone; compare_to_oracle reads the device once."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.testing import properties, rng
from wy_ascend.testing.case import DISTRIBUTIONS, STREAMS, Case
from wy_ascend.testing.properties import bounds, oracle

CPU = torch.device("cpu")
MASK = (1 << 64) - 1


def finalize(state: int) -> int:
    """SplitMix64's output function of one state, as published (Steele, Lea, Flood 2014)."""
    z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def splitmix64(seed: int, n: int) -> list[int]:
    """SplitMix64 as published, in Python ints: the first n outputs."""
    out, state = [], seed
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        out.append(finalize(state))
    return out


def unsigned(x: torch.Tensor) -> list[int]:
    return [v & MASK for v in x.tolist()]


def test_bits_golden():
    """Seed 0, stream 0 is SplitMix64 seeded with 0 (its published first output e220a8397b1dcdaf);
    stream s starts 2**40 steps into the sequence seeded with mix(seed)."""
    assert unsigned(rng.bits(0, 0, torch.arange(4))) == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                                         0x06C45D188009454F, 0xF88BB8A8724C81EC]
    assert unsigned(rng.bits(0, 0, torch.arange(5))) == splitmix64(0, 5)
    assert unsigned(rng.bits(12345, 3, torch.arange(6))) == splitmix64(rng.mix(12345) + (3 << 40) * rng.GAMMA, 6)
    assert rng.bits(12345, 2, torch.arange(3)).tolist() == [362899993001810052, 7620440334004010858,
                                                            4653414157625989073]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, MASK), stream=st.integers(0, 15), n=st.integers(1, 8))
def test_bits_are_splitmix64_for_any_seed(seed: int, stream: int, n: int) -> None:
    """Over the whole 64-bit seed range (the goldens' seeds are under 2**30, where a finalizer's first shift
    of 29 or 31 bits reads only zeros): ``mix`` is the published finalizer, and stream s of seed is SplitMix64
    from the state mix(seed) + s * 2**40 * GAMMA, both against this file's own SplitMix64."""
    assert rng.mix(seed) == finalize(seed)
    start = (finalize(seed) + (stream << rng.STREAM_BITS) * 0x9E3779B97F4A7C15) & MASK
    assert unsigned(rng.bits(seed, stream, torch.arange(n))) == splitmix64(start, n)


def test_uniform_and_normal_golden():
    """Uniforms are exact (k / 2**53); normals up to the float64 rounding of log1p, sqrt, cos, sin."""
    u, = rng.uniform(12345, [(2, (3,))], CPU)
    assert u.tolist() == [0.019672848040376834, 0.4131048982711655, 0.25226208695864494]
    assert u.tolist() == [(b >> 11) * 2.0**-53 for b in unsigned(rng.bits(12345, 2, torch.arange(3)))]
    z, = rng.normal(12345, [(2, (3,))], CPU)
    assert z.tolist() == pytest.approx([-0.17036299457468893, 0.1035099950285971, -0.6142642038044338], rel=1e-14)


def test_pure_function_of_seed_stream_index():
    """Any index set gives the values of those indices: a slice of a long draw, a permutation, a
    shape, another batch of streams; seeds and streams differ."""
    long = rng.bits(7, 1, torch.arange(1000))
    assert torch.equal(rng.bits(7, 1, torch.arange(300, 420)), long[300:420])
    perm = torch.randperm(1000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(rng.bits(7, 1, perm), long[perm])
    assert not torch.equal(rng.bits(8, 1, torch.arange(1000)), long)
    assert not torch.equal(rng.bits(7, 2, torch.arange(1000)), long)
    for draw in (rng.uniform, rng.normal):
        whole, = draw(7, [(1, (1001,))], CPU)
        for n in (1, 2, 77, 500):  # odd and even prefixes: a normal pair is never split differently
            assert torch.equal(draw(7, [(1, (n,))], CPU)[0], whole[:n])
        assert torch.equal(draw(7, [(1, (7, 11, 13))], CPU)[0], whole[:1001].view(7, 11, 13))
        batch = draw(7, [(4, (3, 5)), (1, (9,)), (2, (0,)), (6, (2, 2))], CPU)
        alone = [draw(7, [(s, shape)], CPU)[0] for s, shape in [(4, (3, 5)), (1, (9,)), (2, (0,)), (6, (2, 2))]]
        assert all(torch.equal(a, b) for a, b in zip(batch, alone))
        assert torch.equal(batch[1], whole[:9])


N = 1 << 20


def test_uniform_statistics():
    """2**20 uniforms: mean, variance, lag-1 correlation within 5 standard errors of U[0, 1)'s
    (sd of the mean sqrt(1/12/N) = 2.8e-4, of the variance sqrt((1/80 - 1/144)/N) = 7.3e-5, of
    the correlation 1/sqrt(N) = 9.8e-4); 16 equal bins pass a chi-square test with 15 degrees of
    freedom at p = 1e-6 (bound 50); every value in [0, 1)."""
    u, = rng.uniform(3, [(0, (N,))], CPU)
    assert 0 <= float(u.min()) and float(u.max()) < 1
    assert abs(float(u.mean()) - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(float(u.var()) - 1 / 12) < 5 * math.sqrt((1 / 80 - 1 / 144) / N)
    assert abs(float(torch.corrcoef(torch.stack((u[:-1], u[1:])))[0, 1])) < 5 / math.sqrt(N)
    counts = torch.bincount((u * 16).long(), minlength=16).double()
    assert float(((counts - N / 16) ** 2 / (N / 16)).sum()) < 50


def test_normal_statistics():
    """2**20 normals: mean, variance, lag-1 correlation (across and within Box-Muller pairs)
    within 5 standard errors of N(0, 1)'s (1/sqrt(N) = 9.8e-4, sqrt(2/N) = 1.4e-3); the tail
    beyond 3 within 5 sd of its binomial count (P = 2.7e-3)."""
    z, = rng.normal(3, [(0, (N,))], CPU)
    assert abs(float(z.mean())) < 5 / math.sqrt(N)
    assert abs(float(z.var()) - 1) < 5 * math.sqrt(2 / N)
    pairs = z.view(-1, 2)
    for a, b in ((z[:-1], z[1:]), (pairs[:, 0], pairs[:, 1])):
        assert abs(float(torch.corrcoef(torch.stack((a, b)))[0, 1])) < 5 / math.sqrt(a.numel())
    p = math.erfc(3 / math.sqrt(2))
    assert abs(int((z.abs() > 3).sum()) - p * N) < 5 * math.sqrt(p * (1 - p) * N)


CASES = [Case(B=2, T=40, H=2, HV=4, K=24, V=20, BT=16, dtype="bfloat16", use_g=True, dist=dist, seed=11)
         for dist in DISTRIBUTIONS] + [
    Case(cu_seqlens=(0, 3, 3, 9, 20, 90), HV=2, K=32, V=16, BT=32, use_g=True, dist=dist, seed=5)
    for dist in DISTRIBUTIONS]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.dist}-{'varlen' if c.cu_seqlens else 'fixed'}")
def test_build_inputs_draws_from_rng_only(case, monkeypatch):
    """build_inputs touches neither torch's global generator nor a torch.Generator, is the same on
    every call, and its v and dw are the float64 normals of their streams, cast."""
    state = torch.get_rng_state()

    def refuse(*args, **kwargs):
        raise AssertionError("build_inputs used torch's random number generation")

    for name in ("rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal",
                 "bernoulli", "multinomial", "Generator"):
        monkeypatch.setattr(torch, name, refuse)
    for name in ("normal_", "uniform_", "random_", "bernoulli_", "exponential_"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    x, y = case.build_inputs(), case.build_inputs()
    monkeypatch.undo()
    assert torch.equal(torch.get_rng_state(), state)
    # equal bit for bit, the NaN in A's columns past a partial chunk included
    assert all((a is None and b is None) or torch.equal(a.nan_to_num(), b.nan_to_num()) and
               torch.equal(a.isnan(), b.isnan()) for a, b in zip(x, y))
    B, T, HV = case.B, case.T, case.HV
    v, dw = rng.normal(case.seed, [(STREAMS.index("v"), (B, T, HV, case.V)),
                                   (STREAMS.index("dw"), (B, T, HV, case.K))], CPU)
    if case.dist == "zeros":  # zeroed on the tokens of their own streams
        for ref, name in ((v, "zero_v"), (dw, "zero_dw")):
            ref.masked_fill_((rng.uniform(case.seed, [(STREAMS.index(name), (B, T))], CPU)[0] < 0.3)[..., None, None], 0)
    assert torch.equal(x.v, v.to(case.torch_dtype)) and torch.equal(x.dw, dw.to(case.torch_dtype))


def _characters(case: Case) -> set[str]:
    """Which of the adversarial distributions' marks (case.DISTRIBUTIONS) the case's inputs carry."""
    x = case.build_inputs()
    k, g = x.k.double().view(case.B * case.T, case.H, case.K), x.g.double().view(case.B * case.T, case.HV)
    marks = set()
    if set(x.beta.unique().tolist()) <= {0.0, 1.0}:
        marks.add("beta exactly 0 or 1")
    chunks = [(b * case.T + s, b * case.T + e) if case.cu_seqlens is None else (s, e) for b, s, e in case.chunk_bounds()]
    if all(len(k[s:e, h].unique(dim=0)) <= 2 for s, e in chunks for h in range(case.H)):
        marks.add("at most 2 keys a chunk")
    steps = torch.cat([torch.cat((g[s:s + 1], g[s + 1:e] - g[s:e - 1])) for s, e in chunks])
    assert bool((steps < 0).all() and (steps >= -8).all())  # every distribution's gate steps
    if float(steps.min()) < -4:
        marks.add("gate steps below -4")
    if all(bool((t.flatten(2).abs().sum(-1) == 0).any()) for t in (x.k, x.v, x.dw, x.du)) and bool((x.beta == 0).any()):
        marks.add("zero tokens")
    return marks


@pytest.mark.parametrize("case", [c.replace(dtype="float32") for c in CASES],
                         ids=lambda c: f"{c.dist}-{'varlen' if c.cu_seqlens else 'fixed'}")
def test_each_distribution_has_its_mark_and_no_other(case):
    """Each adversarial distribution gives its inputs the mark its comment names, and only that one
    (a distribution that lost its mark would pass every property as a second "realistic")."""
    marks = {"realistic": set(), "beta_extremes": {"beta exactly 0 or 1"}, "repeated_keys": {"at most 2 keys a chunk"},
             "long_gates": {"gate steps below -4"}, "zeros": {"zero tokens"}}
    assert set(marks) == set(DISTRIBUTIONS)
    assert _characters(case) == marks[case.dist]


@pytest.mark.parametrize("case", CASES[:1] + CASES[-1:], ids=["fixed", "varlen"])
def test_token_chunks_match_chunk_bounds(case):
    """The per-token chunk, row and chunk length built on the device agree with chunk_bounds."""
    cu = torch.arange(case.B + 1) * case.T if case.cu_seqlens is None else torch.tensor(case.cu_seqlens)
    n_chunks, chunk, row, length = case.token_chunks(cu)
    bounds = case.chunk_bounds()
    assert n_chunks == len(bounds)
    expected = [(c, t - s, e - s) for c, (_, s, e) in enumerate(bounds) for t in range(s, e)]
    assert list(zip(chunk.tolist(), row.tolist(), length.tolist())) == expected


@pytest.mark.cpu_backend
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compare_to_oracle_reads_the_device_once(dtype, monkeypatch):
    """The comparison reads its numbers in one transfer (no rel_rms per output, no .item()), and
    the rounding sensitivity's signs come from rng, not a torch.Generator."""
    case = Case(cu_seqlens=(0, 5, 40), HV=2, BT=16, use_g=True, dtype=dtype)
    inputs = case.build_inputs()
    got = properties.run_ops(case, inputs)
    reads = []
    real_read = oracle._read  # the comparison's reads: compare_to_oracle looks _read up in oracle

    def read(rows):
        reads.append(len(rows))
        return real_read(rows)

    def refuse(*args, **kwargs):
        raise AssertionError("a host read or generator outside the comparison's one transfer")

    monkeypatch.setattr(oracle, "_read", read)
    for module in (bounds, oracle):  # where the comparison and its bounds would look rel_rms up
        monkeypatch.setattr(module, "rel_rms", refuse, raising=False)
    monkeypatch.setattr(torch.Tensor, "item", refuse)
    monkeypatch.setattr(torch, "Generator", refuse)
    blocks = properties.blocks_of(case, torch.device("cpu"))
    metrics = properties.compare_to_oracle(got, inputs, dtype, blocks)
    # per output: its norms, its worst block and its two bound terms (float32's too: its sensitivity)
    assert reads == [24] and set(metrics) == set(properties.FWD_NAMES + properties.BWD_NAMES)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.dist}-{'varlen' if c.cu_seqlens else 'fixed'}")
def test_a_gpu_builds_the_inputs_the_cpu_builds(case):
    """A case found on a GPU replays on the CPU: the bits are the same integers on both devices
    and every input tensor agrees within one unit in the last place of its dtype plus 1e-9 of its
    largest magnitude. The float64 work differs only by rounding: log1p/sqrt/cos/sin (~1e-16
    relative) and build_A's solve, whose order differs by device (float64 rounding amplified by
    a chunk's conditioning, far below 1e-9 of the scale). Either can move a cast across one
    rounding boundary of the input dtype; 1e-9 of the scale is below one float32 ulp of any
    element above 1e-2 of the largest, so a real difference in the draws still fails."""
    index = torch.arange(1 << 16, dtype=torch.int64)
    assert torch.equal(rng.bits(case.seed, 3, index.cuda()).cpu(), rng.bits(case.seed, 3, index))
    host, gpu = case.build_inputs("cpu"), case.build_inputs("cuda")
    for name, a, b in zip(host._fields, host, gpu):
        if a is None or b is None:
            assert a is None and b is None, name
            continue
        b = b.cpu()
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if not a.is_floating_point():
            assert torch.equal(a, b), name
            continue
        assert torch.equal(a.isnan(), b.isnan()), name  # A's NaN past each partial chunk, in the same places
        eps, a, b = torch.finfo(a.dtype).eps, a.double().nan_to_num(), b.double().nan_to_num()
        bound = eps * a.abs() + 1e-9 * float(a.abs().max())
        assert bool(((a - b).abs() <= bound).all()), name


def test_mix_takes_any_python_int_as_its_uint64() -> None:
    """SplitMix64's finalizer with uint64 semantics: an int past 64 bits or below zero mixes as its value
    mod 2**64 (a seed arithmetic that overflows or goes negative still gives the stream of its bits)."""
    for z in (0, 1, 12345, 2**63, 2**64 - 1):
        assert rng.mix(z + 2**64) == rng.mix(z + 5 * 2**64) == rng.mix(z)
        assert rng.mix(z - 2**64) == rng.mix(z)
    assert rng.mix(-1) == rng.mix(2**64 - 1) and 0 <= rng.mix(-1) < 2**64

