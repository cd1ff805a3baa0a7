/*
 * A member process for test_failover: acquires ROLE as MEMBER on the
 * cluster at BOOTSTRAP (3 s lease, 1 s renewals, 1 s stagger; with
 * KRABKA_C_SLOW set, under valgrind, a 20 s lease renewed every 5 s), then writes a
 * guarded record to TOPIC every 100 ms until a write fails or SIGTERM.
 *
 * It reports on stdout, one line each, flushed:
 *   event NAME          each event of the member (from the callback thread)
 *   elected ID EPOCH    the acquire returned the role with this token
 *   wrote N             after the first guarded write, and every 20th
 *   outcome_unknown MSG a guarded write's commit was not confirmed (it goes on)
 *   write CODE          a guarded write failed with this result code name
 *   ended CODE          the term ended for this reason (after a failed write)
 *   resigned            SIGTERM: the role was resigned
 *   error WHAT CODE MSG a call failed
 *
 * Usage: member BOOTSTRAP ROLE MEMBER TOPIC
 *
 * With --lead (test_lead): runs the leader loop (krabka_client_lead) for
 * ROLE as MEMBER (3 s lease, 1 s renewals, 0.5 s stagger; 20 s and 5 s
 * with KRABKA_C_SLOW); each term's work prints
 *   term N ID EPOCH     the term's number in the loop and its token
 * then waits until the term ends and prints
 *   term_ended N
 * and returns; when the loop returns (it runs until killed, or an error):
 *   lead CODE MSG
 *
 * Usage: member --lead BOOTSTRAP ROLE MEMBER
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "krabka_coordination.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t stop_requested;

static void say(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    pthread_mutex_lock(&out_lock);
    vprintf(fmt, args);
    va_end(args);
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
}

static void on_event(const krabka_event *event, void *user_data) {
    (void)user_data;
    say("event %s\n", event->name);
}

static void on_term(int sig) {
    (void)sig;
    stop_requested = 1;
}

static uint32_t lead_work(const krabka_leadership *leadership, const krabka_term_signal *ended, void *user_data) {
    long long *terms = user_data;
    krabka_fencing_token token = {-1, -1};
    char buf[512];
    krabka_error err;
    krabka_result r;
    memset(&err, 0, sizeof err);
    err.message = buf;
    err.capacity = sizeof buf;
    ++*terms;
    r = krabka_leadership_token(leadership, &token, &err);
    if (r != KRABKA_RESULT_OK) {
        say("error token %s %s\n", krabka_result_name(r), buf);
        return r;
    }
    say("term %lld %lld %lld\n", *terms, (long long)token.producer_id, (long long)token.producer_epoch);
    r = krabka_term_wait(ended, KRABKA_NO_TIMEOUT, &err);
    if (r != KRABKA_RESULT_OK) say("error term_wait %s %s\n", krabka_result_name(r), buf);
    say("term_ended %lld\n", *terms);
    return KRABKA_RESULT_OK;
}

static int lead_main(const char *bootstrap, const char *role, const char *member) {
    const char *keys[1] = {"bootstrap.servers"};
    const char *values[1];
    char buf[1024];
    krabka_error err;
    krabka_client *client = NULL;
    krabka_leadership_options options;
    krabka_result r;
    long long terms = 0;

    memset(&err, 0, sizeof err);
    err.message = buf;
    err.capacity = sizeof buf;
    values[0] = bootstrap;
    r = krabka_client_new(keys, values, 1, NULL, &client, &err);
    if (r != KRABKA_RESULT_OK) {
        printf("error client_new %s %s\n", krabka_result_name(r), buf);
        return 1;
    }
    KRABKA_LEADERSHIP_OPTIONS_INIT(&options);
    options.lease_duration = 3.0;
    options.renew_interval = 1.0;
    options.challenge_stagger = 0.5;
    if (getenv("KRABKA_C_SLOW")) {
        options.lease_duration = 20.0;
        options.renew_interval = 5.0;
    }
    r = krabka_client_lead(client, role, member, &options, NULL, lead_work, &terms, &err);
    say("lead %s %s\n", krabka_result_name(r), r == KRABKA_RESULT_OK ? "" : buf);
    krabka_client_free(client);
    krabka_wait_idle(30);
    return r == KRABKA_RESULT_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *keys[1] = {"bootstrap.servers"};
    const char *values[1];
    char buf[1024];
    krabka_error err;
    krabka_client *client = NULL;
    krabka_leadership *leadership = NULL;
    krabka_leadership_options options;
    krabka_fencing_token token;
    krabka_result r, reason;
    struct sigaction sa;
    long long n = 0;

    if (argc == 5 && strcmp(argv[1], "--lead") == 0) return lead_main(argv[2], argv[3], argv[4]);
    if (argc != 5) {
        fprintf(stderr, "usage: %s BOOTSTRAP ROLE MEMBER TOPIC | --lead BOOTSTRAP ROLE MEMBER\n", argv[0]);
        return 2;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    memset(&err, 0, sizeof err);
    err.message = buf;
    err.capacity = sizeof buf;
    values[0] = argv[1];

    r = krabka_client_new(keys, values, 1, NULL, &client, &err);
    if (r != KRABKA_RESULT_OK) {
        printf("error client_new %s %s\n", krabka_result_name(r), buf);
        return 1;
    }
    KRABKA_LEADERSHIP_OPTIONS_INIT(&options);
    options.lease_duration = 3.0;
    options.renew_interval = 1.0;
    options.challenge_stagger = 1.0;
    if (getenv("KRABKA_C_SLOW")) {
        /* Under valgrind everything runs tens of times slower: a lease that
         * rides out the slowdown (test_failover waits as much longer). */
        options.lease_duration = 20.0;
        options.renew_interval = 5.0;
    }
    r = krabka_client_acquire(client, argv[2], argv[3], &options, KRABKA_NO_TIMEOUT, NULL, on_event, NULL, &leadership,
                              &err);
    if (r != KRABKA_RESULT_OK) {
        printf("error acquire %s %s\n", krabka_result_name(r), buf);
        krabka_client_free(client);
        return 1;
    }
    krabka_leadership_token(leadership, &token, &err);
    say("elected %lld %lld\n", (long long)token.producer_id, (long long)token.producer_epoch);

    while (!stop_requested) {
        char value[64];
        krabka_record record;
        struct timespec pause = {0, 100 * 1000 * 1000};
        snprintf(value, sizeof value, "%s:%lld", argv[3], n);
        memset(&record, 0, sizeof record);
        record.topic = argv[4];
        record.partition = KRABKA_ANY_PARTITION;
        record.key = (const uint8_t *)argv[3];
        record.key_len = strlen(argv[3]);
        record.value = (const uint8_t *)value;
        record.value_len = strlen(value);
        r = krabka_leadership_write(leadership, &record, 1, &err);
        if (r == KRABKA_RESULT_OUTCOME_UNKNOWN) {
            /* The commit was sent but not confirmed (a fence at the commit):
             * the next write says where the term stands. */
            say("outcome_unknown %s\n", buf);
            continue;
        }
        if (r != KRABKA_RESULT_OK) {
            say("write %s\n", krabka_result_name(r));
            krabka_leadership_wait(leadership, 10.0, &reason, &err);
            say("ended %s\n", krabka_result_name(reason));
            break;
        }
        n++;
        if (n == 1 || n % 20 == 0) say("wrote %lld\n", n);
        nanosleep(&pause, NULL);
    }
    if (stop_requested) {
        r = krabka_leadership_resign(leadership, &err);
        if (r == KRABKA_RESULT_OK) say("resigned\n");
        else say("error resign %s %s\n", krabka_result_name(r), buf);
    }
    krabka_leadership_free(leadership);
    krabka_client_free(client);
    krabka_wait_idle(30);
    return 0;
}
