"""RC001's finding: the issues, what fixing them frees and costs, locations and the ``select_recompute`` patch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor_core.config.model_structure import LayerStructure
from advisor_core.engine import Evidence, Finding, Location, RuleContext, Severity
from advisor_rules._common import data_bound_effect, ir_location
from advisor_rules.rc001_recompute.effect import effect
from advisor_rules.rc001_recompute.issues import Issue
from advisor_rules.rc001_recompute.select import new_select, select_patch

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.rc001_recompute.rule import RecomputeNotEffective


def finding(rule: RecomputeNotEffective, ctx: RuleContext, issues: list[Issue], ir: Any, structure: LayerStructure,
            meter_ir: Any) -> Finding:
    """The one finding: every issue, the memory not saved, the time the fix costs, and the patch."""
    cfg = ctx.config
    rank = next(iter(ctx.run), None) if ctx.run is not None else None
    new_value = new_select(cfg, issues) if cfg is not None else None
    eff = effect(ctx, issues, new_value, structure, meter_ir)
    freed = eff.memory_bytes
    lines = []
    for i in sorted(issues, key=lambda x: ".".join(x.op_path)):
        lay = f" in {len(i.layers)} layer(s)" if i.layers else ""
        lines.append(f"{'.'.join(i.op_path)} ({i.prim}){lay}: {i.reason}")
    msg = ["Configured for recomputation but not recomputed: " + "; ".join(lines) + "."]
    if freed:
        msg.append(f"Fixing it frees about {freed / 2**20:.1f} MiB of activations per rank at the peak"
                   + (f" ({eff.memory_how})" if eff.memory_how else "") + ".")
    if eff.extra_us is not None:
        msg.append(f"It costs {eff.extra_us:.1f} µs per step: {eff.time_how or 'the recomputed kernels'}.")
    # recomputing adds device time: it costs the step only what exceeds the device's wait for data
    bound = data_bound_effect(ctx, -eff.extra_us if eff.extra_us is not None else None)
    if bound.note:
        msg.append(bound.note)
    patch = select_patch(ctx, issues, new_value) if cfg is not None else None
    if cfg is None:
        adds = sorted({p for i in issues for p in i.add_patterns})
        if adds:
            msg.append("Add to select_recompute: " + ", ".join(repr(a) for a in adds) + ".")
    locations: list[Location] = []
    if cfg is not None:
        loc = ctx.config_location("recompute.select_recompute")
        if loc:
            locations.append(loc)
    graph = ir if ir is not None else meter_ir
    if graph is not None:
        for i in issues:
            for n in i.nodes[:2]:
                locations.append(ir_location(str(graph.path), n, note="configured, not recomputed"))
    share_mem = 100.0 * freed / (rule.options.device_memory_gb * 2**30) if freed else 0.0
    sev = Severity.MEDIUM if share_mem >= 1.0 or any(i.kind in ("blocked", "cell-output") for i in issues) else Severity.LOW
    layers_total = len(set().union(*(i.layers for i in issues))) or 1
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=f"{len(issues)} recompute setting(s) have no effect"
        + (f" ({freed / 2**20:.0f} MiB of activation memory not saved)" if freed else ""),
        message=" ".join(msg),
        severity=sev,
        saving_us=bound.saving_us,
        step_time_us=ctx.step_time_us(rank) if rank is not None else None,
        confidence=0.9 if ir is not None else 0.6,
        memory_delta_bytes=-freed if freed else None,
        evidence=[
            Evidence(name="configured_not_recomputed", value=sum(len(i.nodes) or len(i.layers) for i in issues),
                     source="IR" if ir is not None else "config"),
            Evidence(name="layers", value=layers_total),
        ]
        + ([Evidence(name="activation_memory_not_saved", value=round(freed), unit="bytes")] if freed else [])
        + ([Evidence(name="recompute_cost_per_step", value=round(eff.extra_us, 3), unit="µs")] if eff.extra_us is not None else [])
        + bound.evidence,
        locations=locations,
        patches=[patch] if patch else [],
        tags=list(rule.tags),
    )
