"""natural_gate_wy: a forward-only WY step (``wy_forward``) in conventions of its own, and its declaration
for wy_ascend's fuzz suite (``subject.SUBJECT``)."""

from .kernel import prepare_chunks, wy_forward

__all__ = ["prepare_chunks", "wy_forward"]
