"""The data shapes issue 11 found the simulator too narrow for: warm-up steps, and a transfer-bound device.

``minddata-warmup``: the first batches come from a cold cache, so the first steps wait until their
batch arrives and the later ones only the dequeue. ``minddata-transfer``: a slow host→device link
keeps the host queue full while the device queue (CANN's ``aicpu_mi``) runs empty. Expected values
come from the pipeline model and the run's own files, never ``expected.json``.
"""

from __future__ import annotations

import numpy as np
import pytest

from advisor_core.api import open_session
from advisor_core.model.run import load_run
from advisor_core.simulate import simulate_scenario
from advisor_core.simulate.minddata import DEQUEUE_LATENCY_US
from advisor_core.simulate.schedule import T0_NS

STEPS = 6


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("md_shapes")
    return {name: (simulate_scenario(name, base / name, steps=STEPS, ground_truth=False), base / name)
            for name in ("minddata-warmup", "minddata-transfer")}


def queues(out) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(host queue sizes, device queue sizes, device GetNext waits µs) per step, from the files."""
    rank = load_run(out / "profile").rank(0)
    hq, dq = rank.table("host_queue"), rank.table("device_queue")
    assert rank.table_source("device_queue")[0].name.startswith("aicpu_mi_")
    return hq["queue_size"].to_numpy(), dq["queue_size"].to_numpy(), dq["wait_us"].to_numpy()


def test_warmup_steps_wait_until_their_batch_arrives(runs):
    result, out = runs["minddata-warmup"]
    pipe, sched = result.model.pipeline, result.model.schedule
    host, device, waits = queues(out)
    start = sched.step_start[0][0]
    late = pipe.ready_ns(T0_NS, STEPS) - start + int(DEQUEUE_LATENCY_US * 1000)
    assert pipe.device_bound and list(pipe.warmup_extra_us) == [250000.0] * 3
    assert np.array_equal(sched.wait_ns(0, 0), np.maximum(late, pipe.gap_ns))
    assert waits[:3] == pytest.approx(late[:3] / 1000.0, abs=1.0) and (waits[:3] > 200_000).all()
    assert waits[3:] == pytest.approx([DEQUEUE_LATENCY_US] * 3, abs=1.0)  # then the queue is ahead of the device
    assert host.tolist() == [0, 0, 0, 16, 16, 16] and device.tolist() == [0, 0, 0, 16, 16, 16]


def test_warmup_only_run_gets_no_md001(runs):
    _, out = runs["minddata-warmup"]
    res = open_session(out, plugins=False).analyze(select=["MD001"])
    assert [f for f in res.findings if f.code == "MD001"] == []
    (skip,) = [s for s in res.skipped if s.code == "MD001"]
    assert "3 warm-up step(s) left out (step 1" in skip.reason


def test_slow_link_fills_the_host_queue_and_empties_the_device_queue(runs):
    result, out = runs["minddata-transfer"]
    pipe = result.model.pipeline
    host, device, waits = queues(out)
    assert pipe.transfer_bound and pipe.bottleneck == 0
    assert host.tolist() == [pipe.queue_capacity] * STEPS and device.tolist() == [0] * STEPS
    assert waits == pytest.approx([pipe.gap_ns / 1000.0] * STEPS, abs=1.0)  # push − busy + the dequeue, every step
    (f,) = [x for x in open_session(out, plugins=False).analyze(select=["MD001"]).findings if x.code == "MD001"]
    assert f.title.startswith("the host→device transfer starves the device")
    assert f.patches == [] and f.saving_us == pytest.approx(float(np.mean(waits[1:])), rel=0.01)
