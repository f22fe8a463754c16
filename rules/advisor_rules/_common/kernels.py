"""A rank's kernels through its op view: time and launches per IR full name, the per-launch fixed cost.

Name parsing (``kernel_scope``, ``kernel_cell``) lives in :mod:`advisor_core.opview.names`
and is re-exported here; nothing in the rules reads kernel rows.
"""

from __future__ import annotations

from typing import Any

from advisor_core.opview import COMM_CORE_NAMES, kernel_cell, kernel_scope

__all__ = ["COMM_CORE_NAMES", "kernel_cell", "kernel_fixed_cost_us", "kernel_launches_by_scope", "kernel_scope",
           "kernel_time_by_scope"]


def kernel_time_by_scope(rank: Any) -> tuple[dict[str, float], int]:
    """Total kernel µs per IR full name over the profile, and the number of steps it covers.

    Computed once per rank (several rules' checks ask for it); treat the mapping as read-only.
    """
    return rank.cached("kernel_time_by_scope", lambda: _kernel_time_by_scope(rank))


def _kernel_time_by_scope(rank: Any) -> tuple[dict[str, float], int]:
    view = rank.op_view()
    if view is None or view.ops.empty:
        return {}, 1
    return view.time_by_scope(), view.steps


def kernel_launches_by_scope(rank: Any) -> dict[str, int]:
    """Number of kernel launches per IR full name over the profile (pairs with :func:`kernel_time_by_scope`).

    Computed once per rank; treat the mapping as read-only.
    """
    def launches() -> dict[str, int]:
        view = rank.op_view()
        return {} if view is None else view.launches_by_scope()

    return rank.cached("kernel_launches_by_scope", launches)


def kernel_fixed_cost_us(rank: Any) -> float:
    """Per-launch fixed cost of a device kernel (µs): the shortest compute kernel of the profile (0 without kernels)."""
    view = rank.op_view()
    return 0.0 if view is None else view.fixed_cost_us()
