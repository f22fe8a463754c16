"""RC001's measure for ``advisor compare``: the forward kernel time of the ops the finding wants recomputed.

The finding's locations name the ops configured for recomputation that are not
recomputed; their cells (decoder-layer index folded) and primitives select the op view's
forward kernels of those ops on the run measured — the recomputed copies included
(``recompute_`` scopes, or a second op of the cell), so a fix that makes the setting
effective shows as the copies' time added (a negative change, as the estimate). Per
pipeline stage, combined as the estimate is (1F1B). Peak memory is compared by
``advisor compare`` itself (``memory_record.csv``).
"""

from __future__ import annotations

from typing import Any

from advisor_core.engine import Finding, Measure, RuleContext
from advisor_rules._common import finding_ops, folded_cells, in_cells, primitive_of, selected_time, stage_measure


def recompute_measure(ctx: RuleContext, finding: Finding) -> Measure | None:
    """Forward µs per step of the finding's ops (recomputed copies included) on ``ctx``'s run."""
    names = finding_ops(finding)
    cells = folded_cells(names)
    prims = {primitive_of(n) for n in names} - {""}
    if not cells or not prims:
        return None

    def per_stage(_stage: int, _rank: Any, view: Any) -> float:
        ops = view.ops
        mask = in_cells(ops, cells) & ops["primitive"].astype(str).isin(prims) & ~ops["backward"].astype(bool)
        return selected_time(view, mask)

    value = stage_measure(ctx, per_stage)
    return None if value is None else Measure("forward kernels of the ops to recompute (copies included), per step", value)
