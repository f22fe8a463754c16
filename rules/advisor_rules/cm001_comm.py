"""CM001: communication the configured layout should not need — redistribution chains, exposed gradient AllReduce."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_core.analyses.step_time import step_windows
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
    cell_path_in_layer,
    ir_location,
    kernel_scope,
    kernel_time_by_scope,
    layer_of_scope,
    severity_for_share,
    source_location,
)

_COMM = {"AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "AlltoAllV", "_AlltoAll", "Send", "Receive", "Broadcast"}
_LAYER_PARAM = re.compile(r"layers\.(\d+)\.")


@dataclass
class _Chain:
    key: str
    producer: Any
    consumer: Any
    ops: list[Any] = field(default_factory=list)
    layers: set[int] = field(default_factory=set)
    count: int = 0


class UnexpectedCommunication(Rule):
    """Communication the parallel layout should not need: redistribution chains and an exposed gradient AllReduce.

    What
        (A) In the parallel graph (``step_parallel_end_*.ir``), communication the
        auto-parallel pass inserted to *rearrange* a tensor — instance names
        ``redistribution_op_<hash><Op>`` — as opposed to what an operator's own
        strategy requires (``forward_op_*``, e.g. the AllReduce after a
        row-parallel MatMul) or data-parallel gradient reduction (``mirror_op``).
        Each chain is reported with the two ops whose strategies disagree (the
        producer's layout and the consumer's ``in_strategy``), per layer, with the
        communication time it costs (its HCCL kernels joined by name).
        (B) Gradient AllReduce not fused into split buckets: all gradients are
        reduced after the last backward kernel, exposed in the step tail, while
        ``parallel.all_reduce_fusion_config`` is unset. The rule computes the split
        point that hides the most of it behind the remaining backward compute.

    Why
        A mismatched ``shard()`` strategy makes MindSpore insert AllGather +
        Split/Concat around the op in every layer — pure overhead (MindFormers guide:
        "if there is a sequence of communication operators at unreasonable
        locations, it is likely that the operator slicing strategy configured in
        the model is incorrect"). An unsplit gradient AllReduce cannot overlap the
        backward pass; the seed's ResNet-50 8P case cut the tail from 6.15 ms to
        4.20 ms with ``all_reduce_fusion_config=[85, 160]``.

    Example
        ``feed_forward.mul`` shard ``((2, 1, 1), (2, 1, 1))`` between column-parallel
        ``w1``/``w3`` (output split over mp=4) and row-parallel ``w2``:
        ``redistribution_op_…AllGather`` + ``…Split`` in all 32 layers, 3.1 ms per step.

    Fix
        (A) Give the op the strategy its neighbours produce (model code, display
        only). (B) A safe patch adds ``parallel.all_reduce_fusion_config: [k, P]``
        (P = number of parameters): gradients of parameters k…P−1 (the later layers,
        whose gradients are ready first) are reduced while earlier layers'
        backward still runs.
    """

    code = "CM001"
    name = "unexpected-communication"
    summary = "redistribution chains or an exposed gradient AllReduce"
    severity = Severity.MEDIUM
    requires = Requirements(
        any_of=(
            Need.ir("parallel"),
            Need.ir("frontend"),
            Need.table("kernels", ("name", "accelerator_core", "start_ns", "duration_us")),
        )
    )
    tags = ("communication", "parallel")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        min_share_pct: float = Field(1.0, ge=0, description="report communication costing at least this share of the step, %")
        hccs_gbps: float = Field(56.0, gt=0, description="bandwidth assumed for redistribution time without a profile, GB/s")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        found = False
        for f in self._redistribution(ctx):
            found = True
            yield f
        tail = self._gradient_tail(ctx)
        if tail is not None:
            found = True
            yield tail
        if not found and not ctx.skip_reasons:
            ctx.skip("no redistribution chain, and gradient AllReduce is overlapped or absent")

    # -- (A) redistribution --------------------------------------------------------------------
    def _redistribution(self, ctx: RuleContext) -> Iterable[Finding]:
        ir = ctx.ir_graph("parallel") or ctx.ir_graph("frontend")
        if ir is None:
            ctx.skip("no parallel IR (step_parallel_end_*.ir): redistribution chains are read from the graph")
            return
        redis = [n for n in ir.iter_nodes() if (n.instance_name or "").startswith("redistribution_op")]
        if not redis:
            return
        rset = {id(n) for n in redis}
        consumers: dict[int, list[Any]] = {}
        for n in ir.iter_nodes():
            for ref in n.operand_refs:
                p = ir.resolve(n, ref) if ref.kind == "node" else None
                if p is not None and hasattr(p, "op"):
                    consumers.setdefault(id(p), []).append(n)
        chains: dict[str, _Chain] = {}
        for n in redis:
            # the chain's head: a redistribution node whose producer is not one
            prods = [ir.resolve(n, r) for r in n.operand_refs if r.kind == "node"]
            prods = [p for p in prods if p is not None and hasattr(p, "op")]
            if any(id(p) in rset for p in prods):
                continue
            producer = next((p for p in prods), None)
            ops = [n]
            frontier = [n]
            consumer = None
            while frontier:
                nxt = []
                for m in frontier:
                    for c in consumers.get(id(m), []):
                        if id(c) in rset:
                            if c not in ops:
                                ops.append(c)
                                nxt.append(c)
                        elif c.op not in ("Depend", "UpdateState", "MakeTuple") and consumer is None:
                            consumer = c
                frontier = nxt
            key = ".".join(cell_path_in_layer(consumer.scope if consumer is not None else n.scope)) or (consumer.op if consumer else n.op)
            ch = chains.setdefault(key, _Chain(key, producer, consumer))
            ch.ops.extend(ops)
            ch.count += 1
            lay = layer_of_scope(n.scope)
            if lay is not None:
                ch.layers.add(lay)
        rank = next(iter(ctx.run), None) if ctx.run is not None else None
        times, steps = kernel_time_by_scope(rank) if rank is not None else ({}, 1)
        step_us = ctx.step_time_us(rank) if rank is not None else None
        for ch in chains.values():
            comm_nodes = [o for o in ch.ops if o.op in _COMM]
            measured = [times[o.kernel_full_name] for o in ch.ops if o.kernel_full_name in times]
            if measured:
                cost = sum(measured) / steps
                how = f"{len(measured)} kernel(s) measured"
            else:
                nbytes = 0.0
                for o in comm_nodes:
                    t = o.out_types[0] if o.out_types else None
                    shape = getattr(t, "shape", None) or ()
                    n_el = float(np.prod([d for d in shape if d and d > 0])) if shape else 0.0
                    nbytes += n_el * 2
                cost = nbytes / (self.options.hccs_gbps * 1e3)
                how = f"estimated from {nbytes / 1e6:.1f} MB at {self.options.hccs_gbps:.0f} GB/s"
            share = 100.0 * cost / step_us if step_us else None
            if share is not None and share < self.options.min_share_pct:
                ctx.skip(f"redistribution before {ch.key} costs {share:.2f}% of the step (< {self.options.min_share_pct}%)")
                continue
            prod, cons = ch.producer, ch.consumer
            ps = _strategy(prod)
            cs = _strategy(cons)
            comm_names = sorted({o.op for o in comm_nodes}) or sorted({o.op for o in ch.ops})
            lay = f" in {len(ch.layers)} layer(s)" if ch.layers else ""
            msg = [
                f"{ch.count} redistribution chain(s){lay}: {' + '.join(sorted({o.op for o in ch.ops}))} "
                f"({', '.join(o.instance_name for o in ch.ops[:3])}{' …' if len(ch.ops) > 3 else ''}) rearrange the tensor between "
                f"{_name(prod)} (strategy {ps or 'unknown'}) and {_name(cons)} (in_strategy {cs or 'unknown'}).",
                f"Communication time: {cost:.1f} µs per step ({how})" + (f", {share:.2f}% of the step." if share is not None else "."),
                f"Give {_name(cons)} a strategy that consumes {_name(prod)}'s layout as is"
                + (f" (e.g. the model-parallel split of its producer, {ps})" if ps else "")
                + "; the fix is in the model's shard() call, no config key controls it.",
            ]
            locations: list[Location] = []
            if cons is not None:
                locations.append(ir_location(str(ir.path), cons, note="consumer: in_strategy disagrees"))
                s = source_location(cons)
                if s:
                    locations.append(s)
            if prod is not None:
                locations.append(ir_location(str(ir.path), prod, note="producer"))
            for o in ch.ops[:3]:
                locations.append(ir_location(str(ir.path), o, note="inserted by redistribution"))
            yield Finding(
                code=self.code,
                rule=self.name,
                title=f"redistribution ({'/'.join(comm_names)}) before {ch.key}{lay}: strategies disagree",
                message=" ".join(msg),
                severity=severity_for_share(share),
                saving_us=cost,
                step_time_us=step_us,
                confidence=0.85 if measured else 0.6,
                evidence=[
                    Evidence(name="redistribution_ops", value=len(ch.ops)),
                    Evidence(name="communication_time_per_step", value=round(cost, 3), unit="µs", source=how),
                    Evidence(name="producer_strategy", value=str(ps)),
                    Evidence(name="consumer_in_strategy", value=str(cs)),
                ],
                locations=locations,
                tags=list(self.tags),
            )

    # -- (B) exposed gradient AllReduce ---------------------------------------------------------
    def _gradient_tail(self, ctx: RuleContext) -> Finding | None:
        if ctx.run is None:
            return None
        cfg = ctx.config
        if cfg is not None and cfg.located("parallel.all_reduce_fusion_config").present:
            val = cfg.get("parallel.all_reduce_fusion_config")
            if isinstance(val, list) and len(val) > 1:
                return None  # already split; lint checks its order and range
        best = None
        for rank in ctx.run:
            res = self._tail_of(rank)
            if res is not None and (best is None or res["exposed_us"] > best["exposed_us"]):
                best = res | {"rank": rank}
        if best is None:
            return None
        step_us = best["step_us"]
        share = 100.0 * best["exposed_us"] / step_us if step_us else None
        if share is not None and share < self.options.min_share_pct:
            ctx.skip(f"gradient AllReduce exposed {best['exposed_us']:.0f} µs per step ({share:.2f}% < {self.options.min_share_pct}%)")
            return None
        split = self._best_split(ctx, best)
        msg = [
            f"Gradient AllReduce runs {best['ar_us']:.1f} µs per step, of which {best['exposed_us']:.1f} µs "
            f"is exposed after the last backward kernel"
            + (f" ({share:.1f}% of the step)" if share is not None else "")
            + "; all_reduce_fusion_config is not set, so gradients are reduced in one bucket at the end."
        ]
        patches = []
        saving = best["exposed_us"]
        if split is not None:
            k, total, new_exposed = split
            saving = max(best["exposed_us"] - new_exposed, 0.0)
            msg.append(
                f"Splitting at parameter {k} of {total} lets the later layers' gradients ({total - k} parameters) reduce while "
                f"the earlier layers' backward still runs: exposed tail ≈ {new_exposed:.1f} µs."
            )
            if cfg is not None:
                p = ctx.config_patch(
                    f"add parallel.all_reduce_fusion_config: [{k}, {total}]",
                    [("parallel.all_reduce_fusion_config", [k, total])],
                    safety=Safety.SAFE,
                    description="two gradient AllReduce buckets; the second overlaps the remaining backward pass",
                )
                if p:
                    patches.append(p)
        rank = best["rank"]
        src = rank.table_source("kernels")
        locations = []
        if cfg is not None:
            loc = ctx.config_location("parallel.all_reduce_fusion_config", note="absent: one gradient bucket")
            if loc:
                locations.append(loc)
        locations.append(Location(kind="profile", path=str(src[0]) if src else None, table="kernels",
                                  op=best["ar_name"], rank=rank.rank_id, note="gradient AllReduce in the step tail"))
        return Finding(
            code=self.code,
            rule=self.name,
            title=f"gradient AllReduce exposed in the step tail: {best['exposed_us'] / 1000:.2f} ms per step",
            message=" ".join(msg),
            severity=severity_for_share(share),
            saving_us=saving,
            step_time_us=step_us,
            confidence=0.8 if split is not None else 0.6,
            evidence=[
                Evidence(name="gradient_allreduce_time", value=round(best["ar_us"], 3), unit="µs"),
                Evidence(name="exposed_time", value=round(best["exposed_us"], 3), unit="µs"),
                Evidence(name="backward_time", value=round(best["bwd_us"], 3), unit="µs"),
            ],
            locations=locations,
            patches=patches,
            rank=rank.rank_id,
            tags=list(self.tags),
        )

    @staticmethod
    def _tail_of(rank: Any) -> dict[str, Any] | None:
        cols = rank.columns("kernels") or []
        if not {"name", "accelerator_core", "start_ns", "duration_us"} <= set(cols):
            return None
        k = rank.table("kernels", ["name", "type", "accelerator_core", "start_ns", "duration_us"])
        k = k[k["start_ns"].notna()]
        is_comm = k["accelerator_core"].isin(["HCCL", "COMMUNICATION"])
        names = k["name"].astype(str)
        grad = is_comm & names.str.contains("allReduce", case=False) & names.str.contains("grad_reducer|Gradients", regex=True)
        if not grad.any():
            return None
        windows = step_windows(rank)
        start = k["start_ns"].astype("int64").to_numpy()
        end = start + np.round(k["duration_us"].to_numpy() * 1000).astype("int64")
        if windows is None:
            windows = pd.DataFrame({"step": [0], "start_ns": [int(start.min())], "end_ns": [int(end.max())]})
        comp = (~is_comm).to_numpy()
        bwd = names.str.contains("Gradients/", regex=False).to_numpy() & comp
        gmask = grad.to_numpy()
        ar_total, exposed_total, bwd_total, steps = 0.0, 0.0, 0.0, 0
        for w in windows.itertuples():
            in_w = (start >= w.start_ns) & (start < w.end_ns)
            if not (in_w & gmask).any():
                continue
            steps += 1
            cs, ce = start[in_w & comp], end[in_w & comp]
            order = np.argsort(cs)
            merged: list[list[int]] = []
            for s, e in zip(cs[order], ce[order]):
                if merged and s <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], e)
                else:
                    merged.append([int(s), int(e)])
            for s, e in zip(start[in_w & gmask], end[in_w & gmask]):
                covered = sum(max(0, min(e, me) - max(s, ms)) for ms, me in merged)
                ar_total += (e - s) / 1000.0
                exposed_total += (e - s - covered) / 1000.0
            bwd_total += float(np.sum(ce[bwd[in_w & comp]] - cs[bwd[in_w & comp]])) / 1000.0 if (bwd[in_w & comp]).any() else 0.0
        if not steps:
            return None
        from advisor_core.analyses.step_time import mean_step_time_us

        return {
            "ar_us": ar_total / steps,
            "exposed_us": exposed_total / steps,
            "bwd_us": bwd_total / steps,
            "step_us": mean_step_time_us(rank),
            "ar_name": kernel_scope(str(names[gmask].iloc[0])) or str(names[gmask].iloc[0]),
            "kernels": k,
        }

    def _best_split(self, ctx: RuleContext, tail: dict[str, Any]) -> tuple[int, int, float] | None:
        """Split point k over the parameter list minimising the exposed tail (two buckets)."""
        params = self._params(ctx)
        if not params or len(params) < 2:
            return None
        k = tail["kernels"]
        names = k["name"].astype(str)
        bwd = k[names.str.contains("Gradients/", regex=False) & ~k["accelerator_core"].isin(["HCCL", "COMMUNICATION"])]
        layer_bwd: dict[int, float] = {}
        for n, d in zip(bwd["name"].astype(str), bwd["duration_us"]):
            lay = layer_of_scope(kernel_scope(n))
            if lay is not None:
                layer_bwd[lay] = layer_bwd.get(lay, 0.0) + float(d)
        steps = max(len(step_windows(tail["rank"])) if step_windows(tail["rank"]) is not None else 1, 1)
        layer_bwd = {lay: v / steps for lay, v in layer_bwd.items()}
        total_bytes = sum(b for _, b, _ in params)
        if not total_bytes or not layer_bwd:
            return None
        per_byte = tail["ar_us"] / total_bytes
        best = None
        for i in range(1, len(params)):
            late = params[i:]
            early = params[:i]
            lays = [lay for _, _, lay in early if lay is not None]
            # The late bucket is ready once the backward of its layers is done; it overlaps the
            # backward of the earlier layers (the embedding's grad is small and ignored).
            overlap = sum(v for lay, v in layer_bwd.items() if lays and lay <= max(lays))
            late_ar = per_byte * sum(b for _, b, _ in late)
            early_ar = per_byte * sum(b for _, b, _ in early)
            exposed = max(0.0, late_ar - overlap) + early_ar
            if best is None or exposed < best[2] - 1e-9:
                best = (i, len(params), exposed)
        if best is None or best[2] >= tail["exposed_us"] * 0.98:
            return None
        return best

    @staticmethod
    def _params(ctx: RuleContext) -> list[tuple[str, float, int | None]]:
        """(name, bytes per rank, layer) in order of first use — from the IR, else from the config."""
        ir = ctx.ir_graph("frontend")
        out: list[tuple[str, float, int | None]] = []
        if ir is not None:
            for p in ir.params:
                if not getattr(p, "is_weight", False) and not getattr(p, "has_default", False):
                    continue
                name = p.name or ""
                if "." not in name or name.startswith(("adam", "moment", "accu", "global_step", "learning_rate", "scale_sense")):
                    continue
                shape = getattr(p.type, "shape", None) if p.type is not None else None
                if not shape or any(d < 0 for d in shape):
                    continue
                m = _LAYER_PARAM.search(name)
                out.append((name, float(np.prod(shape)) * 2, int(m.group(1)) if m else None))
            if out:
                return out
        cfg = ctx.config
        if cfg is None or not cfg.hidden_size or not cfg.num_layers:
            return []
        h, mp = cfg.hidden_size, cfg.model_parallel
        f, _ = cfg.ffn_hidden_size()
        q = (cfg.num_heads or 1) * (cfg.head_dim or 1)
        kv = (cfg.num_kv_heads or cfg.num_heads or 1) * (cfg.head_dim or 1)
        out.append(("model.tok_embeddings.embedding_weight", float((cfg.vocab_size or 0) * h) * 2, None))
        for i in range(cfg.num_layers):
            for nm, el in (("attention.wq.weight", q * h / mp), ("attention.wk.weight", kv * h / mp), ("attention.wv.weight", kv * h / mp),
                           ("attention.wo.weight", q * h / mp), ("feed_forward.w1.weight", (f or 0) * h / mp),
                           ("feed_forward.w2.weight", (f or 0) * h / mp), ("feed_forward.w3.weight", (f or 0) * h / mp),
                           ("attention_norm.weight", h), ("ffn_norm.weight", h)):
                out.append((f"model.layers.{i}.{nm}", float(el) * 2, i))
        out.append(("model.norm_out.weight", float(h) * 2, None))
        out.append(("lm_head.weight", float((cfg.vocab_size or 0) * h / mp) * 2, None))
        return out


def _strategy(node: Any) -> str | None:
    if node is None:
        return None
    st = node.strategy or {}
    val = st.get("in_strategy") or st.get("strategy") or node.primitive_attrs.get("in_strategy")
    if val is None:
        return None
    return str(val).replace("[", "(").replace("]", ")")


def _name(node: Any) -> str:
    if node is None:
        return "its neighbour"
    path = cell_path_in_layer(node.scope)
    return f"{'.'.join(path) + '.' if path else ''}{node.instance_name or node.op} ({node.op})"
