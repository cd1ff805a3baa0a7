// The uniffi binding's tests on the JVM, run by ci/uniffi.sh: every golden
// vector (counted per file, like the other bindings' suites), every malformed
// entry with its part, refused arguments with their messages, and leadership
// on a real Kafka when KRABKA_BOOTSTRAP is set (acquire, the token, describe,
// a guarded write, resign, a second member takes over, a cancelled acquire,
// a deposed leader's write refused as Fenced).
//
// Usage: java ... krabka.coordination.test.MainKt GOLDEN_DIR
// Ends with "N passed, N failed"; exits 1 on any failure.
package krabka.coordination.test

import krabka.coordination.*
import kotlinx.coroutines.*
import java.io.File

// ---- a minimal JSON reader (the golden files are plain JSON) ----

class Json(private val s: String) {
    private var i = 0

    fun parse(): Any? {
        val v = value()
        ws()
        require(i == s.length) { "trailing characters at $i" }
        return v
    }

    private fun ws() {
        while (i < s.length && s[i].isWhitespace()) i++
    }

    private fun value(): Any? {
        ws()
        return when (s[i]) {
            '{' -> obj()
            '[' -> arr()
            '"' -> str()
            't' -> { expect("true"); true }
            'f' -> { expect("false"); false }
            'n' -> { expect("null"); null }
            else -> num()
        }
    }

    private fun expect(word: String) {
        require(s.startsWith(word, i)) { "expected $word at $i" }
        i += word.length
    }

    private fun obj(): Map<String, Any?> {
        val m = LinkedHashMap<String, Any?>()
        i++
        ws()
        if (s[i] == '}') { i++; return m }
        while (true) {
            ws()
            val k = str()
            ws(); expect(":")
            m[k] = value()
            ws()
            if (s[i] == ',') { i++; continue }
            expect("}")
            return m
        }
    }

    private fun arr(): List<Any?> {
        val l = ArrayList<Any?>()
        i++
        ws()
        if (s[i] == ']') { i++; return l }
        while (true) {
            l.add(value())
            ws()
            if (s[i] == ',') { i++; continue }
            expect("]")
            return l
        }
    }

    private fun str(): String {
        expect("\"")
        val b = StringBuilder()
        while (s[i] != '"') {
            val c = s[i++]
            if (c != '\\') { b.append(c); continue }
            when (val e = s[i++]) {
                'n' -> b.append('\n'); 't' -> b.append('\t'); 'r' -> b.append('\r')
                'b' -> b.append('\b'); 'f' -> b.append('\u000c')
                'u' -> { b.append(s.substring(i, i + 4).toInt(16).toChar()); i += 4 }
                else -> b.append(e)
            }
        }
        i++
        return b.toString()
    }

    private fun num(): Long {
        val start = i
        while (i < s.length && (s[i] == '-' || s[i].isDigit())) i++
        return s.substring(start, i).toLong()
    }
}

@Suppress("UNCHECKED_CAST")
fun Any?.obj() = this as Map<String, Any?>
@Suppress("UNCHECKED_CAST")
fun Any?.list() = this as List<Any?>
fun Map<String, Any?>.str(k: String) = this[k] as String
fun Map<String, Any?>.int(k: String) = (this[k] as Long).toInt()
// i64 fields are JSON strings of decimal digits.
fun Map<String, Any?>.i64(k: String) = (this[k] as String).toLong()

fun hex(s: String): ByteArray = ByteArray(s.length / 2) { s.substring(2 * it, 2 * it + 2).toInt(16).toByte() }
fun ByteArray.hex(): String = joinToString("") { "%02x".format(it) }

// ---- the harness ----

var passed = 0
var failed = 0

fun check(name: String, block: () -> Unit) {
    try {
        block()
        passed++
        println("ok   $name")
    } catch (e: Throwable) {
        failed++
        println("FAIL $name: $e")
    }
}

fun expect(cond: Boolean, what: () -> String) {
    if (!cond) throw AssertionError(what())
}

inline fun <reified E : Throwable> throws(block: () -> Unit): E {
    try {
        block()
    } catch (e: Throwable) {
        if (e is E) return e
        throw AssertionError("threw ${e::class.simpleName}: $e, not ${E::class.simpleName}")
    }
    throw AssertionError("did not throw ${E::class.simpleName}")
}

// ---- golden vectors ----

fun load(dir: File, name: String): Map<String, Any?> {
    val d = Json(File(dir, name).readText()).parse().obj()
    expect(d["format"] == 1L) { "$name: unsupported format ${d["format"]}" }
    return d
}

fun expectedValue(c: Map<String, Any?>): Any = when (c.str("part")) {
    "key" -> Key(if (c.str("kind") == "registration") KeyKind.REGISTRATION else KeyKind.LEASE, c.str("role"), c.str("member"))
    "registration value" -> Registration(c.str("member"), c.i64("registered_at"))
    "lease value" -> Lease(c.str("member"), FencingToken(c.i64("producer_id"), c.int("producer_epoch").toShort()), c.i64("granted_at"), c.i64("deadline"))
    else -> throw AssertionError("unknown part ${c["part"]}")
}

fun decode(part: String, data: ByteArray): Any = when (part) {
    "key" -> decodeKey(data)
    "registration value" -> decodeRegistration(data)
    "lease value" -> decodeLease(data)
    else -> throw AssertionError("unknown part $part")
}

fun encode(v: Any): ByteArray = when (v) {
    is Key -> encodeKey(v)
    is Registration -> encodeRegistration(v)
    is Lease -> encodeLease(v)
    else -> throw AssertionError("not a record value: $v")
}

fun golden(dir: File) {
    val parts = listOf("key", "registration value", "lease value")
    check("records.json: every case decodes and encodes exactly") {
        val cases = load(dir, "records.json")["cases"].list()
        expect(cases.isNotEmpty()) { "records.json has no cases" }
        val perPart = parts.associateWith { 0 }.toMutableMap()
        val failures = mutableListOf<String>()
        for (c in cases.map { it.obj() }) {
            try {
                val want = expectedValue(c)
                val got = decode(c.str("part"), hex(c.str("hex")))
                expect(got == want) { "decoded $got" }
                val bytes = encode(want)
                expect(bytes.hex() == c.str("hex")) { "encoded ${bytes.hex()}" }
                perPart[c.str("part")] = perPart.getValue(c.str("part")) + 1
            } catch (e: Throwable) {
                failures.add("${c["name"]}: $e")
            }
        }
        expect(failures.isEmpty()) { failures.joinToString("; ") }
        expect(perPart.values.sum() == cases.size) { "checked ${perPart.values.sum()} of ${cases.size}" }
        expect(perPart.values.all { it > 0 }) { "a part has no cases: $perPart" }
        println("records.json: ${cases.size} of ${cases.size} cases checked (key ${perPart["key"]}, registration value ${perPart["registration value"]}, lease value ${perPart["lease value"]})")
    }
    check("records.json: every malformed entry is refused with its part") {
        val malformed = load(dir, "records.json")["malformed"].list()
        expect(malformed.isNotEmpty()) { "records.json has no malformed entries" }
        val perPart = parts.associateWith { 0 }.toMutableMap()
        val failures = mutableListOf<String>()
        for (m in malformed.map { it.obj() }) {
            val part = m.str("part")
            try {
                decode(part, hex(m.str("hex")))
                failures.add("${m["name"]}: decoded")
            } catch (e: KrabkaException) {
                val ok = when (part) {
                    "key" -> e is KrabkaException.MalformedKey
                    "registration value" -> e is KrabkaException.MalformedRegistration
                    else -> e is KrabkaException.MalformedLease
                }
                if (!ok || errorKind(e) != ErrorKind.FORMAT) {
                    failures.add("${m["name"]}: ${e::class.simpleName}, expected the $part case")
                } else {
                    perPart[part] = perPart.getValue(part) + 1
                }
            }
        }
        expect(failures.isEmpty()) { failures.joinToString("; ") }
        expect(perPart.values.sum() == malformed.size) { "checked ${perPart.values.sum()} of ${malformed.size}" }
        expect(perPart.values.all { it > 0 }) { "a part has no malformed entries: $perPart" }
        println("records.json: ${malformed.size} of ${malformed.size} malformed entries refused with their part (key ${perPart["key"]}, registration value ${perPart["registration value"]}, lease value ${perPart["lease value"]})")
    }
    check("partitions.json: murmur2 and the partition of every role") {
        val cases = load(dir, "partitions.json")["cases"].list().map { it.obj() }
        expect(cases.isNotEmpty()) { "partitions.json has no cases" }
        var checked = 0
        val failures = mutableListOf<String>()
        for (c in cases) {
            val hash = murmur2(c.str("role").toByteArray(Charsets.UTF_8))
            val p = rolePartition(c.str("role"), c.int("partitions"))
            if (hash != c.int("murmur2") || p != c.int("partition")) {
                failures.add("${c["role"]} in ${c["partitions"]}: murmur2 $hash partition $p")
            } else {
                checked++
            }
        }
        expect(failures.isEmpty()) { failures.take(20).joinToString("; ") }
        expect(checked == cases.size) { "checked $checked of ${cases.size}" }
        expect(cases.any { it.int("murmur2") < 0 }) { "a negative hash must be among the cases" }
        println("partitions.json: $checked of ${cases.size} cases checked")
    }
    check("tokens.json: the order of every pair, both ways") {
        val cases = load(dir, "tokens.json")["cases"].list().map { it.obj() }
        expect(cases.isNotEmpty()) { "tokens.json has no cases" }
        val want = mapOf("less" to -1, "equal" to 0, "greater" to 1)
        fun token(t: Map<String, Any?>) = FencingToken(t.i64("producer_id"), t.int("producer_epoch").toShort())
        var checked = 0
        val seen = mutableSetOf<String>()
        val failures = mutableListOf<String>()
        for (c in cases) {
            val a = token(c["a"].obj())
            val b = token(c["b"].obj())
            val order = c.str("order")
            val w = want.getValue(order)
            if (compareTokens(a, b).toInt() != w || compareTokens(b, a).toInt() != -w || (a == b) != (order == "equal")) {
                failures.add("$a vs $b: ${compareTokens(a, b)}, expected $order")
            } else {
                checked++
                seen.add(order)
            }
        }
        expect(failures.isEmpty()) { failures.joinToString("; ") }
        expect(checked == cases.size) { "checked $checked of ${cases.size}" }
        expect(seen == setOf("less", "equal", "greater")) { "orders seen: $seen" }
        expect(noEpoch() == FencingToken(-1L, (-1).toShort()) && isNoEpoch(noEpoch())) { "NO_EPOCH is (-1, -1)" }
        println("tokens.json: $checked of ${cases.size} cases checked")
    }
}

// ---- refused arguments ----

fun arguments() {
    check("i64 fields keep 64 bits") {
        val l = Lease("m", FencingToken(Long.MAX_VALUE, Short.MAX_VALUE), Long.MIN_VALUE, -1L)
        expect(decodeLease(encodeLease(l)) == l) { "round trip of extreme values" }
    }
    check("encode refuses what the layout cannot hold, naming the part and field") {
        val e = throws<KrabkaException.Encode> { encodeKey(Key(KeyKind.REGISTRATION, "", "m")) }
        expect(e.part == "key" && e.field == "role") { "part ${e.part} field ${e.field}" }
        val e2 = throws<KrabkaException.Encode> { encodeKey(Key(KeyKind.LEASE, "orders", "m")) }
        expect(e2.part == "key" && e2.field == "member") { "part ${e2.part} field ${e2.field}" }
        val e3 = throws<KrabkaException.Encode> { encodeLease(Lease("x".repeat(40000), noEpoch(), 0, 0)) }
        expect(e3.part == "lease value" && e3.field == "member") { "part ${e3.part} field ${e3.field}" }
        expect(errorKind(e3) == ErrorKind.ENCODE) { "kind ${errorKind(e3)}" }
    }
    check("rolePartition refuses an empty role and a count below 1") {
        throws<KrabkaException.InvalidArgument> { rolePartition("", 16) }
        val e = throws<KrabkaException.InvalidArgument> { rolePartition("orders", 0) }
        expect(e.detail.contains("partitions")) { e.detail }
        expect(rolePartition("orders", 16) == 12) { "orders in 16" }
    }
    check("a client refuses bad settings and options with clear messages") {
        val e = throws<KrabkaException.InvalidArgument> { Client(mapOf()) }
        expect(e.detail.contains("bootstrap")) { e.detail }
        val e2 = throws<KrabkaException.InvalidArgument> { Client(mapOf("bootstrap.servers" to "127.0.0.1:1", "no.such.setting" to "1")) }
        expect(e2.detail.contains("no.such.setting")) { e2.detail }
        val e3 = throws<KrabkaException.InvalidArgument> { Client(mapOf("bootstrap.servers" to "127.0.0.1:1"), ClientOptions(partitions = 0)) }
        expect(e3.detail == "partitions must be an integer from 1 to 2147483647, got 0") { e3.detail }
        val e4 = throws<KrabkaException.InvalidArgument> { Client(mapOf("bootstrap.servers" to "127.0.0.1:1"), ClientOptions(connectTimeout = -1.0)) }
        expect(e4.detail == "connect_timeout must be a positive number of seconds, got -1") { e4.detail }
    }
    check("acquire refuses bad timings before any I/O") {
        Client(mapOf("bootstrap.servers" to "127.0.0.1:1"), ClientOptions(partitions = 4)).use { c ->
            expect(c.partitions() == 4) { "partitions ${c.partitions()}" }
            val e = throws<KrabkaException.InvalidArgument> {
                runBlocking { c.acquire("r", "m", AcquireOptions(leaseDuration = -1.0)) }
            }
            expect(e.detail == "lease_duration must be a positive number of seconds, got -1") { e.detail }
            val e2 = throws<KrabkaException.InvalidArgument> {
                runBlocking { c.acquire("r", "m", AcquireOptions(leaseDuration = 3.0, renewInterval = 10.0)) }
            }
            expect(e2.detail.contains("renew interval")) { e2.detail }
            val e3 = throws<KrabkaException.InvalidArgument> {
                runBlocking { c.ensureStateTopic(TopicOptions(replicationFactor = 1, minInsyncReplicas = 2)) }
            }
            expect(e3.detail == "min_insync_replicas must be an integer from 1 to 1, got 2") { e3.detail }
            c.shutdown()
            expect(c.isShutDown()) { "shut down" }
            throws<KrabkaException.InvalidArgument> { runBlocking { c.describeLeadership("r") } }
        }
    }
}

// ---- leadership on a real Kafka ----

fun kafka(bootstrap: String, topic: String) = runBlocking {
    val settings = mapOf("bootstrap.servers" to bootstrap)
    val role = "uniffi-kotlin-test-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    val timings = AcquireOptions(leaseDuration = 3.0, renewInterval = 1.0, challengeStagger = 0.5)
    Client(settings).use { client ->
        check("the state topic exists (development shape)") {
            runBlocking {
                val r = client.ensureStateTopic(TopicOptions(development = true))
                expect(r.partitions == client.partitions() && r.cleanupPolicy == "compact") { "$r" }
            }
        }
        check("a role nobody took reports NO_EPOCH") {
            runBlocking {
                val status = client.describeLeadership(role)
                expect(isNoEpoch(status.token()) && !status.authoritative(status.token())) { "${status.token()}" }
            }
        }
        var first: Leadership? = null
        check("acquire: the token, describe agrees, role state shows the lease") {
            runBlocking {
                val a = client.acquire(role, "member-a", timings)
                first = a
                val token = a.token()
                expect(!isNoEpoch(token) && a.isHeld() && a.role() == role && a.member() == "member-a") { "$token" }
                expect(a.partition() == rolePartition(role, client.partitions())) { "partition ${a.partition()}" }
                expect(a.leaseLeft() > 0.0 && a.ended() == null) { "lease left ${a.leaseLeft()}" }
                val status = client.describeLeadership(role)
                expect(status.authoritative(token)) { "describe ${status.token()} vs $token" }
                val state = client.describeRoleState(role)
                expect(state.lease?.member == "member-a" && state.lease?.token == token) { "$state" }
                expect(state.roster.any { it.member == "member-a" }) { "roster ${state.roster}" }
                println("member-a leads $role with token $token")
            }
        }
        check("a guarded write commits") {
            runBlocking {
                val a = first ?: throw AssertionError("no leadership")
                a.write(listOf(OutRecord(topic = topic, value = "from member-a".toByteArray(), key = role.toByteArray(),
                    headers = listOf(Header("token", a.token().toString().toByteArray())))))
            }
        }
        check("a second member takes over after resign; the old token is superseded") {
            runBlocking {
                val a = first ?: throw AssertionError("no leadership")
                val old = a.token()
                Client(settings).use { other ->
                    val second = async { other.acquire(role, "member-b", timings) }
                    // member-b registers and waits behind the holder.
                    inRoster(other, role, "member-b")
                    expect(!second.isCompleted) { "member-b must wait while member-a holds the role" }
                    val stream = a.events()
                    val events = async { drain(stream) }
                    a.resign()
                    val end = withTimeout(10_000) { a.wait() }
                    expect(end.kind == ErrorKind.RESIGNED && end.error is KrabkaException.Resigned) { "ended: $end" }
                    expect(!a.isHeld()) { "still held after resign" }
                    val kinds = withTimeout(10_000) { events.await() }.map { it.kind }
                    expect("resigned" in kinds && kinds.last() == "deregistered") { "member-a's events after subscribing: $kinds" }
                    val b = withTimeout(30_000) { second.await() }
                    val token = b.token()
                    expect(compareTokens(token, old).toInt() == 1) { "new token $token not after $old" }
                    val status = other.describeLeadership(role)
                    expect(status.authoritative(token) && !status.authoritative(old)) { "describe ${status.token()}" }
                    b.write(listOf(OutRecord(topic = topic, value = "from member-b".toByteArray())))
                    val late = throws<KrabkaException> { runBlocking { a.write(listOf(OutRecord(topic = topic, value = "late".toByteArray()))) } }
                    expect(late !is KrabkaException.InvalidArgument) { "a write after the term: $late" }
                    println("member-b took over with token $token; member-a's late write: ${late::class.simpleName}")
                    // A third member's acquire, cancelled while it waits, returns
                    // promptly and leaves the roster.
                    Client(settings).use { third ->
                        val waiting = launch { third.acquire(role, "member-c", timings) }
                        inRoster(other, role, "member-c")
                        withTimeout(10_000) { waiting.cancelAndJoin() }
                        withTimeout(20_000) {
                            while (other.describeRoleState(role).roster.any { it.member == "member-c" }) delay(200)
                        }
                    }
                    b.resign()
                    expect(b.ended()?.kind == ErrorKind.RESIGNED) { "b ended: ${b.ended()}" }
                    b.close()
                }
                a.close()
            }
        }
        check("close() of a held leadership resigns it: a standby takes over at once, not a lease later") {
            runBlocking {
                val slow = AcquireOptions(leaseDuration = 15.0, renewInterval = 3.0, challengeStagger = 0.5)
                val closing = "$role-close"
                val held = client.acquire(closing, "member-a", slow)
                val old = held.token()
                Client(settings).use { other ->
                    val second = async { other.acquire(closing, "member-b", slow) }
                    inRoster(other, closing, "member-b")
                    expect(!second.isCompleted) { "member-b must wait while member-a holds the role" }
                    val closedAt = System.nanoTime()
                    held.use { }   // what a `use { }` block does at its end
                    val b = withTimeout(30_000) { second.await() }
                    val took = (System.nanoTime() - closedAt) / 1e9
                    expect(took < 5.0) { "member-b took over ${"%.1f".format(took)} s after close(), the lease is 15 s" }
                    expect(compareTokens(b.token(), old).toInt() == 1) { "new token ${b.token()} not after $old" }
                    println("close() handed over in ${"%.2f".format(took)} s")
                    b.resign()
                    b.close()
                }
            }
        }
    }
}

// Waits (at most 20 s) until `member` is in the roster of `role`, as `client` reads it.
suspend fun inRoster(client: Client, role: String, member: String) = withTimeout(20_000) {
    while (client.describeRoleState(role).roster.none { it.member == member }) delay(100)
}

// Every event of a stream, to its end (the term's end).
suspend fun drain(stream: EventStream): List<LeadershipEvent> {
    val out = mutableListOf<LeadershipEvent>()
    while (true) out.add(stream.next() ?: return out)
}

// A newer epoch of the role, minted behind its holder's back with Kafka's
// own tool (`kafka-transactions.sh forceTerminateTransaction`, through
// ci/kafka.sh): the holder is now deposed without knowing it.
fun mintNewerEpoch(bootstrap: String, role: String) {
    val root = System.getenv("KRABKA_ROOT") ?: throw AssertionError("KRABKA_ROOT is not set (ci/uniffi.sh sets it)")
    val p = ProcessBuilder("bash", "$root/ci/kafka.sh", "tool", "transactions", "--bootstrap-server", bootstrap,
        "forceTerminateTransaction", "--transactionalId", role).redirectErrorStream(true).start()
    val out = p.inputStream.readBytes().decodeToString()
    expect(p.waitFor() == 0) { "forceTerminateTransaction failed: $out" }
}

fun fenced(bootstrap: String, topic: String) = runBlocking {
    val role = "uniffi-kotlin-fenced-${ProcessHandle.current().pid()}-${System.currentTimeMillis()}"
    // A 30 s lease renewed every 10 s: no renewal meets the newer epoch
    // first; the guarded write does.
    val timings = AcquireOptions(leaseDuration = 30.0, renewInterval = 10.0, challengeStagger = 0.5)
    Client(mapOf("bootstrap.servers" to bootstrap)).use { client ->
        check("a deposed leader's guarded write fails with Fenced, and the term ends fenced") {
            runBlocking {
                val a = client.acquire(role, "member-a", timings)
                val token = a.token()
                val events = async { drain(a.events()) }
                a.write(listOf(OutRecord(topic = topic, value = "before".toByteArray())))
                mintNewerEpoch(bootstrap, role)
                val status = client.describeLeadership(role)
                expect(!status.authoritative(token) && compareTokens(status.token(), token).toInt() == 1) {
                    "describe ${status.token()} after minting past $token"
                }
                val e = throws<KrabkaException.Fenced> {
                    runBlocking { a.write(listOf(OutRecord(topic = topic, value = "after".toByteArray()))) }
                }
                expect(errorKind(e) == ErrorKind.FENCED && !isRetryable(ErrorKind.FENCED)) { "kind ${errorKind(e)}" }
                val end = withTimeout(10_000) { a.wait() }
                expect(end.kind == ErrorKind.FENCED && end.error is KrabkaException.Fenced) { "ended: $end" }
                expect(!a.isHeld()) { "still held after the fence" }
                val seen = withTimeout(10_000) { events.await() }
                val fence = seen.lastOrNull { it.kind == "fenced" }
                expect(fence != null && fence.error is KrabkaException.Fenced) { "events: ${seen.map { it.kind }}" }
                println("member-a fenced: ${e.detail}")
                a.close()
            }
        }
    }
}

fun main(args: Array<String>) {
    val golden = File(args.getOrElse(0) { "golden" })
    golden(golden)
    arguments()
    val bootstrap = System.getenv("KRABKA_BOOTSTRAP")
    val topic = System.getenv("KRABKA_UNIFFI_TOPIC") ?: "krabka-uniffi-results"
    if (bootstrap.isNullOrEmpty()) {
        println("KRABKA_BOOTSTRAP is not set: the leadership tests need a Kafka")
        failed++
    } else {
        kafka(bootstrap, topic)
        fenced(bootstrap, topic)
    }
    println("$passed passed, $failed failed")
    kotlin.system.exitProcess(if (failed == 0) 0 else 1)
}
