"""CL001's rule class: its help page, options, and the check over every profiled rank."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Evidence, Finding, Location, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules._common import Outlier, high_outliers, pipeline_stage_of, rank_label
from advisor_rules._common import parallel_group
from advisor_rules.cl001_slow_rank.evidence import rank_figures

CONVERSION_TYPES = ("Cast", "TransData")
# metric → (what it is, the rule that covers the cause when it is found on the rank)
_METRICS = {
    "computing_us": "compute",
    "preparing_us": "data wait",
    "host_gap_us": "idle gaps",
}


class SlowRank(Rule):
    """A rank slower than its pipeline-stage peers — the straggler every collective waits for — and its cause.

    What
        Per pipeline stage (ranks of one stage run the same program, so they should take the
        same time), each rank's steady-step figures from its step breakdown
        (``step_trace_time.csv``, the trace's or the DB's step windows): kernel time
        (``Computing``), the wait for data at the step start (``Preparing``: step start → first
        device task) and the device's idle gaps between kernels (``Free`` − ``Preparing``). A
        rank above the stage's median by more than ``mad_k`` scaled median absolute deviations
        and more than ``min_excess_pct`` of the step is reported, with its cause:

        * compute — the op types whose time per step is above the peers' median (same launches
          per step: the device runs them slower — a throttled or degraded AI core; more
          launches: the rank runs a different program; more ``Cast``/``TransData``: CT001's or
          CT002's finding is cited when it covers this rank);
        * data wait — the host feeding this device delivers late (a slower disk or dataset
          shard, a busy host CPU); MD001's finding is cited when it covers this rank;
        * idle gaps — the host does not launch fast enough (host-bound: Python work, a busy CPU);
        * cause unknown — more compute time but no op type longer or more frequent than on the
          peers (or no kernel table): the step figures are shown as the evidence.

        A rule is cited, and tagged ``cause:<code>``, only when one of its findings is about this
        rank (or about every rank); the rank's data-parallel group, when the profile's
        ``parallel_group_info`` gives it, is named with its stage peers.

    Why
        Training is synchronous: every collective (tensor-parallel AllReduce, the gradient
        AllReduce, pipeline Send/Receive) ends when its slowest member arrives, so one slow rank
        makes every step of every rank slower by its excess — its peers show it as wait time
        inside HCCL (``communication.json`` ``Wait Time``), not as their own work.
        msprof-analyze's ``slow_rank`` names the rank; this rule also says why.

    Example
        Rank 3 of 8: ``Computing`` 355.4 ms per step against a median of 280.6 ms; its
        ``MatMulV3`` kernels take 1.40× the peers' time at the same launch count; the seven
        others wait 75–101 ms per step inside HCCL.

    Fix
        Compute: check the device (``npu-smi info``: temperature, AI core frequency, ECC
        errors), move the job off it, or find why its program differs. Data wait: the rank's
        host and data (disk, dataset shard size, host CPU load, ``num_parallel_workers``).
        Idle gaps: the host process (CPU binding, other jobs on the host). There is no config
        patch: the cause is outside the training YAML.

    Time at stake
        The rank's excess over its stage's median, per step: every rank waits that long for
        it, so removing it shortens the step by as much (in the simulator's straggler
        scenarios 101 % and 100 % of the re-simulated gain).
    """

    code = "CL001"
    name = "slow-rank"
    summary = "a rank slower than its peers, and its cause"
    severity = Severity.HIGH
    requires = Requirements(any_of=(Need.table("step_trace"), Need.table("kernels", ("name", "duration_us"))))
    tags = ("cluster", "straggler")
    fix_availability = "never"
    reads_other_findings = True

    class Options(RuleOptions):
        mad_k: float = Field(5.0, gt=0, description="a rank is an outlier above the median + this many scaled MADs")
        min_excess_pct: float = Field(2.0, ge=0, description="... and by at least this share of the step, %")
        min_ranks: int = Field(3, ge=3, description="ranks per stage needed to tell a straggler from its peers")

    def rank_evidence(self, rank: Any) -> dict[str, Any] | None:
        """Steady-step figures and compute time per op type of one rank."""
        return rank_figures(rank)

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        run = ctx.run
        if run is None or len(run.ranks) < self.options.min_ranks:
            ctx.skip(f"needs at least {self.options.min_ranks} profiled ranks to compare (found "
                     f"{0 if run is None else len(run.ranks)})")
            return
        cfg = ctx.config
        figures: dict[int, dict[str, Any]] = {}
        stage_of: dict[int, int] = {}
        for rank in run:
            ev = ctx.rank_evidence(rank)
            if ev is None:
                continue
            ev = dict(ev)
            ev["host_gap_us"] = max(0.0, ev.get("free_us", 0.0) - ev.get("preparing_us", 0.0)) \
                if ev.get("free_us") == ev.get("free_us") and ev.get("preparing_us") == ev.get("preparing_us") else float("nan")
            figures[rank.rank_id] = ev
            stage_of[rank.rank_id] = pipeline_stage_of(rank, cfg.pipeline_stages if cfg is not None else 1,
                                                       cfg.device_count if cfg is not None else None)
        stages: dict[int, list[int]] = {}
        for rid, s in stage_of.items():
            stages.setdefault(s, []).append(rid)
        if not any(len(v) >= self.options.min_ranks for v in stages.values()):
            ctx.skip(f"no pipeline stage has {self.options.min_ranks} ranks with a step breakdown to compare")
            return
        earlier = ctx.findings_so_far()
        found = False
        for stage, rids in sorted(stages.items()):
            if len(rids) < self.options.min_ranks:
                continue
            step_med = _median([figures[r]["total_us"] for r in rids])
            floor = step_med * self.options.min_excess_pct / 100.0
            flagged: dict[int, list[tuple[str, Outlier]]] = {}
            for metric in _METRICS:
                vals = {r: float(figures[r][metric]) for r in rids if figures[r].get(metric) == figures[r].get(metric)}
                _, outs = high_outliers(vals, k=self.options.mad_k, floor=floor)
                for o in outs:
                    flagged.setdefault(o.rank, []).append((metric, o))
            for rid, hits in sorted(flagged.items()):
                found = True
                yield self._finding(ctx, run.rank(rid), stage, rids, hits, figures, step_med, earlier)
        if not found:
            ctx.skip(f"no rank is above its stage peers by {self.options.mad_k:g} MADs and "
                     f"{self.options.min_excess_pct:g} % of the step ({len(figures)} ranks, {len(stages)} stage(s))")

    def _finding(self, ctx: RuleContext, rank: Any, stage: int, peers: list[int], hits: list[tuple[str, Outlier]],
                 figures: dict[int, dict[str, Any]], step_med: float, earlier: tuple[Finding, ...]) -> Finding:
        rid = rank.rank_id
        others = [r for r in peers if r != rid]
        excess = sum(o.excess for _, o in hits)
        what = " and ".join(f"{_METRICS[m]} {o.excess / 1000:.2f} ms" for m, o in hits)
        causes: list[str] = []
        evidence: list[Evidence] = []
        cite: list[str] = []
        op = None
        for metric, o in hits:
            evidence.append(Evidence(name=metric.removesuffix("_us"), value=round(o.value, 3), unit="µs",
                                     threshold=round(o.median + o.threshold, 3),
                                     source=f"stage {stage} median {o.median:.1f} µs over ranks {rank_label(peers)}"))
            if metric == "computing_us":
                text, op, related = _compute_cause(figures, rid, others)
                causes.append(text)
                cite += [c for c in related if c not in cite]
            elif metric == "preparing_us":
                causes.append(f"it waits {o.value / 1000:.2f} ms for its batch at each step start (peers' median "
                              f"{o.median / 1000:.2f} ms): the host feeding this device delivers late — its disk or "
                              "dataset shard, its host CPU, or its data pipeline")
                cite.append("MD001")
            else:
                causes.append(f"its device sits idle {o.value / 1000:.2f} ms per step between kernels (peers' median "
                              f"{o.median / 1000:.2f} ms): the host does not launch work fast enough (host-bound)")
        # a rule is cited (and tagged) only when one of its findings covers this rank: its cause is then shown
        related_findings = [f for f in earlier if f.code in cite and _covers(f, rid)]
        if related_findings:
            causes.append("see " + "; ".join(f"{f.code} ({f.title})" for f in related_findings[:2]))
        waits = [figures[r].get("communication_us", 0.0) - figures[rid].get("communication_us", 0.0) for r in others]
        wait_med = _median(waits) if waits else 0.0
        src = rank.table_source("step_trace") or rank.table_source("kernels")
        loc = Location(kind="profile", path=str(src[0]) if src else str(rank.path), table="step_trace", rank=rid, op=op,
                       note=f"rank {rid}, pipeline stage {stage}")
        dp = parallel_group(rank, "dp")
        dp_text = f"; its data-parallel group: ranks {rank_label(dp)}" if dp and len(dp) > 1 else ""
        message = (f"Rank {rid} takes {what} more per step than the median of pipeline stage {stage} "
                   f"(ranks {rank_label(peers)}{dp_text}); because every collective waits for its slowest member, each rank's step is that much "
                   f"longer (its {len(others)} peers spend a median {wait_med / 1000:.2f} ms more per step in communication than rank {rid}). "
                   f"Cause: {'; '.join(causes)}.")
        return Finding(
            code=self.code, rule=self.name, severity=self.severity,
            title=f"rank {rid} is a straggler: {what} per step above its peers",
            message=message, saving_us=round(excess, 3), step_time_us=round(step_med, 3), confidence=0.8,
            evidence=evidence, locations=[loc], rank=rid, group=f"rank{rid}",
            tags=["cluster"] + [f"cause:{c}" for c in dict.fromkeys(f.code for f in related_findings)],
        )


def _compute_cause(figures: dict[int, dict[str, Any]], rid: int, others: list[int]) -> tuple[str, str | None, list[str]]:
    """The op types behind a compute excess: (sentence, the top type, rules covering it)."""
    mine: dict[str, tuple[float, float]] = figures[rid].get("types") or {}
    if not mine:
        return ("cause unknown: the profile has no kernel table to tell which op types take longer "
                "(the step breakdown above is the evidence)"), None, []
    rows = []
    for t, (us, n) in mine.items():
        peer_us = _median([(figures[r].get("types") or {}).get(t, (0.0, 0.0))[0] for r in others])
        peer_n = _median([(figures[r].get("types") or {}).get(t, (0.0, 0.0))[1] for r in others])
        rows.append((us - peer_us, t, us, peer_us, n, peer_n))
    rows.sort(reverse=True)
    total = sum(max(r[0], 0.0) for r in rows) or 1.0
    top = [r for r in rows if r[0] > 0][:3]
    if not top:
        return ("cause unknown: no op type runs longer or more often than on its peers, so the extra time is "
                "outside the kernels the profile lists (the step breakdown above is the evidence)"), None, []
    parts = []
    related: list[str] = []
    for ex, t, us, peer_us, n, peer_n in top:
        if n > peer_n + 0.5:
            parts.append(f"{t} runs {n - peer_n:.0f} more kernels per step ({n:.0f} vs {peer_n:.0f}; +{ex / 1000:.2f} ms)")
            if t in CONVERSION_TYPES:
                related.append("CT001" if t == "Cast" else "CT002")
        else:
            ratio = us / peer_us if peer_us else float("inf")
            parts.append(f"{t} kernels take {ratio:.2f}× the peers' time at the same launch count "
                         f"(+{ex / 1000:.2f} ms, {100 * ex / total:.0f} % of the excess)")
    same_launches = all(r[4] <= r[5] + 0.5 for r in top)
    tail = (" — the same work running slower: check the device (npu-smi info: AI core frequency, temperature, "
            "ECC errors)") if same_launches else " — the rank runs a different program than its peers"
    return "; ".join(parts) + tail, top[0][1], related


def _covers(finding: Finding, rank_id: int) -> bool:
    """Does ``finding`` speak of rank ``rank_id`` (its rank, or a location on it)? A run-wide finding (no rank,
    no ranked location) covers every rank."""
    if finding.rank is not None:
        return finding.rank == rank_id
    ranked = [loc.rank for loc in finding.locations if loc.rank is not None]
    return not ranked or rank_id in ranked


def _median(values: list[float]) -> float:
    import numpy as np

    arr = np.array([v for v in values if v == v], dtype=float)
    return float(np.median(arr)) if len(arr) else 0.0
