"""Named benchmark shapes (issue targets) and the bytes each op must move."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from wy_ascend import build_A

H200_HBM_PEAK = 4.8e12  # bytes/s, NVIDIA's H200 SXM specification


@dataclass(frozen=True)
class Shape:
    """One benchmark problem: fixed B x T or ``n_seqs`` random-length sequences packed in T."""

    name: str
    B: int
    T: int
    H: int
    HV: int
    K: int
    V: int
    BT: int = 64
    n_seqs: int | None = None

    def inputs(self, device: str, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> dict:
        """Realistic inputs on ``device`` (L2-normalized keys, beta in (0,1), chunk-local log2 gates)."""
        gen = torch.Generator(device=device).manual_seed(seed)
        B, T, H, HV, K, V, BT = self.B, self.T, self.H, self.HV, self.K, self.V, self.BT
        cu = self.cu_seqlens(seed)
        cu = None if cu is None else cu.to(device)
        k = torch.nn.functional.normalize(torch.randn(B, T, H, K, device=device, generator=gen), dim=-1)
        v = torch.randn(B, T, HV, V, device=device, generator=gen)
        beta = torch.rand(B, T, HV, device=device, generator=gen)
        steps = torch.log2(torch.sigmoid(torch.randn(B, T, HV, device=device, generator=gen) + 2))
        # chunk-local cumulative gate: cumsum, minus the cumsum at each chunk's first token
        pos = torch.arange(T, device=device)
        starts = pos - pos % BT if cu is None else _chunk_starts(cu, T, BT)
        c = steps.cumsum(1)
        g = c - c[:, starts] + steps[:, starts]
        A = build_A(k, beta, g, cu, chunk_size=BT, dtype=dtype)
        dw, du = torch.randn(B, T, HV, K, device=device, generator=gen), torch.randn(B, T, HV, V, device=device,
                                                                                     generator=gen)
        cast = {n: x.to(dtype) for n, x in dict(k=k, v=v, beta=beta, A=A, dw=dw, du=du).items()}
        return dict(**cast, g=g.float(), cu_seqlens=cu)

    def cu_seqlens(self, seed: int = 0) -> torch.Tensor | None:
        """The packed sequences' boundaries (on the host; drawn from ``seed``), None when fixed-length."""
        if not self.n_seqs:
            return None
        cuts = torch.randperm(self.T - 1, generator=torch.Generator().manual_seed(seed))[: self.n_seqs - 1] + 1
        return torch.cat([torch.tensor([0]), cuts.sort().values, torch.tensor([self.T])])

    def chunks(self, seed: int = 0) -> int:
        """(chunk, batch) pairs the kernels run per value head: B * ceil(T / BT), or per sequence when packed."""
        cu = self.cu_seqlens(seed)
        if cu is None:
            return self.B * -(-self.T // self.BT)
        return int(sum(-(-int(n) // self.BT) for n in cu.diff()))

    def flops_fwd(self) -> int:
        """Matrix-product FLOPs of the forward: w = A (k*beta*exp2(g)) and u = A (v*beta) per chunk and value
        head, in full BT x BT tiles (what the kernels compute; a short last chunk is padded)."""
        return 2 * self.BT * self.BT * (self.K + self.V) * self.chunks() * self.HV

    def flops_bwd(self) -> int:
        """Matrix-product FLOPs of the backward's fewest products per chunk and value head: dA's two
        (dw (k*beta*eg)^T, du (v*beta)^T), A^T dw and A^T du, k k^T, the two BT x BT x BT products of
        dM = A^T dA A^T and the symmetric dL term times k: 2 BT^2 (4K + 2V + 2BT)."""
        return 2 * self.BT * self.BT * (4 * self.K + 2 * self.V + 2 * self.BT) * self.chunks() * self.HV

    def bytes_fwd(self, itemsize: int = 2, gate_itemsize: int = 4) -> int:
        """Compulsory traffic of the forward: read k, v, beta, g, A; write w, u."""
        n = self.B * self.T
        return n * (itemsize * (self.H * self.K + 2 * self.HV * self.V + self.HV * self.BT + self.HV * self.K
                                + self.HV) + gate_itemsize * self.HV)

    def bytes_bwd(self, itemsize: int = 2, gate_itemsize: int = 4) -> int:
        """Compulsory traffic of the backward: read k, v, beta, g, A, dw, du; write dk, dv, dbeta, dg."""
        n = self.B * self.T
        reads = itemsize * (self.H * self.K + self.HV * self.V + self.HV + self.HV * self.BT + self.HV * self.K
                            + self.HV * self.V) + gate_itemsize * self.HV
        writes = itemsize * (self.H * self.K + self.HV * self.V + self.HV) + gate_itemsize * self.HV
        return n * (reads + writes)


def _chunk_starts(cu: torch.Tensor, T: int, BT: int) -> torch.Tensor:
    """Token index of the first token of each token's chunk, chunks restarting at sequence starts."""
    pos = torch.arange(T, device=cu.device)
    seq_start = cu[torch.searchsorted(cu, pos, right=True) - 1]
    return seq_start + (pos - seq_start) // BT * BT


SHAPES = {
    s.name: s
    for s in (
        Shape("fixed_B8_T4096_H16_K128", B=8, T=4096, H=16, HV=16, K=128, V=128),
        Shape("varlen_T32768_N16_H16_K128", B=1, T=32768, H=16, HV=16, K=128, V=128, n_seqs=16),
        Shape("grouped_B8_T4096_H8_HV32_K128", B=8, T=4096, H=8, HV=32, K=128, V=128),
        Shape("wide_B4_T8192_H16_K256", B=4, T=8192, H=16, HV=16, K=256, V=256),
    )
}


# Issue 13's no-cliff grid: every K and V width (and K != V), head ratios 1 and 4 (2 on two
# widths), a fixed batch at large T and a packed batch of short sequences. bf16 with gate.
GRID_DIMS = [(d, d) for d in (16, 32, 48, 64, 80, 128, 192, 256)] + [
    (128, 256), (256, 128), (64, 32), (48, 80), (192, 48), (16, 256)]
GRID = {
    s.name: s
    for s in (
        *(Shape(f"fixed_B4_T4096_H4_K{k}_V{v}", B=4, T=4096, H=4, HV=4, K=k, V=v) for k, v in GRID_DIMS),
        *(Shape(f"varlen_T2048_N8_H2_HV8_K{k}_V{v}", B=1, T=2048, H=2, HV=8, K=k, V=v, n_seqs=8) for k, v in GRID_DIMS),
        *(Shape(f"grouped_B2_T2048_H4_HV8_K{d}", B=2, T=2048, H=4, HV=8, K=d, V=d) for d in (64, 128)),
    )
}
GRID_RATIO = 1.5  # ours <= 1.5x fla-core's time on every grid shape (issue 13)
