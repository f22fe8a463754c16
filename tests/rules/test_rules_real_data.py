"""The mission rules on the real MindSpore 2.10 data and MindFormers configs: expert findings, no false alarms."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.engine.session import Session, SessionOptions
from advisor_core.engine.settings import Settings

MISSION = ["MD001", "CT001", "CT002", "AL001", "CM001", "RC001"]


def analyze(*paths: Path, config: Path | None = None, select=None):
    s = Session(list(paths), SessionOptions(config=config, autoload_plugins=False, settings=Settings()))
    codes = [c for c in (select or MISSION) if c in s.host.rules()]
    return s.analyze(select=codes)


def by_code(result, code):
    return [f for f in result.findings if f.code == code]


def test_md001_names_the_map_op_not_mindsporess_batch_guess(ms_cpu):
    result = analyze(ms_cpu / "minddata_profiler")
    (f,) = by_code(result, "MD001")
    assert f.title == "data pipeline bottleneck at Map(id=2): 39.79 ms per step waiting for data"
    assert "Bottleneck: Map(id=2), because its input queue (from Generator(id=3)) is 95.3% full while its own output queue is 0.0% full" in f.message
    assert "MindSpore's summary names Batch(id=1)" in f.message
    ev = {e.name: e.value for e in f.evidence}
    # The iterator's batch timestamps give steps 2..96; step 2 (324 ms: compilation) is warm-up. awk: the get-next
    # waits of steps 3..96 sum to 3740 ms over those 94 steady steps; 90 of the 95 host-queue samples after step 1 are 0.
    assert ev["data_wait_per_step"] == pytest.approx(3740 / 94 * 1000, abs=0.01)
    assert ev["feeding_queue_empty_share"] == pytest.approx(90 / 95, abs=1e-4)
    assert ev["cpu_cores_per_device"] == 2 and ev["workers"] == 2
    # The host has 2 cores and the map op already has 2 workers: no worker patch, the op itself must get cheaper.
    assert f.patches == [] and "already at the host's 2 core(s)" in f.message
    assert f.severity.value == "high" and f.confidence == 0.9


def test_md001_quiet_without_pipeline_evidence(ms_cpu):
    result = analyze(ms_cpu / "profiler")
    assert by_code(result, "MD001") == []
    (skip,) = [s for s in result.skipped if s.code == "MD001"]
    assert "no step-level evidence of waiting for data" in skip.reason


def test_ct001_finds_the_lossy_round_trip_only(ms_cpu):
    result = analyze(ms_cpu / "cast_roundtrip/ir_level2_full")
    (f,) = by_code(result, "CT001")
    assert f.title == "lossy Cast round trip Float32→Float16→Float32"
    assert "case_cast.py:20: `h = self.cast(x, ms.float16)" in f.message
    assert "case_cast.py:21: `h = self.cast(h, ms.float32)" in f.message
    ir_locs = [l for l in f.locations if l.kind == "ir"]
    assert [l.node for l in ir_locs] == ["@16_1___main___CastNet_construct_67:%0", "@16_1___main___CastNet_construct_67:%1"]
    assert ir_locs[0].path.endswith("21_validate_0076.ir")
    assert f.severity.value == "medium"  # an accuracy bug as well as wasted time


def test_ct001_quiet_on_the_recompute_net(ms_cpu):
    result = analyze(ms_cpu / "recompute/ir")
    assert by_code(result, "CT001") == [] and by_code(result, "CT002") == [] and by_code(result, "AL001") == []


def test_rc001_configured_but_not_recomputed(ms_cpu):
    result = analyze(ms_cpu / "recompute/ir")
    (f,) = by_code(result, "RC001")
    nodes = sorted(l.node.split(":")[-1] for l in f.locations if l.kind == "ir")
    assert nodes == ["%6", "%9"]  # dense2 MatMul and the Mul primitive; dense1 MatMul/BiasAdd/GeLU are recomputed
    assert "block0.dense2.matmul (MatMul)" in f.message and "mul (Mul)" in f.message
    assert "no backward op needs its output" in f.message
    assert f.confidence == 0.9


@pytest.mark.parametrize(
    "name",
    [
        "finetune_qwen2_5_7b_8k.yaml",  # dict form with the reshape entries: effective
        "finetune_llama3_1_70b.yaml",  # fine-grained multi-copy: mul + silu effective
        "pretrain_llama2_70b_bf16_64p.yaml",
        "finetune_telechat_115b.yaml",
        "pretrain_llama2_7b.yaml",  # no select recompute at all
    ],
)
def test_rc001_no_false_alarm_on_real_configs(real_data, name):
    result = analyze(config=real_data / "mindformers-configs" / name, select=["RC001"])
    assert by_code(result, "RC001") == []


def test_rc001_config_only_reproduces_the_seed_case(tmp_path, real_data):
    text = (real_data / "mindformers-configs/pretrain_llama2_7b.yaml").read_text()
    text = text.replace("  select_recompute: False", "  select_recompute: ['feed_forward\\.mul', 'feed_forward\\.w1\\.activation']")
    cfg = tmp_path / "llama2_7b.yaml"
    cfg.write_text(text)
    result = analyze(config=cfg, select=["RC001"])
    (f,) = by_code(result, "RC001")
    assert "feed_forward.mul (Mul)" in f.message and "feed_forward.w2.reshape (Reshape)" in f.message
    assert "the pattern names the cell feed_forward.w1.activation, whose only node (SiLU) is its output" in f.message
    (p,) = f.patches
    new = [o for o in p.ops if o.op == "replace"][0].value
    assert new == [
        "feed_forward\\.mul",
        "feed_forward\\.w1\\.activation\\.silu",
        "feed_forward\\.w1\\.reshape",
        "feed_forward\\.w2\\.reshape",
    ]
    assert p.safety.value == "unsafe"
    assert f.memory_delta_bytes is not None and f.memory_delta_bytes < 0


def test_al001_config_only_flags_unaligned_dims(tmp_path, real_data):
    text = (real_data / "mindformers-configs/pretrain_llama2_7b.yaml").read_text().replace("hidden_size: 4096", "hidden_size: 4100")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    result = analyze(config=cfg, select=["AL001"])
    (f,) = [x for x in by_code(result, "AL001") if "hidden_size" in x.title]
    (p,) = f.patches
    assert [o.model_dump() for o in p.ops] == [
        {"op": "test", "path": "/model/model_config/hidden_size", "value": 4100},
        {"op": "replace", "path": "/model/model_config/hidden_size", "value": 4096},
    ]
    cfg_loc = f.primary_config_location()
    assert cfg_loc.line == text.splitlines().index("    hidden_size: 4100") + 1


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).resolve().parents[2].parent / "shared/real-data/mindformers-configs").glob("*.yaml")))
def test_al001_real_configs_are_aligned(real_data, name):
    result = analyze(config=real_data / "mindformers-configs" / name, select=["AL001"])
    assert by_code(result, "AL001") == [], [f.title for f in result.findings]
