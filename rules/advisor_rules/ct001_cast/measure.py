"""CT001's measure for ``advisor compare``: the Cast kernel time of the finding's cells, as step time.

The finding's locations name its Cast nodes; their cells (decoder-layer index folded, so
every layer counts) select the op view's Cast kernels on the run measured, forward and
backward. For a pair a config key forces (``rotary_dtype``), the ops between the casts run
on 32-bit data and shrink with the fix too: every kernel of those cells is measured. Per
pipeline stage, combined as the estimate is (1F1B).
"""

from __future__ import annotations

from typing import Any

from advisor_core.engine import Finding, Measure, RuleContext
from advisor_rules._common import finding_ops, folded_cells, in_cells, selected_time, stage_measure


def cast_measure(ctx: RuleContext, finding: Finding) -> Measure | None:
    """Cast (and, for a config-forced pair, in-between) kernel time per step of the finding's cells on ``ctx``'s run."""
    cells = folded_cells(finding_ops(finding))
    if not cells:
        return None
    forced = any(loc.kind == "config" for loc in finding.locations)

    def per_stage(_stage: int, _rank: Any, view: Any) -> float:
        ops = view.ops
        mask = in_cells(ops, cells) & ~ops["is_comm"].astype(bool)
        if not forced:
            mask &= ops["primitive"].astype(str) == "Cast"
        return selected_time(view, mask)

    value = stage_measure(ctx, per_stage)
    what = "kernels of the cells the casts are in" if forced else "Cast kernels of the finding's cells"
    return None if value is None else Measure(f"{what}, per step", value)
