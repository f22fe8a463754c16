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
    StageEvidence,
    cell_path_in_layer,
    fill_stages_without_ir,
    ir_location,
    layer_of_scope,
    one_f_one_b_step_saving,
    pipeline_micro_batches,
    severity_for_share,
    source_location,
    stage_evidence,
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
    inner: list[Any] = field(default_factory=list)  # ops running in 32 bits between a config chain's casts
    cost: dict[int, float] = field(default_factory=dict)  # µs per step by pipeline stage (casts + inner ops)
    inner_cost: dict[int, float] = field(default_factory=dict)  # the inner ops' share of ``cost``
    measured: bool = False
    how: str = ""


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
        not by scope (reused cells carry another instance's scope).

        Time per step: with a profile the chains are joined to their Cast kernels
        (``kernel_details`` durations summed over the profiled steps ÷ steps). For a
        config-forced pair the ops *between* the casts (forward and backward, e.g.
        ``RotaryMul``/``RotaryMulGrad``) run on 32-bit data; they are memory-bound, so in
        the compute dtype their time beyond the fixed per-launch cost (the shortest
        kernel of the profile) shrinks with their bytes (½ when every float operand is
        32-bit) — that is saved too. With pipeline parallel, one rank per stage is
        measured with its own stage's IR, and the per-stage savings become step time as
        1F1B does: the slowest stage runs every micro batch on the critical path, the
        others one, so equal stages give the per-rank saving × (m + pp − 1)/m.
        Without a profile, time is estimated from bytes moved at an assumed HBM
        bandwidth; without IR, from the config's dims (``advisor lint``).

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
    requires = Requirements(
        any_of=(
            Need.ir("frontend"),
            Need.ir("backend"),
            Need.table("kernels", ("name", "type", "duration_us")),
            Need.config("model.rotary_dtype"),
            Need.config("model.softmax_compute_type"),
        )
    )
    tags = ("compute", "precision", "cast")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        min_share_pct: float = Field(0.0, ge=0, description="report chains costing at least this share of the step, %")
        hbm_gbps: float = Field(ASSUMED_HBM_GBPS, gt=0, description="bandwidth assumed for Cast time without a profile, GB/s")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        units = stage_evidence(ctx, launches=True)
        if not any(u.dumps is not None for u in units):
            found = False
            if ctx.config is not None:
                for f in self._config_only(ctx):
                    found = True
                    yield f
            if not found:
                ctx.skip("no IR dump: Cast chains are read from the graph (kernel time alone cannot tell a redundant Cast); "
                         "the config forces no extra casts")
            return
        first = next((u.rank for u in units if u.rank is not None), None)
        step_us = ctx.step_time_us(first) if first is not None else None

        chains: dict[str, _Chain] = {}
        for unit in units:
            if unit.dumps is None:
                continue
            for key, chain in self._detect(ctx, unit.dumps).items():
                self._cost(chain, unit)
                main = chains.get(key)
                if main is None:
                    chains[key] = chain
                    continue
                main.nodes.extend(chain.nodes)
                main.inner.extend(chain.inner)
                main.layers |= chain.layers
                main.dtypes = main.dtypes or chain.dtypes
                main.cost.update(chain.cost)
                main.inner_cost.update(chain.inner_cost)
                main.measured = main.measured or chain.measured
        if not chains:
            ctx.skip("no redundant, no-op or fighting Cast chain in the IR")
            return
        busy = {u.stage: u.busy_us or 0.0 for u in units}
        micro = pipeline_micro_batches(ctx, units)
        for chain in chains.values():
            fill_stages_without_ir(ctx, chain.cost, units)
            saving = one_f_one_b_step_saving(chain.cost, busy, micro) if len(chain.cost) > 1 else sum(chain.cost.values())
            f = self._finding(ctx, chain, saving, step_us, len(units), micro)
            if f is not None:
                yield f

    # -- detection over one rank's graphs ---------------------------------------------------------------
    def _detect(self, ctx: RuleContext, dumps: Any) -> dict[str, _Chain]:
        chains: dict[str, _Chain] = {}
        seen_scopes: set[str] = set()
        for stage in ("frontend", "backend"):
            ir = ctx.ir_graph(stage, dumps)
            if ir is None:
                continue
            fwd_by_uid = {n.unique_id: n for n in ir.iter_nodes() if n.unique_id}
            for chain in self._chains(ir, ctx, fwd_by_uid):
                scopes = tuple(n.scope or "" for n in chain.nodes + chain.inner)
                if any(s in seen_scopes for s in scopes if s):
                    continue  # the same casts survive into the backend graph: count them once
                seen_scopes.update(s for s in scopes if s)
                key = f"{chain.kind}|{chain.key}"
                if key in chains:
                    chains[key].nodes.extend(chain.nodes)
                    chains[key].inner.extend(chain.inner)
                    chains[key].layers |= chain.layers
                    chains[key].dtypes = chains[key].dtypes or chain.dtypes
                else:
                    chain.path = str(ir.path)
                    chains[key] = chain
        # inner ops alone (no cast of that key found) are not a finding
        return {k: c for k, c in chains.items() if c.nodes}

    def _cost(self, chain: _Chain, unit: StageEvidence) -> None:
        """µs per step of the chain on ``unit``'s stage: its Cast kernels, plus what 16-bit inner ops would save.

        An op between a config chain's up- and down-cast runs on 32-bit data; in the compute
        dtype it would move ``ratio`` of the bytes. Such ops are memory-bound, so its time
        beyond the fixed per-launch cost shrinks by the same ratio.
        """
        names = dict.fromkeys(n.kernel_full_name for n in chain.nodes if n.kernel_full_name in unit.times)
        measured = [unit.times[name] for name in names]
        if measured:
            cast_us = sum(measured) / unit.steps
            inner_us = 0.0
            inner = {n.kernel_full_name: n for n in chain.inner if n.kernel_full_name in unit.times}
            for name, n in inner.items():
                total = unit.times[name] - unit.launches.get(name, 0) * unit.fixed_us
                inner_us += max(total, 0.0) * (1.0 - _bytes_ratio_16bit(n)) / unit.steps
            chain.cost[unit.stage] = cast_us + inner_us
            chain.inner_cost[unit.stage] = inner_us
            chain.measured = True
            chain.how = f"{len(measured)} Cast kernel(s) measured"
            if inner_us:
                chain.how += f" + {len(chain.inner)} 32-bit op(s) at 16-bit bytes (fixed {unit.fixed_us:.1f} µs/launch)"
            return
        nbytes = 0.0
        for n in chain.nodes:
            i = tensor_bytes(getattr(n.in_types[0], "shape", None) if n.in_types else None, _dt(n.in_types[0]) if n.in_types else None)
            o = tensor_bytes(getattr(n.out_types[0], "shape", None) if n.out_types else None, _dt(n.out_types[0]) if n.out_types else None)
            nbytes += (i or 0.0) + (o or 0.0)
        chain.cost[unit.stage] = nbytes / (self.options.hbm_gbps * 1e3)  # bytes / (GB/s) → µs
        chain.how = f"estimated from {nbytes / 1e6:.2f} MB moved at {self.options.hbm_gbps:.0f} GB/s"

    # -- config alone -------------------------------------------------------------------------------
    def _config_only(self, ctx: RuleContext) -> Iterable[Finding]:
        """Mixed-precision keys that make every layer cast up and back down (estimated time)."""
        cfg = ctx.config
        assert cfg is not None
        compute = cfg.compute_dtype
        if compute not in _16BIT:
            return
        h, s, b, mp = cfg.hidden_size or 0, cfg.seq_length or 0, cfg.micro_batch_size, cfg.model_parallel
        q = (cfg.num_heads or 1) * (cfg.head_dim or 1)
        kv = (cfg.num_kv_heads or cfg.num_heads or 1) * (cfg.head_dim or 1)
        layers = -(-(cfg.num_layers or 0) // max(cfg.pipeline_stages, 1))
        micro = cfg.micro_batch_num if cfg.pipeline_stages > 1 else cfg.gradient_accumulation_steps
        checks = []
        if str(cfg.get("model.rotary_dtype", "")).lower() in ("float32", "fp32"):
            # q and k up (2→4 bytes) and back down (4→2), forward and backward.
            elements = b * s * (q + kv) / mp
            checks.append(("model.rotary_dtype", "rotary embedding", 4, elements))
        fa = cfg.get("model.use_flash_attention")
        if str(cfg.get("model.softmax_compute_type", "")).lower() in ("float32", "fp32") and fa is False:
            heads = (cfg.num_heads or 1) / mp
            checks.append(("model.softmax_compute_type", "softmax", 2, b * heads * s * s))
        for key, what, casts, elements in checks:
            nbytes = elements * 6 * casts * layers * max(micro, 1)
            cost = nbytes / (self.options.hbm_gbps * 1e3)
            loc = ctx.config_location(key)
            patch = ctx.config_patch(
                f"set {key.split('.', 1)[1]} to {compute}",
                [(key, compute)],
                safety=Safety.UNSAFE,
                description=f"run the {what} in {compute} like the rest of the model (precision change)",
            )
            yield Finding(
                code=self.code,
                rule=self.name,
                title=f"{key.split('.', 1)[1]}: float32 in a {compute} model forces Cast pairs around the {what} in every layer",
                message=(
                    f"With compute_dtype {compute}, {key.split('.', 1)[1]}: float32 makes MindFormers cast the {what}'s inputs "
                    f"to float32 and back in every layer, forward and backward: about {casts} Cast kernels per layer and "
                    f"{nbytes / 1e9:.1f} GB of memory traffic per step on each rank ({layers} layers × {max(micro, 1)} micro "
                    f"batch(es)), roughly {cost / 1000:.2f} ms at {self.options.hbm_gbps:.0f} GB/s. It is a precision choice: "
                    "keep it if the loss curve needs it."
                ),
                severity=Severity.LOW,
                saving_us=cost,
                confidence=0.5,
                evidence=[
                    Evidence(name="compute_dtype", value=compute),
                    Evidence(name="casts_per_layer", value=casts),
                    Evidence(name="bytes_per_step", value=round(nbytes), unit="bytes", source="config dims"),
                ],
                locations=[loc] if loc else [],
                patches=[patch] if patch else [],
                tags=list(self.tags),
            )

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
        active = {cell: key for cell, (key, _what) in _CONFIG_CASTS.items() if str(cfg.get(key, "")).lower() in ("float32", "fp32")}
        if not active:
            return
        for node in casts:
            if id(node) in used:
                continue
            path = cell_path_in_layer(self._scope(node, fwd_by_uid))
            for cell, key in active.items():
                if cell in path:
                    used.add(id(node))
                    src_dt = _dt(node.in_types[0] if node.in_types else None) or "?"
                    dst_dt = _dt(node.out_types[0] if node.out_types else None) or "?"
                    yield _Chain("config", [node], [src_dt, dst_dt], f"{key}|{'.'.join(path[:path.index(cell) + 1])}",
                                 config_key=key, layers=_set(self._layer(node, fwd_by_uid)))
        # The ops between those casts (forward and backward) run on 32-bit data: they are part of the cost.
        for node in ir.iter_nodes():
            if node.op in ("Cast", "Load") or node.kernel_full_name is None:
                continue
            if not any(_dt(t) == "Float32" for t in node.in_types):
                continue
            path = cell_path_in_layer(self._scope(node, fwd_by_uid))
            for cell, key in active.items():
                if cell in path:
                    yield _Chain("config", [], [], f"{key}|{'.'.join(path[:path.index(cell) + 1])}", config_key=key,
                                 inner=[node], layers=_set(self._layer(node, fwd_by_uid)))

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
    def _finding(self, ctx: RuleContext, chain: _Chain, cost: float, step_us: float | None, n_stages: int,
                 micro: int) -> Finding | None:
        nodes = chain.nodes
        how = chain.how
        if n_stages > 1 and len(chain.cost) > 1:
            per = ", ".join(f"stage {s}: {c:.1f}" for s, c in sorted(chain.cost.items()))
            how += (f"; kernel µs per step by pipeline stage ({per}) → step time under 1F1B with {micro} micro batches "
                    "(the slowest stage carries every micro batch, the others one)")
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
        inner = sum(chain.inner_cost.values())
        if chain.inner and inner > 0:
            ops = sorted({n.op for n in chain.inner})
            msg.append(f"Between the casts {len(chain.inner)} op(s) ({', '.join(ops)}) run on 32-bit data; in "
                       f"{ctx.config.compute_dtype if ctx.config is not None else '16 bits'} they would move half the bytes "
                       f"({inner:.1f} µs per step of the kernel time below).")
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
            confidence=0.9 if chain.measured else 0.6,
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



def _bytes_ratio_16bit(node: Any) -> float:
    """Bytes ``node`` would move with its 32-bit float tensors in 16 bits, over the bytes it moves now."""
    now = after = 0.0
    for t in [*node.in_types, *node.out_types]:
        b = tensor_bytes(getattr(t, "shape", None), _dt(t))
        if not b:
            continue
        now += b
        after += b / 2 if _dt(t) == "Float32" else b
    return after / now if now else 0.5
