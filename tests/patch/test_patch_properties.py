"""Property tests: random RFC 6902 operations at random places of the 13 real configs.

For one operation: the result parses; the changed pointers (with their alias sites) hold the new
value; every other pointer keeps its value and — unless it shares a line with the change or sits on a
line ruamel cannot reproduce — its text line. For several operations: all or nothing, never a wrong
file. A failing ``test`` writes nothing. Examples are kept few so the suite stays fast.
"""

from __future__ import annotations

import difflib
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor_core.config.document import ConfigDocument, is_block, pointer_escape, pointer_split, resolve
from advisor_core.diagnostics import DiagnosticSink
from advisor_core.patch import apply_patches
from advisor_core.patch.merge import baseline_dump, split_lines
from advisor_core.patch.reference import strict_equal

from patchtest_support import patch

REAL_CONFIGS = Path(__file__).resolve().parents[3] / "shared" / "real-data" / "mindformers-configs"
NAMES = sorted(p.name for p in REAL_CONFIGS.glob("*.yaml"))
# Deterministic and small by default; PATCH_PROPERTY_EXAMPLES=500 explores further (with a random seed).
EXAMPLES = int(os.environ.get("PATCH_PROPERTY_EXAMPLES", "30"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize="PATCH_PROPERTY_EXAMPLES" not in os.environ, database=None)

AWKWARD = [
    "yes", "no", "on", "off", "y", "1e5", "1.5", "0x1F", "012", ": x", "x: y", "#", "a #b", "null", "~", "", "True",
    "- x", "*x", "&a", "!t", "%x", "@x", "`x", "'q", '"q', "[1]", "{a: 1}", "<<", "=", "2001-01-01", ".inf",
    " lead", "trail ", "tab\there", "line\nbreak", "默认为False, 数据并行模式下为True", "feed_forward\\.mul", "a/b~c",
]
strings = st.one_of(st.sampled_from(AWKWARD), st.text(st.characters(blacklist_categories=("Cs",)), max_size=8))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**15), 10**15), st.floats(width=64), strings,
)
keys = st.one_of(st.sampled_from([s for s in AWKWARD if s]), st.text(min_size=1, max_size=6))
values = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)), max_leaves=5
)


@lru_cache(maxsize=None)
def real(name: str) -> ConfigDocument:
    doc = ConfigDocument.load(REAL_CONFIGS / name, DiagnosticSink())
    assert doc is not None
    return doc


@lru_cache(maxsize=None)
def pointers(name: str) -> tuple[str, ...]:
    return tuple(real(name).iter_pointers())


@lru_cache(maxsize=None)
def noise_lines(name: str) -> frozenset[int]:
    """1-based lines of the original that ruamel writes differently even without edits."""
    doc = real(name)
    out: set[int] = set()
    matcher = difflib.SequenceMatcher(None, split_lines(baseline_dump(doc.text)), split_lines(doc.text), autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out.update(range(j1 + 1, j2 + 2))  # and the line after: an insertion there touches it
    return frozenset(out)


def _tokens(ptr: str) -> list[str]:
    return pointer_split(ptr)


def _related(a: str, b: str) -> bool:
    ta, tb = _tokens(a), _tokens(b)
    n = min(len(ta), len(tb))
    return ta[:n] == tb[:n]


def _span(doc: ConfigDocument, ptr: str) -> set[int]:
    """Lines an entry occupies: its key line to the last line of what it holds, its whole flow ancestor."""
    lines: set[int] = set()
    tokens = _tokens(ptr)
    # The outermost flow collection on the way is re-written as a whole.
    for depth in range(1, len(tokens) + 1):
        sub = "".join("/" + pointer_escape(t) for t in tokens[:depth])
        value = doc.get(sub)
        if isinstance(value, (dict, list)) and not is_block(value):
            ptr = sub
            break
    pos = doc.position(ptr)
    if pos is None:
        return lines
    last = pos[0]
    for other in pointers_of(doc):
        if other.startswith(ptr + "/") or other == ptr:
            p = doc.position(other)
            if p is not None:
                last = max(last, p[0])
    value = doc.get(ptr)
    if isinstance(value, (dict, list)) and not is_block(value):
        # a flow collection may close on a later line ("]  # comment")
        text_lines = doc.text.split("\n")
        while last < len(text_lines) and text_lines[last].strip().startswith(("]", "}")):
            last += 1
    lines.update(range(pos[0], last + 1))
    return lines


@lru_cache(maxsize=None)
def _pointer_cache(name: str) -> tuple[str, ...]:
    return pointers(name)


def pointers_of(doc: ConfigDocument) -> tuple[str, ...]:
    return _pointer_cache(doc.path.name)


@st.composite
def single_op(draw: Any) -> tuple[str, tuple[Any, ...], list[str], str]:
    """(config name, op, the pointers whose value the op sets, kind)."""
    name = draw(st.sampled_from(NAMES))
    doc = real(name)
    ptr = draw(st.sampled_from(pointers(name)))
    kind = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
    if kind == "replace":
        return name, ("replace", ptr, draw(values)), [ptr, *doc.alias_sites(ptr)], kind
    if kind == "remove":
        return name, ("remove", ptr), [ptr, *doc.slot_sites(ptr)], kind
    container = doc.get(ptr)
    if isinstance(container, dict):
        key = draw(keys.filter(lambda k: k not in container and not any(str(x) == k for x in container)))
        target = ptr + "/" + pointer_escape(key)
        sites = [s + "/" + pointer_escape(key) for s in doc.alias_sites(ptr)]
        return name, ("add", target, draw(values)), [target, *sites], "add-key"
    if isinstance(container, list):
        index = draw(st.integers(0, len(container)))
        token = "-" if index == len(container) and draw(st.booleans()) else str(index)
        sites = [ptr, *doc.alias_sites(ptr)]
        return name, ("add", f"{ptr}/{token}", draw(values)), [f"{s}/{index}" for s in sites], "add-item"
    return name, ("replace", ptr, draw(values)), [ptr, *doc.alias_sites(ptr)], "replace"


@SETTINGS
@given(single_op())
def test_one_operation_changes_exactly_what_it_says(case):
    name, op, targets, kind = case
    doc = real(name)
    result = apply_patches(doc, [patch("p", op)])
    assert result.ok, [f.message for f in result.failed]
    new = ConfigDocument.from_text(result.new_text, doc.path)  # parses
    if kind in ("replace", "add-key"):
        for ptr in targets:
            assert strict_equal(new.plain(ptr), op[2]), (ptr, new.plain(ptr))
    elif kind == "add-item":
        for ptr in targets:
            assert strict_equal(new.plain(ptr), op[2]), ptr
    else:  # remove
        parent_ptr = op[1].rsplit("/", 1)[0]
        old_parent, new_parent = doc.plain(parent_ptr), new.plain(parent_ptr)
        assert len(new_parent) == len(old_parent) - 1
    # Untouched pointers keep their values and their lines.
    old_lines, new_lines = doc.text.split("\n"), result.new_text.split("\n")
    allowed: set[int] = set(noise_lines(name))
    for ptr in targets:
        if doc.exists(ptr):
            allowed |= _span(doc, ptr)
        parent = ptr.rsplit("/", 1)[0]
        value = doc.get(parent)
        if isinstance(value, (dict, list)) and not is_block(value):
            allowed |= _span(doc, parent)
    for ptr in targets:
        parent = ptr.rsplit("/", 1)[0]
        if is_block(doc.get(parent)) and isinstance(new.get(parent), list) and not is_block(new.get(parent)):
            allowed |= _span(doc, parent)  # a block list starting with "{}"/"[]" may be written in flow style
    if kind == "remove":
        for site in doc.value_sites(op[1]):  # an anchor's definition removed: written in full there now
            allowed |= _span(doc, site)
            if isinstance(doc.get(site.rsplit("/", 1)[0]), (dict, list)) and not is_block(doc.get(site.rsplit("/", 1)[0])):
                allowed |= _span(doc, site.rsplit("/", 1)[0])
    parent_ptr = op[1].rsplit("/", 1)[0]
    grand = doc.get(parent_ptr.rsplit("/", 1)[0]) if parent_ptr else None
    if kind == "remove" and isinstance(doc.get(parent_ptr), dict) and isinstance(grand, list) and is_block(grand):
        keys_of_parent = list(doc.get(parent_ptr))
        if len(keys_of_parent) > 1 and str(keys_of_parent[0]) == pointer_split(op[1])[-1]:
            # The first key of a "- key: v" item goes: the next key moves up behind the dash.
            second = doc.position(parent_ptr + "/" + pointer_escape(str(keys_of_parent[1])))
            allowed |= {second[0]} if second else set()
    if kind == "remove" and len(doc.get(op[1].rsplit("/", 1)[0])) == 1:
        parent_pos = doc.position(op[1].rsplit("/", 1)[0])  # the emptied container becomes "key: {}"
        allowed |= {parent_pos[0]} if parent_pos else set()
    moved_seqs = [t.rsplit("/", 1)[0] for t in targets] if kind in ("add-item",) or (
        kind == "remove" and isinstance(doc.get(op[1].rsplit("/", 1)[0]), list)) else []
    moved_anchor = doc.value_sites(op[1]) if kind == "remove" else []
    for ptr in pointers(name):
        if any(_related(ptr, t) for t in targets) or any(ptr.startswith(s + "/") for s in moved_anchor):
            continue
        if any(ptr.startswith(seq + "/") for seq in moved_seqs):
            continue  # later items of the edited sequence moved by one
        if any(_related(ptr, t.rsplit("/", 1)[0]) and isinstance(doc.get(t.rsplit("/", 1)[0]), list) for t in targets):
            continue
        assert strict_equal(new.plain(ptr), doc.plain(ptr)), ptr
        old_pos, new_pos = doc.position(ptr), new.position(ptr)
        if old_pos is None or old_pos[0] in allowed:
            continue
        assert new_pos is not None, ptr
        assert old_lines[old_pos[0] - 1] == new_lines[new_pos[0] - 1], (ptr, old_pos, new_pos)
    # Every original line that changed is one the operation is about (or one ruamel rewrites anyway).
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            for line in range(i1 + 1, i2 + 1):
                stripped = old_lines[line - 1].strip()
                # A comment or blank line may move (re-homed), never vanish: verify() checks comments.
                assert line in allowed or not stripped or stripped.startswith("#"), (line, old_lines[line - 1])


@st.composite
def several_ops(draw: Any) -> tuple[str, list[tuple[Any, ...]]]:
    name = draw(st.sampled_from(NAMES))
    doc = real(name)
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 4))):
        ptr = draw(st.sampled_from(pointers(name)))
        kind = draw(st.sampled_from(["replace", "remove", "add", "test"]))
        if kind == "remove":
            ops.append(("remove", ptr))
        elif kind == "test":
            ops.insert(0, ("test", ptr, doc.plain(ptr)))  # a passing precondition
        elif kind == "add" and isinstance(doc.get(ptr), dict):
            ops.append(("add", ptr + "/" + pointer_escape(draw(keys)), draw(values)))
        elif kind == "add" and isinstance(doc.get(ptr), list):
            ops.append(("add", ptr + "/-", draw(values)))
        else:
            ops.append(("replace", ptr, draw(values)))
    return name, ops


@SETTINGS
@given(several_ops())
def test_several_operations_apply_all_or_nothing(case):
    name, ops = case
    doc = real(name)
    result = apply_patches(doc, [patch("p", *ops)])  # a PatchVerificationError here is a bug
    if result.ok:
        # apply_patches re-loaded the text and compared it with the expected tree; here: it parses,
        # and the value set by the last operation is there when nothing later touched its path.
        assert result.new_text is not None and result.applied and not result.failed
        new = ConfigDocument.from_text(result.new_text, doc.path)
        last = ops[-1]
        if last[0] == "replace":
            assert strict_equal(new.plain(last[1]), last[2]), last
    else:
        assert result.new_text is None and result.applied == [] and result.failed
        assert all(f.message.startswith("patch 'p': ") for f in result.failed)


@SETTINGS
@given(st.sampled_from(NAMES), st.data())
def test_failed_precondition_writes_nothing(name, data):
    doc = real(name)
    ptr = data.draw(st.sampled_from(pointers(name)))
    wrong = data.draw(values.filter(lambda v: not strict_equal(v, doc.plain(ptr))))
    change = ("replace", data.draw(st.sampled_from(pointers(name))), data.draw(values))
    before = doc.text
    result = apply_patches(doc, [patch("ok", change), patch("stale", ("test", ptr, wrong), change)])
    assert not result.ok and result.new_text is None and result.applied == []
    [failure] = result.failed
    assert (failure.patch_title, failure.pointer) == ("stale", ptr)
    assert strict_equal(failure.expected, wrong) and strict_equal(failure.actual, doc.plain(ptr))
    assert doc.text == before


def test_nan_round_trips():
    doc = real(NAMES[0])
    result = apply_patches(doc, [patch("n", ("replace", "/seed", math.nan))])
    assert math.isnan(ConfigDocument.from_text(result.new_text).get("/seed"))


def test_property_inputs_exist():
    assert len(NAMES) == 13
    assert all(resolve(real(n).data, "")[2] is real(n).data for n in NAMES)
