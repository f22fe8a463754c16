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
    amp = chain.origin.kind == "amp"
    writer = "an AMP" if amp else "a user"
    fight = (f"{'AMP' if amp else 'user'} Cast undoes a backend Cast ({chain_txt})" if chain.backend_first
             else f"backend Cast undoes {writer} Cast ({chain_txt})")
    by_amp = " inserted by AMP" if amp else ""
    titles = {
        "lossy-round-trip": f"lossy Cast round trip {chain_txt}{by_amp}{where}",
        "lossless-round-trip": f"redundant Cast round trip {chain_txt}{by_amp}{where}",
        "no-op": f"Cast from {chain.dtypes[0]} to the same dtype{by_amp}{where}",
        "backend-fight": f"{fight}{where}",
        "config": f"{chain.config_key} forces Cast pairs around {chain.key.split('|')[-1]}{where}",
    }
    low = chain.dtypes[1] if len(chain.dtypes) > 2 else "?"
    why = {
        "lossy-round-trip": "the value loses precision in the middle type and two Cast kernels run for nothing",
        "lossless-round-trip": "the two casts cancel out; both kernels are wasted",
        "no-op": "casting to the dtype a tensor already has launches a kernel that copies it",
        "backend-fight": (
            f"the kernel before them has no {low} version: it computes in {chain.dtypes[0]}, the backend casts its "
            f"result to the {low} the graph asks for, and the next cast takes it straight back" if chain.backend_first
            else "the next kernel does not support the dtype the model asked for, so the backend casts it back"),
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
    at = "; ".join(f"{f}:{ln}: `{code}`" for f, ln, code in srcs[:3])
    if amp:
        msg.append(amp_cause(chain) + (f" Model code reaching them: {at}." if at else ""))
        msg.append("Fix (the AMP configuration, not the model code): " + amp_fix(chain, low) + ".")
    elif srcs:
        msg.append("Created at " + at + ".")
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
    elif src and not amp:
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
        + ([Evidence(name="cast_origin", value=f"AMP ({AMP_HOW[chain.origin.how]})",
                     source=chain.origin.file or "IR # In file call stack")] if amp else [])
        + ([Evidence(name="layers", value=len(layers))] if layers else [])
        + bound.evidence,
        locations=locations,
        patches=patches,
        tags=list(rule.tags),
    )


AMP_HOW = {
    "rewrite": "rewritten network: amp_cast around its white-list ops",
    "cast-cell": "cast cells: level O2/O3 or Cell.to_float",
    "output": "the network output cast back to float32",
}


def cell_of(chain: Chain) -> str:
    """The cell the chain is about, as ```fc1` (Dense)``: the cell of the kernel lacking the dtype in a
    backend fight, else of the casts (their last scope cell segment; AMP's ``DenseOpt_1`` is ``Dense``)."""
    scopes = [chain.kernel[1]] if chain.kernel else []
    scopes += [n.scope or "" for n in chain.nodes]
    for scope in scopes:
        cells = [seg for seg in scope.split("/")[:-1] if "-" in seg and not seg.startswith("Grad_")]
        if cells:
            attr, _, cls = cells[-1].partition("-")
            return f"`{attr}` ({cls.rstrip('_0123456789').removesuffix('Opt') or cls})"
    return "the op"


def cell_class(cell: str) -> str:
    """``Dense`` of ```fc1` (Dense)``."""
    return cell.rpartition("(")[2].rstrip(")") or cell


def amp_cause(chain: Chain) -> str:
    """What AMP did to put the casts there, from how it inserted them."""
    o = chain.origin
    if o.how == "rewrite":
        where = f" ({o.file.rsplit('/', 2)[-2]}/{o.file.rsplit('/', 1)[-1]})" if o.file and "/" in o.file else ""
        return (f"AMP inserted these casts: it rewrote the network{where} with an amp_cast to float16 before and back "
                "to float32 after each op on its white list (level O1: amp.get_white_list(), e.g. nn.Dense, MatMul, "
                "ReLU).")
    if o.how == "output":
        return ("AMP inserted these casts: its loss wrapper casts the network output back to float32 "
                "(F.mixed_precision_cast in amp.build_train_network, level O2/O3).")
    return ("AMP inserted these casts: level O2/O3 (or Cell.to_float) converts every cell outside the black list "
            "(amp.get_black_list(): BatchNorm, LayerNorm) to float16, and the compiler casts each converted cell's "
            "inputs and the weights it reads.")


def amp_fix(chain: Chain, low: str) -> str:
    """The AMP setting that removes the chain: the level, its white/black lists, or keep_batchnorm_fp32."""
    cell = cell_of(chain)
    o1 = chain.origin.how == "rewrite"
    if any(k in cell for k in ("BatchNorm", "LayerNorm")):
        return (f"{cell} is on AMP's black list and kept in float32 around float16 neighbours "
                "(keep_batchnorm_fp32=True, O2's default): pass keep_batchnorm_fp32=False to amp.build_train_network "
                "(or use level O3) if its precision allows, so it runs in float16 with them")
    if chain.kind == "backend-fight":
        op = f"{chain.kernel[0]} of " if chain.kernel else ""
        keep = (f"take it off AMP's white list: amp.custom_mixed_precision(net, white_list=[…amp.get_white_list() "
                f"without nn.{cell_class(cell)}…])" if o1 else
                f"put it on AMP's black list: amp.custom_mixed_precision(net, black_list=amp.get_black_list() + "
                f"[nn.{cell_class(cell)}])")
        return (f"this backend has no {low} kernel for the {op}{cell}, so AMP's {low} only adds casts around it: keep "
                f"that cell in float32 — {keep} — or choose a lower AMP level (level=\"O0\" in "
                "amp.build_train_network on a device without float16 kernels)")
    if chain.kind == "no-op":
        return ("the tensor already has that dtype: convert the network once (amp.build_train_network level=\"O0\" "
                "for a network already converted by auto_mixed_precision/custom_mixed_precision/to_float)")
    return ("between consecutive float16 ops AMP casts to float32 and back: level O2 (the whole network in float16 "
            "but the black list) keeps them in float16, or amp.custom_mixed_precision with a white list covering the "
            f"ops between them (around {cell})")
