"""The binding on the secured cluster (``ci/kafka.sh start secured``: SASL_SSL,
SCRAM and PLAIN users, OAUTHBEARER, ACLs): the settings dict reaches the core
unchanged, for its librdkafka clients and its own protocol client alike. One
leadership round as the super user, a wrong password, which is a
``FatalError`` naming the mechanism and the user at once, not a timeout, and
a leadership round authenticated by tokens from an ``oauth_token`` callable.

``ci/kafka.sh start secured`` starts the cluster or finds it running;
``ci/kafka.sh settings secured`` prints the super user's settings.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from typing import Dict, List, Tuple

import pytest

import krabka_coordination as kc
from kafka_support import FAST, KAFKA_SH, START_TIMEOUT_S, unique_role

_secured: Dict[str, str] = {}


def secured_settings() -> Dict[str, str]:
    """The super user's librdkafka settings (SASL_SSL, SCRAM-SHA-512, the CA)."""
    if not _secured:
        for args in (["start", "secured"], ["settings", "secured"]):
            try:
                done = subprocess.run(
                    ["bash", str(KAFKA_SH), *args], capture_output=True, text=True, timeout=START_TIMEOUT_S
                )
            except subprocess.TimeoutExpired:
                pytest.fail(f"ci/kafka.sh {' '.join(args)} did not finish within {START_TIMEOUT_S:.0f} s")
            if done.returncode != 0:
                pytest.fail(f"ci/kafka.sh {' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        for line in done.stdout.splitlines():
            key, sep, value = line.strip().partition("=")
            if sep:
                _secured[key] = value
        for key in ("bootstrap.servers", "security.protocol", "sasl.mechanism", "ssl.ca.location"):
            assert key in _secured, f"ci/kafka.sh settings secured printed no {key}: {done.stdout!r}"
    return dict(_secured)


def test_a_leadership_round_on_the_secured_cluster(request: pytest.FixtureRequest) -> None:
    settings = secured_settings()
    role = unique_role(request.node.name)
    with kc.Client(settings) as client:
        client.ensure_state_topic(development=True)
        with client.acquire_leadership(role, "m", **FAST) as leadership:
            assert client.describe_leadership(role).authoritative(leadership.token)
            assert client.describe_role_state(role).members == ["m"]
        assert isinstance(leadership.error, kc.Resigned)
        assert not client.describe_leadership(role).authoritative(leadership.token)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_is_a_prompt_fatal_error(mechanism: str) -> None:
    settings = {**secured_settings(), "sasl.mechanism": mechanism, "sasl.password": "not-the-password"}
    with kc.Client(settings) as client:
        started = time.monotonic()
        with pytest.raises(kc.FatalError) as info:
            client.describe_leadership("secured-wrong-password")
        elapsed = time.monotonic() - started
    message = str(info.value)
    assert mechanism in message and '"admin"' in message, message
    assert "not-the-password" not in message, message
    assert elapsed < 5, f"took {elapsed:.1f} s: {message}"


def unsigned_jwt(sub: str, exp: int) -> str:
    """An unsigned JWT (``{"alg":"none"}``): what the secured cluster's
    OAUTHBEARER validator takes, the principal being ``sub``."""

    def b64(data: Dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{b64({'alg': 'none'})}.{b64({'sub': sub, 'iat': int(time.time()), 'exp': exp})}."


def test_oauthbearer_with_a_token_callable(request: pytest.FixtureRequest) -> None:
    base = secured_settings()
    settings = {
        "bootstrap.servers": base["bootstrap.servers"],
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "ssl.ca.location": base["ssl.ca.location"],
    }
    calls: List[float] = []

    def token() -> Tuple[str, float, str]:
        calls.append(time.time())
        exp = int(time.time()) + 3600
        return unsigned_jwt("admin", exp), exp, "admin"

    role = unique_role(request.node.name)
    with kc.Client(settings, oauth_token=token) as client:
        client.ensure_state_topic(development=True)
        with client.acquire_leadership(role, "m", **FAST) as leadership:
            assert client.describe_leadership(role).authoritative(leadership.token)
        assert isinstance(leadership.error, kc.Resigned)
    # Every Kafka client took the one token.
    assert len(calls) == 1, calls

    # An exception of the callable fails the operation at once, kept as the cause.
    def unreachable() -> Tuple[str, float]:
        raise ConnectionError("the identity provider is unreachable")

    with kc.Client(settings, oauth_token=unreachable) as client:
        started = time.monotonic()
        with pytest.raises(kc.TransientError) as info:
            client.describe_leadership(role)
        assert time.monotonic() - started < 5
    assert "token provider" in str(info.value), info.value
    assert isinstance(info.value.__cause__, ConnectionError), repr(info.value.__cause__)
    # A callable is needed, and OAUTHBEARER needs one.
    with pytest.raises(TypeError, match="oauth_token"):
        kc.Client(settings, oauth_token="a token")  # type: ignore[arg-type]
    with pytest.raises(kc.InvalidArgumentError, match="OAUTHBEARER needs a token provider"):
        kc.Client(settings)
