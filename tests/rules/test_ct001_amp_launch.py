"""CT001 on real MindSpore 2.10 dumps: AMP's casts are attributed to AMP (O1 rewrite, O2 cast cells), the
model code's to the model code, and a Cast estimated without a profile pays the launch floor measured on
msprof-analyze's real kernel sample (issue 11)."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import pytest

from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.simulate import HardwareProfile
from advisor_rules._common.conversions import CONVERSION_LAUNCH_US

RUNS = Path(__file__).resolve().parents[1] / "data" / "mindspore-runs"


def ct001(path: Path):
    return Session([path], SessionOptions(jobs=1), host=load_plugins(autoload=False)).analyze(select=["CT001"]).findings


def ev(f) -> dict:
    return {e.name: e.value for e in f.evidence}


def test_amp_o1_casts_are_amps_and_the_fix_is_the_white_list():
    fight, back = ct001(RUNS / "amp_o1_mlp" / "ir")
    assert (fight.title, back.title) == ("backend Cast undoes an AMP Cast (Float32→Float16→Float32) (3 places)",
                                         "AMP Cast undoes a backend Cast (Float32→Float16→Float32)")
    for f in (fight, back):
        assert ev(f)["cast_origin"] == "AMP (rewritten network: amp_cast around its white-list ops)"
        assert "Remove the cast" not in f.message
        assert "rewritten_network/MLPOpt_140521925141712.py" in f.message
    assert ("this backend has no Float16 kernel for the MatMul of `fc1` (Dense), so AMP's Float16 only adds casts "
            "around it: keep that cell in float32 — take it off AMP's white list: amp.custom_mixed_precision(net, "
            "white_list=[…amp.get_white_list() without nn.Dense…])") in fight.message
    # 16 and 14 Cast kernels × 2.0 µs launch floor + 19.91 and 16.43 MB at 960 GB/s
    assert round(fight.saving_us, 2) == 52.74 and round(back.saving_us, 2) == 45.11


def test_amp_o2_casts_are_amps_and_the_fix_is_the_black_list():
    fight, back = ct001(RUNS / "amp_o2_unaligned" / "ir")
    assert ev(fight)["cast_origin"] == "AMP (cast cells: level O2/O3 or Cell.to_float)"
    assert ev(back)["cast_origin"] == "AMP (the network output cast back to float32)"
    assert "Remove the cast" not in fight.message + back.message
    assert "put it on AMP's black list: amp.custom_mixed_precision(net, black_list=amp.get_black_list() + " \
           "[nn.Dense])" in fight.message
    assert "no Float16 kernel for the BiasAdd of `fc3` (Dense)" in back.message
    assert 'level="O0" in amp.build_train_network' in fight.message
    # the compiler's casts still point at the statement that uses the tensor, as the place in the model code
    assert "case_amp_o2.py:28: `h = self.act(self.fc1(x))`" in fight.message


def test_a_cast_the_model_code_writes_stays_the_model_codes(ms_cpu):
    (f,) = ct001(ms_cpu / "cast_roundtrip" / "ir_level2_full")
    assert f.title == "lossy Cast round trip Float32→Float16→Float32"
    assert "cast_origin" not in ev(f) and "AMP" not in f.message
    assert "Remove the cast(s) at that line (it also loses precision)." in f.message


def small_casts_us(msprof: Path) -> list[float]:
    """Durations of the AI-core Cast kernels moving under 1 MB in the real kernel sample."""
    size = {"FLOAT16": 2, "FLOAT": 4, "INT32": 4, "INT64": 8, "BOOL": 1, "UINT64": 8}
    out = []
    path = msprof / "ut__advisor__advisor_backend__compute_advice" / "kernel_details.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["Type"] != "Cast" or r["Accelerator Core"] != "AI_VECTOR_CORE":
                continue  # the AI_CPU Casts (trans_Cast_*) are host-side scalars
            n_in = math.prod(int(x) for x in r["Input Shapes"].strip('"').split(","))
            n_out = math.prod(int(x) for x in r["Output Shapes"].strip('"').split(","))
            if n_in * size[r["Input Data Types"]] + n_out * size[r["Output Data Types"]] < 1e6:
                out.append(float(r["Duration(us)"]))
    return out


def test_the_launch_floor_is_the_real_samples_and_the_simulators(msprof):
    small = small_casts_us(msprof)
    assert len(small) == 47 and (min(small), max(small)) == (1.54, 3.22)
    assert statistics.median(small) == 1.88 and round(statistics.mean(small), 2) == 2.07
    # the rules' floor is what a sum of small Casts averages, and what every simulated kernel pays
    assert CONVERSION_LAUNCH_US == HardwareProfile().kernel_launch_overhead_us == 2.0
    assert abs(statistics.mean(small) - CONVERSION_LAUNCH_US) < 0.1


def test_a_cast_without_a_profile_costs_the_launch_floor_plus_its_bytes():
    fight = ct001(RUNS / "amp_o2_unaligned" / "ir")[0]
    # fc1's 3 pairs: 6 kernels × 2.0 µs + 6.30 MB at 960 GB/s (bytes alone: 6.6 µs before issue 11)
    assert ev(fight)["cast_time_per_step"] == pytest.approx(18.566, abs=1e-3)
    assert "estimated: 6 Cast kernel(s) × 2.0 µs launch + 6.30 MB moved at 960 GB/s" in fight.message
