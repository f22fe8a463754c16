"""CM001: communication the configured layout should not need — redistribution chains, exposed gradient AllReduce."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd
from pydantic import Field

from advisor_core.analyses.step_time import mean_step_time_us, step_windows
from advisor_core.engine import (
    Evidence,
    Finding,
    Location,
    Need,
    Patch,
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
    ir_parameters,
    is_model_weight,
    kernel_cell,
    kernel_scope,
    layer_of_scope,
    llama_parameters,
    one_f_one_b_step_saving,
    severity_for_share,
    source_location,
    stage_busy_and_micro,
    stage_representatives,
)

_COMM = {"AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "AlltoAllV", "_AlltoAll", "Send", "Receive", "Broadcast"}
_COMM_CORES = ["HCCL", "COMMUNICATION"]
# Ops a tensor redistribution is made of (MindSpore's TensorRedistribution): collectives and data movement.
_REDIS_OP = re.compile(r"/(AllGather|AllToAll|AlltoAll|AlltoAllV|ReduceScatter|Split|SplitV|Concat|StridedSlice|Slice)-op\d+$")
_GRAD_REDUCER = re.compile(r"grad_reducer|GradReducer", re.I)
_LAYER_PARAM = re.compile(r"^(?:.*\.)?layers\.(\d+)\.(.*)$")
_LAYER_INDEX = re.compile(r"/\d+-(\w+)(?=/|$)")
MAX_BUCKETS = 8  # HCCL gradient segmentation supports at most 8 segments


@dataclass
class _Chain:
    key: str
    producer: Any
    consumer: Any
    ops: list[Any] = field(default_factory=list)
    layers: set[int] = field(default_factory=set)
    count: int = 0
    cells: set[str] = field(default_factory=set)  # consumer cell scopes (one per layer)
    consumer_scopes: set[str] = field(default_factory=set)
    gather: int = 1  # devices the tensor is gathered from
    concat_axis: int | None = None
    ir: Any = None


class UnexpectedCommunication(Rule):
    """Communication the parallel layout should not need: redistribution chains and an exposed gradient AllReduce.

    What
        (A) In the parallel graph (``step_parallel_end_*.ir``, one rank per pipeline
        stage), communication the auto-parallel pass inserted to *rearrange* a tensor —
        instance names ``redistribution_op_<hash><Op>`` — as opposed to what an
        operator's own strategy requires (``forward_op_*``) or data-parallel gradient
        reduction (``mirror_op``). Each chain is reported with the two ops whose
        strategies disagree, per layer. (B) The gradient AllReduce of the
        ``grad_reducer`` (``DistributedGradReducer``) exposed after the last backward
        kernel while ``parallel.all_reduce_fusion_config`` is unset.

    Why
        A mismatched ``shard()`` strategy makes MindSpore gather the tensor (AllGather +
        Split + Concat), run the op on the whole axis and slice the result back
        (StridedSlice) — in the forward and again for the gradient, in every layer and
        micro batch, blocking the compute stream (MindFormers guide: "if there is a
        sequence of communication operators at unreasonable locations, it is likely
        that the operator slicing strategy configured in the model is incorrect"). One
        gradient bucket starts only once the last gradient exists, so its whole transfer
        is exposed; split buckets overlap the rest of the backward (seed: ResNet-50 8P
        tail 6.15 ms → 4.20 ms with ``all_reduce_fusion_config=[85, 160]``).

    Example
        ``feed_forward.mul`` shard ``((2, 1, 1), (2, 1, 1))`` between column-parallel
        ``w1``/``w3`` (output split over mp=2 on the last axis) and row-parallel ``w2``.

    Fix
        (A) Give the consumer the layout its producers already have: its ``in_strategy``
        with the gathered axis split over the group (a display-only patch: the strategy
        is set in the model's ``shard()`` call). (B) A safe patch adds
        ``parallel.all_reduce_fusion_config``: split points over the rank's parameter
        list in order of first use (bucket i holds parameters [kᵢ₋₁, kᵢ), the last one
        [kₙ, P)); buckets are reduced in the order their gradients become ready — the
        later layers' first — so each overlaps the backward of the earlier layers.

    Time at stake
        (A) Per pipeline stage (one profiled rank each), per step: the chain's kernels in
        the consumer's cell — the forward ones joined to the IR's ``redistribution_op``
        nodes, plus the same kinds the backward adds for the gradient — and 1 − 1/g of
        every kernel there that runs on the whole gathered tensor (input shaped like the
        chain's Concat output: the consumer, its gradient, conversions around it; g = the
        AllGather's group size); stages combine under 1F1B
        (``_common.one_f_one_b_step_saving``). Without a profile: the gathered bytes,
        twice (forward and gradient), per micro batch, over ``hccs_gbps``.
        (B) The measured exposed gradient AllReduce minus the tail left with the
        proposed buckets: each parameter's gradient is ready when its cell's backward
        kernels end in the step's last micro batch; the measured transfer is shared
        over the buckets by elements (plus ``bucket_latency_us`` each), buckets run one
        after another on the communication stream in readiness order, and what ends
        after the backward stays exposed. The split points are the balanced
        (equal-size) candidate for 2…8 buckets, optionally with the last-ready first
        parameter alone, that leaves the least exposed on average over the stages (the
        config applies to each stage's own parameter list; no point past the smallest).
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
        min_tail_pct: float = Field(0.25, ge=0, description="report an exposed gradient AllReduce from this share of the step, % "
                                    "(lower than min_share_pct: its fix is a safe config key)")
        bucket_latency_us: float = Field(20.0, ge=0,
                                         description="fixed cost assumed per extra gradient bucket (HCCL launch + ring latency), µs")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        reps: list[tuple[int, Any]] = []
        if ctx.run is not None:
            reps = [(s, r) for s, r in stage_representatives(ctx.run, cfg.pipeline_stages if cfg is not None else 1,
                                                             cfg.device_count if cfg is not None else None)
                    if {"name", "accelerator_core", "duration_us"} <= set(r.columns("kernels") or [])]
        tables = {s: self._kernels(r) for s, r in reps}
        found = False
        for f in self._redistribution(ctx, reps, tables):
            found = True
            yield f
        tail = self._gradient_tail(ctx, reps, tables)
        if tail is not None:
            found = True
            yield tail
        if not found and not ctx.skip_reasons:
            ctx.skip("no redistribution chain, and gradient AllReduce is overlapped or absent")

    @staticmethod
    def _kernels(rank: Any) -> pd.DataFrame:
        cols = rank.columns("kernels") or []
        want = [c for c in ("name", "type", "accelerator_core", "start_ns", "duration_us", "step_id", "input_shapes",
                            "output_shapes") if c in cols]
        k = rank.table("kernels", want)
        steps = max(int(k["step_id"].dropna().nunique()), 1) if "step_id" in k else 1
        if "step_id" not in k:
            w = step_windows(rank)
            steps = len(w) if w is not None else 1
        k = k.assign(per_step=k["duration_us"].astype(float) / steps)
        k.attrs["steps"] = steps
        return k

    # -- (A) redistribution --------------------------------------------------------------------
    def _chains(self, ir: Any) -> tuple[dict[str, _Chain], set[str]]:
        """Redistribution chains by consumer cell path, and the kernel names of the graph's other nodes."""
        nodes = list(ir.iter_nodes())
        redis = [n for n in nodes if (n.instance_name or "").startswith("redistribution_op")]
        others = {n.kernel_full_name for n in nodes if n.kernel_full_name and not (n.instance_name or "").startswith("redistribution_op")}
        if not redis:
            return {}, others
        rset = {id(n) for n in redis}
        consumers: dict[int, list[Any]] = {}
        for n in nodes:
            for ref in n.operand_refs:
                p = ir.resolve(n, ref) if ref.kind == "node" else None
                if p is not None and hasattr(p, "op"):
                    consumers.setdefault(id(p), []).append(n)
        heads: list[tuple[Any, Any, list[Any]]] = []
        for n in redis:
            prods = [ir.resolve(n, r) for r in n.operand_refs if r.kind == "node"]
            prods = [p for p in prods if p is not None and hasattr(p, "op")]
            if any(id(p) in rset for p in prods):
                continue  # not the chain's head
            ops, frontier, consumer = [n], [n], None
            while frontier:
                nxt = []
                for m in frontier:
                    for c in consumers.get(id(m), []):
                        if id(c) in rset:
                            if c not in ops:
                                ops.append(c)
                                nxt.append(c)
                        elif c.op not in ("Depend", "UpdateState", "MakeTuple", "TupleGetItem") and consumer is None:
                            consumer = c
                frontier = nxt
            heads.append((next(iter(prods), None), consumer, ops))
        # A chain slicing an op's output back (StridedSlice after the op) belongs to the chain
        # that gathered that op's inputs: one mismatched op, one finding.
        gathered = {id(c) for _, c, _ in heads if c is not None}
        chains: dict[str, _Chain] = {}
        for producer, consumer, ops in sorted(heads, key=lambda h: id(h[0]) in gathered):
            owner = producer if producer is not None and id(producer) in gathered else consumer
            key = ".".join(cell_path_in_layer(owner.scope if owner is not None else ops[0].scope)) or (owner.op if owner else ops[0].op)
            ch = chains.get(key)
            if ch is None:
                ch = chains[key] = _Chain(key, producer, consumer)
            ch.ops.extend(o for o in ops if o not in ch.ops)
            if owner is consumer:
                ch.count += 1
            lay = layer_of_scope(ops[0].scope)
            if lay is not None:
                ch.layers.add(lay)
            if owner is not None and owner.kernel_full_name:
                ch.consumer_scopes.add(owner.kernel_full_name)
                ch.cells.add(owner.kernel_full_name.rpartition("/")[0])
            for o in ops:
                if o.op == "AllGather" and isinstance(o.primitive_attrs.get("rank_size"), int):
                    ch.gather = max(ch.gather, int(o.primitive_attrs["rank_size"]))
                if o.op == "Concat":
                    ax = o.primitive_attrs.get("axis")
                    if isinstance(ax, int) and not isinstance(ax, bool):
                        ch.concat_axis = ax
        return chains, others

    def _redistribution(self, ctx: RuleContext, reps: list[tuple[int, Any]], tables: dict[int, pd.DataFrame]) -> Iterable[Finding]:
        by_rank = {rd.rank: rd for rd in ctx.ir_ranks()}
        stage_irs: list[tuple[int | None, Any]] = []
        for s, r in reps:
            rd = by_rank.get(r.rank_id)
            ir = (ctx.ir_graph("parallel", rd) or ctx.ir_graph("frontend", rd)) if rd is not None else None
            if ir is not None:
                stage_irs.append((s, ir))
        if not stage_irs:  # no IR of the profiled ranks: the first and last IR rank (first and last stage)
            irs = ctx.ir_ranks()
            for rd in {id(x): x for x in irs[:1] + irs[-1:]}.values():
                ir = ctx.ir_graph("parallel", rd) or ctx.ir_graph("frontend", rd)
                if ir is not None:
                    stage_irs.append((None, ir))
        if not stage_irs:
            ctx.skip("no parallel IR (step_parallel_end_*.ir): redistribution chains are read from the graph")
            return
        loads = {s: stage_busy_and_micro(r) for s, r in reps}
        micro = max([m or 1 for _, m in loads.values()] or [1])
        slowest = max(reps, key=lambda sr: loads[sr[0]][0] or 0.0)[1] if reps else None
        step_us = ctx.step_time_us(slowest) if slowest is not None else None
        parsed = [(s, ir, *self._chains(ir)) for s, ir in stage_irs]
        keys = list(dict.fromkeys(k for _, _, chains, _ in parsed for k in chains))
        for key in keys:
            ch = _Chain(key, None, None)
            for s, ir, chains, _others in parsed:
                sc = chains.get(key)
                if sc is None:
                    continue
                if ch.consumer is None:
                    ch.producer, ch.consumer, ch.gather, ch.concat_axis, ch.ir = sc.producer, sc.consumer, sc.gather, sc.concat_axis, ir
                ch.ops.extend(sc.ops)
                ch.layers |= sc.layers
                ch.count += sc.count
            costs: dict[int, float] = {s: 0.0 for s, _ in reps}
            counted = 0
            for s, _r in reps:
                # the stage's own graph, else another stage's: the same model code inserts the same chain
                own = next(((c[key], o) for st, _, c, o in parsed if st == s and key in c), None)
                sc, others = own or next(((c[key], o) for _, _, c, o in parsed if key in c))
                cost, n = self._chain_cost(tables[s], sc, others)
                counted += n
                costs[s] = cost
            fallback = max(self._bytes_estimate(ctx, c[key]) for _, _, c, _ in parsed if key in c)
            if counted:
                cost = one_f_one_b_step_saving(costs, {s: loads[s][0] or 0.0 for s in costs}, micro)
                how = f"{counted} kernel(s) per step measured over {len(costs)} pipeline stage(s)"
            else:
                cost = fallback
                how = f"estimated from the gathered bytes at {self.options.hccs_gbps:.0f} GB/s, forward and backward, per micro batch"
            share = 100.0 * cost / step_us if step_us else None
            if share is not None and share < self.options.min_share_pct:
                ctx.skip(f"redistribution before {ch.key} costs {share:.2f}% of the step (< {self.options.min_share_pct}%)")
                continue
            yield self._redistribution_finding(ctx, ch, ch.ir, cost, how, share, step_us, bool(counted))

    def _bytes_estimate(self, ctx: RuleContext, ch: _Chain) -> float:
        """Without a profile: the bytes the chain's collectives output, twice (the gradient is gathered too),
        per micro batch, over ``hccs_gbps`` (µs per step)."""
        nbytes = 0.0
        for o in ch.ops:
            if o.op in _COMM and o.out_types:
                shape = getattr(o.out_types[0], "shape", None)
                nbytes += float(np.prod([d for d in shape if d and d > 0])) * 2 if shape else 0.0
        cfg = ctx.config
        micro = (cfg.micro_batch_num if cfg.pipeline_stages > 1 else cfg.gradient_accumulation_steps) if cfg is not None else 1
        return 2 * nbytes * max(micro, 1) / (self.options.hccs_gbps * 1e3)

    @staticmethod
    def _chain_cost(k: pd.DataFrame, ch: _Chain, others: set[str]) -> tuple[float, int]:
        """Per-step µs of a chain on one rank, and the kernels counted per step (see Time at stake).

        In the consumer's cell (forward and backward): the redistribution kernels (their IR
        nodes, or kinds the graph has no other node for: the backward's), and the kernels that
        run on the whole gathered tensor — input shaped like the chain's Concat output (the
        consumer, its gradient, conversions around it) — of which 1 − 1/g goes with the fix.
        Without shapes, the consumer's own kernels and its ``Grad_<op>`` kernels stand for those.
        """
        leaves = {c.rpartition("/")[2] + "/" for c in ch.cells}
        near = k[k["name"].astype(str).str.contains("|".join(re.escape(x) for x in leaves), regex=True)] if leaves else k.iloc[:0]
        cells = {_any_layer(c) for c in ch.cells}
        consumers = {_any_layer(c) for c in ch.consumer_scopes}
        others = {_any_layer(o) for o in others}
        rows = []
        for r in near.itertuples():
            name = str(r.name)
            cell, bwd, grad = kernel_cell(name)
            if _any_layer(cell) in cells:
                scope = _any_layer(kernel_scope(name) or name)
                rows.append((r, scope, bwd, grad, _REDIS_OP.search(scope.removeprefix("Gradients/")) is not None
                             and scope not in others))
        full = {str(r.output_shapes) for r, scope, _, _, redis in rows
                if redis and "/Concat" in scope and getattr(r, "output_shapes", None) is not None}
        cons_ops = {s.rpartition("/")[2].split("-op")[0].lower() for s in ch.consumer_scopes}
        total, count = 0.0, 0
        for r, scope, bwd, grad, redis in rows:
            if redis:
                total += float(r.per_step)
                count += 1
                continue
            if ch.gather <= 1:
                continue
            first_in = str(getattr(r, "input_shapes", "")).split(";")[0].strip('"')
            whole = (any(first_in == f.strip('"') for f in full) if full
                     else scope in consumers or (bwd and re.sub(r"[^a-z]", "", grad.lower()) in {"grad" + o for o in cons_ops}))
            if whole:
                total += float(r.per_step) * (1.0 - 1.0 / ch.gather)  # runs on the whole gathered axis
                count += 1
        return total, round(count / max(k.attrs["steps"], 1))

    def _redistribution_finding(self, ctx: RuleContext, ch: _Chain, ir: Any, cost: float, how: str, share: float | None,
                                step_us: float | None, measured: bool) -> Finding:
        prod, cons = ch.producer, ch.consumer
        ps, cs = _strategy(prod), _strategy(cons)
        proposed = _proposed_strategy(cs, ch.concat_axis, ch.gather)
        op_path = ".".join((*cell_path_in_layer(cons.scope), cons.instance_name or cons.op)) if cons is not None else ch.key
        comm_nodes = [o for o in ch.ops if o.op in _COMM]
        comm_names = sorted({o.op for o in comm_nodes}) or sorted({o.op for o in ch.ops})
        lay = f" in {len(ch.layers)} layer(s)" if ch.layers else ""
        msg = [
            f"{ch.count} redistribution chain(s){lay}: {' + '.join(sorted({o.op for o in ch.ops}))} "
            f"({', '.join(o.instance_name for o in ch.ops[:3])}{' …' if len(ch.ops) > 3 else ''}) rearrange the tensor between "
            f"{_name(prod)} (strategy {ps or 'unknown'}) and {_name(cons)} (in_strategy {cs or 'unknown'}); the backward "
            f"repeats them for the gradient, in every micro batch.",
            f"They block the compute stream for {cost / 1000:.2f} ms per step ({how})"
            + (f", {share:.2f}% of the step" if share is not None else "")
            + (f", including the op itself running on the whole axis gathered from {ch.gather} devices"
               if measured and ch.gather > 1 else "")
            + ".",
            f"Give {_name(cons)} the layout its producers already have"
            + (f": in_strategy {proposed}" if proposed else "")
            + " (the model-parallel split on the gathered axis, as its neighbours use); the fix is in the model's shard() call, "
              "no config key controls it.",
        ]
        locations: list[Location] = []
        src = None
        if cons is not None:
            locations.append(ir_location(str(ir.path), cons, note="consumer: in_strategy disagrees"))
            src = source_location(cons)
            if src:
                locations.append(src)
        if prod is not None:
            locations.append(ir_location(str(ir.path), prod, note="producer"))
        for o in ch.ops[:3]:
            locations.append(ir_location(str(ir.path), o, note="inserted by redistribution"))
        patches = []
        if proposed:
            patches.append(Patch(title=f"shard {op_path} with in_strategy {proposed}", safety=Safety.DISPLAY_ONLY, ops=[],
                                 target=src.path if src else None,
                                 description=f"in the model code: {op_path}.shard({proposed}) — split the axis the redistribution "
                                             f"gathers over the {ch.gather} model-parallel devices, as the producers do",
                                 notes=[f"{src.path}:{src.line}"] if src and src.line else []))
        return Finding(
            code=self.code,
            rule=self.name,
            title=f"redistribution ({'/'.join(comm_names)}) around {op_path}{lay}: strategies disagree",
            message=" ".join(msg),
            severity=severity_for_share(share),
            saving_us=cost,
            step_time_us=step_us,
            confidence=0.85 if measured else 0.6,
            evidence=[
                Evidence(name="redistribution_ops", value=len(ch.ops)),
                Evidence(name="blocking_time_per_step", value=round(cost, 3), unit="µs", source=how),
                Evidence(name="producer_strategy", value=str(ps)),
                Evidence(name="consumer_in_strategy", value=str(cs)),
            ] + ([Evidence(name="proposed_in_strategy", value=proposed)] if proposed else []),
            locations=locations,
            patches=patches,
            tags=list(self.tags),
        )

    # -- (B) exposed gradient AllReduce ---------------------------------------------------------
    def _gradient_tail(self, ctx: RuleContext, reps: list[tuple[int, Any]], tables: dict[int, pd.DataFrame]) -> Finding | None:
        cfg = ctx.config
        if not reps:
            return None
        if cfg is not None and cfg.located("parallel.all_reduce_fusion_config").present:
            val = cfg.get("parallel.all_reduce_fusion_config")
            if isinstance(val, list) and len(val) >= 1:
                return None  # already split; LC006 checks its order and range
        stages = []
        for s, r in reps:
            tail = self._tail_of(r, tables[s])
            if tail is not None:
                tail["params"] = self._params(ctx, r, s)
                tail["ready"] = self._readiness(tail, tail["params"]) if tail["params"] else None
                stages.append(tail | {"rank": r, "stage": s})
        if not stages:
            return None
        worst = max(stages, key=lambda t: t["exposed_us"])
        exposed = float(np.mean([t["exposed_us"] for t in stages]))
        step_us = worst["step_us"]
        share = 100.0 * exposed / step_us if step_us else None
        if share is not None and share < self.options.min_tail_pct:
            ctx.skip(f"gradient AllReduce exposed {exposed:.0f} µs per step ({share:.2f}% < {self.options.min_tail_pct}%)")
            return None
        split = self._best_split(stages)
        ar = float(np.mean([t["ar_us"] for t in stages]))
        per = f" per step on average over the {len(stages)} pipeline stages" if len(stages) > 1 else " per step"
        msg = [
            f"The gradient AllReduce (grad_reducer) runs {ar / 1000:.2f} ms{per}, of which {exposed / 1000:.2f} ms is exposed "
            f"after the last backward kernel" + (f" ({share:.1f}% of the step)" if share is not None else "")
            + "; all_reduce_fusion_config is not set, so every gradient is reduced in one bucket once the last one exists."
        ]
        if split is None:
            msg.append("Without the parameter list (IR dump or config) no split point is computed; the exposed time is the "
                       "upper bound of what buckets can hide." if not any(t.get("params") for t in stages)
                       else "No split of the parameter list hides a meaningful part of it.")
        patches = []
        saving = exposed
        if split is not None:
            points, left = split
            saving = max(exposed - left, 0.0)
            sizes = [len(t["params"]) for t in stages]
            msg.append(
                f"Split points {points} over the {'/'.join(map(str, sizes))} parameters"
                + (" of each pipeline stage" if len(stages) > 1 else "")
                + f" give {len(points) + 1} buckets of balanced size, reduced as their gradients become ready (later layers "
                f"first) while the earlier layers' backward still runs: the tail left is ≈ {left / 1000:.2f} ms (the last "
                f"bucket, holding the first parameters, whose gradients are ready last), {saving / 1000:.2f} ms less per step."
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
            code=self.code,
            rule=self.name,
            title=f"gradient AllReduce exposed in the step tail: {exposed / 1000:.2f} ms per step",
            message=" ".join(msg),
            severity=severity_for_share(share),
            saving_us=saving,
            step_time_us=step_us,
            confidence=0.8 if split is not None else 0.6,
            evidence=[
                Evidence(name="gradient_allreduce_time", value=round(float(ar), 3), unit="µs"),
                Evidence(name="exposed_time", value=round(exposed, 3), unit="µs"),
            ] + ([Evidence(name="split_points", value=str(split[0])),
                  Evidence(name="exposed_after_split", value=round(split[1], 3), unit="µs")] if split is not None else []),
            locations=locations,
            patches=patches,
            rank=rank.rank_id,
            tags=list(self.tags),
        )

    @staticmethod
    def _tail_of(rank: Any, k: pd.DataFrame) -> dict[str, Any] | None:
        """Gradient AllReduce time per step, the part after the last compute kernel, and that kernel's end, per step."""
        if "start_ns" not in k:
            return None
        k = k[k["start_ns"].notna()]
        names = k["name"].astype(str)
        is_comm = k["accelerator_core"].isin(_COMM_CORES).to_numpy()
        gmask = (is_comm & names.str.contains("allReduce|AllReduce", regex=True).to_numpy()
                 & names.str.contains(_GRAD_REDUCER.pattern, case=False, regex=True).to_numpy())
        if not gmask.any():
            return None
        start = k["start_ns"].astype("int64").to_numpy()
        end = start + np.round(k["duration_us"].to_numpy() * 1000).astype("int64")
        windows = step_windows(rank)
        if windows is None:
            windows = pd.DataFrame({"step": [0], "start_ns": [int(start.min())], "end_ns": [int(end.max())]})
        comp = ~is_comm
        bwd = names.str.contains(r"^Gradients/|/[Gg]rad", regex=True).to_numpy() & comp
        ar_total, exposed_total, steps, bwd_ends = 0.0, 0.0, 0, []
        for w in windows.itertuples():
            in_w = (start >= w.start_ns) & (start < w.end_ns)
            if not (in_w & gmask).any() or not (in_w & bwd).any():
                continue
            steps += 1
            bwd_end = int(end[in_w & bwd].max())
            bwd_ends.append((int(w.start_ns), int(w.end_ns), bwd_end))
            for s, e in zip(start[in_w & gmask], end[in_w & gmask]):
                ar_total += (e - s) / 1000.0
                exposed_total += max(0, e - max(s, bwd_end)) / 1000.0
        if not steps:
            return None
        first = names[gmask].iloc[0]
        return {"ar_us": float(ar_total / steps), "exposed_us": float(exposed_total / steps), "step_us": mean_step_time_us(rank),
                "ar_name": kernel_scope(first) or first, "windows": bwd_ends, "k": k, "end": end, "bwd": bwd}

    @staticmethod
    def _params(ctx: RuleContext, rank: Any, stage: int) -> list[tuple[str, float]]:
        """(name, elements) of the rank's trainable parameters in first-use order: IR, else the config."""
        rd = next((x for x in ctx.ir_ranks() if x.rank == rank.rank_id), None)
        ir = (ctx.ir_graph("frontend", rd) or ctx.ir_graph("parallel", rd)) if rd is not None else None
        params = [(n, s) for n, s, _ in ir_parameters(ir) if is_model_weight(n)] if ir is not None else []
        if not params and ctx.config is not None:
            cfg = ctx.config
            params = [(n, s) for n, s, _ in llama_parameters(cfg, stage if cfg.pipeline_stages > 1 else None)]
        return [(n, float(np.prod(s))) for n, s in params]

    @staticmethod
    def _readiness(tail: dict[str, Any], params: list[tuple[str, float]]) -> list[float]:
        """Per parameter: when its gradient exists in the step's last backward, µs relative to the backward's end (≤ 0).

        A parameter's gradient is ready when the backward kernels of its cell (layer index and
        attribute path from the parameter name, e.g. ``model.layers.3.feed_forward.w2.weight``)
        end; all micro batches launch the same kernels, so the last end in a step is the last
        micro batch's. Averaged over the profiled steps; a parameter without kernels of its own
        counts as ready at the end.
        """
        k, end, bwd, windows = tail["k"], tail["end"], tail["bwd"], tail["windows"]
        start = k["start_ns"].astype("int64").to_numpy()
        idx = np.flatnonzero(bwd)
        starts = np.array([w[0] for w in windows], dtype="int64")
        win = np.searchsorted(starts, start[idx], side="right") - 1
        scopes = [kernel_scope(n) or n for n in k["name"].astype(str).to_numpy()[idx]]
        df = pd.DataFrame({"layer": [layer_of_scope(sc) for sc in scopes], "path": [cell_path_in_layer(sc) for sc in scopes],
                           "win": win, "end": end[idx]})
        df = df[(df["win"] >= 0)]
        df["layer"] = df["layer"].fillna(-1).astype(int)
        last = df.groupby(["layer", "path", "win"])["end"].max()
        by_layer: dict[int, dict[tuple[str, ...], dict[int, int]]] = {}
        for (lay, path, w), e in last.items():
            by_layer.setdefault(int(lay), {}).setdefault(path, {})[int(w)] = int(e)
        out = []
        for name, _ in params:
            m = _LAYER_PARAM.match(name)
            lay, path = (int(m.group(1)), tuple(m.group(2).split(".")[:-1])) if m else (-1, tuple(name.split(".")[:-1]))
            rel = []
            for wi, (_, _, bwd_end) in enumerate(windows):
                ends = [wins[wi] for kp, wins in by_layer.get(lay, {}).items() if wi in wins and kp
                        and (kp[:len(path)] == path if lay >= 0 else (kp == path or path[-len(kp):] == kp or kp[-len(path):] == path))]
                rel.append(((max(ends) if ends else bwd_end) - bwd_end) / 1000.0)
            out.append(float(np.mean(rel)) if rel else 0.0)
        return out

    def _exposed(self, stage: dict[str, Any], points: list[int]) -> float:
        """Tail left after the backward with buckets split at ``points`` (see Time at stake)."""
        params, ready = stage["params"], stage["ready"]
        total = sum(e for _, e in params)
        bounds = [0] + [p for p in points if 0 < p < len(params)] + [len(params)]
        bounds = sorted(set(bounds))
        per_elem = stage["ar_us"] / total if total else 0.0
        buckets = []
        for a, b in zip(bounds, bounds[1:]):
            elems = sum(e for _, e in params[a:b])
            buckets.append((max(ready[a:b]), per_elem * elems + (self.options.bucket_latency_us if len(bounds) > 2 else 0.0)))
        t = -float("inf")
        for r, d in sorted(buckets):
            t = max(t, r) + d
        return max(t, 0.0)

    def _best_split(self, stages: list[dict[str, Any]]) -> tuple[list[int], float] | None:
        """Balanced split points leaving the least exposed tail on average over the stages."""
        usable = [s for s in stages if s.get("params") and s.get("ready") and len(s["params"]) > 1]
        if not usable:
            return None
        cands: set[tuple[int, ...]] = set()
        for s in usable:
            sizes = [e for _, e in s["params"]]
            for n in range(2, MAX_BUCKETS + 1):
                eq = _equal_bytes(sizes, n)
                cands.add(tuple(eq))
                cands.add(tuple(sorted({1, *eq})) if len(eq) < MAX_BUCKETS - 1 else tuple(eq))
        limit = min(len(s["params"]) for s in usable)
        best = None
        for c in sorted(cands):
            if not c or c[-1] >= limit:
                continue  # an index past a stage's parameter count would give it an empty bucket
            left = float(np.mean([self._exposed(s, list(c)) for s in usable]))
            if best is None or left < best[1] - 1e-6 or (abs(left - best[1]) <= 1e-6 and len(c) < len(best[0])):
                best = (list(c), left)
        now = float(np.mean([s["exposed_us"] for s in usable]))
        if best is None or best[1] >= now * 0.98:
            return None
        return best


def _equal_bytes(sizes: list[float], buckets: int) -> list[int]:
    """Split points cutting ``sizes`` (in order) into ``buckets`` runs of about equal total."""
    total = sum(sizes)
    points, acc, k = [], 0.0, 1
    for i, s in enumerate(sizes):
        acc += s
        while k < buckets and acc >= total * k / buckets and i + 1 < len(sizes):
            if not points or points[-1] != i + 1:
                points.append(i + 1)
            k += 1
    return points


def _any_layer(scope: str) -> str:
    """A scope with its decoder-layer index blanked, so one layer's graph matches every layer's kernels."""
    return _LAYER_INDEX.sub(r"/N-\1", scope)


def _strategy(node: Any) -> str | None:
    if node is None:
        return None
    st = node.strategy or {}
    val = st.get("in_strategy") or st.get("strategy") or node.primitive_attrs.get("in_strategy")
    if val is None:
        return None
    return str(val).replace("[", "(").replace("]", ")")


def _proposed_strategy(cs: str | None, axis: int | None, gather: int) -> str | None:
    """The consumer's in_strategy with the gathered axis split over the group."""
    if not cs or axis is None or gather <= 1:
        return None
    try:
        val = ast.literal_eval(cs)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(val, tuple) or not all(isinstance(t, tuple) for t in val):
        return None
    out = []
    for t in val:
        dims = list(t)
        a = axis if axis >= 0 else len(dims) + axis
        if 0 <= a < len(dims):
            dims[a] = dims[a] * gather
        out.append(tuple(dims))
    return str(tuple(out))


def _name(node: Any) -> str:
    if node is None:
        return "its neighbour"
    path = cell_path_in_layer(node.scope)
    return f"{'.'.join(path) + '.' if path else ''}{node.instance_name or node.op} ({node.op})"
