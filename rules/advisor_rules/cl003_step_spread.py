"""CL003: the cluster picture — each rank's step broken down side by side, and how far apart they are."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Evidence, Finding, Location, Need, Requirements, Rule, RuleContext, RuleOptions, Severity


class StepSpread(Rule):
    """The per-rank step breakdown of the cluster, and the spread between its fastest and slowest ranks.

    What
        One row per rank — compute, communication not overlapped by compute, idle (free) time
        and the wait for data at the step start, µs per step over the steady steps — from each
        rank's step breakdown, or from msprof-analyze's ``cluster_step_trace_time.csv`` when the
        run folder holds only the cluster output. Reported (``low``) when the step times of the
        ranks spread by more than ``min_spread_pct`` of the median: the ranks' median, minimum
        and maximum, the slowest ranks, and which part of the step differs most — within each
        pipeline stage, and, when ``parallel_group_info`` gives the data-parallel groups, the
        group whose members differ most (it waits for its slowest member in the gradient
        AllReduce).

    Why
        In synchronous training every rank's step ends together, so the spread shows up in
        *where* the time goes: the rank the others wait for has the least communication wait
        and the most of something else. This is the table to read before the slow-rank (CL001)
        and slow-link (CL002) verdicts, and what ``--format html`` draws as the per-rank stacked
        breakdown.

    Example
        msprof-analyze's sample cluster (8 ranks): compute 80.1–81.7 ms on every rank, but
        communication not overlapped from 133 ms (rank 1) to 756 ms (rank 5) and free time from
        893 ms to 1,489 ms (rank 1): rank 1 is the one the others wait for.

    Fix
        Nothing by itself: it is the overview. Follow CL001/CL002 (or the per-rank rules) for the
        rank the others wait for.

    Time at stake
        None estimated (informational): the saving belongs to the finding that names the cause.
    """

    code = "CL003"
    name = "step-spread"
    summary = "per-rank step breakdown and the spread between ranks"
    severity = Severity.LOW
    requires = Requirements(any_of=(Need.table("step_trace"), Need.table("kernels", ("name", "duration_us")),
                                    Need.table("cluster_step_trace")))
    tags = ("cluster",)
    fix_availability = "never"

    class Options(RuleOptions):
        min_spread_pct: float = Field(3.0, ge=0, description="report when any part of the step spreads by this share of "
                                      "the median step, %")
        min_ranks: int = Field(2, ge=2, description="ranks needed for a cluster picture")

    def rank_evidence(self, rank: Any) -> None:
        """The rank's mean step figures (``rank_step_means``), computed where the rank is read, on every core.

        They come back with the rank (the core hands them over), and ``cluster_breakdown``
        in the check reads them rather than computing rank after rank in the client. A rank
        whose figures fail is left to the check, which reports the error where it always did.
        """
        from advisor_core.analyses.cluster import rank_step_means

        try:
            rank_step_means(rank)
        except Exception:  # noqa: BLE001 - said by the check (see the docstring)
            pass

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        from advisor_core.analyses.cluster import cluster_breakdown, cluster_picture

        run = ctx.run
        df = cluster_breakdown(run) if run is not None else None
        if df is None or len(df) < self.options.min_ranks:
            ctx.skip(f"needs a step breakdown of at least {self.options.min_ranks} ranks")
            return
        pic = cluster_picture(df)
        med = pic["median_total_us"]
        parts = {"compute_us": "compute", "comm_not_overlapped_us": "communication not overlapped", "free_us": "free",
                 "data_wait_us": "data wait"}
        # pipeline stages run different programs (and the bubble): compare ranks within a stage
        stages = df["stage"].fillna(0).astype(int)
        best: tuple[float, str, int] | None = None
        for stage in sorted(set(stages)):
            part = df[stages == stage]
            if len(part) < self.options.min_ranks:
                continue
            for c in parts:
                if part[c].notna().any():
                    spread = float(part[c].max() - part[c].min())
                    if best is None or spread > best[0]:
                        best = (spread, c, stage)
        if best is None or not med or 100.0 * best[0] / med < self.options.min_spread_pct:
            ctx.skip(f"{len(df)} ranks within {self.options.min_spread_pct:g} % of the median step "
                     f"({med / 1000:.2f} ms) in every part of it, stage by stage")
            return
        widest, col, stage = best
        n_stages = len(set(stages))
        df = df[stages == stage]
        lo, hi = df.loc[df[col].idxmin()], df.loc[df[col].idxmax()]
        # the ranks at both ends of the widest part, not all of them (the full table: --format html, the API)
        ends = df.sort_values(col, kind="stable")
        shown = list(dict.fromkeys([*ends["rank"].head(2).tolist(), *ends["rank"].tail(2).tolist()]))
        by_rank = {int(r): i for i, r in enumerate(df["rank"].tolist())}
        lines = [f"rank {int(r)}: " + ", ".join(f"{parts[c]} {df[c].iloc[by_rank[int(r)]] / 1000:.2f} ms" for c in parts
                                                if df[c].iloc[by_rank[int(r)]] == df[c].iloc[by_rank[int(r)]])
                 for r in shown]
        source = str(df["source"].iloc[0])
        if pic["spread"] * 100.0 < self.options.min_spread_pct:
            steps = f"every rank's step ends together (median {med / 1000:.2f} ms)"
        else:
            steps = (f"median step {med / 1000:.2f} ms (from {pic['min_total_us'] / 1000:.2f} to "
                     f"{pic['max_total_us'] / 1000:.2f} ms; slowest ranks {', '.join(map(str, pic['slowest']))})")
        where_stage = f" within pipeline stage {stage}" if n_stages > 1 else ""
        message = (f"{len(df)} ranks{where_stage}, {steps}. The widest difference is {parts[col]}: {lo[col] / 1000:.2f} ms on rank "
                   f"{int(lo['rank'])} to {hi[col] / 1000:.2f} ms on rank {int(hi['rank'])}"
                   + (f" — rank {int(lo['rank'])} waits least: the others wait for it" if col == "comm_not_overlapped_us"
                      else "") + f". At both ends (per step, {source}): " + "; ".join(lines) + ".")
        dp_text, dp_evidence = _dp_group_spread(df, parts)
        message += dp_text
        where = (run.profiles.cluster_files.get("cluster_step_trace_time") if source.startswith("cluster")
                 else None)
        yield Finding(
            code=self.code, rule=self.name, severity=self.severity,
            title=f"{parts[col]} differs by {widest / 1000:.2f} ms per step across {len(df)} ranks"
                  + (f" of stage {stage}" if n_stages > 1 else ""),
            message=message, saving_us=None, step_time_us=round(med, 3), confidence=0.9,
            evidence=[Evidence(name="median_step", value=round(med, 3), unit="µs"),
                      Evidence(name=f"{col.removesuffix('_us')}_spread", value=round(widest, 3), unit="µs",
                               threshold=round(med * self.options.min_spread_pct / 100.0, 3)), *dp_evidence],
            locations=[Location(kind="profile", path=str(where) if where else None, table="step_trace",
                                note=f"ranks {int(lo['rank'])} and {int(hi['rank'])}")],
            tags=["cluster"],
        )


def _dp_group_spread(df: Any, parts: dict[str, str]) -> tuple[str, list[Evidence]]:
    """The data-parallel group (``parallel_group_info``) whose ranks differ most, as a sentence and evidence.

    Ranks of one data-parallel group meet in the gradient AllReduce every step: the group waits
    for its slowest member, so the spread inside each group is what that collective loses.
    """
    if "dp_group" not in df or df["dp_group"].isna().all():
        return "", []
    spreads = []
    for group, part in df.dropna(subset=["dp_group"]).groupby("dp_group", sort=True):
        if len(part) < 2:
            continue
        widest = max(((float(part[c].max() - part[c].min()), c) for c in parts if part[c].notna().any()),
                     default=None)
        if widest is not None:
            slow = part.loc[part[widest[1]].idxmax()]
            spreads.append((widest[0], str(group), widest[1], int(slow["rank"])))
    if len(spreads) < 2:
        return "", []
    spreads.sort(reverse=True)
    spread, group, col, slow = spreads[0]
    calm = spreads[-1]
    text = (f" Per data-parallel group (they meet in the gradient AllReduce): ranks {group.replace(',', ', ')} differ "
            f"most, {parts[col]} {spread / 1000:.2f} ms apart (rank {slow} the higher); the closest, ranks "
            f"{calm[1].replace(',', ', ')}, {calm[0] / 1000:.2f} ms.")
    return text, [Evidence(name="dp_group_spread", value=round(spread, 3), unit="µs", source=f"ranks {group}")]

