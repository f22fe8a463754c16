"""atomic_write: exact content, permissions (and owner) kept, nothing partial left behind, clear errors."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

import pytest

from advisor_core.patch import AtomicWriteError, apply_patches, atomic_write

from patchtest_support import load, patch

TEXT = "seed: 1\n# 默认为False\nname: 'x'\r\nlast: no newline"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_content_is_exact_and_mode_is_kept(tmp_path: Path):
    target = tmp_path / "train.yaml"
    target.write_text("old\n", encoding="utf-8")
    os.chmod(target, 0o640)
    atomic_write(target, TEXT)
    assert target.read_bytes() == TEXT.encode("utf-8")
    assert _mode(target) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.yaml"]


def test_patched_config_written_and_read_back(tmp_path: Path):
    doc = load("pretrain_llama2_7b.yaml")
    result = apply_patches(doc, [patch("w", ("replace", "/train_dataset/num_parallel_workers", 16))])
    target = tmp_path / "pretrain_llama2_7b.yaml"
    target.write_text(doc.text, encoding="utf-8")
    atomic_write(target, result.new_text)
    assert target.read_text(encoding="utf-8") == result.new_text


def test_new_file_gets_umask_permissions(tmp_path: Path):
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.yaml", "a: 1\n")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "new.yaml") == 0o640


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="changing a file's owner needs root")
def test_owner_and_group_are_kept_when_allowed(tmp_path: Path):
    target = tmp_path / "owned.yaml"
    target.write_text("a: 1\n", encoding="utf-8")
    os.chown(target, 1234, 2345)
    atomic_write(target, "a: 2\n")
    st = target.stat()
    assert (st.st_uid, st.st_gid) == (1234, 2345)


def test_owner_change_refused_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def refuse(*_args: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "chown", refuse)
    target = tmp_path / "t.yaml"
    target.write_text("a: 1\n", encoding="utf-8")
    atomic_write(target, "a: 2\n")
    assert target.read_text(encoding="utf-8") == "a: 2\n"


@pytest.mark.parametrize("failing", ["fsync", "replace", "chmod"])
def test_failure_mid_write_leaves_original_and_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str):
    target = tmp_path / "train.yaml"
    target.write_text("original\n", encoding="utf-8")
    os.chmod(target, 0o600)

    def boom(*_args: object, **_kw: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, failing, boom)
    with pytest.raises(AtomicWriteError) as info:
        atomic_write(target, "new content\n")
    monkeypatch.undo()
    assert isinstance(info.value, OSError) and info.value.errno == errno.EIO
    assert str(info.value) == f"cannot write {target}: Input/output error"
    assert target.read_text(encoding="utf-8") == "original\n" and _mode(target) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.yaml"]


def test_interrupt_mid_write_cleans_up_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    target = tmp_path / "train.yaml"
    target.write_text("original\n", encoding="utf-8")

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, "new\n")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.yaml"]


def test_unwritable_directory_gives_a_message_the_caller_can_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    target = tmp_path / "train.yaml"
    target.write_text("a: 1\n", encoding="utf-8")

    def denied(*_args: object, **_kw: object) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(AtomicWriteError) as info:
        atomic_write(target, "a: 2\n")
    assert isinstance(info.value, OSError) and info.value.errno == errno.EACCES
    assert str(info.value) == f"cannot write {target}: permission denied (creating a temporary file in {tmp_path})"
    assert target.read_text(encoding="utf-8") == "a: 1\n"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory_for_real(tmp_path: Path):  # pragma: no cover - the CI user is root here
    folder = tmp_path / "ro"
    folder.mkdir()
    target = folder / "train.yaml"
    target.write_text("a: 1\n", encoding="utf-8")
    os.chmod(folder, 0o500)
    try:
        with pytest.raises(AtomicWriteError, match="permission denied"):
            atomic_write(target, "a: 2\n")
    finally:
        os.chmod(folder, 0o700)
    assert target.read_text(encoding="utf-8") == "a: 1\n"


def test_missing_directory_is_explained(tmp_path: Path):
    target = tmp_path / "nope" / "train.yaml"
    with pytest.raises(AtomicWriteError, match=f"the directory {tmp_path / 'nope'} does not exist"):
        atomic_write(target, "a: 1\n")


def test_symlink_is_followed_and_stays_a_link(tmp_path: Path):
    real = tmp_path / "real.yaml"
    real.write_text("a: 1\n", encoding="utf-8")
    os.chmod(real, 0o644)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    atomic_write(link, "a: 2\n")
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "a: 2\n" and _mode(real) == 0o644

