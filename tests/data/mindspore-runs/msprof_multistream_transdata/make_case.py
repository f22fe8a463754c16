"""Derive this case from msprof-analyze's real kernel sample: a TransData pair around each attention softmax.

    python make_case.py ../../../../../shared/real-data/msprof-analyze/ut__advisor__advisor_backend__compute_advice/kernel_details.csv

The sample (a 910-class run of a GPT-like model: hidden 12288, 4 × 1024 tokens, two layers' forward) keeps
every row; four TransData rows are inserted on the AI-core stream (16), in gaps between real kernels, so
that each ``ScaledMaskedSoftmax`` sits inside FRACTAL_NZ → ND … ND → FRACTAL_NZ, as an op that only accepts ND
inside an NZ chain does. In the first layer the real AI_CPU ``trans_Cast_18`` and DSA
``StatelessDropOutGenMask99`` kernels of stream 17 start between the softmax and the TransData after it.
"""
import csv
import sys
from decimal import Decimal

SHAPE = '"4,3,1024,1024"'  # the softmax's input and output (literal quotes, as the sample writes shapes)
# 25.17 MB read + 25.17 MB written at 1290 GB/s (the sample's large Casts) + the 1.88 µs small-Cast floor
DURATION = "40.9"
INSERTS = [  # (name, start µs, input format, output format): gaps on stream 16 around the two softmaxes
    ("trans_TransData_1001", "1699529623123120.0", "FRACTAL_NZ", "FORMAT_ND"),  # Mul97 ends 122811.6, softmax 123188
    ("trans_TransData_1002", "1699529623124150.0", "FORMAT_ND", "FRACTAL_NZ"),  # after trans_Cast_18/DSA start
    ("trans_TransData_1003", "1699529623143650.0", "FRACTAL_NZ", "FORMAT_ND"),  # Mul97 ends 143626.0, softmax 143711.5
    ("trans_TransData_1004", "1699529623143810.0", "FORMAT_ND", "FRACTAL_NZ"),  # softmax ends 143802.6, DoMask 143887.2
]


def main(src: str, out: str = "kernel_details.csv") -> None:
    with open(src, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    col = {c: i for i, c in enumerate(header)}
    for k, (name, start, fin, fout) in enumerate(INSERTS):
        r = ["0"] * len(header)
        r[col["Step Id"]], r[col["Model ID"]], r[col["Task ID"]], r[col["Stream ID"]] = "1", "4294967295", str(9001 + k), "16"
        r[col["Name"]], r[col["Type"]], r[col["Accelerator Core"]] = name, "TransData", "AI_VECTOR_CORE"
        r[col["Start Time(us)"]], r[col["Duration(us)"]], r[col["Block Dim"]] = start, DURATION, "48"
        r[col["Input Shapes"]], r[col["Input Data Types"]], r[col["Input Formats"]] = SHAPE, "FLOAT16", fin
        r[col["Output Shapes"]], r[col["Output Data Types"]], r[col["Output Formats"]] = SHAPE, "FLOAT16", fout
        r[col["Context ID"]] = "N/A"
        at = next(i for i, b in enumerate(body) if Decimal(b[col["Start Time(us)"]]) > Decimal(start))
        body.insert(at, r)
    with open(out, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows([header, *body])


if __name__ == "__main__":
    main(*sys.argv[1:])
