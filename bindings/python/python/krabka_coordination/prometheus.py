"""The core's metrics in a ``prometheus_client`` registry.

``register()`` adds a :class:`KrabkaCollector` to a registry (by default
``prometheus_client.REGISTRY``), so the application's own ``/metrics``
endpoint (``prometheus_client.start_http_server``, ``make_wsgi_app``,
``generate_latest``) serves every series of ``krabka_coordination.metrics()``
beside its own: counters, gauges and histograms as metric families of their
kind, each with its help text, the histograms with every bucket and
``+Inf``. Each scrape reads the core's numbers at that moment; nothing is
copied in between.

``prometheus_client`` is an optional dependency
(``pip install 'krabka-coordination[prometheus]'``): importing this module
without it raises an ``ImportError`` saying so; the rest of the package never
imports it.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

try:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry
except ImportError:  # pragma: no cover - depends on the environment
    # Raised while the ImportError is handled, so it is kept as __context__;
    # no name is bound, so the module has no stray attribute for stubtest.
    raise ImportError(
        "krabka_coordination.prometheus needs prometheus_client: "
        "pip install 'krabka-coordination[prometheus]'"
    )

from ._native import metrics

__all__ = ["KrabkaCollector", "register"]


def _family(name: str, kind: str, help_text: str, labels: Sequence[str]) -> Metric:
    if kind == "counter":
        # prometheus_client names a counter family without `_total` and adds
        # it back to the sample.
        return CounterMetricFamily(name, help_text, labels=labels)
    if kind == "gauge":
        return GaugeMetricFamily(name, help_text, labels=labels)
    return HistogramMetricFamily(name, help_text, labels=labels)


def _le(bound: float) -> str:
    """A bucket's ``le`` as prometheus_client writes its own: ``+Inf``, or
    the float's shortest form (``0.005``, ``1.0``)."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def _add(family: Metric, series: Dict[str, Any], labels: Sequence[str]) -> None:
    values = [series["labels"][k] for k in labels]
    if isinstance(family, HistogramMetricFamily):
        buckets: List[Tuple[str, float]] = [(_le(le), n) for le, n in series["buckets"]]
        family.add_metric(values, buckets, series["sum"])
    else:
        assert isinstance(family, (CounterMetricFamily, GaugeMetricFamily))
        family.add_metric(values, series["value"])


class KrabkaCollector(Collector):
    """A ``prometheus_client`` collector of every series the core has
    recorded in this process (``krabka_coordination.metrics()``), read at
    each ``collect()``: one metric family per metric, of its kind
    (counter, gauge, histogram), with its help text and labels."""

    def collect(self) -> Iterator[Metric]:
        """The metric families of the core's series now, in order of name."""
        families: Dict[str, Tuple[Metric, List[str]]] = {}
        for series in metrics():
            name = series["name"]
            if name not in families:
                labels = list(series["labels"])
                families[name] = (_family(name, series["kind"], series["help"], labels), labels)
            family, labels = families[name]
            _add(family, series, labels)
        for family, _ in families.values():
            yield family


def register(registry: Optional[CollectorRegistry] = None) -> KrabkaCollector:
    """Registers a new :class:`KrabkaCollector` with ``registry`` (default:
    ``prometheus_client.REGISTRY``) and returns it (for
    ``registry.unregister``). Raises the registry's ``ValueError`` when the
    registry already has a collector of a metric of the same name (such as
    an earlier ``register()`` while the core had series)."""
    collector = KrabkaCollector()
    (REGISTRY if registry is None else registry).register(collector)
    return collector
