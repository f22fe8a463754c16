"""Line-level parser for MindSpore IR text dumps (1.x, 2.0–2.2, 2.3–2.10; spec §2).

``parse_ir_text`` classifies every physical line into one of the grammar's line forms, joins
the physical lines of multi-line constants into one logical node line, and builds the
:class:`~advisor_core.ir.model.IRFile`. Node internals are decoded lazily by the model.

Guarantees (each problem is one diagnostic with file and line; parsing always completes):

* a line that fits no form is kept in ``IRFile.unparsed`` and the file gets one warning
  ``ir-unparsed-lines`` naming how many lines and the first one;
* a node line whose ``(``/``[``/``{`` do not balance is joined with the following lines only
  while those cannot start another form (node, Return, type or comment line, ``subgraph``,
  ``}``, header ``#``) and for at most ``MAX_JOIN_LINES`` lines; otherwise the node is kept as
  it is and ``ir-unbalanced-brackets`` is reported at its first line;
* a subgraph never closed gives ``ir-truncated`` (at the end of the text) or
  ``ir-unclosed-subgraph`` (at the first line of a form that only appears between subgraphs:
  ``subgraph ...``, ``indirect:``, ``# Parameters:``, column-0 ``# In file`` ...);
* nothing raises for any input text.
"""

from __future__ import annotations

import re
from pathlib import Path

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir.attrs import bracket_balance, split_top
from advisor_core.ir.comments import parse_in_file
from advisor_core.ir.gcpause import gc_paused
from advisor_core.ir.model import IRFile, IRNode, IRParam, IRSubgraph
from advisor_core.ir.typelines import parse_device_type, parse_tensor_type, split_angle_elements
from advisor_core.ir.values import TensorType
from advisor_core.textio import read_text

__all__ = ["MAX_JOIN_LINES", "parse_ir_file", "parse_ir_text"]

#: Longest run of physical lines joined into one node (numpy prints up to 1000 rows in full).
MAX_JOIN_LINES = 5000

_NODE = re.compile(r"%(\d{1,18})\((.*?)\) = ")
_ENTRY = re.compile(r"^#\s*IR entry\s*:\s*@(\S+)")
_TOTAL_SUB = re.compile(r"^#\s*Total subgraphs?\s*:\s*(\d{1,18})\s*$")
_TOTAL_PARAMS = re.compile(r"^#\s*Total params\s*:\s*(\d{1,18})\s*$")
_ATTRS_HDR = re.compile(r"^#\s*[Aa]ttrs\s*:\s*$")
_PARAMS_HDR = re.compile(r"^#\s*Params\s*:\s*$")
_ORDER_HDR = re.compile(r"^#\s*Order\s*:\s*$")
_ORDER_LINE = re.compile(r"^#\s+\d+: @")
_PARAMETERS = re.compile(r"^#\s*Parameters\s*:\s*(\d{1,18})\s*,\s*(.*)$")
_MARKER = re.compile(r"^#-+>\s*(\d{1,18})\s*$")
_BANNER = re.compile(
    r"^# (?:={10,}|The following shows the IR|You can search the last|Refer to https?://"
    r"|The total of function graphs|The rest function graphs)"
)
_PARAM = re.compile(r"^%para(\d{1,18})_(\S*?)\s*:\s*(.*)$")
_SUBPARAM = re.compile(r"^%para(\d{1,18})_(.*)$")
_SUBGRAPH = re.compile(r"^subgraph @(\S+?)(?: parent: \[subgraph @([^\]]+)\])?\((.*)\)\s*\{\s*$")
_INSTANCE = re.compile(r"^subgraph instance:\s*(.*?)(?:\s*:\s*0x[0-9a-fA-F]+)?\s*$")
_SYMENGINE = re.compile(r"^subgraph symbol engine:\s*(.*?)(?:\s*:\s*0x[0-9a-fA-F]+)?\s*$")
_INDIRECT = re.compile(r"^indirect:\s*(\d{1,18})\s*$")
_COUNT = re.compile(r"^Total number of (nodes|cnodes):\s*(\d{1,18})\s*$")
_KV = re.compile(r"^([A-Za-z_][\w.\-]*)\s*:\s?(.*)$")
_PARAM_SEP = re.compile(r"\s:\s")
# Column-0 lines that only appear between subgraphs (seeing one inside a subgraph means its '}'
# is missing).
_OUTSIDE_ONLY = re.compile(
    r"(?:subgraph |indirect:|symbol engine details:|Node counting information|Total number of|%para"
    r"|#\s*(?:In file|Parameters|Order|IR entry|Total |Attrs|Params)|# ={10,}|No more function graphs)"
)
# Lines that can never continue a multi-line constant: joining stops before them.
_STRONG = re.compile(
    r"(?: +%\d+\(| +[Rr]eturn\(| {3,}: | {3,}#|subgraph |\}\s*$|#|%para|Node counting|Total number of)"
)


class _Pending:
    """What the lines before ``subgraph @name(...) {`` said about it."""

    __slots__ = ("attrs", "instance", "symbol_engine", "indirect", "param_types", "source", "comments")

    def __init__(self) -> None:
        self.attrs: dict[str, str] = {}
        self.instance: str | None = None
        self.symbol_engine: str | None = None
        self.indirect: int | None = None
        self.param_types: list[TensorType] | None = None
        self.source: str | None = None
        self.comments: list[str] = []


class _Parser:
    """One pass over the physical lines; see the module docstring for the guarantees."""

    def __init__(self, text: str, path: str, sink: DiagnosticSink) -> None:
        self.text = text
        self.path = path
        self.sink = sink
        self.ir = IRFile(path)
        self.graph: IRSubgraph | None = None
        self.last_graph: IRSubgraph | None = None
        self.node: IRNode | None = None
        self.pending = _Pending()
        self.kv: dict[str, str] | None = None
        self.block: str | None = None  # "jit", "order", "symengine", "symengine_inner"
        self.marker: int | None = None
        self.v1 = False
        self.v23 = False
        self.v22 = False

    # -- driver -----------------------------------------------------------------------------
    def run(self) -> IRFile:
        ir = self.ir
        text = self.text
        self.text = ""
        if "\r\n" in text:
            text = text.replace("\r\n", "\n")
        if not text or text.isspace():  # not strip(): that would copy a large text
            self.sink.error("empty-file", "IR dump is empty", self.path)
            return ir
        lines = text.split("\n")
        # Only the lines are needed from here; when we own the last reference (parse_ir_file),
        # this frees the whole text before the model is built.
        del text
        if lines and lines[-1] == "":
            lines.pop()
        ir.line_count = len(lines)
        n = len(lines)
        unparsed = ir.unparsed
        i = 0
        while i < n:
            line = lines[i]
            i += 1
            if not line or line.isspace():
                self.kv = None
                if self.block == "order":
                    self.block = None
                continue
            c0 = line[0]
            if c0 == " ":
                s = line.lstrip(" ")
                graph = self.graph
                if graph is not None:
                    c = s[:1]
                    node = self.node
                    if c == "#" or (c == ":" and s[1:2] == " "):
                        if node is not None and len(line) - len(s) >= 3:
                            if c == "#":
                                node.comment_lines.append(line)
                            else:
                                node.type_lines.append(line)
                                if s.count("(") != s.count(")") or s.count("[") != s.count("]"):
                                    self._unbalanced(i, "type line")
                            continue
                    elif c == "%":
                        m = _NODE.match(s)
                        if m is not None:
                            i = self._node(lines, i, graph, int(m.group(1)), m.group(2), s[m.end():])
                            continue
                    elif s.startswith(("Return(", "return(")):
                        i = self._node(lines, i, graph, None, None, s)
                        continue
                elif self.block == "symengine_inner":
                    ir.symbol_engine.append(line)
                    continue
                unparsed.append((i, line))
                continue
            if self.kv is not None:
                m = _KV.match(line)
                if m is not None and not line.startswith("indirect:"):
                    self.kv[m.group(1)] = m.group(2).strip()
                    continue
                if self.block != "jit":
                    self.kv = None
            if not self._top_level(line, i):
                unparsed.append((i, line))
        self._finish(n)
        return ir

    # -- nodes ------------------------------------------------------------------------------
    def _node(self, lines: list[str], i: int, graph: IRSubgraph, index: int | None,
              debug: str | None, body: str) -> int:
        """Create a node from line ``i`` (1-based: ``lines[i - 1]``); return the next index."""
        start = i
        if (body.count("(") != body.count(")") or body.count("[") != body.count("]")
                or body.count("{") != body.count("}") or body.count('"') % 2):
            depth, in_str = bracket_balance(body)
            if depth > 0 or in_str:
                parts = [body]
                n = len(lines)
                while (depth > 0 or in_str) and i < n and i - start < MAX_JOIN_LINES:
                    nxt = lines[i]
                    if _STRONG.match(nxt):
                        break
                    parts.append(nxt)
                    i += 1
                    depth, in_str = bracket_balance(nxt, depth, in_str)
                body = "\n".join(parts)
            if depth != 0 or in_str:
                self._unbalanced(start, "node")
        node = IRNode(graph.key, index, debug, body, start)
        node.end_line = i
        if self.marker is not None:
            node.eval_marker = self.marker
            self.marker = None
        graph.nodes.append(node)
        if index is None:
            if graph.return_node is None:
                graph.return_node = node
            if body.startswith("return("):
                self.v1 = True
        elif not self.v23:
            if body.startswith("PrimFunc_") or (debug is not None and "CNode_" in debug):
                self.v23 = True
            elif debug is not None and "[CNode]" in debug:
                self.v22 = True
        self.node = node
        return i

    def _unbalanced(self, line: int, what: str) -> None:
        self.sink.error(
            "ir-unbalanced-brackets",
            f"unbalanced brackets in {what} line: '(', '[' or '{{' not closed before the next IR line "
            "(truncated or damaged dump); the node is kept with the text that is there",
            self.path,
            line=line,
        )

    # -- top-level lines --------------------------------------------------------------------
    def _top_level(self, line: str, ln: int) -> bool:
        """Handle a line that starts in column 0; False when it fits no form."""
        c0 = line[0]
        ir = self.ir
        if self.graph is not None and c0 != "}" and _OUTSIDE_ONLY.match(line) and not _MARKER.match(line):
            # A form that only appears between subgraphs: the open one lost its '}'.
            self._unclosed(ln)
        if c0 == "#":
            return self._hash_line(line, ln)
        if c0 == "%":
            if line.startswith("%para") and self.graph is None:
                return self._param(line, ln)
            return False
        if c0 == "}":
            if line.strip() != "}":
                return False
            return self._close(ln)
        if line.startswith("subgraph "):
            return self._subgraph_line(line, ln)
        if self.graph is not None:
            return False
        block = self.block
        if block == "symengine" and line.rstrip().endswith("{"):
            ir.symbol_engine.append(line)
            self.block = "symengine_inner"
            return True
        if line.startswith("jit config"):
            if line.rstrip().endswith("{"):
                self.block = "jit"
                self.kv = ir.jit_config
                return True
            return False
        if line.startswith("Node counting information"):
            self.v23 = True
            return True
        m = _COUNT.match(line)
        if m is not None:
            if m.group(1) == "nodes":
                ir.declared_node_count = int(m.group(2))
            else:
                ir.declared_cnode_count = int(m.group(2))
            return True
        m = _INDIRECT.match(line)
        if m is not None:
            self.pending.indirect = int(m.group(1))
            return True
        if line.startswith("symbol engine details:"):
            self.block = "symengine"
            ir.symbol_engine.append(line)
            return True
        if line.strip() == "No more function graphs.":
            ir.banner.append(line)
            ir.is_analyze_fail = True
            return True
        return False

    def _hash_line(self, line: str, ln: int) -> bool:
        ir = self.ir
        if self.block == "order":
            if _ORDER_LINE.match(line):
                if self.last_graph is not None:
                    self.last_graph.order.append(line)
                return True
            self.block = None
        if self.graph is not None:
            # Inside a subgraph only the analyze_fail marker may start in column 0 (forms that
            # belong between subgraphs, '# In file' included, closed it in _top_level).
            m = _MARKER.match(line)
            if m is not None:
                self.marker = int(m.group(1))
                ir.is_analyze_fail = True
                return True
            return False
        if line.startswith(("# In file", "#In file")):
            self.pending.source = line
            return True
        m = _ENTRY.match(line)
        if m is not None:
            ir.entry = m.group(1)
            if line.startswith("#IR"):
                self.v1 = True
            return True
        m = _TOTAL_SUB.match(line)
        if m is not None:
            ir.total_subgraphs_declared = int(m.group(1))
            if "subgraphs" not in line:
                self.v1 = True
            return True
        m = _TOTAL_PARAMS.match(line)
        if m is not None:
            ir.total_params_declared = int(m.group(1))
            return True
        if _PARAMS_HDR.match(line):
            return True
        if _ATTRS_HDR.match(line):
            self.kv = ir.attrs
            if line.startswith("#attrs"):
                self.v1 = True
            return True
        if _ORDER_HDR.match(line):
            self.block = "order"
            return True
        m = _PARAMETERS.match(line)
        if m is not None:
            self.pending.param_types = [parse_tensor_type(e) for e in split_angle_elements(m.group(2))]
            return True
        if line.startswith("# SideEffect:"):
            self.pending.comments.append(line)
            return True
        if _BANNER.match(line):
            ir.banner.append(line)
            ir.is_analyze_fail = True
            return True
        return False

    def _param(self, line: str, ln: int) -> bool:
        m = _PARAM.match(line)
        if m is None:
            return False
        index, name, rest = int(m.group(1)), m.group(2), m.group(3)
        type_: TensorType | None = None
        after = rest
        if rest.startswith("<"):
            close = _angle_close(rest)
            if close > 0:
                raw_type = rest[1:close]
                type_ = parse_tensor_type(raw_type)
                if "x[const vector][" in raw_type:
                    self.v1 = True
                after = rest[close + 1 :]
        has_default = False
        is_weight: bool | None = None
        device = None
        symbolic = None
        for part in _PARAM_SEP.split(after):
            part = part.strip()
            if not part:
                continue
            if part == "has_default":
                has_default = True
            elif part.startswith("IsWeight:"):
                is_weight = part.partition(":")[2].strip().lower() == "true"
            elif part.startswith("<") and part.endswith(">"):
                device = parse_device_type(part[1:-1])
            elif part.startswith("["):
                symbolic = part
        p = IRParam(
            index,
            name,
            type_,
            line,
            is_weight=has_default if is_weight is None else is_weight,
            has_default=has_default,
            device=device,
            symbolic_shape=symbolic,
            line=ln,
        )
        self.ir.params.append(p)
        self.ir.add_param(p)
        return True

    def _subgraph_line(self, line: str, ln: int) -> bool:
        ir = self.ir
        pending = self.pending
        if line.startswith("subgraph @"):
            # The cheap end check first: _SUBGRAPH backtracks on long lines that lack it.
            m = _SUBGRAPH.match(line) if line.rstrip().endswith("{") else None
            if m is None:
                return False
            name = m.group(1)
            key = name
            k = 1
            while key in ir.graphs:
                k += 1
                key = f"{name}#{k}"
            if k > 1:
                self.sink.info(
                    "ir-duplicate-subgraph",
                    f"subgraph @{name} appears {k} times (normal in analyze_fail.ir); "
                    f"this one is keyed {key!r}",
                    self.path,
                    line=ln,
                )
            g = IRSubgraph(name, key, m.group(2), split_top(m.group(3)), ln)
            g.attrs = pending.attrs
            g.instance = pending.instance
            g.symbol_engine = pending.symbol_engine
            g.indirect = pending.indirect
            g.comments = pending.comments
            if pending.source is not None:
                g.source = parse_in_file(pending.source.strip())
            types = pending.param_types
            for pos, token in enumerate(g.params):
                pm = _SUBPARAM.match(token)
                if pm is None:
                    continue
                ptype = types[pos] if types is not None and len(types) == len(g.params) else None
                p = IRParam(int(pm.group(1)), pm.group(2), ptype, token, line=ln, graph=key)
                g.param_decls.append(p)
                ir.add_param(p)
            ir.graphs[key] = g
            self.graph = g
            self.node = None
            self.pending = _Pending()
            self.block = None
            return True
        if self.graph is not None:
            return False
        if line.startswith("subgraph attr:"):
            self.kv = pending.attrs
            return True
        m = _INSTANCE.match(line)
        if m is not None:
            pending.instance = m.group(1)
            return True
        m = _SYMENGINE.match(line)
        if m is not None:
            pending.symbol_engine = m.group(1)
            return True
        return False

    def _unclosed(self, ln: int) -> None:
        assert self.graph is not None
        self.sink.error(
            "ir-unclosed-subgraph",
            f"subgraph @{self.graph.name} (opened at line {self.graph.line}) is not closed with '}}' "
            "before this line, which can only appear between subgraphs (truncated or damaged dump)",
            self.path,
            line=ln,
        )
        self._end_graph(None)

    def _close(self, ln: int) -> bool:
        if self.graph is not None:
            self._end_graph(ln)
            return True
        if self.block == "jit":
            self.block = None
            self.kv = None
            return True
        if self.block == "symengine_inner":
            self.ir.symbol_engine.append("}")
            self.block = "symengine"
            return True
        return False

    def _end_graph(self, ln: int | None) -> None:
        assert self.graph is not None
        self.graph.end_line = ln
        self.last_graph = self.graph
        self.graph = None
        self.node = None
        self.marker = None

    # -- end --------------------------------------------------------------------------------
    def _finish(self, n: int) -> None:
        ir = self.ir
        sink = self.sink
        if self.graph is not None:
            sink.error(
                "ir-truncated",
                f"file ends inside subgraph @{self.graph.name} (opened at line {self.graph.line}): "
                "no closing '}'; the dump is truncated",
                self.path,
                line=n,
            )
            self._end_graph(None)
        elif self.block in ("jit", "symengine_inner"):
            sink.error(
                "ir-truncated",
                "file ends inside a '{' block that is never closed; the dump is truncated",
                self.path,
                line=n,
            )
        nodes = 0
        returns = 0
        for g in ir.graphs.values():
            for node in g.nodes:
                if node.index is None:
                    returns += 1
                else:
                    nodes += 1
        ir.node_count = nodes
        ir.cnode_count = nodes + returns
        ir.format_version = "1.x" if self.v1 else "2.3+" if self.v23 else "2.0-2.2" if self.v22 else "2.3+"
        if ir.unparsed:
            first_line, first_text = ir.unparsed[0]
            shown = first_text if len(first_text) <= 100 else first_text[:100] + "..."
            sink.warning(
                "ir-unparsed-lines",
                f"{len(ir.unparsed)} line(s) fit no IR line form and were skipped; "
                f"first at line {first_line}: {shown!r}",
                self.path,
                line=first_line,
            )
        if not ir.graphs:
            sink.warning(
                "ir-no-subgraph",
                "no 'subgraph @name(...) {' found: not an IR text dump, or truncated before the first subgraph",
                self.path,
                line=n if n else None,
            )
        elif ir.declared_cnode_count is not None and ir.declared_cnode_count != ir.cnode_count:
            sink.warning(
                "ir-count-mismatch",
                f"header declares {ir.declared_cnode_count} cnodes but {ir.cnode_count} were found "
                "(nodes + Return lines)",
                self.path,
                line=None,
            )


def _angle_close(text: str) -> int:
    """Index of the ``>`` closing the ``<`` at ``text[0]`` (``-1`` if none)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                return i
    return -1


def parse_ir_text(text: str, path: Path | str, sink: DiagnosticSink) -> IRFile:
    """Parse the text of one IR dump; ``path`` is only used to name it in diagnostics."""
    with gc_paused():
        return _Parser(text, str(path), sink).run()


def _parse_owned(box: list[str], path: Path | str, sink: DiagnosticSink) -> IRFile:
    """Like :func:`parse_ir_text`, taking the only reference to the text (lowers peak memory)."""
    parser = _Parser(box.pop(), str(path), sink)
    with gc_paused():
        return parser.run()


def parse_ir_file(path: Path, sink: DiagnosticSink) -> IRFile | None:
    """Read and parse one IR dump.

    Returns ``None`` after exactly one diagnostic when the file is missing, unreadable, empty
    or binary (see :mod:`advisor_core.textio`). Bytes that are not UTF-8 give a warning and are
    replaced; the file is still parsed.
    """
    path = Path(path)
    text = read_text(path, sink, what="IR dump")
    if text is None:
        return None
    box = [text]
    del text
    return _parse_owned(box, path, sink)
