"""wy_ascend: the WY-representation step of the chunked gated delta rule in Triton
(Ascend NPU via triton-ascend, NVIDIA via upstream Triton, CPU via the interpreter)."""

from .backends import BACKENDS, Backend, LaunchConfig, launch_config, resolve_backend
from .errors import BackendUnavailableError, RegressionFileError, WyAscendError
from .layout import prepare_chunk_indices
from .ops import prepare_wy_repr_bwd, recompute_w_u_fwd
from .planning import UnsupportedProblemError
from .reference import build_A

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendUnavailableError",
    "LaunchConfig",
    "RegressionFileError",
    "UnsupportedProblemError",
    "WyAscendError",
    "build_A",
    "launch_config",
    "prepare_chunk_indices",
    "prepare_wy_repr_bwd",
    "recompute_w_u_fwd",
    "resolve_backend",
]
