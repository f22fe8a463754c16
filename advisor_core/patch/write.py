"""Writing a patched config: atomically, keeping the file's permissions (and owner when allowed).

``atomic_write(path, text)`` writes UTF-8 ``text`` to a temporary file in the same
directory, flushes and fsyncs it, gives it the original file's permission bits (and
owner/group where the process may), then ``os.replace``-s it over ``path``. Readers
see the old file or the new one, never a partial one; on any error the temporary
file is removed and the original is untouched. A symlink is followed: the file it
points to is replaced, the link stays a link. Failures raise :class:`AtomicWriteError`
(an ``OSError``) whose message names the file and the reason in plain words.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["AtomicWriteError", "atomic_write"]


class AtomicWriteError(OSError):
    """A write that did not happen; ``str()`` is a message fit for the user."""

    def __str__(self) -> str:
        return str(self.strerror)


def _current_umask() -> int:
    # os.umask can only be read by setting it; restore immediately.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _explain(exc: OSError, target: Path, action: str) -> AtomicWriteError:
    if exc.errno in (errno.EACCES, errno.EPERM):
        why = f"permission denied ({action} in {target.parent})"
    elif exc.errno == errno.EROFS:
        why = f"the file system holding {target.parent} is read-only"
    elif exc.errno == errno.ENOSPC:
        why = "no space left on the device"
    elif exc.errno == errno.ENOENT:
        why = f"the directory {target.parent} does not exist"
    else:
        why = exc.strerror or str(exc)
    return AtomicWriteError(exc.errno or errno.EIO, f"cannot write {target}: {why}", str(target))


def atomic_write(path: Path | str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (see module docstring)."""
    target = Path(os.path.realpath(path)) if Path(path).is_symlink() else Path(path)
    try:
        st: os.stat_result | None = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _explain(exc, target, "reading the file's attributes") from exc
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_current_umask()
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _explain(exc, target, "creating a temporary file") from exc
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if st is not None and hasattr(os, "chown"):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except OSError:
                pass  # only root (or the owner, for the group) may; the permission bits are kept regardless
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, AtomicWriteError):
            raise _explain(exc, target, "writing") from exc
        raise
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); best effort, some platforms cannot open directories."""
    flags = getattr(os, "O_DIRECTORY", None)
    if flags is None:
        return
    try:
        fd = os.open(directory, os.O_RDONLY | flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
