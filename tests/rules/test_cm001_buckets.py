"""CM001's gradient buckets: the profile decides, whatever the model's names; helpers held to exact values."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.engine.session import Session, SessionOptions
from advisor_core.engine.settings import Settings
from advisor_core.simulate import simulate_scenario
from advisor_rules._common import trainable_parameters
from advisor_rules.cm001_comm.buckets import current_points
from advisor_rules.cm001_comm.readiness import cell_path, model_root


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cm") / "clean"
    simulate_scenario("clean", out, layers=2, steps=2, ground_truth=False)
    return out


def _cm001(*paths: Path, config: Path | None = None):
    s = Session(list(paths), SessionOptions(config=config, autoload_plugins=False, settings=Settings()))
    res = s.analyze(select=["CM001"])
    return res.findings, {x.code: x.reason for x in res.skipped}.get("CM001")


def test_split_buckets_without_their_config_are_read_from_the_profile(clean):
    (cfg,) = (clean / "config").glob("*.yaml")
    findings, reason = _cm001(clean / "profile", clean / "graphs", config=cfg)
    assert findings == [] and ("the profile shows 4 gradient buckets per step, 3 of them starting while the backward still "
                               "runs (all_reduce_fusion_config [1, 9, 18])") in reason
    # the same run without its config: before issue 11, "not set, so every gradient is reduced in one bucket"
    findings, reason = _cm001(clean / "profile", clean / "graphs")
    assert findings == []
    assert reason.startswith("gradient AllReduce exposed ")
    assert ("the profile shows 4 gradient buckets per step, 3 of them starting while the backward still runs; no config "
            "names the split points, the buckets' sizes put the split points near [2, 9, 17]") in reason
    assert reason.endswith("([1, 6, 12, 19]: 314 µs, 0.18% < 0.25% of the step)")


def test_trained_parameters_are_the_ones_with_optimizer_state():
    p = [("conv1.weight", (8, 3), None), ("bn1.gamma", (8,), None), ("bn1.moving_mean", (8,), None),
         ("layer1.0.conv1.weight", (8, 8), None), ("moments.conv1.weight", (8, 3), None), ("moments.bn1.gamma", (8,), None),
         ("moments.layer1.0.conv1.weight", (8, 8), None), ("global_step", (1,), None)]
    assert [n for n, _, _ in trainable_parameters(p)] == ["conv1.weight", "bn1.gamma", "layer1.0.conv1.weight"]
    # no optimizer in the graph: names decide, BatchNorm's running statistics left out
    assert [n for n, _, _ in trainable_parameters(p[:4])] == ["conv1.weight", "bn1.gamma", "layer1.0.conv1.weight"]


def test_cell_paths_and_the_model_root_for_any_backbone():
    bwd = ("Gradients/Default/network-WithLossCell/_backbone-ResNet/layer1-SequentialCell/0-ResidualBlock/conv1-Conv2d/"
           "Grad_Conv2D/Conv2DBackpropFilter-op0")
    assert cell_path(bwd) == ("network", "_backbone", "layer1", "0", "conv1")
    assert cell_path("recompute_Default/network-X/model-LlamaModel/layers-CellList/3-LLamaDecodeLayer/attention-A/"
                     "wq-Linear/MatMul-op0/aclnnMatmul") == ("network", "model", "layers", "3", "attention", "wq")
    paths = [("network", "_backbone", "conv1"), ("network", "_backbone", "layer1", "0", "conv1")]
    # the stem's conv1 and layer1.0.conv1 both end in "conv1": the wrappers most parameters sit behind decide
    assert model_root([("conv1.weight", 1.0), ("layer1.0.conv1.weight", 1.0)], paths) == ("network", "_backbone")


def test_split_points_are_inferred_from_the_buckets_sizes():
    params = [(f"p{i}", e) for i, e in enumerate([10.0, 10.0, 40.0, 20.0, 20.0])]
    # time order: the first bucket holds the last parameters (40 of 100 elements), then 60
    assert current_points(params, [400.0, 600.0]) == [3]
    assert current_points(params, [200.0, 400.0, 400.0]) == [2, 4]
    assert current_points(params, [1000.0]) == []
