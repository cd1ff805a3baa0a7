"""The client's timeouts: ``connect_timeout`` bounds the first contact with
the cluster (an acquire or a describe with no broker reachable fails within
it, as a ``TransientError`` naming the bootstrap address),
``operation_timeout`` each blocking client operation. Bad values are refused
when the client is made, naming the argument and the value."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Callable, Dict

import pytest

import krabka_coordination as kc
from kafka_support import FAST, members

UNREACHABLE = "127.0.0.1:1"  # nobody listens on port 1
BOOT = {"bootstrap.servers": UNREACHABLE}

# The core's default connect timeout is 10 s: a failure well before it shows
# the configured 1.5 s was used.
CONNECT_S = 1.5
PROMPTLY_S = 6.0


def _assert_unreachable(e: BaseException, elapsed: float) -> None:
    assert isinstance(e, kc.TransientError), repr(e)
    assert e.kind == "TRANSIENT"
    message = str(e)
    assert UNREACHABLE in message, message
    assert f"{CONNECT_S} s" in message, message  # the configured bound, not the default
    assert elapsed < PROMPTLY_S, f"took {elapsed:.1f} s: {message}"


def test_an_unreachable_cluster_fails_an_acquire_within_the_connect_timeout() -> None:
    with kc.Client(BOOT, connect_timeout=CONNECT_S) as client:
        started = time.monotonic()
        with pytest.raises(kc.TransientError) as info:
            client.acquire_leadership("unreachable", "m")
        _assert_unreachable(info.value, time.monotonic() - started)

        started = time.monotonic()
        with pytest.raises(kc.TransientError) as info:
            client.describe_leadership("unreachable")
        _assert_unreachable(info.value, time.monotonic() - started)


def test_ensure_state_topic_is_bounded_by_the_connect_timeout() -> None:
    # Its admin call would otherwise wait the whole operation timeout.
    with kc.Client(BOOT, connect_timeout=CONNECT_S, operation_timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(kc.TransientError) as info:
            client.ensure_state_topic()
        _assert_unreachable(info.value, time.monotonic() - started)


def test_a_bootstrap_host_that_does_not_resolve_fails_at_once_naming_it() -> None:
    with kc.Client({"bootstrap.servers": "no-such-broker.invalid:9092"}, connect_timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(kc.KrabkaError) as info:
            client.describe_leadership("r")
        assert time.monotonic() - started < PROMPTLY_S
        message = str(info.value)
        assert '"no-such-broker.invalid"' in message and "does not resolve" in message, message


def test_an_unknown_setting_is_named_with_the_nearest_known_one() -> None:
    with pytest.raises(kc.InvalidArgumentError) as info:
        kc.Client({"bootstrap.server": UNREACHABLE})
    assert 'unknown setting "bootstrap.server"; did you mean "bootstrap.servers"?' in str(info.value)


def test_an_unreachable_cluster_fails_an_async_acquire_within_the_connect_timeout() -> None:
    async def main() -> None:
        async with kc.AsyncClient(BOOT, connect_timeout=CONNECT_S) as client:
            started = time.monotonic()
            with pytest.raises(kc.TransientError) as info:
                # The outer bound only keeps a regression from hanging the suite.
                await asyncio.wait_for(client.acquire_leadership("unreachable", "m"), 30)
            _assert_unreachable(info.value, time.monotonic() - started)

            started = time.monotonic()
            with pytest.raises(kc.TransientError) as info:
                await asyncio.wait_for(client.describe_leadership("unreachable"), 30)
            _assert_unreachable(info.value, time.monotonic() - started)

    asyncio.run(main())


MAKERS: Dict[str, Callable[..., Any]] = {"Client": kc.Client, "AsyncClient": kc.AsyncClient}


@pytest.mark.parametrize("make", sorted(MAKERS))
@pytest.mark.parametrize("field", ["connect_timeout", "operation_timeout"])
@pytest.mark.parametrize(
    "value, requirement",
    [
        (0, "must be a positive number of seconds, got 0"),
        (0.0, "must be a positive number of seconds, got 0"),
        (-1, "must be a positive number of seconds, got -1"),
        (math.nan, "must be a positive number of seconds, got NaN"),
        (math.inf, "must be at most 31536000 seconds (a year), got inf"),
        (-math.inf, "must be a positive number of seconds, got -inf"),
        (10**30, "must be at most 31536000 seconds (a year), got"),
        # Within a year, but beyond what librdkafka takes (i32::MAX ms).
        (30 * 86400, "must be at most 2147483.647 seconds (librdkafka's limit), got 2592000"),
    ],
)
def test_invalid_timeouts_are_refused_naming_the_argument(make: str, field: str, value: float, requirement: str) -> None:
    with pytest.raises(kc.InvalidArgumentError) as info:
        MAKERS[make](BOOT, **{field: value})
    assert isinstance(info.value, ValueError)
    assert info.value.kind == "INVALID_ARGUMENT"
    assert str(info.value).startswith(f"{field} {requirement}"), str(info.value)


@pytest.mark.parametrize("make", sorted(MAKERS))
@pytest.mark.parametrize("field", ["connect_timeout", "operation_timeout"])
def test_a_timeout_that_is_not_a_number_is_a_type_error_naming_the_argument(make: str, field: str) -> None:
    # As for every duration of the package (lease_duration="30"): a wrong
    # type is a TypeError, not an InvalidArgumentError.
    with pytest.raises(TypeError, match=f"^{field} must be a number of seconds, got str$"):
        MAKERS[make](BOOT, **{field: "x"})
    with pytest.raises(TypeError, match=f"^{field} must be a number of seconds, got bool$"):
        MAKERS[make](BOOT, **{field: True})


def test_timeouts_are_keyword_only_and_none_keeps_the_defaults() -> None:
    from krabka_coordination import _native

    with pytest.raises(TypeError):
        kc.Client(BOOT, None, None, 1.5)  # type: ignore[call-arg]
    # The native constructor too: partitions and state_topic stay where they
    # were, the timeouts come after them by name only.
    with pytest.raises(TypeError):
        _native._Client(BOOT, None, None, 1.5)  # type: ignore[call-arg]
    assert _native._Client(BOOT, 4, None, connect_timeout=2.0).partitions == 4
    client = kc.Client(BOOT, connect_timeout=None, operation_timeout=None)
    assert not client.closed
    client = kc.Client(BOOT, partitions=4, connect_timeout=0.001, operation_timeout=2**31 // 1000)
    assert client.partitions == 4


def test_an_operation_timeout_bounds_the_operations_of_a_working_client(kafka: Dict[str, str], role: str) -> None:
    # Shorter than the 30 s default and longer than the 3 s lease: a whole
    # acquire/describe/resign round runs within it.
    with kc.Client(kafka, operation_timeout=5.0, connect_timeout=5.0) as client:
        with client.acquire_leadership(role, "m", **FAST) as leadership:
            assert leadership.is_held
            assert client.describe_leadership(role).authoritative(leadership.token)
            assert members(role) == ["m"]
        assert isinstance(leadership.error, kc.Resigned)
        assert client.describe_role_state(role).members == []
