"""Shared fixtures: where the real data lives (``../shared/real-data`` beside the checkout)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = Path(os.environ.get("ADVISOR_REAL_DATA", ROOT.parent / "shared" / "real-data"))

if not REAL_DATA.is_dir():  # pragma: no cover - a broken checkout layout must fail loudly, not skip
    raise RuntimeError(
        f"real-data fixtures not found at {REAL_DATA}; the tests read ../shared/real-data beside the checkout "
        "(or set ADVISOR_REAL_DATA)"
    )


@pytest.fixture(scope="session")
def real_data() -> Path:
    return REAL_DATA


@pytest.fixture(scope="session")
def ms_cpu() -> Path:
    return REAL_DATA / "mindspore-2.10-cpu"


@pytest.fixture(scope="session")
def msprof() -> Path:
    return REAL_DATA / "msprof-analyze"
