#!/usr/bin/env python3
"""Benchmark the IR text parser (advisor_core.ir) against a plain-Python floor.

Run from the project root::

    PYTHONPATH=. python bench/bench_ir_parse.py [--size-mb 100] [--real DIR] [--keep]

What it does, in one run:

1. Generates a synthetic IR dump of at least ``--size-mb`` MB in the real MindSpore 2.10 syntax
   (header, params, several subgraphs; nodes with host type lines, backend device and kernel
   object lines, ``# Fullname with scope``, 2-12 ``# In file`` lines, multi-line constant
   tensors, recompute attributes) into a temporary directory.
2. Measures, each in a fresh child process (so peak memory is per measurement):
   * floor ``read()``: ``open(path, encoding="utf-8").read()``;
   * floor ``lines``: ``for line in open(path): pass`` (Python's own line iteration);
   * ``parse``: :func:`advisor_core.ir.parse_ir_file` (read + checks + decode + parse; node
     internals are decoded lazily);
   * ``parse+decode``: the same, then every lazy field of every node decoded
     (``IRFile.decode_all``), i.e. the cost when a rule touches everything.
3. Prints time, MB/s, nodes/s and peak memory, with ratios to both floors. Peak memory is the
   child's max RSS from ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (the whole process:
   interpreter, imports and data). Linux carries the parent's high-water mark into a forked
   child, so the parent stays small: the synthetic file is generated in a child process too,
   and a ``baseline`` child (imports only, no file) shows the fixed part.
4. Does the same for the real dumps (all ``*.ir`` and ``trace_code_graph_*`` under ``--real``
   except ``actor_set/``), parsed one after another in one child.

The target is >= 20 MB/s on one core for ``parse``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REAL = ROOT.parent / "shared" / "real-data" / "mindspore-2.10-cpu"

# --------------------------------------------------------------------------------------------
# Synthetic dump in 2.10 syntax
# --------------------------------------------------------------------------------------------

_HEADER = """# IR entry: @{entry}
# Total subgraphs: {nsub}

jit config {{
debug_level: RELEASE
exc_mode: auto
infer_boost: off
jit_level: O0
jit_syntax_level: 
}}

# Attrs:
has_shard: 0
compile_phase: train.1795247153632768512.140485548862224.0
auto_parallel_finish_pre_action: 1

# Total params: {nparams}
# Params:
{params}

Node counting information:
Total number of nodes: {nodes}
Total number of cnodes: {cnodes}

"""

_STACK = [
    "# In file /home/ma-user/.venv/lib/python3.11/site-packages/mindspore/nn/wrap/cell_wrapper.py:423~438, 4~19/    def construct(self, *inputs):/",
    "# In file /home/ma-user/.venv/lib/python3.11/site-packages/mindspore/nn/wrap/cell_wrapper.py:425, 19~37/            return self._no_sens_impl(*inputs)/",
    "# In file /home/ma-user/.venv/lib/python3.11/site-packages/mindspore/nn/wrap/cell_wrapper.py:440~453, 4~19/    def _no_sens_impl(self, *inputs):/",
    "# In file /home/ma-user/.venv/lib/python3.11/site-packages/mindspore/nn/wrap/cell_wrapper.py:442, 15~27/        loss = self.network(*inputs)/",
    "# In file /home/ma-user/work/model.py:34~39, 4~27/    def construct(self, x):/",
    "# In file /home/ma-user/work/model.py:35, 12~23/        h = self.layers[{layer}](x)/",
    "# In file /home/ma-user/work/model.py:20~21, 4~53/    def construct(self, x):/",
    "# In file /home/ma-user/work/model.py:21, 37~51/        return self.dense2(self.gelu(self.dense1(x)))/<~~This line of code can be shared by multiple nodes, and may be duplicated./",
    "# In file /home/ma-user/.venv/lib/python3.11/site-packages/mindspore/nn/layer/basic.py:803~815, 4~16/    def construct(self, x):/",
    "# In file /home/ma-user/.venv/lib/python3.11/site-packages/mindspore/nn/layer/basic.py:807, 12~39/        x = self.matmul(x, self.weight)/",
    "# In file /home/ma-user/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate/gen_ops_def.py:7463~7467/def matmul_ext(input, other):/",
    "# In file /home/ma-user/.venv/lib/python3.11/site-packages/mindspore/ops/auto_generate/gen_ops_def.py:7467, 11~38/    return matmul_ext_op(input, other)/",
]


def _layer_nodes(layer: int, base: int, scope: str, weight_para: int) -> list[str]:
    """One transformer-ish layer: Load, MatMul, BiasAdd, Cast pair, GeLU, RealDiv(const), Mul."""
    s = f"{scope}/layers-CellList/{layer}-Block"
    ind = "      "
    stack = [ind + line.format(layer=layer) for line in _STACK]
    k = base
    out: list[str] = []

    def node(text: str, types: list[str], op_scope: str, nstack: int) -> None:
        out.append(text)
        out.extend(ind + t for t in types)
        out.append(f"{ind}# Fullname with scope: ({op_scope})")
        out.extend(stack[:nstack])

    node(f"  %{k}(equiv_{k}_CNode_{k + 600}) = Load(%para{weight_para}_layers.{layer}.dense1.weight, UMonad[U]) "
         f"cnode_attrs: {{checkpoint: Bool(1), need_cse_after_recompute: Bool(1)}} cnode_primal_attrs: {{unique_id: \"{12000 + k}\"}}",
         [f": (<Ref[Tensor[Float16]], (4096, 4096), ref_key=layers.{layer}.dense1.weight, is_parameter>, <UMonad, NoShape>) -> (<Tensor[Float16], (4096, 4096)>)"],
         f"{s}/Load-op{k}", 6)
    node(f"  %{k + 1}(equiv_{k + 1}_x) = PrimFunc_MatMul(%{k - 1 if k else 0}, %{k}, Bool(0), Bool(1)) {{instance name: matmul}} "
         f"primitive_attrs: {{IsFeatureMapOutput: Bool(1), IsFeatureMapInputList: (0, 2, 3), output_names: [output], input_names: [x1, x2]}} "
         f"cnode_attrs: {{recompute_sub_graph: U64(0), recompute_id: I64({k}), recompute: Bool(1), need_cse_after_recompute: Bool(1)}} "
         f"cnode_primal_attrs: {{unique_id: \"{10000 + k}\", micro: I64(0)}}",
         [": (<Tensor[Float16], (8, 4096)>, <Tensor[Float16], (4096, 4096)>, <Bool, NoShape>, <Bool, NoShape>) -> (<Tensor[Float16], (8, 4096)>)",
          ": (<Float16xDefaultFormat[const vector]{8, 4096}>, <Float16xFRACTAL_NZ[const vector]{256, 256, 16, 16}>, <BoolxDefaultFormat[const vector]{}>, <BoolxDefaultFormat[const vector]{}>) -> (<Float16xDefaultFormat[const vector]{8, 4096}>)",
          ": (Tensor, Tensor, Scalar, Scalar) -> (Tensor)"],
         f"{s}/dense1-Dense/MatMul-op{k}", 12)
    node(f"  %{k + 2}(CNode_{k + 2}) = PrimFunc_Cast(%{k + 1}) {{instance name: cast}} primitive_attrs: {{output_names: (output), "
         f"is_backend_cast: Bool(1), IsFeatureMapOutput: Bool(1), IsFeatureMapInputList: (0), input_names: (x, dst_type), dst_type: F32}} "
         f"cnode_attrs: {{checkpoint: Bool(1), is_dynamic_len: Bool(0)}}",
         [": (<Tensor[Float16], (8, 4096)>) -> (<Tensor[Float32], (8, 4096)>)",
          ": (<Float16xDefaultFormat[const vector]{8, 4096}>) -> (<Float32xDefaultFormat[const vector]{8, 4096}>)",
          ": (Tensor) -> (Tensor)"],
         f"{s}/dense1-Dense/Cast-op{k}", 4)
    node(f"  %{k + 3}(equiv_{k + 3}_CNode_{k + 700}) = PrimFunc_GeLU(%{k + 2}) {{instance name: gelu}} "
         f"cnode_attrs: {{recompute_sub_graph: U64(0), recompute_id: I64({k + 3}), recompute: Bool(1), need_cse_after_recompute: Bool(1)}} "
         f"cnode_primal_attrs: {{unique_id: \"{10476 + k}\"}}",
         [": (<Tensor[Float32], (8, 4096)>) -> (<Tensor[Float32], (8, 4096)>)"],
         f"recompute_{s}/GeLU-op{k}", 10)
    out.append(f"  %{k + 4}(CNode_{k + 710}) = PrimFunc_RealDiv(Tensor(shape=[4, 1], dtype=Float32, value=")
    out.extend(["[[ 1.00000000e+00]", " [ 1.00000000e+00]", " [ 1.00000000e+00]"])
    out.append(f" [ 1.00000000e+00]]), Tensor(shape=[], dtype=Float32, value=4)) cnode_attrs: {{checkpoint: Bool(1)}} "
               f"cnode_primal_attrs: {{forward_node_name: \"ReduceMean_{9981 + k}\", forward_unique_id: \"{9981 + k}\"}}")
    out.append(f"{ind}: (<Tensor[Float32], (4, 1), value=...>, <Tensor[Float32], (), value=...>) -> (<Tensor[Float32], (4, 1)>)")
    out.append(f"{ind}# Fullname with scope: (Gradients/{s}/Grad_ReduceMean/RealDiv-op{k})")
    out.append(f"{ind}# Corresponding forward node candidate:")
    out.extend(stack[:8])
    node(f"  %{k + 5}(CNode_{k + 5}) = PrimFunc_Mul(%{k + 3}, %{k + 4}) {{instance name: mul}} primitive_attrs: {{recompute: Bool(1)}} "
         f"cnode_attrs: {{recompute: Bool(1)}} cnode_primal_attrs: {{unique_id: \"{10076 + k}\"}}",
         [": (<Tensor[Float32], (8, 4096)>, <Tensor[Float32], (4, 1)>) -> (<Tensor[Float32], (8, 4096)>)"],
         f"{s}/Mul-op{k}", 12)
    return out


NODES_PER_LAYER = 6


def generate(path: Path, size_mb: float) -> dict[str, int]:
    """Write a synthetic dump of at least ``size_mb`` MB; returns counts."""
    target = int(size_mb * 1024 * 1024)
    layers_per_graph = 400
    body_lines: list[str] = []
    nsub = 0
    nodes = 0
    graph_names: list[str] = []
    size = 0
    nparams = 64
    chunks: list[str] = []
    while size < target:
        gname = f"{nsub + 20}_{nsub}_mindspore_nn_layer_Block_construct_{1000 + nsub}"
        graph_names.append(gname)
        lines = [
            "subgraph attr:",
            "undeterminate: 0",
            f"subgraph instance: {gname} : 0x55abf7e5a3f0",
            f"# Parameters: 1, (<Tensor[Float16], (8, 4096)>)",
            "# In file /home/ma-user/work/model.py:20~21, 4~53/    def construct(self, x):/",
            f"subgraph @{gname}(%para{nparams + nsub + 1}_x) {{",
        ]
        for layer in range(layers_per_graph):
            lines.extend(_layer_nodes(layer % 32, layer * NODES_PER_LAYER, "Default/network-WithLossCell/_backbone-Net",
                                      1 + layer % nparams))
        last = layers_per_graph * NODES_PER_LAYER - 1
        lines.append(f"  Return(%{last}) cnode_attrs: {{checkpoint: Bool(1)}}")
        lines.append("      : (<Tensor[Float32], (8, 4096)>)")
        lines.append("      # Fullname with scope: (Default/Return-op0)")
        lines.append("}")
        lines.append("# Order:")
        lines.append(f"#   1: @{gname}:CNode_74{{[0]: ValueNode<Primitive> Return, [1]: CNode_73}}")
        lines.append("")
        lines.append("")
        chunk = "\n".join(lines) + "\n"
        chunks.append(chunk)
        size += len(chunk.encode("utf-8"))
        nsub += 1
        nodes += layers_per_graph * NODES_PER_LAYER
    params = "\n".join(
        f"%para{i}_layers.{i - 1}.dense1.weight: <Ref[Tensor[Float16]], (4096, 4096), ref_key=layers.{i - 1}.dense1.weight, "
        "is_parameter>  :  has_default"
        for i in range(1, nparams + 1)
    )
    header = _HEADER.format(entry=graph_names[-1], nsub=nsub, nparams=nparams, params=params,
                            nodes=nodes * 3, cnodes=nodes + nsub)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(header)
        for chunk in chunks:
            fh.write(chunk)
    return {"bytes": path.stat().st_size, "subgraphs": nsub, "cnodes": nodes + nsub}


# --------------------------------------------------------------------------------------------
# Measurements (each in a fresh child process)
# --------------------------------------------------------------------------------------------

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, paths = sys.argv[1], [Path(p) for p in sys.argv[2:]]
if mode in ("parse", "decode", "baseline"):
    from advisor_core.diagnostics import DiagnosticSink
    from advisor_core.ir.parser import parse_ir_file
nodes = 0
unparsed = 0
t0 = time.perf_counter()
if mode == "baseline":
    pass
elif mode == "read":
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            fh.read()
elif mode == "lines":
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            for _line in fh:
                pass
else:
    for p in paths:
        ir = parse_ir_file(p, DiagnosticSink())
        nodes += ir.cnode_count
        unparsed += len(ir.unparsed)
        if mode == "decode":
            ir.decode_all()
        del ir
elapsed = time.perf_counter() - t0
print(json.dumps({"seconds": elapsed, "nodes": nodes, "unparsed": unparsed,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def measure(mode: str, paths: list[Path]) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, *map(str, paths)],
        check=True, capture_output=True, text=True, env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


_MODES = (("baseline", "baseline"), ("read", "read()"), ("lines", "lines"), ("parse", "parse"),
          ("decode", "parse+decode"))


def report(title: str, paths: list[Path], repeat: int) -> None:
    total = sum(p.stat().st_size for p in paths)
    mb = total / (1024 * 1024)
    print(f"\n== {title}: {len(paths)} file(s), {mb:.1f} MB")
    print(f"{'measurement':<14}{'seconds':>9}{'MB/s':>9}{'nodes/s':>11}{'x read()':>10}{'x lines':>9}"
          f"{'max RSS MB':>12}{'x read()':>10}")
    rows: dict[str, dict[str, float]] = {}
    for mode, label in _MODES:
        best: dict[str, float] | None = None
        for _ in range(repeat):
            r = measure(mode, paths)
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        assert best is not None
        rows[label] = best
    read, lines = rows["read()"], rows["lines"]
    nodes = rows["parse"]["nodes"]
    for label, r in rows.items():
        rss = r["maxrss_kb"] / 1024
        if label == "baseline":
            print(f"{label:<14}{'-':>9}{'-':>9}{'-':>11}{'-':>10}{'-':>9}{rss:>12.0f}{'-':>10}")
            continue
        secs = r["seconds"]
        nps = f"{nodes / secs:,.0f}" if label in ("parse", "parse+decode") else "-"
        print(f"{label:<14}{secs:>9.3f}{mb / secs:>9.1f}{nps:>11}{secs / read['seconds']:>10.1f}"
              f"{secs / lines['seconds']:>9.1f}{rss:>12.0f}{r['maxrss_kb'] / read['maxrss_kb']:>10.1f}")
    print(f"cnodes parsed: {int(nodes)}, unparsed lines: {int(rows['parse']['unparsed'])}")


def real_files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or "actor_set" in p.parts:
            continue
        if p.suffix == ".ir" or p.name.startswith("trace_code_graph_"):
            out.append(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=100.0, help="synthetic file size (default 100)")
    ap.add_argument("--real", type=Path, default=DEFAULT_REAL, help="folder of real dumps")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement (best is shown)")
    ap.add_argument("--keep", action="store_true", help="keep the generated file and print its path")
    ap.add_argument("--generate-to", type=Path, help=argparse.SUPPRESS)  # internal: child that writes the file
    args = ap.parse_args()
    if args.generate_to is not None:
        print(json.dumps(generate(args.generate_to, args.size_mb)))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench_ir_"))
    try:
        path = tmp / "21_validate_9999.ir"
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, "--generate-to", str(path), "--size-mb", str(args.size_mb)],
                             check=True, capture_output=True, text=True)
        info = json.loads(out.stdout)
        print(f"generated {path} ({info['bytes'] / 1048576:.1f} MB, {info['subgraphs']} subgraphs, "
              f"{info['cnodes']} cnodes) in {time.perf_counter() - t0:.1f} s")
        report("synthetic 2.10 dump", [path], args.repeat)
        if args.real.is_dir():
            files = real_files(args.real)
            if files:
                report(f"real dumps under {args.real}", files, max(args.repeat, 3))
        else:
            print(f"\n(real dumps not found at {args.real}; skipped)")
        print("\nparse = parse_ir_file (node internals decoded lazily); parse+decode = then every lazy field"
              " of every node decoded.\nmax RSS = getrusage(RUSAGE_SELF).ru_maxrss of the measuring child"
              " (interpreter and imports included; see 'baseline').")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
