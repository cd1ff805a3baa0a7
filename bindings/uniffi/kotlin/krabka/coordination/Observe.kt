// Hand-written Kotlin shipped with the generated bindings (package
// krabka.coordination): compiled with the generated krabka_coordination.kt
// by ci/uniffi.sh and into the release jar by ci/release.sh. It adds Kotlin
// idioms over the generated API only; every rule is the core's.
package krabka.coordination

import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow

/**
 * The views of [roles] as a cold [Flow]: each collection opens its own
 * [Observer] (`observe(roles, renewals)`) and emits its views in order,
 * starting with one [Change.INITIAL] view per role. The collection ends when
 * the observer ends, and throws the [KrabkaException] that ended it; when the
 * collector is cancelled or stops early (`first`, `take`), the observer is
 * stopped and closed. Refused roles throw [KrabkaException.InvalidArgument]
 * when the collection starts.
 */
fun Client.observeFlow(roles: List<String>, renewals: Boolean = false): Flow<RoleView> = flow {
    val observer = observe(roles, renewals)
    try {
        while (true) emit(observer.next() ?: break)
    } finally {
        observer.stop()
        observer.close()
    }
}

/** [observeFlow] of the roles given one by one. */
fun Client.observeFlow(vararg roles: String, renewals: Boolean = false): Flow<RoleView> =
    observeFlow(roles.toList(), renewals)
