"""Kernel specializations: what one compile of an entry kernel is keyed on.

Triton compiles an entry kernel once per distinct set of constexpr values, pointer dtypes and
classes of its specialized integer arguments. In kernels.py the constexprs are the heads (H, HV),
the tiles (BT, BK, BV), the tile-loop trip counts (NK, NV: constant trip counts keep the loops'
compiled structure), K and V themselves where they fill their tiles or where the backend keeps
dims compile-time (K_CONST, V_CONST: ``Backend.runtime_dims``, off on the compiling backends) and
the feature flags. T and the launch offsets are runtime integers that never specialize
(``do_not_specialize``); K and V are runtime integers that Triton specializes by class
(``int_class``: divisible by 16, equal to 1, other), which keeps the alignment facts its
vectorizer needs. So a ``Specialization`` covers every problem with the same heads, tiles, trip
counts, K_CONST/V_CONST, flags, dtypes and K/V classes, whatever its lengths (and, with runtime
dims, its exact K and V within them).

ops.py labels each call with its specialization (``_Call.specialization``), the lowering gate
enumerates them (lowering.py), and the device fuzz pool draws from that enumeration
(fuzz/pool.py), so the three agree by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .backends import Backend, LaunchConfig
from .planning import LaunchPlan


def int_class(x: int) -> str:
    """Triton's specialization of an integer argument: "1" (the value 1), "D" (a multiple of
    16: alignment known to the compiler) or "N" (neither)."""
    if x % 16 == 0:
        return "D"
    return "1" if x == 1 else "N"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def dtype_name(dtype: torch.dtype | None) -> str | None:
    """"float32", "bfloat16", ... for a torch dtype (None stays None)."""
    return None if dtype is None else str(dtype).removeprefix("torch.")


@dataclass(frozen=True, order=True)
class Specialization:
    """One compiled entry kernel: every constexpr, the pointer dtypes and the K/V classes."""

    backend: str
    kernel: str
    H: int
    HV: int
    BT: int
    BK: int
    BV: int
    NK: int
    NV: int
    K_class: str
    V_class: str
    K_CONST: int  # K as a compile-time value (kernels.py), 0: runtime
    V_CONST: int
    USE_G: bool
    IS_VARLEN: bool
    GATE_HEAD_MAJOR: bool
    LOWP_DOT: bool
    DOT_GUARD: bool
    PERSISTENT: bool
    GROUP_DK: bool
    dtype: str
    gate_dtype: str  # beta's and dbeta's
    g_dtype: str | None  # g's and dg's; None without USE_G
    index_dtype: str | None  # cu_seqlens; None without IS_VARLEN

    @property
    def label(self) -> str:
        """A stable one-line name (report keys, nightly summaries)."""
        flags = "".join(str(int(f)) for f in (self.USE_G, self.IS_VARLEN, self.GATE_HEAD_MAJOR, self.LOWP_DOT,
                                               self.DOT_GUARD, self.PERSISTENT, self.GROUP_DK))
        k = self.K_CONST or self.K_class
        v = self.V_CONST or self.V_class
        return (f"{self.backend}:{self.kernel} H={self.H} HV={self.HV} BT={self.BT} BK={self.BK}x{self.NK} "
                f"BV={self.BV}x{self.NV} K:{k} V:{v} flags={flags} {self.dtype}/{self.gate_dtype}/{self.g_dtype or '-'}/"
                f"{self.index_dtype or '-'}")


def const_dim(x: int, tile: int, always: bool) -> int:
    """The K_CONST (V_CONST) of dim ``x``: ``x`` where it fills its tiles or where dims are
    compile-time (``always``), else 0 (runtime)."""
    return x if always or x % tile == 0 else 0


def of_launch(backend: Backend, config: LaunchConfig, plan: LaunchPlan, *, BT: int, K: int, V: int, H: int, HV: int,
              dtype: torch.dtype, gate_dtype: torch.dtype, g_dtype: torch.dtype | None, index_dtype: torch.dtype | None,
              use_g: bool, varlen: bool, group_dk: bool) -> Specialization:
    """The specialization ops.py launches for this plan and problem (the same rules as its launch;
    ``group_dk``: Backend.groups_dk's choice, which depends on the problem's size)."""
    dot_guard, head_major, _ = backend.variant(config)
    runtime = backend.runtime_dims(config)
    return Specialization(
        backend=backend.name, kernel=plan.kernel, H=H, HV=HV, BT=BT, BK=plan.BK, BV=plan.BV,
        NK=cdiv(K, plan.BK), NV=cdiv(V, plan.BV), K_class=int_class(K), V_class=int_class(V),
        K_CONST=const_dim(K, plan.BK, not runtime), V_CONST=const_dim(V, plan.BV, not runtime),
        USE_G=use_g, IS_VARLEN=varlen,
        # head-major beta/g only with several value heads (ops.py: with HV == 1 the layouts agree)
        GATE_HEAD_MAJOR=head_major and HV > 1,
        LOWP_DOT=backend.lowp_dot(dtype, K, V, plan.BK, plan.BV, config), DOT_GUARD=dot_guard,
        PERSISTENT=plan.mode == "persistent", GROUP_DK=plan.kernel == "bwd" and group_dk,
        dtype=dtype_name(dtype) or "", gate_dtype=dtype_name(gate_dtype) or "",
        g_dtype=dtype_name(g_dtype) if use_g else None,
        index_dtype=dtype_name(index_dtype) if varlen else None,
    )
