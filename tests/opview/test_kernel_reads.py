"""A profile without ``ProfilerStep`` events: the op view cuts its steps from the kernel table it already read.

The step windows then come from the kernels themselves (:mod:`advisor_core.analyses.kernel_steps`); the
op view's build hands its Arrow table down instead of the windows reading the file (or querying the DB)
a second time.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from advisor_core.analyses.kernel_steps import kernel_step_windows
from advisor_core.analyses.step_time import step_windows
from advisor_core.model.run import Rank, load_run
from advisor_core.simulate import simulate_scenario


@pytest.fixture(scope="module", params=["text", "db"])
def ms_run(request, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp(f"ms-{request.param}") / "run"
    simulate_scenario("allreduce-ms-steps", out, ranks=2, steps=2, layers=1, ground_truth=False, export=request.param)
    return out / "profile"


@pytest.fixture
def kernel_reads(monkeypatch) -> list[tuple[str, tuple[str, ...]]]:
    reads: list[tuple[str, tuple[str, ...]]] = []
    real = Rank.arrow_table

    def counted(self, name, columns=None):  # type: ignore[no-untyped-def]
        reads.append((name, tuple(columns or ())))
        return real(self, name, columns)

    monkeypatch.setattr(Rank, "arrow_table", counted)
    return reads


def test_op_view_reads_the_kernels_once_and_cuts_the_same_steps(ms_run, kernel_reads) -> None:
    rank = load_run(ms_run).rank(0)
    view = rank.op_view()
    windows = step_windows(rank)  # kept from the build
    assert [name for name, _ in kernel_reads] == ["kernels"]
    assert (view.steps, view.step_ids) == (2, (1, 2))
    assert windows.attrs == {"source": "repeated kernel sequence (2 steps of 328 compute kernels)"}
    assert windows["start_ns"].tolist() == [1750000000000250000, 1750000000116035914]
    assert windows["end_ns"].tolist() == [1750000000116035914, 1750000000231563087]
    alone = step_windows(load_run(ms_run).rank(0))  # no op view: the windows read the kernels themselves
    assert [name for name, _ in kernel_reads] == ["kernels", "kernels"]
    pd.testing.assert_frame_equal(windows, alone)
    assert windows.attrs == alone.attrs


def test_a_table_lacking_a_column_is_read_again(ms_run, kernel_reads) -> None:
    rank = load_run(ms_run).rank(0)
    full = kernel_step_windows(rank)
    start_only = rank.arrow_table("kernels", ["start_ns"])
    kernel_reads.clear()
    again = kernel_step_windows(rank, start_only)  # no names: they are read
    assert [name for name, _ in kernel_reads] == ["kernels"] and "name" in kernel_reads[0][1]
    pd.testing.assert_frame_equal(again, full)
    assert again.attrs == full.attrs
