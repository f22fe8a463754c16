"""CM001's measure of a redistribution finding for ``advisor compare``: the chain's kernel time, as step time.

The run measured is searched for redistribution chains as ``check`` does (each profiled
stage's parallel IR, else the first and last IR rank's); the finding's chain is the one
whose consumer is the op the finding names (decoder-layer index folded). Its kernels —
the redistribution ops and the share of the consumer's work on the gathered axis — are
summed per step on one rank per pipeline stage (:func:`~advisor_rules.cm001_comm.estimate.chain_cost`)
and combined as the estimate is (1F1B). A chain the run no longer has measures 0;
without a parallel IR nothing is measured.
"""

from __future__ import annotations

from typing import Any

from advisor_core.engine import Finding, Measure, RuleContext
from advisor_rules._common import finding_ops, fold_layer, stage_representatives, stages_step_time
from advisor_rules.cm001_comm.chains import find_chains
from advisor_rules.cm001_comm.estimate import chain_cost


def redistribution_measure(ctx: RuleContext, finding: Finding) -> Measure | None:
    """µs per step of the finding's redistribution chain on ``ctx``'s run (``None`` without IR or profile)."""
    consumer = {fold_layer(n) for n in finding_ops(finding, note="consumer: in_strategy disagrees")}
    if ctx.run is None or not consumer:
        return None
    cfg = ctx.config
    reps = stage_representatives(ctx.run, cfg.pipeline_stages if cfg is not None else 1,
                                 cfg.device_count if cfg is not None else None)
    by_rank = {rd.rank: rd for rd in ctx.ir_ranks()}
    irs = [ir for ir in (ctx.ir_graph("parallel", rd) or ctx.ir_graph("frontend", rd) for rd in ctx.ir_ranks())
           if ir is not None]
    if not irs:
        return None
    costs: dict[int, tuple[Any, float]] = {}  # stage → (its rank, the chain's kernel µs per step)
    for stage, rank in reps:
        view = rank.op_view()
        if view is None:
            continue
        rd = by_rank.get(rank.rank_id)
        own = (ctx.ir_graph("parallel", rd) or ctx.ir_graph("frontend", rd)) if rd is not None else None
        costs[stage] = (rank, 0.0)
        for ir in ([own] if own is not None else irs):
            chains, others = find_chains(ir)
            match = [c for c in chains.values() if c.consumer is not None
                     and fold_layer(c.consumer.scope or "") in consumer]
            if match:
                costs[stage] = (rank, sum(chain_cost(view, c, others)[0] for c in match))
                break
    value = stages_step_time(ctx, costs)
    return None if value is None else Measure("redistribution kernels of the finding's chain, per step", value)
