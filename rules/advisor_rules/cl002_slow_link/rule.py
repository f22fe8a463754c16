"""CL002's rule class: its help page, options, and the check over every profiled rank."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Evidence, Finding, Location, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules._common import low_outliers, pipeline_stage_of, rank_label
from advisor_rules.cl002_slow_link.evidence import link_figures, matrix_pairs


# Expected bandwidth per link type, GB/s: msprof-analyze's reference figures (cluster_analyse's HCCL analysis
# constants LINK_BANDWIDTH / TRANSPORT_TYPE_BW_DICT: HCCS 18, PCIE 20, RDMA 12.5; CANN's msprof uses the same for
# Ascend 910, and its slow-link advice calls a link below 0.8 of it inefficient). SIO has no published figure.
EXPECTED_GBPS = {"HCCS": 18.0, "PCIE": 20.0, "RDMA": 12.5}
LARGE_PACKET_RATIO = 0.8  # msprof's LARGE_MESSAGE_RATE: below it a link is slow for its small packets, not its hardware


class SlowLink(Rule):
    """A link slower than it should be: below its hardware's expected bandwidth on every rank, or below the same
    link type on its stage peers — and who waits on it.

    What
        Per link type (``HCCS``, ``PCIE``, ``RDMA``, ``SIO`` in ``communication.json``'s
        bandwidth info, or ``CommAnalyzerBandwidth``), each rank's achieved bandwidth: bytes over
        its own transfer time (``Transit Time``, not the op's elapsed time — that includes
        waiting for peers). Two checks:

        * against the hardware: the ranks' median bandwidth of a link type, over the transfers
          made of large packets (``Large Packet Ratio`` ≥ 0.8, as msprof's slow-link advice
          counts them: small packets are slow on any link), below ``min_utilization`` (0.8,
          msprof's ``BANDWIDTH_THRESHOLD``) × the type's expected bandwidth. The expected
          figures are msprof-analyze's (``cluster_analyse`` HCCL analysis constants
          ``LINK_BANDWIDTH``): HCCS 18 GB/s, PCIE 20 GB/s, RDMA 12.5 GB/s (CANN's msprof gives
          Ascend 910B HCCS 28 and RDMA 25 GB/s); SIO has none. ``expected_gbps`` overrides them
          per type, 0 turning a type's check off; your cluster's measured ``hccl_test`` figures
          are the best reference (``[tool.advisor.rules.CL002]`` ``expected_gbps = {HCCS = 28.0,
          SIO = 100.0}``). This finds links degraded on every rank alike, which a comparison
          between ranks cannot see;
        * against the peers: per pipeline stage (the ranks that run the same collectives), a rank
          below ``min_ratio`` × the median of the stage's ranks using that link type is
          reported, with the link to the peer it sends to (``communication_matrix``), and the
          time its group peers spend waiting for it (their ``Wait Time`` in the groups they
          share with it).

    Why
        A collective moves data in a ring or mesh across every member's link and ends when the
        slowest transfer does, so one degraded link (a flapping HCCS port, a RoCE NIC at a lower
        rate, a bad cable) slows every collective of every group it is in; the other members see
        it as wait, not as slower transfers. A link slow on every rank (a switch port speed, a
        fabric set to a lower rate, traffic crossing PCIe instead of HCCS) shows no outlier at
        all, only a bandwidth far from what the hardware does. msprof-analyze's ``slow_link``
        lists the link; this rule says which rank and what it costs.

    Example
        Rank 6's HCCS transfers run at 45.8 GB/s where the other seven ranks reach 183.3 GB/s;
        its peers wait 47–77 ms per step inside the collectives they share with it. Or: HCCS
        runs at 11.2 GB/s on all 8 ranks, 62 % of the 18 GB/s expected.

    Fix
        Check the link: ``hccn_tool -i <device> -link -g`` / ``-optical -g`` for RoCE,
        ``npu-smi info -t topo`` for HCCS, the switch port counters; re-seat or replace it, or
        move the job off the node. There is no config patch.

    Time at stake
        For every transfer of the rank over that link type: its transfer time minus the time at
        the peers' median bandwidth (or, on every rank, at the expected bandwidth), counted only
        up to the part of the op not hidden behind compute (a gradient bucket that overlaps the
        backward costs nothing until it outlasts it), per step. Every member of the rank's
        groups waits that long.
    """

    code = "CL002"
    name = "slow-link"
    summary = "a link slower than its hardware or the same link type elsewhere, and who waits on it"
    severity = Severity.HIGH
    requires = Requirements(any_of=(Need.table("communication"),))
    tags = ("cluster", "communication")
    fix_availability = "never"

    class Options(RuleOptions):
        min_ratio: float = Field(0.6, gt=0, lt=1, description="a link below this fraction of its peers' median bandwidth is slow")
        min_utilization: float = Field(0.8, gt=0, le=1, description="a link type below this fraction of its expected "
                                       "bandwidth on the ranks' median is slow everywhere")
        expected_gbps: dict[str, float] = Field(default_factory=lambda: dict(EXPECTED_GBPS),
                                                description="expected bandwidth per link type, GB/s, over msprof-analyze's "
                                                "figures (HCCS 18, PCIE 20, RDMA 12.5); 0 turns a type's check off")
        min_saving_pct: float = Field(1.0, ge=0, description="report a slow link costing at least this share of the step, %")
        min_ranks: int = Field(3, ge=3, description="ranks of a pipeline stage using a link type needed to compare them")

    def rank_evidence(self, rank: Any) -> dict[str, Any] | None:
        """Transfers per link type (MB, own transfer µs, µs not hidden by compute), waits per group, matrix links."""
        return link_figures(rank)

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        run = ctx.run
        figs = {r.rank_id: ev for r in run if (ev := ctx.rank_evidence(r)) is not None} if run is not None else {}
        if not figs:
            ctx.skip("no rank has communication.json (or its DB twin) to measure its links")
            return
        step_us = _median_of([ev.get("total_us") for ev in figs.values()])
        members: dict[str, list[int]] = {}
        for rid, ev in figs.items():
            for g in ev["waits"]:
                members.setdefault(g, []).append(rid)
        found = False
        link_types = sorted({lt for ev in figs.values() for lt in ev["links"]})
        for lt in link_types:
            f = self._below_hardware(run, lt, figs, step_us)
            if f is not None:
                found = True
                yield f
        cfg = ctx.config
        stages: dict[int, list[int]] = {}
        for rid in figs:
            s = pipeline_stage_of(run.rank(rid), cfg.pipeline_stages if cfg is not None else 1,
                                  cfg.device_count if cfg is not None else None)
            stages.setdefault(s, []).append(rid)
        compared = [s for s, rids in stages.items() if len(rids) >= self.options.min_ranks]
        for stage in sorted(compared):
            for f in self._below_peers(run, stage if len(stages) > 1 else None, sorted(stages[stage]), link_types,
                                       figs, members, step_us):
                found = True
                yield f
        if not found:
            peers = (f"within {self.options.min_ratio:.0%} of their stage peers' median"
                     if compared else f"not compared between ranks (no pipeline stage has {self.options.min_ranks} "
                                      "ranks with communication)")
            ctx.skip(f"every link type is at {self.options.min_utilization:.0%} or more of its expected bandwidth "
                     f"and {peers} ({', '.join(link_types) or 'no transfers'}; {len(figs)} ranks)")

    def _below_hardware(self, run: Any, lt: str, figs: dict[int, dict[str, Any]],
                        step_us: float | None) -> Finding | None:
        """The link type on every rank against its expected bandwidth (large-packet transfers only)."""
        import numpy as np

        expected = {**EXPECTED_GBPS, **self.options.expected_gbps}.get(lt)  # a type set to 0: not checked
        if not expected:
            return None
        gbps: dict[int, float] = {}
        cost: dict[int, float] = {}
        excess_all: dict[int, float] = {}
        for rid, ev in figs.items():
            d = ev["links"].get(lt)
            if d is None:
                continue
            large = d["large_ratio"] >= LARGE_PACKET_RATIO
            if not large.any() or d["transit_us"][large].sum() <= 0:
                continue
            size, transit, exposed = d["size_mb"][large], d["transit_us"][large], d["exposed_us"][large]
            gbps[rid] = float(size.sum() / transit.sum() * 1000.0)
            excess = np.maximum(transit - size / expected * 1000.0, 0.0)
            hidden_known = np.isfinite(exposed)
            cost[rid] = float(np.where(hidden_known, np.minimum(excess, np.maximum(exposed, 0.0)), excess).sum()) / ev["steps"]
            excess_all[rid] = float(excess.sum()) / ev["steps"]
        if not gbps:
            return None
        med = float(np.median(list(gbps.values())))
        if med >= self.options.min_utilization * expected:
            return None
        saving = float(np.median(list(cost.values())))  # every rank's collectives wait for the slow transfers alike
        if step_us and 100.0 * saving / step_us < self.options.min_saving_pct:
            return None
        ranks = sorted(gbps)
        low, high = min(gbps.values()), max(gbps.values())
        spread = f"{low:.1f}–{high:.1f} GB/s" if high - low >= 0.05 else f"{med:.1f} GB/s"
        first = run.rank(ranks[0])
        src = first.table_source("communication_bandwidth") or first.table_source("communication")
        on = f"all {len(ranks)} ranks" if len(ranks) > 1 else f"rank {ranks[0]}"
        message = (f"{lt} transfers run at {spread} on {on} (median {med:.1f} GB/s), {med / expected:.0%} of the "
                   f"{expected:g} GB/s expected of {lt} (msprof-analyze's reference; msprof calls a link below "
                   f"{self.options.min_utilization:.0%} of it inefficient), counting transfers of large packets only. "
                   f"No rank stands out: the link "
                   f"type is slow everywhere — a lower link rate, a fabric or switch setting, or traffic on a slower "
                   f"path. At the expected bandwidth the step would be {saving / 1000:.2f} ms shorter "
                   f"({float(np.median(list(excess_all.values()))) / 1000:.2f} ms of slower transfers per step). "
                   f"Check {'hccn_tool -link/-optical and the switch ports' if lt == 'RDMA' else 'npu-smi info -t topo and the ' + lt + ' ports'}"
                   f"; set expected_gbps if your hardware's reference differs.")
        return Finding(
            code=self.code, rule=self.name, severity=self.severity,
            title=f"{lt} links at {med / expected:.0%} of their expected {expected:g} GB/s on every rank",
            message=message, saving_us=round(saving, 3), step_time_us=round(step_us, 3) if step_us else None,
            confidence=0.6,
            evidence=[Evidence(name=f"{lt.lower()}_bandwidth", value=round(med, 3), unit="GB/s",
                               threshold=round(expected * self.options.min_utilization, 3),
                               source=f"expected {expected:g} GB/s (msprof-analyze)"),
                      Evidence(name="ranks", value=len(ranks), unit="ranks")],
            locations=[Location(kind="profile", path=str(src[0]) if src else str(first.path),
                                table="communication_bandwidth", op=lt, note=f"{lt} on ranks {rank_label(ranks)}")],
            rank=None, group=f"all:{lt}", tags=["cluster", "link", "hardware"],
        )

    def _below_peers(self, run: Any, stage: int | None, rids: list[int], link_types: list[str],
                     figs: dict[int, dict[str, Any]], members: dict[str, list[int]],
                     step_us: float | None) -> Iterable[Finding]:
        """Ranks of one pipeline stage whose link is slower than the same link type on the stage's other ranks."""
        import numpy as np

        for lt in link_types:
            bw: dict[int, float] = {}
            for rid in rids:
                d = figs[rid]["links"].get(lt)
                if d is not None and d["transit_us"].sum() > 0:
                    bw[rid] = float(d["size_mb"].sum() / d["transit_us"].sum() * 1000.0)  # MB/µs·1000 = GB/s
            if len(bw) < self.options.min_ranks:
                continue
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
                yield self._finding(run.rank(o.rank), lt, o.value, med, saving, step_us, ev, figs, members,
                                    float(excess.sum()) / ev["steps"], bool(hidden_known.all()), stage, sorted(bw))

    def _finding(self, rank: Any, lt: str, gbps: float, med: float, saving: float, step_us: float | None,
                 ev: dict[str, Any], figs: dict[int, dict[str, Any]], members: dict[str, list[int]],
                 excess_total: float, exposure_known: bool, stage: int | None, peers: list[int]) -> Finding:
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
        where = f"the ranks of pipeline stage {stage} using {lt} (ranks {rank_label(peers)})" if stage is not None \
            else f"the ranks using {lt}"
        message = (f"Rank {rid}'s {lt} transfers run at {gbps:.1f} GB/s where {where} reach a median of "
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
                               threshold=round(med * self.options.min_ratio, 3),
                               source=f"median {med:.1f} GB/s of ranks {rank_label(peers)}"),
                      Evidence(name="peer_wait_time", value=round(sum(w for _, w in worst), 3), unit="µs")],
            locations=[Location(kind="profile", path=str(src[0]) if src else str(rank.path),
                                table="communication_bandwidth", rank=rid, op=lt, note=f"rank {rid} {lt}")],
            rank=rid, group=f"{rid}:{lt}", tags=["cluster", "link"],
        )


def _median_of(values: list[Any]) -> float | None:
    import numpy as np

    vals = [float(v) for v in values if v is not None and v == v]
    return float(np.median(vals)) if vals else None
