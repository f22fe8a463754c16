"""MindSpore 2.3–2.10 text IR dumps of a stage graph (``mindspore-ir-format.md`` §2, excerpts E2–E8, R1, R4).

Three files per rank under ``graphs/rank_<id>/`` (the counter ``SSSS`` runs across them):

* ``step_parallel_end_SSSS.ir`` (only when parallel): the forward graph after parallelisation —
  ``forward_op_*`` AllReduce, ``redistribution_op_*`` chains, ``mirror_op`` on parameters,
  ``{in_strategy: ...}`` on sharded ops;
* ``NN_validate_SSSS.ir``: the final front-end graph — forward, recompute copies
  (``duplicated: Bool(1)``) and backward (``Gradients/…``, ``forward_unique_id``), user casts with
  their ``# In file`` source, per-gradient AllReduce with its ``fusion`` group;
* ``graph_build_0_SSSS.ir``: the kernel graph — host, device (``<Float16xFRACTAL_NZ[const vector]{…}>``)
  and kernel-object type lines, ``TransData`` with ``src_format``/``dst_format``, backend casts
  (``is_backend_cast: Bool(1)``), fused gradient buckets; Reshapes are gone (no-op elimination).

A node absent from one file (a TransData in the front end) is skipped by following its first
operand, so every operand resolves inside the file it is printed in. Text is rendered once per
stage with placeholders for communication-group names, then specialised per rank.
"""

from __future__ import annotations

from advisor_core.simulate.nodes import BUILD, FRONT, PARALLEL, Arg, Node, TType
from advisor_core.simulate.stage import StageGraph
from advisor_core.simulate.workload import ir_dtype

__all__ = ["render_stage_ir", "IR_FILES"]

IR_FILES = {PARALLEL: "step_parallel_end_{:04d}.ir", FRONT: "21_validate_{:04d}.ir", BUILD: "graph_build_0_{:04d}.ir"}
COUNTERS = {PARALLEL: 9, FRONT: 76, BUILD: 128}
_ENTRY_FRONT = "{n}_1_mindformers_wrapper_wrapper_MFPipelineWithLossScaleCell_construct_{m}"


def _scalar_host(scalar: str) -> str:
    if scalar.startswith("Tuple[Int64*"):
        n = int(scalar[len("Tuple[Int64*"):-1])
        return f"<{scalar}, TupleShape({', '.join(['NoShape'] * n)})>"
    return f"<{scalar}, NoShape>"


def _host_out(n: Node) -> str:
    if n.out is None:
        return "<UMonad, NoShape>"
    if n.out_tuple > 1:
        shape = "(" + ", ".join(str(d) for d in n.out.shape) + ")"
        return f"<Tuple[Tensor[{ir_dtype(n.out.dtype)}]*{n.out_tuple}], TupleShape({', '.join([shape] * n.out_tuple)})>"
    return n.out.host()


def _device(t: TType | None, a: Arg) -> str:
    if t is not None:
        return t.device()
    s = (a.scalar or "Int64").split("[")[0]
    return f"<{s}xDefaultFormat[const vector]{{}}>"


def _block(items: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"


def _param_line(i: int, name: str, t: TType, mode: int) -> str:
    dims = ", ".join(str(d) for d in t.shape)
    if t.ref is not None:
        line = f"%para{i}_{name}: {t.host()}  :  has_default"
        if mode == BUILD:
            line += f"  :  {TType(t.shape, t.dtype).device()}  :  IsWeight: true"
        return line
    line = f"%para{i}_{name}: {t.host()} : [{dims}]"
    if mode == BUILD:
        line += f"  :  {t.device()}  :  IsWeight: false"
    return line


def render_stage_ir(g: StageGraph, mode: int, entry_id: int) -> str:
    """The text of one dump kind (``FRONT``, ``PARALLEL`` or ``BUILD``) with group placeholders."""
    nodes = [n for n in g.nodes if n.ir & mode]
    pos = {n.key: i for i, n in enumerate(nodes)}
    inputs = [p for p in g.extra_params if p[0] == "input_ids"]
    params = inputs + list(g.params) + [p for p in g.extra_params if p[0] != "input_ids"]
    if mode == PARALLEL:
        params = [p for p in params if not p[0].startswith("adam_")]
    pidx = {name: i + 1 for i, (name, _) in enumerate(params)}
    by_key = g.by_key

    def resolve(key: str | None) -> str:
        seen = 0
        while key is not None and key not in pos:
            n = by_key.get(key)
            if n is None or seen > 64:
                return "None"
            first = next((a for a in n.args if a.ref or a.param), None)
            if first is None:
                return "None"
            if first.param:
                return f"%para{pidx.get(first.param, 0)}_{first.param}"
            key = first.ref
            seen += 1
        return f"%{pos[key]}" if key is not None else "None"

    out: list[str] = []
    if mode == BUILD:
        entry = "kernel_graph0"
        out += [f"# IR entry: @{entry}", "# Total subgraphs: 1", "", "# Attrs:", "enable_zero_copy_in_graph: 1", ""]
    else:
        entry = _ENTRY_FRONT.format(n=400 + entry_id, m=900 + entry_id)
        out += [f"# IR entry: @{entry}", "# Total subgraphs: 1", "", "jit config {", "debug_level: RELEASE", "exc_mode: auto",
                "infer_boost: off", "jit_level: O1", "jit_syntax_level: ", "}", "", "# Attrs:", "has_shard: 1",
                "auto_parallel_finish_pre_action: 1", f"compile_phase: train.{1795247153632768512 + entry_id}.0", ""]
    out += [f"# Total params: {len(params)}", "# Params:"]
    out += [_param_line(i + 1, name, t, mode) for i, (name, t) in enumerate(params)]
    out += ["", "Node counting information:", f"Total number of nodes: {len(nodes) + 1 + len(params)}",
            f"Total number of cnodes: {len(nodes) + 1}", ""]
    out += ["subgraph attr:"]
    if mode == BUILD:
        out += ["enable_zero_copy_in_graph: 1", f"subgraph instance: {entry} : 0x55abf86f{entry_id:04x}", ""]
    else:
        out += ["has_shard: 1", f"subgraph instance: {entry} : 0x55abf7e5{entry_id:04x}",
                "# In file /home/ma-user/work/mindformers/mindformers/wrapper/wrapper.py:301~330, 4~40/    def construct(self, *inputs):/"]
    out.append(f"subgraph @{entry}() {{")
    for i, n in enumerate(nodes):
        operands = []
        for a in n.args:
            if a.ref is not None:
                operands.append(resolve(a.ref))
            elif a.param is not None:
                operands.append(f"%para{pidx.get(a.param, 0)}_{a.param}")
            else:
                operands.append(a.text or "None")
        head = f"  %{i}(CNode_{1000 + i}) = {n.op_text}({', '.join(operands)})"
        if n.instance:
            head += f" {{instance name: {n.instance}}}"
        prim = [a for a in n.prim_attrs if not (mode == BUILD and a[0] == "in_strategy")]
        if mode == BUILD:
            prim = n.build_attrs + prim
        if prim:
            head += " primitive_attrs: " + _block(prim)
        cnode = list(n.cnode_attrs)
        if mode == BUILD:
            cnode.append(("is_dynamic_len", "Bool(0)"))
        if cnode:
            head += " cnode_attrs: " + _block(cnode)
        if n.primal_attrs:
            head += " cnode_primal_attrs: " + _block(n.primal_attrs)
        if n.strategy and mode != BUILD:
            head += f" {{in_strategy: {n.strategy}}}"
        out.append(head)
        host_in = [_host_out(by_key[a.ref]) if a.ref in by_key and by_key[a.ref].out_tuple > 1  # a tuple operand (Split, MakeTuple)
                   else t.host() if t is not None else _scalar_host(a.scalar or "Int64") for t, a in zip(n.in_types, n.args)]
        out.append(f"      : ({', '.join(host_in)}) -> ({_host_out(n)})")
        if mode == BUILD and n.kernel is not None:
            dev_in = [_device(t, a) for t, a in zip(n.in_types, n.args)]
            dev_out = ", ".join([n.out.device()] * n.out_tuple) if n.out is not None else ""
            out.append(f"      : ({', '.join(dev_in)}) -> ({dev_out})")
            kin = ", ".join("Tensor" if t is not None else "Scalar" for t in n.in_types)
            out.append(f"      : ({kin}) -> ({'Tuple' if n.out_tuple > 1 else 'Tensor'})")
        out.append(f"      # Fullname with scope: ({n.full_name})")
        for s in n.sources:
            out.append(f"      # In file {s}")
    ret = resolve(g.loss_key) if g.loss_key else (f"%{len(nodes) - 1}" if nodes else "None")
    out.append(f"  Return({ret}) cnode_attrs: {{checkpoint: Bool(1)}}")
    out.append("      : (<Tensor[Float32], ()>)")
    out.append("      # Fullname with scope: (Default/Return-op0)")
    out.append("}")
    return "\n".join(out) + "\n"
