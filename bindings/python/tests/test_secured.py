"""The binding on the secured cluster (``ci/kafka.sh start secured``: SASL_SSL,
SCRAM and PLAIN users, ACLs): the settings dict reaches the core unchanged,
for its librdkafka clients and its own protocol client alike. One leadership
round as the super user, and a wrong password, which is a ``FatalError``
naming the mechanism and the user at once, not a timeout.

``ci/kafka.sh start secured`` starts the cluster or finds it running;
``ci/kafka.sh settings secured`` prints the super user's settings.
"""

from __future__ import annotations

import subprocess
import time
from typing import Dict

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
