"""What the fix does: activation memory freed at the peak and forward time added per step, under 1F1B."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor_core.config.model_structure import LayerStructure
from advisor_core.config.recompute import effective_recompute, resolve_recompute
from advisor_core.engine import RuleContext
from advisor_rules._common import kernel_time_by_scope
from advisor_rules.rc001_recompute.issues import Issue, node_bytes
from advisor_rules.rc001_recompute.meter import Meter
from advisor_rules.rc001_recompute.select import with_value


@dataclass
class Effect:
    """What applying the fix does: peak memory saved, step time added, and how that was derived."""

    memory_bytes: float = 0.0
    extra_us: float | None = None
    memory_how: str | None = None
    time_how: str | None = None


def effect(ctx: RuleContext, issues: list[Issue], new_value: Any, structure: LayerStructure, ir: Any) -> Effect:
    """What applying ``new_value`` saves at the peak and adds per step (see the rule's Estimate)."""
    cfg = ctx.config
    rank = next(iter(ctx.run), None) if ctx.run is not None else None
    times, steps = kernel_time_by_scope(rank) if rank is not None else ({}, 1)
    if cfg is None or new_value is None:
        return effect_from_ir(issues, times, steps, rank)
    sel = cfg.located("recompute.select_recompute")
    after = resolve_recompute(with_value(cfg, sel.pointer or "", new_value), structure)
    before = resolve_recompute(cfg, structure)
    pp = max(len(before.stage_layers), 1)
    m = (cfg.micro_batch_num if pp > 1 else cfg.gradient_accumulation_steps) or 1
    meter = Meter(ir, times, steps, structure, cfg, m)
    stage_mem: list[float] = []
    stage_us: list[float] = []
    for s, layers in enumerate(before.stage_layers):
        freed = extra = 0.0
        for layer in layers:
            eb = effective_recompute(structure, before.configured_ops(layer, structure))
            ea = effective_recompute(structure, after.configured_ops(layer, structure))
            extra += sum(meter.fwd_us(structure.op(o), layer) for o in ea.duplicated - eb.duplicated)
            freed += sum(meter.tensor_bytes(t, layer) for t in eb.saved_after - ea.saved_after)
            freed -= sum(meter.tensor_bytes(t, layer) for t in ea.saved_after - eb.saved_after)
        in_flight = min(pp - s, m) if pp > 1 else 1
        stage_mem.append(max(freed, 0.0) * in_flight)
        stage_us.append(extra)
    eff = Effect()
    peaks = stage_peaks(ctx, pp)
    if peaks is not None:
        eff.memory_bytes = max(peaks) - max(p - f for p, f in zip(peaks, stage_mem))
    else:
        eff.memory_bytes = max(stage_mem, default=0.0)
    # 1F1B: a step is (m − 1) slots of the slowest stage plus one slot of every stage, a slot
    # being one micro batch's forward + backward there; the copies lengthen each backward slot.
    grow = [u / m for u in stage_us]
    slots = stage_slots(ctx, pp, m)
    base = slots if slots is not None else [0.0] * len(grow)
    eff.extra_us = (m - 1) * (max(b + g for b, g in zip(base, grow)) - max(base)) + sum(grow) if grow else None
    top = max(range(len(stage_mem)), key=lambda s: stage_mem[s]) if stage_mem else 0
    if pp > 1:
        eff.memory_how = (f"stage {top}: {len(before.stage_layers[top])} layer(s) × {min(pp - top, m)} micro batch(es) "
                          "in flight under 1F1B" + (", per-stage peaks from memory_record" if peaks is not None else ""))
    src = "measured kernel time" if meter.measured else "kernels priced from their bytes/FLOPs"
    per = ", ".join(f"{u:.0f}" for u in stage_us)
    eff.time_how = f"the recomputed forward kernels take {per} µs per step ({src})"
    if pp > 1:
        eff.time_how += (f" on stages 0–{pp - 1}, and under 1F1B the slowest stage's backward slots grow m − 1 = {m - 1} "
                         "times plus one slot per stage" + ("" if slots is not None else " (stages assumed alike)"))
    return eff


def effect_from_ir(issues: list[Issue], times: dict[str, float], steps: int, rank: Any) -> Effect:
    """No config to resolve: the blockers' outputs are what the fix stops keeping; their chain is what it recomputes."""
    eff = Effect()
    blockers = {id(b): b for i in issues if i.kind == "blocked" for b in i.blockers}.values()
    stage, pp = stage_of(rank) if rank is not None else (0, 1)
    in_flight = max(pp - stage, 1)
    eff.memory_bytes = sum(node_bytes(b) for b in blockers) * in_flight
    chain = {id(x): x for i in issues for x in i.chain}.values()
    measured = [times[n.kernel_full_name] for n in chain if n.kernel_full_name in times]
    eff.extra_us = sum(measured) / steps if measured else None
    if in_flight > 1:
        eff.memory_how = f"{in_flight} micro batches in flight on stage {stage}"
    if measured:
        eff.time_how = "the recomputed ops' measured kernel time"
    return eff


def stage_of(rank: Any) -> tuple[int, int]:
    """(pipeline stage, stage count) of a profiled rank, from its parallel layout."""
    layout = getattr(rank, "parallel", None)
    pp = int(getattr(layout, "pipeline_stages", None) or 1)
    for g in getattr(layout, "groups", None) or []:
        if g.group_name == "pp" and g.group_rank is not None:
            return int(g.group_rank), pp
    return 0, pp


def stage_slots(ctx: RuleContext, pp: int, m: int) -> list[float] | None:
    """Per pipeline stage, one micro batch's forward + backward (µs): busy time per step over ``m``.

    Busy = computing + communication not overlapped − bubble (Send/Receive time, which includes
    the waits), from ``step_trace_time.csv`` of a profiled rank of each stage; ``None`` unless
    every stage was profiled.
    """
    if ctx.run is None or pp <= 1:
        return None
    slots: dict[int, float] = {}
    for rank in ctx.run:
        stage, _ = stage_of(rank)
        if stage in slots or not rank.has_table("step_trace"):
            continue
        st = rank.table("step_trace")
        if st is None or st.empty or "bubble_us" not in st or st["bubble_us"].isna().all():
            continue
        busy = float((st["computing_us"].fillna(0) + st["communication_not_overlapped_us"].fillna(0) - st["bubble_us"].fillna(0)).sum())
        steps = kernel_time_by_scope(rank)[1] if bool(st["whole_run"].all()) else len(st)
        slots[stage] = busy / max(steps, 1) / m
    return [slots[s] for s in range(pp)] if all(s in slots for s in range(pp)) else None


def stage_peaks(ctx: RuleContext, pp: int) -> list[float] | None:
    """Peak device memory (bytes) per pipeline stage from ``memory_record.csv``, when every stage has some."""
    if ctx.run is None or pp <= 1:
        return None
    peaks: dict[int, float] = {}
    for rank in ctx.run:
        if not rank.has_table("memory_record"):
            continue
        t = rank.table("memory_record")
        if t is None or t.empty:
            continue
        col = "total_allocated_mb" if "total_allocated_mb" in t and t["total_allocated_mb"].max() > 0 else "total_reserved_mb"
        ms = t[t["component"] == "MindSpore"] if (t["component"] == "MindSpore").any() else t
        stage, _ = stage_of(rank)
        peaks[stage] = max(peaks.get(stage, 0.0), float(ms[col].max()) * 1000 * 1024)  # MindSpore's "MB" = KB / 1000
    return [peaks[s] for s in range(pp)] if all(s in peaks for s in range(pp)) else None
