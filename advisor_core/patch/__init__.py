"""Config patches: apply RFC 6902 patches to training YAMLs on the round-trip tree, diff, write.

See ``README.md`` in this folder. Public API:

* :func:`apply_patches` → :class:`PatchResult` (with :class:`PreconditionFailure`);
  :func:`preview_patches` (also renders display-only patches);
  :class:`PatchVerificationError` when a round trip would change more than asked;
* :func:`unified_diff`, :func:`render_patch_diff`;
* :func:`atomic_write` (:class:`AtomicWriteError`).
"""

from advisor_core.patch.apply import (
    PatchResult,
    PatchVerificationError,
    PreconditionFailure,
    apply_patches,
    check_preconditions,
    preview_patches,
)
from advisor_core.patch.diff import render_patch_diff, unified_diff
from advisor_core.patch.write import AtomicWriteError, atomic_write

__all__ = [
    "AtomicWriteError",
    "PatchResult",
    "PatchVerificationError",
    "PreconditionFailure",
    "apply_patches",
    "atomic_write",
    "check_preconditions",
    "preview_patches",
    "render_patch_diff",
    "unified_diff",
]
