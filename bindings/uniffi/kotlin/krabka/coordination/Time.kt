// Hand-written Kotlin shipped with the generated bindings (package
// krabka.coordination): java.time values over the generated API's numbers
// (durations in seconds as Double, times in epoch milliseconds as Long).
// Overloads and extensions only: the generated API is unchanged, and every
// check of a value is the core's (a negative lease is refused by acquire,
// naming it, as with seconds).
@file:JvmName("KrabkaTime")
package krabka.coordination

import java.time.Duration
import java.time.Instant

/** [d] in seconds, as the generated API takes durations. */
internal fun seconds(d: Duration?): Double? = d?.let { it.seconds + it.nano / 1e9 }

/** [s] seconds as a [Duration] (nanosecond precision). */
internal fun duration(s: Double): Duration = Duration.ofNanos((s * 1e9).toLong())

/** Acquire timings as [Duration]s; left out: the core's defaults (30 s, 10 s, 5 s). */
fun AcquireOptions.Companion.of(
    leaseDuration: Duration? = null,
    renewInterval: Duration? = null,
    challengeStagger: Duration? = null,
) = AcquireOptions(seconds(leaseDuration), seconds(renewInterval), seconds(challengeStagger))

/** Client options with the timeouts as [Duration]s; left out: the core's defaults. */
fun ClientOptions.Companion.of(
    partitions: Int? = null,
    stateTopic: String? = null,
    connectTimeout: Duration? = null,
    operationTimeout: Duration? = null,
    oauthTokenProvider: OAuthTokenProvider? = null,
) = ClientOptions(partitions, stateTopic, seconds(connectTimeout), seconds(operationTimeout), oauthTokenProvider)

/** The lease time left on this member's monotonic clock (zero once the term ended). */
fun Leadership.leaseRemaining(): Duration = duration(leaseLeft())

/** When the lease was granted. */
val Lease.grantedAtInstant: Instant get() = Instant.ofEpochMilli(grantedAt)

/** When the lease runs out unless renewed. */
val Lease.deadlineInstant: Instant get() = Instant.ofEpochMilli(deadline)

/** When the observer read this view. */
val RoleView.atInstant: Instant get() = Instant.ofEpochMilli(at)

/** When the token expires, as an [OAuthToken] wants it ([Instant] for `lifetimeMs`). */
fun OAuthToken.Companion.of(token: String, expiresAt: Instant, principal: String? = null) =
    OAuthToken(token, expiresAt.toEpochMilli(), principal)
