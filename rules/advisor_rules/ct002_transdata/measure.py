"""CT002's measure for ``advisor compare``: the TransData kernel time of the finding's group, as step time.

The run measured is searched for its groups exactly as ``check`` does (backend IR, else
the kernel order); the finding's group is the one holding the TransData its locations
name (decoder-layer index folded) — for weight conversions, the weights' group. Its
TransData kernels are summed per step on one rank per pipeline stage and combined as the
estimate is (1F1B). A group the run no longer has measures 0.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from advisor_core.engine import Finding, Measure, RuleContext
from advisor_core.opview.names import kernel_scope
from advisor_rules._common import one_f_one_b_step_saving, pipeline_micro_batches, stage_evidence
from advisor_rules._common import finding_ops, fold_layer, primitive_of
from advisor_rules.ct002_transdata.estimate import group_cost
from advisor_rules.ct002_transdata.from_ir import from_ir
from advisor_rules.ct002_transdata.groups import TRANS_OPS, Group

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.ct002_transdata.rule import TransDataExcess


def _folded(names: list[str]) -> set[str]:
    return {fold_layer(kernel_scope(n) or n) for n in names if n}


def _names(g: Group) -> set[str]:
    return _folded([n.kernel_full_name or n.scope or "" for n in g.trans] + list(g.kernel_names))


def transdata_measure(rule: TransDataExcess, ctx: RuleContext, finding: Finding) -> Measure | None:
    """TransData µs per step of the finding's group on ``ctx``'s run (``None`` without a profile)."""
    if ctx.run is None or not list(ctx.run):
        return None
    weights = any(e.name == "weights" for e in finding.evidence)
    wanted = _folded([n for n in finding_ops(finding) if primitive_of(n) in TRANS_OPS])
    if not weights and not wanted:
        return None
    units = stage_evidence(ctx)
    cost: dict[int, float] = {}
    for unit in units:
        if unit.rank is None:
            continue
        ir = ctx.ir_graph("backend", unit.dumps) if unit.dumps is not None else None
        found = from_ir(ir) if ir is not None else copy.deepcopy((ctx.rank_evidence(unit.rank) or {}).get("groups") or {})
        cost[unit.stage] = 0.0
        for g in found.values():
            if (g.kind == "param") if weights else bool(_names(g) & wanted):
                group_cost(g, unit, rule.options.hbm_gbps, rule.options.launch_us)
                cost[unit.stage] += g.cost.get(unit.stage, 0.0)
    if not cost:
        return None
    busy = {u.stage: u.busy_us or 0.0 for u in units}
    value = one_f_one_b_step_saving(cost, busy, pipeline_micro_batches(ctx, units)) if len(cost) > 1 else sum(cost.values())
    return Measure("TransData kernels of the finding's group, per step", value)
