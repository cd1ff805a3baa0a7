"""The core's metrics read from Python (``metrics()``, ``metrics_text()``)
through a hand-over on a real Kafka: two members in this process, a resign,
and the standby's election. The numbers are the ones ``krabka run
--metrics-addr`` serves (docs/metrics.md)."""

from __future__ import annotations

import math
import threading
from typing import Any, Dict, List, Optional

import krabka_coordination as kc
from kafka_support import FAST, wait_until


def _series(name: str, **labels: str) -> Optional[Dict[str, Any]]:
    for s in kc.metrics():
        if s["name"] == name and all(s["labels"].get(k) == v for k, v in labels.items()):
            return s
    return None


def _value(name: str, **labels: str) -> Any:
    s = _series(name, **labels)
    return None if s is None else s["value"]


def test_metrics_follow_a_hand_over(kafka: Dict[str, str], role: str) -> None:
    a_client, b_client = kc.Client(kafka), kc.Client(kafka)
    won: List[kc.Leadership] = []
    try:
        a = a_client.acquire_leadership(role, "a", **FAST)
        assert _value("krabka_role_held", role=role, member="a") == 1.0
        assert _value("krabka_elections_total", role=role, member="a") == 1
        acquire = _series("krabka_acquire_seconds", role=role)
        assert acquire is not None and acquire["kind"] == "histogram"
        assert acquire["count"] >= 1 and acquire["sum"] > 0
        # Cumulative buckets, the last finite bound a minute, then +Inf (the
        # count): an acquire of a free role is in every bucket from its
        # duration up.
        bounds = [le for le, _ in acquire["buckets"]]
        counts = [n for _, n in acquire["buckets"]]
        assert bounds == sorted(bounds) and bounds[-2:] == [60.0, math.inf], acquire
        assert counts == sorted(counts) and counts[-1] == acquire["count"], acquire
        assert counts[-2] >= 1, acquire
        wait_until(lambda: (_value("krabka_renewals_total", role=role, member="a") or 0) >= 1, 10, "a renewal counted")
        left = _value("krabka_lease_left_seconds", role=role, member="a")
        assert left is not None and 0 < left <= FAST["lease_duration"]

        standby = threading.Thread(target=lambda: won.append(b_client.acquire_leadership(role, "b", **FAST)))
        standby.start()
        wait_until(lambda: b_client.describe_role_state(role).members == ["a", "b"], 20, "b registers behind a")
        handovers_before = (_series("krabka_handover_seconds", role=role) or {"count": 0})["count"]
        a.resign()
        standby.join(30)
        assert won, "b did not take over"
        b = won[0]

        assert _value("krabka_role_held", role=role, member="a") == 0.0
        assert _value("krabka_resigns_total", role=role, member="a") == 1
        assert _value("krabka_role_held", role=role, member="b") == 1.0
        assert _value("krabka_elections_total", role=role, member="b") == 1
        handover = _series("krabka_handover_seconds", role=role)
        assert handover is not None and handover["count"] == handovers_before + 1
        assert 0 < handover["sum"] < 60

        text = kc.metrics_text()
        assert f'krabka_elections_total{{role="{role}",member="b"}} 1\n' in text, text
        assert "# HELP krabka_elections_total Terms won.\n# TYPE krabka_elections_total counter\n" in text, text
        assert "# TYPE krabka_handover_seconds histogram\n" in text
        assert f'krabka_handover_seconds_bucket{{role="{role}",le="+Inf"}} ' in text, text
        b.resign()
        assert _value("krabka_resigns_total", role=role, member="b") == 1
    finally:
        for leadership in won:
            leadership.resign()
        a_client.close()
        b_client.close()


def test_every_series_has_a_kind_and_its_fields() -> None:
    # Whatever earlier tests recorded: the shape is the documented one.
    kinds = {"counter": ("value",), "gauge": ("value",), "histogram": ("count", "sum", "buckets")}
    for s in kc.metrics():
        assert set(s) == {"name", "help", "labels", "kind", *kinds[s["kind"]]}, s
        assert s["name"].startswith("krabka_"), s
        assert isinstance(s["help"], str) and s["help"].endswith("."), s
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in s["labels"].items()), s
        if s["kind"] == "counter":
            assert isinstance(s["value"], int) and s["value"] >= 0
        elif s["kind"] == "histogram":
            assert isinstance(s["count"], int) and isinstance(s["sum"], float)
            assert all(isinstance(le, float) and isinstance(n, int) for le, n in s["buckets"]), s
            assert s["buckets"][-1] == (math.inf, s["count"]), s
