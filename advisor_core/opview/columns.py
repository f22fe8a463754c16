"""The kernel-table columns the op view is built from (no pandas here: read-ahead decides with it before importing it)."""

from __future__ import annotations

from typing import Iterable

# Columns that tell one op from another (whichever the file has).
SIGNATURE_COLUMNS: tuple[str, ...] = (
    "name",
    "type",
    "accelerator_core",
    "stream_id",
    "input_shapes",
    "input_dtypes",
    "input_formats",
    "output_shapes",
    "output_dtypes",
    "output_formats",
)
TIMELINE_COLUMNS: tuple[str, ...] = ("start_ns", "duration_us", "step_id")


def op_view_columns(available: Iterable[str]) -> list[str]:
    """The columns the op view reads from a kernel table that has ``available``, in the order it asks for them."""
    have = set(available)
    return [c for c in (*SIGNATURE_COLUMNS, *TIMELINE_COLUMNS) if c in have]
