/*
 * krabka_client_close ends everything the client started, on a real Kafka
 * (KRABKA_BOOTSTRAP): a role the closed client held is taken over by
 * another client's standby at once, long before its lease would have run
 * out; an acquire of the closed client waiting in another thread returns
 * KRABKA_RESULT_CANCELLED and leaves the roster; the leadership handle
 * reports its term ended; every later call on the client is refused; a
 * second close and the free are harmless.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* A lease long enough that a standby which took over did not wait it out. */
static const double LEASE = 20.0;

typedef struct {
    const krabka_client *client;
    const char *role;
    const char *member;
    double timeout;
    krabka_leadership *out;
    krabka_result result;
    test_error te;
} acquire_call;

static krabka_leadership_options timings(void) {
    krabka_leadership_options o;
    KRABKA_LEADERSHIP_OPTIONS_INIT(&o);
    o.lease_duration = LEASE;
    o.renew_interval = 2.0;
    o.challenge_stagger = 1.0;
    return o;
}

static void *acquire_thread(void *arg) {
    acquire_call *c = arg;
    krabka_leadership_options o = timings();
    c->result = krabka_client_acquire(c->client, c->role, c->member, &o, c->timeout, NULL, NULL, NULL, &c->out,
                                      error_init(&c->te));
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The roster of `role` joined by commas into `buf`. */
static const char *roster(const krabka_client *client, const char *role, char *buf, size_t len) {
    krabka_role_state *state = NULL;
    size_t n = 0, i;
    test_error te;
    buf[0] = '\0';
    if (krabka_client_describe_role_state(client, role, &state, error_init(&te)) != KRABKA_RESULT_OK) return buf;
    krabka_role_state_roster_len(state, &n);
    for (i = 0; i < n; i++) {
        krabka_roster_entry entry;
        if (krabka_role_state_roster_entry(state, i, &entry, error_init(&te)) != KRABKA_RESULT_OK) break;
        size_t used = strlen(buf);
        /* `member` is not NUL-terminated: `member_len` bytes. */
        snprintf(buf + used, len - used, "%s%.*s", i > 0 ? "," : "", (int)entry.member_len, entry.member);
    }
    krabka_role_state_free(state);
    return buf;
}

static int wait_roster(const krabka_client *client, const char *role, const char *want) {
    char buf[256];
    int i;
    for (i = 0; i < 300; i++) {
        if (strcmp(roster(client, role, buf, sizeof buf), want) == 0) return 1;
        pause_ms(100);
    }
    fprintf(stderr, "roster of %s: '%s', wanted '%s'\n", role, buf, want);
    return 0;
}

int main(void) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *keys[1] = {"bootstrap.servers"};
    char held[128], waited[128], buf[256];
    test_error te;
    krabka_error *err = error_init(&te);
    krabka_client *holder = NULL, *other = NULL;
    krabka_leadership *a = NULL, *x = NULL, *probe = NULL;
    krabka_leadership_options o = timings();
    krabka_topic_options to;
    krabka_fencing_token ta, tb;
    krabka_leadership_status status;
    acquire_call standby, pending;
    pthread_t standby_thread, pending_thread;
    bool flag = true, created = false;
    double closed_at, took;

    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    snprintf(held, sizeof held, "c-close-held-%ld-%ld", (long)getpid(), (long)time(NULL));
    snprintf(waited, sizeof waited, "c-close-waited-%ld-%ld", (long)getpid(), (long)time(NULL));
    CHECK_RESULT(krabka_client_new(keys, &bootstrap, 1, NULL, &holder, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(krabka_client_new(keys, &bootstrap, 1, NULL, &other, err), KRABKA_RESULT_OK, err);
    REQUIRE(holder && other, "no client");
    KRABKA_TOPIC_OPTIONS_INIT(&to);
    to.development = true;
    REQUIRE(krabka_client_ensure_state_topic(other, &to, &created, err) == KRABKA_RESULT_OK,
            "Kafka at %s is unreachable or refuses the state topic: %s", bootstrap, te.buf);

    CHECK_RESULT(krabka_client_acquire(other, waited, "x", &o, 60.0, NULL, NULL, NULL, &x, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(krabka_client_acquire(holder, held, "a", &o, 60.0, NULL, NULL, NULL, &a, err), KRABKA_RESULT_OK, err);
    REQUIRE(a && x, "not elected: %s", te.buf);
    standby = (acquire_call){.client = other, .role = held, .member = "b", .timeout = LEASE / 2};
    pending = (acquire_call){.client = holder, .role = waited, .member = "a", .timeout = KRABKA_NO_TIMEOUT};
    REQUIRE(pthread_create(&standby_thread, NULL, acquire_thread, &standby) == 0, "pthread_create");
    REQUIRE(pthread_create(&pending_thread, NULL, acquire_thread, &pending) == 0, "pthread_create");
    REQUIRE(wait_roster(other, held, "a,b"), "b waiting behind a");
    REQUIRE(wait_roster(other, waited, "x,a"), "a waiting behind x");

    closed_at = now();
    krabka_client_close(holder);
    CHECK_RESULT(krabka_leadership_is_held(a, &flag, err), KRABKA_RESULT_OK, err);
    CHECK(!flag, "the closed client's leadership ended");
    pthread_join(standby_thread, NULL);
    took = now() - closed_at;
    CHECK(standby.result == KRABKA_RESULT_OK, "the standby took over: %s (%s)", krabka_result_name(standby.result),
          standby.te.buf);
    CHECK(took < LEASE / 2, "the standby took over %.1f s after the close", took);
    if (standby.out) {
        krabka_leadership_token(a, &ta, err);
        krabka_leadership_token(standby.out, &tb, err);
        CHECK(tb.producer_id == ta.producer_id && tb.producer_epoch > ta.producer_epoch, "a newer epoch");
    }
    pthread_join(pending_thread, NULL);
    CHECK(pending.result == KRABKA_RESULT_CANCELLED, "the pending acquire: %s (%s)", krabka_result_name(pending.result),
          pending.te.buf);
    CHECK(strcmp(roster(other, waited, buf, sizeof buf), "x") == 0, "the cancelled member left: '%s'", buf);

    CHECK_RESULT(krabka_client_describe_leadership(holder, held, &status, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te.buf, "the client is closed") != NULL, "the refusal says so: %s", te.buf);
    CHECK_RESULT(krabka_client_acquire(holder, held, "a", &o, 1.0, NULL, NULL, NULL, &probe, err),
                 KRABKA_RESULT_INVALID_ARGUMENT, err);
    krabka_client_close(holder); /* idempotent */

    if (standby.out) CHECK_RESULT(krabka_leadership_resign(standby.out, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(krabka_leadership_resign(x, err), KRABKA_RESULT_OK, err);
    krabka_leadership_free(standby.out);
    krabka_leadership_free(pending.out);
    krabka_leadership_free(probe);
    krabka_leadership_free(x);
    krabka_leadership_free(a);
    krabka_client_free(holder);
    krabka_client_free(other);
    CHECK(krabka_wait_idle(30) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    return check_summary("close");
}
