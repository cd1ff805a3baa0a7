/*
 * The test kit in C, without a broker: an in-memory cluster on a manual
 * clock (krabka_test_cluster), processes whose krabka_client is the real
 * one, their faults, and the guarded writes read back with their tokens.
 * The clock is the test's: 30 s leases pass in no wall time and nothing
 * sleeps. A member that waits for the role does so in a krabka_client_acquire
 * on a thread of its own while the main thread moves the clock.
 *
 * Cases: the scenario set of docs/testing.md, under the same names as in
 * the core's, Python's and Node's kit tests (an election and its renewals,
 * a crash failed over at the lease's deadline plus rank x stagger (rank 0
 * at the deadline, rank 1 behind a crashed standby one stagger later), a
 * pause during which a write is in flight and is refused on resume (only
 * the authoritative token's writes committed), a resign handed over at
 * once, an observer that sees the failover, a leader loop that contends
 * again after losing); then a leader cut off past its lease replaced then
 * healed, renewals failing for a while that keep the role, a crashed
 * process's pending acquire returning, a leader's input offsets committed
 * with its writes and read back, and the argument checks.
 *
 * Usage: test_testing_kit (no environment).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define ROLE "billing"
#define TOPIC "orders"
#define START_MS INT64_C(1767225600000)

/* A member that contends for ROLE on a thread of its own. */
typedef struct {
    krabka_client *client;
    const char *member;
    /* The acquire's timings, or NULL for the defaults. */
    const krabka_leadership_options *options;
    pthread_t thread;
    krabka_leadership *leadership;
    krabka_result result;
    test_error e;
    /* The `elected` event's instant (0 until it comes), from the event
     * callback's thread. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int64_t elected_at;
    bool returned;
    /* A `renewal_failing` event came. */
    bool failing_seen;
} contender;

/* Waits for `*flag` under `lock`, at most 30 s of real time: a bound on a
 * call the clock should have let finish already, so that a failure ends
 * the test instead of hanging it (not a sleep: it returns at the signal). */
static bool wait_flag(pthread_mutex_t *lock, pthread_cond_t *cond, const bool *flag) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(lock);
    while (!*flag) {
        if (pthread_cond_timedwait(cond, lock, &until) != 0) break;
    }
    bool got = *flag;
    pthread_mutex_unlock(lock);
    return got;
}

static void on_event(const krabka_event *event, void *user_data) {
    contender *c = user_data;
    pthread_mutex_lock(&c->lock);
    if (event->kind == KRABKA_EVENT_KIND_ELECTED) c->elected_at = event->at;
    if (event->kind == KRABKA_EVENT_KIND_RENEWAL_FAILING) c->failing_seen = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static void *contend_run(void *arg) {
    contender *c = arg;
    c->result = krabka_client_acquire(c->client, ROLE, c->member, c->options, KRABKA_NO_TIMEOUT,
                                      NULL, on_event, c, &c->leadership, error_init(&c->e));
    pthread_mutex_lock(&c->lock);
    c->returned = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Starts `member`'s acquire on `client` with `options` (NULL: the
 * defaults; else it must outlive the acquire). */
static void contend_start_with(contender *c, krabka_client *client, const char *member,
                               const krabka_leadership_options *options) {
    memset(c, 0, sizeof *c);
    c->client = client;
    c->member = member;
    c->options = options;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    REQUIRE(pthread_create(&c->thread, NULL, contend_run, c) == 0, "pthread_create");
}

static void contend_start(contender *c, krabka_client *client, const char *member) {
    contend_start_with(c, client, member, NULL);
}

/* The instant the contender was elected at: its `elected` event reaches the
 * callback's thread at most a few seconds of real time after its acquire
 * returned (a bound on a delivery, not a sleep). */
static int64_t contend_elected_at(contender *c) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&c->lock);
    while (c->elected_at == 0) {
        if (pthread_cond_timedwait(&c->cond, &c->lock, &until) != 0) break;
    }
    int64_t at = c->elected_at;
    pthread_mutex_unlock(&c->lock);
    return at;
}

static void contend_free(contender *c) {
    krabka_leadership_free(c->leadership);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
}

/* Waits for the contender's acquire to return; it must have won. */
static krabka_leadership *contend_won(contender *c) {
    REQUIRE(wait_flag(&c->lock, &c->cond, &c->returned), "%s's acquire should have returned",
            c->member);
    pthread_join(c->thread, NULL);
    REQUIRE(c->result == KRABKA_RESULT_OK, "%s's acquire returned %s (%s)", c->member,
            krabka_result_name(c->result), c->e.buf);
    return c->leadership;
}

/* Settles the cluster until `n` members are registered for ROLE: a
 * contender's acquire has reached the cluster once its registration is
 * read back. Bounded: no member takes a thousand rounds to register. */
static void wait_registered(krabka_test_cluster *cluster, krabka_client *reader, size_t n) {
    test_error e;
    int round;
    for (round = 0; round < 1000; round++) {
        krabka_role_state *state = NULL;
        size_t len = 0;
        REQUIRE(krabka_test_cluster_settle(cluster, error_init(&e)) == KRABKA_RESULT_OK, "%s",
                e.buf);
        REQUIRE(krabka_client_describe_role_state(reader, ROLE, &state, error_init(&e)) ==
                    KRABKA_RESULT_OK,
                "describe_role_state: %s", e.buf);
        krabka_role_state_roster_len(state, &len);
        krabka_role_state_free(state);
        if (len >= n) return;
    }
    REQUIRE(0, "%zu members never registered", n);
}

/* A process of `cluster`: its client and its faults. */
typedef struct {
    krabka_client *client;
    krabka_test_process *process;
} proc;

static proc process(krabka_test_cluster *cluster, const char *name) {
    proc p = {NULL, NULL};
    test_error e;
    REQUIRE(krabka_test_cluster_process(cluster, name, &p.client, &p.process, error_init(&e)) ==
                KRABKA_RESULT_OK,
            "process %s: %s", name, e.buf);
    return p;
}

static void proc_free(proc *p) {
    krabka_client_free(p->client);
    krabka_test_process_free(p->process);
}

static krabka_test_cluster *cluster_new(void) {
    krabka_test_cluster *cluster = NULL;
    test_error e;
    REQUIRE(krabka_test_cluster_new(0, &cluster, error_init(&e)) == KRABKA_RESULT_OK, "%s", e.buf);
    return cluster;
}

static krabka_leadership *acquire(krabka_client *client, const char *member) {
    krabka_leadership *l = NULL;
    test_error e;
    REQUIRE(krabka_client_acquire(client, ROLE, member, NULL, KRABKA_NO_TIMEOUT, NULL, NULL, NULL,
                                  &l, error_init(&e)) == KRABKA_RESULT_OK,
            "%s's acquire: %s", member, e.buf);
    return l;
}

static krabka_fencing_token token_of(const krabka_leadership *l) {
    krabka_fencing_token t;
    krabka_leadership_token(l, &t, NULL);
    return t;
}

static bool same_token(krabka_fencing_token a, krabka_fencing_token b) {
    return a.producer_id == b.producer_id && a.producer_epoch == b.producer_epoch;
}

static bool authoritative(krabka_test_cluster *cluster, krabka_fencing_token t) {
    krabka_leadership_status status;
    test_error e;
    bool yes = false;
    REQUIRE(krabka_test_cluster_describe_leadership(cluster, ROLE, &status, error_init(&e)) ==
                KRABKA_RESULT_OK,
            "describe_leadership: %s", e.buf);
    krabka_leadership_status_authoritative(&status, &t, &yes);
    return yes;
}

static bool held(const krabka_leadership *l) {
    bool yes = false;
    krabka_leadership_is_held(l, &yes, NULL);
    return yes;
}

static int64_t now_ms(const krabka_test_cluster *cluster) {
    int64_t at = 0;
    krabka_test_cluster_now_ms(cluster, &at);
    return at;
}

static void advance(krabka_test_cluster *cluster, double seconds) {
    test_error e;
    REQUIRE(krabka_test_cluster_advance(cluster, seconds, error_init(&e)) == KRABKA_RESULT_OK,
            "advance: %s", e.buf);
}

static krabka_result write_one(const krabka_leadership *l, const char *value, test_error *e) {
    krabka_record rec;
    krabka_record_init(&rec, TOPIC);
    rec.partition = 0;
    rec.value = (const uint8_t *)value;
    rec.value_len = strlen(value);
    return krabka_leadership_write(l, &rec, 1, error_init(e));
}

static void the_first_member_leads_and_renews_while_time_passes(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a");
    krabka_leadership *lead_a = acquire(a.client, "a");
    krabka_fencing_token t = token_of(lead_a);
    bool none = true;
    krabka_fencing_token_is_no_epoch(&t, &none);
    CHECK(!none, "the leader has a token");
    CHECK(authoritative(cluster, t), "the coordinator names the leader's token");
    CHECK(now_ms(cluster) == START_MS, "no time passed for the election");
    /* Four leases' worth of time: it renews every 10 s and keeps the role. */
    advance(cluster, 120);
    CHECK(now_ms(cluster) == START_MS + 120000, "the clock moved 120 s, at %lld",
          (long long)now_ms(cluster));
    CHECK(held(lead_a), "the leader renewed through 120 s");
    CHECK(authoritative(cluster, t), "still the same token");
    krabka_leadership_free(lead_a);
    proc_free(&a);
    krabka_test_cluster_free(cluster);
}

/* a leads; b, then c, wait (`rank + 1` of them, with the default timings,
 * whose stagger the test reads). Crashing a and the first `rank` standbys
 * leaves the last at challenger rank `rank` (a crashed standby's
 * registration stays): it is not elected 1 ms before a's deadline plus
 * rank x stagger, and is elected exactly then, with a token newer than
 * a's. */
static void crashed_leader_replaced_by_rank(int rank) {
    static const char *const names[] = {"b", "c"};
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a"), standbys[2];
    krabka_leadership *lead_a = acquire(a.client, "a");
    krabka_leadership_options options;
    KRABKA_LEADERSHIP_OPTIONS_INIT(&options);
    int64_t stagger_ms = (int64_t)llround(options.challenge_stagger * 1000);
    CHECK(stagger_ms == 5000, "the default stagger is 5 s, got %lld ms", (long long)stagger_ms);
    contender waits[2];
    krabka_lease *lease = NULL;
    krabka_lease_fields fields;
    test_error e;
    for (int i = 0; i <= rank; i++) {
        standbys[i] = process(cluster, names[i]);
        contend_start_with(&waits[i], standbys[i].client, names[i], &options);
        wait_registered(cluster, a.client, (size_t)i + 2);
    }
    REQUIRE(krabka_leadership_lease(lead_a, &lease, error_init(&e)) == KRABKA_RESULT_OK, "%s",
            e.buf);
    krabka_lease_get_fields(lease, &fields);
    int64_t deadline = fields.deadline;
    krabka_lease_free(lease);
    CHECK_RESULT(krabka_test_process_crash(a.process), KRABKA_RESULT_OK, &e.err);
    for (int i = 0; i < rank; i++) {
        CHECK_RESULT(krabka_test_process_crash(standbys[i].process), KRABKA_RESULT_OK, &e.err);
    }
    contender *last = &waits[rank];
    int64_t turn = deadline + rank * stagger_ms;
    /* 1 ms short of its turn the survivor still waits (its thread is in
     * acquire). */
    advance(cluster, (double)(turn - 1 - now_ms(cluster)) / 1000);
    CHECK(now_ms(cluster) == turn - 1, "the clock at %lld", (long long)now_ms(cluster));
    pthread_mutex_lock(&last->lock);
    bool early = last->returned || last->elected_at != 0;
    pthread_mutex_unlock(&last->lock);
    CHECK(!early, "rank %d must wait until a's deadline plus %d staggers", rank, rank);
    CHECK(authoritative(cluster, token_of(lead_a)), "a's token stands before the turn");
    advance(cluster, 0.001);
    krabka_leadership *lead = contend_won(last);
    int order = 0;
    krabka_fencing_token ta = token_of(lead_a), tl = token_of(lead);
    krabka_fencing_token_compare(&tl, &ta, &order);
    CHECK(order > 0, "%s's token is newer than a's", names[rank]);
    CHECK(authoritative(cluster, tl), "the coordinator names %s's token", names[rank]);
    REQUIRE(krabka_leadership_lease(lead, &lease, error_init(&e)) == KRABKA_RESULT_OK, "%s", e.buf);
    krabka_lease_get_fields(lease, &fields);
    krabka_lease_free(lease);
    CHECK(fields.granted_at == turn, "rank %d's lease granted at %lld, its turn %lld", rank,
          (long long)fields.granted_at, (long long)turn);
    int64_t elected = contend_elected_at(last);
    CHECK(elected == turn, "rank %d challenged at %lld, elected at %lld", rank, (long long)turn,
          (long long)elected);
    for (int i = 0; i < rank; i++) {
        /* A crashed process's pending acquire returns with the closed error. */
        REQUIRE(wait_flag(&waits[i].lock, &waits[i].cond, &waits[i].returned),
                "%s's acquire should have returned", names[i]);
        pthread_join(waits[i].thread, NULL);
        CHECK(waits[i].result != KRABKA_RESULT_OK, "crashed %s did not win", names[i]);
    }
    for (int i = 0; i <= rank; i++) {
        contend_free(&waits[i]);
        proc_free(&standbys[i]);
    }
    krabka_leadership_free(lead_a);
    proc_free(&a);
    krabka_test_cluster_free(cluster);
}

static void a_crashed_leader_is_replaced_at_its_deadline_plus_the_stagger(void) {
    /* Rank 0 (b) challenges at a's deadline; rank 1 (c, behind a crashed
     * b) at the deadline plus one stagger. */
    crashed_leader_replaced_by_rank(0);
    crashed_leader_replaced_by_rank(1);
}

/* A write of a's on its own thread; `started` set just before the call. */
typedef struct {
    const krabka_leadership *leadership;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool started, done;
    krabka_result result;
    test_error e;
} writer;

static void *write_run(void *arg) {
    writer *w = arg;
    pthread_mutex_lock(&w->lock);
    w->started = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    krabka_result r = write_one(w->leadership, "a-2", &w->e);
    pthread_mutex_lock(&w->lock);
    w->result = r;
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static bool writer_done(writer *w) {
    pthread_mutex_lock(&w->lock);
    bool d = w->done;
    pthread_mutex_unlock(&w->lock);
    return d;
}

static void check_write(const krabka_test_writes *ws, size_t i, const char *value,
                        krabka_fencing_token token) {
    krabka_test_write w;
    test_error e;
    CHECK_RESULT(krabka_test_writes_get(ws, i, &w, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    CHECK(w.value_len == strlen(value) && memcmp(w.value, value, w.value_len) == 0,
          "write %zu is %s, got %.*s", i, value, (int)w.value_len, (const char *)w.value);
    CHECK(same_token(w.token, token), "write %zu's token", i);
    CHECK(w.topic_len == strlen(TOPIC) && memcmp(w.topic, TOPIC, w.topic_len) == 0,
          "write %zu's topic", i);
    CHECK(w.role_len == strlen(ROLE) && memcmp(w.role, ROLE, w.role_len) == 0, "write %zu's role",
          i);
}

static void a_paused_leader_wakes_deposed_and_its_write_is_fenced(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a"), b = process(cluster, "b");
    krabka_leadership *lead_a = acquire(a.client, "a");
    contender cb;
    writer w;
    test_error e;
    CHECK_RESULT(write_one(lead_a, "a-1", &e), KRABKA_RESULT_OK, &e.err);
    contend_start(&cb, b.client, "b");
    wait_registered(cluster, b.client, 2);
    CHECK_RESULT(krabka_test_process_pause(a.process), KRABKA_RESULT_OK, &e.err);
    /* The write is on its way when the process is stopped: the thread is
     * in the call before the clock moves, and its request waits in the
     * paused transport. */
    memset(&w, 0, sizeof w);
    w.leadership = lead_a;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    REQUIRE(pthread_create(&w.thread, NULL, write_run, &w) == 0, "pthread_create");
    pthread_mutex_lock(&w.lock);
    while (!w.started) pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    CHECK_RESULT(krabka_test_cluster_settle(cluster, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    advance(cluster, 40);
    krabka_leadership *lead_b = contend_won(&cb);
    CHECK_RESULT(write_one(lead_b, "b-1", &e), KRABKA_RESULT_OK, &e.err);
    CHECK(!writer_done(&w), "a paused process's write waits");
    CHECK_RESULT(krabka_test_process_resume(a.process), KRABKA_RESULT_OK, &e.err);
    CHECK_RESULT(krabka_test_cluster_settle(cluster, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    REQUIRE(wait_flag(&w.lock, &w.cond, &w.done), "a's write should have returned on resume");
    pthread_join(w.thread, NULL);
    /* Fenced: the write reaches the cluster before the lease's timer that
     * came due in the pause fires. It never commits (below). */
    CHECK(w.result == KRABKA_RESULT_FENCED, "a's write after the pause is fenced, got %s (%s)",
          krabka_result_name(w.result), w.e.buf);
    CHECK(!held(lead_a), "a no longer leads");
    krabka_test_writes *ws = NULL;
    size_t n = 0;
    CHECK_RESULT(krabka_test_cluster_guarded_writes(cluster, &ws, error_init(&e)), KRABKA_RESULT_OK,
                 &e.err);
    krabka_test_writes_len(ws, &n);
    CHECK(n == 2, "only a-1 and b-1 committed, got %zu writes", n);
    if (n == 2) {
        check_write(ws, 0, "a-1", token_of(lead_a));
        check_write(ws, 1, "b-1", token_of(lead_b));
    }
    krabka_test_writes_free(ws);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
    contend_free(&cb);
    krabka_leadership_free(lead_a);
    proc_free(&a);
    proc_free(&b);
    krabka_test_cluster_free(cluster);
}

static void a_resign_hands_over_without_waiting_for_the_lease(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a"), b = process(cluster, "b");
    krabka_leadership *lead_a = acquire(a.client, "a");
    contender cb;
    test_error e;
    contend_start(&cb, b.client, "b");
    wait_registered(cluster, a.client, 2);
    int64_t before = now_ms(cluster);
    CHECK_RESULT(krabka_leadership_resign(lead_a, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    /* b follows the partition with one-second polls. */
    advance(cluster, 2);
    krabka_leadership *lead_b = contend_won(&cb);
    krabka_fencing_token ta = token_of(lead_a), tb = token_of(lead_b);
    int order = 0;
    krabka_fencing_token_compare(&tb, &ta, &order);
    CHECK(order > 0, "b's token is newer than a's");
    CHECK(now_ms(cluster) - before <= 2000, "b took over within 2 s, not a lease");
    krabka_result reason = KRABKA_RESULT_OK;
    krabka_leadership_reason(lead_a, &reason, error_init(&e));
    CHECK(reason == KRABKA_RESULT_RESIGNED, "a's term ended RESIGNED, got %s",
          krabka_result_name(reason));
    contend_free(&cb);
    krabka_leadership_free(lead_a);
    proc_free(&a);
    proc_free(&b);
    krabka_test_cluster_free(cluster);
}

/* The leaders an observer saw, in order (each change of holder once),
 * from the observer's thread. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char holders[4][8];
    size_t n;
    bool saw_b;
    bool failed;
} seen;

static void on_view(const krabka_role_view *view, void *user_data) {
    seen *s = user_data;
    if (!view->has_leader) return;
    pthread_mutex_lock(&s->lock);
    size_t len = view->leader.member_len;
    if (len < sizeof s->holders[0] &&
        (s->n == 0 || strlen(s->holders[s->n - 1]) != len ||
         memcmp(s->holders[s->n - 1], view->leader.member, len) != 0)) {
        if (s->n < 4) {
            memcpy(s->holders[s->n], view->leader.member, len);
            s->holders[s->n][len] = '\0';
            s->n++;
        }
        if (len == 1 && view->leader.member[0] == 'b') s->saw_b = true;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
}

static void on_observer_error(krabka_result error, const char *message, void *user_data) {
    seen *s = user_data;
    (void)error;
    (void)message;
    pthread_mutex_lock(&s->lock);
    s->failed = true;
    pthread_mutex_unlock(&s->lock);
}

/* An observer on a process of its own sees a's term, then b's after a
 * crashed: every change of holder, in order. */
static void an_observer_sees_the_failover(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a"), b = process(cluster, "b"), o = process(cluster, "observer");
    seen s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.cond, NULL);
    krabka_observer *observer = NULL;
    test_error e;
    const char *roles[] = {ROLE};
    REQUIRE(krabka_client_observe(o.client, roles, 1, false, on_view, on_observer_error, &s,
                                  &observer, error_init(&e)) == KRABKA_RESULT_OK,
            "observe: %s", e.buf);
    krabka_leadership *lead_a = acquire(a.client, "a");
    contender cb;
    contend_start(&cb, b.client, "b");
    wait_registered(cluster, o.client, 2);
    CHECK_RESULT(krabka_test_process_crash(a.process), KRABKA_RESULT_OK, &e.err);
    advance(cluster, 70);
    krabka_leadership *lead_b = contend_won(&cb);
    /* b's view reaches the observer's thread once the cluster let the
     * observer read it (a bound on a delivery, not a sleep). */
    CHECK_RESULT(krabka_test_cluster_settle(cluster, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    CHECK(wait_flag(&s.lock, &s.cond, &s.saw_b), "the observer saw b take over");
    krabka_observer_free(observer);
    pthread_mutex_lock(&s.lock);
    CHECK(s.n == 2 && strcmp(s.holders[0], "a") == 0 && strcmp(s.holders[1], "b") == 0,
          "the observer saw a then b, got %zu holders (%s, %s)", s.n, s.n > 0 ? s.holders[0] : "",
          s.n > 1 ? s.holders[1] : "");
    CHECK(!s.failed, "the observer did not fail");
    pthread_mutex_unlock(&s.lock);
    CHECK(authoritative(cluster, token_of(lead_b)), "the coordinator names b's token");
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.cond);
    contend_free(&cb);
    krabka_leadership_free(lead_a);
    proc_free(&a);
    proc_free(&b);
    proc_free(&o);
    krabka_test_cluster_free(cluster);
}

/* A leader loop of a's on a thread of its own: the token of each term its
 * work was given. */
typedef struct {
    krabka_client *client;
    krabka_cancel *cancel;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    krabka_fencing_token tokens[4];
    size_t terms;
    bool one, two, returned;
    krabka_result result;
    test_error e;
} looper;

static uint32_t loop_work(const krabka_leadership *leadership, const krabka_term_signal *ended,
                          void *user_data) {
    looper *l = user_data;
    krabka_fencing_token t;
    krabka_leadership_token(leadership, &t, NULL);
    pthread_mutex_lock(&l->lock);
    if (l->terms < 4) l->tokens[l->terms] = t;
    l->terms++;
    l->one = l->terms >= 1;
    l->two = l->terms >= 2;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    /* The work holds the term until it ends or the loop is stopped. */
    krabka_term_wait(ended, KRABKA_NO_TIMEOUT, NULL);
    return KRABKA_RESULT_OK;
}

static void *loop_run(void *arg) {
    looper *l = arg;
    krabka_result r = krabka_client_lead(l->client, ROLE, "a", NULL, l->cancel, loop_work, l,
                                         error_init(&l->e));
    pthread_mutex_lock(&l->lock);
    l->result = r;
    l->returned = true;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* a's leader loop leads, is deposed while paused past its lease (b takes
 * over), contends again once resumed, and leads again after b resigns:
 * two terms, their tokens on either side of b's. */
static void a_leader_loop_contends_again_after_losing(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a"), b = process(cluster, "b");
    looper l;
    test_error e;
    memset(&l, 0, sizeof l);
    l.client = a.client;
    pthread_mutex_init(&l.lock, NULL);
    pthread_cond_init(&l.cond, NULL);
    REQUIRE(krabka_cancel_new(&l.cancel) == KRABKA_RESULT_OK, "krabka_cancel_new");
    REQUIRE(pthread_create(&l.thread, NULL, loop_run, &l) == 0, "pthread_create");
    REQUIRE(wait_flag(&l.lock, &l.cond, &l.one), "a's loop should have led");
    contender cb;
    contend_start(&cb, b.client, "b");
    wait_registered(cluster, b.client, 2);
    CHECK_RESULT(krabka_test_process_pause(a.process), KRABKA_RESULT_OK, &e.err);
    advance(cluster, 40);
    krabka_leadership *lead_b = contend_won(&cb);
    CHECK_RESULT(krabka_test_process_resume(a.process), KRABKA_RESULT_OK, &e.err);
    advance(cluster, 5);
    CHECK_RESULT(krabka_leadership_resign(lead_b, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    advance(cluster, 60);
    /* The second term reaches the work on the loop's thread (a bound on a
     * delivery, not a sleep). */
    CHECK(wait_flag(&l.lock, &l.cond, &l.two), "a's loop should have led again");
    pthread_mutex_lock(&l.lock);
    size_t terms = l.terms;
    krabka_fencing_token first = l.tokens[0], second = l.tokens[1];
    pthread_mutex_unlock(&l.lock);
    CHECK(terms == 2, "two terms, got %zu", terms);
    krabka_fencing_token tb = token_of(lead_b);
    int order = 0;
    krabka_fencing_token_compare(&tb, &first, &order);
    CHECK(order > 0, "b's token is newer than a's first");
    krabka_fencing_token_compare(&second, &tb, &order);
    CHECK(order > 0, "a's second token is newer than b's");
    krabka_cancel_fire(l.cancel);
    CHECK(wait_flag(&l.lock, &l.cond, &l.returned), "the loop should return once stopped");
    pthread_join(l.thread, NULL);
    CHECK(l.result == KRABKA_RESULT_OK, "the stopped loop returned %s (%s)",
          krabka_result_name(l.result), l.e.buf);
    krabka_cancel_free(l.cancel);
    pthread_mutex_destroy(&l.lock);
    pthread_cond_destroy(&l.cond);
    contend_free(&cb);
    proc_free(&a);
    proc_free(&b);
    krabka_test_cluster_free(cluster);
}

/* A crashed process's client counts as closed: its acquire waiting on
 * another thread returns at once, naming the crash, and the leader it
 * waited behind keeps the role. */
static void a_crashed_processs_pending_acquire_returns(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a"), b = process(cluster, "b");
    krabka_leadership *lead_a = acquire(a.client, "a");
    contender cb;
    test_error e;
    contend_start(&cb, b.client, "b");
    wait_registered(cluster, a.client, 2);
    CHECK_RESULT(krabka_test_process_crash(b.process), KRABKA_RESULT_OK, &e.err);
    REQUIRE(wait_flag(&cb.lock, &cb.cond, &cb.returned), "b's acquire should have returned");
    pthread_join(cb.thread, NULL);
    CHECK(cb.result == KRABKA_RESULT_INVALID_ARGUMENT && strstr(cb.e.buf, "its process crashed"),
          "b's acquire returned %s (%s)", krabka_result_name(cb.result), cb.e.buf);
    advance(cluster, 60);
    CHECK(held(lead_a), "a keeps the role");
    contend_free(&cb);
    krabka_leadership_free(lead_a);
    proc_free(&a);
    proc_free(&b);
    krabka_test_cluster_free(cluster);
}

static void cut_off_leader_replaced_then_healed(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a"), b = process(cluster, "b");
    krabka_leadership *lead_a = acquire(a.client, "a");
    contender cb;
    test_error e;
    contend_start(&cb, b.client, "b");
    wait_registered(cluster, b.client, 2);
    CHECK_RESULT(krabka_test_process_cut_off(a.process), KRABKA_RESULT_OK, &e.err);
    /* Past a's lease and b's stagger: a cannot renew, b takes over. */
    advance(cluster, 30 + 5 + 1);
    CHECK(!held(lead_a), "a cut off past its lease no longer leads");
    krabka_result reason = KRABKA_RESULT_OK;
    krabka_leadership_reason(lead_a, &reason, error_init(&e));
    CHECK(reason == KRABKA_RESULT_LEASE_EXPIRED, "a's lease expired, got %s (%s)",
          krabka_result_name(reason), e.buf);
    krabka_leadership *lead_b = contend_won(&cb);
    CHECK_RESULT(krabka_test_process_heal(a.process), KRABKA_RESULT_OK, &e.err);
    advance(cluster, 30);
    CHECK(held(lead_b), "b keeps the role once a is healed");
    CHECK(authoritative(cluster, token_of(lead_b)), "the coordinator names b's token");
    contend_free(&cb);
    krabka_leadership_free(lead_a);
    proc_free(&a);
    proc_free(&b);
    krabka_test_cluster_free(cluster);
}

static void renewals_failing_for_a_while_keep_the_role(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a");
    contender ca;
    test_error e;
    contend_start(&ca, a.client, "a");
    krabka_leadership *lead = contend_won(&ca);
    CHECK_RESULT(krabka_test_process_fail_for(a.process, 15, error_init(&e)), KRABKA_RESULT_OK,
                 &e.err);
    advance(cluster, 40);
    CHECK(held(lead), "renewals that fail for 15 s of a 30 s lease keep the role");
    CHECK(wait_flag(&ca.lock, &ca.cond, &ca.failing_seen), "a renewal failed meanwhile");
    CHECK(authoritative(cluster, token_of(lead)), "the same token stands");
    contend_free(&ca);
    proc_free(&a);
    krabka_test_cluster_free(cluster);
}

static bool names(const test_error *e, const char *what) { return strstr(e->buf, what) != NULL; }

/* A write with the input offsets commits them for the group; the cluster
 * reads them back; after a resign the write is refused and the offset
 * stays; the next leader resumes from it. */
static krabka_result write_at(const krabka_leadership *l, const char *group, int64_t at, test_error *e) {
    krabka_record rec;
    krabka_input_offset in;
    krabka_consumed_offsets co;
    krabka_record_init(&rec, TOPIC);
    rec.partition = 0;
    rec.value = (const uint8_t *)"out";
    rec.value_len = 3;
    krabka_input_offset_init(&in, "input", 0, at);
    KRABKA_CONSUMED_OFFSETS_INIT(&co);
    co.group = group;
    co.offsets = &in;
    co.offset_count = 1;
    return krabka_leadership_write_with_offsets(l, &rec, 1, &co, error_init(e));
}

static void a_leaders_input_offsets_commit_with_its_writes(void) {
    krabka_test_cluster *cluster = cluster_new();
    proc a = process(cluster, "a"), b = process(cluster, "b");
    krabka_leadership *lead_a = acquire(a.client, "a"), *lead_b = NULL;
    contender cb;
    krabka_topic_partition asked;
    krabka_committed_offset found;
    krabka_test_writes *ws = NULL;
    size_t n = 0, need = 0;
    int64_t at = 0;
    test_error e;

    CHECK_RESULT(krabka_test_cluster_committed_offset(cluster, "pipeline", "input", 0, &at, error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    CHECK(at == KRABKA_NO_OFFSET, "nothing committed yet: %lld", (long long)at);
    CHECK_RESULT(write_at(lead_a, "pipeline", 5, &e), KRABKA_RESULT_OK, &e.err);
    CHECK_RESULT(krabka_test_cluster_committed_offset(cluster, "pipeline", "input", 0, &at, error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    CHECK(at == 5, "the write committed the offset: %lld", (long long)at);
    CHECK_RESULT(krabka_test_cluster_committed_offset(cluster, "other", "input", 0, &at, error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    CHECK(at == KRABKA_NO_OFFSET, "another group has nothing: %lld", (long long)at);
    krabka_test_cluster_guarded_writes(cluster, &ws, NULL);
    krabka_test_writes_len(ws, &n);
    CHECK(n == 1, "the output was written with the offset (%zu writes)", n);
    krabka_test_writes_free(ws);
    CHECK_RESULT(write_at(lead_a, "", 6, &e), KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "consumer group") != NULL, "%s", e.buf);

    CHECK_RESULT(krabka_leadership_resign(lead_a, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    CHECK_RESULT(write_at(lead_a, "pipeline", 9, &e), KRABKA_RESULT_RESIGNED, &e.err);
    krabka_test_cluster_committed_offset(cluster, "pipeline", "input", 0, &at, NULL);
    CHECK(at == 5, "a refused write moved nothing: %lld", (long long)at);

    contend_start(&cb, b.client, "b");
    wait_registered(cluster, b.client, 1);
    advance(cluster, 2);
    lead_b = contend_won(&cb);
    asked.topic = "input";
    asked.partition = 0;
    CHECK_RESULT(krabka_leadership_committed_offsets(lead_b, "pipeline", &asked, 1, &found, NULL, 0, &need,
                                                     error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    CHECK(found.offset == 5 && found.partition == 0 && found.metadata == NULL && need == 0,
          "the next leader resumes at 5: %lld", (long long)found.offset);

    CHECK_RESULT(krabka_test_cluster_committed_offset(NULL, "pipeline", "input", 0, &at, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_cluster_committed_offset(cluster, NULL, "input", 0, &at, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_cluster_committed_offset(cluster, "pipeline", NULL, 0, &at, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_cluster_committed_offset(cluster, "pipeline", "input", 0, NULL, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);

    krabka_leadership_resign(lead_b, NULL);
    contend_free(&cb);
    krabka_leadership_free(lead_a);
    proc_free(&b);
    proc_free(&a);
    krabka_test_cluster_free(cluster);
}

static void argument_checks(void) {
    test_error e;
    krabka_test_cluster *cluster = NULL;
    krabka_client *client = (krabka_client *)1;
    krabka_test_process *p = (krabka_test_process *)1;
    krabka_test_writes *ws = NULL;
    krabka_test_write w;
    int64_t at = 0;
    bool moved = true;
    size_t n = 1;

    CHECK_RESULT(krabka_test_cluster_new(0, NULL, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT,
                 &e.err);
    CHECK(names(&e, "out"), "names out: %s", e.buf);
    CHECK_RESULT(krabka_test_cluster_new(-1, &cluster, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(cluster == NULL && names(&e, "partitions"), "names partitions: %s", e.buf);
    CHECK_RESULT(krabka_test_cluster_new(3, &cluster, error_init(&e)), KRABKA_RESULT_OK, &e.err);

    CHECK_RESULT(krabka_test_cluster_process(NULL, "a", &client, &p, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(client == NULL && p == NULL && names(&e, "cluster"), "names cluster: %s", e.buf);
    CHECK_RESULT(krabka_test_cluster_process(cluster, NULL, &client, &p, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(names(&e, "name"), "names name: %s", e.buf);
    CHECK_RESULT(krabka_test_cluster_process(cluster, "a", NULL, &p, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(names(&e, "out_client"), "names out_client: %s", e.buf);
    CHECK_RESULT(krabka_test_cluster_process(cluster, "a", &client, NULL, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(names(&e, "out_process"), "names out_process: %s", e.buf);

    CHECK_RESULT(krabka_test_cluster_advance(NULL, 1, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT,
                 &e.err);
    CHECK_RESULT(krabka_test_cluster_advance(cluster, -1, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(names(&e, "seconds"), "names seconds: %s", e.buf);
    CHECK_RESULT(krabka_test_cluster_advance(cluster, NAN, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(now_ms(cluster) == START_MS, "a refused advance moves nothing");
    CHECK_RESULT(krabka_test_cluster_advance_to_next_deadline(cluster, NULL, &moved, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(names(&e, "at_ms"), "names at_ms: %s", e.buf);
    CHECK_RESULT(krabka_test_cluster_advance_to_next_deadline(cluster, &at, NULL, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(names(&e, "moved"), "names moved: %s", e.buf);
    /* Nobody waits on an empty cluster: the clock stays. */
    CHECK_RESULT(krabka_test_cluster_advance_to_next_deadline(cluster, &at, &moved, error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    CHECK(!moved && at == START_MS, "nothing to move to: moved %d at %lld", moved, (long long)at);
    CHECK_RESULT(krabka_test_cluster_settle(NULL, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT,
                 &e.err);
    CHECK_RESULT(krabka_test_cluster_now_ms(cluster, NULL), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_cluster_now_ms(NULL, &at), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    {
        krabka_leadership_status status;
        CHECK_RESULT(krabka_test_cluster_describe_leadership(cluster, NULL, &status, error_init(&e)),
                     KRABKA_RESULT_NULL_ARGUMENT, &e.err);
        CHECK(names(&e, "role"), "names role: %s", e.buf);
        CHECK_RESULT(krabka_test_cluster_describe_leadership(cluster, "", &status, error_init(&e)),
                     KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
        /* A role nobody took: NoEpoch. */
        CHECK_RESULT(krabka_test_cluster_describe_leadership(cluster, ROLE, &status, error_init(&e)),
                     KRABKA_RESULT_OK, &e.err);
        bool none = false;
        krabka_fencing_token_is_no_epoch(&status.token, &none);
        CHECK(none, "an untaken role has no epoch");
    }

    CHECK_RESULT(krabka_test_cluster_guarded_writes(cluster, NULL, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_cluster_guarded_writes(cluster, &ws, error_init(&e)), KRABKA_RESULT_OK,
                 &e.err);
    CHECK_RESULT(krabka_test_writes_len(ws, &n), KRABKA_RESULT_OK, &e.err);
    CHECK(n == 0, "no writes yet, got %zu", n);
    CHECK_RESULT(krabka_test_writes_len(NULL, &n), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_writes_get(ws, 0, &w, error_init(&e)), KRABKA_RESULT_INVALID_ARGUMENT,
                 &e.err);
    CHECK(names(&e, "index"), "names index: %s", e.buf);
    CHECK_RESULT(krabka_test_writes_get(ws, 0, NULL, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT,
                 &e.err);
    krabka_test_writes_free(ws);

    CHECK_RESULT(krabka_test_process_crash(NULL), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_process_pause(NULL), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_process_resume(NULL), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_process_cut_off(NULL), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_process_heal(NULL), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_test_process_fail_for(NULL, 1, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(names(&e, "process"), "names process: %s", e.buf);
    {
        proc a = process(cluster, "a");
        CHECK_RESULT(krabka_test_process_fail_for(a.process, -2, error_init(&e)),
                     KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
        CHECK(names(&e, "seconds"), "names seconds: %s", e.buf);
        /* A crash is for good: a resume leaves the process dead, and its
         * client is closed, naming the crash. */
        CHECK_RESULT(krabka_test_process_crash(a.process), KRABKA_RESULT_OK, &e.err);
        CHECK_RESULT(krabka_test_process_resume(a.process), KRABKA_RESULT_OK, &e.err);
        krabka_leadership_status status;
        CHECK_RESULT(krabka_client_describe_leadership(a.client, ROLE, &status, error_init(&e)),
                     KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
        CHECK(names(&e, "its process crashed"), "names the crash: %s", e.buf);
        proc_free(&a);
    }

    krabka_test_cluster_free(NULL);
    krabka_test_process_free(NULL);
    krabka_test_writes_free(NULL);
    krabka_test_cluster_free(cluster);
}

int main(void) {
    the_first_member_leads_and_renews_while_time_passes();
    a_crashed_leader_is_replaced_at_its_deadline_plus_the_stagger();
    a_paused_leader_wakes_deposed_and_its_write_is_fenced();
    a_resign_hands_over_without_waiting_for_the_lease();
    an_observer_sees_the_failover();
    a_leader_loop_contends_again_after_losing();
    cut_off_leader_replaced_then_healed();
    renewals_failing_for_a_while_keep_the_role();
    a_crashed_processs_pending_acquire_returns();
    a_leaders_input_offsets_commit_with_its_writes();
    argument_checks();
    return check_summary("test_testing_kit");
}
