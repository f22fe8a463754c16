"""CL002's rule class: its help page, options, and the check over every profiled rank."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Evidence, Finding, Location, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules._common import low_outliers, rank_label
from advisor_rules.cl002_slow_link.evidence import link_figures, matrix_pairs


class SlowLink(Rule):
    """A rank whose link moves data slower than the same kind of link on the other ranks, and who waits on it.

    What
        Per link type (``HCCS``, ``PCIE``, ``RDMA``, ``SIO`` in ``communication.json``'s
        bandwidth info, or ``CommAnalyzerBandwidth``), each rank's achieved bandwidth: bytes over
        its own transfer time (``Transit Time``, not the op's elapsed time — that includes
        waiting for peers). A rank below ``min_ratio`` × the median of the ranks using that link
        type is reported, with the link to the peer it sends to (``communication_matrix``), and
        the time its group peers spend waiting for it (their ``Wait Time`` in the groups they
        share with it).

    Why
        A collective moves data in a ring or mesh across every member's link and ends when the
        slowest transfer does, so one degraded link (a flapping HCCS port, a RoCE NIC at a lower
        rate, a bad cable) slows every collective of every group it is in; the other members see
        it as wait, not as slower transfers. msprof-analyze's ``slow_link`` lists the link; this
        rule says which rank and what it costs.

    Example
        Rank 6's HCCS transfers run at 45.8 GB/s where the other seven ranks reach 183.3 GB/s;
        its peers wait 47–77 ms per step inside the collectives they share with it.

    Fix
        Check the link: ``hccn_tool -i <device> -link -g`` / ``-optical -g`` for RoCE,
        ``npu-smi info -t topo`` for HCCS, the switch port counters; re-seat or replace it, or
        move the job off the node. There is no config patch.

    Time at stake
        For every transfer of the rank over that link type: its transfer time minus the time at
        the peers' median bandwidth, counted only up to the part of the op not hidden behind
        compute (a gradient bucket that overlaps the backward costs nothing until it outlasts
        it), per step. Every member of the rank's groups waits that long.
    """

    code = "CL002"
    name = "slow-link"
    summary = "a link slower than the same link type elsewhere, and who waits on it"
    severity = Severity.HIGH
    requires = Requirements(any_of=(Need.table("communication"),))
    tags = ("cluster", "communication")
    fix_availability = "never"

    class Options(RuleOptions):
        min_ratio: float = Field(0.6, gt=0, lt=1, description="a link below this fraction of its peers' median bandwidth is slow")
        min_saving_pct: float = Field(1.0, ge=0, description="report a slow link costing at least this share of the step, %")
        min_ranks: int = Field(3, ge=3, description="ranks using a link type needed to compare them")

    def rank_evidence(self, rank: Any) -> dict[str, Any] | None:
        """Transfers per link type (MB, own transfer µs, µs not hidden by compute), waits per group, matrix links."""
        return link_figures(rank)

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        import numpy as np

        run = ctx.run
        if run is None or len(run.ranks) < self.options.min_ranks:
            ctx.skip(f"needs at least {self.options.min_ranks} profiled ranks with communication to compare")
            return
        figs = {r.rank_id: ev for r in run if (ev := ctx.rank_evidence(r)) is not None}
        if len(figs) < self.options.min_ranks:
            ctx.skip(f"{len(figs)} rank(s) have communication.json (or its DB twin); "
                     f"{self.options.min_ranks} are needed to compare links")
            return
        step_us = _median_of([ev.get("total_us") for ev in figs.values()])
        members: dict[str, list[int]] = {}
        for rid, ev in figs.items():
            for g in ev["waits"]:
                members.setdefault(g, []).append(rid)
        found = False
        link_types = sorted({lt for ev in figs.values() for lt in ev["links"]})
        for lt in link_types:
            bw: dict[int, float] = {}
            for rid, ev in figs.items():
                d = ev["links"].get(lt)
                if d is not None and d["transit_us"].sum() > 0:
                    bw[rid] = float(d["size_mb"].sum() / d["transit_us"].sum() * 1000.0)  # MB/µs·1000 = GB/s
            med, slow = low_outliers(bw, ratio=self.options.min_ratio)
            for o in slow:
                ev = figs[o.rank]
                d = ev["links"][lt]
                at_median = d["size_mb"] / med * 1000.0  # µs at the peers' median bandwidth
                excess = np.maximum(d["transit_us"] - at_median, 0.0)
                exposed = d["exposed_us"]
                hidden_known = np.isfinite(exposed)
                cost = np.where(hidden_known, np.minimum(excess, np.maximum(exposed, 0.0)), excess)
                saving = float(cost.sum()) / ev["steps"]
                if step_us and 100.0 * saving / step_us < self.options.min_saving_pct:
                    continue
                found = True
                yield self._finding(run.rank(o.rank), lt, o.value, med, saving, step_us, ev, figs, members,
                                    float(excess.sum()) / ev["steps"], bool(hidden_known.all()))
        if not found:
            ctx.skip(f"every link type's bandwidth is within {self.options.min_ratio:.0%} of its peers' median "
                     f"({', '.join(link_types) or 'no transfers'}; {len(figs)} ranks)")

    def _finding(self, rank: Any, lt: str, gbps: float, med: float, saving: float, step_us: float | None,
                 ev: dict[str, Any], figs: dict[int, dict[str, Any]], members: dict[str, list[int]],
                 excess_total: float, exposure_known: bool) -> Finding:
        rid = rank.rank_id
        groups = [g for g in ev["waits"] if len(members.get(g, [])) > 1]
        waiting: dict[int, float] = {}
        for g in groups:
            for peer in members[g]:
                if peer != rid:
                    waiting[peer] = waiting.get(peer, 0.0) + figs[peer]["waits"].get(g, 0.0)
        worst = sorted(waiting.items(), key=lambda kv: -kv[1])
        own_pairs = [p for p in matrix_pairs(rank) if str(p.get("transport_type")) == lt and p.get("transit_us")]
        pair_text = ""
        if own_pairs:
            p = min(own_pairs, key=lambda q: q["transit_size_mb"] / q["transit_us"])
            group_ranks = sorted(members.get(str(p["rank_set"]), []))
            src, dst = int(p["src_rank"]), int(p["dst_rank"])
            if src < len(group_ranks) and dst < len(group_ranks):
                src, dst = group_ranks[src], group_ranks[dst]
            pair_text = f"; its slowest link is rank {src} → rank {dst} at {p['transit_size_mb'] / p['transit_us'] * 1000:.1f} GB/s"
        wait_text = (f"ranks {rank_label([r for r, _ in worst])} wait {min(w for _, w in worst) / 1000:.2f}–"
                     f"{max(w for _, w in worst) / 1000:.2f} ms per step in the collectives they share with it"
                     if worst else "no peer shares a group with it in this profile")
        hidden = (f"{excess_total / 1000:.2f} ms per step of slower transfers, {saving / 1000:.2f} ms of it not hidden "
                  "behind compute" if exposure_known else f"{excess_total / 1000:.2f} ms per step of slower transfers")
        message = (f"Rank {rid}'s {lt} transfers run at {gbps:.1f} GB/s where the ranks using {lt} reach a median of "
                   f"{med:.1f} GB/s ({gbps / med:.0%}){pair_text}. That is {hidden}; {wait_text}. Check the link "
                   f"({'hccn_tool -link/-optical' if lt == 'RDMA' else 'npu-smi info -t topo, the HCCS port'}), or move "
                   "the job off it.")
        src = rank.table_source("communication_bandwidth") or rank.table_source("communication")
        return Finding(
            code=self.code, rule=self.name, severity=self.severity,
            title=f"rank {rid}'s {lt} link at {gbps / med:.0%} of its peers' bandwidth",
            message=message, saving_us=round(saving, 3), step_time_us=round(step_us, 3) if step_us else None,
            confidence=0.8 if exposure_known else 0.6,
            evidence=[Evidence(name=f"{lt.lower()}_bandwidth", value=round(gbps, 3), unit="GB/s",
                               threshold=round(med * self.options.min_ratio, 3), source=f"median {med:.1f} GB/s"),
                      Evidence(name="peer_wait_time", value=round(sum(w for _, w in worst), 3), unit="µs")],
            locations=[Location(kind="profile", path=str(src[0]) if src else str(rank.path),
                                table="communication_bandwidth", rank=rid, op=lt, note=f"rank {rid} {lt}")],
            rank=rid, group=f"{rid}:{lt}", tags=["cluster", "link"],
        )


def _median_of(values: list[Any]) -> float | None:
    import numpy as np

    vals = [float(v) for v in values if v is not None and v == v]
    return float(np.median(vals)) if vals else None
