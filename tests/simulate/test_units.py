"""Unit tests: cost formulas, MindSpore's MindData analyser reproduced on real data, config checks, patches."""

from __future__ import annotations

import json

import pytest

from advisor_core.config.model_structure import llama_layer
from advisor_core.simulate import SimulationInputError, simulate
from advisor_core.simulate.costs import collective_ns, matmul_cost, nz_shape, pad16, vector_ns
from advisor_core.simulate.groundtruth import apply_patch, fix_select_recompute, fusion_split_points
from advisor_core.simulate.hardware import HardwareProfile, apply_hardware_overrides, load_hardware
from advisor_core.simulate.nodes import TType
from advisor_core.simulate.scenarios import base_config, get_scenario
from advisor_core.simulate.writers.minddata_files import _csv_text, _raw_csv_rows, summarize

HW = HardwareProfile()


def test_matmul_cost_pads_to_16_and_penalises_unaligned_k_or_n():
    assert pad16(4100) == 4112 and pad16(4096) == 4096
    a = matmul_cost(4096, 4096, 4096, "float16", 2, HW)
    u = matmul_cost(4096, 4100, 4096, "float16", 2, HW)
    assert not a.unaligned and u.unaligned
    expected = 2 * 4096 * 4112 * 4096 / (313e12 * 0.78) * 1e9 * 1.25
    assert u.compute_ns == pytest.approx(expected)
    # M off 16 pads but is not penalised (the batch x sequence axis is rarely controllable)
    m = matmul_cost(4100, 4096, 4096, "float16", 2, HW)
    assert not m.unaligned and m.compute_ns == pytest.approx(a.compute_ns * 4112 / 4096)
    assert matmul_cost(4096, 4096, 4096, "float32", 4, HW).ns > a.ns


def test_vector_and_collective_alpha_beta():
    assert vector_ns(1.36e9, HW) == pytest.approx(1e6 + 2000)  # 1.36 GB at 1.6 TB/s x 0.85, + launch
    n, size = 8, 1e9
    ar = collective_ns("allReduce", size, n, "HCCS", HW)
    assert ar == pytest.approx(8000 + 2 * 7 / 8 * size / 196e9 * 1e9 + 2 * 7 * 5000)
    ag = collective_ns("allGather", size, n, "RDMA", HW)
    assert ag == pytest.approx(8000 + 7 / 8 * size / 25e9 * 1e9 + 7 * 20000)
    assert collective_ns("send", size, 2, "RDMA", HW) == pytest.approx(8000 + size / 25e9 * 1e9 + 20000)


def test_nz_shape_and_padded_bytes():
    assert nz_shape((4096, 4100)) == (257, 256, 16, 16)
    t = TType((4096, 4100), "float16", "FRACTAL_NZ")
    assert t.nbytes == 257 * 256 * 256 * 2
    assert t.device() == "<Float16xFRACTAL_NZ[const vector]{257, 256, 16, 16}>"


def test_minddata_summary_reproduces_mindspore_on_real_data(ms_cpu):
    d = ms_cpu / "minddata_profiler" / "md_prof_out"
    raw = json.loads((d / "raw" / "pipeline_profiling_0.json").read_text())
    cpu = json.loads((d / "raw" / "minddata_cpu_utilization_0.json").read_text())
    lines = (d / "raw" / "dataset_iterator_profiling_0.txt").read_text().splitlines()
    summary = summarize(raw, cpu, lines, device_queue_file_found=False)
    real = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "minddata_pipeline_summary_0.json").read_text())
    assert summary == real and list(summary) == list(real)
    assert summary["bottleneck_warning"] == ["Batch(id=1)"]  # MindSpore names a neighbour of the slow Map
    real_csv = (d / "ASCEND_PROFILER_OUTPUT" / "minddata_pipeline_summary_0.csv").read_text()
    assert _csv_text([[k] + list(v) for k, v in summary.items()]) == real_csv
    header = ["op_id", "op_type", "num_workers", "output_queue_size", "output_queue_average_size", "output_queue_length",
              "output_queue_usage_rate", "sample_interval", "parent_id", "children_id"]
    real_raw = (d / "ASCEND_PROFILER_OUTPUT" / "minddata_pipeline_raw_0.csv").read_text()
    assert _csv_text(_raw_csv_rows(raw), header) == real_raw


def test_minddata_bottleneck_warning_names_a_neighbour_in_the_simulation(scenario_runs):
    _, out = scenario_runs["minddata-bottleneck"]
    (summary_file,) = (out / "profile").rglob("minddata_pipeline_summary_0.json")
    s = json.loads(summary_file.read_text())
    assert "Map(id=3) is using" in s["cpu_analysis_details"][0]
    assert "Map(id=3)'s input queue usage" in s["queue_analysis_details"][0]
    assert s["bottleneck_warning"] != ["Map(id=3)"]  # the heuristic's known habit, kept


def test_fix_select_recompute_reproduces_the_seed_fix():
    st = llama_layer()
    fixed = fix_select_recompute(["feed_forward\\.mul", "feed_forward\\.w1\\.activation"], st)
    assert set(fixed) == {"feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu", "feed_forward\\.w1\\.reshape",
                          "feed_forward\\.w2\\.reshape"}


def test_fusion_split_points_balance_bytes():
    params = [("a", TType((100,), "float16")), ("b", TType((100,), "float16")), ("c", TType((100,), "float16")),
              ("d", TType((100,), "float16"))]
    assert fusion_split_points(params, buckets=4) == [1, 2, 3]
    assert fusion_split_points(params[:1]) == []


def test_apply_patch_tests_then_replaces_and_keeps_comments():
    doc = base_config()
    new = apply_patch(doc, [{"op": "test", "path": "/train_dataset/num_parallel_workers", "value": 8},
                            {"op": "replace", "path": "/train_dataset/num_parallel_workers", "value": 12},
                            {"op": "add", "path": "/parallel/all_reduce_fusion_config", "value": [85, 160]}])
    assert new["train_dataset"]["num_parallel_workers"] == 12 and doc["train_dataset"]["num_parallel_workers"] == 8
    assert list(new["parallel"]["all_reduce_fusion_config"]) == [85, 160]
    with pytest.raises(ValueError):
        apply_patch(doc, [{"op": "test", "path": "/train_dataset/num_parallel_workers", "value": 1}])


@pytest.mark.parametrize("sets, message", [
    (["parallel_config.model_parallel=3"], "parallel_config.model_parallel: 3 does not divide num_heads 32"),
    (["model.model_config.hidden_size=0"], "model.model_config.hidden_size: 0 is not a positive integer"),
    (["parallel_config.pipeline_stage=2", "parallel_config.micro_batch_num=1"], "micro_batch_num: 1 is smaller than pipeline_stage 2"),
    (["model.model_config.vocab_size=32001"], "vocab_size: 32001 is not divisible by parallel_config.model_parallel 2"),
    (["model.model_config.compute_dtype=int4"], "model.model_config.compute_dtype: 'int4'"),
    (["parallel.all_reduce_fusion_config=[160, 85]"], "parallel.all_reduce_fusion_config"),
    (["train_dataset.num_parallel_workers=0"], "train_dataset.num_parallel_workers: 0"),
    (["hardware.hbm_bandwidth_gbps=-1"], "hardware.hbm_bandwidth_gbps"),
    (["hardware.warp_drive=1"], "hardware.warp_drive"),
    (["no_equals_sign"], "expected key=value"),
])
def test_bad_config_names_the_key(sets, message):
    with pytest.raises(SimulationInputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        simulate(get_scenario("clean").config(2), steps=1, sets=sets)


def test_ranks_sets_data_parallel_and_must_divide():
    r = simulate(get_scenario("clean").config(2), steps=1, ranks=8)
    assert (r.workload.dp, r.workload.mp, r.workload.world) == (4, 2, 8)
    with pytest.raises(SimulationInputError, match="--ranks: 5 is not a multiple"):
        simulate(get_scenario("clean").config(2), steps=1, ranks=5)


def test_hardware_file_and_set_override(tmp_path):
    f = tmp_path / "hw.yaml"
    f.write_text("hardware:\n  hbm_bandwidth_gbps: 800\n  devices_per_node: 4\n")
    hw = load_hardware(f)
    assert hw.hbm_bandwidth_gbps == 800 and hw.devices_per_node == 4 and hw.host_cores_per_device == 48
    assert apply_hardware_overrides(hw, {"cube_tflops_fp16": 100}).cube_tflops_fp16 == 100
    slow = simulate(get_scenario("clean").config(2), hardware=f, steps=1)
    fast = simulate(get_scenario("clean").config(2), steps=1)
    assert slow.mean_step_time_us > fast.mean_step_time_us


def test_every_real_mindformers_config_simulates(real_data):
    """The 13 public MindFormers configs (Llama2/3, Qwen, GLM4, Mixtral, Telechat) run as they are."""
    from advisor_core.config.training import TrainingConfig
    from advisor_core.simulate.configio import load_config_file

    files = sorted((real_data / "mindformers-configs").glob("*.yaml"))
    assert len(files) >= 13
    for f in files:
        pp = TrainingConfig(load_config_file(f)).pipeline_stages
        r = simulate(f, steps=1, layers=2 * pp)
        assert r.mean_step_time_us > 0 and min(r.peak_memory_bytes.values()) > 0, f.name
