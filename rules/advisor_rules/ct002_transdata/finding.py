"""CT002's finding for one group: what forces the conversions, their time, where, and the (model-code) fix."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor_core.engine import Evidence, Finding, Location, RuleContext
from advisor_rules._common import data_bound_effect, ir_location, severity_for_share, source_location, user_source
from advisor_rules.ct002_transdata.groups import Group

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.ct002_transdata.rule import TransDataExcess


def steps_seen(rank: Any, kernel_names: list[str]) -> str:
    """``on every step``, or ``in 1 of 3 profiled steps (step 1)`` when the conversions ran in some steps only
    (the op view's per-step counts: weights converted once, at the first step, are not a per-step cost)."""
    view = rank.op_view() if rank is not None and kernel_names else None
    if view is None or view.steps <= 1 or "steps_seen" not in view.ops:
        return "on every step"
    names = view.ops["name"].astype(str)
    wanted = list(dict.fromkeys(kernel_names))
    rows = view.ops[names.isin(wanted) | names.str.startswith(tuple(f"{k}/" for k in wanted))]
    if rows.empty:
        return "on every step"
    seen = int(rows["steps_seen"].max())
    if seen >= view.steps:
        return "on every step"
    first, last = int(rows["first_step"].min()), int(rows["last_step"].max())
    span = f"step {first}" if first == last else f"steps {first}–{last}"
    return f"in {seen} of {view.steps} profiled steps ({span})"


def finding(rule: TransDataExcess, ctx: RuleContext, g: Group, cost: float, step_us: float | None, rank: Any,
            micro: int) -> Finding | None:
    """The finding for one group (``None`` below ``min_share_pct``): cause, time, the consumer's source line, fix."""
    share = 100.0 * cost / step_us if step_us else None
    if share is not None and share < rule.options.min_share_pct:
        return None
    n_trans = len(g.trans) or len(g.kernel_names)
    layers = sorted(g.layers)
    in_layers = f" in {len(layers)} layer(s)" if layers else ""
    how = g.how
    if len(g.cost) > 1:
        per = ", ".join(f"stage {s}: {c:.1f}" for s, c in sorted(g.cost.items()))
        how += (f"; kernel µs per step by pipeline stage ({per}) → step time under 1F1B with {micro} micro batches "
                "(the slowest stage carries every micro batch, the others one)")
    src = next((user_source(x) for x in g.culprit_nodes if user_source(x)), None)
    if g.kind == "sandwich":
        title = f"{g.culprit} forces TransData pairs ({g.formats}){in_layers}"
        why = "the op does not accept the special format its neighbours use, so the tensor is converted out and back"
        fix = ("replace it with an op that accepts that format, or fuse it into its neighbour (its backward converts "
               "the gradient the same way)")
    elif g.kind == "param":
        cells = list(dict.fromkeys(weight_cell(p) for p in g.params))
        when = steps_seen(rank, g.kernel_names or [n.kernel_full_name for n in g.trans if n.kernel_full_name])
        title = (f"{len(g.params)} weight(s) converted {g.formats} by TransData {when}"
                 f"{in_layers} ({', '.join(cells[:4])}{', …' if len(cells) > 4 else ''})")
        why = ("each weight is stored in ND and re-laid-out for its MatMul at every use (forward and backward, "
               "every micro batch) instead of once")
        fix = ("keep each weight in the layout its MatMul consumes: convert it once (at checkpoint load or parameter "
               "creation) instead of per use, and do not reshape/transpose/cast the parameter in construct before the "
               "MatMul (use the MatMul's transpose_b) so the backend can store it in FRACTAL_NZ")
    else:
        title = f"TransData pairs that cancel out ({g.formats}){in_layers}"
        why = "a conversion is immediately undone"
        fix = "remove the op between them that requests the round trip"
    msg = [f"{n_trans} TransData conversion(s): {why}."]
    if g.kind == "param":
        msg.append(f"Weights: {', '.join(g.params[:6])}{', …' if len(g.params) > 6 else ''}.")
    msg.append(f"Time: {cost:.1f} µs per step ({how})" + (f", {share:.2f}% of the step." if share is not None else "."))
    if src:
        msg.append(("Consumed at" if g.kind == "param" else "Created at") + f" {src[0]}:{src[1]}: `{src[2]}`.")
    msg.append(f"Fix: {fix} (model code; no config key controls this).")
    locations: list[Location] = []
    for n in (g.trans[:3] + g.culprit_nodes[:1]) if g.kind == "param" else (g.culprit_nodes[:2] + g.trans[:3]):
        locations.append(ir_location(str(g.path), n))
    if g.culprit_nodes:
        s = source_location(g.culprit_nodes[0])
        if s:
            locations.append(s)
    if g.kernel_names and rank is not None:
        src_file = rank.table_source("kernels")
        locations.append(Location(kind="profile", path=str(src_file[0]) if src_file else None, table="kernels",
                                  op=g.kernel_names[0], rank=rank.rank_id))
    evidence = [
        Evidence(name="transdata_count", value=n_trans),
        Evidence(name="transdata_time_per_step", value=round(cost, 3), unit="µs", source=how),
        Evidence(name="formats", value=g.formats),
    ]
    if layers:
        evidence.append(Evidence(name="layers", value=len(layers)))
    if g.params:
        evidence.append(Evidence(name="weights", value=len(g.params)))
    bound = data_bound_effect(ctx, cost)  # a device-side saving shows only while the device bounds the step
    if bound.note:
        msg.append(bound.note)
    evidence += bound.evidence
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=title,
        message=" ".join(msg),
        severity=severity_for_share(share),
        saving_us=bound.saving_us,
        step_time_us=step_us,
        confidence=0.85 if g.measured else 0.55,
        evidence=evidence,
        locations=locations,
        tags=list(rule.tags),
    )


def weight_cell(param: str) -> str:
    """``para9_model.layers.0.feed_forward.w1.weight`` → ``feed_forward.w1`` (the Linear the weight belongs to)."""
    name = param.split("_", 1)[1] if param.startswith("para") and "_" in param else param
    parts = name.split(".")
    if "layers" in parts:
        i = parts.index("layers")
        parts = parts[i + 2:]
    return ".".join(p for p in parts if p not in ("weight", "bias", "embedding_weight")) or name
