/*
 * The leader loop (krabka_client_lead) on the real local Kafka.
 *
 *  1. Hand-over and failover: member a runs the loop on a thread of this
 *     process; its first term's work returns (after about 1 s, once member
 *     b is registered), so the role is resigned and handed over to b, a
 *     separate process (member.c --lead) printing each term's token; b's
 *     token is above a's and is what krabka_client_describe_leadership
 *     reports; a contends again behind b; b is killed with SIGKILL and a
 *     takes its second term, with a token above b's, once b's lease ran
 *     out; its work waits on `ended`. Cancelling a ends that term: the work
 *     returns, the role is resigned (no lease) and a is deregistered.
 *  2. A work returning an error ends the loop with that code (an unknown
 *     value: KRABKA_RESULT_ERROR) after resigning the role.
 *  3. Cancelling a loop that waits behind another holder deregisters it.
 *  4. Bad arguments (NULLs, an empty role, bad timings, a cancellation
 *     already fired) are refused before any I/O, on a client whose
 *     bootstrap address answers nothing.
 *
 * Usage: test_lead MEMBER_COMMAND...: the member binary, or a command that
 * runs it (`valgrind ... member`). Environment: KRABKA_BOOTSTRAP (required:
 * the test fails when Kafka is unreachable), KRABKA_C_SLOW (set under
 * valgrind: longer leases and waits, here and in the member).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* The timings (member.c --lead uses the same): lease 3 s, renewals 1 s,
 * stagger 0.5 s; with KRABKA_C_SLOW (valgrind) a 20 s lease renewed every
 * 5 s, and every wait SLOW_FACTOR times longer. */
static double LEASE_S = 3.0;
static double RENEW_S = 1.0;
static const double STAGGER_S = 0.5;
static double SLACK_S = 4.0;
static double SLOW = 1.0;
#define SLOW_FACTOR 6.0

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void options_of(krabka_leadership_options *o) {
    KRABKA_LEADERSHIP_OPTIONS_INIT(o);
    o->lease_duration = LEASE_S;
    o->renew_interval = RENEW_S;
    o->challenge_stagger = STAGGER_S;
}

/* ---- the member process (member.c --lead) ---- */

typedef struct {
    pid_t pid;
    int fd;
    char buf[8192];
    size_t len;
    const char *name;
} child;

static void spawn_lead(child *c, char **command, int command_len, const char *bootstrap, const char *role,
                       const char *member) {
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
        args[i++] = "--lead";
        args[i++] = (char *)bootstrap;
        args[i++] = (char *)role;
        args[i++] = (char *)member;
        args[i] = NULL;
        execvp(args[0], args);
        _exit(127);
    }
    close(fds[1]);
    c->fd = fds[0];
    c->len = 0;
    c->name = member;
}

/* The next line of the child's output within `timeout` seconds; NULL on
 * timeout or end of output. Valid until the next call. */
static char *next_line(child *c, double timeout) {
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
            return line;
        }
        if (left <= 0) return NULL;
        p.fd = c->fd;
        p.events = POLLIN;
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len - 1);
        if (n <= 0) return NULL;
        c->len += (size_t)n;
    }
}

static char *expect(child *c, const char *prefix, double timeout) {
    double until = now() + timeout;
    for (;;) {
        double left = until - now();
        char *line = left > 0 ? next_line(c, left) : NULL;
        if (!line) {
            fprintf(stderr, "member %s: no '%s' within %.1f s\n", c->name, prefix, timeout);
            return NULL;
        }
        if (strncmp(line, "error", 5) == 0 || strncmp(line, "lead", 4) == 0)
            fprintf(stderr, "member %s: %s\n", c->name, line);
        if (strncmp(line, prefix, strlen(prefix)) == 0) return line;
    }
}

static int exit_status(pid_t pid, double timeout) {
    double until = now() + timeout;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        if (now() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1000;
        }
        nanosleep(&pause, NULL);
    }
    return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}

/* ---- the role's state ---- */

/* The members of `role` in rank order, joined with ',' into out; *has_lease
 * whether the role has a lease (when not NULL). */
static void roster(krabka_client *client, const char *role, char *out, size_t cap, bool *has_lease) {
    krabka_role_state *state = NULL;
    krabka_lease_fields lease;
    test_error e;
    size_t n = 0, i;
    out[0] = '\0';
    if (krabka_client_describe_role_state(client, role, &state, error_init(&e)) != KRABKA_RESULT_OK) {
        snprintf(out, cap, "(error: %s)", e.buf);
        return;
    }
    krabka_role_state_roster_len(state, &n);
    for (i = 0; i < n; i++) {
        krabka_roster_entry entry;
        size_t used = strlen(out);
        krabka_role_state_roster_entry(state, i, &entry, NULL);
        snprintf(out + used, cap - used, "%s%.*s", i ? "," : "", (int)entry.member_len, entry.member);
    }
    if (has_lease) krabka_role_state_lease(state, has_lease, &lease);
    krabka_role_state_free(state);
}

static int wait_roster(krabka_client *client, const char *role, const char *want, double timeout) {
    char got[1024];
    double until = now() + timeout;
    for (;;) {
        struct timespec pause = {0, 100 * 1000 * 1000};
        roster(client, role, got, sizeof got, NULL);
        if (strcmp(got, want) == 0) return 1;
        if (now() > until) {
            fprintf(stderr, "roster of %s is '%s', wanted '%s'\n", role, got, want);
            return 0;
        }
        nanosleep(&pause, NULL);
    }
}

/* 1 when the coordinator reports `t` as the role's token, 0 when another,
 * -1 on error; *reported gets the token it reports. */
static int reported_token(krabka_client *client, const char *role, const krabka_fencing_token *t,
                          krabka_fencing_token *reported) {
    krabka_leadership_status status;
    test_error e;
    bool yes = false;
    if (krabka_client_describe_leadership(client, role, &status, error_init(&e)) != KRABKA_RESULT_OK) {
        fprintf(stderr, "describe: %s\n", e.buf);
        return -1;
    }
    if (reported) *reported = status.token;
    krabka_leadership_status_authoritative(&status, t, &yes);
    return yes;
}

static int32_t order_of(const krabka_fencing_token *x, const krabka_fencing_token *y) {
    int32_t order = 0;
    krabka_fencing_token_compare(x, y, &order);
    return order;
}

static krabka_fencing_token parse_term(const char *line, long long *number) {
    krabka_fencing_token t = {-1, -1};
    long long n = 0, id = 0, epoch = 0;
    if (line && sscanf(line, "term %lld %lld %lld", &n, &id, &epoch) == 3) {
        t.producer_id = id;
        t.producer_epoch = (int16_t)epoch;
    }
    if (number) *number = n;
    return t;
}

/* ---- member a: the loop on a thread of this process ---- */

#define MAX_TERMS 8

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    /* The loop's arguments. */
    krabka_client *client;
    const char *role;
    const char *member;
    krabka_cancel *cancel;
    krabka_lead_work work;
    /* Set by the work. */
    int terms;
    krabka_fencing_token tokens[MAX_TERMS];
    krabka_result waited[MAX_TERMS];   /* what krabka_term_wait returned */
    bool ended_before[MAX_TERMS];      /* krabka_term_ended as the work started */
    bool ended_after[MAX_TERMS];       /* krabka_term_ended as it returned */
    krabka_result bad_timeout;         /* krabka_term_wait(-5) in the first term */
    double first_term_lasted;
    /* Set by the main thread: the first term's work may go on. */
    bool b_waiting;
    /* Set by the thread: the loop returned. */
    bool returned;
    krabka_result result;
    test_error err;
    uint32_t fail_with; /* work_fails: the value returned */
} loop_state;

static void state_init(loop_state *s, krabka_client *client, const char *role, const char *member,
                       krabka_cancel *cancel, krabka_lead_work work) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    s->client = client;
    s->role = role;
    s->member = member;
    s->cancel = cancel;
    s->work = work;
    error_init(&s->err);
}

static void state_destroy(loop_state *s) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->changed);
}

static void deadline_in(struct timespec *at, double seconds) {
    double whole;
    clock_gettime(CLOCK_REALTIME, at);
    whole = (double)at->tv_sec + (double)at->tv_nsec / 1e9 + seconds;
    at->tv_sec = (time_t)whole;
    at->tv_nsec = (long)((whole - (double)at->tv_sec) * 1e9);
}

/* Waits (s->lock held) until *flag or until `seconds`; returns *flag. */
static bool wait_flag(loop_state *s, const bool *flag, double seconds) {
    struct timespec at;
    deadline_in(&at, seconds);
    while (!*flag)
        if (pthread_cond_timedwait(&s->changed, &s->lock, &at) == ETIMEDOUT) break;
    return *flag;
}

static bool wait_terms(loop_state *s, int n, double seconds) {
    struct timespec at;
    bool got;
    deadline_in(&at, seconds);
    pthread_mutex_lock(&s->lock);
    while (s->terms < n && !s->returned)
        if (pthread_cond_timedwait(&s->changed, &s->lock, &at) == ETIMEDOUT) break;
    got = s->terms >= n;
    pthread_mutex_unlock(&s->lock);
    return got;
}

static bool wait_returned(loop_state *s, double seconds) {
    bool got;
    pthread_mutex_lock(&s->lock);
    got = wait_flag(s, &s->returned, seconds);
    pthread_mutex_unlock(&s->lock);
    return got;
}

/* Starts a term: records its token; returns its index. */
static int term_started(loop_state *s, const krabka_leadership *leadership, const krabka_term_signal *ended) {
    int i;
    krabka_fencing_token t = {-1, -1};
    krabka_leadership_token(leadership, &t, NULL);
    pthread_mutex_lock(&s->lock);
    i = s->terms < MAX_TERMS ? s->terms : MAX_TERMS - 1;
    s->tokens[i] = t;
    s->ended_before[i] = krabka_term_ended(ended);
    s->terms++;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    return i;
}

/* a's work: the first term goes on for about a second once b waits, then
 * returns (the hand-over); every later term waits until it ends. */
static uint32_t work_a(const krabka_leadership *leadership, const krabka_term_signal *ended, void *user_data) {
    loop_state *s = user_data;
    int i = term_started(s, leadership, ended);
    krabka_result waited;
    if (i == 0) {
        double t0 = now();
        s->bad_timeout = krabka_term_wait(ended, -5.0, NULL);
        pthread_mutex_lock(&s->lock);
        wait_flag(s, &s->b_waiting, 60 * SLOW);
        pthread_mutex_unlock(&s->lock);
        /* The term must not end within this second: TIMED_OUT. */
        waited = krabka_term_wait(ended, 1.0, NULL);
        s->first_term_lasted = now() - t0;
    } else {
        waited = krabka_term_wait(ended, KRABKA_NO_TIMEOUT, NULL);
    }
    pthread_mutex_lock(&s->lock);
    s->waited[i] = waited;
    s->ended_after[i] = krabka_term_ended(ended);
    pthread_mutex_unlock(&s->lock);
    return KRABKA_RESULT_OK;
}

/* A work that fails at once with s->fail_with. */
static uint32_t work_fails(const krabka_leadership *leadership, const krabka_term_signal *ended, void *user_data) {
    loop_state *s = user_data;
    term_started(s, leadership, ended);
    return s->fail_with;
}

static void *run_loop(void *arg) {
    loop_state *s = arg;
    krabka_leadership_options o;
    krabka_result r;
    options_of(&o);
    r = krabka_client_lead(s->client, s->role, s->member, &o, s->cancel, s->work, s, &s->err.err);
    pthread_mutex_lock(&s->lock);
    s->result = r;
    s->returned = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- the scenarios ---- */

static void handover_and_failover(krabka_client *client, char **command, int command_len, const char *bootstrap) {
    char role[128], got[1024];
    krabka_cancel *cancel = NULL;
    krabka_fencing_token tb, reported = {-1, -1};
    loop_state a;
    pthread_t thread;
    child b;
    char *line;
    long long b_term = 0;
    double killed_at, took;
    bool has_lease = true;

    snprintf(role, sizeof role, "c-lead-%ld-%ld", (long)getpid(), (long)time(NULL));
    REQUIRE(krabka_cancel_new(&cancel) == KRABKA_RESULT_OK, "cancel_new");
    state_init(&a, client, role, "a", cancel, work_a);
    REQUIRE(pthread_create(&thread, NULL, run_loop, &a) == 0, "pthread_create");

    REQUIRE(wait_terms(&a, 1, 60 * SLOW), "a's first term did not start (loop: %s %s)", krabka_result_name(a.result),
            a.err.buf);
    CHECK(reported_token(client, role, &a.tokens[0], NULL) == 1, "a's first token is the role's");

    spawn_lead(&b, command, command_len, bootstrap, role, "b");
    CHECK(wait_roster(client, role, "a,b", 30 * SLOW), "b registers behind a");
    pthread_mutex_lock(&a.lock);
    a.b_waiting = true;
    pthread_cond_broadcast(&a.changed);
    pthread_mutex_unlock(&a.lock);

    /* a's work returns: the role is resigned and b takes it. */
    line = expect(&b, "term", 30 * SLOW);
    REQUIRE(line, "b did not lead after a's first term");
    tb = parse_term(line, &b_term);
    CHECK(b_term == 1, "b's first term is number 1: '%s'", line);
    CHECK(order_of(&tb, &a.tokens[0]) == 1, "b's token (%lld,%d) is above a's first (%lld,%d)",
          (long long)tb.producer_id, tb.producer_epoch, (long long)a.tokens[0].producer_id, a.tokens[0].producer_epoch);
    CHECK(reported_token(client, role, &tb, &reported) == 1 && order_of(&reported, &tb) == 0,
          "describe_leadership reports b's token (%lld,%d), got (%lld,%d)", (long long)tb.producer_id,
          tb.producer_epoch, (long long)reported.producer_id, reported.producer_epoch);
    pthread_mutex_lock(&a.lock);
    CHECK(a.terms == 1, "a has had one term while b leads (%d)", a.terms);
    CHECK(!a.ended_before[0], "a's first term had not ended when its work started");
    CHECK(a.waited[0] == KRABKA_RESULT_TIMED_OUT, "a's first term did not end under its work: %s",
          krabka_result_name(a.waited[0]));
    CHECK(a.ended_after[0] == false, "a's first term still held when its work returned");
    CHECK(a.bad_timeout == KRABKA_RESULT_INVALID_ARGUMENT, "krabka_term_wait(-5) is refused: %s",
          krabka_result_name(a.bad_timeout));
    CHECK(a.first_term_lasted >= 1.0, "a's first work ran about 1 s after b waited (%.2f s)", a.first_term_lasted);
    CHECK(!a.returned, "a's loop goes on after a term whose work succeeded");
    pthread_mutex_unlock(&a.lock);

    /* a contends again, from the tail. */
    CHECK(wait_roster(client, role, "b,a", 30 * SLOW), "a registers again behind b");

    kill(b.pid, SIGKILL);
    killed_at = now();
    CHECK(exit_status(b.pid, 10 * SLOW) == -SIGKILL, "b died of SIGKILL");
    close(b.fd);

    CHECK(wait_terms(&a, 2, LEASE_S + STAGGER_S + SLACK_S + 10 * SLOW), "a takes its second term after b's SIGKILL");
    took = now() - killed_at;
    printf("lead: a's second term began %.2f s after b's SIGKILL (lease %.1f s)\n", took, LEASE_S);
    pthread_mutex_lock(&a.lock);
    CHECK(a.terms == 2, "a has had two terms (%d)", a.terms);
    CHECK(order_of(&a.tokens[1], &tb) == 1, "a's second token (%lld,%d) is above b's (%lld,%d)",
          (long long)a.tokens[1].producer_id, a.tokens[1].producer_epoch, (long long)tb.producer_id, tb.producer_epoch);
    pthread_mutex_unlock(&a.lock);
    CHECK(reported_token(client, role, &a.tokens[1], NULL) == 1, "a's second token is the role's");
    CHECK(took <= LEASE_S + STAGGER_S + SLACK_S, "the take-over took %.2f s", took);

    /* Cancel a: its term's signal fires, the work returns, the role is
     * resigned and a deregistered; the loop returns OK. */
    CHECK(krabka_cancel_fire(cancel) == KRABKA_RESULT_OK, "cancel_fire");
    CHECK(wait_returned(&a, 30 * SLOW), "a's loop returns once cancelled");
    pthread_join(thread, NULL);
    CHECK(a.result == KRABKA_RESULT_OK, "a's loop returned %s (%s)", krabka_result_name(a.result), a.err.buf);
    CHECK(a.terms == 2, "no term after the cancellation (%d)", a.terms);
    CHECK(a.waited[1] == KRABKA_RESULT_OK && a.ended_after[1], "a's second work saw its term end: %s",
          krabka_result_name(a.waited[1]));
    roster(client, role, got, sizeof got, &has_lease);
    CHECK(!has_lease, "no lease once a's loop was cancelled (resigned)");
    CHECK(strcmp(got, "") == 0, "a is deregistered (roster '%s')", got);
    krabka_cancel_free(cancel);
    state_destroy(&a);
}

static void failing_work(krabka_client *client) {
    char role[128], got[1024];
    loop_state s;
    bool has_lease = true;
    snprintf(role, sizeof role, "c-lead-fail-%ld-%ld", (long)getpid(), (long)time(NULL));

    /* A value no krabka_result has: the generic error, the value named. */
    state_init(&s, client, role, "f", NULL, work_fails);
    s.fail_with = 7777;
    run_loop(&s);
    CHECK(s.result == KRABKA_RESULT_ERROR, "a work returning 7777: %s (%s)", krabka_result_name(s.result), s.err.buf);
    CHECK(strstr(s.err.buf, "7777") && strstr(s.err.buf, "term 1"), "the message names the value and the term: %s",
          s.err.buf);
    CHECK(s.terms == 1, "one term (%d)", s.terms);
    roster(client, role, got, sizeof got, &has_lease);
    CHECK(!has_lease && strcmp(got, "") == 0, "resigned and deregistered after the failed work (lease %d, roster '%s')",
          has_lease, got);
    state_destroy(&s);

    /* A known code: returned as it is, the role led again and resigned. */
    state_init(&s, client, role, "f", NULL, work_fails);
    s.fail_with = KRABKA_RESULT_FATAL;
    run_loop(&s);
    CHECK(s.result == KRABKA_RESULT_FATAL, "a work returning FATAL: %s (%s)", krabka_result_name(s.result), s.err.buf);
    CHECK(s.terms == 1, "one term (%d)", s.terms);
    roster(client, role, got, sizeof got, &has_lease);
    CHECK(!has_lease && strcmp(got, "") == 0, "resigned after the failed work (lease %d, roster '%s')", has_lease, got);
    state_destroy(&s);
}

static void cancel_while_waiting(krabka_client *client, const char *bootstrap) {
    const char *keys[1] = {"bootstrap.servers"};
    krabka_client *other = NULL;
    char role[128], got[1024];
    krabka_leadership_options o;
    krabka_leadership *holder = NULL;
    krabka_cancel *cancel = NULL;
    loop_state s;
    pthread_t thread;
    test_error e;

    snprintf(role, sizeof role, "c-lead-wait-%ld-%ld", (long)getpid(), (long)time(NULL));
    options_of(&o);
    REQUIRE(krabka_client_acquire(client, role, "holder", &o, 60 * SLOW, NULL, NULL, NULL, &holder, error_init(&e)) ==
                KRABKA_RESULT_OK,
            "holder: %s", e.buf);
    REQUIRE(krabka_cancel_new(&cancel) == KRABKA_RESULT_OK, "cancel_new");
    /* A client refuses a second acquire of a role it holds: another one. */
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &other, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    state_init(&s, other, role, "waiter", cancel, work_fails);
    REQUIRE(pthread_create(&thread, NULL, run_loop, &s) == 0, "pthread_create");
    CHECK(wait_roster(client, role, "holder,waiter", 30 * SLOW), "the loop's member waits behind the holder");
    CHECK(!s.returned, "the loop waits");
    krabka_cancel_fire(cancel);
    CHECK(wait_returned(&s, 30 * SLOW), "the waiting loop returns once cancelled");
    pthread_join(thread, NULL);
    CHECK(s.result == KRABKA_RESULT_OK, "a cancelled waiting loop returns OK: %s (%s)", krabka_result_name(s.result),
          s.err.buf);
    CHECK(s.terms == 0, "its work never ran (%d)", s.terms);
    roster(client, role, got, sizeof got, NULL);
    CHECK(strcmp(got, "holder") == 0, "the waiter is deregistered by the time the loop returns (roster '%s')", got);
    CHECK_RESULT(krabka_leadership_resign(holder, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    krabka_leadership_free(holder);
    krabka_cancel_free(cancel);
    krabka_client_free(other);
    state_destroy(&s);
}

/* Every refusal on a client whose bootstrap address answers nothing (any
 * I/O would wait for the 10 s connect timeout): at once, no work called. */
static void bad_arguments(void) {
    const char *keys[1] = {"bootstrap.servers"};
    const char *dead[1] = {"127.0.0.1:1"};
    krabka_client *client = NULL;
    krabka_cancel *fired = NULL;
    krabka_leadership_options o;
    loop_state s;
    test_error e;
    double t0;
    const char bad_utf8[] = {'m', (char)0xff, 0};

    REQUIRE(krabka_client_new(keys, dead, 1, NULL, &client, error_init(&e)) == KRABKA_RESULT_OK, "client: %s", e.buf);
    state_init(&s, client, "r", "m", NULL, work_fails);
    options_of(&o);
    t0 = now();
    CHECK_RESULT(krabka_client_lead(NULL, "r", "m", &o, NULL, work_fails, &s, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "client") != NULL, "names client: %s", e.buf);
    CHECK_RESULT(krabka_client_lead(client, NULL, "m", &o, NULL, work_fails, &s, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "role") != NULL, "names role: %s", e.buf);
    CHECK_RESULT(krabka_client_lead(client, "r", NULL, &o, NULL, work_fails, &s, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "member") != NULL, "names member: %s", e.buf);
    CHECK_RESULT(krabka_client_lead(client, "r", "m", &o, NULL, NULL, &s, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT,
                 &e.err);
    CHECK(strstr(e.buf, "work") != NULL, "names work: %s", e.buf);
    CHECK_RESULT(krabka_client_lead(client, "", "m", &o, NULL, work_fails, &s, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "role") && strstr(e.buf, "empty"), "the empty role: %s", e.buf);
    CHECK_RESULT(krabka_client_lead(client, "r", "", &o, NULL, work_fails, &s, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_client_lead(client, "r", bad_utf8, &o, NULL, work_fails, &s, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    o.lease_duration = 1.0;
    o.renew_interval = 2.0;
    CHECK_RESULT(krabka_client_lead(client, "r", "m", &o, NULL, work_fails, &s, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "renew") != NULL, "names the renewal interval: %s", e.buf);
    /* A cancellation fired before the call: OK at once, without contending. */
    REQUIRE(krabka_cancel_new(&fired) == KRABKA_RESULT_OK, "cancel_new");
    krabka_cancel_fire(fired);
    options_of(&o);
    CHECK_RESULT(krabka_client_lead(client, "r", "m", &o, fired, work_fails, &s, error_init(&e)), KRABKA_RESULT_OK,
                 &e.err);
    CHECK(now() - t0 < 3.0 * SLOW, "every refusal came before any I/O (%.2f s)", now() - t0);
    CHECK(s.terms == 0, "no work was called (%d)", s.terms);
    /* The term signal's own functions. */
    CHECK(krabka_term_ended(NULL) == true, "a NULL signal counts as ended");
    CHECK_RESULT(krabka_term_wait(NULL, 1.0, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "signal") != NULL, "names signal: %s", e.buf);
    krabka_cancel_free(fired);
    krabka_client_free(client);
    state_destroy(&s);
}

int main(int argc, char **argv) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *keys[1] = {"bootstrap.servers"};
    krabka_client *client = NULL;
    krabka_topic_options to;
    test_error e;
    bool created = false;

    REQUIRE(argc >= 2 && argc <= 60, "usage: %s MEMBER_COMMAND...", argv[0]);
    if (getenv("KRABKA_C_SLOW")) {
        LEASE_S = 20.0;
        RENEW_S = 5.0;
        SLACK_S = 20.0;
        SLOW = SLOW_FACTOR;
    }
    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    bad_arguments();
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &client, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    KRABKA_TOPIC_OPTIONS_INIT(&to);
    to.development = true;
    REQUIRE(krabka_client_ensure_state_topic(client, &to, &created, error_init(&e)) == KRABKA_RESULT_OK,
            "Kafka at %s is unreachable or refuses the state topic: %s", bootstrap, e.buf);
    failing_work(client);
    cancel_while_waiting(client, bootstrap);
    handover_and_failover(client, argv + 1, argc - 1, bootstrap);
    krabka_client_free(client);
    CHECK(krabka_wait_idle(30 * SLOW) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    return check_summary("lead");
}
