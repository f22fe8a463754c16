"""AL001 takes M/K/N from the layer's weight, in the backward products too (issue 11).

The weight gradient ``dW = dYᵀ·X`` contracts over the tokens and puts the weight's output dim first: by
operand position its token dim reads as K (a 999-token batch flagged though every weight dim is aligned)
and the vocab dim as M (never priced). Real: a MindSpore 2.10 CPU IR dump; derived: a simulated run with
both, analysed from its kernel shapes alone and against the simulator's measured cost.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advisor_core.api import open_session
from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir import parse_ir_file
from advisor_core.simulate import simulate_scenario
from advisor_core.verify import within_band
from advisor_rules.al001_alignment.dims import ir_weights
from advisor_rules.al001_alignment.shapes import by_weight_roles

CASE = Path(__file__).resolve().parents[1] / "data" / "mindspore-runs" / "al001_vocab_head_999"


def al001(path: Path):
    return open_session(path, plugins=False).analyze(select=["AL001"]).findings


def test_the_weight_gives_the_roles_whatever_the_operand_position():
    head = (256, 50257)  # (K, N) of the forward x·Wᵀ
    assert by_weight_roles(999, 256, 50257, head) == (999, 256, 50257)  # forward
    assert by_weight_roles(999, 50257, 256, head) == (999, 256, 50257)  # dX = dY·W contracts over N
    assert by_weight_roles(50257, 999, 256, head) == (999, 256, 50257)  # dW = dYᵀ·X contracts over the tokens
    assert by_weight_roles(12, 1024, 64, None) == (12, 1024, 64)  # no weight (attention): positions stand
    assert by_weight_roles(999, 128, 64, head) == (999, 128, 64)  # not this weight's product


def test_real_ir_flags_the_vocab_and_not_the_tokens():
    ir = parse_ir_file(CASE / "ir" / "21_validate_0380.ir", DiagnosticSink())
    # the forward MatMuls read their weight through Load: (K, N) per forward unique_id
    assert ir_weights(ir) == {"4797": (256, 512), "4664": (512, 256), "4521": (256, 50257)}
    (f,) = al001(CASE / "ir")
    assert f.title == "MatMul dim 50257 is not a multiple of 16"
    assert f.message.startswith("N = 50257 in MatMul is not a multiple of 16 (padded to 50272, +0.03% work).")
    assert [loc.line for loc in f.locations if loc.kind == "ir"] == [221, 280]


@pytest.fixture(scope="module")
def vocab_run(tmp_path_factory) -> Path:
    """Simulated: 999 tokens (seq_length 999, micro batch 1), vocab 50257, every weight dim aligned."""
    out = tmp_path_factory.mktemp("al001") / "run"
    simulate_scenario("clean", out, layers=2, steps=2,
                      sets=["parallel_config.model_parallel=1", "parallel_config.data_parallel=2",
                            "model.model_config.vocab_size=50257", "model.model_config.seq_length=999"])
    return out


def truth_us(run: Path, problem: str) -> float:
    problems = json.loads((run / "expected.json").read_text(encoding="utf-8"))["problems"]
    return next(p["cost_us_per_step"] for p in problems if p["id"] == problem)


def test_kernel_shapes_price_the_vocab_in_the_weight_gradient_too(vocab_run, tmp_path):
    run = tmp_path / "kernels_only"
    shutil.copytree(vocab_run, run)
    shutil.rmtree(run / "config")
    shutil.rmtree(run / "graphs")
    (f,) = al001(run)  # before issue 11: also "MatMul dim 999" (1.67 ms), and 50257 at 7.06 ms
    assert f.title == "MatMul dim 50257 is not a multiple of 16"
    assert f.saving_us == pytest.approx(8732.0, abs=1.0)
    assert within_band(truth_us(vocab_run, "AL001-vocab-size"), f.saving_us, 0.0)  # measured 8879 µs


def test_the_config_fix_saves_what_the_simulator_measures(vocab_run):
    fs = al001(vocab_run)
    (vocab,) = [f for f in fs if "vocab_size" in f.title]
    truth = truth_us(vocab_run, "AL001-vocab-size")
    assert round(truth, 3) == 8878.875
    assert vocab.saving_us == pytest.approx(9057.3, abs=0.1) and within_band(truth, vocab.saving_us, 0.0)
    # seq_length sets the 999 tokens: an M dim, reported under its key, with no MatMul penalty credited
    (seq,) = [f for f in fs if "seq_length" in f.title]
    assert "Fixing seq_length alone removes 0.00 ms of MatMul penalty" in seq.message
