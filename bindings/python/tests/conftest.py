"""Shared fixtures: the golden vectors of the repository.

The golden files live in ``<repo>/golden``; ``KRABKA_GOLDEN_DIR`` overrides
the location (for a test run outside the repository).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest
from hypothesis import settings

# No per-example deadline: the machines are small and shared, and a slow
# example is not a wrong one. 300 examples a property.
settings.register_profile("krabka", max_examples=300, deadline=None)
settings.load_profile("krabka")

GOLDEN_DIR = Path(os.environ.get("KRABKA_GOLDEN_DIR", Path(__file__).resolve().parents[3] / "golden"))


def load_golden(name: str) -> Dict[str, Any]:
    """Loads ``golden/<name>`` and refuses any ``format`` but 1."""
    path = GOLDEN_DIR / name
    with path.open(encoding="utf-8") as f:
        data: Dict[str, Any] = json.load(f)
    assert data.get("format") == 1, f"{path}: unsupported format {data.get('format')!r}"
    return data


@pytest.fixture(scope="session")
def records() -> Dict[str, Any]:
    """``golden/records.json``."""
    return load_golden("records.json")


@pytest.fixture(scope="session")
def partitions() -> Dict[str, Any]:
    """``golden/partitions.json``."""
    return load_golden("partitions.json")


@pytest.fixture(scope="session")
def tokens() -> Dict[str, Any]:
    """``golden/tokens.json``."""
    return load_golden("tokens.json")
