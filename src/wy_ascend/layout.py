"""Chunk layout of a batch: which (sequence, chunk) pairs exist for a chunk size BT."""

from __future__ import annotations

import torch


def prepare_chunk_indices(cu_seqlens: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """[NT, 2] int64 (sequence index, chunk index within the sequence) for every chunk of a
    varlen batch, in order; an empty sequence contributes no chunk (flash-linear-attention's
    convention, so an existing caller's ``chunk_indices`` can be passed through)."""
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).to(torch.int64)
    counts = (lens + chunk_size - 1) // chunk_size
    seq = torch.repeat_interleave(torch.arange(len(counts), device=cu_seqlens.device), counts)
    starts = torch.cumsum(counts, 0) - counts
    chunk = torch.arange(int(counts.sum()), device=cu_seqlens.device) - torch.repeat_interleave(starts, counts)
    return torch.stack([seq, chunk], 1).to(torch.int64)
