"""CT001: Cast operators that undo each other, do nothing, or fight the framework."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import (
    Evidence,
    Finding,
    Location,
    Need,
    Requirements,
    Rule,
    RuleContext,
    RuleOptions,
    Safety,
    Severity,
)
from advisor_rules._common import (
    ASSUMED_HBM_GBPS,
    PRECISION,
    cell_path_in_layer,
    ir_location,
    kernel_time_by_scope,
    layer_of_scope,
    severity_for_share,
    source_location,
    tensor_bytes,
    user_source,
)

_16BIT = {"float16", "bfloat16", "fp16", "bf16"}
# Config keys whose 32-bit setting makes MindFormers cast around a block, by the cell it lives in.
_CONFIG_CASTS = {
    "apply_rotary_emb": ("model.rotary_dtype", "rotary embedding"),
    "softmax": ("model.softmax_compute_type", "softmax"),
}


@dataclass
class _Chain:
    kind: str  # lossy-round-trip | lossless-round-trip | no-op | backend-fight | config
    nodes: list[Any]
    dtypes: list[str]
    key: str  # grouping key (same pattern across layers)
    config_key: str | None = None
    layers: set[int] = field(default_factory=set)
    path: str | None = None  # the IR file the chain was found in


def _dt(t: Any) -> str | None:
    return getattr(t, "dtype", None) if t is not None else None


class CastExcess(Rule):
    """Cast operators that undo each other, cast to the same type, or fight the framework's casts.

    What
        Reads the final front-end graph and the backend kernel graph and finds
        (1) Cast chains that come back to where they started — *lossy* when the
        middle type is less precise (``fp32→fp16→fp32`` silently drops precision
        and costs two kernels), *lossless* otherwise; (2) casts whose input and
        output dtype are equal; (3) a cast the user (or AMP) wrote immediately
        undone by a backend-inserted cast (``is_backend_cast: Bool(1)``) because the
        next kernel does not support that dtype; (4) cast pairs that a mixed-precision
        setting forces in every layer (``rotary_dtype: float32`` with a 16-bit
        ``compute_dtype`` casts q and k up and back down around the rotary embedding).
        Backward casts are attributed to their forward op by ``forward_unique_id``,
        not by scope (reused cells carry another instance's scope). With a profile
        the chains are joined to their Cast kernels for their time per step;
        without one, time is estimated from bytes moved at an assumed HBM bandwidth.

    Why
        Each Cast reads and writes the whole tensor: pure memory traffic with no
        compute. The seed: "If there are too many conversion operators (TransData
        and Cast) … delete the redundant Cast and TransData operators". A lossy
        round trip is also an accuracy bug.

    Example
        ``h = self.cast(x, ms.float16)`` followed by ``h = self.cast(h, ms.float32)``
        (``case_cast.py:20–21``): the fp32 input loses its low mantissa bits and two
        Cast kernels run for nothing — MindSpore's optimizer keeps this pair because
        removing it would change the result.

    Fix
        For config-driven casts, a patch sets the key to the compute dtype (unsafe:
        precision changes). For model-code casts, the finding gives the source line
        to delete (display only).
    """

    code = "CT001"
    name = "cast-excess"
    summary = "redundant or fighting Cast operators"
    severity = Severity.MEDIUM
    requires = Requirements(any_of=(Need.ir("frontend"), Need.ir("backend"), Need.table("kernels", ("name", "type", "duration_us"))))
    tags = ("compute", "precision", "cast")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        min_share_pct: float = Field(0.0, ge=0, description="report chains costing at least this share of the step, %")
        hbm_gbps: float = Field(ASSUMED_HBM_GBPS, gt=0, description="bandwidth assumed for Cast time without a profile, GB/s")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        graphs = []
        for stage in ("frontend", "backend"):
            ir = ctx.ir_graph(stage)
            if ir is not None:
                graphs.append((stage, ir))
        if not graphs:
            ctx.skip("no IR dump: Cast chains are read from the graph (kernel time alone cannot tell a redundant Cast)")
            return
        rank = next(iter(ctx.run), None) if ctx.run is not None else None
        times, steps = kernel_time_by_scope(rank) if rank is not None else ({}, 1)
        step_us = ctx.step_time_us(rank) if rank is not None else None

        chains: dict[str, _Chain] = {}
        seen_scopes: set[str] = set()
        for _stage, ir in graphs:
            fwd_by_uid = {n.unique_id: n for n in ir.iter_nodes() if n.unique_id}
            for chain in self._chains(ir, ctx, fwd_by_uid):
                scopes = tuple(n.scope or "" for n in chain.nodes)
                if any(s in seen_scopes for s in scopes if s):
                    continue  # the same casts survive into the backend graph: count them once
                seen_scopes.update(s for s in scopes if s)
                key = f"{chain.kind}|{chain.key}"
                if key in chains:
                    chains[key].nodes.extend(chain.nodes)
                    chains[key].layers |= chain.layers
                else:
                    chain.path = str(ir.path)
                    chains[key] = chain
        if not chains:
            ctx.skip("no redundant, no-op or fighting Cast chain in the IR")
            return
        for chain in chains.values():
            f = self._finding(ctx, chain, times, steps, step_us)
            if f is not None:
                yield f

    # -- detection --------------------------------------------------------------------------------
    def _chains(self, ir: Any, ctx: RuleContext, fwd_by_uid: dict[str, Any]) -> Iterable[_Chain]:
        casts = ir.nodes_by_op("Cast")
        cfg = ctx.config
        compute = cfg.compute_dtype if cfg is not None else None
        used: set[int] = set()
        for node in casts:
            if id(node) in used:
                continue
            src_dt = _dt(node.in_types[0] if node.in_types else None)
            dst_dt = _dt(node.out_types[0] if node.out_types else None)
            if src_dt is None or dst_dt is None:
                continue
            prod = None
            for ref in node.operand_refs[:1]:
                p = ir.resolve(node, ref)
                prod = p if getattr(p, "op", None) == "Cast" else None
            layer = self._layer(node, fwd_by_uid)
            if src_dt == dst_dt:
                used.add(id(node))
                yield _Chain("no-op", [node], [src_dt, dst_dt], self._key(node, fwd_by_uid), layers=_set(layer))
                continue
            if prod is not None and id(prod) not in used:
                p_src = _dt(prod.in_types[0] if prod.in_types else None)
                if p_src == dst_dt and p_src is not None:
                    used.update({id(node), id(prod)})
                    if node.is_backend_cast and not prod.is_backend_cast:
                        kind = "backend-fight"
                    else:
                        kind = "lossy-round-trip" if PRECISION.get(src_dt, 0) < PRECISION.get(p_src, 0) else "lossless-round-trip"
                    yield _Chain(kind, [prod, node], [p_src, src_dt, dst_dt], self._key(node, fwd_by_uid), layers=_set(layer))
                    continue
        # Config-driven pairs: Cast up → op(s) → Cast down inside a cell a config key controls.
        if cfg is None or compute not in _16BIT:
            return
        for node in casts:
            if id(node) in used:
                continue
            path = cell_path_in_layer(self._scope(node, fwd_by_uid))
            for cell, (key, what) in _CONFIG_CASTS.items():
                if cell in path and str(cfg.get(key, "")).lower() in ("float32", "fp32"):
                    used.add(id(node))
                    src_dt = _dt(node.in_types[0] if node.in_types else None) or "?"
                    dst_dt = _dt(node.out_types[0] if node.out_types else None) or "?"
                    yield _Chain("config", [node], [src_dt, dst_dt], f"{key}|{'.'.join(path)}", config_key=key,
                                 layers=_set(self._layer(node, fwd_by_uid)))

    @staticmethod
    def _scope(node: Any, fwd_by_uid: dict[str, Any]) -> str | None:
        fid = node.forward_unique_id
        if fid and fid in fwd_by_uid:
            return fwd_by_uid[fid].scope
        return node.scope

    def _layer(self, node: Any, fwd_by_uid: dict[str, Any]) -> int | None:
        return layer_of_scope(self._scope(node, fwd_by_uid))

    def _key(self, node: Any, fwd_by_uid: dict[str, Any]) -> str:
        scope = self._scope(node, fwd_by_uid) or ""
        path = cell_path_in_layer(scope)
        if path:
            return ".".join(path)
        src = user_source(node)
        return f"{src[0]}:{src[1]}" if src else scope

    # -- reporting --------------------------------------------------------------------------------
    def _finding(self, ctx: RuleContext, chain: _Chain, times: dict[str, float], steps: int, step_us: float | None) -> Finding | None:
        nodes = chain.nodes
        measured = [times[n.kernel_full_name] for n in nodes if n.kernel_full_name in times]
        if measured:
            cost = sum(measured) / steps
            how = f"{len(measured)} Cast kernel(s) measured"
        else:
            nbytes = 0.0
            for n in nodes:
                i = tensor_bytes(getattr(n.in_types[0], "shape", None) if n.in_types else None, _dt(n.in_types[0]) if n.in_types else None)
                o = tensor_bytes(getattr(n.out_types[0], "shape", None) if n.out_types else None, _dt(n.out_types[0]) if n.out_types else None)
                nbytes += (i or 0.0) + (o or 0.0)
            cost = nbytes / (self.options.hbm_gbps * 1e3)  # bytes / (GB/s) → µs
            how = f"estimated from {nbytes / 1e6:.2f} MB moved at {self.options.hbm_gbps:.0f} GB/s"
        share = 100.0 * cost / step_us if step_us else None
        if share is not None and share < self.options.min_share_pct:
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
        sev = severity_for_share(share)
        if chain.kind == "lossy-round-trip" and sev == Severity.LOW:
            sev = Severity.MEDIUM  # an accuracy bug as well as wasted time
        return Finding(
            code=self.code,
            rule=self.name,
            title=titles[chain.kind],
            message=" ".join(msg),
            severity=sev,
            saving_us=cost,
            step_time_us=step_us,
            confidence=0.9 if measured else 0.6,
            evidence=[
                Evidence(name="cast_nodes", value=len(nodes)),
                Evidence(name="cast_time_per_step", value=round(cost, 3), unit="µs", source=how),
                Evidence(name="dtypes", value=chain_txt),
            ]
            + ([Evidence(name="layers", value=len(layers))] if layers else []),
            locations=locations,
            patches=patches,
            tags=list(self.tags),
        )


def _set(v: int | None) -> set[int]:
    return set() if v is None else {v}

