/*
 * krabka_coordination.h: the C ABI of krabka-coordination (leader election,
 * leases and fencing tokens on Apache Kafka).
 *
 * CONVENTIONS (every function follows them; exceptions are stated where they
 * apply):
 *
 * Results. Every fallible function returns a krabka_result: 0
 *   (KRABKA_RESULT_OK) or a code with a fixed value. Codes 1 to 10 are the
 *   core's error kinds, with the core's numbers; 100 and up are the ABI's own.
 *   Use krabka_result_name() for the stable name.
 *
 * Errors. The last parameter of a fallible function is a `krabka_error *err`,
 *   a record the caller owns, or NULL for no report. The library copies the
 *   message into the caller's buffer (cut to fit, NUL-terminated) and reports
 *   its whole length and the record part of a FORMAT or ENCODE error. It keeps
 *   no pointer to the record after the call.
 *
 * Out-parameters. Outputs go through pointers the caller passes. A handle
 *   out-parameter (`T **out`) is set to NULL first, and to a new handle on
 *   success. Byte outputs go to a caller-owned buffer with its capacity; the
 *   length out-parameter gets the length needed even when the buffer is too
 *   small (KRABKA_RESULT_BUFFER_TOO_SMALL, nothing written).
 *
 * NULL. A NULL pointer argument is refused with KRABKA_RESULT_NULL_ARGUMENT
 *   (the message names it) and never dereferenced, except: `err` (no report),
 *   the `options` of a call (the defaults), a callback or a cancellation
 *   (none), `user_data` (passed as it is), an optional byte range given as NULL with length 0
 *   (absent), and arrays given as NULL with count 0 (empty). A length above
 *   the largest object (SIZE_MAX / 2) is KRABKA_RESULT_INVALID_ARGUMENT.
 *
 * Strings. Role names, member ids, topics, settings: NUL-terminated UTF-8.
 *   Record fields of the codec, which may hold NUL bytes: pointer and length,
 *   not NUL-terminated. Text that is not UTF-8 is
 *   KRABKA_RESULT_INVALID_ARGUMENT. Every input is borrowed for the call only.
 *
 * Ownership. Handles (krabka_client, krabka_leadership, krabka_observer,
 *   krabka_key, krabka_registration, krabka_lease, krabka_role_state,
 *   krabka_topic_report, krabka_test_cluster, krabka_test_process,
 *   krabka_test_writes) are opaque, owned by
 *   the caller from the call that made them until their *_free, which accepts
 *   NULL. A pointer read out of a handle (a field's string) is borrowed from
 *   it and valid until it is freed. Static strings (names) are never freed.
 *
 * Option structs. Every struct the caller fills for a call
 *   (krabka_client_options, krabka_leadership_options, krabka_topic_options,
 *   krabka_consumed_offsets)
 *   begins with `size_t struct_size`: the size the caller was compiled with,
 *   so that fields are added at the end without breaking a compiled caller.
 *   Fill one with its init macro, then set fields by name:
 *       krabka_topic_options o; KRABKA_TOPIC_OPTIONS_INIT(&o); o.development = true;
 *   (krabka_X_options_init(o, sizeof *o) writes the defaults for at most that
 *   many bytes and sets struct_size). The library checks it at every call:
 *   0, below the first version's size or between two versions' sizes is
 *   KRABKA_RESULT_INVALID_ARGUMENT naming the struct and the sizes; an older
 *   version's size (an older caller) gives the later fields their
 *   defaults; a larger size (a newer caller) is accepted when the bytes past
 *   what the library knows are all zero (new fields left unset), else
 *   refused naming the struct. Never initialise one with a positional
 *   `{...}` list. krabka_client_options is at version 2 (the OAuth fields).
 *
 * Panics. Every function catches a panic of the library and returns
 *   KRABKA_RESULT_PANIC (a *_free swallows it): no unwinding crosses the ABI.
 *
 * Blocking. The codec, token and getter functions never block. The client's
 *   and the leadership's operations that talk to Kafka block the calling
 *   thread (each says for how long at most) while the work runs on the
 *   library's own threads (named krabka-rt), started by the first client.
 *   Event callbacks run on a thread of their own (krabka-events); see
 *   krabka_client_acquire. An observer's callbacks run on a thread of its
 *   own (krabka-observe); see krabka_client_observe. The leader loop's work
 *   runs on the thread that called krabka_client_lead. The log callback
 *   runs on the library's log thread (krabka-log); see
 *   krabka_set_log_callback. The OAuth token callback runs on the library's
 *   threads; see krabka_oauth_token_callback.
 *
 * Threads. Codec handles are immutable: read them from any threads at once.
 *   krabka_client and krabka_leadership may be used from any number of
 *   threads at once. No handle may be freed while another thread uses it.
 *   Handles belong to the process that made them: in a forked child every
 *   call on them returns KRABKA_RESULT_FATAL and freeing them leaks them.
 */

#ifndef KRABKA_COORDINATION_H
#define KRABKA_COORDINATION_H

/* Generated by cbindgen from bindings/c/src (see bindings/c/cbindgen.toml): do not edit. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The init macros of the option structs: the defaults, with struct_size set
 * to the size this header gives the struct (see "Option structs" above). */
#define KRABKA_CLIENT_OPTIONS_INIT(p) krabka_client_options_init((p), sizeof *(p))
#define KRABKA_LEADERSHIP_OPTIONS_INIT(p) krabka_leadership_options_init((p), sizeof *(p))
#define KRABKA_TOPIC_OPTIONS_INIT(p) krabka_topic_options_init((p), sizeof *(p))
#define KRABKA_CONSUMED_OFFSETS_INIT(p) krabka_consumed_offsets_init((p), sizeof *(p))

// A timeout that means "no limit".
#define KRABKA_NO_TIMEOUT -1.0

// The longest wire form of a token, its final NUL included
// (`"-9223372036854775808/-32768"`): a buffer of this size always holds
// what `krabka_token_format` writes.
#define KRABKA_TOKEN_TEXT_MAX 28

// The partition value that lets the producer's partitioner choose.
#define KRABKA_ANY_PARTITION -1

// The `offset` of a `krabka_committed_offset` for a partition the group
// has committed nothing for (start where your reset policy says).
#define KRABKA_NO_OFFSET -1

// The result of every fallible function: `KRABKA_RESULT_OK` (0), one of the
// core's error kinds (1 to 10, the values of the core's `ErrorKind`), or one
// of the ABI's own (100 and up). The values never change meaning; new codes
// may be added, so keep a default branch when switching on one.
enum krabka_result
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
    // Success.
    KRABKA_RESULT_OK = 0,
    // FORMAT: malformed record bytes. The error record's `part` names the
    // record part that failed to decode; the message the field, the byte
    // offset and the reason.
    KRABKA_RESULT_FORMAT = 1,
    // ENCODE: a value the frozen record layout cannot hold (an empty or
    // over-long role or member). The error record's `part` names the part;
    // the message the field.
    KRABKA_RESULT_ENCODE = 2,
    // INVALID_ARGUMENT: an argument, option or setting that is refused; the
    // message names it and the value.
    KRABKA_RESULT_INVALID_ARGUMENT = 3,
    // FENCED: a newer epoch of the role exists; stop the role's work.
    KRABKA_RESULT_FENCED = 4,
    // TRANSIENT: a broker unreachable, a timeout, a coordinator moving; the
    // operation may be retried.
    KRABKA_RESULT_TRANSIENT = 5,
    // FATAL: a failure retrying will not mend (authorization, configuration,
    // a topic of the wrong shape, a handle used in a forked child).
    KRABKA_RESULT_FATAL = 6,
    // RESIGNED: the leadership was given up by `krabka_leadership_resign`.
    KRABKA_RESULT_RESIGNED = 7,
    // CANCELLED: the operation was cancelled before it finished.
    KRABKA_RESULT_CANCELLED = 8,
    // LEASE_EXPIRED: the leader's own lease ran out; stop the role's work,
    // including work done outside Kafka.
    KRABKA_RESULT_LEASE_EXPIRED = 9,
    // OUTCOME_UNKNOWN: a write whose commit was sent but not confirmed: it
    // may or may not have committed.
    KRABKA_RESULT_OUTCOME_UNKNOWN = 10,
    // An error of a kind the core added after this library was built.
    KRABKA_RESULT_ERROR = 99,
    // The ABI's own: a pointer argument that must not be NULL was NULL
    // (the message names it). Nothing was read or written.
    KRABKA_RESULT_NULL_ARGUMENT = 100,
    // The ABI's own: an output buffer is too small; its length
    // out-parameter holds the size needed. Nothing was written to it.
    KRABKA_RESULT_BUFFER_TOO_SMALL = 101,
    // The ABI's own: a wait with a timeout ended before what it waited for
    // (an acquire that was not won in time, a leadership still held).
    KRABKA_RESULT_TIMED_OUT = 102,
    // The ABI's own: the library panicked; the message says where. A bug:
    // please report it. The handles passed stay valid to free.
    KRABKA_RESULT_PANIC = 103,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum krabka_result krabka_result;
#else
typedef uint32_t krabka_result;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

// The record part a FORMAT or ENCODE error concerns.
enum krabka_part
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
    // No record part (every other error, and success).
    KRABKA_PART_NONE = 0,
    // The record key.
    KRABKA_PART_KEY = 1,
    // The value of a registration record.
    KRABKA_PART_REGISTRATION_VALUE = 2,
    // The value of a lease record.
    KRABKA_PART_LEASE_VALUE = 3,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum krabka_part krabka_part;
#else
typedef uint32_t krabka_part;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

// What happened to a member. The values never change meaning; the core
// may add kinds, which arrive as `KRABKA_EVENT_KIND_OTHER` with their name
// in `krabka_event.name`.
enum krabka_event_kind
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
    // A kind newer than this library (see `name`).
    KRABKA_EVENT_KIND_OTHER = 0,
    // `registered`: the registration record was appended (`partition`, `offset`).
    KRABKA_EVENT_KIND_REGISTERED = 1,
    // `waiting`: the member waits for its turn (`rank`, `challenge_at`;
    // behind a lease, `holder` and `token`).
    KRABKA_EVENT_KIND_WAITING = 2,
    // `held_back`: an open transaction holds the partition back.
    KRABKA_EVENT_KIND_HELD_BACK = 3,
    // `challenging`: the member's turn came; it mints the epoch.
    KRABKA_EVENT_KIND_CHALLENGING = 4,
    // `lost_challenge`: another member minted a newer epoch first (`token`).
    KRABKA_EVENT_KIND_LOST_CHALLENGE = 5,
    // `elected`: the member leads (`token`, `granted_at`, `deadline`).
    KRABKA_EVENT_KIND_ELECTED = 6,
    // `renewed`: a renewal committed (`deadline`).
    KRABKA_EVENT_KIND_RENEWED = 7,
    // `renewal_failing`: a renewal failed and is retried (`failures`, `error`).
    KRABKA_EVENT_KIND_RENEWAL_FAILING = 8,
    // `write_resolved`: an earlier OUTCOME_UNKNOWN write was resolved.
    KRABKA_EVENT_KIND_WRITE_RESOLVED = 9,
    // `fenced`: a newer epoch took the role (`error`). Ends the term.
    KRABKA_EVENT_KIND_FENCED = 10,
    // `lease_expired`: no renewal committed within the lease. Ends the term.
    KRABKA_EVENT_KIND_LEASE_EXPIRED = 11,
    // `ended`: the term ended for another reason (`error`). Ends the term.
    KRABKA_EVENT_KIND_ENDED = 12,
    // `resigned`: the member resigned (`cleared`).
    KRABKA_EVENT_KIND_RESIGNED = 13,
    // `deregistered`: the registration was removed.
    KRABKA_EVENT_KIND_DEREGISTERED = 14,
    // `retrying`: a step failed and is tried again (`what`, `attempt`,
    // `retry_in`, `error`).
    KRABKA_EVENT_KIND_RETRYING = 15,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum krabka_event_kind krabka_event_kind;
#else
typedef uint32_t krabka_event_kind;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

// A log level. `min_level` of `krabka_set_log_callback` is the least
// severe level delivered (`KRABKA_LOG_LEVEL_WARN`: errors and warnings).
enum krabka_log_level
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
    // Nothing (as a `min_level`: no record is delivered).
    KRABKA_LOG_LEVEL_OFF = 0,
    // An error.
    KRABKA_LOG_LEVEL_ERROR = 1,
    // A warning: something an operator should look at (a topic without a
    // quorum, renewals failing, a broker unreachable).
    KRABKA_LOG_LEVEL_WARN = 2,
    // What the library does (terms beginning and ending).
    KRABKA_LOG_LEVEL_INFO = 3,
    // Detail for debugging.
    KRABKA_LOG_LEVEL_DEBUG = 4,
    // Every step.
    KRABKA_LOG_LEVEL_TRACE = 5,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum krabka_log_level krabka_log_level;
#else
typedef uint32_t krabka_log_level;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

// Why a view was reported. The values never change meaning; the core may
// add changes, which arrive as `KRABKA_CHANGE_OTHER` with their name in
// `krabka_role_view.change_name`.
enum krabka_change
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
    // A change newer than this library (see `change_name`).
    KRABKA_CHANGE_OTHER = 0,
    // `initial`: the first view of the role, once its partition's
    // committed records were read.
    KRABKA_CHANGE_INITIAL = 1,
    // `elected`: a lease names a leader (member and token) the last view
    // did not: a new term, or a term back after its lease lapsed.
    KRABKA_CHANGE_ELECTED = 2,
    // `renewed`: the leader renewed (only when observing with renewals).
    KRABKA_CHANGE_RENEWED = 3,
    // `cleared`: a tombstone cleared the lease: the leader resigned.
    KRABKA_CHANGE_CLEARED = 4,
    // `lapsed`: the lease deadline passed without a renewal (observer's
    // clock, complete view): `lapsed` holds the lease, there is no leader.
    KRABKA_CHANGE_LAPSED = 5,
    // `roster`: members registered or left; the leader did not change.
    KRABKA_CHANGE_ROSTER = 6,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum krabka_change krabka_change;
#else
typedef uint32_t krabka_change;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

// The kind of a record key. The values are the layout's own kind codes.
enum krabka_key_kind
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
    // A member's registration (role and member).
    KRABKA_KEY_KIND_REGISTRATION = 0,
    // A role's lease (role only; the member is empty).
    KRABKA_KEY_KIND_LEASE = 1,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum krabka_key_kind krabka_key_kind;
#else
typedef uint32_t krabka_key_kind;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

// A cancellation (opaque): fire it to stop the acquires it was given, from
// any thread (typically a thread that waits for SIGTERM with `sigwait`).
// Made by `krabka_cancel_new`, freed by `krabka_cancel_free`. Thread safety:
// any number of threads may fire it and pass it to acquires at once;
// freeing it must not race with those. Firing is not async-signal-safe:
// do not call it from a signal handler.
typedef struct krabka_cancel krabka_cancel;

// A client (opaque): one set of Kafka clients shared by every role it
// acquires or describes. Made by `krabka_client_new`, freed by
// `krabka_client_free`.
//
// Thread safety: every function taking a `const krabka_client *` may be
// called from any number of threads at once. Freeing must not race with
// another call on the same client. A client belongs to the process that
// made it: in a forked child every call returns `KRABKA_RESULT_FATAL`.
typedef struct krabka_client krabka_client;

// A decoded record key (opaque). Made by `krabka_decode_key`, read with
// `krabka_key_get_fields`, freed with `krabka_key_free`. Immutable: any number
// of threads may read one at once; freeing it must not race with a read.
typedef struct krabka_key krabka_key;

// The held leadership of a role (opaque), from `krabka_client_acquire`.
// The library renews the lease in the background until the term ends
// (fenced, lease expired, resigned, or a fatal error).
//
// Thread safety: every function taking a `const krabka_leadership *` may be
// called from any number of threads at once (guarded writes are serialised
// with each other and with the renewals). `krabka_leadership_free` must not
// race with another call on the same leadership. A leadership belongs to
// the process that acquired it: in a forked child every call returns
// `KRABKA_RESULT_FATAL`.
typedef struct krabka_leadership krabka_leadership;

// A decoded lease value (opaque); like `krabka_key`.
typedef struct krabka_lease krabka_lease;

// One call of the token callback (opaque), valid only during the call:
// settle it once with `krabka_oauth_request_set_token` or
// `krabka_oauth_request_fail` before the callback returns.
typedef struct krabka_oauth_request krabka_oauth_request;

// A watch of roles (opaque), from `krabka_client_observe`; stopped by
// `krabka_observer_close`, freed by `krabka_observer_free`.
//
// Thread safety: `krabka_observer_close` may be called from any number of
// threads at once, and from the observer's own callbacks.
// `krabka_observer_free` must not race with another call on the observer.
// An observer belongs to the process that made it: in a forked child its
// functions do nothing and freeing it leaks it.
typedef struct krabka_observer krabka_observer;

// A decoded registration value (opaque); like `krabka_key`.
typedef struct krabka_registration krabka_registration;

// A role's roster and lease (opaque), from
// `krabka_client_describe_role_state`; freed by `krabka_role_state_free`.
// Immutable: any number of threads may read one at once.
typedef struct krabka_role_state krabka_role_state;

// The end of one term, as the work sees it (opaque, borrowed for the
// work's call): `krabka_term_ended` polls it, `krabka_term_wait` waits for
// it. It fires when the term ends (fenced, lease expired, resigned, a
// fatal error) or the loop is stopped; the work must then return.
typedef struct krabka_term_signal krabka_term_signal;

// An in-memory cluster and its manual clock (opaque): the core's state
// log and transaction coordinator with Kafka's epochs and fencing, no
// broker. Made by `krabka_test_cluster_new`, freed by
// `krabka_test_cluster_free` (its processes and their clients stay valid
// to use and must still be freed).
//
// Thread safety: every function taking a `const krabka_test_cluster *`
// may be called from any number of threads at once; freeing must not race
// with another call on it.
typedef struct krabka_test_cluster krabka_test_cluster;

// One process of a test cluster (opaque): the faults the test puts it
// through. Its client is the `krabka_client` that
// `krabka_test_cluster_process` returned with it. Freed by
// `krabka_test_process_free` (which frees nothing of the client's). Any
// thread.
typedef struct krabka_test_process krabka_test_process;

// The guarded writes a test cluster had committed (opaque), from
// `krabka_test_cluster_guarded_writes`; freed by `krabka_test_writes_free`.
// Immutable: any number of threads may read one at once.
typedef struct krabka_test_writes krabka_test_writes;

// What `krabka_client_check_state_topic` found (opaque): read it with
// `krabka_topic_report_get_fields` and `krabka_topic_report_warning`, free it
// with `krabka_topic_report_free`. Immutable: any number of threads may
// read one at once.
typedef struct krabka_topic_report krabka_topic_report;

// The OAUTHBEARER token callback: fetch a token (it may block, on an HTTP
// request to the identity provider) and settle `request` before returning.
// Called on a thread of the library's (never the caller's), one call at a
// time per client.
typedef void (*krabka_oauth_token_callback)(krabka_oauth_request *request, void *user_data);

// Frees a callback's `user_data`: called once, when the library no longer
// needs it.
typedef void (*krabka_user_data_free)(void *user_data);

// The client-wide options. Fill them with `KRABKA_CLIENT_OPTIONS_INIT(&o)`
// (or `krabka_client_options_init`), then change what you need by name.
// `struct_size` follows the size rule of the header's preamble.
typedef struct {
    // `sizeof(krabka_client_options)` as the caller was compiled with; set
    // by the init function (see the size rule).
    size_t struct_size;
    // The partition count of the state topic (default 16). Every member of
    // a role must pass the topic's real count.
    int32_t partitions;
    // The state topic's name, NUL-terminated, borrowed for the call; NULL
    // for `__coordination_state`.
    const char *state_topic;
    // Seconds the first contact with the cluster may take (default 10):
    // with no broker answering within it, an acquire or a describe fails
    // with `KRABKA_RESULT_TRANSIENT` naming the bootstrap address.
    double connect_timeout;
    // Seconds one client operation may take once the cluster answered
    // (default 30).
    double operation_timeout;
    // The OAUTHBEARER token callback (with `sasl.mechanism` `OAUTHBEARER`),
    // or NULL (the default) for none: see `krabka_oauth_token_callback`.
    // It is called with `oauth_user_data` on the library's threads, any of
    // them, so both must be usable from any thread. Added in version 2 of
    // the struct.
    krabka_oauth_token_callback oauth_token;
    // Passed to `oauth_token` as it is.
    void *oauth_user_data;
    // Called once with `oauth_user_data` when the library no longer needs
    // the callback (see `krabka_client_new`); NULL: nothing is called.
    krabka_user_data_free oauth_user_data_free;
} krabka_client_options;

// The timings of an acquire, in seconds. Fill them with
// `KRABKA_LEADERSHIP_OPTIONS_INIT(&o)` (the core's defaults: a 30 s lease
// renewed every 10 s, 5 s between ranks of challengers). `struct_size`
// follows the size rule of the header's preamble.
typedef struct {
    // `sizeof(krabka_leadership_options)` as the caller was compiled with;
    // set by the init function (see the size rule).
    size_t struct_size;
    // How long a lease lasts.
    double lease_duration;
    // How often the holder renews (below the lease duration).
    double renew_interval;
    // The delay between ranks of challengers (0 allowed).
    double challenge_stagger;
} krabka_leadership_options;

// The shape of the state topic `krabka_client_ensure_state_topic` creates.
// Fill it with `KRABKA_TOPIC_OPTIONS_INIT(&o)` (the production defaults:
// `development` false, replication factor and `min.insync.replicas` 0, the
// defaults). `struct_size` follows the size rule of the header's preamble.
typedef struct {
    // `sizeof(krabka_topic_options)` as the caller was compiled with; set by
    // the init function (see the size rule).
    size_t struct_size;
    // True for a single-broker development cluster: the defaults become a
    // replication factor of 1 and `min.insync.replicas` 1 (else 3 and 2).
    bool development;
    // The replication factor, or 0 for the default.
    int32_t replication_factor;
    // `min.insync.replicas`, or 0 for the default.
    int32_t min_insync_replicas;
} krabka_topic_options;

// Where a fallible function reports what went wrong: a record the caller
// owns (on its stack, typically) and passes as the last argument, or NULL
// for no report.
//
// The caller sets `message` and `capacity`; the function sets the rest.
// On failure the message (UTF-8) is copied into `message`, cut at a
// character boundary to fit `capacity - 1` bytes, and NUL-terminated;
// `length` is the whole message's length in bytes (so `length >= capacity`
// means it was cut), and `part` the record part of a FORMAT or ENCODE
// error. On success `length` is 0, `part` is `KRABKA_PART_NONE` and
// `message` holds `""`. `message` may be NULL with `capacity` 0 (only
// `length` and `part` are reported). The library keeps no pointer to the
// record or its buffer after the call returns.
typedef struct {
    // The caller's buffer for the message, or NULL.
    char *message;
    // The size of `message` in bytes, its final NUL included.
    size_t capacity;
    // Set by the call: the whole message's length in bytes (without a NUL).
    size_t length;
    // Set by the call: the record part of a FORMAT or ENCODE error.
    krabka_part part;
} krabka_error;

// A fencing token: the producer id and producer epoch Kafka's transaction
// coordinator minted for the role. A plain value: copy it freely. Compare
// tokens with `krabka_fencing_token_compare` (producer id first, then
// epoch), never by the epoch alone.
typedef struct {
    // The producer id the coordinator assigned to the role.
    int64_t producer_id;
    // The producer epoch within that producer id.
    int16_t producer_epoch;
} krabka_fencing_token;

// One step of a member, as the callback sees it. Every pointer in it is
// valid only during the callback: copy what you keep. Strings are
// NUL-terminated UTF-8. A field the kind does not have is 0, false or NULL
// (the kind's documentation lists its fields).
typedef struct {
    // What happened.
    krabka_event_kind kind;
    // The core's stable name of the kind (`"elected"`).
    const char *name;
    // The role.
    const char *role;
    // The member id.
    const char *member;
    // When the step was taken, in epoch milliseconds of the member's clock.
    int64_t at;
    // `registered`: the partition of the state topic.
    int32_t partition;
    // `registered`: the offset of the registration record.
    int64_t offset;
    // `waiting`: the member's place among the challengers (0 first).
    uint64_t rank;
    // `waiting`: when the member challenges if nothing changes (epoch ms).
    int64_t challenge_at;
    // `elected`, `lost_challenge`: the member's token; `waiting` behind a
    // lease: the token of the holder (`holder`).
    krabka_fencing_token token;
    // `elected`: when the lease was granted (epoch ms).
    int64_t granted_at;
    // `elected`, `renewed`: the lease deadline (epoch ms).
    int64_t deadline;
    // `renewal_failing`: how many renewals in a row have failed.
    uint32_t failures;
    // `renewal_failing`, `retrying`, `fenced`, `ended`: the result code of
    // the cause (`KRABKA_RESULT_OK` when the kind has none).
    krabka_result error;
    // The cause's message, or NULL.
    const char *error_message;
    // `resigned`: true when the lease was cleared (the hand-over is
    // immediate), false when standbys wait for the deadline.
    bool cleared;
    // `retrying`: what failed (`"registering"`, ...), or NULL.
    const char *what;
    // `retrying`: how many times in a row it failed (1 at the first).
    uint32_t attempt;
    // `retrying`: the pause before the next try, in seconds.
    double retry_in;
    // `waiting` behind a lease: the member the lease names (it may have
    // lapsed: `challenge_at` is then its deadline plus the stagger), or
    // NULL.
    const char *holder;
    // `write_resolved`: true when the earlier write whose outcome was
    // unknown committed (its records are visible), false when it did not
    // (false for every other kind). The last field: added after the
    // others, whose offsets did not move.
    bool committed;
} krabka_event;

// The event callback: called with each event (valid during the call) and
// the `user_data` given to the acquire. See `krabka_client_acquire` for
// the thread it runs on.
typedef void (*krabka_event_callback)(const krabka_event *event, void *user_data);

// The authority of a role as its transaction coordinator reported it.
typedef struct {
    // The newest token the coordinator minted for the role (NoEpoch when no
    // member has taken it).
    krabka_fencing_token token;
} krabka_leadership_status;

// One member of a role's roster. `member` points into the
// `krabka_role_state` it was read from (valid until that is freed), UTF-8
// of `member_len` bytes, not NUL-terminated.
typedef struct {
    // The member id.
    const char *member;
    // Its length in bytes.
    size_t member_len;
    // The member's place in the roster (0 first).
    uint64_t rank;
    // The offset of its latest registration record.
    int64_t offset;
    // When it registered, in epoch milliseconds of its clock.
    int64_t registered_at;
} krabka_roster_entry;

// The fields of a lease value (see `krabka_key_fields` for how the string
// is passed and borrowed).
typedef struct {
    // The member that holds the lease.
    const char *member;
    // Its length in bytes.
    size_t member_len;
    // The holder's fencing token.
    krabka_fencing_token token;
    // When the lease was written, in epoch milliseconds of the holder's clock.
    int64_t granted_at;
    // When a standby may stop waiting, in epoch milliseconds of the holder's clock.
    int64_t deadline;
} krabka_lease_fields;

// The shape of the state topic as the cluster reports it. The strings
// (NUL-terminated UTF-8) point into the `krabka_topic_report` they were
// read from, valid until it is freed.
typedef struct {
    // The topic's name.
    const char *topic;
    // Its partition count (the client's: a topic of another count is
    // refused, not reported).
    int32_t partitions;
    // The replica count of partition 0.
    int32_t replication_factor;
    // Its `cleanup.policy` (always `compact` in a report).
    const char *cleanup_policy;
    // Whether the broker reported `min.insync.replicas`.
    bool has_min_insync_replicas;
    // `min.insync.replicas` (0 when not reported).
    int32_t min_insync_replicas;
    // The number of warnings (advice for the operator, also logged at
    // WARN), such as a `min.insync.replicas` below 2.
    size_t warning_count;
} krabka_topic_report_fields;

// The fields of a record key: what `krabka_encode_key` reads and
// `krabka_key_get_fields` fills.
//
// Strings are UTF-8 of the given length in bytes, not NUL-terminated (they
// may hold NUL bytes). As an input, `role` and `member` are borrowed for the
// call only; a NULL string with length 0 is the empty string. As an output,
// they point into the `krabka_key` they were read from and stay valid until
// it is freed.
typedef struct {
    // A `krabka_key_kind` value: 0 registration, 1 lease.
    uint32_t kind;
    // The role name.
    const char *role;
    // Its length in bytes.
    size_t role_len;
    // The member id of a registration key; empty for a lease key.
    const char *member;
    // Its length in bytes.
    size_t member_len;
} krabka_key_fields;

// The fields of a registration value (see `krabka_key_fields` for how the
// string is passed and borrowed).
typedef struct {
    // The registering member.
    const char *member;
    // Its length in bytes.
    size_t member_len;
    // When the member registered, in epoch milliseconds.
    int64_t registered_at;
} krabka_registration_fields;

// The work of one term: called on the thread of `krabka_client_lead` with
// the term's leadership and its end signal (both borrowed for the call:
// never free them, never keep them past it) and the loop's `user_data`.
// The leadership is the term's: its token, guarded writes, lease, resign
// (which ends the term: `ended` fires).
//
// It returns a `uint32_t` holding a `krabka_result` (a plain integer, so a
// work written against an older or newer header stays ABI-compatible):
// `KRABKA_RESULT_OK` (0) when the work is done (the role is resigned and
// the member contends again), any other value when it failed (the role is
// resigned and the loop returns that code). A nonzero value that is no
// `krabka_result` the library knows becomes `KRABKA_RESULT_ERROR`, with
// the value in the message.
typedef uint32_t (*krabka_lead_work)(const krabka_leadership *leadership, const krabka_term_signal *ended, void *user_data);

// One header of a guarded record: `name` NUL-terminated UTF-8, `value` of
// `value_len` bytes (NULL with length 0: a null value). Borrowed for the
// call.
typedef struct {
    // The header's name.
    const char *name;
    // The header's value.
    const uint8_t *value;
    // Its length in bytes.
    size_t value_len;
} krabka_header;

// One record of a guarded write, borrowed for the call.
typedef struct {
    // The topic, NUL-terminated UTF-8 (never the state topic).
    const char *topic;
    // The partition, or `KRABKA_ANY_PARTITION` (-1) for the partitioner.
    int32_t partition;
    // The key, or NULL with `key_len` 0 for none.
    const uint8_t *key;
    // The key's length in bytes.
    size_t key_len;
    // The value, or NULL with `value_len` 0 for a tombstone (a null value).
    const uint8_t *value;
    // The value's length in bytes.
    size_t value_len;
    // `header_count` headers, or NULL when `header_count` is 0.
    const krabka_header *headers;
    // The number of headers.
    size_t header_count;
} krabka_record;

// One field of a log record: `key` and `value`, NUL-terminated UTF-8.
typedef struct {
    // The field's name (`role`, `member`, `error`, ...).
    const char *key;
    // Its value, as text.
    const char *value;
} krabka_log_field;

// One log record of the library, passed to the log callback. Every
// pointer in it (strings NUL-terminated UTF-8) is valid only during the
// call: copy what you keep.
typedef struct {
    // The level.
    krabka_log_level level;
    // The module that logged it (`krabka_coordination::...`), or
    // `librdkafka`.
    const char *target;
    // The message alone.
    const char *message;
    // The source file of the log statement, or NULL when unknown.
    const char *file;
    // Its line, or 0 when unknown.
    uint32_t line;
    // The event's own fields (`error`, `retry_in`, ...), in the order
    // they were recorded (NULL when `field_count` is 0).
    const krabka_log_field *fields;
    // The number of `fields`.
    size_t field_count;
    // The member context the event happened in, outermost first (the
    // member's `role`, `member` and `partition`; NULL when
    // `context_count` is 0).
    const krabka_log_field *context;
    // The number of `context` fields.
    size_t context_count;
    // The whole record as one line: `role=r member=m: message key=value`.
    const char *text;
} krabka_log_record;

// The log callback: called with each record, on the library's log thread
// (`krabka-log`), one at a time, never on a thread of the caller's.
typedef void (*krabka_log_callback)(const krabka_log_record *record, void *user_data);

// One role as an observer saw it, as the view callback gets it. Every
// pointer in it (the strings, the leases' members, the roster) is valid
// only during the callback: copy what you keep. A lease's `member` and a
// roster entry's `member` are UTF-8 of their `member_len` bytes, not
// NUL-terminated (as in `krabka_role_state`); `role` and `change_name` are
// NUL-terminated.
typedef struct {
    // The role.
    const char *role;
    // The partition of the state topic that holds it.
    int32_t partition;
    // Why this view was reported.
    krabka_change change;
    // The core's stable name of the change (`"elected"`).
    const char *change_name;
    // True when the view names a leader (`leader` is then set): false when
    // there is no lease yet, it was cleared, or it lapsed.
    bool has_leader;
    // The leader's lease (when `has_leader`; zeroes otherwise).
    krabka_lease_fields leader;
    // True when the view has no leader because the lease in `lapsed`
    // passed its deadline without a renewal (until the role's next lease
    // record).
    bool has_lapsed;
    // The lapsed lease (when `has_lapsed`; zeroes otherwise).
    krabka_lease_fields lapsed;
    // The roster in rank order (`roster[i].rank == i`), or NULL when it is
    // empty.
    const krabka_roster_entry *roster;
    // The number of roster entries.
    size_t roster_len;
    // The offset the view was read up to (every record of the partition
    // below it was read).
    int64_t position;
    // When the view was taken, in epoch milliseconds of the observer's clock.
    int64_t at;
} krabka_role_view;

// The view callback: called with each view (valid during the call) and
// the `user_data` given to `krabka_client_observe`.
typedef void (*krabka_view_callback)(const krabka_role_view *view, void *user_data);

// The end callback: called at most once, after the last view, when the
// observer ended with an error: its code (`KRABKA_RESULT_FATAL`, ...),
// its message (NUL-terminated, valid during the call) and `user_data`.
typedef void (*krabka_observer_error_callback)(krabka_result error, const char *message, void *user_data);

// One input partition's position in a guarded write, borrowed for the
// call: the offset of the next record to read there (the last one
// processed, plus one), as a Kafka consumer commits it.
typedef struct {
    // The topic read, NUL-terminated UTF-8 (not empty).
    const char *topic;
    // Its partition (0 or more).
    int32_t partition;
    // The offset of the next record to read (0 or more).
    int64_t offset;
    // NUL-terminated UTF-8 kept with the offset and returned with it, or
    // NULL for none; at most the brokers' `offset.metadata.max.bytes`
    // (4096 by default), or the commit is refused.
    const char *metadata;
} krabka_input_offset;

// The input a guarded write consumed: the offsets to commit for consumer
// group `group` with the write's records, in its transaction.
// `struct_size` follows the size rule of the header's preamble: fill it
// with `KRABKA_CONSUMED_OFFSETS_INIT`, then set the fields by name.
typedef struct {
    // `sizeof(krabka_consumed_offsets)` as the caller was compiled with;
    // set by the init function (see the size rule).
    size_t struct_size;
    // The consumer group whose offsets are committed, NUL-terminated UTF-8
    // (not empty). The leader commits without joining it: a group with
    // members of its own (consumers that `subscribe`d) refuses the commit.
    const char *group;
    // `offset_count` positions, one per input partition (each
    // topic-partition at most once), or NULL when `offset_count` is 0.
    const krabka_input_offset *offsets;
    // The number of positions.
    size_t offset_count;
} krabka_consumed_offsets;

// A topic-partition of a committed-offsets question, borrowed for the
// call.
typedef struct {
    // The topic, NUL-terminated UTF-8 (not empty).
    const char *topic;
    // The partition (0 or more).
    int32_t partition;
} krabka_topic_partition;

// What a consumer group has committed for one partition, written by
// `krabka_leadership_committed_offsets` into the caller's array.
typedef struct {
    // The topic: the pointer the question's entry gave (borrowed from the
    // caller, as long as that string lives).
    const char *topic;
    // The partition.
    int32_t partition;
    // The offset of the next record to read, or `KRABKA_NO_OFFSET` (-1)
    // when the group has committed nothing for the partition.
    int64_t offset;
    // The metadata committed with the offset, NUL-terminated UTF-8 in the
    // caller's metadata buffer, or NULL when there is none (Kafka answers
    // an offset committed without metadata with an empty text).
    const char *metadata;
    // The metadata's length in bytes (without the NUL; 0 when NULL).
    size_t metadata_len;
} krabka_committed_offset;

// One guarded write a test cluster committed. The pointers point into the
// `krabka_test_writes` it was read from (valid until that is freed), not
// NUL-terminated.
typedef struct {
    // Its place in the cluster's commit order (from 0, counting the state
    // topic's records too).
    uint64_t commit;
    // The topic, UTF-8 of `topic_len` bytes.
    const char *topic;
    // The topic's length in bytes.
    size_t topic_len;
    // The partition.
    int32_t partition;
    // The offset in the partition.
    int64_t offset;
    // The key, of `key_len` bytes (length 0 when it had none).
    const uint8_t *key;
    // The key's length in bytes.
    size_t key_len;
    // The value, of `value_len` bytes; NULL for a tombstone.
    const uint8_t *value;
    // The value's length in bytes (0 for a tombstone).
    size_t value_len;
    // The role whose term wrote it, UTF-8 of `role_len` bytes.
    const char *role;
    // The role's length in bytes.
    size_t role_len;
    // The token of the term that wrote it.
    krabka_fencing_token token;
} krabka_test_write;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Writes the client defaults into `*o`, a struct of `caller_size` bytes
// (`sizeof *o` as the caller was compiled: use
// `KRABKA_CLIENT_OPTIONS_INIT(o)`), and sets `o->struct_size` to it: 16
// partitions, the state topic `__coordination_state` (NULL), a 10 s
// connect timeout, a 30 s operation timeout. At most `caller_size` bytes
// are written; past this library's size they are zeroed. `o` NULL is
// `KRABKA_RESULT_NULL_ARGUMENT`; a `caller_size` below the first
// version's size `KRABKA_RESULT_INVALID_ARGUMENT` (nothing written). Does
// not block; any thread.
krabka_result krabka_client_options_init(krabka_client_options *o, size_t caller_size);

// Fills `*out` with the client defaults (as `krabka_client_options_init`)
// and sets `struct_size` to the first version's size: it writes only the
// first version's fields, so it never overruns a struct of an older
// header; a field added in a later version keeps its default even if set
// afterwards. Prefer `KRABKA_CLIENT_OPTIONS_INIT`.
krabka_result krabka_client_options_default(krabka_client_options *out);

// Writes the core's default timings (30, 10 and 5 seconds) into `*o`, a
// struct of `caller_size` bytes (use `KRABKA_LEADERSHIP_OPTIONS_INIT(o)`),
// and sets `o->struct_size` to it, as `krabka_client_options_init` does.
// Does not block; any thread.
krabka_result krabka_leadership_options_init(krabka_leadership_options *o, size_t caller_size);

// Fills `*out` with the core's default timings (30, 10 and 5 seconds), the
// first version's fields only, `struct_size` the first version's size (as
// `krabka_client_options_default`). Prefer
// `KRABKA_LEADERSHIP_OPTIONS_INIT`.
krabka_result krabka_leadership_options_default(krabka_leadership_options *out);

// Writes the production defaults of the state topic (`development` false,
// replication factor and `min.insync.replicas` 0: 3 and 2) into `*o`, a
// struct of `caller_size` bytes (use `KRABKA_TOPIC_OPTIONS_INIT(o)`), and
// sets `o->struct_size` to it, as `krabka_client_options_init` does. Does
// not block; any thread.
krabka_result krabka_topic_options_init(krabka_topic_options *o, size_t caller_size);

// Builds a client from `count` Kafka settings, `keys[i]` = `values[i]`
// (librdkafka's keys: `bootstrap.servers`, `security.protocol`, `sasl.*`,
// `ssl.*`, ...), each passed unchanged to the core's Kafka configuration.
// `options` may be NULL for the defaults. Every string is NUL-terminated
// UTF-8, borrowed for the call; `keys` and `values` may be NULL only when
// `count` is 0.
//
// A setting the core refuses (a missing bootstrap address, a key
// librdkafka does not know, `transactional.id`, an `ssl.*`/`sasl.*` key it
// cannot honour) is `KRABKA_RESULT_INVALID_ARGUMENT` naming it. Nothing
// connects yet. On success `*out` is a new client the caller owns (free it
// with `krabka_client_free`); on failure it is NULL.
//
// With `options->oauth_token` set, the client takes its OAUTHBEARER tokens
// from the callback, and `options->oauth_user_data_free` is called once
// when the callback is no longer needed: after the client and every handle
// made with it are freed, or before this call returns when it fails (but
// not when `out` is NULL or `options->struct_size` is refused: the options
// are not read then). `sasl.mechanism` `OAUTHBEARER` without a callback is
// `KRABKA_RESULT_INVALID_ARGUMENT`.
//
// Blocks briefly (it builds librdkafka clients); any thread. The first
// client of a process starts the library's runtime threads (`krabka-rt`).
krabka_result krabka_client_new(const char *const *keys, const char *const *values, size_t count, const krabka_client_options *options, krabka_client **out, krabka_error *err);

// Closes a client and ends everything it started: resigns every leadership
// acquired through it that is still held (all at once, each bounded by its
// lease, so the standbys take over at once), makes its acquires under way
// return `KRABKA_RESULT_CANCELLED`, stops its leader loops and ends its
// observers. Blocks the calling thread until that is done (at most the
// longest lease). Every later call on the client fails with
// `KRABKA_RESULT_INVALID_ARGUMENT` ("the client is closed"); the
// leadership handles it made stay valid (their term has ended) and must
// still be freed. NULL is a no-op; idempotent; any thread, also while other
// threads wait in calls on the client (that is how to stop them). In a
// forked child it closes nothing of the parent's. The client of a crashed
// test-kit process (`krabka_test_process_crash`) is not closed: it returns
// at once.
void krabka_client_close(const krabka_client *client);

// Closes a client as `krabka_client_close` does (ending what it started),
// then frees it; NULL is a no-op. Blocks the calling thread until the close
// is done and while the librdkafka clients it alone holds close (they are
// closed here, not left to a background thread, so a program that frees its
// handles before it exits leaves nothing running); must not race with
// another call on the client (call `krabka_client_close` first to stop the
// calls of other threads, then free once they returned).
void krabka_client_free(krabka_client *client);

// Makes a cancellation, not fired; `*out` is the caller's to free with
// `krabka_cancel_free`. Does not block; any thread.
krabka_result krabka_cancel_new(krabka_cancel **out);

// Fires the cancellation: every acquire it was given that is still waiting
// stops, its member deregistered (a role won in that instant is resigned),
// and returns `KRABKA_RESULT_CANCELLED`; an acquire given it later returns
// that at once. Idempotent. Does not block; any thread, but not a signal
// handler.
krabka_result krabka_cancel_fire(const krabka_cancel *cancel);

// Frees a cancellation; NULL is a no-op. An acquire still using it keeps
// what it needs.
void krabka_cancel_free(krabka_cancel *cancel);

// Acquires `role` as `member` (NUL-terminated UTF-8, borrowed for the
// call): registers, waits for its turn, mints the role's epoch, writes the
// first lease. Blocks the calling thread until the role is won, an error
// ends the attempt, or `timeout` seconds pass (`KRABKA_NO_TIMEOUT`: no
// limit; 0 and up otherwise). At the timeout the attempt is cancelled, the
// core deregisters the member (waiting up to 10 s for it; a role won in
// that instant is resigned) and the call returns `KRABKA_RESULT_TIMED_OUT`.
// `options` may be NULL for the defaults. `cancel` (NULL: none) stops the
// attempt when fired from another thread: the member is deregistered and
// the call returns `KRABKA_RESULT_CANCELLED`.
//
// On success `*out` is a new `krabka_leadership` the caller owns (free it
// with `krabka_leadership_free`); on failure it is NULL. A client refuses a
// second acquire of a role it is acquiring or holding
// (`KRABKA_RESULT_INVALID_ARGUMENT`).
//
// `callback`, if not NULL, receives the member's events from its
// registration on: on one thread the library starts for this acquire
// (named `krabka-events`), never on the caller's thread and never two at
// once, in the order they happened. `user_data` is passed to every call as
// it is; the caller keeps it valid, and usable from that thread, until the
// events end. They end after the term's last event (`fenced`,
// `lease_expired`, `ended`, or `resigned` then `deregistered`), when the
// acquire fails (all of its events are delivered before this function
// returns), or at `krabka_leadership_free` (which waits for a callback in
// progress, unless called from the callback itself). A callback may call
// any function of the library.
//
// Any thread, except a callback's when it would wait on its own events.
krabka_result krabka_client_acquire(const krabka_client *client, const char *role, const char *member, const krabka_leadership_options *options, double timeout, const krabka_cancel *cancel, krabka_event_callback callback, void *user_data, krabka_leadership **out, krabka_error *err);

// Asks the role's transaction coordinator for the role's current token
// (one DescribeTransactions request once the coordinator is known) into
// `*out`. A read at one instant, not a fence: check a writer with
// `krabka_leadership_status_authoritative`. Blocks until the coordinator
// answers or the client's timeouts run out (`KRABKA_RESULT_TRANSIENT`);
// any thread.
krabka_result krabka_client_describe_leadership(const krabka_client *client, const char *role, krabka_leadership_status *out, krabka_error *err);

// Sets `*out` to whether `token` is the role's current token in `status`
// (equality, the core's check): its holder was authoritative when the
// coordinator answered. NoEpoch never is. Does not block; any thread.
krabka_result krabka_leadership_status_authoritative(const krabka_leadership_status *status, const krabka_fencing_token *token, bool *out);

// Reads the roster and the lease of `role` from its state partition. On
// success `*out` is a new `krabka_role_state` the caller owns (free it with
// `krabka_role_state_free`); on failure NULL. Blocks until the partition is
// read or the client's timeouts run out; any thread.
krabka_result krabka_client_describe_role_state(const krabka_client *client, const char *role, krabka_role_state **out, krabka_error *err);

// The partition of the state topic that holds the role.
krabka_result krabka_role_state_partition(const krabka_role_state *state, int32_t *out);

// The number of members in the roster.
krabka_result krabka_role_state_roster_len(const krabka_role_state *state, size_t *out);

// The member of rank `index` (0 first; below the roster's length, else
// `KRABKA_RESULT_INVALID_ARGUMENT`). The member string points into `state`.
krabka_result krabka_role_state_roster_entry(const krabka_role_state *state, size_t index, krabka_roster_entry *out, krabka_error *err);

// Sets `*has_lease` to whether the role has a lease (none: never taken, or
// cleared by a resign) and, when it has, `*out` to its fields (the member
// string points into `state`).
krabka_result krabka_role_state_lease(const krabka_role_state *state, bool *has_lease, krabka_lease_fields *out);

// Frees a role state; NULL is a no-op.
void krabka_role_state_free(krabka_role_state *state);

// Creates the state topic (the client's partition count, compacted, the
// shape of `options`; NULL: the production defaults, replication factor 3
// and `min.insync.replicas` 2) unless it exists, then checks it. `*created`
// says whether this call created it. Blocks until the brokers answer or the
// client's timeouts run out; any thread. Needs CREATE on the topic: an
// operator's step.
krabka_result krabka_client_ensure_state_topic(const krabka_client *client, const krabka_topic_options *options, bool *created, krabka_error *err);

// Checks the client's state topic without changing it (the core's check,
// as every acquire makes it): it exists, has the client's partition count
// and `cleanup.policy=compact`; a topic of another shape is
// `KRABKA_RESULT_FATAL` naming the topic and both values (the topic's
// partition count and the client's), a missing authorization (DESCRIBE,
// DESCRIBE_CONFIGS) `KRABKA_RESULT_FATAL` naming the topic, a cluster that
// does not answer within the connect timeout `KRABKA_RESULT_TRANSIENT`.
// On success `*out` is a new `krabka_topic_report` the caller owns (free
// it with `krabka_topic_report_free`); on failure NULL. Its warnings are
// logged at WARN as well (`krabka_set_log_callback`). Blocks until the
// brokers answer or the client's timeouts run out; any thread.
krabka_result krabka_client_check_state_topic(const krabka_client *client, krabka_topic_report **out, krabka_error *err);

// The report's fields, into `*out` (strings borrowed from `report`). Does
// not block; any thread.
krabka_result krabka_topic_report_get_fields(const krabka_topic_report *report, krabka_topic_report_fields *out);

// Warning `index` of the report (below `warning_count`, else
// `KRABKA_RESULT_INVALID_ARGUMENT`) into `*out`: NUL-terminated UTF-8
// borrowed from `report`. Does not block; any thread.
krabka_result krabka_topic_report_warning(const krabka_topic_report *report, size_t index, const char **out, krabka_error *err);

// Frees a topic report; NULL is a no-op.
void krabka_topic_report_free(krabka_topic_report *report);

// Encodes a record key into the caller's buffer `out` of `out_capacity`
// bytes; `*out_len` receives the encoded length (also when the buffer is
// too small: then the result is `KRABKA_RESULT_BUFFER_TOO_SMALL` and nothing
// is written). A key the layout cannot hold (an empty role, an empty member
// in a registration key, a member in a lease key, a string over 32767
// bytes) is `KRABKA_RESULT_ENCODE` with `err->part == KRABKA_PART_KEY`;
// text that is not UTF-8 is `KRABKA_RESULT_INVALID_ARGUMENT`.
//
// `key` and `out` are borrowed for the call. Does not block; any thread.
krabka_result krabka_encode_key(const krabka_key_fields *key, uint8_t *out, size_t out_capacity, size_t *out_len, krabka_error *err);

// Decodes a record key from `data` (`data_len` bytes, borrowed for the
// call). On success `*out` receives a new `krabka_key` the caller owns and
// frees with `krabka_key_free`; on failure `*out` is set to NULL (when `out`
// is not NULL). Malformed bytes are `KRABKA_RESULT_FORMAT` with
// `err->part == KRABKA_PART_KEY`. Does not block; any thread.
krabka_result krabka_decode_key(const uint8_t *data, size_t data_len, krabka_key **out, krabka_error *err);

// Reads the fields of a decoded key into `*out`; the strings point into
// `key` and stay valid until `krabka_key_free(key)`. Does not block; any
// thread.
krabka_result krabka_key_get_fields(const krabka_key *key, krabka_key_fields *out);

// Frees a key made by `krabka_decode_key`. NULL is a no-op. The key and
// every string read from it are invalid afterwards.
void krabka_key_free(krabka_key *key);

// Encodes a registration value (see `krabka_encode_key` for the buffer and
// the errors; the part is `KRABKA_PART_REGISTRATION_VALUE`).
krabka_result krabka_encode_registration(const krabka_registration_fields *registration, uint8_t *out, size_t out_capacity, size_t *out_len, krabka_error *err);

// Decodes a registration value (see `krabka_decode_key`; the part is
// `KRABKA_PART_REGISTRATION_VALUE`, the handle is freed with
// `krabka_registration_free`).
krabka_result krabka_decode_registration(const uint8_t *data, size_t data_len, krabka_registration **out, krabka_error *err);

// Reads the fields of a decoded registration value (see
// `krabka_key_get_fields`).
krabka_result krabka_registration_get_fields(const krabka_registration *registration, krabka_registration_fields *out);

// Frees a registration value; NULL is a no-op.
void krabka_registration_free(krabka_registration *registration);

// Encodes a lease value (see `krabka_encode_key` for the buffer and the
// errors; the part is `KRABKA_PART_LEASE_VALUE`).
krabka_result krabka_encode_lease(const krabka_lease_fields *lease, uint8_t *out, size_t out_capacity, size_t *out_len, krabka_error *err);

// Decodes a lease value (see `krabka_decode_key`; the part is
// `KRABKA_PART_LEASE_VALUE`, the handle is freed with `krabka_lease_free`).
krabka_result krabka_decode_lease(const uint8_t *data, size_t data_len, krabka_lease **out, krabka_error *err);

// Reads the fields of a decoded lease value (see `krabka_key_get_fields`).
krabka_result krabka_lease_get_fields(const krabka_lease *lease, krabka_lease_fields *out);

// Frees a lease value; NULL is a no-op.
void krabka_lease_free(krabka_lease *lease);

// The partition of `role` (`role_len` bytes of UTF-8, borrowed for the
// call) among `partitions`: Kafka's murmur2 of the role's bytes, masked with
// `toPositive`, modulo the count. An empty role or a count below 1 is
// `KRABKA_RESULT_INVALID_ARGUMENT`. Does not block; any thread.
krabka_result krabka_role_partition(const char *role, size_t role_len, int32_t partitions, int32_t *out, krabka_error *err);

// Kafka's murmur2 hash (`Utils.murmur2`) of `data_len` bytes at `data`, as a
// signed 32-bit number. Does not block; any thread.
krabka_result krabka_murmur2(const uint8_t *data, size_t data_len, int32_t *out, krabka_error *err);

// Compares two tokens as the core orders them (producer id first, then
// epoch, both signed): `*out_order` is -1, 0 or 1 as `a` is below, equal to
// or above `b`. Does not block; any thread.
krabka_result krabka_fencing_token_compare(const krabka_fencing_token *a, const krabka_fencing_token *b, int32_t *out_order);

// Sets `*out` to NoEpoch, the token of a role no member has taken (producer
// id -1, epoch -1). It ranks below every minted token and is never
// authoritative.
krabka_result krabka_fencing_token_no_epoch(krabka_fencing_token *out);

// Sets `*out` to whether `token` is NoEpoch.
krabka_result krabka_fencing_token_is_no_epoch(const krabka_fencing_token *token, bool *out);

// Parses `text`, a token's wire form, into `*out`: `PRODUCER_ID/EPOCH` in
// decimal (`"4001/7"`, what `krabka_token_format`, the CLI and
// `KRABKA_TOKEN` write) or `"NoEpoch"`. The core's parser decides, as in
// every binding: no spaces, no `+`, both numbers within their types.
// Malformed text is KRABKA_RESULT_INVALID_ARGUMENT, `*out` untouched, the
// message quoting the text and naming the expected form; text that is not
// UTF-8 likewise. Does not block; any thread.
krabka_result krabka_token_parse(const char *text, krabka_fencing_token *out, krabka_error *err);

// Writes the wire form of `*token` into `buf` (`capacity` bytes),
// NUL-terminated: `PRODUCER_ID/EPOCH` in decimal, or `NoEpoch` for NoEpoch;
// `krabka_token_parse` reads it back. `*out_len` (when not NULL) gets the
// text's length without the NUL, even when the buffer is too small
// (KRABKA_RESULT_BUFFER_TOO_SMALL, nothing written). A buffer of
// KRABKA_TOKEN_TEXT_MAX bytes always suffices. Does not block; any thread.
krabka_result krabka_token_format(const krabka_fencing_token *token, char *buf, size_t capacity, size_t *out_len, krabka_error *err);

// Fills `*err` to receive messages in `message` (`capacity` bytes, its NUL
// included; NULL with 0 for none): `length` 0, `part` KRABKA_PART_NONE and
// `message` holding `""` when it has room. Fill every `krabka_error` this
// way (or set its fields by name), never with a positional `{...}` list: a
// field added later (at the end) gets its default here, so code written
// this way keeps its meaning. Does not block; any thread.
krabka_result krabka_error_init(krabka_error *err, char *message, size_t capacity);

// The stable name of a result code (`"FENCED"`, `"NULL_ARGUMENT"`, ...), a
// static NUL-terminated string (never freed); `"UNKNOWN"` for a value no
// code has.
const char *krabka_result_name(uint32_t result);

// The name of a record part as the golden vectors spell it (`"key"`,
// `"registration value"`, `"lease value"`; `""` for `KRABKA_PART_NONE`),
// a static NUL-terminated string; `"UNKNOWN"` for a value no part has.
const char *krabka_part_name(uint32_t part);

// The library's version (`"0.1.0"`), a static NUL-terminated string.
const char *krabka_version(void);

// The leader loop: contends for `role` as `member` (NUL-terminated UTF-8,
// borrowed for the call) and calls `work` for each term it wins, on the
// calling thread, contending again after each, until `cancel` is fired.
// The rules are the core's leader loop (Curator's `LeaderSelector` with
// auto-requeue). Blocks the calling thread until the loop ends. `options`
// may be NULL for the defaults; `work` must not be NULL (an exception to
// the rule that a NULL callback means none); `user_data` is passed to
// every call of `work` as it is.
//
// `cancel` (NULL: the loop runs until a work fails or an error ends it)
// stops it when fired from another thread (`krabka_cancel_fire`): a
// waiting acquire deregisters the member, a running term's signal fires
// and, once the work returns, the role is resigned (and the member
// deregistered); the call then returns `KRABKA_RESULT_OK`. A cancellation
// fired before the call returns `KRABKA_RESULT_OK` without contending.
//
// After each term: when the work returned `KRABKA_RESULT_OK` the role is
// resigned (an immediate hand-over) and the member contends again, from
// the tail of the roster, after its backoff (doubling from the initial
// backoff, starting over after a term of at least one lease); when the
// term ended under it (fenced, lease expired: its signal fired) the
// member contends again once it returns; when it returned another code
// the role is resigned and the call returns that code, with `err` naming
// the term and the value. A failure to acquire that a retry may mend (the
// cluster unreachable) is retried after the backoff; any other ends the
// loop with its code. The role, the member and the timings are checked
// before any I/O (`KRABKA_RESULT_INVALID_ARGUMENT`), as are the pointers
// (`KRABKA_RESULT_NULL_ARGUMENT`).
//
// Any thread but an event callback's or a work's; `work` runs on this one.
krabka_result krabka_client_lead(const krabka_client *client, const char *role, const char *member, const krabka_leadership_options *options, const krabka_cancel *cancel, krabka_lead_work work, void *user_data, krabka_error *err);

// True once the term ended or the loop was stopped: the work must return.
// NULL is refused as ended (true). Does not block; any thread.
bool krabka_term_ended(const krabka_term_signal *signal);

// Waits until the term ends or the loop is stopped: `KRABKA_RESULT_OK`
// once it has, `KRABKA_RESULT_TIMED_OUT` when `timeout` seconds passed
// first (`KRABKA_NO_TIMEOUT`: no limit; 0 polls). Blocks the calling
// thread at most `timeout`; any thread.
krabka_result krabka_term_wait(const krabka_term_signal *signal, double timeout, krabka_error *err);

// Fills `*rec` for `topic`: partition `KRABKA_ANY_PARTITION`, no key, a
// null value, no headers; then set the fields you need by name
// (`rec.value = ...; rec.value_len = ...;`), never with a positional
// `{...}` list: a field added later (at the end) gets its default here, so
// code written this way keeps its meaning. `topic` is stored as given
// (borrowed, may be NULL to set later). Does not block; any thread.
krabka_result krabka_record_init(krabka_record *rec, const char *topic);

// The fencing token of this term, into `*out`. Does not block; any thread.
krabka_result krabka_leadership_token(const krabka_leadership *leadership, krabka_fencing_token *out, krabka_error *err);

// Sets `*out` to true until the role ends. Does not block; any thread.
krabka_result krabka_leadership_is_held(const krabka_leadership *leadership, bool *out, krabka_error *err);

// Sets `*out` to the lease time left on this member's monotonic clock, in
// seconds (0 once the term ended). Work done outside Kafka should stop
// before it reaches 0. Does not block; any thread.
krabka_result krabka_leadership_lease_left(const krabka_leadership *leadership, double *out, krabka_error *err);

// Sets `*out` to the partition of the state topic that holds the role.
// Does not block; any thread.
krabka_result krabka_leadership_partition(const krabka_leadership *leadership, int32_t *out, krabka_error *err);

// Sets `*out` to how many renewals in a row have failed with a transient
// error (0 while they commit). Does not block; any thread.
krabka_result krabka_leadership_renewal_failures(const krabka_leadership *leadership, uint32_t *out, krabka_error *err);

// The last lease this member wrote: `*out` is a new `krabka_lease` the
// caller owns (read it with `krabka_lease_get_fields`, free it with
// `krabka_lease_free`); NULL on failure. Does not block; any thread.
krabka_result krabka_leadership_lease(const krabka_leadership *leadership, krabka_lease **out, krabka_error *err);

// Sets `*out_reason` to why the role ended: `KRABKA_RESULT_OK` while it is
// held, else the reason's code (`FENCED`, `LEASE_EXPIRED`, `RESIGNED`,
// `FATAL`, ...). The call returns `KRABKA_RESULT_OK`; when the role ended,
// `err` receives the reason's message and part all the same. Does not
// block; any thread.
krabka_result krabka_leadership_reason(const krabka_leadership *leadership, krabka_result *out_reason, krabka_error *err);

// Blocks the calling thread until the role ends or `timeout` seconds pass
// (`KRABKA_NO_TIMEOUT`: no limit; 0 only looks). Returns
// `KRABKA_RESULT_OK` when the role ended, with `*out_reason` and `err` as
// `krabka_leadership_reason` sets them; `KRABKA_RESULT_TIMED_OUT` while it
// is still held (`*out_reason` is `KRABKA_RESULT_OK`). Any thread; a
// callback may call it for another leadership.
krabka_result krabka_leadership_wait(const krabka_leadership *leadership, double timeout, krabka_result *out_reason, krabka_error *err);

// A guarded write: `count` records (borrowed for the call) in one
// transaction of this term's epoch. All of them become visible, or none. A
// deposed leader's write is refused by the broker: `KRABKA_RESULT_FENCED`,
// and the term ends. `KRABKA_RESULT_OUTCOME_UNKNOWN`: the commit was sent
// but not confirmed. Blocks the calling thread for at most one renew
// interval (never past the lease); any thread (writes are serialised).
krabka_result krabka_leadership_write(const krabka_leadership *leadership, const krabka_record *records, size_t count, krabka_error *err);

// Gives the role up without ever fencing a successor: stops renewing,
// clears the lease, supersedes the token, deregisters. The next standby
// takes over at once. Blocks the calling thread until it is done (each step
// bounded by the lease duration); the term has ended when it returns,
// whatever it returns. Idempotent; any thread.
krabka_result krabka_leadership_resign(const krabka_leadership *leadership, krabka_error *err);

// Frees a leadership; NULL is a no-op. Stops the event callback (none
// starts after this returns; one in progress is waited for unless this is
// called from it) and the renewals, without resigning: standbys take over
// when the lease runs out (call `krabka_leadership_resign` first to hand
// over at once). Must not race with another call on the leadership.
void krabka_leadership_free(krabka_leadership *leadership);

// Sets the log callback: the library's log records from `min_level` up
// (`KRABKA_LOG_LEVEL_WARN`: errors and warnings; `KRABKA_LOG_LEVEL_OFF`:
// none; above `KRABKA_LOG_LEVEL_TRACE` is
// `KRABKA_RESULT_INVALID_ARGUMENT`) go to `callback(record, user_data)`.
// NULL removes it (and `min_level` is ignored). By default there is no
// callback and nothing is recorded; Python's binding forwards from
// WARN up by default, so WARN is the level to start from.
//
// The callback runs on the library's log thread (`krabka-log`, started
// with the first record): never on a thread of the caller's, never two
// calls at once, in the order the records were made. Records are queued
// (up to 10000; what does not fit is dropped and counted in a later WARN
// record) so that no thread of the library waits for the callback. The
// record and every pointer in it are valid only during the call. A record
// queued before the callback changed goes to the callback set when it is
// delivered. The callback may be called until `krabka_set_log_callback`
// with another callback or NULL returns (which waits for a call in
// progress), never after; the caller keeps `user_data` valid, and usable
// from the log thread, until then. It may call any function of the
// library but this one (`KRABKA_RESULT_INVALID_ARGUMENT` from the log
// thread).
//
// Process-wide (one callback per process; a forked child has none of the
// parent's records but keeps its callback setting). Does not block but
// for a call in progress; any thread.
krabka_result krabka_set_log_callback(krabka_log_callback callback, void *user_data, uint32_t min_level, krabka_error *err);

// Renders every series of the core's metrics in this process (counters,
// gauges, and histograms of durations in seconds, ordered by name, then
// labels) in the Prometheus text format, version 0.0.4, NUL-terminated,
// into `buf` of `len` bytes. `*needed` gets the size the text needs, its
// NUL included, even when it does not fit (`KRABKA_RESULT_BUFFER_TOO_SMALL`,
// nothing written; the text may grow before the next call, so allow some
// room). `buf` may be NULL with `len` 0 to ask the size. Metrics are
// recorded from the first `krabka_client_new` of the process on; before
// it the text is empty. Does not block; any thread.
krabka_result krabka_metrics_prometheus(char *buf, size_t len, size_t *needed, krabka_error *err);

// Settles the callback's `request` with a token: `token` (printable ASCII
// without spaces, often a JWT), when it expires (`expires_at_ms`,
// milliseconds since the Unix epoch, in the future) and the principal it
// names (`principal`, for the clients' logs; NULL for none), each copied.
// An `expires_at_ms` of 0 or below is `KRABKA_RESULT_INVALID_ARGUMENT`
// naming it, and the request stays open; what the core refuses of the
// token (empty, expired, a space) fails the operation that needed it,
// naming the token provider. A request already settled is
// `KRABKA_RESULT_INVALID_ARGUMENT`. Only from the callback, during the
// call. Does not block.
krabka_result krabka_oauth_request_set_token(krabka_oauth_request *request, const char *token, int64_t expires_at_ms, const char *principal, krabka_error *err);

// Settles the callback's `request` with a failure: the operation that
// needed the token fails naming the token provider and `message` (NULL:
// none given), with `KRABKA_RESULT_FATAL` when `fatal` (no retry mends it:
// revoked credentials), else `KRABKA_RESULT_TRANSIENT` (the identity
// provider may answer later). While the last token is still valid, the
// core keeps it and logs a warning. A request already settled is
// `KRABKA_RESULT_INVALID_ARGUMENT`. Only from the callback, during the
// call. Does not block.
krabka_result krabka_oauth_request_fail(krabka_oauth_request *request, const char *message, bool fatal, krabka_error *err);

// The core's stable name of a change (`"elected"`), NUL-terminated and
// static; `"other"` for `KRABKA_CHANGE_OTHER` and a value this library
// does not know. Does not block; any thread.
const char *krabka_change_name(uint32_t change);

// Watches `n_roles` roles (`roles[i]`, NUL-terminated UTF-8, borrowed for
// the call; a role given twice is watched once) without joining them,
// through `client`'s state reader: nothing is written, no rank is taken.
// `renewals` reports each renewal too (`KRABKA_CHANGE_RENEWED`). No role,
// or a role the record layout cannot hold, is
// `KRABKA_RESULT_INVALID_ARGUMENT`, before any read. `on_view` is
// required; `on_error` may be NULL. On success `*out` is a new
// `krabka_observer` the caller owns (free it with `krabka_observer_free`);
// on failure it is NULL and no callback is ever called.
//
// Per role, `on_view` first gets one `KRABKA_CHANGE_INITIAL` view once the
// role's committed records are read, then a view at each change, in the
// order of the records that made it (views of different roles
// interleave). A view is a read, not a fence. An unreachable cluster is
// retried (nothing new is reported meanwhile); an error that ends the
// observer (a record of a watched role that does not decode, a state
// topic missing or unreadable) goes to `on_error` once, after the last
// view, and then nothing more is called.
//
// Threads: both callbacks run on one thread the library starts for this
// observer (named `krabka-observe`), never on the caller's thread, never
// two at once, and never on a thread of the library's runtime: a callback
// may block (later views wait, none is lost, but they come late) and may
// call any function of the library, `krabka_observer_close` and
// `krabka_observer_free` of its own observer included (free then returns
// at once; the thread ends when the callback returns). `user_data` is
// passed to every call as it is; the caller keeps it valid, and usable
// from that thread, until `krabka_observer_free` returns.
//
// Does not wait for Kafka (the reads start in the background); any thread.
krabka_result krabka_client_observe(const krabka_client *client, const char *const *roles, size_t n_roles, bool renewals, krabka_view_callback on_view, krabka_observer_error_callback on_error, void *user_data, krabka_observer **out, krabka_error *err);

// Stops the observer: no view is delivered after a callback in progress
// returns (a close from inside a callback: after it returns), and
// `on_error` is not called. Idempotent. Does not block (free waits for the
// thread); any thread, the observer's callbacks included.
krabka_result krabka_observer_close(const krabka_observer *observer);

// Frees an observer; NULL is a no-op. Closes it and waits until its
// thread ended, so no callback runs once this returns and `user_data` may
// be freed then; called from one of the observer's own callbacks it
// returns at once instead, and the thread ends when that callback returns.
// Must not race with another call on the observer.
void krabka_observer_free(krabka_observer *observer);

// Fills `*o` with the position `offset` of `topic`/`partition` and no
// metadata; then set other fields by name (`o.metadata = "...";`), never
// with a positional `{...}` list. `topic` is stored as given (borrowed,
// may be NULL to set later); nothing is checked here (the write checks).
// Does not block; any thread.
krabka_result krabka_input_offset_init(krabka_input_offset *o, const char *topic, int32_t partition, int64_t offset);

// Writes the defaults (no group, no offsets) into `*o`, a struct of
// `caller_size` bytes (use `KRABKA_CONSUMED_OFFSETS_INIT(o)`), and sets
// `o->struct_size` to it, as `krabka_client_options_init` does. Does not
// block; any thread.
krabka_result krabka_consumed_offsets_init(krabka_consumed_offsets *o, size_t caller_size);

// A guarded write that also commits the input it consumed: `count`
// records (borrowed for the call; NULL with 0 for none, then only the
// offsets commit) and the positions in `*offsets` for its consumer group,
// in one transaction of this term's epoch. The records become visible to
// `read_committed` readers and the group's offsets move together, or
// neither happens: a deposed leader's write is `KRABKA_RESULT_FENCED`
// (the term ends), none of its records become visible and the group's
// offsets stay where the last leader committed them.
//
// Everything `krabka_leadership_write` says holds: `KRABKA_RESULT_RESIGNED`
// after a resign, `KRABKA_RESULT_OUTCOME_UNKNOWN` when the commit was sent
// but not confirmed (the offsets then moved exactly when the records
// became visible), the same bounds. `KRABKA_RESULT_INVALID_ARGUMENT`
// naming the value, nothing sent: an empty group, an input offset with an
// empty topic, a negative partition or offset, a topic-partition named
// twice, or a `struct_size` the size rule refuses. A group that consumers
// joined with `subscribe` refuses the commit (`KRABKA_RESULT_FATAL`):
// read the input with assign and seek. `offsets` NULL is
// `KRABKA_RESULT_NULL_ARGUMENT`. Blocks the calling thread for at most
// one renew interval (never past the lease); any thread (writes are
// serialised).
krabka_result krabka_leadership_write_with_offsets(const krabka_leadership *leadership, const krabka_record *records, size_t count, const krabka_consumed_offsets *offsets, krabka_error *err);

// What consumer group `group` has committed for the `count`
// topic-partitions at `partitions`: where the new leader resumes reading
// its input. Only offsets of decided transactions are returned
// (read_committed): an offset an open transaction's pending commit holds
// is waited for, at most one lease duration (then
// `KRABKA_RESULT_TRANSIENT` naming the group and the partitions).
//
// `out` is the caller's array of `count` entries: entry i answers
// `partitions[i]` (its `topic` is that entry's pointer), its `offset`
// `KRABKA_NO_OFFSET` when the group committed nothing there. The metadata
// texts go NUL-terminated into the caller's buffer `metadata` of
// `metadata_capacity` bytes (may be NULL with capacity 0), in the order of
// `out`, and `*metadata_len` gets the bytes they need (each with its NUL)
// even when the buffer is too small: then `KRABKA_RESULT_BUFFER_TOO_SMALL`
// and nothing is written to `out` (ask again with a buffer that large;
// the offsets may have moved meanwhile). Kafka answers an offset committed
// without metadata with an empty text, which takes one byte: `count`
// bytes plus the lengths of the metadata the writes commit suffice.
//
// `KRABKA_RESULT_INVALID_ARGUMENT` naming the value, nothing sent: an
// empty group or topic, a negative partition, a topic-partition asked
// twice. A principal without DESCRIBE on the group or the topic is
// `KRABKA_RESULT_FATAL`. Blocks the calling thread (at most one lease
// duration); any thread.
krabka_result krabka_leadership_committed_offsets(const krabka_leadership *leadership, const char *group, const krabka_topic_partition *partitions, size_t count, krabka_committed_offset *out, char *metadata, size_t metadata_capacity, size_t *metadata_len, krabka_error *err);

// Waits up to `timeout` seconds (`KRABKA_NO_TIMEOUT`: no limit) until the
// library has no task left running: every handle was freed and the work
// they left in the background (a renewal loop ending, an aborted request's
// reader, a resign's last step, the destruction of a freed client's
// librdkafka producer and consumer) is done. Returns `KRABKA_RESULT_OK` once
// idle (at once if no client was ever made), `KRABKA_RESULT_TIMED_OUT`
// otherwise. For a program, or a leak checker, that wants nothing of the
// library running when it exits, in the spirit of librdkafka's
// `rd_kafka_wait_destroyed`; the runtime's own threads stay (they are made
// once per process). Blocks the calling thread; any thread but a callback's
// while its leadership lives.
krabka_result krabka_wait_idle(double timeout);

// Makes a test cluster whose state topic has `partitions` partitions (0:
// the default 16; below 0 `KRABKA_RESULT_INVALID_ARGUMENT`), its clock at
// 2026-01-01T00:00:00Z (epoch ms 1767225600000). On success `*out` is a
// new cluster the caller owns (free it with `krabka_test_cluster_free`);
// on failure NULL. Starts the library's runtime threads if none run yet.
// Does not block otherwise; any thread.
krabka_result krabka_test_cluster_new(int32_t partitions, krabka_test_cluster **out, krabka_error *err);

// Frees a test cluster; NULL is a no-op. Its processes and their clients
// stay usable until freed themselves.
void krabka_test_cluster_free(krabka_test_cluster *cluster);

// Adds a process named `name` (for messages; the member id is what
// `krabka_client_acquire` is given) to the cluster. On success
// `*out_client` is a new `krabka_client` on the cluster and its clock
// (every `krabka_client_*` call works on it; free it with
// `krabka_client_free`) and `*out_process` the new process to put through
// faults (free it with `krabka_test_process_free`); on failure both are
// NULL. Does not block; any thread.
krabka_result krabka_test_cluster_process(const krabka_test_cluster *cluster, const char *name, krabka_client **out_client, krabka_test_process **out_process, krabka_error *err);

// Moves the cluster's clock forward by `seconds` (non-negative, else
// `KRABKA_RESULT_INVALID_ARGUMENT`), deadline by deadline: at each timer's
// instant on the way the members act (the cluster settles before and
// after), then to the end. Blocks the calling thread until done; any
// thread but the library's own.
krabka_result krabka_test_cluster_advance(const krabka_test_cluster *cluster, double seconds, krabka_error *err);

// Moves the clock to the earliest instant a member waits for and lets the
// members act there: `*moved` true and `*at_ms` that instant (epoch ms);
// with nobody waiting, `*moved` false and `*at_ms` the unmoved clock.
// Blocks the calling thread until done; any thread but the library's own.
krabka_result krabka_test_cluster_advance_to_next_deadline(const krabka_test_cluster *cluster, int64_t *at_ms, bool *moved, krabka_error *err);

// Returns once the members have nothing left to do at the current
// instant (on the library's multi-thread runtime: no member made a call or
// set a timer for a few consecutive milliseconds of real time). Call it
// after starting an acquire or a write on another thread, before moving
// the clock. Blocks the calling thread; any thread but the library's own.
krabka_result krabka_test_cluster_settle(const krabka_test_cluster *cluster, krabka_error *err);

// Sets `*out` to the cluster's wall time (epoch ms). Does not block; any
// thread.
krabka_result krabka_test_cluster_now_ms(const krabka_test_cluster *cluster, int64_t *out);

// What the role's transaction coordinator says now, into `*out` (as
// `krabka_client_describe_leadership` answers it), asked by a process of
// the cluster's own that no fault touches. Blocks the calling thread
// briefly; any thread but the library's own.
krabka_result krabka_test_cluster_describe_leadership(const krabka_test_cluster *cluster, const char *role, krabka_leadership_status *out, krabka_error *err);

// Every guarded write the cluster committed so far (every topic but the
// state topic), in commit order, each with the token of the term that
// wrote it. On success `*out` is a new `krabka_test_writes` the caller
// owns (read it with `krabka_test_writes_len` and `krabka_test_writes_get`,
// free it with `krabka_test_writes_free`); on failure NULL. Does not block;
// any thread.
krabka_result krabka_test_cluster_guarded_writes(const krabka_test_cluster *cluster, krabka_test_writes **out, krabka_error *err);

// Sets `*out` to what consumer group `group` has committed for
// `topic`/`partition` on the cluster (the offset of the next record to
// read), or `KRABKA_NO_OFFSET` (-1) when nothing: the input position that
// guarded writes with offsets (`krabka_leadership_write_with_offsets`)
// committed; a commit still pending does not count. Does not block; any
// thread.
krabka_result krabka_test_cluster_committed_offset(const krabka_test_cluster *cluster, const char *group, const char *topic, int32_t partition, int64_t *out, krabka_error *err);

// Sets `*out` to the number of writes in `writes`. Does not block; any
// thread.
krabka_result krabka_test_writes_len(const krabka_test_writes *writes, size_t *out);

// Fills `*out` with the write at `index` in commit order (0 first; below
// the count, else `KRABKA_RESULT_INVALID_ARGUMENT`). Its pointers point
// into `writes`. Does not block; any thread.
krabka_result krabka_test_writes_get(const krabka_test_writes *writes, size_t index, krabka_test_write *out, krabka_error *err);

// Frees a set of writes; NULL is a no-op.
void krabka_test_writes_free(krabka_test_writes *writes);

// Kills the process (SIGKILL): it never answers or wakes again, so it
// neither renews nor resigns nor sends anything; for good (a later resume,
// heal or cut does nothing). Its client counts as closed: a call of it
// pending on another thread (an acquire, a write, a resign, a leader loop)
// returns at once `KRABKA_RESULT_INVALID_ARGUMENT` ("the client is closed:
// its process crashed"), as does every later call; a term it held ends
// with that code as its reason (`krabka_leadership_wait` returns), and an
// observer of it gets it in `on_error`. `krabka_client_close` and
// `krabka_client_free` of it end nothing (as the system frees a killed
// process's resources) and return at once. Does not block; any thread.
krabka_result krabka_test_process_crash(const krabka_test_process *process);

// Stops the process (SIGSTOP): its calls and timers wait (a thread blocked
// in a call of its client stays blocked). Its clocks go on, so on
// `krabka_test_process_resume` what came due fires at once and a write it
// had in flight reaches the cluster, which fences it if another member
// took the role meanwhile. Nothing for a crashed process. Does not block;
// any thread.
krabka_result krabka_test_process_pause(const krabka_test_process *process);

// Resumes a paused process (SIGCONT). Nothing for a crashed process. Does
// not block; any thread.
krabka_result krabka_test_process_resume(const krabka_test_process *process);

// Cuts the process off from the cluster: each call of its client fails
// as transient (its timers still run) until `krabka_test_process_heal`.
// Does not block; any thread.
krabka_result krabka_test_process_cut_off(const krabka_test_process *process);

// Ends a cut (the same as `krabka_test_process_resume`). Does not block;
// any thread.
krabka_result krabka_test_process_heal(const krabka_test_process *process);

// Makes each call of the process fail as transient for `seconds`
// (non-negative, else `KRABKA_RESULT_INVALID_ARGUMENT`) of the cluster's
// time from now: a renewal or a guarded write that fails for a while,
// then goes through. Does not block; any thread.
krabka_result krabka_test_process_fail_for(const krabka_test_process *process, double seconds, krabka_error *err);

// Frees a process handle; NULL is a no-op. Frees nothing of its client's,
// and the process keeps its state (a paused one stays paused).
void krabka_test_process_free(krabka_test_process *process);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* KRABKA_COORDINATION_H */
