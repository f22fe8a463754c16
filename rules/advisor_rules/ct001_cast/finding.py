"""CT001's finding for one chain: why the casts are wasted, their time, where they come from, and the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor_core.engine import Evidence, Finding, Location, RuleContext, Safety, Severity
from advisor_rules._common import data_bound_effect, ir_location, severity_for_share, source_location, user_source
from advisor_rules.ct001_cast.chains import Chain

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.ct001_cast.rule import CastExcess


def finding(rule: CastExcess, ctx: RuleContext, chain: Chain, cost: float | None, step_us: float | None, n_stages: int,
            micro: int) -> Finding | None:
    """The finding for one chain (``None`` below ``min_share_pct``): kind, time, source lines, patch or advice."""
    nodes = chain.nodes
    how = chain.how
    if n_stages > 1 and len(chain.cost) > 1:
        per = ", ".join(f"stage {s}: {c:.1f}" for s, c in sorted(chain.cost.items()))
        how += (f"; kernel µs per step by pipeline stage ({per}) → step time under 1F1B with {micro} micro batches "
                "(the slowest stage carries every micro batch, the others one)")
    share = 100.0 * cost / step_us if step_us and cost is not None else None
    if share is not None and share < rule.options.min_share_pct:
        return None
    first = nodes[0]
    src = user_source(first) or user_source(nodes[-1])
    chain_txt = "→".join(chain.dtypes)
    layers = sorted(chain.layers)
    where = f" in {len(layers)} layer(s)" if layers else ""
    titles = {
        "lossy-round-trip": f"lossy Cast round trip {chain_txt}{where}",
        "lossless-round-trip": f"redundant Cast round trip {chain_txt}{where}",
        "no-op": f"Cast from {chain.dtypes[0]} to the same dtype{where}",
        "backend-fight": f"backend Cast undoes a user Cast ({chain_txt}){where}",
        "config": f"{chain.config_key} forces Cast pairs around {chain.key.split('|')[-1]}{where}",
    }
    why = {
        "lossy-round-trip": "the value loses precision in the middle type and two Cast kernels run for nothing",
        "lossless-round-trip": "the two casts cancel out; both kernels are wasted",
        "no-op": "casting to the dtype a tensor already has launches a kernel that copies it",
        "backend-fight": "the next kernel does not support the dtype the model asked for, so the backend casts it back",
        "config": "a 32-bit setting for a block inside a 16-bit model makes every layer cast up and back down",
    }[chain.kind]
    msg = [f"{len(nodes)} Cast node(s) ({chain_txt}): {why}."]
    inner = sum(chain.inner_cost.values())
    if chain.inner and inner > 0:
        ops = sorted({n.op for n in chain.inner})
        msg.append(f"Between the casts {len(chain.inner)} op(s) ({', '.join(ops)}) run on 32-bit data; in "
                   f"{ctx.config.compute_dtype if ctx.config is not None else '16 bits'} they would move half the bytes "
                   f"({inner:.1f} µs per step of the kernel time below).")
    if cost is None:
        msg.append(f"Time: {how}.")
    else:
        msg.append(f"Time: {cost:.1f} µs per step ({how})" + (f", {share:.2f}% of the step." if share is not None else "."))
    srcs = []
    for n in nodes:
        s_ = user_source(n)
        if s_ and s_ not in srcs:
            srcs.append(s_)
    if srcs:
        msg.append("Created at " + "; ".join(f"{f}:{ln}: `{code}`" for f, ln, code in srcs[:3]) + ".")
    patches = []
    if chain.kind == "config" and ctx.config is not None and chain.config_key:
        compute = ctx.config.compute_dtype
        p = ctx.config_patch(
            f"set {chain.config_key.split('.', 1)[1]} to {compute}",
            [(chain.config_key, compute)],
            safety=Safety.UNSAFE,
            description=f"run the {chain.key.split('|')[-1]} block in {compute} like the rest of the model (precision change)",
        )
        if p:
            patches.append(p)
    elif src:
        msg.append("Remove the cast(s) at that line" + (" (it also loses precision)" if chain.kind == "lossy-round-trip" else "") + ".")
    locations: list[Location] = []
    if chain.kind == "config" and chain.config_key:
        loc = ctx.config_location(chain.config_key)
        if loc:
            locations.append(loc)
    for n in nodes[:4]:
        locations.append(ir_location(str(chain.path), n))
    sloc = source_location(first)
    if sloc:
        locations.append(sloc)
    bound = data_bound_effect(ctx, cost)  # a device-side saving shows only while the device bounds the step
    if bound.note:
        msg.append(bound.note)
    sev = severity_for_share(share)
    if chain.kind == "lossy-round-trip" and sev == Severity.LOW:
        sev = Severity.MEDIUM  # an accuracy bug as well as wasted time
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=titles[chain.kind],
        message=" ".join(msg),
        severity=sev,
        saving_us=bound.saving_us,
        step_time_us=step_us,
        confidence=0.9 if chain.measured else 0.6,
        evidence=[
            Evidence(name="cast_nodes", value=len(nodes)),
            Evidence(name="cast_time_per_step", value=None if cost is None else round(cost, 3), unit="µs", source=how),
            Evidence(name="dtypes", value=chain_txt),
        ]
        + ([Evidence(name="layers", value=len(layers))] if layers else [])
        + bound.evidence,
        locations=locations,
        patches=patches,
        tags=list(rule.tags),
    )
