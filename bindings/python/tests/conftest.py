"""Shared fixtures: the golden vectors of the repository, and a real Kafka.

The golden files live in ``<repo>/golden``; ``KRABKA_GOLDEN_DIR`` overrides
the location (for a test run outside the repository).

The leadership tests run on a real Kafka (see ``kafka_support``): the
``kafka`` fixture is the settings dict of the cluster at ``KRABKA_BOOTSTRAP``,
or of the local one-node cluster that ``ci/kafka.sh start 1`` starts (or
finds running), and ``client`` a blocking client of it shared by the session.
A Kafka that cannot be reached fails those tests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from hypothesis import settings

import krabka_coordination as kc

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


@pytest.fixture(scope="session")
def kafka() -> Dict[str, str]:
    """The settings dict of a reachable Kafka with the state topic in place."""
    from kafka_support import kafka_settings

    return kafka_settings()


@pytest.fixture(scope="session")
def client(kafka: Dict[str, str]) -> "kc.Client":
    """A blocking client of the test cluster, shared by the session (one
    client acquires a role at most once: tests with two members in this
    process make a second client)."""
    from kafka_support import shared_client

    return shared_client()


@pytest.fixture(scope="session")
def data_topic(kafka: Dict[str, str]) -> str:
    """A topic for guarded writes (one partition)."""
    from kafka_support import ensure_data_topic

    return ensure_data_topic(kafka["bootstrap.servers"], "krabka-python-guarded")


@pytest.fixture
def role(request: pytest.FixtureRequest) -> Iterator[str]:
    """A role name of this test alone."""
    from kafka_support import unique_role

    yield unique_role(request.node.name)
