"""Counter-based random numbers: the same bits on every device.

Element ``i`` of stream ``s`` under ``seed`` is SplitMix64's output for the state
``mix(seed) + (s * 2**40 + i + 1) * GAMMA`` (mod 2**64): a pure function of ``(seed, s, i)``
(``bits``), computed in torch int64 arithmetic, whose bits are the same on every device (a
wrapping multiply keeps the low 64 bits everywhere; right shifts are masked, so arithmetic
shifts of negative int64 act as the logical shifts of uint64, which torch lacks). torch's own
generators give CPU and CUDA different streams and draw sequentially; a case found on a GPU
must replay on the CPU. Seed 0, stream 0 is SplitMix64 seeded with 0.

Uniforms take the top 53 bits; normals are Box-Muller of the uniform pairs (2j, 2j + 1), so
they are identical across devices up to the float64 rounding of log1p, sqrt, cos and sin.
Each call draws several streams in one pass (``[(stream, shape), ...]``): on the CPU, small
cases cost torch's per-operation overhead, not arithmetic.
"""

from __future__ import annotations

import math

import torch

GAMMA = 0x9E3779B97F4A7C15  # SplitMix64's state increment (odd: 2**64 / golden ratio)
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # its finalizer's multipliers
_MASK = (1 << 64) - 1
STREAM_BITS = 40  # element indices below 2**40 per stream (streams below 2**23)

Draws = list[tuple[int, tuple[int, ...]]]  # (stream, shape) per tensor


def _int64(x: int) -> int:
    """The int64 with the bits of the uint64 ``x mod 2**64``."""
    x &= _MASK
    return x - (1 << 64) if x >> 63 else x


def mix(z: int) -> int:
    """SplitMix64's finalizer on a Python int (uint64 semantics): the reference of ``bits``."""
    z &= _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def _srl(x: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 ``x`` by ``0 < s < 64``."""
    return (x >> s).bitwise_and_((1 << (64 - s)) - 1)


def _hash(seed: int, counter: torch.Tensor) -> torch.Tensor:
    """SplitMix64's output for each int64 ``counter`` (``bits`` with the stream folded in)."""
    x = counter * _int64(GAMMA)
    x += _int64(mix(seed) + GAMMA)  # the state mix(seed) + (counter + 1) * GAMMA
    x ^= _srl(x, 30)
    x *= _int64(_M1)
    x ^= _srl(x, 27)
    x *= _int64(_M2)
    x ^= _srl(x, 31)
    return x


def bits(seed: int, stream: int, index: torch.Tensor) -> torch.Tensor:
    """64 random bits (int64) per element of ``index`` (integers in [0, 2**40)), on its device."""
    return _hash(seed, index.to(torch.int64) + (stream << STREAM_BITS))


def _uniforms(seed: int, segments: list[tuple[int, int, int]], device: torch.device) -> torch.Tensor:
    """float64 uniforms in [0, 1), multiples of 2**-53, of elements start .. start + n - 1 of each
    (stream, start, n) in ``segments``, concatenated."""
    counter = torch.cat([torch.arange((s << STREAM_BITS) + a, (s << STREAM_BITS) + a + n, device=device)
                         for s, a, n in segments])
    return _srl(_hash(seed, counter), 11).to(torch.float64).mul_(2.0**-53)


def uniform(seed: int, draws: Draws, device: torch.device, starts: list[int] | None = None) -> list[torch.Tensor]:
    """A float64 tensor of uniforms in [0, 1) per (stream, shape): element i (row-major) from
    ``bits`` of index ``start + i`` (``starts``: one per draw, default 0)."""
    sizes = [math.prod(shape) for _, shape in draws]
    starts = starts or [0] * len(draws)
    u = _uniforms(seed, [(s, a, n) for (s, _), a, n in zip(draws, starts, sizes)], device)
    return [x.view(shape) for x, (_, shape) in zip(u.split(sizes), draws)]


def normal(seed: int, draws: Draws, device: torch.device, starts: list[int] | None = None) -> list[torch.Tensor]:
    """A float64 tensor of standard normals per (stream, shape): elements 2j and 2j + 1 of a stream are
    Box-Muller's cosine and sine of its uniforms 2j and 2j + 1 (element i depends on i alone); a draw
    takes elements ``start + i`` (``starts``: one per draw, default 0)."""
    sizes = [math.prod(shape) for _, shape in draws]
    starts = starts or [0] * len(draws)
    lead = [a % 2 for a in starts]  # a pair starts at an even element: draw from there, drop the lead
    spans = [m + m % 2 for m in (n + p for n, p in zip(sizes, lead))]
    u = _uniforms(seed, [(s, a - p, m) for (s, _), a, p, m in zip(draws, starts, lead, spans)], device).view(-1, 2)
    r = u[:, 0].neg().log1p_().mul_(-2.0).sqrt_()  # 1 - u in (0, 1]: r finite, at most 8.6
    theta = u[:, 1].mul_(2 * math.pi)
    z = torch.stack((torch.cos(theta).mul_(r), torch.sin(theta).mul_(r)), 1).view(-1)
    return [x[p:p + n].view(shape) for x, p, n, (_, shape) in zip(z.split(spans), lead, sizes, draws)]
