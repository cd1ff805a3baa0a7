/*
 * Leadership between two processes on the real local Kafka: member A leads,
 * member B waits; A is killed with SIGKILL and B takes the role with a newer
 * token; then another party mints a newer epoch of the role (Kafka's own
 * admin tool, as an operator would fence a holder) and B, deposed, has its
 * next guarded write refused with KRABKA_RESULT_FENCED.
 *
 * Usage: test_failover MEMBER_COMMAND...: the member binary, or a command
 * that runs it (`valgrind ... member`); the member's arguments go after it.
 * Environment: KRABKA_BOOTSTRAP (required: the test fails when Kafka is
 * unreachable), KRABKA_C_TOPIC (a topic for guarded writes), KRABKA_KAFKA_SH
 * (ci/kafka.sh, for its admin tool), KRABKA_C_SLOW (set under valgrind:
 * longer leases and waits, here and in the members).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* The member's timings (member.c): lease 3 s, stagger 1 s; with
 * KRABKA_C_SLOW (under valgrind, tens of times slower) a 20 s lease, and
 * every wait of this test SLOW_FACTOR times longer. */
static double LEASE_S = 3.0;
static const double STAGGER_S = 1.0;
static double SLACK_S = 4.0;
static double SLOW = 1.0;
#define SLOW_FACTOR 6.0

typedef struct {
    pid_t pid;
    int fd;
    char buf[8192];
    size_t len;
    const char *name;
} child;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void spawn(child *c, char **command, int command_len, const char *bootstrap, const char *role,
                  const char *member, const char *topic) {
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe: %s", strerror(errno));
    c->pid = fork();
    REQUIRE(c->pid >= 0, "fork: %s", strerror(errno));
    if (c->pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        char *args[64];
        int i;
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
    c->name = member;
}

/* The next line of the child's output, within `timeout` seconds; NULL on
 * timeout or end of output. The line stays valid until the next call. */
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

/* Reads lines until one starts with `prefix`; returns it (NULL: timeout). */
static char *expect(child *c, const char *prefix, double timeout) {
    double until = now() + timeout;
    for (;;) {
        double left = until - now();
        char *line = left > 0 ? next_line(c, left) : NULL;
        if (!line) {
            fprintf(stderr, "member %s: no '%s' within %.1f s\n", c->name, prefix, timeout);
            return NULL;
        }
        if (strncmp(line, "error", 5) == 0) fprintf(stderr, "member %s: %s\n", c->name, line);
        if (strncmp(line, prefix, strlen(prefix)) == 0) return line;
    }
}

static krabka_fencing_token parse_token(const char *elected_line) {
    krabka_fencing_token t = {-1, -1};
    long long id = 0, epoch = 0;
    if (elected_line && sscanf(elected_line, "elected %lld %lld", &id, &epoch) == 2) {
        t.producer_id = id;
        t.producer_epoch = (int16_t)epoch;
    }
    return t;
}

/* The members of `role` in rank order, joined with ',' into out. */
static void roster(krabka_client *client, const char *role, char *out, size_t cap) {
    krabka_role_state *state = NULL;
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
    krabka_role_state_free(state);
}

static int wait_roster(krabka_client *client, const char *role, const char *want, double timeout) {
    char got[1024];
    double until = now() + timeout;
    for (;;) {
        struct timespec pause = {0, 100 * 1000 * 1000};
        roster(client, role, got, sizeof got);
        if (strcmp(got, want) == 0) return 1;
        if (now() > until) {
            fprintf(stderr, "roster of %s is '%s', wanted '%s'\n", role, got, want);
            return 0;
        }
        nanosleep(&pause, NULL);
    }
}

static int authoritative(krabka_client *client, const char *role, const krabka_fencing_token *t) {
    krabka_leadership_status status;
    test_error e;
    bool yes = false;
    if (krabka_client_describe_leadership(client, role, &status, error_init(&e)) != KRABKA_RESULT_OK) {
        fprintf(stderr, "describe: %s\n", e.buf);
        return -1;
    }
    krabka_leadership_status_authoritative(&status, t, &yes);
    return yes;
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

int main(int argc, char **argv) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *topic = getenv("KRABKA_C_TOPIC");
    const char *kafka_sh = getenv("KRABKA_KAFKA_SH");
    const char *keys[1] = {"bootstrap.servers"};
    char role[128], cmd[2048];
    krabka_client *client = NULL;
    krabka_topic_options to;
    krabka_fencing_token ta, tb;
    child a, b;
    test_error e;
    bool created = false;
    int32_t order = 0;
    double killed_at, took;
    char *line;

    REQUIRE(argc >= 2 && argc <= 60, "usage: %s MEMBER_COMMAND...", argv[0]);
    if (getenv("KRABKA_C_SLOW")) {
        LEASE_S = 20.0;
        SLACK_S = 20.0;
        SLOW = SLOW_FACTOR;
    }
    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    REQUIRE(topic && *topic, "KRABKA_C_TOPIC is not set");
    REQUIRE(kafka_sh && *kafka_sh, "KRABKA_KAFKA_SH is not set");
    snprintf(role, sizeof role, "c-failover-%ld-%ld", (long)getpid(), (long)time(NULL));
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &client, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    KRABKA_TOPIC_OPTIONS_INIT(&to);
    to.development = true;
    REQUIRE(krabka_client_ensure_state_topic(client, &to, &created, error_init(&e)) == KRABKA_RESULT_OK,
            "Kafka at %s is unreachable or refuses the state topic: %s", bootstrap, e.buf);

    spawn(&a, argv + 1, argc - 1, bootstrap, role, "a", topic);
    line = expect(&a, "elected", 60 * SLOW);
    REQUIRE(line, "member a was not elected");
    ta = parse_token(line);
    CHECK(expect(&a, "wrote", 10 * SLOW) != NULL, "a writes while it leads");
    spawn(&b, argv + 1, argc - 1, bootstrap, role, "b", topic);
    CHECK(wait_roster(client, role, "a,b", 20 * SLOW), "b registers behind a");
    CHECK(expect(&b, "event waiting", 20 * SLOW) != NULL, "b waits");
    CHECK(authoritative(client, role, &ta) == 1, "a's token is authoritative");

    kill(a.pid, SIGKILL);
    killed_at = now();
    CHECK(exit_status(a.pid, 10 * SLOW) == -SIGKILL, "a died of SIGKILL");
    close(a.fd);

    line = expect(&b, "elected", LEASE_S + STAGGER_S + SLACK_S + 10);
    took = now() - killed_at;
    REQUIRE(line, "b did not take over after a's SIGKILL");
    tb = parse_token(line);
    CHECK(took <= LEASE_S + STAGGER_S + SLACK_S, "takeover took %.2f s", took);
    printf("failover: b took over %.2f s after a's SIGKILL (lease %.0f s, stagger %.0f s)\n", took, LEASE_S,
           STAGGER_S);
    krabka_fencing_token_compare(&tb, &ta, &order);
    CHECK(order == 1, "b's token (%lld,%d) is above a's (%lld,%d)", (long long)tb.producer_id, tb.producer_epoch,
          (long long)ta.producer_id, ta.producer_epoch);
    CHECK(authoritative(client, role, &tb) == 1, "b's token is authoritative");
    CHECK(authoritative(client, role, &ta) == 0, "a's token is not");
    CHECK(expect(&b, "wrote", 10 * SLOW) != NULL, "b writes while it leads");
    CHECK(wait_roster(client, role, "b", 15 * SLOW), "the dead holder's registration is removed");

    /* Another party mints a newer epoch: b is deposed, its write fenced. */
    snprintf(cmd, sizeof cmd,
             "'%s' tool transactions --bootstrap-server '%s' forceTerminateTransaction --transactionalId '%s' "
             ">/dev/null 2>&1",
             kafka_sh, bootstrap, role);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    line = expect(&b, "write", 30 * SLOW);
    CHECK(line && strcmp(line, "write FENCED") == 0, "the deposed member's guarded write: '%s'", line ? line : "none");
    line = expect(&b, "ended", 15 * SLOW);
    CHECK(line && strcmp(line, "ended FENCED") == 0, "the term ended: '%s'", line ? line : "none");
    CHECK(authoritative(client, role, &tb) == 0, "b's token is no longer authoritative");
    CHECK(exit_status(b.pid, 30 * SLOW) == 0, "b exits cleanly after the fence (under valgrind: with no leak)");
    close(b.fd);
    krabka_client_free(client);
    CHECK(krabka_wait_idle(30 * SLOW) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    return check_summary("failover");
}
