"""A data-bound step: MD001's wait decides what every device-side saving is worth.

kitchen-sink at 2 layers: the expensive Python map op (one worker, threads) makes the device
wait ~69 ms per step for data, so a shorter device time only lengthens the wait. Expected
values come from the run's own files (step trace, MindData summary), never ``expected.json``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.api import open_session
from advisor_core.model.run import load_run
from advisor_core.simulate import simulate_scenario
from advisor_rules._common import data_wait, realised_saving

DEVICE_CODES = ("AL001", "CT001", "CT002", "CM001", "RC001")


@pytest.fixture(scope="module")
def data_bound(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sims") / "kitchen-sink-2"
    simulate_scenario("kitchen-sink", out, layers=2, ground_truth=False)
    return out


@pytest.fixture(scope="module")
def result(data_bound: Path):
    return open_session(data_bound, plugins=False).analyze()


def ev(f) -> dict:
    return {e.name: e.value for e in f.evidence}


@pytest.mark.parametrize(
    "saving, headroom, realised",
    [(12_000.0, 69_000.0, 0.0), (-1_352.0, 69_000.0, 0.0), (-5_000.0, 2_000.0, -3_000.0), (3_000.0, 0.0, 0.0),
     (-500.0, 0.0, -500.0)],
)
def test_realised_saving_is_step_max_of_device_and_data(saving: float, headroom: float, realised: float) -> None:
    # step = max(D, P), H = P - D: a saving shows nothing while P bounds the step, a cost what exceeds H
    assert realised_saving(saving, headroom) == realised


def test_device_side_findings_realise_nothing_while_the_step_waits_for_data(data_bound: Path, result) -> None:
    run = load_run(data_bound / "profile")
    waits = [data_wait(None, r).wait_us for r in run]
    wait = max(waits)
    assert wait == pytest.approx(68_618.601, abs=1e-3)  # Free per step with the feeding queue empty
    device = [f for f in result.findings if f.code in DEVICE_CODES]
    assert {f.code for f in device} == set(DEVICE_CODES)
    for f in device:
        e = ev(f)
        assert f.saving_us == 0.0, f.title
        assert e["data_wait_per_step"] == pytest.approx(wait, abs=1e-3)
        assert "once the data pipeline keeps up" in f.message
        if f.code == "RC001":  # a cost: the extra forward time hides in the wait
            assert e["saving_if_data_keeps_up"] == pytest.approx(-e["recompute_cost_per_step"], abs=1e-3)
            assert e["saving_if_data_keeps_up"] < 0
        elif not f.title.startswith(("vocab_size", "intermediate_size")):
            # padding vocab (or, since AL001 prices a weight's own dims, intermediate_size while hidden_size stays
            # unaligned) alone only adds FLOPs: a small cost, hidden too
            assert e["saving_if_data_keeps_up"] > 0
    (al,) = [f for f in device if f.title.startswith("hidden_size")]
    assert ev(al)["saving_if_data_keeps_up"] == pytest.approx(ev(al)["saving_if_fixed_alone"], abs=1e-3)


def test_md001_names_python_work_and_patches_processes_and_workers(data_bound: Path, result) -> None:
    (f,) = [x for x in result.findings if x.code == "MD001"]
    e = ev(f)
    rec = load_run(data_bound / "profile").rank(0).record("minddata_summary")
    step, wait = e["step_time"], e["data_wait_per_step"]
    # one Map worker at ~99 % of a core for the whole 240 ms batch: thousands of times what a TypeCast costs
    assert float(rec.per_batch_time_ms) == pytest.approx(240.0)
    assert "Python held by the GIL" in f.message and "TypeCast" in f.message
    ops = {o.path: (o.value, p.safety.value) for p in f.patches for o in p.ops if o.op != "test"}
    assert ops == {"/train_dataset/num_parallel_workers": (2, "safe"),
                   "/train_dataset/python_multiprocessing": (True, "unsafe")}
    # two worker processes halve the batch period (120 ms) below the 171 ms compute: the whole wait goes
    assert f.saving_us == pytest.approx(wait, abs=1e-6)
    assert step - wait == pytest.approx(171_644.4, abs=1.0)  # over every steady step (no warm-up in this run)


def test_md001_keeps_workers_only_when_listed_transforms_explain_the_cpu(tmp_path) -> None:
    out = tmp_path / "md"
    simulate_scenario("minddata-bottleneck", out, ground_truth=False)
    (f,) = open_session(out, plugins=False).analyze(select=["MD001"]).findings
    assert [o.path for p in f.patches for o in p.ops if o.op != "test"] == ["/train_dataset/num_parallel_workers"]
    assert "GIL" not in f.message


def test_device_bound_run_keeps_its_savings(tmp_path) -> None:
    out = tmp_path / "unaligned"
    simulate_scenario("unaligned", out, layers=2, ground_truth=False)
    fs = open_session(out, plugins=False).analyze(select=["AL001"]).findings
    assert fs and all("saving_if_data_keeps_up" not in ev(f) for f in fs)
    (f,) = [x for x in fs if x.title.startswith("hidden_size")]
    assert f.saving_us == pytest.approx(ev(f)["saving_if_fixed_alone"], abs=1e-3)
    assert f.saving_us > 0
