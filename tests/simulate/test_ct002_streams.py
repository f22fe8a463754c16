"""CT002 follows each kernel's stream: kernels of other streams starting inside a TransData sandwich do not hide it.

The transdata-excess scenario's ND-only ``feed_forward.mul`` falls back to AI_CPU, so the simulator writes it
on the AI_CPU stream (3) between two TransData of the AI-core stream (2), as msprof-analyze's real sample
has AI_CPU kernels on stream 17 beside the AI cores' 16 (issue 11).
"""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from advisor_core.api import open_session

MUL = "feed_forward-LlamaFeedForward/Mul-op0/"


def _nd_finding(path: Path):
    found = [f for f in open_session(path, plugins=False).analyze(select=["CT002"]).findings
             if "forces TransData pairs" in f.title]
    return found[0] if found else None


def _kernel_files(run: Path) -> list[Path]:
    return sorted(run.glob("profile/*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))


def _insert_hccl_around_mul(run: Path, stream: str) -> int:
    """An HCCL kernel starting between the Mul and each of its neighbours in time, on ``stream``."""
    added = 0
    for kd in _kernel_files(run):
        with open(kd, newline="", encoding="utf-8") as fh:
            header, *body = list(csv.reader(fh))
        col = {c: i for i, c in enumerate(header)}
        out = []
        for k, r in enumerate(body):
            if MUL not in r[col["Name"]]:
                out.append(r)
                continue
            rows = []
            for a, b in ((body[k - 1], r), (r, body[k + 1])):
                t = (Decimal(a[col["Start Time(us)"]].strip()) + Decimal(b[col["Start Time(us)"]].strip())) / 2
                h = ["N/A"] * len(header)
                h[col["Step ID"]], h[col["Model ID"]], h[col["Stream ID"]] = r[col["Step ID"]], "4294967295", stream
                h[col["Name"]], h[col["Type"]], h[col["Accelerator Core"]] = (f"hcom_allReduce__9{added}_0_1",
                                                                            "hcom_allReduce_", "HCCL")
                h[col["Start Time(us)"]], h[col["Duration(us)"]], h[col["Wait Time(us)"]] = f"{t}\t", "5", "0"
                rows.append(h)
                added += 1
            out += [rows[0], r, rows[1]]
        with open(kd, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows([header, *out])
    return added


def test_the_aicpu_fallback_runs_on_its_own_stream(scenario_runs):
    _, run = scenario_runs["transdata-excess"]
    with open(_kernel_files(run)[0], newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    mul = [r for r in rows if MUL in r["Name"] or "Grad_Mul/Mul-op" in r["Name"]]
    assert mul and {(r["Stream ID"], r["Accelerator Core"], r["Name"].rpartition("/")[2]) for r in mul} == {
        ("3", "AI_CPU", "Mul")}
    assert {r["Stream ID"] for r in rows if r["Accelerator Core"] not in ("AI_CPU", "HCCL")} == {"2"}
    (trace,) = run.glob(f"profile/{_kernel_files(run)[0].parts[-3]}/ASCEND_PROFILER_OUTPUT/trace_view.json")
    events = json.loads(trace.read_text(encoding="utf-8"))
    assert {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"
            and e["args"]["name"].startswith("Stream")} == {"Stream 2", "Stream 3"}


@pytest.mark.parametrize("stream", ["9", "N/A"])
def test_hccl_kernels_starting_inside_a_sandwich_do_not_hide_it(scenario_runs, tmp_path, stream):
    """The probe of issue 11: IR removed, HCCL kernels inserted between the TransData, the Mul and the TransData."""
    _, src = scenario_runs["transdata-excess"]
    run = tmp_path / "run"
    shutil.copytree(src, run)
    shutil.rmtree(run / "graphs")
    before = _nd_finding(run)
    assert before is not None
    assert _insert_hccl_around_mul(run, stream) == 4 * 32  # 4 ranks; per rank 2 around each of 16 forward Muls
    after = _nd_finding(run)
    assert after is not None and after.title == before.title
    assert after.saving_us == pytest.approx(before.saving_us, rel=1e-9)
