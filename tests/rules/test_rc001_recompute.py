"""RC001 on simulated runs: both causes of the seed's case, exact sizes and times from the evidence.

The expected numbers are recomputed here from the run's own files (IR output types, kernel_details),
never from ``expected.json``: the finding must equal what the evidence says, by the rule's physics.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from advisor_core.api import open_session
from advisor_core.model.run import load_run
from advisor_core.simulate import simulate_scenario

SEED_FIX = ["feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu", "feed_forward\\.w1\\.reshape", "feed_forward\\.w2\\.reshape"]
FP16 = 2


def rc001(run: Path):
    res = open_session(run, plugins=False).analyze(select=["RC001"])
    (f,) = [f for f in res.findings if f.code == "RC001"]
    return f


def replaced(f):
    (p,) = f.patches
    return [o.value for o in p.ops if o.op == "replace"][0]


def ffn_forward_us_per_step(run: Path, rank: int, layers: range) -> float:
    """Forward Mul + SiLU kernels of ``layers`` on ``rank`` per step: what the fixed config recomputes
    (the Reshapes it also recomputes have no kernel)."""
    k = load_run(run / "profile").rank(rank).table("kernels", ["name", "duration_us", "step_id"])
    steps = k["step_id"].nunique()
    fwd = ~k["name"].str.contains("Grad_")
    hit = k["name"].str.contains("|".join(
        f"/{lay}-LLamaDecodeLayer/feed_forward-LlamaFeedForward/(?:Mul-op0|w1-Linear/activation-LlamaSiLU/SiLU-op0)/" for lay in layers))
    return float(k.loc[fwd & hit, "duration_us"].sum()) / steps


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rc") / "run"
    simulate_scenario("recompute-ineffective", out, ground_truth=False)
    return out


def test_seed_case_reports_both_causes_and_the_seed_fix(seed_run):
    f = rc001(seed_run)
    assert f.title.startswith("2 recompute setting(s) have no effect")
    assert "feed_forward.mul (Mul) in 4 layer(s): its output reaches the backward pass only through feed_forward.w2.reshape (Reshape)" in f.message
    assert "the pattern names the cell feed_forward.w1.activation, whose only node (SiLU) is its output" in f.message
    assert "naming feed_forward.w1.activation.silu instead is not enough either" in f.message
    assert "feed_forward.w1.reshape (Reshape)" in f.message
    assert replaced(f) == SEED_FIX  # list form kept, cell pattern replaced in place
    assert f.patches[0].safety.value == "unsafe" and f.severity.value == "medium"
    # The IR locations name the configured Mul and the SiLU the cell pattern meant.
    ops = {loc.op.rsplit("/", 1)[-1] for loc in f.locations if loc.kind == "ir"}
    assert ops == {"Mul-op0", "SiLU-op0"}


def test_seed_case_estimates_from_ir_shapes_and_kernels(seed_run):
    f = rc001(seed_run)
    # Per layer the fix stops keeping w1's reshaped SiLU output (1, 4096, 11008/mp) and w2's
    # reshaped Mul output (4096, 11008/mp); 4 layers, one micro batch alive at a time (no pipeline).
    per_layer = 2 * 4096 * 5504 * FP16
    assert f.memory_delta_bytes == -4 * per_layer
    # It runs every layer's Mul and SiLU forward kernels once more per micro batch.
    assert -f.saving_us == pytest.approx(ffn_forward_us_per_step(seed_run, 0, range(4)), rel=1e-9)


def test_seed_case_without_ir_uses_config_and_kernels(seed_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(seed_run, run, ignore=shutil.ignore_patterns("graphs"))
    f = rc001(run)
    assert replaced(f) == SEED_FIX
    assert f.memory_delta_bytes == -4 * 2 * 4096 * 5504 * FP16  # symbolic sizes agree with the IR's
    assert -f.saving_us == pytest.approx(ffn_forward_us_per_step(seed_run, 0, range(4)), rel=1e-9)
    assert f.confidence == 0.6


def test_kitchen_sink_pipeline_stage0_holds_two_micro_batches(tmp_path):
    run = tmp_path / "ks"
    simulate_scenario("kitchen-sink", run, ground_truth=False)
    f = rc001(run)
    assert replaced(f) == SEED_FIX
    # pp 2 × 4 layers: stage 0 holds layers 0-1 and, under 1F1B, min(pp - 0, m=4) = 2 micro batches;
    # intermediate 11000 → 5500 per device. Stage 0 has the highest peak (memory_record).
    assert f.memory_delta_bytes == -(2 * 2) * 2 * 4096 * 5500 * FP16
    assert "stage 0: 2 layer(s) × 2 micro batch(es) in flight under 1F1B" in f.message
    # Both stages recompute the same ops (2 layers each): every one of the m + pp − 1 = 5 slots of
    # the 1F1B critical path grows by one micro batch's recompute, i.e. (m + pp − 1)/m × per step.
    per_step = ffn_forward_us_per_step(run, 0, range(2))
    assert -f.saving_us == pytest.approx(per_step * 5 / 4, rel=1e-9)


def test_per_stage_dict_form_is_kept_and_blockers_cover_every_layer(tmp_path):
    run = tmp_path / "run"
    sel = '{"feed_forward\\\\.mul": [2, 1], "feed_forward\\\\.w1\\\\.activation": [2, 2]}'
    simulate_scenario("recompute-ineffective", run, ground_truth=False, steps=2,
                      sets=[f"recompute_config.select_recompute={sel}", "parallel_config.pipeline_stage=2",
                            "parallel_config.micro_batch_num=4"])
    f = rc001(run)
    assert replaced(f) == {"feed_forward\\.mul": [2, 1], "feed_forward\\.w1\\.activation\\.silu": [2, 2],
                           "feed_forward\\.w1\\.reshape": [2, 2], "feed_forward\\.w2\\.reshape": [2, 2]}
    # Stage 0: 2 layers × 2 micro batches × (SiLU + Mul outputs).
    assert f.memory_delta_bytes == -(2 * 2) * 2 * 4096 * 5504 * FP16


def test_full_layer_recompute_does_not_hide_the_cell_pattern(tmp_path):
    """Layer 0 is fully recomputed (its SiLU has a copy); layer 1 still needs the select fix."""
    run = tmp_path / "run"
    simulate_scenario("recompute-ineffective", run, ground_truth=False, steps=2,
                      sets=["recompute_config.recompute=[1, 0]", "parallel_config.pipeline_stage=2",
                            "parallel_config.micro_batch_num=4"])
    f = rc001(run)
    assert replaced(f) == SEED_FIX
    # Stage 0 (layer 1 only, 2 micro batches) and stage 1 (layers 2-3, 1 micro batch) both free 2 layer-batches.
    assert f.memory_delta_bytes == -2 * 2 * 4096 * 5504 * FP16
