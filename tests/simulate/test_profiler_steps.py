"""Profiles without ``ProfilerStep`` events, as MindSpore writes them: steps from the kernels themselves.

The simulator's ``profiler_steps=False`` (scenario ``allreduce-ms-steps``) leaves out the
trace's ``ProfilerStep#<n>`` events and ``kernel_details.csv``'s ``Step ID``; ``step_trace_time.csv``
is MindSpore's single whole-run row either way. The same run with the marks is the reference.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from advisor_core.analyses.kernel_steps import _from_repetition
from advisor_core.analyses.step_time import mean_step_time_us, step_windows
from advisor_core.api import open_session
from advisor_core.model.run import load_run
from advisor_core.simulate import simulate_scenario


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("steps")
    simulate_scenario("allreduce-ms-steps", base / "ms", ground_truth=False)
    simulate_scenario("allreduce-ms-steps", base / "marked", ground_truth=False, profiler_steps=True)
    return base / "ms", base / "marked"


def _apo(run: Path) -> Path:
    return sorted((run / "profile").glob("*/ASCEND_PROFILER_OUTPUT"))[0]


def test_the_variant_writes_what_mindspore_writes(pair):
    ms, marked = pair
    assert b"ProfilerStep#" not in (_apo(ms) / "trace_view.json").read_bytes()
    assert b"ProfilerStep#" in (_apo(marked) / "trace_view.json").read_bytes()
    assert (_apo(ms) / "kernel_details.csv").read_text().splitlines()[0].startswith("Model ID,Task ID,")
    assert (_apo(marked) / "kernel_details.csv").read_text().splitlines()[0].startswith("Step ID,Model ID,")
    assert (_apo(ms) / "step_trace_time.csv").read_text() == (_apo(marked) / "step_trace_time.csv").read_text()


def test_steps_are_cut_where_the_kernel_sequence_repeats(pair):
    ms, marked = pair
    r_ms, r_marked = load_run(ms / "profile").rank(0), load_run(marked / "profile").rank(0)
    w, ref = step_windows(r_ms), step_windows(r_marked)
    assert w.attrs["source"].startswith("repeated kernel sequence (3 steps of ")
    assert ref.attrs["source"] == "ProfilerStep"
    k = r_marked.table("kernels", ["step_id", "start_ns", "accelerator_core"])
    first = k[k["accelerator_core"] != "HCCL"].groupby("step_id")["start_ns"].min()
    assert w["start_ns"].tolist() == first.tolist()  # each step's first compute kernel
    assert w["end_ns"].tolist()[:-1] == first.tolist()[1:]
    # the whole-run row divided into 3 steps, not one 3-step "step"
    assert mean_step_time_us(r_ms) == pytest.approx(mean_step_time_us(r_marked), rel=2e-3)
    assert mean_step_time_us(r_ms) < 0.4 * float(r_ms.table("step_trace")["total_us"].iloc[0])


def test_cm001_gives_the_same_findings_without_step_marks(pair):
    ms, marked = pair

    def cm001(run: Path):
        res = open_session(run, plugins=False).analyze(select=["CM001"])
        return sorted((f.title, round(f.saving_us, 3), [o.model_dump() for p in f.patches for o in p.ops]) for f in res.findings)

    got = cm001(ms)
    assert got == cm001(marked)
    assert [(t.split(":")[0], s) for t, s, _ in got] == [
        ("gradient AllReduce exposed in the step tail", 2707.629),
        ("redistribution (AllGather) around feed_forward.mul in 2 layer(s)", 17209.523)]


def _run(names: list[str], gaps: list[int] | None = None) -> tuple[pa.ChunkedArray, np.ndarray, np.ndarray, np.ndarray]:
    start = np.cumsum([10] * len(names) if gaps is None else gaps).astype(np.int64)
    return pa.chunked_array([pa.array(names)]), start, start + 5, np.zeros(len(names), bool)


def test_repetition_counts_micro_batches_and_ignores_one_off_kernels():
    step = ["emb", "l0", "l1", "emb", "l0", "l1", "adam"]  # 2 micro batches, the optimizer once
    names = ["transdata_once"] + step + step + step  # a weight converted in the first step only
    w = _from_repetition(*_run(names))
    assert w is not None and w["step"].tolist() == [1, 2, 3]
    # cut at every second "emb" (the first name that repeats every step); step 1 from the profile's start
    assert w["start_ns"].tolist() == [10, 90, 160]
    assert w["end_ns"].tolist() == [90, 160, 225]


def test_repetition_needs_a_period():
    assert _from_repetition(*_run(["a", "b", "a", "b", "b"])) is None  # launch counts 2 and 3: no common step count
    assert _from_repetition(*_run(["a", "b", "c", "a", "b"])) is None  # a fifth of the kernels never repeat
    assert _from_repetition(*_run(["a", "b", "a", "b", "b", "b", "b", "b", "b", "b"])) is None  # steps of 2 and 8 kernels
