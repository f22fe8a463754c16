"""MD001, CT001, CT002 on simulated runs: the numbers the findings give, recomputed from the run's own files.

Expected values come from ``kernel_details.csv`` / ``step_trace_time.csv`` / the trace of the run
(never from ``expected.json``): the finding must equal what the evidence says, by the rule's physics.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from advisor_core.api import open_session
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.engine.settings import Settings
from advisor_core.model.run import load_run
from advisor_core.simulate import simulate_scenario
from advisor_rules._common import one_f_one_b_step_saving


def findings(run: Path, code: str):
    res = open_session(run, plugins=False).analyze(select=[code])
    return [f for f in res.findings if f.code == code], res


def kernels(run: Path, rank: int) -> pd.DataFrame:
    return load_run(run / "profile").rank(rank).table("kernels", ["name", "type", "duration_us", "step_id"])


def per_step(k: pd.DataFrame, pattern: str) -> float:
    return float(k.loc[k["name"].str.contains(pattern, regex=True), "duration_us"].sum()) / k["step_id"].nunique()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sims")
    out = {}
    for name in ("minddata-bottleneck", "cast-excess", "transdata-excess", "kitchen-sink"):
        out[name] = base / name
        simulate_scenario(name, out[name], ground_truth=False)
    return out


# -- MD001 ----------------------------------------------------------------------------------------------


def _whole_run_free_per_step(run: Path) -> tuple[float, float, int]:
    (st,) = (run / "profile").glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
    row = pd.read_csv(st).iloc[0]
    steps = kernels(run, 0)["step_id"].nunique()
    return float(row["Free"]) / steps, float(row["Computing"]) / steps, steps


def test_md001_wait_is_free_per_step_not_free_plus_preparing(runs):
    run = runs["minddata-bottleneck"]
    free, compute, steps = _whole_run_free_per_step(run)
    (f,), _ = findings(run, "MD001")
    ev = {e.name: e.value for e in f.evidence}
    assert steps == 5
    assert ev["data_wait_per_step"] == pytest.approx(free, abs=0.01)  # 69.11 ms, not 138 ms (Free + Preparing)
    assert f.title == f"data pipeline bottleneck at Map(id=3): {free / 1000:.2f} ms per step waiting for data"
    # The node's 192 cores serve 8 NPUs (Ascend910B server): 24 per device bound the workers.
    assert ev["cpu_cores_per_device"] == 24 and "192 host cores / 8 NPUs per Ascend910B server" in f.message
    step = ev["step_time"]
    want = math.ceil(1 * step / ((step - free) * 0.8))  # 1 worker now, 20 % headroom
    (p,) = f.patches
    assert [o.value for o in p.ops if o.op == "replace"] == [want] == [6]
    assert f.saving_us == pytest.approx(free, rel=1e-3)  # the step drops to the compute time


@pytest.mark.parametrize("remove", [["trace_view.json"], ["trace_view.json", "kernel_details.csv"]])
def test_md001_whole_run_row_is_divided_by_the_steps_it_covers(runs, tmp_path, remove):
    """Without the trace the Step=0 row is averaged over the kernels' Step IDs; without those either,
    over the host queue's one record per batch."""
    run = tmp_path / "run"
    shutil.copytree(runs["minddata-bottleneck"], run)
    free, _, _ = _whole_run_free_per_step(runs["minddata-bottleneck"])
    for name in remove:
        for p in (run / "profile").glob(f"*/ASCEND_PROFILER_OUTPUT/{name}"):
            p.unlink()
    (f,), _ = findings(run, "MD001")
    ev = {e.name: e.value for e in f.evidence}
    assert ev["data_wait_per_step"] == pytest.approx(free, abs=0.01)


def test_md001_config_only_flags_a_one_worker_decode_map(runs):
    cfg = next((runs["minddata-bottleneck"] / "config").glob("*.yaml"))
    s = Session([], SessionOptions(config=cfg, autoload_plugins=False, settings=Settings()))
    (f,) = [x for x in s.analyze(select=["MD001"]).findings if x.code == "MD001"]
    assert f.severity.value == "medium" and f.confidence == 0.4
    assert "RandomCropDecodeResize" in f.title and "num_parallel_workers 1" in f.title
    (p,) = f.patches
    assert p.safety.value == "safe"
    assert [o.model_dump() for o in p.ops][0] == {"op": "test", "path": "/train_dataset/num_parallel_workers", "value": 1}
    assert 1 < [o.value for o in p.ops if o.op == "replace"][0] <= 24
    assert f.primary_config_location().key_path == "/train_dataset/num_parallel_workers"


def test_md001_config_only_quiet_on_text_pipelines(real_data):
    cfg = real_data / "mindformers-configs" / "pretrain_llama2_7b.yaml"
    s = Session([], SessionOptions(config=cfg, autoload_plugins=False, settings=Settings()))
    res = s.analyze(select=["MD001"])
    assert [f for f in res.findings if f.code == "MD001"] == []
    (skip,) = [x for x in res.skipped if x.code == "MD001"]
    assert "no map transforms" in skip.reason


# -- CT001 ----------------------------------------------------------------------------------------------

ROTARY = "apply_rotary_emb-LlamaRotaryEmbedding/"


def _rotary_saving(k: pd.DataFrame) -> float:
    """Rotary Casts + half of the fp32 RotaryMul/RotaryMulGrad time beyond the shortest kernel."""
    casts = per_step(k, ROTARY + r"(?:Grad_Cast/)?Cast-op")
    fixed = float(k["duration_us"][k["duration_us"] > 0].min())
    rot = k[k["name"].str.contains(ROTARY) & k["type"].isin(["RotaryMul", "RotaryMulGrad"])]
    inner = float((rot["duration_us"] - fixed).sum()) / 2 / k["step_id"].nunique()
    return casts + inner


def test_ct001_rotary_counts_the_fp32_ops_between_the_casts(runs):
    run = runs["cast-excess"]
    fs, _ = findings(run, "CT001")
    (rot,) = [f for f in fs if "rotary_dtype" in f.title]
    (rt,) = [f for f in fs if "lossy" in f.title]
    k = kernels(run, 0)
    assert rot.saving_us == pytest.approx(_rotary_saving(k), rel=1e-6)
    assert "RotaryMul, RotaryMulGrad" in rot.message
    # the round trip's two forward Casts and their two backward Casts
    assert rt.saving_us == pytest.approx(per_step(k, r"ffn_norm-LlamaRMSNorm/(?:Grad_Cast/)?Cast-op[12]/"), rel=1e-6)
    assert "llama_layer.py:231" in rt.message


def test_ct001_pipeline_stages_combine_as_1f1b(runs):
    run = runs["kitchen-sink"]
    fs, _ = findings(run, "CT001")
    (rot,) = [f for f in fs if "rotary_dtype" in f.title]
    # One rank per stage (0 and 4), each with its own stage's layers; 4 micro batches.
    d = {0: _rotary_saving(kernels(run, 0)), 4: _rotary_saving(kernels(run, 4))}
    assert "stage 0:" in rot.message and "stage 1:" in rot.message and "4 micro batches" in rot.message
    assert rot.saving_us == pytest.approx(sum(d.values()) / 2 * (4 + 2 - 1) / 4, rel=0.02)


def test_one_f_one_b_step_saving():
    # equal stages: per-rank saving × (m + pp − 1)/m
    assert one_f_one_b_step_saving({0: 400.0, 1: 400.0}, {0: 1e4, 1: 1e4}, 4) == pytest.approx(500.0)
    # the slow stage carries every micro batch, the fast one a single micro batch
    assert one_f_one_b_step_saving({0: 400.0, 1: 0.0}, {0: 1e4, 1: 2e4}, 4) == pytest.approx(100.0)
    assert one_f_one_b_step_saving({0: 0.0, 1: 400.0}, {0: 1e4, 1: 2e4}, 4) == pytest.approx(400.0)
    assert one_f_one_b_step_saving({0: 123.0}, {}, 8) == 123.0


# -- CT002 ----------------------------------------------------------------------------------------------

PARAM_TD = r"/(?:wq|wk|wv|wo|w1|w2|w3)-Linear/TransData-op[01]/"
ND_TD = r"feed_forward-LlamaFeedForward/(?:Grad_Mul/)?TransData-op\d/"


def test_ct002_weights_converted_every_step(runs):
    run = runs["transdata-excess"]
    fs, _ = findings(run, "CT002")
    (param,) = [f for f in fs if "weight(s)" in f.title]
    (nd,) = [f for f in fs if "forces TransData pairs" in f.title]
    k = kernels(run, 0)
    assert param.title.startswith("28 weight(s) converted ND→FRACTAL_NZ by TransData on every step in 4 layer(s)")
    assert param.saving_us == pytest.approx(per_step(k, PARAM_TD), rel=1e-6)  # forward and backward use, 4 micro batches
    assert "layers.py:531: `x = self.matmul(x, weight)`" in param.message and "transpose_b" in param.message
    assert param.patches == []
    # the Mul sandwich: two NZ→ND in, one ND→NZ out, and the NZ→ND feeding its backward (each counted once)
    assert nd.saving_us == pytest.approx(per_step(k, ND_TD), rel=1e-6)
    assert "llama_layer.py:318" in nd.message


def test_ct002_found_on_every_pipeline_stage_despite_unaligned_dims(runs):
    """kitchen-sink: hidden 4100 makes every tensor unaligned; only TransData next to an unaligned MatMul are AL001's."""
    run = runs["kitchen-sink"]
    fs, _ = findings(run, "CT002")
    (param,) = [f for f in fs if "weight(s)" in f.title]
    (nd,) = [f for f in fs if "forces TransData pairs" in f.title]
    prof = load_run(run / "profile")

    def weight_td(rank: int) -> float:
        # a Linear cell's TransData whose input is weight-shaped (activations here are 4096 tokens × dim)
        k = prof.rank(rank).table("kernels", ["name", "type", "duration_us", "step_id", "input_shapes"])
        hit = k["name"].str.contains(r"-Linear/TransData-op") & ~k["input_shapes"].astype(str).str.strip('"').str.startswith("4096,")
        return float(k.loc[hit, "duration_us"].sum()) / k["step_id"].nunique()

    for f, d in ((param, [weight_td(r) for r in (0, 4)]), (nd, [per_step(kernels(run, r), ND_TD) for r in (0, 4)])):
        assert f.saving_us == pytest.approx(sum(d) / 2 * (4 + 2 - 1) / 4, rel=0.02)
    assert param.title.startswith("28 weight(s)")  # 14 per stage


def test_ct002_profile_alone_gives_the_same_groups(runs, tmp_path):
    """Without IR: weights from the Linear's MatMul operand shapes/formats, the sandwich from kernel order
    plus its backward (``Grad_Mul``) conversions."""
    run = tmp_path / "run"
    shutil.copytree(runs["transdata-excess"], run)
    shutil.rmtree(run / "graphs")
    fs, _ = findings(run, "CT002")
    (param,) = [f for f in fs if "weight(s)" in f.title]
    (nd,) = [f for f in fs if "forces TransData pairs" in f.title]
    k = kernels(run, 0)
    assert param.title.startswith("28 weight(s) converted ND→FRACTAL_NZ")
    assert param.saving_us == pytest.approx(per_step(k, PARAM_TD), rel=1e-6)
    assert nd.saving_us == pytest.approx(per_step(k, ND_TD), rel=1e-6)


@pytest.mark.parametrize("with_ir", [True, False])
def test_ct002_leaves_unaligned_matmul_conversions_to_al001(tmp_path, with_ir):
    run = tmp_path / "run"
    simulate_scenario("unaligned", run, ground_truth=False)
    if not with_ir:
        shutil.rmtree(run / "graphs")
    fs, res = findings(run, "CT002")
    assert fs == [] and [s.code for s in res.skipped] == ["CT002"]
