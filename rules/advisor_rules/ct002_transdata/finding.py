"""CT002's finding for one group: what forces the conversions, their time, where, and the (model-code) fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from advisor_core.engine import Evidence, Finding, Location, RuleContext, Severity
from advisor_rules._common import data_bound_effect, ir_location, severity_for_share, source_location, user_source
from advisor_rules.ct002_transdata.groups import Group

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.ct002_transdata.rule import TransDataExcess


@dataclass(frozen=True)
class StepsSeen:
    """In which profiled steps a group's TransData kernels ran."""

    text: str  # "on every step" | "in 1 of 3 profiled steps (step 1)"
    one_off: bool = False  # only in the first profiled step of several: a one-time conversion, not per step
    first: int | None = None


def steps_seen(rank: Any, kernel_names: list[str]) -> StepsSeen:
    """``on every step``, or ``in 1 of 3 profiled steps (step 1)`` when the conversions ran in some steps only
    (the op view's per-step counts). Conversions that ran only in the first profiled step of several are a
    one-off: weights converted to their device format once, at their first use."""
    view = rank.op_view() if rank is not None and kernel_names else None
    if view is None or view.steps <= 1 or "steps_seen" not in view.ops:
        return StepsSeen("on every step")
    names = view.ops["name"].astype(str)
    wanted = list(dict.fromkeys(kernel_names))
    rows = view.ops[names.isin(wanted) | names.str.startswith(tuple(f"{k}/" for k in wanted))]
    if rows.empty:
        return StepsSeen("on every step")
    seen = int(rows["steps_seen"].max())
    if seen >= view.steps:
        return StepsSeen("on every step")
    first, last = int(rows["first_step"].min()), int(rows["last_step"].max())
    span = f"step {first}" if first == last else f"steps {first}–{last}"
    steps = [s for s in view.step_ids if s is not None and s >= 0] or [first]
    one_off = first == last == min(steps)
    return StepsSeen(f"in {seen} of {view.steps} profiled steps ({span})", one_off, first)


def finding(rule: TransDataExcess, ctx: RuleContext, g: Group, cost: float, step_us: float | None, rank: Any,
            micro: int) -> Finding | None:
    """The finding for one group (``None`` below ``min_share_pct``): cause, time, the consumer's source line, fix."""
    share = 100.0 * cost / step_us if step_us else None
    one_off = False
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
        seen = steps_seen(rank, g.kernel_names or [n.kernel_full_name for n in g.trans if n.kernel_full_name])
        one_off = seen.one_off
        title = (f"{len(g.params)} weight(s) converted {g.formats} by TransData {seen.text}"
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
    if one_off:
        # The weights' first use converts them to the device format once; later steps read them converted.
        # Reported when that one time is a visible share of a step.
        steps = rank.op_view().steps if rank is not None and rank.op_view() is not None else 1
        if step_us and 100.0 * cost * steps / step_us < rule.options.min_share_pct:
            return None
        return one_off_finding(rule, ctx, g, cost, step_us, rank, seen)
    if share is not None and share < rule.options.min_share_pct:
        return None
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


def one_off_finding(rule: TransDataExcess, ctx: RuleContext, g: Group, cost: float, step_us: float | None,
                    rank: Any, seen: StepsSeen) -> Finding:
    """Weights converted in the first profiled step only: their initial format conversion, told as such.

    Not a steady-state saving (no later step converts them), so no saving is ranked; the time it took once
    is in the message and the evidence.
    """
    view = rank.op_view() if rank is not None else None
    steps = view.steps if view is not None else 1
    once_us = cost * steps  # the group's kernels over the profile, all in that one step
    names = g.kernel_names or [n.kernel_full_name for n in g.trans if n.kernel_full_name]
    launches = int(view.ops.loc[view.ops["name"].isin(names), "count"].sum()) if view is not None else 0
    launches = launches or len(g.trans) or len(g.kernel_names)
    cells = list(dict.fromkeys(weight_cell(p) for p in g.params))
    msg = (f"{launches} TransData conversion(s) of {len(g.params)} weight(s) "
           f"({', '.join(g.params[:6])}{', …' if len(g.params) > 6 else ''}) ran {seen.text}: the weights are "
           f"converted {g.formats} once, at their first use, and read in the device format afterwards. "
           f"That took {once_us / 1000:.2f} ms once; it is not a per-step cost, so no saving is ranked "
           "(averaged over the profiled steps it would read "
           f"{cost:.1f} µs per step, which a longer run spreads thinner). Nothing to fix unless the run is "
           "restarted often: converting the checkpoint's weights to FRACTAL_NZ ahead of time would save it.")
    locations: list[Location] = []
    for n in g.trans[:3] + g.culprit_nodes[:1]:
        locations.append(ir_location(str(g.path), n))
    if g.kernel_names and rank is not None:
        src_file = rank.table_source("kernels")
        locations.append(Location(kind="profile", path=str(src_file[0]) if src_file else None, table="kernels",
                                  op=g.kernel_names[0], rank=rank.rank_id, note=f"step {seen.first} only"))
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=(f"{len(g.params)} weight(s) converted {g.formats} by TransData {seen.text} ({', '.join(cells[:4])}"
               f"{', …' if len(cells) > 4 else ''}): a one-time conversion, not a per-step cost"),
        message=msg,
        severity=Severity.LOW,
        saving_us=None,
        step_time_us=step_us,
        confidence=0.85 if g.measured else 0.55,
        evidence=[
            Evidence(name="transdata_count", value=launches),
            Evidence(name="one_time_conversion", value=round(once_us, 3), unit="µs", source=g.how),
            Evidence(name="steps_seen", value=seen.text),
            Evidence(name="formats", value=g.formats),
            Evidence(name="weights", value=len(g.params)),
        ],
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
