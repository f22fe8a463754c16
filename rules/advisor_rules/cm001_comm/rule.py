"""CM001's rule class: its help page, options, and the two checks it runs over one rank per pipeline stage."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Finding, Measure, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules._common import stage_representatives
from advisor_rules.cm001_comm.fusion import gradient_tail_finding
from advisor_rules.cm001_comm.measure import redistribution_measure
from advisor_rules.cm001_comm.redistribution import redistribution_findings
from advisor_rules.cm001_comm.tail import tail_of


class UnexpectedCommunication(Rule):
    """Communication the parallel layout should not need: redistribution chains and an exposed gradient AllReduce.

    What
        (A) In the parallel graph (``step_parallel_end_*.ir``, one rank per pipeline
        stage), communication the auto-parallel pass inserted to *rearrange* a tensor —
        instance names ``redistribution_op_<hash><Op>`` — as opposed to what an
        operator's own strategy requires (``forward_op_*``) or data-parallel gradient
        reduction (``mirror_op``). A chain is followed through the nodes that only
        route its value (MindSpore packs a Split's pieces for the Concat as
        ``Split → TupleGetItem → MakeTuple → Concat``); each is reported with the two
        ops whose strategies disagree (the producer found behind layout-keeping ops
        such as a Linear's output Reshape), per layer. (B) The gradient AllReduce of the
        ``grad_reducer`` (``DistributedGradReducer``) exposed after the last backward
        kernel. The profile decides: how many buckets a step runs, how many start while
        the backward runs and what is left exposed are measured; the config
        (``parallel.all_reduce_fusion_config``) only names today's split points — when it
        does not (the split set in the training script), they are inferred from the
        buckets' sizes.

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
        Compilers defer weight gradients, so a bucket can start later than its layer's
        place in the backward suggests.

    Example
        ``feed_forward.mul`` shard ``((2, 1, 1), (2, 1, 1))`` between column-parallel
        ``w1``/``w3`` (output split over mp=2 on the last axis) and row-parallel ``w2``.

    Fix
        (A) Give the consumer the layout its producers already have: its ``in_strategy``
        with the gathered axis split over the group (a display-only patch: the strategy
        is set in the model's ``shard()`` call). (B) A safe patch sets
        ``parallel.all_reduce_fusion_config``: split points over the rank's trainable
        parameters in definition order (bucket i holds parameters [kᵢ₋₁, kᵢ), the last
        one [kₙ, P)); buckets are reduced in the order their gradients become ready — the
        later layers' first — so each overlaps the backward of the earlier layers.
        Without a training config the patch is display-only: the
        ``set_auto_parallel_context(all_reduce_fusion_config=…)`` call for the script.
        Trainable parameters are the IR's parameters that have optimizer state
        (``moments.``/``adam_m.``… twins: BatchNorm's running statistics have none), else
        a Llama config's.

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
        proposed buckets; when the config names today's split, the model's tail for it
        minus the model's tail for the proposal (never more than is measured), and a
        re-split is reported only when it gains ``min_tail_pct`` of the step. Measured
        is the transfer, not the kernel: a rank that
        finishes its backward early waits inside the AllReduce for the slowest
        data-parallel peer (communication.json ``Wait Time``) — skew no split removes —
        and kernels still blocking the compute stream after the last gradient (a
        stage's Send) hide its start, so exposed = AllReduce end − stream end − wait.
        Each parameter's gradient is ready, in the step's last micro batch, when the
        kernel producing it ends — found in the IR by following the optimizer's update
        of the parameter back to its gradient operand (kernel graph first: its names are
        the profile's); else when the backward kernels of its cell end (the cell read from
        the parameter's name behind the wrappers most parameters sit behind:
        ``layer1.0.conv1.weight`` → ``…/layer1-SequentialCell/0-ResidualBlock/conv1-Conv2d``),
        if those names tell the parameters apart; else from the forward order mirrored
        (the backward reaches a cell after the cells that follow it). The measured transfer is shared
        over the buckets by elements (plus ``bucket_latency_us`` each), buckets run one
        after another on the communication stream in readiness order, and what ends
        after the backward stays exposed. With pipeline stages the step gains what
        moves the next step's start: a later stage's buckets drain while its first
        forward Receive waits for the previous stage anyway (that wait, Rₛ, from
        communication.json), the first stage's tail delays everyone, so the gain is
        ``min(Δ₀, minₛ (Rₛ + Δₛ))`` for tails shorter by Δ (the mean of the stages
        without that evidence). The split points are the balanced (equal-size)
        candidate for 2…8 buckets, optionally with the last-ready first parameter
        alone, that the step gains most from (the config applies to each stage's own
        parameter list; no point past the smallest).
        (A) and (B): while the device waits for data every step (MD001's measure) the
        step is the data pipeline's period and neither saving shows: both are reported
        as 0, with the figure once data keeps up in the message and
        ``saving_if_data_keeps_up``.
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

    def rank_evidence(self, rank: Any) -> dict[str, Any] | None:
        """The rank's gradient AllReduce tail (per-step figures; needs the op view's timeline)."""
        return tail_of(rank, rank.op_view())

    def measure(self, ctx: RuleContext, finding: Finding) -> Measure | None:
        """For the gradient-tail finding: the AllReduce exposed after the last backward kernel, mean over stages;
        for a redistribution finding: its chain's kernel time."""
        if ctx.run is None:
            return None
        if not any(e.name == "exposed_time" for e in finding.evidence):
            return redistribution_measure(ctx, finding)
        cfg = ctx.config
        reps = stage_representatives(ctx.run, cfg.pipeline_stages if cfg is not None else 1,
                                     cfg.device_count if cfg is not None else None)
        exposed = [float((ctx.rank_evidence(r) or {}).get("exposed_us", 0.0)) for _, r in reps]
        return Measure("gradient AllReduce exposed per step", sum(exposed) / len(exposed)) if exposed else None

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        reps: list[tuple[int, Any]] = []
        if ctx.run is not None:
            reps = [(s, r) for s, r in stage_representatives(ctx.run, cfg.pipeline_stages if cfg is not None else 1,
                                                             cfg.device_count if cfg is not None else None)
                    if r.usable("kernels", ("accelerator_core",)) and r.op_view() is not None]
        views = {s: r.op_view() for s, r in reps}
        found = False
        for f in redistribution_findings(self, ctx, reps, views):
            found = True
            yield f
        tail = gradient_tail_finding(self, ctx, reps)
        if tail is not None:
            found = True
            yield tail
        if not found and not ctx.skip_reasons:
            ctx.skip("no redistribution chain, and gradient AllReduce is overlapped or absent")
