/*
 * The log callback (krabka_set_log_callback) on the real local Kafka: the
 * core warns, every time it checks a state topic, that a topic with
 * min.insync.replicas=1 (the one-node cluster's) keeps no lease in a
 * quorum; that warning reaches the callback with its level, target, file
 * and text, on the library's log thread (krabka-log), one call at a time.
 * Below the minimum level nothing is delivered, NULL removes the callback,
 * a new one takes over, and the callback may not set the callback.
 *
 * Absence is shown by order, not by waiting: records are delivered in the
 * order they were made, so once a later record (about another state topic)
 * arrived, an earlier one that was filtered out would have come first.
 *
 * Environment: KRABKA_BOOTSTRAP (required: the test fails when Kafka is
 * unreachable), KRABKA_C_SLOW (valgrind: longer waits).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

/* A second state topic (one partition, compacted; made once, kept). */
#define OTHER_TOPIC "krabka-c-log-state"
#define DEFAULT_TOPIC "__coordination_state"

static double SLOW = 1.0;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t main_thread;
    int calls;
    int in_call, most_at_once;
    int on_main_thread;
    int not_log_thread;
    int default_topic;  /* warnings naming DEFAULT_TOPIC */
    int other_topic;    /* warnings naming OTHER_TOPIC */
    bool checked_first; /* the first topic warning's details were checked */
    uint32_t level;
    char target[256], message[1024], text[2048], file[512];
    uint32_t line;
    bool fields_consistent;
    krabka_result set_from_callback;
} sink;

static void sink_init(sink *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    s->main_thread = pthread_self();
    s->fields_consistent = true;
    s->set_from_callback = KRABKA_RESULT_OK;
}

static void sink_destroy(sink *s) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->changed);
}

static void on_log(const krabka_log_record *r, void *user_data) {
    sink *s = user_data;
    char name[32] = "";
    bool topic_warning = strstr(r->message, "min.insync.replicas=") != NULL;
    bool first;
    pthread_getname_np(pthread_self(), name, sizeof name);
    pthread_mutex_lock(&s->lock);
    s->in_call++;
    if (s->in_call > s->most_at_once) s->most_at_once = s->in_call;
    s->calls++;
    if (pthread_equal(pthread_self(), s->main_thread)) s->on_main_thread++;
    if (strcmp(name, "krabka-log") != 0) s->not_log_thread++;
    if ((r->field_count == 0) != (r->fields == NULL) || (r->context_count == 0) != (r->context == NULL))
        s->fields_consistent = false;
    first = topic_warning && !s->checked_first;
    if (first) {
        s->checked_first = true;
        s->level = r->level;
        snprintf(s->target, sizeof s->target, "%s", r->target);
        snprintf(s->message, sizeof s->message, "%s", r->message);
        snprintf(s->text, sizeof s->text, "%s", r->text);
        snprintf(s->file, sizeof s->file, "%s", r->file ? r->file : "(null)");
        s->line = r->line;
    }
    if (topic_warning && strstr(r->message, "topic " DEFAULT_TOPIC " ")) s->default_topic++;
    if (topic_warning && strstr(r->message, "topic " OTHER_TOPIC " ")) s->other_topic++;
    pthread_mutex_unlock(&s->lock);
    if (first) {
        /* Not from the callback: refused, and nothing deadlocks. */
        s->set_from_callback = krabka_set_log_callback(on_log, s, KRABKA_LOG_LEVEL_TRACE, NULL);
    }
    pthread_mutex_lock(&s->lock);
    s->in_call--;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

/* Waits until *counter >= n (within `seconds`); returns whether it is. */
static bool wait_count(sink *s, const int *counter, int n, double seconds) {
    struct timespec at;
    double whole;
    bool got;
    clock_gettime(CLOCK_REALTIME, &at);
    whole = (double)at.tv_sec + (double)at.tv_nsec / 1e9 + seconds;
    at.tv_sec = (time_t)whole;
    at.tv_nsec = (long)((whole - (double)at.tv_sec) * 1e9);
    pthread_mutex_lock(&s->lock);
    while (*counter < n)
        if (pthread_cond_timedwait(&s->changed, &s->lock, &at) == ETIMEDOUT) break;
    got = *counter >= n;
    pthread_mutex_unlock(&s->lock);
    return got;
}

static int read_count(sink *s, const int *counter) {
    int n;
    pthread_mutex_lock(&s->lock);
    n = *counter;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static krabka_result ensure(krabka_client *client) {
    krabka_topic_options dev;
    test_error e;
    bool created = false;
    krabka_result r;
    KRABKA_TOPIC_OPTIONS_INIT(&dev);
    dev.development = true;
    r = krabka_client_ensure_state_topic(client, &dev, &created, error_init(&e));
    if (r != KRABKA_RESULT_OK) fprintf(stderr, "ensure_state_topic: %s\n", e.buf);
    return r;
}

int main(void) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *keys[1] = {"bootstrap.servers"};
    krabka_client *client = NULL, *other = NULL;
    krabka_client_options other_options;
    sink one, two;
    test_error e;

    if (getenv("KRABKA_C_SLOW")) SLOW = 6.0;
    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    sink_init(&one);
    sink_init(&two);

    /* Refusals. */
    CHECK_RESULT(krabka_set_log_callback(on_log, &one, 6, error_init(&e)), KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "min_level") != NULL, "names min_level: %s", e.buf);
    CHECK_RESULT(krabka_set_log_callback(NULL, NULL, 77, error_init(&e)), KRABKA_RESULT_OK, &e.err);

    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &client, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    KRABKA_CLIENT_OPTIONS_INIT(&other_options);
    other_options.partitions = 1;
    other_options.state_topic = OTHER_TOPIC;
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, &other_options, &other, error_init(&e)) == KRABKA_RESULT_OK,
            "client: %s", e.buf);

    /* From WARN up: the state topic's warning arrives. */
    CHECK_RESULT(krabka_set_log_callback(on_log, &one, KRABKA_LOG_LEVEL_WARN, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    REQUIRE(ensure(client) == KRABKA_RESULT_OK, "Kafka at %s is unreachable or refuses the state topic", bootstrap);
    CHECK(wait_count(&one, &one.default_topic, 1, 30 * SLOW), "the min.insync.replicas warning reaches the callback");
    pthread_mutex_lock(&one.lock);
    CHECK(one.level == KRABKA_LOG_LEVEL_WARN, "its level is WARN (%u)", one.level);
    CHECK(strncmp(one.target, "krabka_coordination::", 21) == 0, "its target is the core's module: %s", one.target);
    CHECK(strstr(one.message, "min.insync.replicas=1") != NULL, "its message: %s", one.message);
    CHECK(strstr(one.text, one.message) != NULL, "the text holds the message: %s", one.text);
    CHECK(strstr(one.file, ".rs") != NULL && one.line > 0, "its source: %s:%u", one.file, one.line);
    pthread_mutex_unlock(&one.lock);

    /* Below the minimum level: not delivered (ERROR only, then WARN again:
     * the other topic's warning arrives, the default topic's did not). */
    CHECK_RESULT(krabka_set_log_callback(on_log, &one, KRABKA_LOG_LEVEL_ERROR, error_init(&e)), KRABKA_RESULT_OK,
                 &e.err);
    CHECK(ensure(client) == KRABKA_RESULT_OK, "ensure at ERROR");
    CHECK_RESULT(krabka_set_log_callback(on_log, &one, KRABKA_LOG_LEVEL_WARN, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    CHECK(ensure(other) == KRABKA_RESULT_OK, "ensure of " OTHER_TOPIC);
    CHECK(wait_count(&one, &one.other_topic, 1, 30 * SLOW), "the other topic's warning arrives");
    CHECK(read_count(&one, &one.default_topic) == 1, "the warning made at ERROR was not delivered (%d)",
          read_count(&one, &one.default_topic));

    /* NULL removes the callback; a new one gets what comes after. */
    CHECK_RESULT(krabka_set_log_callback(NULL, NULL, 0, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    CHECK(ensure(client) == KRABKA_RESULT_OK, "ensure with no callback");
    CHECK_RESULT(krabka_set_log_callback(on_log, &two, KRABKA_LOG_LEVEL_WARN, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    CHECK(ensure(other) == KRABKA_RESULT_OK, "ensure of " OTHER_TOPIC);
    CHECK(wait_count(&two, &two.other_topic, 1, 30 * SLOW), "the new callback gets the next warning");
    CHECK(read_count(&two, &two.default_topic) == 0, "nothing made while there was no callback reached it (%d)",
          read_count(&two, &two.default_topic));
    CHECK_RESULT(krabka_set_log_callback(NULL, NULL, 0, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    /* Once removed, never called again: a warning made with no callback,
     * then `one` again: its next record is the other topic's, and `two`
     * got nothing more. */
    {
        int calls_two = read_count(&two, &two.calls);
        CHECK(ensure(client) == KRABKA_RESULT_OK, "ensure after the removal");
        CHECK_RESULT(krabka_set_log_callback(on_log, &one, KRABKA_LOG_LEVEL_WARN, error_init(&e)), KRABKA_RESULT_OK,
                     &e.err);
        CHECK(ensure(other) == KRABKA_RESULT_OK, "ensure of " OTHER_TOPIC);
        CHECK(wait_count(&one, &one.other_topic, 2, 30 * SLOW), "the first callback, set again, gets the next warning");
        CHECK(read_count(&one, &one.default_topic) == 1, "nothing made with no callback (%d)",
              read_count(&one, &one.default_topic));
        CHECK(read_count(&two, &two.calls) == calls_two, "the removed callback was not called again");
        CHECK_RESULT(krabka_set_log_callback(NULL, NULL, 0, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    }

    /* Where and how the calls ran. */
    CHECK(one.on_main_thread == 0 && two.on_main_thread == 0, "never on the caller's thread");
    CHECK(one.not_log_thread == 0 && two.not_log_thread == 0, "always on the krabka-log thread");
    CHECK(one.most_at_once == 1 && two.most_at_once == 1, "one call at a time (%d, %d)", one.most_at_once,
          two.most_at_once);
    CHECK(one.fields_consistent && two.fields_consistent, "fields and context: NULL exactly when empty");
    CHECK(one.set_from_callback == KRABKA_RESULT_INVALID_ARGUMENT, "setting the callback from it is refused: %s",
          krabka_result_name(one.set_from_callback));
    CHECK(one.other_topic == 2 && two.other_topic == 1 && two.default_topic == 0, "each record went to one callback");

    krabka_client_free(other);
    krabka_client_free(client);
    CHECK(krabka_wait_idle(30 * SLOW) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    sink_destroy(&one);
    sink_destroy(&two);
    return check_summary("log");
}
