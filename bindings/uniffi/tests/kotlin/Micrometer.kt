// KrabkaMetrics, the Micrometer binder, on the real Kafka: its own entry
// point (krabka.coordination.test.MicrometerMain), run with the optional
// Micrometer jars on the classpath, while MainKt runs without them (the
// bindings need Micrometer only when this binder is used).
package krabka.coordination.test

import io.micrometer.core.instrument.simple.SimpleMeterRegistry
import krabka.coordination.*
import krabka.coordination.micrometer.KrabkaMetrics
import kotlinx.coroutines.runBlocking
import java.time.Duration
import java.util.concurrent.TimeUnit

fun micrometerBinder(bootstrap: String) = runBlocking {
    check("KrabkaMetrics: a member's series in a Micrometer registry, the alerting counters at 0, read live") {
        val role = "uniffi-kotlin-micrometer-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
        val registry = SimpleMeterRegistry()
        KrabkaMetrics(Duration.ZERO).use { binder ->
            binder.bindTo(registry)
            fun counter(name: String) = registry.find(name).tags("role", role, "member", "m").functionCounter()
            Client(mapOf("bootstrap.servers" to bootstrap)).use { client ->
                expect(counter("krabka.fences") == null) { "a series before the member registered" }
                val l = runBlocking { client.acquire(role, "m", SHORT) }
                binder.refresh()
                for (name in listOf("krabka.fences", "krabka.renewal.failures", "krabka.lease.expirations", "krabka.challenges.lost", "krabka.resigns")) {
                    expect(counter(name)?.count() == 0.0) { "$name: ${counter(name)?.count()}" }
                }
                val elections = counter("krabka.elections")
                expect(elections != null && elections.count() == 1.0 && elections.id.description == "Terms won.") { "${elections?.id}" }
                val held = registry.find("krabka.role.held").tags("role", role, "member", "m").gauge()
                expect(held != null && held.value() == 1.0) { "${held?.value()}" }
                val left = registry.find("krabka.lease.left").tags("role", role, "member", "m").gauge()
                expect(left != null && left.id.baseUnit == "seconds" && left.value() > 0.0) { "${left?.id}" }
                val acquire = registry.find("krabka.acquire").tags("role", role).functionTimer()
                expect(acquire != null && acquire.count() == 1.0 && acquire.totalTime(TimeUnit.SECONDS) > 0.0) { "${acquire?.id}" }
                runBlocking { l.resign() }
                // Read at each look once the binder's 100 ms snapshot is
                // stale: the resign shows without a refresh.
                Thread.sleep(150)
                expect(counter("krabka.resigns")?.count() == 1.0 && held!!.value() == 0.0) { "${counter("krabka.resigns")?.count()}" }
            }
        }
    }
}

/** The binder's tests: `MicrometerMain` with `KRABKA_BOOTSTRAP` set; exits 1 on a failure. */
object MicrometerMain {
    @JvmStatic
    fun main(args: Array<String>) {
        val bootstrap = System.getenv("KRABKA_BOOTSTRAP")
        if (bootstrap.isNullOrEmpty()) {
            println("KRABKA_BOOTSTRAP is not set: the Micrometer tests need a Kafka")
            failed++
        } else {
            micrometerBinder(bootstrap)
        }
        println("$passed passed, $failed failed")
        kotlin.system.exitProcess(if (failed == 0) 0 else 1)
    }
}
