"""(B) An exposed gradient AllReduce → one finding with a safe ``all_reduce_fusion_config`` patch.

The profile decides: how many buckets a step runs, how many overlap the backward and what is
left exposed are measured; the config only names today's split points (when it sets them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from advisor_core.engine import Evidence, Finding, Location, Patch, RuleContext, Safety
from advisor_rules._common import data_bound_effect, severity_for_share
from advisor_rules.cm001_comm.buckets import best_split, current_points
from advisor_rules.cm001_comm.buckets import exposed as exposed_with
from advisor_rules.cm001_comm.stages import step_gain
from advisor_rules.cm001_comm.readiness import readiness, stage_gradient_kernels
from advisor_rules.cm001_comm.tail import stage_params

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.cm001_comm.rule import UnexpectedCommunication


def gradient_tail_finding(rule: UnexpectedCommunication, ctx: RuleContext,
                          reps: list[tuple[int, Any]]) -> Finding | None:
    """The exposed gradient AllReduce of the stages, with split points and their patch; ``None`` when quiet."""
    import numpy as np

    cfg = ctx.config
    if not reps:
        return None
    stages = []
    for s, r in reps:
        found = ctx.rank_evidence(r)
        tail = dict(found) if found is not None else None
        if tail is not None:
            tail["params"] = stage_params(ctx, r, s)
            tail["grad_kernels"] = stage_gradient_kernels(ctx, r, s, {n for n, _ in tail["params"]})
            tail["ready"] = readiness(tail, tail["params"]) if tail["params"] else None
            stages.append(tail | {"rank": r, "stage": s})
    if not stages:
        return None
    worst = max(stages, key=lambda t: t["exposed_us"])
    exposed = float(np.mean([t["exposed_us"] for t in stages]))
    step_us = worst["step_us"]
    share = 100.0 * exposed / step_us if step_us else None
    buckets = max(t.get("buckets", 1) for t in stages)
    overlapped = float(np.mean([t.get("overlapped", 0.0) for t in stages]))
    layout = _layout(cfg, stages, buckets, overlapped)
    if share is not None and share < rule.options.min_tail_pct:
        ctx.skip(f"gradient AllReduce exposed {exposed:.0f} µs per step ({share:.2f}% < {rule.options.min_tail_pct}%); "
                 + layout.text)
        return None
    # today's split points set the baseline only when the config names them: inferred ones are approximate
    known = layout.points if layout.configured else None
    split = best_split(stages, rule.options.bucket_latency_us, lambda st, d: step_gain(st, d)[0], known)
    gain_pct = 100.0 * split[2] / step_us if split is not None and step_us else None
    if buckets > 1 and (split is None or (gain_pct is not None and gain_pct < rule.options.min_tail_pct)):
        # already split: another split must win what an exposed tail must cost to be reported
        ctx.skip(f"gradient AllReduce exposed {exposed / 1000:.2f} ms per step; {layout.text}, and no other split of "
                 "the parameter list gains a meaningful part of it"
                 + (f" ({split[0]}: {split[2]:.0f} µs, {gain_pct:.2f}% < {rule.options.min_tail_pct}% of the step)"
                    if split is not None and gain_pct is not None else ""))
        return None
    ar = float(np.mean([t["ar_us"] for t in stages]))
    wait = float(np.mean([t.get("wait_us", 0.0) for t in stages]))
    per = f" per step on average over the {len(stages)} pipeline stages" if len(stages) > 1 else " per step"
    msg = [
        f"The gradient AllReduce (grad_reducer) transfers for {ar / 1000:.2f} ms{per}, of which {exposed / 1000:.2f} ms "
        f"is exposed after the last backward kernel" + (f" ({share:.1f}% of the step)" if share is not None else "")
        + f"; {layout.text}."
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
        base = [exposed_with(t, known, rule.options.bucket_latency_us) if known else t["exposed_us"] for t in usable]
        how = step_gain(usable, [min(max(b - x, 0.0), t["exposed_us"]) for t, b, x in zip(usable, base, lefts)])[1]
        left = float(np.mean(lefts))
        sizes = [len(t["params"]) for t in stages]
        per_stage = f"{'/'.join(f'{x / 1000:.2f}' for x in lefts)} ms on the {len(lefts)} stages" if len(lefts) > 1 \
            else f"{left / 1000:.2f} ms"
        now = (f", against ≈ {float(np.mean(base)) / 1000:.2f} ms the same model gives today's "
               f"{len(known) + 1} buckets ({known})") if known else (
               f", against the {exposed / 1000:.2f} ms measured with today's {buckets} buckets" if buckets > 1 else "")
        msg.append(
            f"Split points {points} over the {'/'.join(map(str, sizes))} parameters"
            + (" of each pipeline stage" if len(stages) > 1 else "")
            + f" give {len(points) + 1} buckets of balanced size, reduced as their gradients become ready (later layers "
            f"first) while the earlier layers' backward still runs: the tail left is ≈ {per_stage} (the last "
            f"bucket, holding the first parameters, whose gradients are ready last){now}"
            + (f"; {how}: the step gains {saving / 1000:.2f} ms." if how else f", {saving / 1000:.2f} ms less per step.")
        )
        sources = sorted({t.get("ready_from") for t in usable if t.get("ready_from")})
        if sources:
            msg.append(f"A gradient counts as ready when {' / '.join(sources)} end.")
        if cfg is None:  # no training config to patch: the script sets it (the seed's ResNet-50 does)
            patches.append(Patch(
                title=f"set all_reduce_fusion_config={points}", safety=Safety.DISPLAY_ONLY, ops=[],
                description=f"in the training script, before the network is built: "
                            f"mindspore.set_auto_parallel_context(all_reduce_fusion_config={points})"))
        if cfg is not None:
            p = ctx.config_patch(
                f"{'set' if cfg.located('parallel.all_reduce_fusion_config').present else 'add'} "
                f"parallel.all_reduce_fusion_config: {points}",
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
        loc = ctx.config_location("parallel.all_reduce_fusion_config",
                                  note=f"{buckets} gradient bucket(s) per step"
                                  if cfg.located("parallel.all_reduce_fusion_config").present else "absent")
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
            Evidence(name="gradient_buckets", value=buckets, source="profile"),
            Evidence(name="buckets_overlapping_backward", value=round(overlapped, 2), source="profile"),
        ] + ([Evidence(name="split_points", value=str(split[0])),
              Evidence(name="exposed_after_split", value=round(left or 0.0, 3), unit="µs")] if split is not None else [])
        + bound.evidence,
        locations=locations,
        patches=patches,
        rank=rank.rank_id,
        tags=list(rule.tags),
    )


@dataclass
class Layout:
    """Today's gradient buckets: the split points (config, else inferred from the buckets), and how to say it."""

    points: list[int] | None
    configured: bool  # the points come from the config (else inferred from the buckets' sizes)
    text: str


def _layout(cfg: Any, stages: list[dict[str, Any]], buckets: int, overlapped: float) -> Layout:
    """What the profile shows of the buckets, with the config's split points when it sets them."""
    val = cfg.get("parallel.all_reduce_fusion_config") if cfg is not None else None
    configured = cfg is not None and cfg.located("parallel.all_reduce_fusion_config").present
    points = [int(v) for v in val] if isinstance(val, list) and val and all(isinstance(v, int) for v in val) else None
    if buckets <= 1:
        if points:
            return Layout(None, configured, f"all_reduce_fusion_config is {points}, but the profile shows one bucket per "
                          "step: every gradient is reduced once the last one exists")
        return Layout(None, configured, "the profile shows one bucket per step"
                      + (" (all_reduce_fusion_config is not set)" if cfg is not None else "")
                      + ": every gradient is reduced once the last one exists")
    shown = (f"the profile shows {buckets} gradient buckets per step, {overlapped:.0f} of them starting while the "
             "backward still runs")
    if points:
        return Layout(points, configured, f"{shown} (all_reduce_fusion_config {points})")
    usable = [t for t in stages if t.get("params") and len(t["params"]) > 1]
    guess = current_points(usable[0]["params"], usable[0]["bucket_us"]) if usable else []
    return Layout(guess or None, False,
                  f"{shown}; " + ("all_reduce_fusion_config is not in the config (set in the training script?)"
                                    if cfg is not None else "no config names the split points")
                  + (f", the buckets' sizes put the split points near {guess}" if guess else ""))
