/*
 * krabka_metrics_prometheus on the real local Kafka: before an election
 * the role has no series; after one, its elections counter is 1 in the
 * Prometheus text, its resigns and fences counters are there at 0 (from the
 * member's registration, for the alerts), every metric has its # HELP line,
 * and after the resign its resigns counter is 1. The
 * buffer rules: the size needed (NUL included) even when it does not fit,
 * NULL with length 0 to ask it, NULL refused otherwise.
 *
 * Environment: KRABKA_BOOTSTRAP (required: the test fails when Kafka is
 * unreachable), KRABKA_C_SLOW (valgrind: a longer lease).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* The text, malloc'd (NULL on error). */
static char *render(void) {
    size_t needed = 0;
    test_error e;
    char *text;
    krabka_result r = krabka_metrics_prometheus(NULL, 0, &needed, error_init(&e));
    if (r != KRABKA_RESULT_BUFFER_TOO_SMALL || needed == 0) return NULL;
    needed += 4096; /* room for series made meanwhile */
    text = malloc(needed);
    if (!text) return NULL;
    if (krabka_metrics_prometheus(text, needed, &needed, error_init(&e)) != KRABKA_RESULT_OK) {
        fprintf(stderr, "metrics: %s\n", e.buf);
        free(text);
        return NULL;
    }
    return text;
}

/* The value of the series `name{role="ROLE",...}`, or -1 when absent. */
static long long series(const char *text, const char *name, const char *role) {
    char want[256];
    const char *line = text;
    snprintf(want, sizeof want, "role=\"%s\"", role);
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (strncmp(line, name, strlen(name)) == 0 && line[strlen(name)] == '{') {
            char buf[1024];
            const char *space;
            snprintf(buf, sizeof buf, "%.*s", (int)n, line);
            space = strrchr(buf, ' ');
            if (strstr(buf, want) && space) return atoll(space + 1);
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

int main(void) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *keys[1] = {"bootstrap.servers"};
    krabka_client *client = NULL;
    krabka_leadership *leadership = NULL;
    krabka_leadership_options o;
    krabka_topic_options dev;
    char role[128], small[4];
    size_t needed = 0;
    bool created;
    test_error e;
    char *text;

    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    snprintf(role, sizeof role, "c-metrics-%ld-%ld", (long)getpid(), (long)time(NULL));

    /* The buffer rules (before any client: the text is empty, 1 byte). */
    CHECK_RESULT(krabka_metrics_prometheus(NULL, 0, NULL, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "needed") != NULL, "names needed: %s", e.buf);
    CHECK_RESULT(krabka_metrics_prometheus(NULL, 8, &needed, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "buf") != NULL, "names buf: %s", e.buf);
    CHECK_RESULT(krabka_metrics_prometheus(small, (size_t)-1, &needed, error_init(&e)),
                 KRABKA_RESULT_INVALID_ARGUMENT, &e.err);

    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &client, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    KRABKA_TOPIC_OPTIONS_INIT(&dev);
    dev.development = true;
    REQUIRE(krabka_client_ensure_state_topic(client, &dev, &created, error_init(&e)) == KRABKA_RESULT_OK,
            "Kafka at %s is unreachable or refuses the state topic: %s", bootstrap, e.buf);
    text = render();
    REQUIRE(text, "the metrics text");
    CHECK(series(text, "krabka_elections_total", role) == -1, "no election of the role yet");
    free(text);

    KRABKA_LEADERSHIP_OPTIONS_INIT(&o);
    o.lease_duration = getenv("KRABKA_C_SLOW") ? 20.0 : 3.0;
    o.renew_interval = getenv("KRABKA_C_SLOW") ? 5.0 : 1.0;
    o.challenge_stagger = 0.5;
    REQUIRE(krabka_client_acquire(client, role, "m", &o, 60, NULL, NULL, NULL, &leadership, error_init(&e)) ==
                KRABKA_RESULT_OK,
            "acquire: %s", e.buf);
    text = render();
    REQUIRE(text, "the metrics text");
    CHECK(series(text, "krabka_elections_total", role) == 1, "the role's elections counter moved to 1 (%lld)",
          series(text, "krabka_elections_total", role));
    CHECK(strstr(text, "# HELP krabka_elections_total Terms won.\n# TYPE krabka_elections_total counter\n") != NULL,
          "the text describes and declares the counter");
    CHECK(series(text, "krabka_resigns_total", role) == 0, "the resigns counter is there at 0 (%lld)",
          series(text, "krabka_resigns_total", role));
    CHECK(series(text, "krabka_fences_total", role) == 0, "the fences counter is there at 0 (%lld)",
          series(text, "krabka_fences_total", role));
    /* Too small: nothing written, the size needed. */
    memset(small, 'x', sizeof small);
    CHECK_RESULT(krabka_metrics_prometheus(small, sizeof small, &needed, error_init(&e)),
                 KRABKA_RESULT_BUFFER_TOO_SMALL, &e.err);
    CHECK(needed > strlen(text) / 2 && small[0] == 'x', "the size needed (%zu), nothing written", needed);
    free(text);

    CHECK_RESULT(krabka_leadership_resign(leadership, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    text = render();
    REQUIRE(text, "the metrics text");
    CHECK(series(text, "krabka_resigns_total", role) == 1, "the role's resigns counter moved to 1 (%lld)",
          series(text, "krabka_resigns_total", role));
    free(text);
    krabka_leadership_free(leadership);
    krabka_client_free(client);
    CHECK(krabka_wait_idle(30) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    return check_summary("metrics");
}
