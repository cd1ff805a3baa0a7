/*
 * The leadership surface in one process on the real local Kafka: acquire
 * with events on the callback thread, the token, describe and authoritative,
 * the role state, guarded writes (and their bad arguments on a real
 * leadership), a second member's acquire that times out and leaves nothing
 * behind, the stated thread safety (threads sharing one client, one
 * leadership and one decoded value), resign and the end of the events.
 *
 * Environment: KRABKA_BOOTSTRAP (required: the test fails when Kafka is
 * unreachable), KRABKA_C_TOPIC (a topic for guarded writes), KRABKA_C_SLOW
 * (set under valgrind: longer lease timings).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const size_t HUGE_LEN = SIZE_MAX;
static const char *topic;

/* What a callback saw: the kinds in order, on which thread. */
typedef struct {
    pthread_mutex_t lock;
    char kinds[64][24];
    int count;
    int other_thread;
    int on_main_thread;
    pthread_t main_thread;
    krabka_fencing_token elected;
} seen_events;

static void seen_init(seen_events *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->main_thread = pthread_self();
}

static void on_event(const krabka_event *event, void *user_data) {
    seen_events *s = (seen_events *)user_data;
    pthread_mutex_lock(&s->lock);
    if (s->count < 64) {
        snprintf(s->kinds[s->count], sizeof s->kinds[0], "%s", event->name);
        s->count++;
    }
    if (pthread_equal(pthread_self(), s->main_thread)) s->on_main_thread++;
    else s->other_thread++;
    if (event->kind == KRABKA_EVENT_KIND_ELECTED) s->elected = event->token;
    pthread_mutex_unlock(&s->lock);
}

static int seen_has(seen_events *s, const char *kind) {
    int i, found = 0;
    pthread_mutex_lock(&s->lock);
    for (i = 0; i < s->count; i++) found |= strcmp(s->kinds[i], kind) == 0;
    pthread_mutex_unlock(&s->lock);
    return found;
}

static const char *seen_last(seen_events *s, int back) {
    const char *k;
    pthread_mutex_lock(&s->lock);
    k = s->count > back ? s->kinds[s->count - 1 - back] : "";
    pthread_mutex_unlock(&s->lock);
    return k;
}

static int seen_count(seen_events *s) {
    int n;
    pthread_mutex_lock(&s->lock);
    n = s->count;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static void pause_ms(long ms) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&t, NULL);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *fire_later(void *cancel) {
    pause_ms(500);
    krabka_cancel_fire((const krabka_cancel *)cancel);
    return NULL;
}

/* --- the thread-safety check ------------------------------------------- */

typedef struct {
    krabka_client *client;
    krabka_leadership *leadership;
    const krabka_lease *lease;
    const char *role;
    int index;
    int failures;
    int calls;
} worker;

static void *work(void *arg) {
    worker *w = (worker *)arg;
    int i;
    for (i = 0; i < 10; i++) {
        test_error e;
        krabka_fencing_token t;
        krabka_leadership_status status;
        krabka_lease_fields f;
        krabka_record rec;
        char value[32];
        bool held = false, yes = false;
        double left = 0;
        int ok = 1;
        ok &= krabka_leadership_token(w->leadership, &t, error_init(&e)) == KRABKA_RESULT_OK;
        ok &= krabka_leadership_is_held(w->leadership, &held, NULL) == KRABKA_RESULT_OK && held;
        ok &= krabka_leadership_lease_left(w->leadership, &left, NULL) == KRABKA_RESULT_OK && left > 0;
        ok &= krabka_client_describe_leadership(w->client, w->role, &status, error_init(&e)) == KRABKA_RESULT_OK;
        ok &= krabka_leadership_status_authoritative(&status, &t, &yes) == KRABKA_RESULT_OK && yes;
        ok &= krabka_lease_get_fields(w->lease, &f) == KRABKA_RESULT_OK && f.member_len == 1;
        snprintf(value, sizeof value, "thread %d write %d", w->index, i);
        memset(&rec, 0, sizeof rec);
        rec.topic = topic;
        rec.partition = KRABKA_ANY_PARTITION;
        rec.value = (const uint8_t *)value;
        rec.value_len = strlen(value);
        ok &= krabka_leadership_write(w->leadership, &rec, 1, error_init(&e)) == KRABKA_RESULT_OK;
        if (!ok) {
            fprintf(stderr, "thread %d call %d: %s\n", w->index, i, e.buf);
            w->failures++;
        }
        w->calls++;
    }
    return NULL;
}

static void threads(krabka_client *client, krabka_leadership *l, const char *role) {
    enum { N = 4 };
    pthread_t ids[N];
    worker w[N];
    krabka_lease *lease = NULL;
    krabka_lease_fields lf = {"a", 1, {7, 1}, 1, 2};
    uint8_t buf[64];
    size_t len = 0;
    int i, failures = 0, calls = 0;
    krabka_encode_lease(&lf, buf, sizeof buf, &len, NULL);
    REQUIRE(krabka_decode_lease(buf, len, &lease, NULL) == KRABKA_RESULT_OK, "decode");
    for (i = 0; i < N; i++) {
        w[i].client = client;
        w[i].leadership = l;
        w[i].lease = lease;
        w[i].role = role;
        w[i].index = i;
        w[i].failures = 0;
        w[i].calls = 0;
        REQUIRE(pthread_create(&ids[i], NULL, work, &w[i]) == 0, "pthread_create");
    }
    for (i = 0; i < N; i++) {
        pthread_join(ids[i], NULL);
        failures += w[i].failures;
        calls += w[i].calls;
    }
    krabka_lease_free(lease);
    CHECK(failures == 0 && calls == N * 10, "%d of %d rounds failed with %d threads sharing the handles", failures,
          calls, N);
}

/* --- the test ------------------------------------------------------------ */

int main(void) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *keys[1] = {"bootstrap.servers"};
    char role[128];
    test_error te;
    krabka_error *err = error_init(&te);
    krabka_client *client = NULL, *other = NULL;
    krabka_leadership *l = NULL, *l2 = NULL;
    krabka_leadership_options fast;
    krabka_topic_options to;
    krabka_fencing_token token, no_epoch;
    krabka_leadership_status status;
    krabka_role_state *state = NULL;
    krabka_roster_entry entry;
    krabka_lease_fields lease;
    krabka_record rec;
    krabka_header headers[2];
    krabka_result reason;
    seen_events ev, ev2;
    bool created = false, flag = false;
    size_t n = 0;
    int32_t partition = -1;
    double left = 0, t0;
    int count_after;

    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    topic = getenv("KRABKA_C_TOPIC");
    REQUIRE(topic && *topic, "KRABKA_C_TOPIC is not set");
    snprintf(role, sizeof role, "c-kafka-%ld-%ld", (long)getpid(), (long)time(NULL));
    seen_init(&ev);
    seen_init(&ev2);

    CHECK_RESULT(krabka_client_new(keys, &bootstrap, 1, NULL, &client, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(krabka_client_new(keys, &bootstrap, 1, NULL, &other, err), KRABKA_RESULT_OK, err);
    REQUIRE(client && other, "no client");
    KRABKA_TOPIC_OPTIONS_INIT(&to);
    to.development = true;
    REQUIRE(krabka_client_ensure_state_topic(client, &to, &created, err) == KRABKA_RESULT_OK,
            "Kafka at %s is unreachable or refuses the state topic: %s", bootstrap, te.buf);

    /* Nobody took the role yet: NoEpoch, never authoritative. */
    CHECK_RESULT(krabka_client_describe_leadership(client, role, &status, err), KRABKA_RESULT_OK, err);
    krabka_fencing_token_no_epoch(&no_epoch);
    CHECK(status.token.producer_id == -1 && status.token.producer_epoch == -1, "a fresh role has NoEpoch");
    krabka_leadership_status_authoritative(&status, &no_epoch, &flag);
    CHECK(!flag, "NoEpoch is never authoritative");

    KRABKA_LEADERSHIP_OPTIONS_INIT(&fast);
    fast.lease_duration = 3.0;
    fast.renew_interval = 1.0;
    fast.challenge_stagger = 0.0;
    if (getenv("KRABKA_C_SLOW")) {
        /* Under valgrind everything runs tens of times slower: a lease that
         * rides out the slowdown. */
        fast.lease_duration = 20.0;
        fast.renew_interval = 5.0;
    }
    CHECK_RESULT(krabka_client_acquire(client, role, "a", &fast, 60.0, NULL, on_event, &ev, &l, err), KRABKA_RESULT_OK, err);
    REQUIRE(l != NULL, "not elected: %s", te.buf);
    {
        /* Events reach the callback thread asynchronously: wait for them. */
        int i;
        for (i = 0; i < 100 && !seen_has(&ev, "elected"); i++) pause_ms(50);
    }
    CHECK(seen_has(&ev, "registered") && seen_has(&ev, "elected") && strcmp(ev.kinds[0], "registered") == 0,
          "events from the registration to the election: last %s", seen_last(&ev, 0));
    CHECK(ev.other_thread > 0 && ev.on_main_thread == 0, "callbacks run on their own thread (%d on the caller's)",
          ev.on_main_thread);
    /* The same client refuses a second acquire of the role. */
    CHECK_RESULT(krabka_client_acquire(client, role, "a2", &fast, 1.0, NULL, NULL, NULL, &l2, err),
                 KRABKA_RESULT_INVALID_ARGUMENT, err);

    CHECK_RESULT(krabka_leadership_token(l, &token, err), KRABKA_RESULT_OK, err);
    CHECK(token.producer_id >= 0 && token.producer_epoch >= 0, "a minted token");
    CHECK(ev.elected.producer_id == token.producer_id && ev.elected.producer_epoch == token.producer_epoch,
          "the elected event carries the token");
    CHECK_RESULT(krabka_leadership_is_held(l, &flag, err), KRABKA_RESULT_OK, err);
    CHECK(flag, "held");
    CHECK_RESULT(krabka_leadership_lease_left(l, &left, err), KRABKA_RESULT_OK, err);
    CHECK(left > 0 && left <= fast.lease_duration, "lease left %.3f", left);
    CHECK_RESULT(krabka_leadership_reason(l, &reason, err), KRABKA_RESULT_OK, err);
    CHECK(reason == KRABKA_RESULT_OK && te.err.length == 0, "no end reason while held");
    {
        int32_t p = -1, want = -2;
        uint32_t failures = 99;
        krabka_lease *own = NULL;
        krabka_lease_fields f;
        krabka_role_partition(role, strlen(role), 16, &want, NULL);
        CHECK_RESULT(krabka_leadership_partition(l, &p, err), KRABKA_RESULT_OK, err);
        CHECK(p == want, "partition %d, the codec says %d", p, want);
        CHECK_RESULT(krabka_leadership_renewal_failures(l, &failures, err), KRABKA_RESULT_OK, err);
        CHECK(failures == 0, "renewal failures %u", failures);
        CHECK_RESULT(krabka_leadership_lease(l, &own, err), KRABKA_RESULT_OK, err);
        CHECK(own && krabka_lease_get_fields(own, &f) == KRABKA_RESULT_OK && f.member_len == 1 &&
                  f.member[0] == 'a' && f.token.producer_id == token.producer_id && f.deadline > f.granted_at,
              "the member's own lease");
        krabka_lease_free(own);
        CHECK_RESULT(krabka_leadership_partition(l, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
        CHECK_RESULT(krabka_leadership_renewal_failures(l, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
        CHECK_RESULT(krabka_leadership_lease(l, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    }
    CHECK_RESULT(krabka_leadership_wait(l, 0, &reason, err), KRABKA_RESULT_TIMED_OUT, err);
    t0 = now();
    CHECK_RESULT(krabka_leadership_wait(l, 0.3, &reason, err), KRABKA_RESULT_TIMED_OUT, err);
    CHECK(now() - t0 >= 0.29 && now() - t0 < 2.0, "a 0.3 s wait took %.2f s", now() - t0);
    /* Real handles, NULL outputs. */
    CHECK_RESULT(krabka_leadership_token(l, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_is_held(l, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_lease_left(l, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_reason(l, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_wait(l, 0, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_wait(l, -5, &reason, err), KRABKA_RESULT_INVALID_ARGUMENT, err);

    /* describe */
    CHECK_RESULT(krabka_client_describe_leadership(other, role, &status, err), KRABKA_RESULT_OK, err);
    krabka_leadership_status_authoritative(&status, &token, &flag);
    CHECK(flag, "the holder's token is authoritative");

    /* role state */
    CHECK_RESULT(krabka_client_describe_role_state(other, role, &state, err), KRABKA_RESULT_OK, err);
    REQUIRE(state != NULL, "no role state");
    CHECK_RESULT(krabka_role_state_partition(state, &partition), KRABKA_RESULT_OK, err);
    {
        int32_t want = -2;
        krabka_role_partition(role, strlen(role), 16, &want, NULL);
        CHECK(partition == want, "partition %d, the codec says %d", partition, want);
    }
    CHECK_RESULT(krabka_role_state_roster_len(state, &n), KRABKA_RESULT_OK, err);
    CHECK(n == 1, "one member, got %zu", n);
    CHECK_RESULT(krabka_role_state_roster_entry(state, 0, &entry, err), KRABKA_RESULT_OK, err);
    CHECK(entry.member_len == 1 && entry.member[0] == 'a' && entry.rank == 0 && entry.offset >= 0, "the roster");
    CHECK_RESULT(krabka_role_state_roster_entry(state, 1, &entry, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK_RESULT(krabka_role_state_lease(state, &flag, &lease), KRABKA_RESULT_OK, err);
    CHECK(flag && lease.member_len == 1 && lease.token.producer_id == token.producer_id &&
              lease.token.producer_epoch == token.producer_epoch && lease.deadline > lease.granted_at,
          "the lease is a's");
    CHECK_RESULT(krabka_role_state_partition(state, NULL), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_role_state_roster_len(state, NULL), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_role_state_roster_entry(state, 0, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_role_state_lease(state, NULL, &lease), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_role_state_lease(state, &flag, NULL), KRABKA_RESULT_NULL_ARGUMENT, err);
    krabka_role_state_free(state);

    /* guarded writes: one with a key and headers, a tombstone, several */
    memset(&rec, 0, sizeof rec);
    headers[0].name = "h1";
    headers[0].value = (const uint8_t *)"v1";
    headers[0].value_len = 2;
    headers[1].name = "h2";
    headers[1].value = NULL;
    headers[1].value_len = 0;
    rec.topic = topic;
    rec.partition = 0;
    rec.key = (const uint8_t *)"k";
    rec.key_len = 1;
    rec.value = (const uint8_t *)"value";
    rec.value_len = 5;
    rec.headers = headers;
    rec.header_count = 2;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_OK, err);
    {
        krabka_record two[2];
        two[0] = rec;
        two[1] = rec;
        two[1].value = NULL;
        two[1].value_len = 0;
        two[1].partition = KRABKA_ANY_PARTITION;
        CHECK_RESULT(krabka_leadership_write(l, two, 2, err), KRABKA_RESULT_OK, err);
    }
    CHECK_RESULT(krabka_leadership_write(l, NULL, 0, err), KRABKA_RESULT_OK, err);
    /* ... and their bad arguments, on a real leadership */
    CHECK_RESULT(krabka_leadership_write(l, NULL, 1, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_write(l, &rec, HUGE_LEN, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    rec.topic = NULL;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK(strstr(te.buf, "records[0].topic must not be NULL") != NULL, "%s", te.buf);
    rec.topic = topic;
    rec.key = NULL;
    rec.key_len = 3;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK(strstr(te.buf, "records[0].key must not be NULL") != NULL, "%s", te.buf);
    rec.key = (const uint8_t *)"k";
    rec.key_len = 1;
    rec.value_len = HUGE_LEN;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te.buf, "records[0].value_len must be at most") != NULL, "%s", te.buf);
    rec.value_len = 5;
    rec.partition = -5;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te.buf, "records[0].partition must be an integer from 0") != NULL, "%s", te.buf);
    rec.partition = 0;
    rec.headers = NULL;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    rec.headers = headers;
    headers[0].name = NULL;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK(strstr(te.buf, "records[0].headers[0].name must not be NULL") != NULL, "%s", te.buf);
    headers[0].name = "h1";
    headers[1].value_len = HUGE_LEN;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    headers[1].value_len = 0;
    rec.header_count = HUGE_LEN;
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    rec.header_count = 2;
    CHECK_RESULT(krabka_leadership_is_held(l, &flag, err), KRABKA_RESULT_OK, err);
    CHECK(flag, "refused arguments leave the role held");

    /* A second member on another client waits behind a; its acquire times
     * out, is cancelled, and its member is deregistered; every event of
     * the attempt was delivered before the call returned. */
    t0 = now();
    CHECK_RESULT(krabka_client_acquire(other, role, "b", &fast, 1.0, NULL, on_event, &ev2, &l2, err),
                 KRABKA_RESULT_TIMED_OUT, err);
    CHECK(l2 == NULL, "no leadership after a timeout");
    CHECK(now() - t0 >= 0.99 && now() - t0 < 12.0, "the acquire returned after %.2f s", now() - t0);
    CHECK(strstr(te.buf, "timed out after 1 seconds") != NULL, "%s", te.buf);
    CHECK(seen_has(&ev2, "registered") && seen_has(&ev2, "waiting"), "b registered and waited");
    CHECK(strcmp(seen_last(&ev2, 0), "deregistered") == 0, "b's last event is deregistered, got %s",
          seen_last(&ev2, 0));
    count_after = seen_count(&ev2);
    {
        char got[256] = "";
        CHECK_RESULT(krabka_client_describe_role_state(client, role, &state, err), KRABKA_RESULT_OK, err);
        krabka_role_state_roster_len(state, &n);
        CHECK(n == 1, "b left the roster (%zu members)", n);
        krabka_role_state_free(state);
        (void)got;
    }

    /* A cancellation fired from another thread stops a waiting acquire. */
    {
        pthread_t firer;
        krabka_cancel *cancel = NULL;
        REQUIRE(krabka_cancel_new(&cancel) == KRABKA_RESULT_OK, "cancel");
        REQUIRE(pthread_create(&firer, NULL, fire_later, cancel) == 0, "pthread_create");
        t0 = now();
        CHECK_RESULT(krabka_client_acquire(other, role, "c", &fast, KRABKA_NO_TIMEOUT, cancel, NULL, NULL, &l2, err),
                     KRABKA_RESULT_CANCELLED, err);
        CHECK(l2 == NULL && now() - t0 < 12.0, "cancelled after %.2f s", now() - t0);
        pthread_join(firer, NULL);
        /* An acquire given a fired cancellation stops at once. */
        CHECK_RESULT(krabka_client_acquire(other, role, "c", &fast, KRABKA_NO_TIMEOUT, cancel, NULL, NULL, &l2, err),
                     KRABKA_RESULT_CANCELLED, err);
        krabka_cancel_free(cancel);
        CHECK_RESULT(krabka_client_describe_role_state(client, role, &state, err), KRABKA_RESULT_OK, err);
        krabka_role_state_roster_len(state, &n);
        CHECK(n == 1, "c left the roster (%zu members)", n);
        krabka_role_state_free(state);
    }

    /* Threads sharing the client, the leadership and a decoded value. */
    threads(other, l, role);

    /* resign: the term ends, the events end with resigned, deregistered */
    CHECK_RESULT(krabka_leadership_resign(l, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(krabka_leadership_wait(l, KRABKA_NO_TIMEOUT, &reason, err), KRABKA_RESULT_OK, err);
    CHECK(reason == KRABKA_RESULT_RESIGNED && strstr(te.buf, "resigned") != NULL, "reason %s: %s",
          krabka_result_name(reason), te.buf);
    CHECK_RESULT(krabka_leadership_reason(l, &reason, err), KRABKA_RESULT_OK, err);
    CHECK(reason == KRABKA_RESULT_RESIGNED, "reason %s", krabka_result_name(reason));
    CHECK_RESULT(krabka_leadership_resign(l, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(krabka_leadership_write(l, &rec, 1, err), KRABKA_RESULT_RESIGNED, err);
    {
        int i;
        for (i = 0; i < 100 && strcmp(seen_last(&ev, 0), "deregistered") != 0; i++) pause_ms(50);
    }
    CHECK(strcmp(seen_last(&ev, 1), "resigned") == 0 && strcmp(seen_last(&ev, 0), "deregistered") == 0,
          "the events end with resigned, deregistered: %s, %s", seen_last(&ev, 1), seen_last(&ev, 0));
    CHECK_RESULT(krabka_client_describe_leadership(client, role, &status, err), KRABKA_RESULT_OK, err);
    krabka_leadership_status_authoritative(&status, &token, &flag);
    CHECK(!flag, "the resigned token is superseded");
    count_after = seen_count(&ev);
    krabka_leadership_free(l);
    pause_ms(200);
    CHECK(seen_count(&ev) == count_after, "no event after the free");
    CHECK(seen_count(&ev2) >= 3, "b's events are kept");

    krabka_client_free(other);
    krabka_client_free(client);
    /* Everything freed: the background work ends (a leak checker sees
     * nothing of the library running at exit). */
    CHECK(krabka_wait_idle(30) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    pthread_mutex_destroy(&ev.lock);
    pthread_mutex_destroy(&ev2.lock);
    return check_summary("kafka");
}
