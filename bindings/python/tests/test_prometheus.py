"""The core's metrics in a ``prometheus_client`` registry
(``krabka_coordination.prometheus``) on a real Kafka: each metric a family
of its kind with its help text, histograms with ``+Inf``, the alerting
counters at 0 from the member's registration; and the ``KrabkaTermLost``
alert of docs/metrics.md, evaluated over two scrapes of the registry, fires
at a leader's first fence (a newer epoch minted as a successor mints it)."""

from __future__ import annotations

from typing import Dict, List, Tuple

import prometheus_client
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import krabka_coordination as kc
from krabka_coordination.prometheus import KrabkaCollector, register
from kafka_support import FAST, mint_newer_epoch

# A scrape: every sample's value by (sample name, sorted labels).
Scrape = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]


def _scrape(registry: CollectorRegistry) -> Tuple[str, Scrape, Dict[str, Tuple[str, str]]]:
    """The registry's text, its samples, and each family's (type, help) by
    family name, parsed back by prometheus_client's own parser."""
    text = generate_latest(registry).decode()
    samples: Scrape = {}
    families: Dict[str, Tuple[str, str]] = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = (family.type, family.documentation)
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return text, samples, families


def _member(scrape: Scrape, name: str, role: str, member: str) -> List[float]:
    key = (name, tuple(sorted({"role": role, "member": member}.items())))
    return [scrape[key]] if key in scrape else []


def test_each_metric_is_a_family_of_its_kind_with_help_and_inf(kafka: Dict[str, str], role: str) -> None:
    registry = CollectorRegistry()
    collector = register(registry)
    assert isinstance(collector, KrabkaCollector)
    with kc.Client(kafka) as client:
        leadership = client.acquire_leadership(role, "a", **FAST)
        try:
            text, samples, families = _scrape(registry)
        finally:
            leadership.resign()
    # Every family has its HELP before its TYPE, and the text has nothing else.
    lines = [line for line in text.splitlines() if line.startswith("# ")]
    for help_line, type_line in zip(lines[::2], lines[1::2]):
        assert help_line.startswith("# HELP ") and type_line.startswith("# TYPE "), (help_line, type_line)
        assert help_line.split()[2] == type_line.split()[2], (help_line, type_line)
    assert families["krabka_elections"] == ("counter", "Terms won."), families
    assert families["krabka_role_held"][0] == "gauge", families
    assert families["krabka_acquire_seconds"] == (
        "histogram",
        "Seconds from the start of an acquire to the election.",
    ), families
    assert _member(samples, "krabka_elections_total", role, "a") == [1.0]
    assert _member(samples, "krabka_role_held", role, "a") == [1.0]
    for counter in ("fences", "renewal_failures", "lease_expirations", "challenges_lost", "resigns"):
        assert _member(samples, f"krabka_{counter}_total", role, "a") == [0.0], counter
    role_only = (("role", role),)
    count = samples[("krabka_acquire_seconds_count", role_only)]
    assert count == 1.0
    assert samples[("krabka_acquire_seconds_bucket", tuple(sorted(role_only + (("le", "+Inf"),))))] == count
    assert samples[("krabka_acquire_seconds_bucket", tuple(sorted(role_only + (("le", "60.0"),))))] <= count
    assert samples[("krabka_acquire_seconds_sum", role_only)] > 0


def test_register_defaults_to_the_global_registry() -> None:
    collector = register()
    try:
        assert collector in prometheus_client.REGISTRY._collector_to_names
        # The core's series so far are in the global registry's text.
        text = generate_latest().decode()
        for s in kc.metrics():
            assert f"# HELP {s['name']} {s['help']}\n" in text, s["name"]
    finally:
        prometheus_client.REGISTRY.unregister(collector)


def test_term_lost_fires_on_the_first_fence_by_a_successor(kafka: Dict[str, str], role: str) -> None:
    registry = CollectorRegistry()
    register(registry)
    with kc.Client(kafka) as client:
        # A long lease renewed every second: the first renewal after the
        # successor minted its epoch meets the fence.
        leadership = client.acquire_leadership(role, "a", lease_duration=30.0, renew_interval=1.0)
        try:
            _, before, _ = _scrape(registry)
            mint_newer_epoch(kafka["bootstrap.servers"], role)
            assert leadership.wait(20), "the leader was not fenced"
            assert isinstance(leadership.error, kc.Fenced)
            _, after, _ = _scrape(registry)
        finally:
            leadership.resign()

    def increase(name: str) -> List[float]:
        # Prometheus's increase() needs the series in both scrapes.
        was, now = _member(before, name, role, "a"), _member(after, name, role, "a")
        return [n - w for w, n in zip(was, now)]

    # increase(krabka_fences_total[15m]) + increase(krabka_lease_expirations_total[15m]) > 0
    fences, expirations = increase("krabka_fences_total"), increase("krabka_lease_expirations_total")
    fired = [f + e for f, e in zip(fences, expirations) if f + e > 0]
    assert _member(before, "krabka_fences_total", role, "a") == [0.0], before
    assert fences == [1.0] and expirations == [0.0], (fences, expirations)
    assert fired == [1.0]
