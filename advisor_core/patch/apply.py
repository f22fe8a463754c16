"""Apply RFC 6902 patches to a training config: all or nothing, minimal diff, verified.

``apply_patches(doc, patches)``:

1. Checks **every** ``test`` operation of **every** patch against the document as
   it is (tests are preconditions computed against the current file, so they are
   all evaluated before anything changes; equality is type-strict, see
   :mod:`advisor_core.patch.reference`). ``display_only`` patches are refused. If
   anything fails, nothing is changed: ``ok`` is false, ``new_text`` is ``None``
   and ``failed`` says which patch, which pointer, expected and actual.
2. Applies the ``add``/``replace``/``remove`` operations, patch by patch and in
   order, to a fresh round-trip tree (:mod:`advisor_core.patch.edit`); a path that
   does not resolve fails the whole call the same way.
3. Writes text by merging ruamel's dump into the original so that every line
   outside the edited ones stays byte-identical (:mod:`advisor_core.patch.merge`).
4. Re-loads the text and checks that exactly the intended values changed and no
   comment was lost (:mod:`advisor_core.patch.verify`); otherwise raises
   :class:`PatchVerificationError` — a bug, reported loudly, never written.

**Aliases.** Pointers are resolved on the document as loaded. A pointer through
an alias (``/train_dataset_task/dataset_config/num_parallel_workers`` where
``dataset_config: *train_dataset``) edits the anchored node, so the change shows at
the anchor and at every alias site; replacing an anchored value (``data_parallel:
&dp 1``) keeps the anchor and every ``*dp`` follows. ``notes`` names those sites.

**Insertion position.** RFC 6902 has no position for object members. A new key
goes at the end of its mapping, unless ``insert_after`` maps the ``add`` op's
pointer to the name (unescaped) of an existing sibling key, after which it is placed:
``apply_patches(doc, [p], insert_after={"/parallel/all_reduce_fusion_config":
"enable_parallel_optimizer"})``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from advisor_core.config.document import ConfigDocument, PointerError, to_plain, type_name
from advisor_core.engine.findings import Patch, PatchOp, Safety
from advisor_core.patch.edit import EditError, TreeEditor
from advisor_core.patch.merge import baseline_dump, dump, merge_lines
from advisor_core.patch.reference import describe, plain_apply, strict_equal
from advisor_core.patch.verify import PatchVerificationError, dropped_spans, verify_result

__all__ = [
    "PatchResult",
    "PatchVerificationError",
    "PreconditionFailure",
    "apply_patches",
    "check_preconditions",
    "preview_patches",
]


@dataclass(frozen=True)
class PreconditionFailure:
    """Why a patch cannot be applied: a failed ``test``, a path that does not exist, a refused patch.

    ``expected``/``actual`` are plain values (``actual`` is ``None`` when the path
    does not exist); ``compared`` tells whether the two were compared, so that
    :attr:`message` shows them only then.
    """

    patch_title: str
    pointer: str
    expected: Any
    actual: Any
    reason: str
    compared: bool = True

    @property
    def message(self) -> str:
        """One readable line, e.g. ``patch 'More workers': /a/b: test failed: … (expected 8, found 4)``."""
        where = self.pointer or "(document root)"
        text = f"patch '{self.patch_title}': {where}: {self.reason}"
        if self.compared:
            text += f" (expected {describe(self.expected)}, found {describe(self.actual)})"
        return text

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class PatchResult:
    """Outcome of :func:`apply_patches`.

    ``ok``: every patch applied; ``new_text``: the patched file (``None`` unless
    ``ok``); ``applied``: the patches applied (all or none); ``failed``: why not;
    ``notes``: facts the user should know (alias sites changed with a value, a later
    patch overriding an earlier one); ``changed``: every pointer whose value changed,
    alias sites included.
    """

    ok: bool
    new_text: str | None
    applied: list[Patch]
    failed: list[PreconditionFailure]
    notes: list[str]
    changed: list[str] = field(default_factory=list)


def _test_failure(doc: ConfigDocument, patch: Patch, op: PatchOp) -> PreconditionFailure | None:
    try:
        exists = doc.exists(op.path)
    except ValueError as exc:
        return PreconditionFailure(patch.title, op.path, op.value, None, f"malformed pointer: {exc}", compared=False)
    if not exists:
        return PreconditionFailure(patch.title, op.path, op.value, None, "test failed: the path does not exist",
                                   compared=False)
    actual = doc.plain(op.path)
    if strict_equal(actual, op.value):
        return None
    if type_name(actual) != type_name(op.value):
        reason = f"test failed: the value is a {type_name(actual)}, the patch expects a {type_name(op.value)}"
    else:
        reason = "test failed: the value differs (was the file edited after the patch was computed?)"
    return PreconditionFailure(patch.title, op.path, op.value, actual, reason)


def check_preconditions(doc: ConfigDocument, patches: Iterable[Patch], *, allow_display_only: bool = False
                        ) -> list[PreconditionFailure]:
    """Every failed ``test`` of every patch against ``doc`` as it is (plus refused display-only patches)."""
    failures: list[PreconditionFailure] = []
    for patch in patches:
        if patch.safety == Safety.DISPLAY_ONLY and not allow_display_only and patch.changes:
            failures.append(PreconditionFailure(patch.title, "", None, None,
                                                "display-only patches are shown, never applied", compared=False))
        for op in patch.preconditions:
            failure = _test_failure(doc, patch, op)
            if failure is not None:
                failures.append(failure)
    return failures


def _apply(
    doc: ConfigDocument,
    patches: list[Patch],
    insert_after: Mapping[str, str],
    *,
    allow_display_only: bool,
) -> PatchResult:
    failures = check_preconditions(doc, patches, allow_display_only=allow_display_only)
    if failures:
        return PatchResult(ok=False, new_text=None, applied=[], failed=failures, notes=[])
    work = doc.copy()
    editor = TreeEditor(work)
    expected = to_plain(work.data)
    notes: list[str] = []
    changed: list[str] = []
    changed_by: dict[str, str] = {}
    dropped: list[tuple[int, int]] = []
    for patch in patches:
        for op in patch.changes:
            try:
                value_sites = work.value_sites(op.path) if op.op != "remove" and work.exists(op.path) else []
                record = editor.apply(op.op, op.path, op.value, after=insert_after.get(op.path))
                plain_apply(expected, op.op, op.path, op.value, value_sites)
            except EditError as exc:
                failure = PreconditionFailure(
                    patch.title,
                    exc.pointer,
                    None if op.op == "remove" else op.value,
                    doc.plain(op.path) if _exists(doc, op.path) else None,
                    f"cannot {op.op}: {exc.reason}",
                    compared=False,
                )
                return PatchResult(ok=False, new_text=None, applied=[], failed=[failure], notes=[])
            except (PointerError, ValueError, IndexError) as exc:  # the plain reference disagrees: a bug
                raise PatchVerificationError(f"{doc.path}: {op.op} {op.path}: internal inconsistency: {exc}") from exc
            dropped.extend(dropped_spans(doc, op.op, op.path))
            for note in record.notes:
                notes.append(f"{patch.title}: {note}")
            for ptr in record.changed:
                earlier = changed_by.get(ptr)
                if earlier is not None and earlier != patch.title:
                    notes.append(f"'{earlier}' and '{patch.title}' both change {ptr}; the later one wins")
                changed_by[ptr] = patch.title
                if ptr not in changed:
                    changed.append(ptr)
    try:
        edited = dump(work.data, work.layout)
    except Exception as exc:  # noqa: BLE001 - ruamel asserts on comment layouts it cannot write
        raise PatchVerificationError(f"{doc.path}: ruamel could not write the patched tree: {exc!r}") from exc
    new_text = merge_lines(doc.text, baseline_dump(doc.text), edited, doc.layout)
    verify_result(doc, new_text, expected, dropped)
    return PatchResult(ok=True, new_text=new_text, applied=list(patches), failed=[], notes=notes, changed=changed)


def _exists(doc: ConfigDocument, pointer: str) -> bool:
    try:
        return doc.exists(pointer)
    except ValueError:
        return False


def apply_patches(
    doc: ConfigDocument,
    patches: list[Patch],
    *,
    insert_after: Mapping[str, str] | None = None,
) -> PatchResult:
    """Apply ``patches`` to ``doc`` all-or-nothing (see module docstring); ``doc`` itself is not modified.

    Raises :class:`PatchVerificationError` when the produced text would differ from
    the intended result anywhere; the caller must then write nothing.
    """
    return _apply(doc, list(patches), insert_after or {}, allow_display_only=False)


def preview_patches(
    doc: ConfigDocument,
    patches: list[Patch],
    *,
    insert_after: Mapping[str, str] | None = None,
) -> PatchResult:
    """Like :func:`apply_patches` but also renders ``display_only`` patches (for showing, never for writing)."""
    return _apply(doc, list(patches), insert_after or {}, allow_display_only=True)
