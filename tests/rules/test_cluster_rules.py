"""The cluster rules (CL001 slow rank, CL002 slow link, CL003 step spread) on simulated stragglers and real output.

The simulator's straggler and slow-link scenarios inject one sick rank into an otherwise clean
8-rank job (:mod:`advisor_core.simulate.faults`); the rules must name that rank (and link) and
the cause. The closed loop (tests/rules/test_closed_loop.py) holds their estimates to the
re-simulated gain; here the verdicts, the causes and the picture are checked.
"""

from __future__ import annotations

import pytest

from advisor_core.api import open_session
from advisor_core.analyses.cluster import cluster_breakdown
from advisor_core.model.run import load_run
from advisor_core.simulate import simulate_scenario


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("cl")
    out = {}
    for name, kw in (("straggler-kernel", {}), ("straggler-data", {}), ("slow-link", {}), ("clean", {"ranks": 8})):
        simulate_scenario(name, base / name, **kw)
        out[name] = base / name
    return out


def _findings(path, select="CL", options=None):
    return open_session(path, plugins=False).analyze(select=[select] if isinstance(select, str) else select,
                                                     options=options).findings


def test_slow_kernel_rank_named_with_its_op_type(runs):
    (f,) = [f for f in _findings(runs["straggler-kernel"]) if f.code == "CL001"]
    assert f.rank == 3
    assert f.title == "rank 3 is a straggler: compute 74.83 ms per step above its peers"
    assert "MatMulV3 kernels take 1.39× the peers' time at the same launch count" in f.message
    assert "check the device (npu-smi info" in f.message
    assert f.locations[0].op == "MatMulV3" and f.locations[0].rank == 3
    assert f.saving_us == pytest.approx(74829.0, abs=500)


def test_slow_data_rank_named_with_its_data_wait(runs):
    found = _findings(runs["straggler-data"], ["CL001", "MD001"])
    (f,) = [f for f in found if f.code == "CL001"]
    assert f.rank == 5
    assert "it waits 20.25 ms for its batch at each step start (peers' median 0.25 ms)" in f.message
    # MD001 has no finding on rank 5 (its host pipeline is not the slow part): not cited, not tagged
    assert not [g for g in found if g.code == "MD001" and g.rank in (None, 5)]
    assert "cause:MD001" not in f.tags and "see MD001" not in f.message
    assert f.saving_us == pytest.approx(20000.0, abs=50)


def test_slow_link_named_with_its_peer_and_the_waiters(runs):
    found = _findings(runs["slow-link"])
    (f,) = [f for f in found if f.code == "CL002"]
    assert f.rank == 6
    assert f.title == "rank 6's HCCS link at 25% of its peers' bandwidth"
    assert "its slowest link is rank 6 → rank 7" in f.message
    assert "ranks 0, 2, 4, 7 wait" in f.message  # its tensor- and data-parallel groups
    assert not [g for g in found if g.code == "CL001"]  # a slow link is not a slow rank


def test_clean_eight_ranks_nothing_above_low(runs):
    found = _findings(runs["clean"])
    assert [f.code for f in found if f.severity.value != "low"] == []


def test_straggler_found_from_the_db_export_too(tmp_path):
    simulate_scenario("straggler-kernel", tmp_path / "db", export="db")
    (f,) = [f for f in _findings(tmp_path / "db", "CL001")]
    assert f.rank == 3 and "MatMulV3" in f.message


def test_cluster_breakdown_matches_msprof_analyze_csv(msprof):
    import csv

    folder = msprof / "resource__advisor__cluster_analysis_output"
    df = cluster_breakdown(load_run(folder))
    with open(folder / "cluster_step_trace_time.csv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Type"] == "rank"]
    assert df["rank"].tolist() == [int(r["Index"]) for r in rows] == list(range(8))
    for (_, got), want in zip(df.iterrows(), rows):
        assert got["compute_us"] == float(want["Computing"])
        assert got["comm_not_overlapped_us"] == float(want["Communication(Not Overlapped)"])
        assert got["free_us"] == float(want["Free"])
    (f,) = _findings(folder, "CL003")
    assert f.title == "communication not overlapped differs by 622.99 ms per step across 8 ranks"
    assert "133.39 ms on rank 1 to 756.37 ms on rank 5" in f.message


def test_report_summaries_for_the_charts(runs):
    result = open_session(runs["slow-link"], plugins=False).analyze(select=["CL"], summaries=True)
    s = result.summaries
    assert sorted(s) == ["link_bandwidth", "minddata_queue", "step_breakdown", "top_kernels"]
    assert s["step_breakdown"]["rank"].tolist() == list(range(8))
    slow = s["link_bandwidth"]
    worst = slow.sort_values("bandwidth_gbps").iloc[0]
    assert (int(worst["src_rank"]), int(worst["dst_rank"]), worst["transport"]) == (6, 7, "HCCS")
    assert s["top_kernels"]["share"].between(0, 1).all() and len(s["top_kernels"]) == 20


# -- CL001's causes on hand-written 4-rank profiles (ranks 0-2 alike, rank 3 the straggler) ------------------------

_STEP_TRACE = ("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
               "Communication(Not Overlapped and Exclude Receive),Preparing\n")


def _cluster(tmp_path, straggler: dict, ranks: int = 4):
    """``ranks`` rank directories with 3 steps each; per step the peers run 8 MatMul (1,200 µs) and 8 Cast
    (50 µs) — compute 10 ms — idle 200 µs of which 100 µs waiting for data. ``straggler`` changes rank 3:
    ``casts`` (Cast kernels per step), ``compute_us`` / ``free_us`` (its step_trace_time.csv figures)."""
    root = tmp_path / "cluster"
    for rid in range(ranks):
        mine = straggler if rid == 3 else {}
        casts = mine.get("casts", 8)
        d = root / f"host_{100 + rid}_20260101120000000_ascend_ms"
        (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        (d / f"profiler_info_{rid}.json").write_text('{"ms_version": "2.5.0", "profiler_parameters": {}}')
        lines = ["Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us)"]
        t = 1_000_000.0
        for step in (1, 2, 3):
            for i in range(8):
                lines.append(f"{step},MatMul-op{i},MatMul,AI_CORE,{t:.3f},1200,0")
                t += 1210
            for i in range(casts):
                lines.append(f"{step},Cast-op{i},Cast,AI_VECTOR_CORE,{t:.3f},50,0")
                t += 60
            t += 1000
        (d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_text("\n".join(lines) + "\n")
        comp = mine.get("compute_us", 9600 + 50 * casts)
        free = mine.get("free_us", 200)
        rows = [f"{s},{comp},0,0,0,{free},{comp + free},0,0,100" for s in (1, 2, 3)]
        (d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_text(_STEP_TRACE + "\n".join(rows) + "\n")
    return root


def _slow_rank(root):
    (f,) = [f for f in _findings(root, "CL001") if f.code == "CL001"]
    assert f.rank == 3
    return f


def test_cause_more_conversion_kernels(tmp_path):
    f = _slow_rank(_cluster(tmp_path, {"casts": 48}))  # 40 more Cast per step: +2 ms of compute
    assert f.title == "rank 3 is a straggler: compute 2.00 ms per step above its peers"
    assert "Cast runs 40 more kernels per step (48 vs 8; +2.00 ms) — the rank runs a different program" in f.message
    assert f.locations[0].op == "Cast"
    assert f.tags == ["cluster"]  # no CT001 finding covers rank 3 in this run: nothing cited


def test_cause_host_bound_gaps(tmp_path):
    f = _slow_rank(_cluster(tmp_path, {"free_us": 3000}))
    assert f.title == "rank 3 is a straggler: idle gaps 2.80 ms per step above its peers"
    assert ("its device sits idle 2.90 ms per step between kernels (peers' median 0.10 ms): the host does not "
            "launch work fast enough (host-bound)") in f.message
    assert f.tags == ["cluster"]


def test_cause_unknown_shows_the_evidence(tmp_path):
    f = _slow_rank(_cluster(tmp_path, {"compute_us": 12000}))  # more Computing, the same kernels
    assert "Cause: cause unknown: no op type runs longer or more often than on its peers" in f.message
    assert [(e.name, e.value, e.threshold) for e in f.evidence] == [("computing", 12000.0, 10204.0)]
    assert f.locations[0].op is None and f.tags == ["cluster"]


def test_cause_cites_the_rule_whose_finding_covers_the_rank(tmp_path, monkeypatch):
    from advisor_core.engine import Finding, Location, Severity
    from advisor_core.engine.context import RuleContext

    def ct001(rank: int, title: str) -> Finding:
        return Finding(code="CT001", rule="cast", severity=Severity.MEDIUM, title=title, message="-", saving_us=1.0,
                       rank=rank, locations=[Location(kind="profile", rank=rank)])

    earlier = (ct001(1, "Cast round trips on rank 1"), ct001(3, "40 extra Cast kernels per step on rank 3"))
    monkeypatch.setattr(RuleContext, "findings_so_far", lambda self: earlier)
    f = _slow_rank(_cluster(tmp_path, {"casts": 48}))
    assert f.message.endswith("; see CT001 (40 extra Cast kernels per step on rank 3).")
    assert "rank 1" not in f.message.split("see CT001")[1]
    assert f.tags == ["cluster", "cause:CT001"]


# -- CL002 against the hardware ---------------------------------------------------------------------------------

def test_every_hccs_link_degraded_is_found_against_its_expected_bandwidth(tmp_path):
    out = tmp_path / "hccs"
    simulate_scenario("clean", out, ranks=8, layers=2, steps=3, sets=("hardware.hccs_bandwidth_gbps=12",))
    found = _findings(out)
    (f,) = [f for f in found if f.code == "CL002"]
    assert f.rank is None and f.title == "HCCS links at 67% of their expected 18 GB/s on every rank"
    assert f.message.startswith("HCCS transfers run at ")
    assert "on all 8 ranks (median 12.0 GB/s), 67% of the 18 GB/s expected of HCCS" in f.message
    assert f.evidence[0].threshold == 14.4  # 0.8 x 18 GB/s
    assert f.saving_us == pytest.approx(67265, rel=0.02)
    # the same run judged against a slower reference: nothing to say
    assert not [g for g in _findings(out, options={"CL002": {"expected_gbps": {"HCCS": 14.0}}}) if g.code == "CL002"]


# -- per pipeline stage and data-parallel group (dp2 x mp2 x pp2) ----------------------------------------------------

PP2 = {"ranks": 8, "layers": 2, "steps": 3, "sets": ("parallel_config.pipeline_stage=2", "parallel_config.micro_batch_num=2")}


def test_dp2_mp2_pp2_groups(tmp_path):
    simulate_scenario("straggler-kernel", tmp_path / "k", **PP2)
    simulate_scenario("slow-link", tmp_path / "l", **PP2)
    kernel = {f.code: f for f in _findings(tmp_path / "k")}
    assert "(ranks 0-3; its data-parallel group: ranks 1, 3)" in kernel["CL001"].message
    assert kernel["CL001"].rank == 3
    assert kernel["CL003"].title == "compute differs by 8.05 ms per step across 4 ranks of stage 0"
    assert ("Per data-parallel group (they meet in the gradient AllReduce): ranks 1, 3 differ most, compute 8.05 ms "
            "apart (rank 3 the higher); the closest, ranks 0, 2, 0.02 ms.") in kernel["CL003"].message
    (link,) = [f for f in _findings(tmp_path / "l") if f.code == "CL002"]
    assert link.rank == 6
    assert "where the ranks of pipeline stage 1 using HCCS (ranks 4-7) reach a median of" in link.message
    assert link.evidence[0].source.endswith("of ranks 4-7")
