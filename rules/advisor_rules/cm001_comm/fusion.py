"""(B) An exposed gradient AllReduce → one finding with a safe ``all_reduce_fusion_config`` patch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor_core.engine import Evidence, Finding, Location, RuleContext, Safety
from advisor_rules._common import data_bound_effect, severity_for_share
from advisor_rules.cm001_comm.buckets import best_split
from advisor_rules.cm001_comm.stages import step_gain
from advisor_rules.cm001_comm.tail import readiness, stage_params

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.cm001_comm.rule import UnexpectedCommunication


def gradient_tail_finding(rule: UnexpectedCommunication, ctx: RuleContext,
                          reps: list[tuple[int, Any]]) -> Finding | None:
    """The exposed gradient AllReduce of the stages, with split points and their patch; ``None`` when quiet."""
    import numpy as np

    cfg = ctx.config
    if not reps:
        return None
    if cfg is not None and cfg.located("parallel.all_reduce_fusion_config").present:
        val = cfg.get("parallel.all_reduce_fusion_config")
        if isinstance(val, list) and len(val) >= 1:
            return None  # already split; LC006 checks its order and range
    stages = []
    for s, r in reps:
        found = ctx.rank_evidence(r)
        tail = dict(found) if found is not None else None
        if tail is not None:
            tail["params"] = stage_params(ctx, r, s)
            tail["ready"] = readiness(tail, tail["params"]) if tail["params"] else None
            stages.append(tail | {"rank": r, "stage": s})
    if not stages:
        return None
    worst = max(stages, key=lambda t: t["exposed_us"])
    exposed = float(np.mean([t["exposed_us"] for t in stages]))
    step_us = worst["step_us"]
    share = 100.0 * exposed / step_us if step_us else None
    if share is not None and share < rule.options.min_tail_pct:
        ctx.skip(f"gradient AllReduce exposed {exposed:.0f} µs per step ({share:.2f}% < {rule.options.min_tail_pct}%)")
        return None
    split = best_split(stages, rule.options.bucket_latency_us, lambda st, d: step_gain(st, d)[0])
    ar = float(np.mean([t["ar_us"] for t in stages]))
    wait = float(np.mean([t.get("wait_us", 0.0) for t in stages]))
    per = f" per step on average over the {len(stages)} pipeline stages" if len(stages) > 1 else " per step"
    msg = [
        f"The gradient AllReduce (grad_reducer) transfers for {ar / 1000:.2f} ms{per}, of which {exposed / 1000:.2f} ms "
        f"is exposed after the last backward kernel" + (f" ({share:.1f}% of the step)" if share is not None else "")
        + "; all_reduce_fusion_config is not set, so every gradient is reduced in one bucket once the last one exists."
    ]
    if wait >= 1.0:
        msg.append(f"Profiled ranks also wait {wait / 1000:.2f} ms inside it for the slowest data-parallel peer (HCCL "
                   "Wait Time): skew between the ranks, which no split removes, so it is not counted.")
    patches = []
    saving, how = step_gain(stages, [t["exposed_us"] for t in stages])  # no split: the upper bound
    if split is None:
        msg.append(("Without the parameter list (IR dump or config) no split point is computed; the exposed time is the "
                    "upper bound of what buckets can hide" if not any(t.get("params") for t in stages)
                    else "No split of the parameter list hides a meaningful part of it")
                   + (f" ({how}: at most {saving / 1000:.2f} ms per step)." if how else "."))
    left = None
    if split is not None:
        points, lefts, saving = split
        usable = [t for t in stages if t.get("params") and t.get("ready") and len(t["params"]) > 1]
        how = step_gain(usable, [max(t["exposed_us"] - x, 0.0) for t, x in zip(usable, lefts)])[1]
        left = float(np.mean(lefts))
        sizes = [len(t["params"]) for t in stages]
        per_stage = f"{'/'.join(f'{x / 1000:.2f}' for x in lefts)} ms on the {len(lefts)} stages" if len(lefts) > 1 \
            else f"{left / 1000:.2f} ms"
        msg.append(
            f"Split points {points} over the {'/'.join(map(str, sizes))} parameters"
            + (" of each pipeline stage" if len(stages) > 1 else "")
            + f" give {len(points) + 1} buckets of balanced size, reduced as their gradients become ready (later layers "
            f"first) while the earlier layers' backward still runs: the tail left is ≈ {per_stage} (the last "
            f"bucket, holding the first parameters, whose gradients are ready last)"
            + (f"; {how}: the step gains {saving / 1000:.2f} ms." if how else f", {saving / 1000:.2f} ms less per step.")
        )
        if cfg is not None:
            p = ctx.config_patch(
                f"add parallel.all_reduce_fusion_config: {points}",
                [("parallel.all_reduce_fusion_config", points)],
                safety=Safety.SAFE,
                description="gradient AllReduce buckets that overlap the backward pass",
            )
            if p:
                patches.append(p)
    bound = data_bound_effect(ctx, saving)  # the tail costs the step only while the device bounds it
    if bound.note:
        msg.append(bound.note)
    rank = worst["rank"]
    src = rank.table_source("kernels")
    locations = []
    if cfg is not None:
        loc = ctx.config_location("parallel.all_reduce_fusion_config", note="absent: one gradient bucket")
        if loc:
            locations.append(loc)
    locations.append(Location(kind="profile", path=str(src[0]) if src else None, table="kernels",
                              op=worst["ar_name"], rank=rank.rank_id, note="gradient AllReduce in the step tail"))
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=f"gradient AllReduce exposed in the step tail: {exposed / 1000:.2f} ms per step",
        message=" ".join(msg),
        severity=severity_for_share(share),
        saving_us=bound.saving_us,
        step_time_us=step_us,
        confidence=0.8 if split is not None else 0.6,
        evidence=[
            Evidence(name="gradient_allreduce_time", value=round(float(ar), 3), unit="µs"),
            Evidence(name="exposed_time", value=round(exposed, 3), unit="µs"),
            Evidence(name="peer_wait_time", value=round(wait, 3), unit="µs"),
        ] + ([Evidence(name="split_points", value=str(split[0])),
              Evidence(name="exposed_after_split", value=round(left or 0.0, 3), unit="µs")] if split is not None else [])
        + bound.evidence,
        locations=locations,
        patches=patches,
        rank=rank.rank_id,
        tags=list(rule.tags),
    )
