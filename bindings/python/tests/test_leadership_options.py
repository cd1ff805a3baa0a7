"""Arguments of the leadership API: options the core refuses (raised at the
call, with the values named), bad ``kafka`` dicts, and ``OutRecord``."""

from __future__ import annotations

import asyncio
import math
from typing import Any, Dict, List

import pytest

import krabka_coordination as kc
from kafka_support import members

BOOT = {"bootstrap.servers": "127.0.0.1:1"}  # never contacted by these checks


@pytest.mark.parametrize(
    "options, words",
    [
        ({"lease_duration": 3.0, "renew_interval": 10.0}, ["lease duration (3s)", "renew interval (10s)"]),
        ({"lease_duration": 5.0, "renew_interval": 5.0}, ["lease duration (5s)", "renew interval (5s)"]),
        ({"partitions": 0}, ["partitions must be at least 1, got 0"]),
        ({"partitions": -3}, ["partitions must be at least 1, got -3"]),
        ({"lease_duration": 0}, ["lease duration must be above zero, got 0ns"]),
        ({"renew_interval": 0.0}, ["renew interval must be above zero, got 0ns"]),
        ({"lease_duration": -1.5}, ["lease_duration", "got -1.5"]),
        ({"renew_interval": math.nan}, ["renew_interval", "got nan"]),
        ({"challenge_stagger": -0.1}, ["challenge_stagger", "got -0.1"]),
        ({"challenge_stagger": math.inf}, ["challenge_stagger", "got inf"]),
    ],
)
def test_invalid_options_raise_at_the_call_naming_the_values(options: Dict[str, Any], words: List[str]) -> None:
    with pytest.raises(kc.InvalidArgumentError) as blocking:
        kc.acquire_leadership_blocking(BOOT, "r", "m", **options)
    # The asyncio form checks before it needs an event loop.
    with pytest.raises(kc.InvalidArgumentError) as awaitable:
        kc.acquire_leadership(BOOT, "r", "m", **options)
    for info in (blocking, awaitable):
        assert isinstance(info.value, ValueError)
        message = str(info.value)
        for word in words:
            assert word in message, message


def test_a_zero_stagger_is_allowed() -> None:
    # Zero stagger passes the core's checks; the call then fails on the empty
    # member, which the core checks before any I/O.
    with pytest.raises(kc.InvalidArgumentError, match="member must not be empty"):
        kc.acquire_leadership_blocking(BOOT, "r", "", challenge_stagger=0)


def test_empty_role_or_member_is_refused_by_the_core() -> None:
    with pytest.raises(kc.InvalidArgumentError, match="role must not be empty"):
        kc.acquire_leadership_blocking(BOOT, "", "m")

    async def main() -> None:
        await kc.acquire_leadership(BOOT, "r", "")

    with pytest.raises(kc.InvalidArgumentError, match="member must not be empty"):
        asyncio.run(main())


def test_partitions_out_of_i32_range_name_the_argument() -> None:
    with pytest.raises(OverflowError, match="partitions does not fit an i32"):
        kc.acquire_leadership_blocking(BOOT, "r", "m", partitions=2**40)
    with pytest.raises(OverflowError, match="replication_factor does not fit an i32"):
        kc.ensure_state_topic_blocking(BOOT, 1, 2**33)


def test_wrong_types_name_the_argument() -> None:
    with pytest.raises(TypeError, match=r"^lease_duration must be a number of seconds \(int or float\), got str$"):
        kc.acquire_leadership_blocking(BOOT, "r", "m", lease_duration="30")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^renew_interval must be a number of seconds \(int or float\), got bool$"):
        kc.acquire_leadership_blocking(BOOT, "r", "m", renew_interval=True)
    with pytest.raises(TypeError, match="^partitions must be an int, got float$"):
        kc.acquire_leadership_blocking(BOOT, "r", "m", partitions=16.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^partitions must be an int, got str$"):
        kc.describe_role_state_blocking(BOOT, "r", "16")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="role must be a str, got int"):
        kc.acquire_leadership_blocking(BOOT, 5, "m")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        kc.acquire_leadership_blocking(BOOT, "r", "m", 16)  # type: ignore[call-arg]


def test_kafka_must_be_a_mapping_of_settings() -> None:
    with pytest.raises(TypeError, match="kafka must be a dict of librdkafka settings"):
        kc.describe_leadership_blocking("127.0.0.1:9092", "r")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match='kafka setting "socket.timeout.ms" must be a str, int, float or bool, got list'):
        kc.describe_leadership_blocking({"bootstrap.servers": "h:1", "socket.timeout.ms": [1]}, "r")  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="kafka setting names must be str"):
        kc.describe_leadership_blocking({1: "x"}, "r")  # type: ignore[dict-item]


def test_the_core_checks_the_kafka_settings() -> None:
    # No bootstrap address: the core's KafkaConfig refuses it.
    with pytest.raises(kc.InvalidArgumentError, match="bootstrap address is empty"):
        kc.describe_leadership_blocking({}, "r")
    # A setting librdkafka does not know: refused when the client is made.
    with pytest.raises(kc.InvalidArgumentError, match="librdkafka refused the setting no.such.setting=1"):
        kc.describe_role_state_blocking({"bootstrap.servers": "h:1", "no.such.setting": 1}, "r")
    # Numbers and bools are handed over as librdkafka's strings, which it
    # accepts; the call then fails on the partition count, before any I/O.
    with pytest.raises(kc.InvalidArgumentError, match="partitions must be at least 1"):
        kc.describe_role_state_blocking(
            {"bootstrap.servers": "h:1", "socket.keepalive.enable": True, "socket.timeout.ms": 5000}, "r", 0
        )


def test_security_settings_reach_the_core_which_names_what_it_cannot_honour() -> None:
    settings = {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "p",
    }
    with pytest.raises(kc.InvalidArgumentError) as info:
        kc.describe_leadership_blocking(settings, "r")
    message = str(info.value)
    assert "PLAINTEXT only" in message and "security.protocol=SASL_SSL" in message and "sasl.mechanism" in message


def test_a_lease_kafka_cannot_use_fails_after_registering_and_deregisters(kafka: Dict[str, str], role: str) -> None:
    # 0.5 s passes the election's checks, but Kafka's transaction timeout
    # (the lease) is at least 1 s: the transport refuses it when the member
    # challenges, and the member is deregistered.
    with pytest.raises(kc.InvalidArgumentError, match="lease duration 500ms is outside 1 s"):
        kc.acquire_leadership_blocking(kafka, role, "m", lease_duration=0.5, renew_interval=0.1)
    assert members(kafka, role) == []


def test_out_record() -> None:
    r = kc.OutRecord("t", b"v", key=bytearray(b"k"), partition=2, headers={"a": b"1"})
    assert (r.topic, r.value, r.key, r.partition, r.headers) == ("t", b"v", b"k", 2, [("a", b"1")])
    assert r == kc.OutRecord("t", memoryview(b"v"), b"k", 2, [("a", b"1")])
    assert r != kc.OutRecord("t", b"v")
    assert repr(r) == "OutRecord(topic='t', value=b'v', key=b'k', partition=2, headers=[('a', b'1')])"
    tomb = kc.OutRecord("t", None)
    assert tomb.value is None and tomb.key is None and tomb.partition is None and tomb.headers == []
    with pytest.raises(TypeError, match="value must be bytes, bytearray or memoryview, got str"):
        kc.OutRecord("t", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a header must be a"):
        kc.OutRecord("t", b"v", headers=[b"x"])  # type: ignore[list-item]
    with pytest.raises(OverflowError, match="partition"):
        kc.OutRecord("t", b"v", partition=2**31)
