// Hand-written Kotlin shipped with the generated bindings: the member's
// events as a sealed class and as Flows, in the package
// krabka.coordination.events. It is the one LeadershipEvent type: the
// generated record it maps is krabka.coordination.EventRecord (renamed for
// Kotlin in uniffi.toml). The mapping only renames and retypes the record's
// fields (epoch milliseconds as Instant, seconds as Duration); every kind and
// field is the core's.
package krabka.coordination.events

import java.time.Duration
import java.time.Instant
import krabka.coordination.AcquireEvents
import krabka.coordination.EventRecord
import krabka.coordination.EventStream
import krabka.coordination.FencingToken
import krabka.coordination.KrabkaException
import krabka.coordination.Leadership
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow

/**
 * One event of a member, one subclass per kind (the record's `kind`:
 * `registered`, `waiting`, ...); [Unknown] for a kind newer than this
 * binding. [role], [member] and [at] (when it happened) are every kind's.
 */
sealed class LeadershipEvent {
    abstract val role: String
    abstract val member: String
    abstract val at: Instant

    /** The member registered its candidacy at [offset] of [partition]. */
    data class Registered(override val role: String, override val member: String, override val at: Instant,
                          val partition: Int, val offset: Long) : LeadershipEvent()

    /** Waiting its turn as challenger [rank], until [challengeAt]; behind
     * [holder]'s lease (token [holderToken]) when one is held. */
    data class Waiting(override val role: String, override val member: String, override val at: Instant,
                       val rank: Long, val challengeAt: Instant, val holder: String?, val holderToken: FencingToken?) : LeadershipEvent()

    /** Held back: an open transaction or a member ahead keeps it from challenging yet. */
    data class HeldBack(override val role: String, override val member: String, override val at: Instant) : LeadershipEvent()

    /** Challenging for the role. */
    data class Challenging(override val role: String, override val member: String, override val at: Instant) : LeadershipEvent()

    /** Lost the challenge to a newer epoch; [token] was the member's. */
    data class LostChallenge(override val role: String, override val member: String, override val at: Instant,
                             val token: FencingToken) : LeadershipEvent()

    /** Elected with [token]; the lease was granted at [grantedAt] and runs until [deadline]. */
    data class Elected(override val role: String, override val member: String, override val at: Instant,
                       val token: FencingToken, val grantedAt: Instant, val deadline: Instant) : LeadershipEvent()

    /** A renewal committed: the lease runs until [deadline]. */
    data class Renewed(override val role: String, override val member: String, override val at: Instant,
                       val deadline: Instant) : LeadershipEvent()

    /** [failures] renewals in a row failed, the last with [error]. */
    data class RenewalFailing(override val role: String, override val member: String, override val at: Instant,
                              val failures: Int, val error: KrabkaException?) : LeadershipEvent()

    /**
     * A guarded write whose outcome was unknown was resolved: [committed] is
     * true when it committed (its records are visible), false when it did not.
     */
    data class WriteResolved(override val role: String, override val member: String, override val at: Instant,
                             val committed: Boolean) : LeadershipEvent()

    /** A newer epoch fenced the member: the term is over. */
    data class Fenced(override val role: String, override val member: String, override val at: Instant,
                      val error: KrabkaException?) : LeadershipEvent()

    /** The member's own lease ran out: the term is over. */
    data class LeaseExpired(override val role: String, override val member: String, override val at: Instant) : LeadershipEvent()

    /** The term ended with [error]. */
    data class Ended(override val role: String, override val member: String, override val at: Instant,
                     val error: KrabkaException?) : LeadershipEvent()

    /** Resigned; [cleared]: the lease record was cleared. */
    data class Resigned(override val role: String, override val member: String, override val at: Instant,
                        val cleared: Boolean) : LeadershipEvent()

    /** The member's registration was removed. */
    data class Deregistered(override val role: String, override val member: String, override val at: Instant) : LeadershipEvent()

    /** [what] failed for the [attempt]th time in a row with [error]; retried in [retryIn]. */
    data class Retrying(override val role: String, override val member: String, override val at: Instant,
                        val what: String, val attempt: Int, val retryIn: Duration, val error: KrabkaException?) : LeadershipEvent()

    /** A kind newer than this binding: [kind] is its name, [record] all its fields. */
    data class Unknown(override val role: String, override val member: String, override val at: Instant,
                       val kind: String, val record: EventRecord) : LeadershipEvent()

    companion object {
        /** The event of the generated record [r] (see the class documentation). */
        @JvmStatic
        fun of(r: EventRecord): LeadershipEvent {
            val at = Instant.ofEpochMilli(r.at)
            fun ms(v: Long?) = v?.let(Instant::ofEpochMilli)
            // A field the kind always has but the record lacks: Unknown, never a throw.
            val unknown = Unknown(r.role, r.member, at, r.kind, r)
            return when (r.kind) {
                "registered" -> Registered(r.role, r.member, at, r.partition ?: return unknown, r.offset ?: return unknown)
                "waiting" -> Waiting(r.role, r.member, at, r.rank ?: return unknown, ms(r.challengeAt) ?: return unknown,
                    r.holder, r.token)
                "held_back" -> HeldBack(r.role, r.member, at)
                "challenging" -> Challenging(r.role, r.member, at)
                "lost_challenge" -> LostChallenge(r.role, r.member, at, r.token ?: return unknown)
                "elected" -> Elected(r.role, r.member, at, r.token ?: return unknown, ms(r.grantedAt) ?: return unknown,
                    ms(r.deadline) ?: return unknown)
                "renewed" -> Renewed(r.role, r.member, at, ms(r.deadline) ?: return unknown)
                "renewal_failing" -> RenewalFailing(r.role, r.member, at, r.failures ?: return unknown, r.error)
                "write_resolved" -> WriteResolved(r.role, r.member, at, r.committed ?: return unknown)
                "fenced" -> Fenced(r.role, r.member, at, r.error)
                "lease_expired" -> LeaseExpired(r.role, r.member, at)
                "ended" -> Ended(r.role, r.member, at, r.error)
                "resigned" -> Resigned(r.role, r.member, at, r.cleared ?: return unknown)
                "deregistered" -> Deregistered(r.role, r.member, at)
                "retrying" -> Retrying(r.role, r.member, at, r.what ?: return unknown, r.attempt ?: return unknown,
                    Duration.ofNanos(((r.retryIn ?: return unknown) * 1e9).toLong()), r.error)
                else -> unknown
            }
        }
    }
}

/** The event of this record (see [LeadershipEvent]). */
fun EventRecord.toEvent(): LeadershipEvent = LeadershipEvent.of(this)

/**
 * The member's events of this term from now on, as a cold [Flow]: each
 * collection subscribes (`events()`) and ends once the term ended and its
 * last events were emitted (`resigned`, `fenced`, ...). Cancelling the
 * collection loses nothing that was not emitted.
 */
fun Leadership.eventFlow(): Flow<LeadershipEvent> = flow {
    val stream = events()
    try {
        while (true) emit((stream.next() ?: break).toEvent())
    } finally {
        stream.close()
    }
}

/** The events of this stream as a [Flow] (collect it once: the stream is consumed). */
fun EventStream.asFlow(): Flow<LeadershipEvent> = flow {
    while (true) emit((next() ?: break).toEvent())
}

/**
 * The events of the acquire this [AcquireEvents] is given to, from the
 * member's registration on (`Registered`, `Waiting` with the holder, ...),
 * then the term's, as a [Flow]; collect it once, alongside the acquire:
 *
 * ```
 * val events = AcquireEvents()
 * launch { events.asFlow().collect { println(it) } }
 * val leadership = client.acquire(role, member, options, events)
 * ```
 */
fun AcquireEvents.asFlow(): Flow<LeadershipEvent> = flow {
    while (true) emit((next() ?: break).toEvent())
}
