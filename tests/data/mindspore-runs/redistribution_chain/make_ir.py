"""Writes ir/step_parallel_end_0042.ir: two Llama feed-forward blocks after MindSpore's parallel pass, mp = 2,
with the Mul's shard() strategy disagreeing with the column-parallel w1/w3 MatMuls (see README.md).

Every node line follows a real excerpt of MindSpore's parallel IR (``mindspore-ir-format.md`` E3-E5,
``doc_excerpts/doc_sapp_validate_2023.ir``); what each template was taken from is noted beside it.
The redistribution is written the way ``InsertRedistribution`` builds it: AllGather, Split, one
TupleGetItem per piece and a MakeTuple (``InsertMakeTuple``, same scope as the Split, no instance
name) feeding the Concat; the Mul's output is sliced back by a StridedSlice.
"""
from pathlib import Path

B, S, H, F, MP = 1, 4096, 4096, 11008, 2
FS = F // MP
LAYER = "Default/network-LlamaForCausalLM/model-LlamaModel/layers-CellList/{l}-LLamaDecodeLayer/feed_forward-LlamaFeedForward"
SRC = "/home/ma-user/work/mindformers/mindformers/models/llama/llama_layer.py"
T = "<Tensor[Float16], ({})>"


def shape(*d):
    return T.format(", ".join(str(x) for x in d))


lines = []
params = []
for l in range(2):
    for w, sh in (("w1", (FS, H)), ("w3", (FS, H)), ("w2", (H, FS))):
        params.append((f"model.layers.{l}.feed_forward.{w}.weight", sh))
out = ["# IR entry: @1_train_step.1797", "# Total subgraphs: 1", "", "# Attrs:", "has_shard: 1",
       "auto_parallel_finish_pre_action: 1", "", f"# Total params: {len(params) + 1}", "# Params:",
       f"%para1_x: {shape(B, S, H)} : [{B}, {S}, {H}]"]
for i, (name, sh) in enumerate(params, 2):
    out.append(f"%para{i}_{name}: <Ref[Tensor[Float16]], ({sh[0]}, {sh[1]}), ref_key={name}, is_parameter>  :  has_default")
pid = {name: f"%para{i}_{name}" for i, (name, _) in enumerate(params, 2)}
out += ["", "subgraph attr:", "has_shard: 1", "subgraph instance: 1_train_step.1797 : 0x55abf7e50001",
        "subgraph @1_train_step.1797() {"]
k = 0
uid = 37896


def node(text, types, scope, src=None):
    global k
    out.append(f"  %{k}{text}")
    out.append(f"      : {types}")
    out.append(f"      # Fullname with scope: ({scope})")
    if src:
        out.append(f"      # In file {SRC}:{src}")
    k += 1
    return f"%{k - 1}"


x = "%para1_x"
h = 5226697808808137312
for l in range(2):
    sc = LAYER.format(l=l)
    outs = {}
    for w in ("w1", "w3"):
        # E5: MatMul with its in_strategy, column parallel (weight split on its output dim)
        ld = node(f"(equiv[CNode]{2161 + k}) = Load({pid[f'model.layers.{l}.feed_forward.{w}.weight']}, U)",
                  f"(<Ref[Tensor[Float16]], ({FS}, {H})>, <UMonad, NoShape>) -> ({shape(FS, H)})", f"{sc}/{w}-Linear/Load-op0")
        rs = node(f"(equiv[CNode]{2200 + k}) = PrimFunc_Reshape({x}, (I64({B * S}), I64({H}))) {{instance name: reshape}} "
                  f"cnode_attrs: {{checkpoint: Bool(1)}} cnode_primal_attrs: {{unique_id: \"{uid + k}\", micro: I64(0)}}",
                  f"({shape(B, S, H)}, <Tuple[Int64*2], TupleShape(NoShape, NoShape)>) -> ({shape(B * S, H)})",
                  f"{sc}/{w}-Linear/Reshape-op0")
        mm = node(f"(equiv_16877_x) = PrimFunc_MatMul({rs}, {ld}, Bool(0), Bool(1)) {{instance name: matmul}} "
                  f"primitive_attrs: {{in_strategy: ((1, 1), ({MP}, 1))}} cnode_attrs: {{checkpoint: Bool(1)}} "
                  f"cnode_primal_attrs: {{unique_id: \"{uid + k}\", origin_output_shape: ({B * S}, {F}), micro: I64(0), "
                  f"origin_input_shapes: (({B * S}, {H}), ({F}, {H}))}} {{in_strategy: ((1, 1), ({MP}, 1))}}",
                  f"({shape(B * S, H)}, {shape(FS, H)}, <Bool, NoShape>, <Bool, NoShape>) -> ({shape(B * S, FS)})",
                  f"{sc}/{w}-Linear/MatMul-op0", "262, 12~31/        x = self.matmul(x, weight)/")
        outs[w] = node(f"(equiv_16876_CNode_{30913 + k}) = PrimFunc_Reshape({mm}, (I64({B}), I64({S}), I64({FS}))) "
                       f"{{instance name: reshape}} cnode_attrs: {{checkpoint: Bool(1)}} "
                       f"cnode_primal_attrs: {{unique_id: \"{uid + k}\", micro: I64(0)}}",
                       f"({shape(B * S, FS)}, <Tuple[Int64*3], TupleShape(NoShape, NoShape, NoShape)>) -> ({shape(B, S, FS)})",
                       f"{sc}/{w}-Linear/Reshape-op1")
    gathered = []
    for w in ("w1", "w3"):
        # E3/E4: communication node with an instance name and group attrs; redistribution_op_<hash><Op>
        ag = node(f"(equiv[CNode]{493 + k}) = AllGather({outs[w]}) {{instance name: redistribution_op_{h + 11 * k}AllGather}} "
                  f"primitive_attrs: {{group: \"2-5004544844489628105\", rank_size: I64({MP}), group_ranks: \"0-1\"}}",
                  f"({shape(B, S, FS)}) -> ({shape(MP * B, S, FS)})", f"{sc}/AllGather-op{len(gathered)}")
        sp = node(f"(equiv[CNode]{493 + k}) = PrimFunc_Split({ag}, I64(0), I64({MP})) {{instance name: redistribution_op_{h + 11 * k}Split}} "
                  f"primitive_attrs: {{axis: I64(0), output_num: I64({MP})}}",
                  f"({shape(MP * B, S, FS)}, <Int64, NoShape>, <Int64, NoShape>) -> "
                  f"(<Tuple[Tensor[Float16]*{MP}], TupleShape(({B}, {S}, {FS}), ({B}, {S}, {FS}))>)",
                  f"{sc}/Split-op{len(gathered)}")
        tup = f"<Tuple[Tensor[Float16]*{MP}], TupleShape(({B}, {S}, {FS}), ({B}, {S}, {FS}))>"
        items = [node(f"(CNode_{700 + k}) = TupleGetItem({sp}, I64({i}))", f"({tup}, <Int64, NoShape>) -> ({shape(B, S, FS)})",
                      f"{sc}/TupleGetItem-op{2 * len(gathered) + i}") for i in range(MP)]
        mt = node(f"(CNode_{700 + k}) = MakeTuple({', '.join(items)})", f"({shape(B, S, FS)}, {shape(B, S, FS)}) -> ({tup})",
                  f"{sc}/MakeTuple-op{len(gathered)}")
        cc = node(f"(equiv[CNode]{493 + k}) = PrimFunc_Concat({mt}, I64(2)) {{instance name: redistribution_op_{h + 11 * k}Concat}} "
                  f"primitive_attrs: {{axis: I64(2)}}", f"({tup}, <Int64, NoShape>) -> ({shape(B, S, F)})",
                  f"{sc}/Concat-op{len(gathered)}")
        gathered.append(cc)
    # E5 style: the op with a disagreeing in_strategy (batch split over mp instead of the last axis)
    mul = node(f"(equiv_7_hidden) = PrimFunc_Mul({gathered[1]}, {gathered[0]}) {{instance name: mul}} "
               f"primitive_attrs: {{in_strategy: (({MP}, 1, 1), ({MP}, 1, 1))}} cnode_attrs: {{checkpoint: Bool(1)}} "
               f"cnode_primal_attrs: {{unique_id: \"{uid + k}\", micro: I64(0)}} {{in_strategy: (({MP}, 1, 1), ({MP}, 1, 1))}}",
               f"({shape(B, S, F)}, {shape(B, S, F)}) -> ({shape(B, S, F)})", f"{sc}/Mul-op0",
               "178, 17~44/        hidden = self.mul(hidden, gate)/")
    # E4: StridedSlice redistribution slicing the result back to this rank's piece
    sl = node(f"(equiv[CNode]{492 + k}) = PrimFunc_StridedSlice({mul}, (I64(0), I64(0), I64(0)), (I64({B}), I64({S}), I64({FS})), "
              f"(I64(1), I64(1), I64(1))) {{instance name: redistribution_op_{h + 11 * k}StridedSlice}} "
              f"primitive_attrs: {{new_axis_mask: I64(0), shrink_axis_mask: I64(0), end_mask: I64(0), begin_mask: I64(0), "
              f"ellipsis_mask: I64(0)}}",
              f"({shape(B, S, F)}, <Tuple[Int64*3]>, <Tuple[Int64*3]>, <Tuple[Int64*3]>) -> ({shape(B, S, FS)})",
              f"{sc}/StridedSlice-op0")
    ld = node(f"(equiv[CNode]{2161 + k}) = Load({pid[f'model.layers.{l}.feed_forward.w2.weight']}, U)",
              f"(<Ref[Tensor[Float16]], ({H}, {FS})>, <UMonad, NoShape>) -> ({shape(H, FS)})", f"{sc}/w2-Linear/Load-op0")
    rs = node(f"(equiv[CNode]{2200 + k}) = PrimFunc_Reshape({sl}, (I64({B * S}), I64({FS}))) {{instance name: reshape}} "
              f"cnode_attrs: {{checkpoint: Bool(1)}}",
              f"({shape(B, S, FS)}, <Tuple[Int64*2], TupleShape(NoShape, NoShape)>) -> ({shape(B * S, FS)})",
              f"{sc}/w2-Linear/Reshape-op0")
    mm = node(f"(equiv[CNode]{4 + k}) = PrimFunc_MatMul({rs}, {ld}, Bool(0), Bool(1)) {{instance name: matmul}} "
              f"primitive_attrs: {{in_strategy: ((1, {MP}), (1, {MP}))}} cnode_attrs: {{related_comm_node_id: \"{37501 + k}\"}} "
              f"cnode_primal_attrs: {{unique_id: \"{uid + k}\"}} {{in_strategy: ((1, {MP}), (1, {MP}))}}",
              f"({shape(B * S, FS)}, {shape(H, FS)}, <Bool, NoShape>, <Bool, NoShape>) -> ({shape(B * S, H)})",
              f"{sc}/w2-Linear/MatMul-op0")
    # E3: the AllReduce the row-parallel MatMul's own strategy needs (forward_op: expected)
    ar = node(f"(equiv[CNode]{2229 + k}) = AllReduce({mm}) {{instance name: forward_op_{15773666391001111732 - k}}} "
              f"primitive_attrs: {{comm_reuse: Bool(1), group: \"2-5004544844489628105\", fusion: I64(0), op: \"sum\", "
              f"rank_list: (0, 1), group_ranks: \"0-1\", index: I64(0), group_rank_ids: (0, 1), no_eliminate: Bool(1)}} "
              f"cnode_primal_attrs: {{unique_id: \"{uid + k}\", forward_comm_node_unique_id: \"{37499 + k}\"}}",
              f"({shape(B * S, H)}) -> ({shape(B * S, H)})", f"{sc}/w2-Linear/AllReduce-op0")
    x = node(f"(equiv[CNode]{2300 + k}) = PrimFunc_Reshape({ar}, (I64({B}), I64({S}), I64({H}))) {{instance name: reshape}}",
             f"({shape(B * S, H)}, <Tuple[Int64*3], TupleShape(NoShape, NoShape, NoShape)>) -> ({shape(B, S, H)})",
             f"{sc}/w2-Linear/Reshape-op1")
out += [f"  Return({x})", f"      : ({shape(B, S, H)})", "      # Fullname with scope: (Default/Return-op0)", "}"]
Path(__file__).with_name("ir").mkdir(exist_ok=True)
Path(__file__).with_name("ir").joinpath("step_parallel_end_0042.ir").write_text("\n".join(out) + "\n", encoding="utf-8")
