"""Cut the two IR dumps of ``case_resnet50.py`` down to what CM001 reads (see README.md), lines kept verbatim.

* ``21_validate_*.ir``: the header with every parameter line (names, shapes, definition order) and the
  ``Return``; the 1448 node blocks are dropped and the node count in the header set to match.
* ``graph_build_0_*.ir``: the header, each parameter's ``ApplyMomentum`` and the nodes its gradient
  operand passes through back to the backward kernel producing it (that kernel's block included,
  its own operands not): what tells when each gradient exists. Of each block only the head (up to its
  instance name: the ``primitive_attrs``/``cnode_attrs``/``cnode_primal_attrs`` blocks are cut), the
  host type line and ``# Fullname with scope`` are kept (no device or kernel-object type line, no
  ``# In file`` or "Corresponding … candidate" comments).

Absolute paths are rewritten: the venv to ``/home/ma-user/.venv``, the script's directory to
``/home/ma-user/work``.

usage: python trim_ir.py FULL_IR_DIR OUT_IR_DIR SCRIPT_DIR VENV_DIR   (advisor's venv: uses advisor_core.ir)
"""
import re
import sys
from pathlib import Path

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.ir import parse_ir_file

NO_KERNEL = {"TupleGetItem", "MakeTuple", "Depend", "Load", "UpdateState", "Reshape"}


def blocks(lines, start):
    """Node blocks by label: ``%N`` → its lines (head, type lines, comments)."""
    out, cur = {}, None
    for line in lines[start:]:
        m = re.match(r"^  %(\d+)\(", line)
        if m:
            cur = int(m.group(1))
            out[cur] = [line]
        elif line.startswith("  Return(") or line == "}":
            cur = None
        elif cur is not None:
            out[cur].append(line)
    return out


def head_and_return(lines):
    sub = next(i for i, ln in enumerate(lines) if ln.startswith("subgraph @"))
    ret = max(i for i, ln in enumerate(lines) if ln.startswith("  Return("))
    return lines[:sub + 1], lines[ret:], sub


def main():
    src, dst, script_dir, venv = (Path(a) for a in sys.argv[1:5])
    dst.mkdir(parents=True, exist_ok=True)
    sink = DiagnosticSink()
    v = sorted(src.glob("21_validate_*.ir"))[0]
    lines = v.read_text(encoding="utf-8").splitlines()
    head, ret, _ = head_and_return(lines)
    head = [re.sub(r"^Total number of cnodes: \d+", "Total number of cnodes: 1", ln) for ln in head]
    write(dst / v.name, head + ret, script_dir, venv)
    g = sorted(src.glob("graph_build_0_*.ir"))[0]
    ir = parse_ir_file(g, sink)
    keep = set()
    for n in ir.iter_nodes():
        if n.op != "ApplyMomentum":
            continue
        keep.add(n.index)
        cur = ir.resolve(n, n.operand_refs[3])
        while cur is not None and hasattr(cur, "op"):
            keep.add(cur.index)
            if cur.op not in NO_KERNEL and (cur.scope or "").startswith("Gradients/"):
                break
            refs = [r for r in cur.operand_refs if r.kind == "node"]
            cur = ir.resolve(cur, refs[0]) if refs else None
    lines = g.read_text(encoding="utf-8").splitlines()
    head, ret, sub = head_and_return(lines)
    head = [re.sub(r"^Total number of cnodes: \d+", f"Total number of cnodes: {len(keep) + 1}", ln) for ln in head]
    body = [ln for k, b in sorted(blocks(lines, sub + 1).items()) if k in keep for ln in host_only(b)]
    write(dst / g.name, head + body + host_only(ret), script_dir, venv)


ATTR_BLOCKS = re.compile(r" (?:primitive_attrs|cnode_attrs|cnode_primal_attrs): \{.*$")


def host_only(block):
    """A node block without its attribute blocks, device and kernel-object type lines and source comments."""
    out, types = [], 0
    for ln in block:
        if re.match(r"^  %\d+\(|^  Return\(", ln):
            ln = ATTR_BLOCKS.sub("", ln)
        elif ln.startswith("      : "):
            types += 1
            if types > 1:
                continue
        elif ln.lstrip().startswith("#") and "Fullname with scope" not in ln:
            continue
        out.append(ln)
    return out


def write(path, lines, script_dir, venv):
    text = "\n".join(lines) + "\n"
    text = text.replace(str(venv), "/home/ma-user/.venv").replace(str(script_dir), "/home/ma-user/work")
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
