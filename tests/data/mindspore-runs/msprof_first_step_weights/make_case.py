"""Derive this case from msprof-analyze's real kernel sample: weights converted to FRACTAL_NZ in step 1 only.

    python make_case.py ../../../../../shared/real-data/msprof-analyze/ut__advisor__advisor_backend__compute_advice/kernel_details.csv

The sample (a 910-class run of a GPT-like model: hidden 12288, 4 × 1024 tokens, two layers' forward) is one
step. Edits, all here:

1. the five forward MatMul kernels get MindSpore full names (``<scope>/<kernel>``) so their cell can be read:
   ``MatMul91`` → ``…/attention-Attention/qkv-Dense/MatMul-op91/MatMul91`` (weight 4608×12288),
   ``MatMul103`` → ``…/proj-Dense/…`` (12288×1536), ``MatMul104`` → ``…/mlp-FeedForward/fc1-Dense/…``
   (6144×12288), ``MatMul107`` → ``…/fc2-Dense/…`` (12288×6144), ``MatMul109`` → ``…/head-Dense/…``
   (6400×12288);
2. step 1: one TransData ND → FRACTAL_NZ of the weight per forward MatMul launch (9), in the cell of its
   MatMul, on stream 16 while it is idle during the initial ``hcom_broadcast`` of the parameters, each
   lasting the sample's own Cast model (1.88 µs + bytes read and written at 1290 GB/s);
3. step 2: every row of step 1 except the two initial ``hcom_broadcast`` and the TransData of (2), with
   ``Step Id`` 2 and start times shifted by 600 000 µs.
"""
import csv
import sys
from decimal import Decimal

PREFIX = "Default/network-WithLossCell/_backbone-GPT/transformer-Transformer"
CELLS = {  # kernel name → (cell path, weight shape)
    "MatMul91": ("attention-Attention/qkv-Dense", (4608, 12288)),
    "MatMul103": ("attention-Attention/proj-Dense", (12288, 1536)),
    "MatMul104": ("mlp-FeedForward/fc1-Dense", (6144, 12288)),
    "MatMul107": ("mlp-FeedForward/fc2-Dense", (12288, 6144)),
    "MatMul109": ("head-Dense", (6400, 12288)),
}
FIRST_SLOT = Decimal("1699529622800000.0")  # stream 16 is idle from 1699529622791222.8 to 1699529623106473
SHIFT = Decimal("600000")


def full_name(kernel: str, op: str) -> str:
    cell, _ = CELLS[kernel]
    return f"{PREFIX}/{cell}/{op}/{kernel}"


def main(src: str, out: str = "kernel_details.csv") -> None:
    with open(src, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    col = {c: i for i, c in enumerate(header)}
    step1 = []
    for r in body:
        r = list(r)
        name = r[col["Name"]]
        if name in CELLS:
            r[col["Name"]] = full_name(name, f"MatMul-op{name.removeprefix('MatMul')}")
        step1.append(r)
    conversions = []
    slot = FIRST_SLOT
    for r in step1:
        kernel = r[col["Name"]].rpartition("/")[2]
        if kernel not in CELLS:
            continue
        shape = CELLS[kernel][1]
        nbytes = 2 * 2 * shape[0] * shape[1]  # float16, read and written
        dur = (Decimal("1.88") + Decimal(nbytes) / Decimal("1290e3")).quantize(Decimal("0.01"))
        t = ["0"] * len(header)
        t[col["Step Id"]], t[col["Model ID"]], t[col["Task ID"]], t[col["Stream ID"]] = "1", "4294967295", str(
            9101 + len(conversions)), "16"
        t[col["Name"]] = full_name(kernel, "TransData-op0").replace(f"/{kernel}", f"/trans_TransData_{kernel[6:]}")
        t[col["Type"]], t[col["Accelerator Core"]] = "TransData", "AI_VECTOR_CORE"
        t[col["Start Time(us)"]], t[col["Duration(us)"]], t[col["Block Dim"]] = str(slot), str(dur), "48"
        t[col["Input Shapes"]] = t[col["Output Shapes"]] = f'"{shape[0]},{shape[1]}"'
        t[col["Input Data Types"]] = t[col["Output Data Types"]] = "FLOAT16"
        t[col["Input Formats"]], t[col["Output Formats"]], t[col["Context ID"]] = "FORMAT_ND", "FRACTAL_NZ", "N/A"
        conversions.append(t)
        slot += dur + Decimal("10")
    assert slot < Decimal("1699529623106473"), "the conversions must fit in the idle window"
    step2 = []
    for r in step1:
        if r[col["Type"]] == "hcom_broadcast_":
            continue  # the initial parameter broadcast happens once
        r = list(r)
        r[col["Step Id"]] = "2"
        r[col["Start Time(us)"]] = str(Decimal(r[col["Start Time(us)"]]) + SHIFT)
        step2.append(r)
    merged = sorted(step1 + conversions, key=lambda r: Decimal(r[col["Start Time(us)"]])) + step2
    with open(out, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows([header, *merged])


if __name__ == "__main__":
    main(*sys.argv[1:])
