"""Derived profile of the seed's ResNet-50 8P case (r1.6 performance guide, case 3), see README.md.

Reads the kernel graph MindSpore 2.10 compiled for ``case_resnet50.py`` (``graph_build_0_*.ir``:
the kernels, their full names and order, their shapes) and writes what rank 0 of the seed's 8-device
Ascend job would record in ``kernel_details.csv`` (MindSpore's Level0 columns, with ``Step ID``):

* forward and backward kernels in the kernel graph's order, timed from their work at batch 32,
  224×224 (FLOPs on the cube for Conv2D/MatMul and their gradients, bytes at HBM bandwidth for the
  rest, plus a launch cost), scaled so that forward + backward take the seed's 23.6 − 6.15 = 17.45 ms;
* then the gradient AllReduce (``grad_reducer``) in the buckets ``--split`` gives (default: one, the
  seed's starting point), each starting once its gradients exist and the previous bucket is done;
* then the Momentum updates (``ApplyMomentum`` per parameter, bytes at HBM bandwidth), which need
  the reduced gradients; the AllReduce transfer is the seed's tail, 6.15 ms, minus their time.

Parameter order (what ``--split`` indexes) is the front-end IR's (``21_validate_*.ir``: definition
order); each parameter's gradient exists when the kernel producing it ends — found in the kernel
graph by following the parameter's ``ApplyMomentum`` back to its gradient operand's producer (real
MindSpore defers most conv weight gradients towards the end of the backward).

usage: python make_profile.py IR_DIR OUT_DIR [--split 85,160]   (advisor's venv: reads IR with advisor_core.ir)
"""
import argparse
import json
import re
from pathlib import Path

FP_BP_US = 23600.0 - 6150.0      # seed: step 23.6 ms, tail 6.15 ms
TAIL_US = 6150.0                 # AllReduce + parameter update, one bucket
BATCH_SCALE = (32 / 2) * (224 / 64) ** 2  # the IR was compiled at batch 2, 64x64; the seed runs 32, 224x224
CUBE_FLOPS = 256e12 * 0.5        # Ascend 910 fp16 cube, half of peak achieved
HBM_BYTES = 1.2e12 * 0.85        # Ascend 910 HBM, 85 % achieved
LAUNCH_US = 2.0
BUCKET_LATENCY_US = 20.0         # per extra bucket (CM001's default assumption)
T0_US = 1_700_000_000_000.0
NODE = re.compile(r"^  %\d+\([^)]*\) = (?:PrimFunc_)?(\w+)\(")
TYPES = re.compile(r"<(?:Ref\[)?Tensor\[(\w+)\]\]?, \(([\d, ]*)\)")
SKIP = {"Load", "UpdateState", "Depend", "MakeTuple", "TupleGetItem", "Return", "Reshape", "Flatten", "AssignAdd"}
CUBE = {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "MatMul"}


def shapes(text):
    return [tuple(int(d) for d in dims.split(",") if d.strip()) for _, dims in TYPES.findall(text)]


def prod(s):
    n = 1
    for d in s:
        n *= d
    return n


def kernels(ir):
    """(op, full name, input shapes, output shapes) of each kernel, in kernel-graph order."""
    out = []
    for n in ir.iter_nodes():
        if n.op in SKIP:
            continue
        ins = [tuple(t.shape) for t in n.in_types if getattr(t, "shape", None) is not None]
        outs = [tuple(t.shape) for t in n.out_types if getattr(t, "shape", None) is not None]
        out.append((n.op, n.kernel_full_name or n.scope, ins, outs, n))
    return out


def gradient_producer(ir, node):
    """The ``Gradients/`` node an ApplyMomentum's gradient operand (index 3) comes from."""
    cur = ir.resolve(node, node.operand_refs[3])
    while cur is not None and hasattr(cur, "op") and (cur.op in SKIP or not (cur.scope or "").startswith("Gradients/")):
        refs = [r for r in cur.operand_refs if r.kind == "node"]
        cur = ir.resolve(cur, refs[0]) if refs else None
    return cur


def definition_order(validate):
    """Trainable parameter names in definition order: those with a ``moments.`` twin (Momentum's state)."""
    names = [p.name for p in validate.params]
    have = set(names)
    return [n for n in names if f"moments.{n}" in have]


def work_us(op, ins, outs):
    """Time of one kernel at the seed's batch, before scaling to the seed's forward + backward."""
    if op in ("Conv2D", "Conv2DBackpropInput"):  # 2 · output(or dout) · Cin · kh · kw
        dout = outs[0] if op == "Conv2D" else ins[0]
        w = ins[1]
        flops = 2 * prod(dout) * prod(w[1:])
        return LAUNCH_US + flops * BATCH_SCALE / CUBE_FLOPS * 1e6
    if op == "Conv2DBackpropFilter":
        dout, w = ins[0], outs[0]
        return LAUNCH_US + 2 * prod(dout) * prod(w[1:]) * BATCH_SCALE / CUBE_FLOPS * 1e6
    if op == "MatMul":
        a, b = ins[0], ins[1]
        return LAUNCH_US + 2 * prod(a) * max(b) * 16 / CUBE_FLOPS * 1e6  # rows scale with the batch only
    moved = sum(prod(s) for s in ins + outs if len(s) >= 2) * 2  # fp16 feature maps
    return LAUNCH_US + moved * BATCH_SCALE / HBM_BYTES * 1e6


def main():
    from advisor_core.diagnostics import DiagnosticSink
    from advisor_core.ir import parse_ir_file

    ap = argparse.ArgumentParser()
    ap.add_argument("ir_dir")
    ap.add_argument("out")
    ap.add_argument("--split", default="")
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    sink = DiagnosticSink()
    graph = parse_ir_file(sorted(Path(a.ir_dir).glob("graph_build_0_*.ir"))[0], sink)
    validate = parse_ir_file(sorted(Path(a.ir_dir).glob("21_validate_*.ir"))[0], sink)
    ks = kernels(graph)
    opt = [k for k in ks if k[0] == "ApplyMomentum"]
    comp = [k for k in ks if k[0] != "ApplyMomentum"]
    raw = [work_us(op, ins, outs) for op, _, ins, outs, _ in comp]
    scale = (FP_BP_US - LAUNCH_US * len(comp)) / (sum(raw) - LAUNCH_US * len(comp))
    dur = [LAUNCH_US + (r - LAUNCH_US) * scale for r in raw]
    upd = [LAUNCH_US + 5 * 4 * prod(outs[0]) / HBM_BYTES * 1e6 for _, _, _, outs, _ in opt]  # var, accum, grad in; var, accum out
    ar_us = TAIL_US - sum(upd)
    index = {id(k[4]): i for i, k in enumerate(comp)}
    producer = {}
    for _, _, _, _, n in opt:
        var = graph.resolve(n, n.operand_refs[0])
        producer[var.name] = index[id(gradient_producer(graph, n))]
    order = definition_order(validate)
    params = [prod(next(p.type.shape for p in validate.params if p.name == name)) for name in order]
    ready_at = [producer[name] for name in order]
    points = [int(x) for x in a.split.split(",") if x]
    bounds = [0] + points + [len(params)]
    rows = ["Step ID,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
            "Wait Time(us),Block Dim"]
    t = T0_US
    task = 1
    hcom = 100
    for step in range(1, a.steps + 1):
        ends = []
        for (op, name, _, _, _), d in zip(comp, dur):
            core = "AI_CORE" if op in CUBE else "AI_VECTOR_CORE"
            rows.append(f"{step},4294967295,{task},2,{name},{op},dynamic,{core},\"{t:.3f}\t\",{d:.3f},0.000,0")
            task += 1
            t += d
            ends.append(t)
        bwd_end = t
        total = sum(params)
        comm = 0.0
        spans = sorted(zip(bounds, bounds[1:]), key=lambda b: max(ends[ready_at[i]] for i in range(*b)))
        for k, (lo, hi) in enumerate(spans):  # buckets in the order their gradients are all there
            start = max(max(ends[ready_at[i]] for i in range(lo, hi)), comm)
            d = ar_us * sum(params[lo:hi]) / total + (BUCKET_LATENCY_US if len(bounds) > 2 else 0.0)
            rows.append(f"{step},4294967295,N/A,N/A,Default/grad_reducer-DistributedGradReducer/AllReduce-op{k}"
                        f"/hcom_allReduce__{hcom}_0_1,hcom_allReduce_,N/A,HCCL,\"{start:.3f}\t\",{d:.3f},0.000,0")
            hcom += 1
            comm = start + d
        t = max(bwd_end, comm)
        for (_, name, _, _, _), d in zip(opt, upd):
            rows.append(f"{step},4294967295,{task},2,{name},ApplyMomentum,dynamic,AI_VECTOR_CORE,\"{t:.3f}\t\",{d:.3f},0.000,0")
            task += 1
            t += d
        t += 50.0  # next batch
    apo = Path(a.out) / "rank0_ascend_ms" / "ASCEND_PROFILER_OUTPUT"
    apo.mkdir(parents=True, exist_ok=True)
    (apo / "kernel_details.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    info = {"ms_profiler_info": {"rank_id": 0, "rank_size": 8, "device_id": 0, "parallel_mode": "data_parallel",
                                 "stage_num": 1}, "ms_version": "2.10.0"}
    (apo.parent / "profiler_info_0.json").write_text(json.dumps(info, indent=4) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
