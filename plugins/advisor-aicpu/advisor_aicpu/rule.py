"""AIC001: operators running on AI_CPU take a large share of device time."""

from __future__ import annotations

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
    Severity,
)

# Ops CANN runs on AI_CPU for which an AI-Core friendly rewrite is well known.
_ADVICE = {
    "Cast": "a Cast lands on AI_CPU when its dtype pair has no AI Core kernel (e.g. DOUBLE, INT64 ↔ BOOL): keep tensors in float32/float16/int32",
    "NonZero": "NonZero has a data-dependent output shape: use a fixed-shape mask (Select/MaskedFill) instead",
    "Index": "advanced indexing falls back to AI_CPU: use Gather/GatherV2 with int32 indices",
    "IndexPut": "IndexPut falls back to AI_CPU: use ScatterNd/TensorScatterUpdate with int32 indices",
    "ArgMin": "ArgMin on AI_CPU: use ArgMinWithValue/ReduceMin on AI Core",
    "Unique": "Unique has a dynamic output shape: precompute on the host or use a fixed-size alternative",
}


class AicpuShare(Rule):
    """Operators on AI_CPU take a large share of device time.

    What
        Sums the device time of kernels whose ``Accelerator Core`` is ``AI_CPU`` per
        step and compares it with the step time; lists the operator types, their
        counts, time and input dtypes.

    Why
        AI_CPU kernels run on the NPU's general-purpose cores, typically an order
        of magnitude slower than the same op on AI Core, and they serialise the
        stream. They usually come from a dtype the AI Core kernel does not support
        (``DOUBLE``, ``INT64`` casts) or a dynamic-shape op (NonZero, Unique).

    Example
        ``trans_Cast_5`` with ``Input Data Types`` ``DT_DOUBLE`` running 197 µs on
        AI_CPU every step, 6 % of a 3.3 ms step.

    Fix
        Change the dtype (float64 → float32, int64 indices → int32) or rewrite the
        op with a fixed-shape AI Core equivalent; the finding names each op type
        and the usual rewrite. There is no config patch: the change is in model code.

    Thresholds: reported above ``min_share_pct`` of the step (default 1 %);
    severity high ≥ 5 %, medium ≥ 3 % (msprof-analyze's model). The saving assumes
    the AI Core version runs ``aicore_speedup`` times faster (default 10).
    """

    code = "AIC001"
    name = "aicpu-share"
    summary = "AI_CPU operators take a large share of device time"
    severity = Severity.MEDIUM
    requires = Requirements(any_of=(Need.table("kernels", ("accelerator_core", "duration_us")),))
    tags = ("compute", "aicpu")
    fix_availability = "never"

    class Options(RuleOptions):
        min_share_pct: float = Field(1.0, ge=0, description="report only above this share of the step, %")
        min_op_us: float = Field(20.0, ge=0, description="ignore AI_CPU ops never longer than this, µs")
        aicore_speedup: float = Field(10.0, gt=1, description="assumed speed-up of the AI Core rewrite")

    def rank_evidence(self, rank: Any) -> dict[str, Any] | None:
        """AI_CPU time of one rank, by op type (runs where the rank's files are read; small result)."""
        # imported here: `advisor rules` and `lint` load this module and should not pay for pandas
        from advisor_core.analyses.step_time import mean_step_time_us

        view = rank.op_view()  # the rank's kernels as distinct ops (advisor_core.opview)
        if view is None or not view.has_columns("accelerator_core"):
            return None
        cpu = view.ops[view.ops["accelerator_core"] == "AI_CPU"]
        if cpu.empty or cpu["max_us"].max() < self.options.min_op_us:
            return None
        steps = view.steps
        step_us = mean_step_time_us(rank) or float(view.ops["total_us"].sum()) / steps
        per_step = float(cpu["total_us"].sum()) / steps
        by_type: dict[str, dict] = {}
        for typ, ops in cpu.groupby(cpu["type"].fillna(cpu["name"]), sort=False):  # one row per op type
            by_type[str(typ)] = {
                "count": int(ops["count"].sum()),
                "total_us": float(ops["total_us"].sum()),
                "max_us": float(ops["max_us"].max()),
                "dtypes": {str(x) for x in ops["input_dtypes"] if x},
                "names": set(ops["name"].astype(str)),
            }
        share = 100.0 * per_step / step_us if step_us else 0.0
        return {"share": share, "per_step": per_step, "step_us": step_us, "steps": steps, "by_type": by_type}

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        opts = self.options
        assert ctx.run is not None
        worst: tuple[float, int, dict] | None = None
        affected: list[int] = []
        for rank in ctx.run:
            detail = ctx.rank_evidence(rank)
            if detail is None:
                continue
            share = detail["share"]
            if share >= opts.min_share_pct:
                affected.append(rank.rank_id)
            if worst is None or share > worst[0]:
                worst = (share, rank.rank_id, detail)
        if worst is None:
            ctx.skip("no AI_CPU kernel longer than the threshold")
            return
        share, rank_id, d = worst
        if share < opts.min_share_pct:
            ctx.skip(f"AI_CPU kernels take {share:.2f}% of the step on rank {rank_id} "
                     f"({d['per_step']:.1f} µs of {d['step_us']:.1f} µs), below {opts.min_share_pct}%")
            return
        sev = Severity.HIGH if share >= 5 else Severity.MEDIUM if share >= 3 else Severity.LOW
        top = sorted(d["by_type"].items(), key=lambda kv: -kv[1]["total_us"])
        parts = []
        for typ, t in top[:5]:
            dt = f", inputs {'/'.join(sorted(t['dtypes']))}" if t["dtypes"] else ""
            advice = _ADVICE.get(typ)
            parts.append(f"{typ} ×{t['count']} ({t['total_us'] / d['steps']:.1f} µs/step{dt})" + (f": {advice}" if advice else ""))
        saving = d["per_step"] * (1.0 - 1.0 / opts.aicore_speedup)
        ranks = f"ranks {affected}" if len(affected) > 1 else f"rank {rank_id}"
        yield Finding(
            code=self.code,
            rule=self.name,
            title=f"AI_CPU operators take {share:.1f}% of the step",
            message=(
                f"On {ranks}, kernels on AI_CPU run {d['per_step']:.1f} µs per step of {d['step_us']:.1f} µs. "
                + "; ".join(parts)
                + ". Moving them to AI Core (dtype or op change in model code) would save about "
                f"{saving:.0f} µs per step."
            ),
            severity=sev,
            saving_us=saving,
            step_time_us=d["step_us"],
            confidence=0.5,
            rank=rank_id,
            evidence=[
                Evidence(name="aicpu_time_per_step", value=round(d["per_step"], 3), unit="µs", source="kernel_details.csv"),
                Evidence(name="step_time", value=round(d["step_us"], 3), unit="µs"),
                Evidence(name="aicpu_share", value=round(share, 3), unit="%", threshold=opts.min_share_pct),
            ],
            locations=[
                Location(kind="profile", table="kernels", op=sorted(t["names"])[0], rank=rank_id, note=typ)
                for typ, t in top[:3]
            ],
            tags=list(self.tags),
        )
