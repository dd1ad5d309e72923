"""Input validation: every rule raises a ValueError/TypeError naming the argument, its
value and what is allowed, before any kernel launches. The result is a ``Problem``,
the shape of the work that planning and the backends consume.

Each rule says its invalid region (every value it refuses) beside it; the bad_input property
(wy_ascend.testing.properties.bad_input, the corruption named there) draws its violation from
the whole region, not from one point of it."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from .layout import prepare_chunk_indices

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
SUPPORTED_BT = (16, 32, 64, 128)
# K and V are tiled in powers of two with masks, so any size works; the cap keeps the
# tiles planned for one chunk within what the kernels hold on chip (the UB model and
# the CUDA register budget were sized for dims up to 256).
MAX_DIM = 256


@dataclass(frozen=True)
class Problem:
    """The shape of one op call: sizes, chunking, flags and dtype."""

    B: int
    T: int
    H: int
    HV: int
    K: int
    V: int
    BT: int
    NT: int
    varlen: bool
    use_g: bool
    dtype: torch.dtype
    device: torch.device
    # varlen only: [NT, 2] int64 (sequence, chunk) on the device, built once from one
    # host read of cu_seqlens (or the caller's checked chunk_indices).
    chunk_indices: torch.Tensor | None = field(default=None, compare=False, repr=False)


def _tensor(name: str, x: object) -> torch.Tensor:
    """Region: any object but a tensor (lists, arrays, scalars, strings; None where the argument is
    required): ``<name>_not_tensor``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _ndim(name: str, x: torch.Tensor, ndim: int, layout: str) -> None:
    """Region: any other number of dims, 0 up (``<name>_wrong_ndim``, ``cu_wrong_ndim``)."""
    if x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D {layout}, got shape {tuple(x.shape)}")


def _shape(name: str, x: torch.Tensor, expected: tuple[int, ...], layout: str) -> None:
    """Region: any other shape, any sizes of any number of dims (beta and A reach it with their dims
    right, the rest of the shape wrong): ``<name>_wrong_shape``."""
    if tuple(x.shape) != expected:
        raise ValueError(f"{name} must have shape {layout} = {expected}, got {tuple(x.shape)}")


def _float_dtype(name: str, x: torch.Tensor) -> None:
    """Region: every dtype outside SUPPORTED_DTYPES: integers and bool (``<name>_int_dtype``), float64,
    complex and float8 (``<name>_float_dtype``)."""
    if x.dtype not in SUPPORTED_DTYPES:
        allowed = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise TypeError(f"{name} must have dtype in ({allowed}), got {x.dtype}")


def _same_dtype(name: str, x: torch.Tensor, ref: torch.dtype) -> None:
    """Region: every dtype but k's, the supported ones included (``<name>_int_dtype``, ``<name>_float_dtype``)."""
    if x.dtype != ref:
        raise TypeError(f"{name} must have the dtype of k ({ref}), got {x.dtype}")


def check_dim(name: str, value: int) -> None:
    """K or V: in [1, MAX_DIM] (the ops' rule, shared with reference.build_A). Region: 0 and every size
    past MAX_DIM (``k_dim_out_of_range``, ``v_dim_out_of_range``)."""
    if not 1 <= value <= MAX_DIM:
        raise ValueError(f"{name} must be in [1, {MAX_DIM}], got {value}")


def check_chunk_size(name: str, value: int) -> None:
    """The chunk size BT: one of SUPPORTED_BT (the ops' rule, shared with reference.build_A). Region: every
    other size, 0 up, powers of two and multiples of 16 included (``bt_unsupported``)."""
    if value not in SUPPORTED_BT:
        raise ValueError(f"{name} must be one of {SUPPORTED_BT}, got {value}")


def _check_cu_seqlens(cu_seqlens: object, B: int, T: int) -> torch.Tensor:
    """Check cu_seqlens with one host read; returns it as a CPU int64 tensor. Regions, in the order checked:
    any dims but 1 (``cu_wrong_ndim``); any dtype but int32/int64 (``cu_wrong_dtype``); 0 or 1 entries
    (``cu_too_short``); any B > 1 (``cu_with_batch_2``); any first entry but 0 (``cu_not_starting_at_0``);
    any entry below the one before it, by any amount (``cu_decreasing``); any last entry but T in a
    non-decreasing cu_seqlens (``cu_not_ending_at_T``)."""
    cu = _tensor("cu_seqlens", cu_seqlens)
    if cu.ndim != 1:
        raise ValueError(f"cu_seqlens must be 1-D [N+1], got shape {tuple(cu.shape)}")
    if cu.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"cu_seqlens must have an integer dtype (torch.int32 or torch.int64), got {cu.dtype}")
    if cu.numel() < 2:
        raise ValueError(f"cu_seqlens must hold at least 2 entries [0, ..., T], got {cu.numel()}")
    if B != 1:
        raise ValueError(f"with cu_seqlens the batch must be packed into B == 1, got B={B}")
    host = cu.tolist()
    if host[0] != 0:
        raise ValueError(f"cu_seqlens must start at 0, got cu_seqlens[0]={host[0]}")
    for i in range(1, len(host)):
        if host[i] < host[i - 1]:
            raise ValueError(
                f"cu_seqlens must be non-decreasing, got cu_seqlens[{i - 1}]={host[i - 1]} > cu_seqlens[{i}]={host[i]}"
            )
    if host[-1] != T:
        raise ValueError(f"cu_seqlens must end at T={T}, got cu_seqlens[-1]={host[-1]}")
    return torch.tensor(host, dtype=torch.int64)


_VARLEN_CACHE: OrderedDict[tuple[int, int, int, int], tuple[torch.Tensor, int, torch.Tensor, torch.Tensor]] = (
    OrderedDict()
)
_VARLEN_CACHE_SIZE = 8


def _varlen_chunks(cu_seqlens: torch.Tensor, B: int, T: int, BT: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Checked chunk indices of ``cu_seqlens`` (host copy, device copy).

    Reading cu_seqlens costs a device-to-host sync, so the result is remembered for the
    last few cu_seqlens tensors (a model passes the same one to every layer). A hit needs
    the same tensor object at the same version counter (no in-place change since), and
    the cache holds the tensor itself so its memory cannot be reused by another one.
    """
    key = (id(cu_seqlens), B, T, BT)
    hit = _VARLEN_CACHE.get(key)
    if hit is not None and hit[0] is cu_seqlens and hit[1] == cu_seqlens._version:
        _VARLEN_CACHE.move_to_end(key)
        return hit[2], hit[3]
    expected = prepare_chunk_indices(_check_cu_seqlens(cu_seqlens, B, T), BT)
    on_device = expected.to(cu_seqlens.device)
    _VARLEN_CACHE[key] = (cu_seqlens, cu_seqlens._version, expected, on_device)
    if len(_VARLEN_CACHE) > _VARLEN_CACHE_SIZE:
        _VARLEN_CACHE.popitem(last=False)
    return expected, on_device


def _check_chunk_indices(chunk_indices: object, expected: torch.Tensor, BT: int, device: torch.device) -> torch.Tensor:
    """The caller's chunk_indices, checked against the ones cu_seqlens implies (on the host). Regions: any dtype
    but int32/int64 (``chunk_indices_float_dtype``); any other device (``chunk_indices_other_device``); any
    other shape or any entry off by any amount (``chunk_indices_wrong``)."""
    ci = _tensor("chunk_indices", chunk_indices)
    if ci.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"chunk_indices must have an integer dtype, got {ci.dtype}")
    if ci.device != device:
        raise ValueError(f"chunk_indices must be on k's device {device}, got {ci.device}")
    if tuple(ci.shape) != tuple(expected.shape) or not torch.equal(ci.to(torch.int64).cpu(), expected):
        raise ValueError(
            f"chunk_indices must equal prepare_chunk_indices(cu_seqlens, {BT}) "
            f"(shape {tuple(expected.shape)}), got a tensor of shape {tuple(ci.shape)} with other entries"
        )
    return ci.to(torch.int64).contiguous()


def validate(
    k: object,
    v: object,
    beta: object,
    A: object,
    g: object = None,
    cu_seqlens: object = None,
    chunk_indices: object = None,
    dw: object = None,
    du: object = None,
) -> Problem:
    """Check the inputs of either op (dw/du for the backward) and describe the problem.

    Regions of the rules checked here: v's [B, T] any pair but k's (``v_wrong_T``, ``v_wrong_B``); the key
    heads H = 0 or any H that does not divide HV (``hv_not_multiple``); exactly one of dw and du given
    (``dw_du_not_together``); any tensor on a device but k's (``<name>_other_device``); chunk_indices of
    any kind with no cu_seqlens (``chunk_indices_without_cu``)."""
    k, v, beta, A = (_tensor(n, x) for n, x in (("k", k), ("v", v), ("beta", beta), ("A", A)))
    _ndim("k", k, 4, "[B, T, H, K]")
    _ndim("v", v, 4, "[B, T, HV, V]")
    _ndim("beta", beta, 3, "[B, T, HV]")
    _ndim("A", A, 4, "[B, T, HV, BT]")
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    BT = A.shape[3]
    if tuple(v.shape[:2]) != (B, T):
        raise ValueError(f"v must share k's [B, T] = {(B, T)}, got {tuple(v.shape[:2])}")
    if H < 1 or HV % H != 0:
        raise ValueError(f"the value heads HV={HV} (v.shape[2]) must be a positive multiple of the key heads H={H}")
    check_dim("K (k.shape[3])", K)
    check_dim("V (v.shape[3])", V)
    check_chunk_size("the chunk size BT = A.shape[-1]", BT)
    _shape("beta", beta, (B, T, HV), "[B, T, HV]")
    _shape("A", A, (B, T, HV, BT), "[B, T, HV, BT]")
    _float_dtype("k", k)
    for name, x in (("v", v), ("A", A)):
        _same_dtype(name, x, k.dtype)
    _float_dtype("beta", beta)
    tensors = {"k": k, "v": v, "beta": beta, "A": A}
    if g is not None:
        g = _tensor("g", g)
        _shape("g", g, (B, T, HV), "[B, T, HV]")
        _float_dtype("g", g)
        tensors["g"] = g
    if (dw is None) != (du is None):
        raise ValueError("dw and du must be given together")
    if dw is not None:
        dw, du = _tensor("dw", dw), _tensor("du", du)
        _shape("dw", dw, (B, T, HV, K), "[B, T, HV, K]")
        _shape("du", du, (B, T, HV, V), "[B, T, HV, V]")
        _same_dtype("dw", dw, k.dtype)
        _same_dtype("du", du, k.dtype)
        tensors.update(dw=dw, du=du)
    if cu_seqlens is not None:
        _tensor("cu_seqlens", cu_seqlens)
        tensors["cu_seqlens"] = cu_seqlens  # type: ignore[assignment]
    elif chunk_indices is not None:
        raise ValueError("chunk_indices was given without cu_seqlens; it only describes varlen batches")
    for name, x in tensors.items():
        if x.device != k.device:
            raise ValueError(f"{name} must be on k's device {k.device}, got {x.device}")
    ci = None
    if cu_seqlens is not None:
        expected, on_device = _varlen_chunks(cu_seqlens, B, T, BT)  # type: ignore[arg-type]
        if chunk_indices is not None:
            ci = _check_chunk_indices(chunk_indices, expected, BT, k.device)
        else:
            ci = on_device
        NT = int(expected.shape[0])
    else:
        NT = -(-T // BT)
    return Problem(B, T, H, HV, K, V, BT, NT, cu_seqlens is not None, g is not None, k.dtype, k.device, ci)
