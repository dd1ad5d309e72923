"""The project's own exceptions, for callers that need to catch them."""

from __future__ import annotations


class WyAscendError(Exception):
    """Base class of every error raised on purpose by wy_ascend."""


class BackendUnavailableError(WyAscendError, RuntimeError):
    """Raised when a backend asked for by name cannot run here (missing torch_npu,
    no CUDA device, no Triton). The message names the reason, the backends that run here and
    what the missing one needs (``python install.py cpu|cuda|npu`` in a checkout).
    ``backend`` names the backend that cannot run (None where one message covers several)."""

    def __init__(self, message: str, backend: str | None = None) -> None:
        super().__init__(message)
        self.backend = backend


class RegressionFileError(WyAscendError, ValueError):
    """Raised when a regression file cannot be read back: malformed JSON, a missing or
    mistyped field, or an unknown schema version. The message names the file and the
    field; fix or regenerate the file (never edit a stored case to make it pass)."""


class SubjectUnavailableError(WyAscendError, LookupError):
    """A stored case's subject cannot be loaded here (its package is not installed, or its import path
    does not import): the message says how the file loaded it and how to install it. Not a malformed file."""
