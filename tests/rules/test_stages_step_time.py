"""A measure's per-stage kernel time as step time: 1F1B over the stages, micro batches from the config or the kernels."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from advisor_rules._common import micro_batches_per_step, one_f_one_b_step_saving, stages_step_time


class _Rank:
    """A rank whose busy time and counted micro batches are given (what stage_busy_and_micro caches)."""

    def __init__(self, busy: float | None, micro: int | None) -> None:
        self._figures = (busy, micro)

    def cached(self, key: str, compute: Any) -> Any:
        assert key == "stage_busy_and_micro"
        return self._figures


def _ctx(pipeline_stages: int | None, micro_batch_num: int = 1) -> Any:
    cfg = None if pipeline_stages is None else SimpleNamespace(pipeline_stages=pipeline_stages,
                                                               micro_batch_num=micro_batch_num)
    return SimpleNamespace(config=cfg)


def test_micro_batches_from_the_config_under_pipeline_parallel_else_from_the_kernels() -> None:
    assert micro_batches_per_step(_ctx(2, 8).config, [3, None]) == 8
    assert micro_batches_per_step(_ctx(1, 8).config, [3, None, 2]) == 3
    assert micro_batches_per_step(None, [None]) == 1


def test_two_stages_combine_as_the_estimates_do() -> None:
    measured = {0: (_Rank(1000.0, 4), 100.0), 1: (_Rank(800.0, 4), 40.0)}
    # no config: micro batches counted from the kernels (4); busy per stage as given
    assert stages_step_time(_ctx(None), measured) == one_f_one_b_step_saving({0: 100.0, 1: 40.0},
                                                                             {0: 1000.0, 1: 800.0}, 4)
    assert stages_step_time(_ctx(None), measured) == 35.0 + 3 * (250.0 - 225.0)  # per micro batch: Σδ + (m−1)·Δmax
    # pipeline parallel: the config's micro_batch_num (2), not the count
    assert stages_step_time(_ctx(2, 2), measured) == 70.0 + 1 * (500.0 - 450.0)
    assert stages_step_time(_ctx(None), {}) is None
    assert stages_step_time(_ctx(None), {0: (_Rank(None, None), 12.5)}) == 12.5  # one stage: its own time
