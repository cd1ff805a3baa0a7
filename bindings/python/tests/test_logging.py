"""The core's log events in Python's ``logging``: the logger
``krabka_coordination``, the level mapping, the member context, and a
member that cannot reach Kafka saying so."""

from __future__ import annotations

import asyncio
import logging
from typing import Iterator, List

import pytest

import krabka_coordination as kc
from kafka_support import wait_until
from krabka_coordination import _native

LOGGER = logging.getLogger("krabka_coordination")


class Collect(logging.Handler):
    """Keeps the records it handles."""

    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def with_message(self, text: str) -> List[logging.LogRecord]:
        return [r for r in self.records if text in r.getMessage()]


@pytest.fixture
def collected() -> Iterator[Collect]:
    handler = Collect()
    LOGGER.addHandler(handler)
    before = LOGGER.level
    try:
        yield handler
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(before)
        _native._sync_log_level()


def test_a_core_warning_reaches_the_logger_with_its_member_context(collected: Collect) -> None:
    LOGGER.setLevel(logging.WARNING)
    _native._sync_log_level()
    _native._log_from_core("warn", "renewal failing (probe 1)", "billing", "host-a")
    records = wait_until(lambda: collected.with_message("probe 1") or None, 10, "the record")
    r = records[0]
    assert r.name == "krabka_coordination"
    assert r.levelno == logging.WARNING
    assert r.getMessage() == "role=billing member=host-a: renewal failing (probe 1) probe=true"
    assert r.krabka_context == {"role": "billing", "member": "host-a"}  # type: ignore[attr-defined]
    assert r.krabka_fields == {"probe": "true"}  # type: ignore[attr-defined]
    # Where the event was logged, in Rust terms.
    assert r.krabka_target == "_native::logging"  # type: ignore[attr-defined]
    assert r.pathname.endswith("logging.rs") and r.lineno > 0, (r.pathname, r.lineno)


def test_levels_map_and_follow_the_loggers_level(collected: Collect) -> None:
    LOGGER.setLevel(logging.INFO)
    _native._sync_log_level()
    for level in ("error", "warn", "info", "debug", "trace"):
        _native._log_from_core(level, f"level probe {level}", "r", "m")
    # Records arrive in order: once this one is in, every earlier one is.
    _native._log_from_core("error", "level probe sentinel", "r", "m")
    wait_until(lambda: collected.with_message("level probe sentinel") or None, 10, "the last record")
    got = {r.getMessage().split("level probe ")[1].split()[0]: r.levelno for r in collected.with_message("level probe")}
    # DEBUG and TRACE are below the logger's INFO: not forwarded.
    assert got == {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO, "sentinel": logging.ERROR}

    LOGGER.setLevel(5)
    _native._sync_log_level()
    _native._log_from_core("trace", "level probe trace-now", "r", "m")
    records = wait_until(lambda: collected.with_message("trace-now") or None, 10, "the trace record")
    assert records[0].levelno == 5


def test_a_member_that_cannot_reach_kafka_is_not_silent(collected: Collect) -> None:
    LOGGER.setLevel(logging.WARNING)

    async def main() -> None:
        # Nobody listens on port 1: the acquire cannot even reach the
        # cluster. It fails, or is still trying when the wait runs out.
        async with kc.AsyncClient({"bootstrap.servers": "127.0.0.1:1"}) as client:
            with pytest.raises((asyncio.TimeoutError, kc.KrabkaError)):
                await asyncio.wait_for(client.acquire_leadership("unreachable", "m"), 10)

    asyncio.run(main())
    warnings = wait_until(
        lambda: [r for r in collected.records if r.levelno >= logging.WARNING] or None, 20, "a warning about the broker"
    )
    assert any("127.0.0.1:1" in r.getMessage() for r in warnings), [r.getMessage() for r in warnings]
