"""The parsed form of one MindSpore IR text dump.

``IRFile`` → ``IRSubgraph`` (file order) → ``IRNode``; file-level and subgraph parameters are
``IRParam``. Value types (:class:`TensorType`, :class:`DeviceType`, :class:`SourceLoc`,
:class:`OperandRef`) are re-exported from :mod:`advisor_core.ir.values`.

Speed: the parser only classifies lines and stores each node's raw text. Everything on
:class:`IRNode` that needs decoding (operator, operands, attribute dicts, types, scope, sources)
is decoded on first access and cached on the node; the raw text stays available
(``body``, ``type_lines``, ``comment_lines``). Decoding never raises: what does not fit the
grammar is kept raw and named in :attr:`IRNode.problems`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from advisor_core.ir.attrs import decode_block, decode_value
from advisor_core.ir.comments import decode_comments
from advisor_core.ir.gcpause import gc_paused
from advisor_core.ir.nodehead import classify_operand, normalise_op, split_head
from advisor_core.ir.typelines import decode_type_lines
from advisor_core.ir.values import DeviceType, OperandRef, SourceLoc, TensorType

__all__ = [
    "DeviceType",
    "IRFile",
    "IRNode",
    "IRParam",
    "IRSubgraph",
    "OperandRef",
    "SourceLoc",
    "TensorType",
]

_KERNEL_SEGMENT = re.compile(r"^[\w.]+-op\d+$")


# MindSpore 2.x TypeId numbers a Cast's dst_type operand carries (verified on 2.10: cast_roundtrip/dtype_ids.py).
CAST_TYPE_IDS = {30: "Bool", 32: "Int8", 33: "Int16", 34: "Int32", 35: "Int64", 37: "UInt8", 38: "UInt16",
                 39: "UInt32", 40: "UInt64", 42: "Float16", 43: "Float32", 44: "Float64", 45: "BFloat16"}
_SHORT_TYPE_NAMES = {"F16": "Float16", "F32": "Float32", "F64": "Float64", "BF16": "BFloat16", "I8": "Int8",
                     "I16": "Int16", "I32": "Int32", "I64": "Int64", "U8": "UInt8", "Bool": "Bool"}


def cast_destination(node: "IRNode") -> str | None:
    """The dtype a Cast converts to, from its ``dst_type`` attribute or its type-id operand (``I64(42)``)."""
    dst = node.primitive_attrs.get("dst_type")
    if dst is not None:
        name = str(dst)
        return _SHORT_TYPE_NAMES.get(name, name)
    if len(node.operand_refs) > 1:
        try:
            value = node.operand_value(1)
        except (IndexError, ValueError):
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return CAST_TYPE_IDS.get(value)
    return None


class IRNode:
    """One node (``%k(name) = op(...)``) or the ``Return(...)`` of a subgraph.

    Identity: ``(graph, index)``; ``index`` is ``None`` for Return. ``graph`` is the key of the
    subgraph in :attr:`IRFile.graphs` (the subgraph name; a repeated name gets ``#2``, ``#3``...).
    ``line`` is the 1-based line of the node in the file, ``end_line`` the last physical line of
    its logical line (> ``line`` for multi-line constants). Raw text: ``body`` (after ``= ``; the
    whole ``Return(..)`` for a Return, physical lines joined with ``\n``), ``type_lines`` and
    ``comment_lines`` (physical lines as written, indentation included).

    Decoded on first access: ``raw_op``, ``op`` (``PrimFunc_``/``S_Prim_``/``S-Prim-`` stripped;
    ``call`` for calls; ``Return``), ``callee``, ``operands`` (raw strings in order),
    ``operand_refs``, ``instance_name``, ``primitive_attrs``, ``cnode_attrs``,
    ``cnode_primal_attrs`` (dicts of decoded values, see :mod:`advisor_core.ir.attrs`),
    ``strategy`` (the trailing ``{in_strategy: ..}`` block as a dict), ``in_types``,
    ``out_types``, ``device_in``/``device_out`` (``None`` without a device line), ``symbolic``,
    ``kernel_object_types`` (raw, ``None`` when absent), ``scope``, ``sources`` (all
    ``# In file`` lines in order, including those under "Corresponding ... candidate:"),
    ``comments`` (the other ``#`` lines, stripped).
    """

    __slots__ = (
        "graph", "index", "debug_name", "body", "line", "end_line", "type_lines", "comment_lines",
        "eval_marker", "_head", "_blocks", "_types", "_comments", "_refs",
    )

    def __init__(self, graph: str, index: int | None, debug_name: str | None, body: str, line: int) -> None:
        self.graph = graph
        self.index = index
        self.debug_name = debug_name
        self.body = body
        self.line = line
        self.end_line = line
        self.type_lines: list[str] = []
        self.comment_lines: list[str] = []
        # analyze_fail.ir: depth N of a '#------------------------> N' marker just before the node.
        self.eval_marker: int | None = None
        self._head: Any = None
        self._blocks: dict[str, Any] | None = None
        self._types: Any = None
        self._comments: Any = None
        self._refs: list[OperandRef] | None = None

    def __repr__(self) -> str:
        idx = "Return" if self.index is None else f"%{self.index}"
        return f"IRNode({self.graph!r}, {idx}, op={self.op!r}, line={self.line})"

    # -- head -------------------------------------------------------------------------------
    def _h(self) -> Any:
        head = self._head
        if head is None:
            head = self._head = split_head(self.body)
        return head

    @property
    def raw_op(self) -> str:
        """The operator as written (``PrimFunc_Cast``, ``call @g``, ``%5[@FuncUnion(..)]``)."""
        return self._h().raw_op

    @property
    def op(self) -> str:
        """Normalised operator (see :func:`advisor_core.ir.nodehead.normalise_op`)."""
        if self.index is None:
            return "Return"
        return normalise_op(self._h().raw_op)[0]

    @property
    def callee(self) -> str | None:
        """Graph called directly by ``call @g`` / ``@g(..)``, else ``None``."""
        return normalise_op(self._h().raw_op)[1]

    @property
    def operands(self) -> list[str]:
        """Operands as written, in order."""
        return self._h().operands

    @property
    def operand_refs(self) -> list[OperandRef]:
        """What each operand refers to, in operand order (see :class:`OperandRef`)."""
        refs = self._refs
        if refs is None:
            refs = self._refs = [classify_operand(o, self.graph) for o in self._h().operands]
        return refs

    @property
    def instance_name(self) -> str | None:
        """``{instance name: X}`` → ``X``."""
        return self._h().instance_name

    @property
    def raw_attr_blocks(self) -> dict[str, str]:
        """Attribute blocks as raw text, keyed ``primitive_attrs``/``cnode_attrs``/... ."""
        return self._h().blocks

    def _block(self, name: str) -> dict[str, Any]:
        cache = self._blocks
        if cache is None:
            cache = self._blocks = {}
        got = cache.get(name)
        if got is None:
            raw = self._h().blocks.get(name)
            got = cache[name] = decode_block(raw) if raw is not None else {}
        return got

    @property
    def primitive_attrs(self) -> dict[str, Any]:
        """Decoded ``primitive_attrs: {..}`` (empty dict when absent)."""
        return self._block("primitive_attrs")

    @property
    def cnode_attrs(self) -> dict[str, Any]:
        """Decoded ``cnode_attrs: {..}`` (empty dict when absent)."""
        return self._block("cnode_attrs")

    @property
    def cnode_primal_attrs(self) -> dict[str, Any]:
        """Decoded ``cnode_primal_attrs: {..}`` (empty dict when absent)."""
        return self._block("cnode_primal_attrs")

    @property
    def strategy(self) -> dict[str, Any] | None:
        """Trailing ``{in_strategy: ((4, 2), (1, 2))}`` block decoded, ``None`` when absent."""
        raw = self._h().strategy
        return decode_block(raw) if raw is not None else None

    @property
    def problems(self) -> list[str]:
        """What in the node text did not fit the grammar (empty for well-formed nodes)."""
        return self._h().problems

    def operand_value(self, i: int) -> Any:
        """Operand ``i`` decoded as a value (``I64(43)`` → 43); references stay strings."""
        return decode_value(self._h().operands[i])

    # -- types ------------------------------------------------------------------------------
    def _t(self) -> Any:
        types = self._types
        if types is None:
            bodies = [t.lstrip(" ")[2:] for t in self.type_lines]
            types = self._types = decode_type_lines(bodies)
        return types

    @property
    def in_types(self) -> list[TensorType]:
        """Host (abstract) input types; ``[]`` without a type line."""
        return self._t().in_types

    @property
    def out_types(self) -> list[TensorType]:
        """Host output types (one element; a tuple type for multi-output ops); ``[]`` for Return."""
        return self._t().out_types

    @property
    def device_in(self) -> list[DeviceType] | None:
        """Device input types (backend kernel graphs only), else ``None``."""
        return self._t().device_in

    @property
    def device_out(self) -> list[DeviceType] | None:
        """Device output types (backend kernel graphs only), else ``None``."""
        return self._t().device_out

    @property
    def symbolic(self) -> str | None:
        """The symbolic-shape type line (``(S:[s1<[1,inf]>, 30], ..) -> (..)``) raw, else ``None``."""
        return self._t().symbolic

    @property
    def kernel_object_types(self) -> str | None:
        """The kernel object type line (``(Tensor, Scalar) -> (Tensor)``) raw, else ``None``."""
        return self._t().kernel_object_types

    # -- comments ---------------------------------------------------------------------------
    def _c(self) -> Any:
        com = self._comments
        if com is None:
            com = self._comments = decode_comments(self.comment_lines)
        return com

    @property
    def scope(self) -> str | None:
        """Full name with scope (``Default/network-WithLossCell/_backbone-Dense/MatMul-op0``).

        From ``# Fullname with scope:``/``# Scope:``/``#scope:``, the 1.x third type line or the
        ``: full_name_with_scope: (..)`` form; ``None`` when the dump has none (format 0).
        """
        com = self._c()
        if com.scope is not None:
            return com.scope
        return self._t().scope

    @property
    def sources(self) -> list[SourceLoc]:
        """All ``# In file`` lines, outermost call first."""
        return self._c().sources

    @property
    def comments(self) -> list[str]:
        """Other ``#`` lines (e.g. ``# Corresponding code candidate:``), stripped."""
        return self._c().comments

    # -- convenience ------------------------------------------------------------------------
    @property
    def unique_id(self) -> str | None:
        """``cnode_primal_attrs.unique_id`` (stable across stages), else ``None``."""
        v = self.cnode_primal_attrs.get("unique_id")
        return str(v) if v is not None else None

    @property
    def forward_unique_id(self) -> str | None:
        """``cnode_primal_attrs.forward_unique_id`` of a backward node, else ``None``."""
        v = self.cnode_primal_attrs.get("forward_unique_id")
        return str(v) if v is not None else None

    @property
    def is_recompute_configured(self) -> bool:
        """``recompute: Bool(1)`` in primitive or cnode attrs (configured, maybe not done)."""
        return self.primitive_attrs.get("recompute") is True or self.cnode_attrs.get("recompute") is True

    @property
    def is_duplicated(self) -> bool:
        """``duplicated: Bool(1)``: this node is a recomputed copy."""
        return self.cnode_attrs.get("duplicated") is True

    @property
    def recompute_key(self) -> tuple[int, int] | None:
        """``(recompute_sub_graph, recompute_id)`` pairing an original with its copy, else ``None``."""
        attrs = self.cnode_attrs
        g, k = attrs.get("recompute_sub_graph"), attrs.get("recompute_id")
        if isinstance(g, int) and isinstance(k, int) and not isinstance(g, bool) and not isinstance(k, bool):
            return (g, k)
        return None

    @property
    def is_backend_cast(self) -> bool:
        """``is_backend_cast: Bool(1)``: a cast the backend inserted (not the user's)."""
        return self.primitive_attrs.get("is_backend_cast") is True

    @property
    def kernel_full_name(self) -> str | None:
        """The scope when it ends in a kernel segment ``<Op>-op<k>`` (profiler ``full_op_name``).

        ``None`` when there is no scope or its last segment is not of that form (e.g. ``(0)``).
        """
        scope = self.scope
        if not scope:
            return None
        return scope if _KERNEL_SEGMENT.match(scope.rpartition("/")[2]) else None

    @property
    def kernel_op_name(self) -> str | None:
        """Last scope segment when it is ``<Op>-op<k>`` (profiler ``op_name``), else ``None``."""
        full = self.kernel_full_name
        return full.rpartition("/")[2] if full else None

    @property
    def layer_scope(self) -> str | None:
        """The scope without its last ``/<Op>-op<k>`` segment (``Default/.../fc1-Dense``).

        A scope without such a segment is returned as is; a bare ``Cast-op0`` gives ``""``.
        """
        scope = self.scope
        if scope is None:
            return None
        head, _, last = scope.rpartition("/")
        return head if _KERNEL_SEGMENT.match(last) else scope

    def decode_all(self) -> None:
        """Decode every lazy field now (benchmarks, or to surface :attr:`problems` early)."""
        self._h()
        self.operand_refs
        for name in self._h().blocks:
            self._block(name)
        self._t()
        self._c()


class IRParam:
    """A parameter: file-level (``# Params:``) or of a subgraph (``subgraph @g(%para3_x, ..)``).

    ``ref`` is the token without ``%`` (``para3_block0.dense1.weight``; unique in a file),
    ``index`` the number after ``para``, ``name`` the rest (may be ``""``: ``%para1_:``).
    ``is_weight``: ``IsWeight: true`` when the backend says so, else ``has_default``.
    ``symbolic_shape`` is the ``: [s1<[1,inf]>, 30]`` suffix of front-end params. ``graph`` is
    the subgraph for subgraph parameters, ``None`` for file-level ones.
    """

    __slots__ = ("index", "name", "ref", "type", "raw", "is_weight", "has_default", "device",
                 "symbolic_shape", "line", "graph")

    def __init__(
        self,
        index: int,
        name: str,
        type: TensorType | None,
        raw: str,
        *,
        is_weight: bool = False,
        has_default: bool = False,
        device: DeviceType | None = None,
        symbolic_shape: str | None = None,
        line: int = 0,
        graph: str | None = None,
    ) -> None:
        self.index = index
        self.name = name
        self.ref = f"para{index}_{name}"
        self.type = type
        self.raw = raw
        self.is_weight = is_weight
        self.has_default = has_default
        self.device = device
        self.symbolic_shape = symbolic_shape
        self.line = line
        self.graph = graph

    def __repr__(self) -> str:
        return f"IRParam(%{self.ref}, line={self.line})"


class IRSubgraph:
    """One ``subgraph @name[ parent: [subgraph @p]](params) { ... }``.

    ``key`` is the name used in :attr:`IRFile.graphs` and :attr:`IRNode.graph` (``name`` unless
    the name repeats in the file, as in analyze_fail.ir). ``params`` are the parameter tokens
    as written (``%para3_x``); ``param_decls`` the matching :class:`IRParam` objects (types from
    ``# Parameters:`` when the counts agree). ``attrs`` come from ``subgraph attr:``. ``line`` is
    the ``subgraph`` line, ``end_line`` the closing ``}`` (``None`` if never closed).
    """

    __slots__ = ("name", "key", "parent", "params", "param_decls", "attrs", "nodes", "return_node",
                 "line", "end_line", "source", "instance", "symbol_engine", "indirect", "comments",
                 "order", "_by_index")

    def __init__(self, name: str, key: str, parent: str | None, params: list[str], line: int) -> None:
        self.name = name
        self.key = key
        self.parent = parent
        self.params = params
        self.param_decls: list[IRParam] = []
        self.attrs: dict[str, str] = {}
        self.nodes: list[IRNode] = []
        self.return_node: IRNode | None = None
        self.line = line
        self.end_line: int | None = None
        self.source: SourceLoc | None = None
        self.instance: str | None = None
        self.symbol_engine: str | None = None
        self.indirect: int | None = None
        self.comments: list[str] = []
        self.order: list[str] = []
        self._by_index: dict[int, IRNode] | None = None

    def __repr__(self) -> str:
        return f"IRSubgraph({self.key!r}, nodes={len(self.nodes)}, line={self.line})"

    def node(self, index: int) -> IRNode | None:
        """Node ``%index`` (the first one when a doc excerpt repeats an index)."""
        by = self._by_index
        if by is None:
            by = {}
            for n in self.nodes:
                if n.index is not None and n.index not in by:
                    by[n.index] = n
            self._by_index = by
        return by.get(index)


class IRFile:
    """One parsed IR text file.

    ``entry`` is the ``# IR entry`` graph name; ``total_subgraphs_declared`` the ``# Total
    subgraphs`` number; ``attrs`` the ``# Attrs:`` block; ``jit_config`` the ``jit config {}``
    block; ``params`` the file-level parameters; ``graphs`` the subgraphs in file order;
    ``unparsed`` every line that fit no form as ``(line number, text)``.

    Counts: ``node_count`` = numbered nodes (``%k = ...``); ``cnode_count`` = ``node_count`` +
    Return nodes, i.e. what MindSpore calls CNodes and compares with ``declared_cnode_count``
    (``Total number of cnodes``). ``declared_node_count`` (``Total number of nodes``) also counts
    parameters and value nodes, which the text does not list one by one.

    ``format_version`` is ``"1.x"``, ``"2.0-2.2"`` or ``"2.3+"`` (from header, op and debug-name
    spellings). ``is_analyze_fail`` marks analyze_fail.ir dumps (banner lines in ``banner``).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.entry: str | None = None
        self.total_subgraphs_declared: int | None = None
        self.total_params_declared: int | None = None
        self.declared_node_count: int | None = None
        self.declared_cnode_count: int | None = None
        self.attrs: dict[str, str] = {}
        self.jit_config: dict[str, str] = {}
        self.params: list[IRParam] = []
        self.graphs: dict[str, IRSubgraph] = {}
        self.unparsed: list[tuple[int, str]] = []
        self.node_count = 0
        self.cnode_count = 0
        self.format_version = "2.3+"
        self.is_analyze_fail = False
        self.banner: list[str] = []
        self.symbol_engine: list[str] = []
        self.line_count = 0
        self._param_by_ref: dict[str, IRParam] = {}
        self._nodes_by_op: dict[str, list[IRNode]] | None = None

    def __repr__(self) -> str:
        return f"IRFile({self.path!r}, graphs={len(self.graphs)}, cnodes={self.cnode_count})"

    def iter_nodes(self) -> Iterator[IRNode]:
        """Every node of every subgraph in file order, Return nodes included."""
        for g in self.graphs.values():
            yield from g.nodes

    def decode_all(self) -> None:
        """Decode every node's lazy fields now, in bulk (faster than on first access one by one).

        Useful before a rule pass that reads everything, and to measure the full decoding cost.
        """
        with gc_paused():
            for node in self.iter_nodes():
                node.decode_all()

    def node(self, graph: str, index: int | None) -> IRNode | None:
        """Node ``%index`` of subgraph ``graph`` (``index=None``: its Return), else ``None``."""
        g = self.graphs.get(graph)
        if g is None:
            return None
        return g.return_node if index is None else g.node(index)

    def nodes_by_op(self, op: str) -> list[IRNode]:
        """Nodes whose normalised op is ``op`` (``"Cast"`` matches ``PrimFunc_Cast``), file order."""
        index = self._nodes_by_op
        if index is None:
            index = {}
            for n in self.iter_nodes():
                index.setdefault(n.op, []).append(n)
            self._nodes_by_op = index
        return list(index.get(op, ()))

    @property
    def entry_graph(self) -> IRSubgraph | None:
        """The subgraph named by ``# IR entry`` (else the last subgraph, as MindSpore prints it)."""
        if self.entry is not None and self.entry in self.graphs:
            return self.graphs[self.entry]
        if self.graphs:
            return list(self.graphs.values())[-1]
        return None

    def param(self, ref: str) -> IRParam | None:
        """Parameter by token (``para3_x`` or ``%para3_x``), file-level or of a subgraph."""
        return self._param_by_ref.get(ref.lstrip("%"))

    def add_param(self, p: IRParam) -> None:
        """Register a parameter for :meth:`param` (the first declaration of a token wins)."""
        self._param_by_ref.setdefault(p.ref, p)

    def resolve(self, node: IRNode, ref: OperandRef) -> IRNode | IRParam | None:
        """The node or parameter an operand refers to, ``None`` for values and unknown targets.

        ``%k`` → node k of the consumer's subgraph; ``%paraK_x`` → that parameter (falling
        back to the file parameter numbered K, since early passes rename parameters);
        ``$(@g:n)`` → the parameter ``n`` or the last node of ``g`` whose debug name is ``n``.
        """
        if ref.kind == "node":
            g = self.graphs.get(node.graph)
            return g.node(ref.index) if g is not None and ref.index is not None else None
        if ref.kind == "param":
            return self._resolve_param(ref.name or "")
        if ref.kind == "crossref":
            name = ref.name or ""
            if name.startswith("para"):
                p = self._resolve_param(name)
                if p is not None:
                    return p
            g = self.graphs.get(ref.graph or "")
            if g is None:
                return None
            for n in reversed(g.nodes):
                if n.debug_name == name:
                    return n
        return None

    def out_dtype(self, item: "IRNode | IRParam | None") -> str | None:
        """The output dtype of a node or parameter: its type line, else what the compact format still says.

        A compact dump (``MS_DEV_DUMP_IR_FORMAT=0``) has no type lines on nodes, but a
        ``Cast`` names its destination (``PrimFunc_Cast(%x, I64(42))``, or ``dst_type: F16``
        in its attributes) and parameters keep their types, so Cast chains can still be
        followed.
        """
        if item is None:
            return None
        if isinstance(item, IRParam):
            return getattr(item.type, "dtype", None)
        if item.out_types:
            return getattr(item.out_types[0], "dtype", None)
        if item.op == "Cast":
            return cast_destination(item)
        return None

    def in_dtype(self, node: "IRNode", i: int = 0) -> str | None:
        """The dtype of a node's operand ``i``: its type line, else its producer's :meth:`out_dtype`."""
        if node.in_types and len(node.in_types) > i:
            return getattr(node.in_types[i], "dtype", None)
        refs = node.operand_refs
        if len(refs) <= i:
            return None
        return self.out_dtype(self.resolve(node, refs[i]))

    def _resolve_param(self, token: str) -> IRParam | None:
        p = self._param_by_ref.get(token)
        if p is not None:
            return p
        head = token[4:].split("_", 1)[0]
        if head.isdigit() and len(head) <= 18:
            k = int(head)
            same = [q for q in self.params if q.index == k]
            if len(same) == 1:
                return same[0]
        return None
