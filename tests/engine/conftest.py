"""Fixtures for engine tests (helpers live in engine_support.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def fake_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    return site
