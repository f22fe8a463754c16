"""Kernel-only conversion triage: a profile without IR says how much Cast/TransData cost and which dump to take."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.simulate import simulate_scenario

HOST = load_plugins(autoload=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("triage")
    for name in ("cast-excess", "clean", "unaligned"):
        simulate_scenario(name, base / name, ground_truth=False)
    return base


def _analyze(profile: Path, options: dict | None = None):  # type: ignore[no-untyped-def]
    return Session([profile], SessionOptions(jobs=1), host=HOST).analyze(select=["CT001", "CT002"], options=options)


def test_profile_with_many_casts_gets_the_triage(runs: Path) -> None:
    result = _analyze(runs / "cast-excess" / "profile")
    (f,) = result.findings
    assert (f.code, f.severity.value, f.saving_us) == ("CT001", "low", None)
    assert f.title == "Cast kernels take 7.9% of the step (24.65 ms); an IR dump would tell which are redundant"
    ev = {e.name: e.value for e in f.evidence}
    assert ev == {"cast_time_per_step": 24647.029, "cast_share": 7.936, "conversion_share": 7.936,
                  "cast_launches_per_step": 383.0}
    assert "Most time in: model.layers.N.ffn_norm 9.77 ms (4 layers); layers.N.attention.apply_rotary_emb 5.02 ms" in f.message
    assert "By dtype: DT_FLOAT16→FLOAT 13.03 ms, FLOAT→DT_FLOAT16 11.62 ms." in f.message
    assert "MS_DEV_SAVE_GRAPHS=1" in f.message and "NN_validate_*.ir" in f.message and "graph_build_*.ir" in f.message
    (loc,) = f.locations
    assert loc.table == "kernels" and loc.rank == 0 and loc.op.endswith("/Cast-op0/aclnnCast_CastAiCore_Cast")
    (skip,) = [s for s in result.skipped if s.code == "CT002"]
    assert skip.reason.startswith("conversions take 7.9% of the step on rank 0, but TransData kernels only 0.0%")


def test_clean_profile_gets_none_until_the_threshold_is_lowered(runs: Path) -> None:
    result = _analyze(runs / "clean" / "profile")
    assert result.findings == []
    assert any(s.reason.startswith("Cast and TransData kernels take 4.9% of the step on rank 0 (< 5.0%)")
               for s in result.skipped if s.code == "CT001")
    lowered = _analyze(runs / "clean" / "profile", {"CT001": {"triage_min_share_pct": 4.0}})
    assert [f.code for f in lowered.findings] == ["CT001"]


def test_alignment_transdata_are_left_to_al001(runs: Path) -> None:
    result = _analyze(runs / "unaligned" / "profile")
    assert result.findings == []
    assert all("take 2.7% of the step" in s.reason for s in result.skipped if s.code in ("CT001", "CT002"))


def test_with_the_ir_there_is_no_triage(runs: Path) -> None:
    result = Session([runs / "cast-excess"], SessionOptions(jobs=1), host=HOST).analyze(select=["CT001"])
    assert result.findings and all("an IR dump would tell" not in f.title for f in result.findings)


# What MindSpore's kernel_details writer drops at profiler_level Level0 (specs/ascend-profile-formats.md):
# no shapes, dtypes or formats, so the kernel order cannot show a TransData sandwich or a converted weight.
_LEVEL1_ONLY = ("Mix Block Dim", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
                "Output Data Types", "Output Formats", "Context ID")


def _as_level0(profile: Path) -> None:
    import csv

    for table in profile.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"):
        with open(table, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        keep = [i for i, h in enumerate(rows[0]) if h not in _LEVEL1_ONLY]
        with open(table, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows([[row[i] for i in keep] for row in rows])


def test_profile_with_much_transdata_gets_the_ct002_triage(tmp_path: Path) -> None:
    """TransData at 6.6% of the step, a Level0 profile and no IR: CT002 says so and which dump to take."""
    run = tmp_path / "transdata"
    # seq_length 2048: the per-step weight conversions weigh more against the shorter compute
    simulate_scenario("transdata-excess", run, layers=2, steps=1, ranks=2, ground_truth=False,
                      sets=["model.model_config.seq_length=2048"])
    full = [f.title for f in _analyze(run / "profile").findings if f.code == "CT002"]
    assert full and not any("an IR dump would tell" in t for t in full)  # with formats, the groups themselves
    _as_level0(run / "profile")
    result = _analyze(run / "profile")
    (f,) = [f for f in result.findings if f.code == "CT002"]
    assert (f.severity.value, f.saving_us) == ("low", None)
    assert f.title == "TransData kernels take 6.6% of the step (6.14 ms); an IR dump would tell which are redundant"
    assert {e.name: e.value for e in f.evidence} == {"transdata_time_per_step": 6138.645, "transdata_share": 6.558,
                                                    "conversion_share": 13.099, "transdata_launches_per_step": 144.0}
    assert f.message.startswith("On rank 0, TransData kernels run 6.14 ms per step (144 launches), 6.6% of the "
                                "93.61 ms step; Cast and TransData together 13.1%.")
    assert "layers.N.feed_forward.w1 1.10 ms (2 layers)" in f.message
    assert "MS_DEV_DUMP_IR_PASSES=graph_build keeps just graph_build_*.ir" in f.message
    (loc,) = f.locations
    assert loc.table == "kernels" and loc.rank == 0 and loc.op.endswith("/w2-Linear/TransData-op1/trans_TransData_11")
