/*
 * The observer on the real local Kafka (krabka_client_observe): a third
 * party that watches a role without joining it sees a hand-over and a crash
 * failover in order, each new leader with the token the role's transaction
 * coordinator reports (krabka_client_describe_leadership). Member a leads
 * in this process and resigns; member b (another process, member.c) takes
 * over; member c (this process) waits behind b, and its `waiting` event
 * names b and b's token (krabka_event.holder, .token); b is killed with
 * SIGKILL; the observer reports b's lease `lapsed`, then c `elected`. Also:
 * the argument errors, the callback thread (never the caller's, never two at
 * once), close and free (no callback after free returns; free from a
 * callback of its own observer).
 *
 * Usage: test_observe MEMBER_COMMAND...: the member binary, or a command
 * that runs it (`valgrind ... member`). Environment: KRABKA_BOOTSTRAP
 * (required), KRABKA_C_TOPIC (a topic for member b's guarded writes),
 * KRABKA_C_SLOW (set under valgrind: longer leases and waits, here and in
 * the member).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static double LEASE_S = 3.0, RENEW_S = 1.0, SLOW = 1.0;
#define SLOW_FACTOR 6.0
#define MAX_VIEWS 512

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pause_ms(long ms) {
    struct timespec p;
    p.tv_sec = ms / 1000;
    p.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&p, NULL);
}

/* ------------------------------------------------------------ the views */

typedef struct {
    krabka_change change;
    char change_name[24];
    char role[128];
    int32_t partition;
    bool has_leader, has_lapsed;
    char leader[64], lapsed[64];
    krabka_fencing_token leader_token, lapsed_token;
    int64_t lapsed_deadline, at, position;
    char roster[256]; /* members in rank order, joined with ',' */
    int ranks_ok;
} seen_view;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    seen_view views[MAX_VIEWS];
    int count;
    pthread_t main_thread;
    int on_main_thread, running, concurrent;
    int errors;
    krabka_result error;
    char error_message[512];
} seen_views;

static void views_init(seen_views *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->main_thread = pthread_self();
}

static void views_destroy(seen_views *s) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
}

static void copy_member(char *out, size_t cap, const char *p, size_t len) {
    snprintf(out, cap, "%.*s", (int)len, p ? p : "");
}

static void on_view(const krabka_role_view *view, void *user_data) {
    seen_views *s = (seen_views *)user_data;
    seen_view v;
    size_t i;
    memset(&v, 0, sizeof v);
    v.change = view->change;
    snprintf(v.change_name, sizeof v.change_name, "%s", view->change_name);
    snprintf(v.role, sizeof v.role, "%s", view->role);
    v.partition = view->partition;
    v.has_leader = view->has_leader;
    v.has_lapsed = view->has_lapsed;
    if (view->has_leader) {
        copy_member(v.leader, sizeof v.leader, view->leader.member, view->leader.member_len);
        v.leader_token = view->leader.token;
    }
    if (view->has_lapsed) {
        copy_member(v.lapsed, sizeof v.lapsed, view->lapsed.member, view->lapsed.member_len);
        v.lapsed_token = view->lapsed.token;
        v.lapsed_deadline = view->lapsed.deadline;
    }
    v.at = view->at;
    v.position = view->position;
    v.ranks_ok = (view->roster_len == 0) == (view->roster == NULL);
    for (i = 0; i < view->roster_len; i++) {
        size_t used = strlen(v.roster);
        snprintf(v.roster + used, sizeof v.roster - used, "%s%.*s", i ? "," : "", (int)view->roster[i].member_len,
                 view->roster[i].member);
        if (view->roster[i].rank != i) v.ranks_ok = 0;
    }
    pthread_mutex_lock(&s->lock);
    if (s->running++) s->concurrent++;
    if (pthread_equal(pthread_self(), s->main_thread)) s->on_main_thread++;
    pthread_mutex_unlock(&s->lock);
    pause_ms(1); /* a callback that takes a moment: another one must not start meanwhile */
    pthread_mutex_lock(&s->lock);
    s->running--;
    if (s->count < MAX_VIEWS) s->views[s->count++] = v;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void on_observer_error(krabka_result error, const char *message, void *user_data) {
    seen_views *s = (seen_views *)user_data;
    pthread_mutex_lock(&s->lock);
    s->errors++;
    s->error = error;
    snprintf(s->error_message, sizeof s->error_message, "%s", message);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* The view at *next, waiting up to `timeout` s for it; NULL on timeout. */
static const seen_view *next_view(seen_views *s, int *next, double timeout) {
    double until = now() + timeout;
    const seen_view *v = NULL;
    pthread_mutex_lock(&s->lock);
    while (s->count <= *next && now() < until) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 50 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cond, &s->lock, &t);
    }
    if (s->count > *next) v = &s->views[(*next)++];
    pthread_mutex_unlock(&s->lock);
    return v;
}

/* The next view of `change`, roster changes aside; another change first
 * fails the check (the order is asserted). NULL on timeout or disorder. */
static const seen_view *expect_change(seen_views *s, int *next, krabka_change change, double timeout) {
    double until = now() + timeout;
    for (;;) {
        const seen_view *v = next_view(s, next, until - now());
        if (!v) {
            fprintf(stderr, "no '%s' view within %.1f s\n", krabka_change_name(change), timeout);
            return NULL;
        }
        if (v->change == change) return v;
        if (v->change != KRABKA_CHANGE_ROSTER) {
            fprintf(stderr, "expected '%s' next (roster changes aside), got '%s' (leader '%s')\n",
                    krabka_change_name(change), v->change_name, v->leader);
            return NULL;
        }
    }
}

/* Views until one whose roster is `members`; only roster changes before it. */
static const seen_view *expect_roster(seen_views *s, int *next, const char *members, double timeout) {
    double until = now() + timeout;
    for (;;) {
        const seen_view *v = next_view(s, next, until - now());
        if (!v) {
            fprintf(stderr, "no view with the roster '%s' within %.1f s\n", members, timeout);
            return NULL;
        }
        if (strcmp(v->roster, members) == 0) return v;
        if (v->change != KRABKA_CHANGE_ROSTER) {
            fprintf(stderr, "only roster changes before '%s', got '%s'\n", members, v->change_name);
            return NULL;
        }
    }
}

static int same_token(krabka_fencing_token a, krabka_fencing_token b) {
    return a.producer_id == b.producer_id && a.producer_epoch == b.producer_epoch;
}

/* True when describe_leadership reports `t` as the role's current token. */
static int described(krabka_client *client, const char *role, krabka_fencing_token t) {
    krabka_leadership_status status;
    test_error e;
    if (krabka_client_describe_leadership(client, role, &status, error_init(&e)) != KRABKA_RESULT_OK) {
        fprintf(stderr, "describe: %s\n", e.buf);
        return 0;
    }
    if (!same_token(status.token, t))
        fprintf(stderr, "described token (%lld,%d), expected (%lld,%d)\n", (long long)status.token.producer_id,
                status.token.producer_epoch, (long long)t.producer_id, t.producer_epoch);
    return same_token(status.token, t);
}

/* ------------------------------------------------------------ member b */

typedef struct {
    pid_t pid;
    int fd;
    char buf[8192];
    size_t len;
} child;

static void spawn(child *c, char **command, int command_len, const char *bootstrap, const char *role,
                  const char *member, const char *topic) {
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe: %s", strerror(errno));
    c->pid = fork();
    REQUIRE(c->pid >= 0, "fork: %s", strerror(errno));
    if (c->pid == 0) {
        char *args[64];
        int i;
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (command_len > 59) _exit(126);
        for (i = 0; i < command_len; i++) args[i] = command[i];
        args[i++] = (char *)bootstrap;
        args[i++] = (char *)role;
        args[i++] = (char *)member;
        args[i++] = (char *)topic;
        args[i] = NULL;
        execvp(args[0], args);
        _exit(127);
    }
    close(fds[1]);
    c->fd = fds[0];
    c->len = 0;
}

/* Reads the child's lines until one starts with `prefix`; NULL on timeout. */
static char *expect_line(child *c, const char *prefix, double timeout) {
    static char line[8192];
    double until = now() + timeout;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        struct pollfd p;
        ssize_t n;
        double left = until - now();
        if (nl) {
            size_t l = (size_t)(nl - c->buf);
            memcpy(line, c->buf, l);
            line[l] = '\0';
            memmove(c->buf, nl + 1, c->len - l - 1);
            c->len -= l + 1;
            if (strncmp(line, "error", 5) == 0) fprintf(stderr, "member: %s\n", line);
            if (strncmp(line, prefix, strlen(prefix)) == 0) return line;
            continue;
        }
        if (left <= 0) {
            fprintf(stderr, "member: no '%s' within %.1f s\n", prefix, timeout);
            return NULL;
        }
        p.fd = c->fd;
        p.events = POLLIN;
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len - 1);
        if (n <= 0) return NULL;
        c->len += (size_t)n;
    }
}

/* ------------------------------------------------------------ member c */

typedef struct {
    krabka_client *client;
    const char *role;
    krabka_leadership_options options;
    krabka_leadership *leadership;
    krabka_result result;
    char message[512];
    /* c's first waiting event behind a lease */
    pthread_mutex_t lock;
    int waiting;
    char holder[64];
    krabka_fencing_token holder_token;
    int waiting_without_holder;
} member_c;

static void on_c_event(const krabka_event *event, void *user_data) {
    member_c *m = (member_c *)user_data;
    if (event->kind != KRABKA_EVENT_KIND_WAITING) return;
    pthread_mutex_lock(&m->lock);
    if (!event->holder) {
        m->waiting_without_holder++;
    } else if (m->waiting++ == 0) {
        snprintf(m->holder, sizeof m->holder, "%s", event->holder);
        m->holder_token = event->token;
    }
    pthread_mutex_unlock(&m->lock);
}

static void *acquire_c(void *arg) {
    member_c *m = (member_c *)arg;
    krabka_error err;
    memset(&err, 0, sizeof err);
    err.message = m->message;
    err.capacity = sizeof m->message;
    m->result = krabka_client_acquire(m->client, m->role, "c", &m->options, KRABKA_NO_TIMEOUT, NULL, on_c_event, m,
                                      &m->leadership, &err);
    return NULL;
}

/* ------------------------------------------------------------ free from a callback */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    krabka_observer *self;
    int views, freed;
} self_free;

static void on_view_free_self(const krabka_role_view *view, void *user_data) {
    self_free *f = (self_free *)user_data;
    krabka_observer *self;
    (void)view;
    pthread_mutex_lock(&f->lock);
    while (!f->self) pthread_cond_wait(&f->cond, &f->lock);
    self = f->self;
    f->views++;
    pthread_mutex_unlock(&f->lock);
    /* Its own observer, from its callback: returns at once. */
    krabka_observer_free(self);
    pthread_mutex_lock(&f->lock);
    f->freed = 1;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

/* ------------------------------------------------------------ tests */

static void test_arguments(krabka_client *client) {
    const char *roles[2] = {"c-observe-args", NULL};
    const char *bad_utf8[1] = {"\xff"};
    const char *empty[1] = {""};
    krabka_observer *o = (krabka_observer *)&o;
    seen_views s;
    test_error e;
    views_init(&s);

    CHECK_RESULT(krabka_client_observe(NULL, roles, 1, false, on_view, NULL, &s, &o, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(o == NULL && strstr(e.buf, "client"), "a NULL client is named, out set to NULL: '%s'", e.buf);
    CHECK_RESULT(krabka_client_observe(client, roles, 1, false, NULL, NULL, &s, &o, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "on_view") != NULL, "a NULL on_view is named: '%s'", e.buf);
    CHECK_RESULT(krabka_client_observe(client, roles, 1, false, on_view, NULL, &s, NULL, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_client_observe(client, NULL, 1, false, on_view, NULL, &s, &o, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "roles") != NULL, "NULL roles are named: '%s'", e.buf);
    CHECK_RESULT(krabka_client_observe(client, roles, 2, false, on_view, NULL, &s, &o, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "roles[1]") != NULL, "a NULL role is named by its index: '%s'", e.buf);
    CHECK_RESULT(krabka_client_observe(client, NULL, 0, false, on_view, NULL, &s, &o, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "at least one role") != NULL, "no role: '%s'", e.buf);
    CHECK_RESULT(krabka_client_observe(client, bad_utf8, 1, false, on_view, NULL, &s, &o, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "UTF-8") != NULL, "a role that is not UTF-8: '%s'", e.buf);
    CHECK_RESULT(krabka_client_observe(client, empty, 1, false, on_view, NULL, &s, &o, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(o == NULL, "no observer after a refusal");
    CHECK_RESULT(krabka_client_observe(client, roles, SIZE_MAX, false, on_view, NULL, &s, &o, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(krabka_observer_close(NULL) == KRABKA_RESULT_NULL_ARGUMENT, "close(NULL) is refused");
    krabka_observer_free(NULL);
    pause_ms(100);
    CHECK(s.count == 0 && s.errors == 0, "no callback after a refused observe (%d views)", s.count);

    CHECK(strcmp(krabka_change_name(KRABKA_CHANGE_INITIAL), "initial") == 0, "initial");
    CHECK(strcmp(krabka_change_name(KRABKA_CHANGE_ELECTED), "elected") == 0, "elected");
    CHECK(strcmp(krabka_change_name(KRABKA_CHANGE_RENEWED), "renewed") == 0, "renewed");
    CHECK(strcmp(krabka_change_name(KRABKA_CHANGE_CLEARED), "cleared") == 0, "cleared");
    CHECK(strcmp(krabka_change_name(KRABKA_CHANGE_LAPSED), "lapsed") == 0, "lapsed");
    CHECK(strcmp(krabka_change_name(KRABKA_CHANGE_ROSTER), "roster") == 0, "roster");
    CHECK(strcmp(krabka_change_name(KRABKA_CHANGE_OTHER), "other") == 0, "other");
    CHECK(strcmp(krabka_change_name(77), "other") == 0, "an unknown value");
    views_destroy(&s);
}

static void test_close_and_free(krabka_client *client, const char *role) {
    const char *roles[2];
    krabka_observer *o = NULL;
    seen_views s;
    self_free f;
    test_error e;
    int next = 0, count;
    double t0;
    roles[0] = role;
    roles[1] = role;
    views_init(&s);
    CHECK_RESULT(krabka_client_observe(client, roles, 2, false, on_view, on_observer_error, &s, &o, error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    REQUIRE(o != NULL, "observe: %s", e.buf);
    CHECK(next_view(&s, &next, 20 * SLOW) != NULL, "an initial view");
    pause_ms(300);
    CHECK(s.count == 1, "a role given twice is watched once: %d views", s.count);
    CHECK(krabka_observer_close(o) == KRABKA_RESULT_OK, "close");
    CHECK(krabka_observer_close(o) == KRABKA_RESULT_OK, "close again");
    t0 = now();
    krabka_observer_free(o);
    CHECK(now() - t0 < 5 * SLOW, "free after close returns promptly (%.2f s)", now() - t0);
    pthread_mutex_lock(&s.lock);
    count = s.count;
    pthread_mutex_unlock(&s.lock);
    pause_ms(200);
    CHECK(s.count == count && s.running == 0 && s.errors == 0, "no callback after free returned");
    views_destroy(&s);

    /* A free from the observer's own callback returns at once. */
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.lock, NULL);
    pthread_cond_init(&f.cond, NULL);
    o = NULL;
    CHECK_RESULT(krabka_client_observe(client, roles, 1, false, on_view_free_self, NULL, &f, &o, error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    REQUIRE(o != NULL, "observe: %s", e.buf);
    pthread_mutex_lock(&f.lock);
    f.self = o;
    pthread_cond_broadcast(&f.cond);
    t0 = now();
    while (!f.freed && now() - t0 < 20 * SLOW) {
        pthread_mutex_unlock(&f.lock);
        pause_ms(20);
        pthread_mutex_lock(&f.lock);
    }
    CHECK(f.freed && f.views == 1, "the callback freed its own observer and returned (views %d)", f.views);
    pthread_mutex_unlock(&f.lock);
    pause_ms(200); /* the thread ends after that callback */
    pthread_mutex_destroy(&f.lock);
    pthread_cond_destroy(&f.cond);
}

int main(int argc, char **argv) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *topic = getenv("KRABKA_C_TOPIC");
    const char *keys[1] = {"bootstrap.servers"};
    const char *roles[1];
    char role[128], role2[128];
    krabka_client *watcher = NULL, *ca = NULL, *cc = NULL;
    krabka_observer *observer = NULL;
    krabka_leadership *a = NULL;
    krabka_topic_options to;
    krabka_fencing_token ta, tb;
    krabka_leadership_options options;
    member_c c;
    pthread_t c_thread;
    seen_views s;
    child b;
    test_error e;
    bool created = false;
    int next = 0, c_started = 0;
    int32_t order = 0;
    const seen_view *v;
    char *line;
    long long id = 0, epoch = 0;

    REQUIRE(argc >= 2 && argc <= 60, "usage: %s MEMBER_COMMAND...", argv[0]);
    if (getenv("KRABKA_C_SLOW")) {
        /* member.c's timings under valgrind */
        LEASE_S = 20.0;
        RENEW_S = 5.0;
        SLOW = SLOW_FACTOR;
    }
    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    REQUIRE(topic && *topic, "KRABKA_C_TOPIC is not set");
    snprintf(role, sizeof role, "c-observe-%ld-%ld", (long)getpid(), (long)time(NULL));
    snprintf(role2, sizeof role2, "c-observe-close-%ld-%ld", (long)getpid(), (long)time(NULL));
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &watcher, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    KRABKA_TOPIC_OPTIONS_INIT(&to);
    to.development = true;
    REQUIRE(krabka_client_ensure_state_topic(watcher, &to, &created, error_init(&e)) == KRABKA_RESULT_OK,
            "Kafka at %s is unreachable or refuses the state topic: %s", bootstrap, e.buf);
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &ca, error_init(&e)) == KRABKA_RESULT_OK, "client: %s", e.buf);
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &cc, error_init(&e)) == KRABKA_RESULT_OK, "client: %s", e.buf);
    KRABKA_LEADERSHIP_OPTIONS_INIT(&options);
    options.lease_duration = LEASE_S;
    options.renew_interval = RENEW_S;
    options.challenge_stagger = 1.0;

    test_arguments(watcher);
    test_close_and_free(watcher, role2);

    views_init(&s);
    roles[0] = role;
    CHECK_RESULT(krabka_client_observe(watcher, roles, 1, false, on_view, on_observer_error, &s, &observer,
                                       error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    REQUIRE(observer != NULL, "observe: %s", e.buf);
    v = next_view(&s, &next, 20 * SLOW);
    REQUIRE(v, "no initial view");
    CHECK(v->change == KRABKA_CHANGE_INITIAL && strcmp(v->change_name, "initial") == 0, "initial: %s", v->change_name);
    CHECK(!v->has_leader && !v->has_lapsed && v->roster[0] == '\0' && v->ranks_ok, "nothing yet");
    CHECK(strcmp(v->role, role) == 0, "the role: %s", v->role);
    CHECK(v->at > 0 && v->position >= 0, "at %lld, position %lld", (long long)v->at, (long long)v->position);
    {
        int32_t p = -1;
        krabka_role_partition(role, strlen(role), 16, &p, NULL);
        CHECK(v->partition == p, "the role's partition: %d, expected %d", v->partition, p);
    }

    /* a leads, in this process. */
    CHECK_RESULT(krabka_client_acquire(ca, role, "a", &options, 60 * SLOW, NULL, NULL, NULL, &a, error_init(&e)),
                 KRABKA_RESULT_OK, &e.err);
    REQUIRE(a != NULL, "a did not acquire: %s", e.buf);
    krabka_leadership_token(a, &ta, NULL);
    v = expect_change(&s, &next, KRABKA_CHANGE_ELECTED, 10 * SLOW);
    CHECK(v && v->has_leader && strcmp(v->leader, "a") == 0 && same_token(v->leader_token, ta), "a elected");
    CHECK(v && described(watcher, role, v->leader_token), "a's view token is the described one");

    /* b, another process, waits behind a. */
    spawn(&b, argv + 1, argc - 1, bootstrap, role, "b", topic);
    v = expect_roster(&s, &next, "a,b", 30 * SLOW);
    CHECK(v && v->has_leader && strcmp(v->leader, "a") == 0 && v->ranks_ok, "b registered behind a");

    /* The hand-over: a resigns, the lease is cleared, b is elected. */
    CHECK_RESULT(krabka_leadership_resign(a, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    v = expect_change(&s, &next, KRABKA_CHANGE_CLEARED, 10 * SLOW);
    CHECK(v && !v->has_leader && !v->has_lapsed, "a's lease cleared");
    line = expect_line(&b, "elected", 30 * SLOW);
    REQUIRE(line && sscanf(line, "elected %lld %lld", &id, &epoch) == 2, "b was not elected");
    tb.producer_id = id;
    tb.producer_epoch = (int16_t)epoch;
    v = expect_change(&s, &next, KRABKA_CHANGE_ELECTED, 10 * SLOW);
    CHECK(v && v->has_leader && strcmp(v->leader, "b") == 0 && same_token(v->leader_token, tb), "b elected");
    CHECK(v && described(watcher, role, v->leader_token), "b's view token is the described one");
    krabka_fencing_token_compare(&tb, &ta, &order);
    CHECK(order == 1, "b's token is above a's");

    /* c waits behind b: its waiting event names b and b's token. */
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.lock, NULL);
    c.client = cc;
    c.role = role;
    c.options = options;
    c_started = pthread_create(&c_thread, NULL, acquire_c, &c) == 0;
    REQUIRE(c_started, "cannot start c's thread");
    v = expect_roster(&s, &next, "b,c", 30 * SLOW);
    CHECK(v && v->has_leader && strcmp(v->leader, "b") == 0, "c registered behind b");
    {
        double until = now() + 10 * SLOW;
        int waited = 0;
        while (now() < until) {
            pthread_mutex_lock(&c.lock);
            waited = c.waiting;
            pthread_mutex_unlock(&c.lock);
            if (waited) break;
            pause_ms(20);
        }
        pthread_mutex_lock(&c.lock);
        CHECK(c.waiting > 0 && strcmp(c.holder, "b") == 0 && same_token(c.holder_token, tb),
              "c's waiting event names the holder b and its token: holder '%s' (%lld,%d), %d without a holder",
              c.holder, (long long)c.holder_token.producer_id, c.holder_token.producer_epoch,
              c.waiting_without_holder);
        pthread_mutex_unlock(&c.lock);
    }

    /* The crash: b is killed; the observer reports its lease lapsed, then c elected. */
    kill(b.pid, SIGKILL);
    waitpid(b.pid, NULL, 0);
    close(b.fd);
    v = expect_change(&s, &next, KRABKA_CHANGE_LAPSED, LEASE_S + 10 * SLOW);
    CHECK(v && !v->has_leader && v->has_lapsed && strcmp(v->lapsed, "b") == 0 && same_token(v->lapsed_token, tb),
          "b's lease lapsed");
    CHECK(v && v->at >= v->lapsed_deadline, "a lapse is reported at the deadline, not before");
    v = expect_change(&s, &next, KRABKA_CHANGE_ELECTED, 20 * SLOW);
    pthread_join(c_thread, NULL);
    CHECK(c.result == KRABKA_RESULT_OK && c.leadership != NULL, "c acquired: %s %s", krabka_result_name(c.result),
          c.message);
    if (c.leadership) {
        krabka_fencing_token tc;
        krabka_leadership_token(c.leadership, &tc, NULL);
        CHECK(v && v->has_leader && strcmp(v->leader, "c") == 0 && same_token(v->leader_token, tc), "c elected");
        CHECK(v && described(watcher, role, v->leader_token), "c's view token is the described one");
        krabka_fencing_token_compare(&tc, &tb, &order);
        CHECK(order == 1, "c's token is above b's");
        CHECK_RESULT(krabka_leadership_resign(c.leadership, error_init(&e)), KRABKA_RESULT_OK, &e.err);
        v = expect_change(&s, &next, KRABKA_CHANGE_CLEARED, 10 * SLOW);
        CHECK(v != NULL, "c's resign cleared the lease");
        krabka_leadership_free(c.leadership);
    }
    pthread_mutex_lock(&s.lock);
    CHECK(s.on_main_thread == 0 && s.concurrent == 0 && s.errors == 0,
          "views came on the observer's thread, one at a time, with no error (%d on the caller's, %d overlapping, %d "
          "errors: %s)",
          s.on_main_thread, s.concurrent, s.errors, s.error_message);
    pthread_mutex_unlock(&s.lock);

    krabka_observer_free(observer);
    krabka_leadership_free(a);
    pthread_mutex_destroy(&c.lock);
    views_destroy(&s);
    krabka_client_free(cc);
    krabka_client_free(ca);
    krabka_client_free(watcher);
    CHECK(krabka_wait_idle(30 * SLOW) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    return check_summary("observe");
}
