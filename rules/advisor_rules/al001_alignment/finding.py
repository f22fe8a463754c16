"""AL001's finding for one config key: the dims, the time and memory at stake, the message and the patch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor_core.engine import Evidence, Finding, Location, RuleContext, Safety, Severity
from advisor_rules._common import (
    cell_path_in_layer,
    data_bound_effect,
    ir_location,
    kernel_scope,
    one_f_one_b_step_saving,
    severity_for_share,
)
from advisor_rules.al001_alignment.dims import Dim
from advisor_rules.al001_alignment.fix import Fix
from advisor_rules.al001_alignment.memory import memory_delta
from advisor_rules.al001_alignment.saving import Stage
from advisor_rules.al001_alignment.shapes import pad_to

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.al001_alignment.rule import Alignment16


def finding(rule: Alignment16, ctx: RuleContext, key: str, group: list[Dim], new: Fix | None,
            stages: list[Stage], value_map: dict[int, tuple[str, int]], source: str) -> Finding:
    """The finding for one config key: its unaligned dims, the time and memory at stake, and the patch."""
    cfg = ctx.config
    d0 = max(group, key=lambda d: d.time_us)
    measured = bool(stages) and any(d.kernels for d in group)
    micro = max([s.micro for s in stages] or [1])
    saving = one_f_one_b_step_saving({s.stage: s.saving.get(key, 0.0) for s in stages},
                                     {s.stage: s.busy_us for s in stages}, micro) if measured else None
    slowest = max(stages, key=lambda s: s.busy_us) if stages else None
    step_us = ctx.step_time_us(slowest.rank) if slowest is not None else None
    share = 100.0 * saving / step_us if (step_us and saving is not None) else None
    pad = pad_to(d0.value, d0.align)
    ops = sorted({o for d in group for o in d.ops})
    roles = "/".join(sorted({d.role for d in group}))
    values = sorted({d.value for d in group})
    msg = [f"{roles} = {', '.join(map(str, values))} in {', '.join(ops)} is not a multiple of {d0.align} "
           f"(padded to {pad}, +{100.0 * (pad - d0.value) / d0.value:.2f}% work)."]
    masked = sorted({y for s in stages for y in s.masked.get(key, set())})
    if measured and saving is not None:
        pen = sum(s.penalty_us.get(key, 0.0) for s in stages)
        td = sum(s.transdata_us.get(key, 0.0) for s in stages)
        p = next((s.penalty for s in stages if s.penalty), None)
        msg.append(
            f"{round(sum(d.count for d in group))} unaligned MatMul kernel(s) on it take "
            f"{sum(d.time_us for d in group) / 1000:.2f} ms per step"
            + (f" (the aligned MatMuls of this profile run {p:.2f}× faster per padded FLOP)" if p else "")
            + f". Fixing {short_key(key)} alone removes {pen / 1000:.2f} ms of MatMul penalty"
            + (f" and {td / 1000:.2f} ms of TransData" if td else "")
            + (f" (summed over {len(stages)} pipeline stages; under 1F1B the step gains" if len(stages) > 1 else "; the step gains")
            + f" {saving / 1000:.2f} ms" + (")." if len(stages) > 1 else ".")
        )
    if masked:
        msg.append(f"MatMuls that also have {', '.join(short_key(y) for y in masked)} unaligned keep their penalty "
                   f"and TransData until those are fixed too.")
    patches = []
    locations: list[Location] = []
    if cfg is not None and d0.config_key:
        cur = cfg.get(d0.config_key)
        per_rank = f" (per rank after model_parallel={d0.divisor}: {d0.value})" if d0.divisor > 1 else ""
        msg.append(f"It comes from {short_key(d0.config_key)} = {cur}{per_rank}.")
        if new is not None:
            changes, note = new.changes, new.note
            msg.append(note)
            title = ", ".join(f"{short_key(k)} to {v}" for k, v in changes)
            p = ctx.config_patch(f"set {title}", changes, safety=Safety.UNSAFE,
                                 description="changes the model's shape: retrain or convert checkpoints (zero-pad). " + note)
            if p:
                patches.append(p)
        loc = ctx.config_location(d0.config_key)
        if loc:
            locations.append(loc)
    for d in group:
        for ir_path, n in d.ir_nodes[:2]:
            locations.append(ir_location(ir_path, n, note=".".join(cell_path_in_layer(n.scope)) or None))
        for rk, kname in d.kernels[:4]:
            src = rk.table_source("kernels")
            locations.append(Location(kind="profile", path=str(src[0]) if src else None, table="kernels",
                                      op=kernel_scope(kname) or kname, rank=rk.rank_id))
    mem = memory_delta(ctx, stages, value_map, key) if new is not None else None
    if mem:
        msg.append(f"The padding adds {mem / 2**20:.1f} MiB of parameters and optimizer state per device.")
    if not measured:
        msg.append("Without a profile the time at stake is not measured.")
    bound = data_bound_effect(ctx, saving)  # a device-side saving shows only while the device bounds the step
    if bound.note:
        msg.append(bound.note)
    title = (f"{short_key(d0.config_key)} gives unaligned MatMul dim {d0.value}" if d0.config_key
             else f"MatMul dim {d0.value} is not a multiple of {d0.align}")
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=title,
        message=" ".join(msg),
        severity=severity_for_share(share) if share is not None else Severity.LOW,
        saving_us=bound.saving_us,
        memory_delta_bytes=mem,
        step_time_us=step_us,
        confidence=0.8 if measured else 0.5,
        evidence=[
            Evidence(name="dim", value=d0.value, threshold=f"multiple of {d0.align}", source=source),
            Evidence(name="padded_to", value=pad),
        ]
        + ([Evidence(name="saving_if_fixed_alone", value=round(saving, 3), unit="µs")] if saving is not None else [])
        + ([Evidence(name="masked_by", value=", ".join(masked))] if masked else [])
        + ([Evidence(name="proposed", value=new.value)] if new is not None else [])
        + bound.evidence,
        locations=locations,
        patches=patches,
        tags=list(rule.tags),
    )


def short_key(key: str) -> str:
    """``model.hidden_size`` → ``hidden_size``."""
    return key.split(".", 1)[1] if key.startswith("model.") else key
