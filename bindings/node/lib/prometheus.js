'use strict'
// The core's metrics in a prom-client registry: registerMetrics(promClient,
// registry) registers one metric object per metric of the core (the
// native _metricInfo table), each implementing what a prom-client Registry
// reads of a metric (name, help, type, aggregator, get(), reset()). get()
// reads the native snapshot at each scrape, so counters, gauges and
// histograms (every bucket, +Inf, _sum, _count) are the core's numbers, as
// exact as metricsText(); nothing is copied in between. prom-client is an
// optional peer dependency: the package never loads it, the caller passes it.

const { argTypeError } = require('./errors')

/** Makes `registerMetrics` for the native addon. */
function makePrometheus(native) {
  // One snapshot per scrape: a Registry calls every metric's get() in one
  // synchronous pass, so the snapshot is kept until the next microtask.
  let cached = null
  function snapshot() {
    if (cached === null) {
      cached = native.metrics()
      queueMicrotask(() => {
        cached = null
      })
    }
    return cached
  }

  /** The prom-client values of one series of a histogram. */
  function histogramValues(name, s) {
    const values = s.buckets.map(([le, n]) => ({
      metricName: `${name}_bucket`,
      labels: { ...s.labels, le: le === Infinity ? '+Inf' : le },
      value: n,
    }))
    values.push({ metricName: `${name}_sum`, labels: s.labels, value: s.sum })
    values.push({ metricName: `${name}_count`, labels: s.labels, value: s.count })
    return values
  }

  /** One metric of the core, as a prom-client registry reads it. */
  class KrabkaMetric {
    #metric
    constructor(info) {
      this.#metric = info.name
      /** The metric's name (prom-client may strip a counter's `_total` in OpenMetrics). */
      this.name = info.name
      this.help = info.help
      this.type = info.kind
      this.labelNames = info.labels
      this.aggregator = 'sum'
    }

    /** The metric's series now, in prom-client's `MetricObjectWithValues` shape. */
    async get() {
      const name = this.#metric
      const values = []
      for (const s of snapshot()) {
        if (s.name !== name) continue
        if (s.kind === 'histogram') values.push(...histogramValues(name, s))
        else values.push({ labels: s.labels, value: s.value })
      }
      return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
    }

    /** Nothing: the core's counts are not the registry's to reset. */
    reset() {}
  }

  /**
   * Registers every metric of the core with `registry` (default:
   * `promClient.register`, the global registry) and returns the metric
   * objects registered. Throws an `InvalidArgumentError` (`code`
   * `'INVALID_ARGUMENT'`, `field` the argument) when `promClient` is not the
   * prom-client module or `registry` not a registry, and the registry's own
   * error when it already has a metric of one of these names.
   */
  function registerMetrics(promClient, registry) {
    if (promClient === null || typeof promClient !== 'object' || typeof promClient.Registry !== 'function') {
      throw argTypeError('promClient', 'the prom-client module (require("prom-client"))', promClient)
    }
    const target = registry === undefined ? promClient.register : registry
    if (target === null || typeof target !== 'object' || typeof target.registerMetric !== 'function') {
      throw argTypeError('registry', 'a prom-client Registry', target)
    }
    const metrics = native._metricInfo().map((info) => new KrabkaMetric(info))
    for (const m of metrics) target.registerMetric(m)
    return metrics
  }

  return { registerMetrics }
}

module.exports = { makePrometheus }
