"""Every real profiler output loads, with exact values checked against the files."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from advisor_core.analyses.step_time import step_breakdown
from advisor_core.diagnostics import DiagnosticSink, Severity
from advisor_core.model.run import load_run


def _no_errors(sink: DiagnosticSink) -> None:
    assert not sink.of(Severity.ERROR), [d.render() for d in sink.of(Severity.ERROR)]


class TestMsprofKernelDetails:
    def test_a2_pipe_utilization_sample(self, msprof):
        sink = DiagnosticSink()
        run = load_run(msprof / "ut__advisor__compute_advice__data", sink=sink)
        _no_errors(sink)
        rank = run.rank(0)
        df = rank.table("kernels")
        assert len(df) == 29
        first = df.iloc[0]
        assert first["name"] == "aclnnMatmul_MatMulCommon_MatMulV2"
        assert first["type"] == "MatMulV2"
        assert first["accelerator_core"] == "AI_CORE"
        # "1736413971558972.912\t": trailing TAB stripped, every nanosecond kept.
        assert first["start_ns"] == 1736413971558972912
        assert first["duration_us"] == 185.504
        assert first["wait_us"] == 1.087
        assert first["step_id"] == 19
        # Triple-quoted CSV shape: the literal quotes CANN writes are removed.
        assert first["input_shapes"] == "81920,4096;8192,512"
        assert first["output_shapes"] == "4096,512"
        assert first["input_dtypes"] == "DT_BF16;DT_BF16"
        last = df.iloc[-1]
        assert last["name"] == "aclnnAdd_AddAiCore_Add"
        assert last["start_ns"] == 1736413974268747953
        # Scalars-only inputs are written "; " in the file.
        assert last["input_shapes"].strip() == ";"
        assert df["type"].value_counts().to_dict() == {
            "MatMulV3": 8,
            "Add": 8,
            "FlashAttentionScore": 5,
            "MatMulV2": 4,
            "FlashAttentionScoreGrad": 4,
        }

    def test_block_dim_and_pmu_columns(self, msprof):
        rank = load_run(msprof / "ut__advisor__compute_advice__data").rank(0)
        # Header says "Block Dim"; canonical name is block_num.
        df = rank.table("kernels", ["name", "block_num", "mix_block_num", "aic_mac_ratio", "cube_utilization_pct", "aiv_vec_ratio"])
        assert df.loc[0, "block_num"] == 16
        assert df.loc[1, "block_num"] == 20
        assert df.loc[0, "aic_mac_ratio"] == 0.824
        assert df.loc[0, "cube_utilization_pct"] == 79.295
        assert df.loc[0, "aiv_vec_ratio"] == 0
        cols = rank.columns("kernels")
        assert "op_state" in cols and "hf32_eligible" in cols and "device_id" not in cols

    def test_older_arithmetic_utilization_sample(self, msprof):
        sink = DiagnosticSink()
        rank = load_run(msprof / "ut__advisor__advisor_backend__compute_advice", sink=sink).rank(0)
        _no_errors(sink)
        df = rank.table(
            "kernels", ["name", "accelerator_core", "start_ns", "duration_us", "task_id", "stream_id", "mix_block_num", "input_shapes", "op_state"]
        )
        assert len(df) == 591
        assert df["accelerator_core"].value_counts().to_dict() == {
            "AI_VECTOR_CORE": 520,
            "MIX_AIV": 25,
            "HCCL": 19,
            "AI_CORE": 13,
            "AI_CPU": 7,
            "DSA_SQE": 7,
        }
        assert math.isclose(df["duration_us"].sum(), 396807.04, rel_tol=1e-12)
        z = df.iloc[0]
        assert (z["name"], z["start_ns"], z["input_shapes"]) == ("ZerosLike46", 1699529622790614800, "544404480")
        hccl = df[df["accelerator_core"] == "HCCL"].iloc[0]
        assert hccl["name"] == "hcom_broadcast__445_0"
        assert hccl["duration_us"] == 308926.68
        # N/A task/stream ids and shapes of HCCL rows are missing values, not strings.
        assert pd.isna(hccl["task_id"]) and pd.isna(hccl["stream_id"]) and pd.isna(hccl["input_shapes"])
        # The file has no OP State column: asked for, it comes back empty and is reported missing.
        assert df["op_state"].isna().all()
        aicpu = df[df["accelerator_core"] == "AI_CPU"]
        assert aicpu["name"].tolist()[:3] == ["trans_Cast_5", "trans_Cast_18", "trans_Cast_5"]
        assert aicpu["duration_us"].tolist()[:3] == [197.54, 112.88, 101.04]

    def test_only_requested_columns_are_read(self, msprof, monkeypatch):
        import pyarrow.csv as pacsv

        seen = {}
        real = pacsv.read_csv

        def spy(path, **kw):
            seen["include"] = list(kw["convert_options"].include_columns)
            return real(path, **kw)

        monkeypatch.setattr(pacsv, "read_csv", spy)
        rank = load_run(msprof / "ut__advisor__compute_advice__data").rank(0)
        rank.table("kernels", ["name", "duration_us"])
        assert seen["include"] == ["Name", "Duration(us)"]


class TestTraceView:
    def test_torch_npu_trace(self, msprof):
        sink = DiagnosticSink()
        rank = load_run(msprof / "ut__advisor__advisor_backend__timeline_advice", sink=sink).rank(1 - 1)
        _no_errors(sink)
        ev = rank.table("trace_events")
        assert len(ev) == 2212
        assert ev["process_name"].value_counts().to_dict() == {
            "Python": 1007,
            "Overlap Analysis": 547,
            "CANN": 382,
            "Ascend Hardware": 276,
        }
        first = ev.iloc[0]
        assert first["name"] == "aten::empty"
        assert first["ts_ns"] == 1704161511420306491  # ts is a string with 3 decimals
        assert first["dur_us"] == 13.08
        bd = step_breakdown(rank)
        assert bd["step"].tolist() == [1]
        assert bd.loc[0, "computing_us"] == pytest.approx(1788.2505)
        assert bd.loc[0, "free_us"] == pytest.approx(9481.667)
        assert bd.loc[0, "communication_not_overlapped_us"] == 0.0
        assert bd.loc[0, "source"] == "trace_view.json ProfilerStep + Overlap Analysis"

    def test_mindspore_cpu_trace_with_string_dur(self, ms_cpu):
        sink = DiagnosticSink()
        run = load_run(ms_cpu / "profiler", sink=sink)
        _no_errors(sink)
        rank = run.rank(0)
        assert rank.identity.layout == "ascend_ms"
        assert (rank.identity.host, rank.identity.pid, rank.identity.collected_at) == ("vm", 13044, "20261121074847270")
        assert rank.identity.framework == "MindSpore"
        # The CPU profiler writes no profiler_info: the rank is assumed, with a warning that says so.
        assert rank.identity.rank_source == "assumed"
        assert any(d.code == "rank-assumed" for d in sink)
        ev = rank.table("trace_events")
        assert len(ev) == 230
        assert set(ev["process_name"].unique()) == {"CPU OP", "Scope Layer"}
        a = ev.iloc[0]
        assert a["name"] == "Default/optimizer-SGD/AssignAdd-op0"
        assert a["ts_ns"] == 1795247327647708519
        assert a["dur_us"] == 1.912  # "dur": "1.912"
        host = rank.table("host_ops")
        assert len(host) == 14
        mm = host[host["full_op_name"] == "Default/network-WithLossCell/_backbone-Dense/MatMul-op0"].iloc[0]
        assert (mm["occurrences"], mm["total_time_ms"], mm["total_proportion"]) == (8, 0.333824, 0.228819)


class TestMindData:
    @pytest.fixture
    def rank(self, ms_cpu):
        sink = DiagnosticSink()
        run = load_run(ms_cpu / "minddata_profiler", sink=sink)
        _no_errors(sink)
        return run.rank(0)

    def test_pipeline_raw(self, rank):
        p = rank.table("minddata_pipeline")
        assert p["op_type"].tolist() == ["EpochCtrlOp", "BatchOp", "MapOp", "GeneratorOp"]
        assert p["num_workers"].tolist() == [1, 2, 2, 1]
        gen = p.iloc[3]
        assert gen["queue_usage_rate"] == 0.9526515151515151
        assert gen["queue_length"] == 16
        assert len(gen["queue_sizes"]) == 33 and gen["queue_sizes"][-2:] == [11, 0]
        assert p.iloc[1]["queue_empty_freq"] == pytest.approx(30 / 33)
        assert p.iloc[2]["queue_usage_rate"] == 0.0
        assert pd.isna(p.iloc[0]["queue_usage_rate"]) and pd.isna(p.iloc[0]["parent_id"])
        assert p["children_ids"].tolist() == [[1], [2], [3], []]

    def test_summary_json_and_its_record(self, rank):
        s = rank.table("minddata_summary")
        assert s["pipeline_op"].tolist() == ["EpochCtrl(id=0)", "Batch(id=1)", "Map(id=2)", "Generator(id=3)"]
        assert s["queue_utilization_pct"].tolist()[1:] == [0.75, 0.0, 95.25]
        assert pd.isna(s.loc[0, "queue_utilization_pct"])  # -1 in the file
        assert s["queue_empty_freq_pct"].tolist()[1:] == [90.91, 100.0, 3.03]
        assert s["avg_cpu_pct_per_worker"].tolist() == [0.0, 0.0, 1.03, 1.15]
        rec = rank.record("minddata_summary")
        assert rec.per_batch_time_ms == 41.689
        assert rec.bottleneck_warning == ["Batch(id=1)"]
        assert rec.queue_analysis_details[0].startswith("Map(id=2)'s input queue usage=95.25%")

    def test_summary_csv_matches_json(self, ms_cpu):
        from advisor_core.loaders.minddata import read_summary_csv, read_summary_json

        out = ms_cpu / "minddata_profiler/md_prof_out/ASCEND_PROFILER_OUTPUT"
        sink = DiagnosticSink()
        fj, rj = read_summary_json(out / "minddata_pipeline_summary_0.json", sink)
        fc, rc = read_summary_csv(out / "minddata_pipeline_summary_0.csv", sink)
        _no_errors(sink)
        pd.testing.assert_frame_equal(fj, fc)
        assert rj == rc

    def test_raw_json_fallback_matches_csv(self, ms_cpu):
        from advisor_core.loaders.minddata import read_pipeline_profiling, read_pipeline_raw

        base = ms_cpu / "minddata_profiler/md_prof_out"
        sink = DiagnosticSink()
        a = read_pipeline_raw(base / "ASCEND_PROFILER_OUTPUT/minddata_pipeline_raw_0.csv", sink)
        b = read_pipeline_profiling(base / "raw/pipeline_profiling_0.json", sink)
        _no_errors(sink)
        for col in ("op_id", "op_type", "num_workers", "queue_length", "parent_id"):
            assert a[col].tolist() == b[col].tolist()
        assert a["queue_sizes"].tolist() == b["queue_sizes"].tolist()
        assert a["queue_usage_rate"].fillna(-1).tolist() == pytest.approx(b["queue_usage_rate"].fillna(-1).tolist())

    def test_cpu_and_host_queue(self, rank):
        cpu = rank.table("minddata_cpu")
        assert cpu["avg_cpu_pct"].round(2).tolist() == [0.0, 0.0, 2.06, 1.15]
        assert rank.record("minddata_cpu").cpu_processor_num == 2
        hq = rank.table("host_queue")
        assert len(hq) == 96
        assert hq.iloc[0][["step", "queue_size", "queue_capacity", "get_ms", "total_ms"]].tolist() == [1, 0.0, 16, 40.0, 40.0]
        assert (hq["queue_size"] == 0).sum() == 91  # awk: 91 of 96 connector samples are 0


class TestCluster:
    def test_cluster_step_trace(self, msprof):
        run = load_run(msprof / "resource__advisor__cluster_analysis_output")
        assert run.rank_ids == []
        cst = run.cluster_step_trace()
        assert len(cst) == 9
        ranks = cst[cst["type"] == "rank"]
        stage = cst[cst["type"] == "stage"].iloc[0]
        assert ranks["index"].tolist() == [str(i) for i in range(8)]
        assert stage["index"] == "(0, 1, 2, 3, 4, 5, 6, 7)"
        # Stage rows are the maximum over the group (spec: Computing = rank 4, Free = rank 1).
        assert stage["computing_us"] == ranks["computing_us"].max() == 81662.19999999994
        assert stage["free_us"] == ranks["free_us"].max() == 1488610.0587500026
        assert cst["step"].isna().all()

    def test_cluster_communication(self, msprof):
        run = load_run(msprof / "resource__advisor__cluster_analysis_output")
        cc = run.cluster_communication()
        assert len(cc) == 4
        r0 = cc[(cc["op_name"] == "hcom_broadcast__501_0") & (cc["rank"] == 0)].iloc[0]
        assert r0["elapse_us"] == pytest.approx(121736.94384375)
        assert r0["group"] == "6297232067196334501"
        assert r0["start_ns"] == 1695054582608213000
        assert r0["op_type"] == "broadcast"


def test_whole_real_data_tree_loads(real_data):
    """Pointing at the whole tree finds every profile and nothing is an error."""
    sink = DiagnosticSink()
    run = load_run(real_data, sink=sink)
    _no_errors(sink)
    dirs = sorted(r.path.name for r in run)
    assert dirs == sorted(
        [
            "ut__advisor__advisor_backend__compute_advice",
            "ut__advisor__advisor_backend__timeline_advice",
            "ut__advisor__compute_advice__data",
            "md_prof_out",
            "vm_13044_20261121074847270_ascend_ms",
        ]
    )
    assert "cluster_step_trace_time" in run.profiles.cluster_files
