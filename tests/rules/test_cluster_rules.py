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


def _findings(path, select="CL"):
    return open_session(path, plugins=False).analyze(select=[select]).findings


def test_slow_kernel_rank_named_with_its_op_type(runs):
    (f,) = [f for f in _findings(runs["straggler-kernel"]) if f.code == "CL001"]
    assert f.rank == 3
    assert f.title == "rank 3 is a straggler: compute 74.83 ms per step above its peers"
    assert "MatMulV3 kernels take 1.39× the peers' time at the same launch count" in f.message
    assert "check the device (npu-smi info" in f.message
    assert f.locations[0].op == "MatMulV3" and f.locations[0].rank == 3
    assert f.saving_us == pytest.approx(74829.0, abs=500)


def test_slow_data_rank_named_with_its_data_wait(runs):
    (f,) = [f for f in _findings(runs["straggler-data"]) if f.code == "CL001"]
    assert f.rank == 5
    assert "it waits 20.25 ms for its batch at each step start (peers' median 0.25 ms)" in f.message
    assert "cause:MD001" in f.tags
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
