"""(A) Redistribution chains → findings: chains per pipeline stage, their cost, the message and the shard() fix."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from advisor_core.engine import Evidence, Finding, Location, Patch, RuleContext, Safety
from advisor_rules._common import (
    cell_path_in_layer,
    data_bound_effect,
    ir_location,
    one_f_one_b_step_saving,
    severity_for_share,
    source_location,
    stage_busy_and_micro,
)
from advisor_rules.cm001_comm.chains import COMM_OPS, Chain, find_chains
from advisor_rules.cm001_comm.estimate import bytes_estimate, chain_cost
from advisor_rules.cm001_comm.strategy import node_name, proposed_strategy, strategy

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.cm001_comm.rule import UnexpectedCommunication


def redistribution_findings(rule: UnexpectedCommunication, ctx: RuleContext,
                            reps: list[tuple[int, Any]], views: dict[int, Any]) -> Iterable[Finding]:
    """One finding per chain costing at least ``min_share_pct`` of the step (see the rule's Time at stake)."""
    by_rank = {rd.rank: rd for rd in ctx.ir_ranks()}
    stage_irs: list[tuple[int | None, Any]] = []
    for s, r in reps:
        rd = by_rank.get(r.rank_id)
        ir = (ctx.ir_graph("parallel", rd) or ctx.ir_graph("frontend", rd)) if rd is not None else None
        if ir is not None:
            stage_irs.append((s, ir))
    if not stage_irs:  # no IR of the profiled ranks: the first and last IR rank (first and last stage)
        irs = ctx.ir_ranks()
        for rd in {id(x): x for x in irs[:1] + irs[-1:]}.values():
            ir = ctx.ir_graph("parallel", rd) or ctx.ir_graph("frontend", rd)
            if ir is not None:
                stage_irs.append((None, ir))
    if not stage_irs:
        ctx.skip("no parallel IR (step_parallel_end_*.ir): redistribution chains are read from the graph")
        return
    loads = {s: stage_busy_and_micro(r) for s, r in reps}
    micro = max([m or 1 for _, m in loads.values()] or [1])
    slowest = max(reps, key=lambda sr: loads[sr[0]][0] or 0.0)[1] if reps else None
    step_us = ctx.step_time_us(slowest) if slowest is not None else None
    parsed = [(s, ir, *find_chains(ir)) for s, ir in stage_irs]
    keys = list(dict.fromkeys(k for _, _, chains, _ in parsed for k in chains))
    for key in keys:
        ch = Chain(key, None, None)
        for s, ir, chains, _others in parsed:
            sc = chains.get(key)
            if sc is None:
                continue
            if ch.consumer is None:
                ch.producer, ch.consumer, ch.gather, ch.concat_axis, ch.ir = sc.producer, sc.consumer, sc.gather, sc.concat_axis, ir
            ch.ops.extend(sc.ops)
            ch.layers |= sc.layers
            ch.count += sc.count
        costs: dict[int, float] = {s: 0.0 for s, _ in reps}
        counted = 0
        for s, _r in reps:
            # the stage's own graph, else another stage's: the same model code inserts the same chain
            own = next(((c[key], o) for st, _, c, o in parsed if st == s and key in c), None)
            sc, others = own or next(((c[key], o) for _, _, c, o in parsed if key in c))
            cost, n = chain_cost(views[s], sc, others)
            counted += n
            costs[s] = cost
        fallback = max(bytes_estimate(ctx, c[key], rule.options.hccs_gbps) for _, _, c, _ in parsed if key in c)
        if counted:
            cost = one_f_one_b_step_saving(costs, {s: loads[s][0] or 0.0 for s in costs}, micro)
            how = f"{counted} kernel(s) per step measured over {len(costs)} pipeline stage(s)"
        else:
            cost = fallback
            how = f"estimated from the gathered bytes at {rule.options.hccs_gbps:.0f} GB/s, forward and backward, per micro batch"
        share = 100.0 * cost / step_us if step_us else None
        if share is not None and share < rule.options.min_share_pct:
            ctx.skip(f"redistribution before {ch.key} costs {share:.2f}% of the step (< {rule.options.min_share_pct}%)")
            continue
        yield redistribution_finding(rule, ctx, ch, ch.ir, cost, how, share, step_us, bool(counted))


def redistribution_finding(rule: UnexpectedCommunication, ctx: RuleContext, ch: Chain, ir: Any, cost: float, how: str,
                           share: float | None, step_us: float | None, measured: bool) -> Finding:
    """The finding for one chain: the ops, the two strategies, the time, and a display-only shard() patch."""
    prod, cons = ch.producer, ch.consumer
    ps, cs = strategy(prod), strategy(cons)
    proposed = proposed_strategy(cs, ch.concat_axis, ch.gather)
    op_path = ".".join((*cell_path_in_layer(cons.scope), cons.instance_name or cons.op)) if cons is not None else ch.key
    comm_nodes = [o for o in ch.ops if o.op in COMM_OPS]
    comm_names = sorted({o.op for o in comm_nodes}) or sorted({o.op for o in ch.ops})
    lay = f" in {len(ch.layers)} layer(s)" if ch.layers else ""
    msg = [
        f"{ch.count} redistribution chain(s){lay}: {' + '.join(sorted({o.op for o in ch.ops}))} "
        f"({', '.join(o.instance_name for o in ch.ops[:3])}{' …' if len(ch.ops) > 3 else ''}) rearrange the tensor between "
        f"{node_name(prod)} (strategy {ps or 'unknown'}) and {node_name(cons)} (in_strategy {cs or 'unknown'}); the backward "
        f"repeats them for the gradient, in every micro batch.",
        f"They block the compute stream for {cost / 1000:.2f} ms per step ({how})"
        + (f", {share:.2f}% of the step" if share is not None else "")
        + (f", including the op itself running on the whole axis gathered from {ch.gather} devices"
           if measured and ch.gather > 1 else "")
        + ".",
        f"Give {node_name(cons)} the layout its producers already have"
        + (f": in_strategy {proposed}" if proposed else "")
        + " (the model-parallel split on the gathered axis, as its neighbours use); the fix is in the model's shard() call, "
          "no config key controls it.",
    ]
    bound = data_bound_effect(ctx, cost)  # blocking the compute stream costs the step only while the device bounds it
    if bound.note:
        msg.append(bound.note)
    locations: list[Location] = []
    src = None
    if cons is not None:
        locations.append(ir_location(str(ir.path), cons, note="consumer: in_strategy disagrees"))
        src = source_location(cons)
        if src:
            locations.append(src)
    if prod is not None:
        locations.append(ir_location(str(ir.path), prod, note="producer"))
    for o in ch.ops[:3]:
        locations.append(ir_location(str(ir.path), o, note="inserted by redistribution"))
    patches = []
    if proposed:
        patches.append(Patch(title=f"shard {op_path} with in_strategy {proposed}", safety=Safety.DISPLAY_ONLY, ops=[],
                             target=src.path if src else None,
                             description=f"in the model code: {op_path}.shard({proposed}) — split the axis the redistribution "
                                         f"gathers over the {ch.gather} model-parallel devices, as the producers do",
                             notes=[f"{src.path}:{src.line}"] if src and src.line else []))
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=f"redistribution ({'/'.join(comm_names)}) around {op_path}{lay}: strategies disagree",
        message=" ".join(msg),
        severity=severity_for_share(share),
        saving_us=bound.saving_us,
        step_time_us=step_us,
        confidence=0.85 if measured else 0.6,
        evidence=[
            Evidence(name="redistribution_ops", value=len(ch.ops)),
            Evidence(name="blocking_time_per_step", value=round(cost, 3), unit="µs", source=how),
            Evidence(name="producer_strategy", value=str(ps)),
            Evidence(name="consumer_in_strategy", value=str(cs)),
        ] + ([Evidence(name="proposed_in_strategy", value=proposed)] if proposed else []) + bound.evidence,
        locations=locations,
        patches=patches,
        tags=list(rule.tags),
    )
