"""CM001 on cases built without the simulator (``tests/data/mindspore-runs``), each with its README.

* ``redistribution_chain``: a parallel IR in MindSpore's own form (``Split → TupleGetItem →
  MakeTuple → Concat``), hand-written from the real excerpts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.engine.session import Session, SessionOptions
from advisor_core.engine.settings import Settings

RUNS = Path(__file__).resolve().parents[1] / "data" / "mindspore-runs"


def analyze(*paths: Path, config: Path | None = None):
    s = Session(list(paths), SessionOptions(config=config, autoload_plugins=False, settings=Settings()))
    return s.analyze(select=["CM001"])


def ev(f) -> dict:
    return {e.name: e.value for e in f.evidence}


def test_redistribution_through_tuple_plumbing_is_one_chain_with_both_neighbours():
    res = analyze(RUNS / "redistribution_chain" / "ir")
    (f,) = res.findings
    assert f.title == "redistribution (AllGather) around feed_forward.mul in 2 layer(s): strategies disagree"
    # the producer behind w1's output Reshape, and the consumer behind the MakeTuple → Concat
    assert ev(f)["producer_strategy"] == "((1, 1), (2, 1))"
    assert ev(f)["consumer_in_strategy"] == "((2, 1, 1), (2, 1, 1))"
    assert ev(f)["proposed_in_strategy"] == "((2, 1, 2), (2, 1, 2))"
    assert ev(f)["redistribution_ops"] == 14  # per layer 2 × (AllGather, Split, Concat) + StridedSlice
    (p,) = f.patches
    assert p.safety.value == "display_only" and p.title == "shard feed_forward.mul with in_strategy ((2, 1, 2), (2, 1, 2))"
    # no profile: the gathered bytes (4 AllGathers of (2, 4096, 5504) float16), forward and backward, at 56 GB/s
    gathered = 4 * 2 * 4096 * 5504 * 2
    assert f.saving_us == pytest.approx(2 * gathered / 56e3, rel=1e-12)
