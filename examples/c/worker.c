/*
 * worker: a daemon that does a role's work only while it leads.
 *
 * Start it on several machines (or several times on one): one process leads
 * the role and works; the others wait as standbys and take over when the
 * leader stops, crashes or is cut off. The work is a stand-in: a numbered
 * result every --interval seconds, written to --topic with a guarded write,
 * so only the current leader's results are ever committed.
 *
 * Stopping:
 *   SIGTERM or SIGINT: a leader resigns (a standby takes over at once), a
 *     standby stops waiting (its member is deregistered); exit code 0.
 *   fenced (a newer epoch took the role): stops working at once; exit 3.
 *   its own lease expired (cut off from Kafka, frozen): stops at once; exit 4.
 *   --for-seconds N: like SIGTERM after N seconds (demos, CI).
 *
 * Signals are blocked in every thread and taken by one thread with
 * sigwait(), which fires a krabka_cancel (stopping a waiting acquire) and
 * sets a flag the work loop reads: library calls are never made from a
 * signal handler.
 *
 * Build against an installed library:
 *   cc -std=c99 -o worker worker.c $(pkg-config --cflags --libs krabka_coordination) -lpthread
 * Run (a local Kafka: ci/kafka.sh start 1; the topic must exist):
 *   ./worker --bootstrap 127.0.0.1:19092 --role nightly-report --member "$(hostname)-$$" --topic report-results
 * Kafka client settings go straight to librdkafka: --kafka-setting key=value.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <krabka_coordination.h>

#define MAX_SETTINGS 32

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static int stop_signal; /* the signal that asked to stop, 0 while none */

static void say(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    pthread_mutex_lock(&out_lock);
    vprintf(fmt, args);
    fputc('\n', stdout);
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
    va_end(args);
}

static int stopping(void) {
    int s;
    pthread_mutex_lock(&stop_lock);
    s = stop_signal;
    pthread_mutex_unlock(&stop_lock);
    return s;
}

typedef struct {
    sigset_t set;
    krabka_cancel *cancel;
} signal_thread_args;

/* Waits for SIGTERM, SIGINT or SIGALRM (--for-seconds), then asks to stop. */
static void *signal_thread(void *arg) {
    signal_thread_args *a = (signal_thread_args *)arg;
    int sig = 0;
    if (sigwait(&a->set, &sig) != 0) return NULL;
    pthread_mutex_lock(&stop_lock);
    stop_signal = sig;
    pthread_mutex_unlock(&stop_lock);
    krabka_cancel_fire(a->cancel);
    return NULL;
}

/* The member's events, on the library's callback thread. */
static void on_event(const krabka_event *event, void *user_data) {
    (void)user_data;
    switch (event->kind) {
    case KRABKA_EVENT_KIND_WAITING:
        say("event waiting: rank %llu", (unsigned long long)event->rank);
        break;
    case KRABKA_EVENT_KIND_ELECTED:
        say("event elected: token %lld/%d", (long long)event->token.producer_id, event->token.producer_epoch);
        break;
    case KRABKA_EVENT_KIND_RENEWED:
        break; /* every renew interval: too chatty */
    case KRABKA_EVENT_KIND_RENEWAL_FAILING:
    case KRABKA_EVENT_KIND_RETRYING:
    case KRABKA_EVENT_KIND_FENCED:
    case KRABKA_EVENT_KIND_ENDED:
        say("event %s: %s", event->name, event->error_message ? event->error_message : "");
        break;
    default:
        say("event %s", event->name);
    }
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s --bootstrap HOST:PORT --role ROLE --member ID --topic TOPIC\n"
            "          [--interval SECONDS] [--lease SECONDS] [--renew SECONDS] [--stagger SECONDS]\n"
            "          [--for-seconds N] [--kafka-setting KEY=VALUE]...\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv) {
    const char *keys[MAX_SETTINGS], *values[MAX_SETTINGS];
    char *owned[MAX_SETTINGS];
    size_t n_settings = 0, n_owned = 0, i;
    const char *role = NULL, *member = NULL, *topic = NULL;
    double interval = 1.0;
    unsigned for_seconds = 0;
    char message[1024];
    krabka_error err;
    krabka_leadership_options options;
    krabka_client *client = NULL;
    krabka_leadership *leadership = NULL;
    krabka_cancel *cancel = NULL;
    krabka_fencing_token token;
    krabka_result r, reason = KRABKA_RESULT_OK;
    signal_thread_args sig_args;
    pthread_t sig_thread;
    long long results = 0;
    int code = 0, a;

    KRABKA_LEADERSHIP_OPTIONS_INIT(&options);
    for (a = 1; a < argc; a++) {
        const char *opt = argv[a];
        const char *val = a + 1 < argc ? argv[a + 1] : NULL;
        if (!val) usage(argv[0]);
        a++;
        if (strcmp(opt, "--bootstrap") == 0 || strcmp(opt, "--kafka-setting") == 0) {
            if (n_settings == MAX_SETTINGS) usage(argv[0]);
            if (strcmp(opt, "--bootstrap") == 0) {
                keys[n_settings] = "bootstrap.servers";
                values[n_settings++] = val;
            } else {
                char *copy = strdup(val), *eq = strchr(copy, '=');
                if (!eq) usage(argv[0]);
                *eq = '\0';
                owned[n_owned++] = copy;
                keys[n_settings] = copy;
                values[n_settings++] = eq + 1;
            }
        } else if (strcmp(opt, "--role") == 0) role = val;
        else if (strcmp(opt, "--member") == 0) member = val;
        else if (strcmp(opt, "--topic") == 0) topic = val;
        else if (strcmp(opt, "--interval") == 0) interval = atof(val);
        else if (strcmp(opt, "--lease") == 0) options.lease_duration = atof(val);
        else if (strcmp(opt, "--renew") == 0) options.renew_interval = atof(val);
        else if (strcmp(opt, "--stagger") == 0) options.challenge_stagger = atof(val);
        else if (strcmp(opt, "--for-seconds") == 0) for_seconds = (unsigned)atoi(val);
        else usage(argv[0]);
    }
    if (!role || !member || !topic || n_settings == 0) usage(argv[0]);

    /* Block the stop signals before any thread starts (the library's
     * threads inherit the mask); one thread takes them with sigwait. */
    sigemptyset(&sig_args.set);
    sigaddset(&sig_args.set, SIGTERM);
    sigaddset(&sig_args.set, SIGINT);
    sigaddset(&sig_args.set, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &sig_args.set, NULL);
    if (krabka_cancel_new(&cancel) != KRABKA_RESULT_OK) return 1;
    sig_args.cancel = cancel;
    if (pthread_create(&sig_thread, NULL, signal_thread, &sig_args) != 0) return 1;
    if (for_seconds) alarm(for_seconds);

    krabka_error_init(&err, message, sizeof message); /* then fields by name */
    r = krabka_client_new(keys, values, n_settings, NULL, &client, &err);
    if (r != KRABKA_RESULT_OK) {
        say("cannot make the client: %s: %s", krabka_result_name(r), message);
        return 1;
    }

    say("member %s of role %s: waiting for the role", member, role);
    r = krabka_client_acquire(client, role, member, &options, KRABKA_NO_TIMEOUT, cancel, on_event, NULL,
                              &leadership, &err);
    if (r == KRABKA_RESULT_CANCELLED) {
        say("stopped while waiting (signal %d); deregistered", stopping());
        code = 0;
        goto out;
    }
    if (r != KRABKA_RESULT_OK) {
        say("acquire failed: %s: %s", krabka_result_name(r), message);
        code = 1;
        goto out;
    }
    krabka_leadership_token(leadership, &token, NULL);
    say("leading with token %lld/%d", (long long)token.producer_id, token.producer_epoch);

    /* The work: only while leading. The wait returns early when the term
     * ends (fenced, lease expired), so the work stops at once. */
    while (!stopping()) {
        char value[128];
        krabka_record record;
        r = krabka_leadership_wait(leadership, interval, &reason, &err);
        if (r == KRABKA_RESULT_OK) break; /* the term ended */
        if (stopping()) break;
        results++;
        snprintf(value, sizeof value, "{\"result\": %lld, \"member\": \"%s\"}", results, member);
        krabka_record_init(&record, topic); /* any partition, no key, no headers */
        record.value = (const uint8_t *)value;
        record.value_len = strlen(value);
        r = krabka_leadership_write(leadership, &record, 1, &err);
        if (r == KRABKA_RESULT_OK) {
            say("result %lld written", results);
        } else if (r == KRABKA_RESULT_OUTCOME_UNKNOWN || r == KRABKA_RESULT_TRANSIENT) {
            say("result %lld: %s (%s); going on", results, krabka_result_name(r), message);
        } else {
            say("result %lld refused: %s: %s", results, krabka_result_name(r), message);
        }
    }
    krabka_leadership_reason(leadership, &reason, &err);
    if (reason == KRABKA_RESULT_OK) {
        /* Asked to stop while leading: hand the role over at once. */
        r = krabka_leadership_resign(leadership, &err);
        say("signal %d: %s", stopping(), r == KRABKA_RESULT_OK ? "resigned" : message);
        code = r == KRABKA_RESULT_OK ? 0 : 1;
    } else {
        say("the role ended: %s: %s", krabka_result_name(reason), message);
        code = reason == KRABKA_RESULT_FENCED ? 3 : reason == KRABKA_RESULT_LEASE_EXPIRED ? 4 : 1;
    }

out:
    krabka_leadership_free(leadership);
    krabka_client_free(client);
    /* Release the signal thread if no signal came. */
    if (!stopping()) pthread_kill(sig_thread, SIGTERM);
    pthread_join(sig_thread, NULL);
    krabka_cancel_free(cancel);
    /* Let the library's background work end before the process does. */
    krabka_wait_idle(10.0);
    for (i = 0; i < n_owned; i++) free(owned[i]);
    return code;
}
