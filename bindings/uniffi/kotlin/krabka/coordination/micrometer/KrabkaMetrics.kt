// The core's metrics in a Micrometer registry (hand-written Kotlin shipped
// with the generated bindings). Micrometer is an optional dependency
// (io.micrometer:micrometer-core): only this file refers to it, and nothing
// else loads it.
package krabka.coordination.micrometer

import io.micrometer.core.instrument.FunctionCounter
import io.micrometer.core.instrument.FunctionTimer
import io.micrometer.core.instrument.Gauge
import io.micrometer.core.instrument.MeterRegistry
import io.micrometer.core.instrument.Tag
import io.micrometer.core.instrument.binder.MeterBinder
import krabka.coordination.MetricKind
import krabka.coordination.MetricSample
import krabka.coordination.metrics
import java.time.Duration
import java.util.concurrent.Executors
import java.util.concurrent.ScheduledExecutorService
import java.util.concurrent.TimeUnit

/**
 * A Micrometer [MeterBinder] of every series the core records in this
 * process ([metrics], the table of docs/metrics.md), read at each publish or
 * scrape of the registry:
 *
 * - a counter (`krabka_fences_total`) is a [FunctionCounter] named without
 *   `_total`, dotted (`krabka.fences`), which Prometheus's naming gives back
 *   as `krabka_fences_total`;
 * - a gauge is a [Gauge] (`krabka.role.held`; `krabka.lease.left`, base unit
 *   seconds);
 * - a histogram of durations is a [FunctionTimer] (`krabka.acquire`: its
 *   count and total time in seconds; Prometheus shows
 *   `krabka_acquire_seconds_count` and `_sum`). Micrometer cannot take the
 *   core's bucket counts: `metricsText()` has them.
 *
 * Labels are tags. A series that appears later (a role acquired after
 * [bindTo]) is added at the next [refresh], which runs every [refreshEvery]
 * on a daemon thread from the first [bindTo] (none when zero) until [close].
 * The series of a member exist from its registration, so its alerting
 * counters are in the registry at 0 before their first event.
 */
class KrabkaMetrics @JvmOverloads constructor(
    private val refreshEvery: Duration = Duration.ofSeconds(10),
) : MeterBinder, AutoCloseable {
    /** Each bound registry and the series registered with it (the keys the meters read by). */
    private val bound = mutableListOf<Pair<MeterRegistry, MutableSet<SeriesKey>>>()
    @Volatile private var scheduler: ScheduledExecutorService? = null
    @Volatile private var cached: Pair<Long, Map<SeriesKey, MetricSample>>? = null

    init {
        require(!refreshEvery.isNegative) { "refreshEvery must not be negative, got $refreshEvery" }
    }

    /** Registers every series the core has now with [registry], and keeps adding new ones. */
    @Synchronized
    override fun bindTo(registry: MeterRegistry) {
        if (bound.none { it.first === registry }) bound += Pair(registry, HashSet())
        refresh()
        if (scheduler == null && !refreshEvery.isZero) {
            val s = Executors.newSingleThreadScheduledExecutor { r ->
                Thread(r, "krabka-metrics-refresh").apply { isDaemon = true }
            }
            val ms = refreshEvery.toMillis().coerceAtLeast(1)
            s.scheduleWithFixedDelay({ runCatching { refresh() } }, ms, ms, TimeUnit.MILLISECONDS)
            scheduler = s
        }
    }

    /** Registers with every bound registry the series that appeared since the last refresh. */
    @Synchronized
    fun refresh() {
        val now = snapshot()
        for ((registry, registered) in bound) {
            for ((key, sample) in now) {
                if (registered.add(key)) register(registry, key, sample)
            }
        }
    }

    /** Stops the periodic refresh; the meters registered stay. Idempotent. */
    override fun close() {
        scheduler?.shutdownNow()
        scheduler = null
    }

    /**
     * The core's series now, reused for 100 ms (one scrape reads every
     * meter). A meter holds its key weakly: the keys live in [bound].
     */
    private fun snapshot(): Map<SeriesKey, MetricSample> {
        val at = System.nanoTime()
        cached?.let { (t, v) -> if (at - t < 100_000_000L) return v }
        val v = metrics().associateBy { SeriesKey(it.name, it.labels) }
        cached = Pair(at, v)
        return v
    }

    private fun sample(key: SeriesKey): MetricSample? = snapshot()[key]

    private fun register(registry: MeterRegistry, key: SeriesKey, s: MetricSample) {
        val tags = s.labels.entries.sortedBy { it.key }.map { Tag.of(it.key, it.value) }
        when (s.kind) {
            MetricKind.COUNTER ->
                FunctionCounter.builder(dotted(s.name.removeSuffix("_total")), key) { k ->
                    sample(k)?.count?.toDouble() ?: 0.0
                }.description(s.help).tags(tags).register(registry)
            MetricKind.GAUGE -> {
                val seconds = s.name.endsWith("_seconds")
                Gauge.builder(dotted(s.name.removeSuffix("_seconds")), key) { k -> sample(k)?.value ?: Double.NaN }
                    .description(s.help).tags(tags)
                    .apply { if (seconds) baseUnit("seconds") }
                    .register(registry)
            }
            MetricKind.HISTOGRAM ->
                FunctionTimer.builder(
                    dotted(s.name.removeSuffix("_seconds")), key,
                    { k -> sample(k)?.count?.toLong() ?: 0L },
                    { k -> sample(k)?.value ?: 0.0 },
                    TimeUnit.SECONDS,
                ).description(s.help).tags(tags).register(registry)
        }
    }

    private fun dotted(name: String) = name.replace('_', '.')

    /** A series: its metric's name and its labels. */
    private data class SeriesKey(val name: String, val labels: Map<String, String>)
}
