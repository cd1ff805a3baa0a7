/*
 * The OAUTHBEARER token callback (krabka_client_options.oauth_token) on the
 * real local Kafka, without the secured cluster: the one-node cluster
 * listens in PLAINTEXT, and a client set to SASL_PLAINTEXT / OAUTHBEARER
 * asks the callback for a token before its first request. What this shows:
 *
 *   - OAUTHBEARER without a callback is refused naming the token provider;
 *   - the callback runs on a thread of the library's, not the caller's;
 *   - a failure it reports fails the operation at once (well within the
 *     connect timeout) with TRANSIENT, or FATAL when it said so, naming the
 *     token provider and carrying its message;
 *   - a callback that returns without settling, an expired token, and an
 *     expiry of 0 are refused naming what is wrong; a second settlement is
 *     refused;
 *   - a good token is taken and sent (the broker, which speaks no SASL on
 *     this listener, fails the SASL handshake: FATAL naming the OAUTHBEARER
 *     authentication);
 *   - oauth_user_data_free is called exactly once: after krabka_client_free,
 *     and before krabka_client_new returns when it fails;
 *   - a caller of the struct's first version (struct_size without the OAuth
 *     fields, garbage after it) has no callback: the fields are not read.
 *
 * That a token authenticates is the secured suite's (test_secured.py).
 *
 * Environment: KRABKA_BOOTSTRAP (required: the test fails when Kafka is
 * unreachable).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define CONNECT_TIMEOUT 5.0

/* What the callback does. */
enum behaviour { FAIL, FAIL_FATAL, NOTHING, TWICE, ZERO_EXPIRY_THEN_EXPIRED, GOOD };

/* The callback's user data: what to do, and what it saw. */
typedef struct {
    enum behaviour behaviour;
    pthread_t caller;
    int calls;
    int on_caller_thread;
    int freed;
    krabka_result second;   /* TWICE: the second settlement's result */
    krabka_result zero;     /* ZERO_EXPIRY_THEN_EXPIRED: set_token with 0 */
    char second_message[1024];
} provider;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void token_callback(krabka_oauth_request *request, void *user_data) {
    provider *p = user_data;
    test_error e;
    p->calls++;
    if (pthread_equal(pthread_self(), p->caller)) p->on_caller_thread++;
    switch (p->behaviour) {
    case FAIL:
        krabka_oauth_request_fail(request, "the identity provider is unreachable", false, NULL);
        break;
    case FAIL_FATAL:
        krabka_oauth_request_fail(request, "the client credentials were revoked", true, NULL);
        break;
    case NOTHING:
        break;
    case TWICE:
        krabka_oauth_request_fail(request, "first", false, NULL);
        p->second = krabka_oauth_request_set_token(request, "eyJ", now_ms() + 3600000, NULL, error_init(&e));
        snprintf(p->second_message, sizeof p->second_message, "%s", e.buf);
        break;
    case ZERO_EXPIRY_THEN_EXPIRED:
        p->zero = krabka_oauth_request_set_token(request, "eyJ", 0, NULL, error_init(&e));
        snprintf(p->second_message, sizeof p->second_message, "%s", e.buf);
        krabka_oauth_request_set_token(request, "eyJ", now_ms() - 1000, NULL, NULL);
        break;
    case GOOD:
        krabka_oauth_request_set_token(request, "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.", now_ms() + 3600000,
                                       "admin", NULL);
        break;
    }
}

static void free_provider(void *user_data) { ((provider *)user_data)->freed++; }

static const char *keys[3] = {"bootstrap.servers", "security.protocol", "sasl.mechanism"};
static const char *values[3] = {NULL, "SASL_PLAINTEXT", "OAUTHBEARER"};

/* The result of krabka_client_check_state_topic on a client whose callback
 * behaves as `b`, its message in `e`, the seconds it took in `took`, and
 * what the callback saw in `p`. */
static krabka_result run(enum behaviour b, provider *p, test_error *e, double *took) {
    krabka_client_options o;
    krabka_client *client = NULL;
    krabka_topic_report *report = NULL;
    krabka_result r;
    double started;
    memset(p, 0, sizeof *p);
    p->behaviour = b;
    p->caller = pthread_self();
    KRABKA_CLIENT_OPTIONS_INIT(&o);
    o.connect_timeout = CONNECT_TIMEOUT;
    o.oauth_token = token_callback;
    o.oauth_user_data = p;
    o.oauth_user_data_free = free_provider;
    r = krabka_client_new(keys, values, 3, &o, &client, error_init(e));
    if (r != KRABKA_RESULT_OK) return r;
    CHECK(p->freed == 0, "not freed while the client lives");
    started = monotonic();
    r = krabka_client_check_state_topic(client, &report, error_init(e));
    *took = monotonic() - started;
    krabka_topic_report_free(report);
    krabka_client_free(client);
    CHECK(p->freed == 1, "oauth_user_data_free called once after krabka_client_free (%d)", p->freed);
    CHECK(p->on_caller_thread == 0, "the callback ran on the caller's thread");
    return r;
}

int main(void) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    krabka_client_options o;
    krabka_client *client = NULL;
    test_error e;
    provider p;
    double took = 0;
    krabka_result r;

    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    values[0] = bootstrap;

    /* OAUTHBEARER needs a callback. */
    CHECK_RESULT(krabka_client_new(keys, values, 3, NULL, &client, error_init(&e)), KRABKA_RESULT_INVALID_ARGUMENT,
                 &e.err);
    CHECK(strstr(e.buf, "token provider") != NULL, "names the token provider: %s", e.buf);
    CHECK(client == NULL, "no client");

    /* A failure the callback reports. */
    r = run(FAIL, &p, &e, &took);
    CHECK(r == KRABKA_RESULT_TRANSIENT, "a failure is TRANSIENT: %s (%s)", krabka_result_name(r), e.buf);
    CHECK(strstr(e.buf, "token provider") != NULL, "names the token provider: %s", e.buf);
    CHECK(strstr(e.buf, "the identity provider is unreachable") != NULL, "carries the message: %s", e.buf);
    CHECK(p.calls >= 1, "called (%d)", p.calls);
    CHECK(took < CONNECT_TIMEOUT, "failed at once, not at the connect timeout (%.1f s)", took);

    r = run(FAIL_FATAL, &p, &e, &took);
    CHECK(r == KRABKA_RESULT_FATAL, "a fatal failure is FATAL: %s (%s)", krabka_result_name(r), e.buf);
    CHECK(strstr(e.buf, "token provider") && strstr(e.buf, "the client credentials were revoked"),
          "names the provider and the message: %s", e.buf);
    CHECK(took < CONNECT_TIMEOUT, "failed at once (%.1f s)", took);

    /* A callback that settles nothing. */
    r = run(NOTHING, &p, &e, &took);
    CHECK(r == KRABKA_RESULT_INVALID_ARGUMENT, "unsettled: %s (%s)", krabka_result_name(r), e.buf);
    CHECK(strstr(e.buf, "returned without settling") != NULL, "says it was not settled: %s", e.buf);
    CHECK(took < CONNECT_TIMEOUT, "failed at once (%.1f s)", took);

    /* A second settlement is refused; the first counts. */
    r = run(TWICE, &p, &e, &took);
    CHECK(p.second == KRABKA_RESULT_INVALID_ARGUMENT, "a second settlement: %s", krabka_result_name(p.second));
    CHECK(strstr(p.second_message, "already settled") != NULL, "says so: %s", p.second_message);
    CHECK(r == KRABKA_RESULT_TRANSIENT && strstr(e.buf, "first"), "the first settlement counts: %s (%s)",
          krabka_result_name(r), e.buf);

    /* An expiry of 0 is refused at once (the request stays open); an
     * expired token is the core's to refuse. */
    r = run(ZERO_EXPIRY_THEN_EXPIRED, &p, &e, &took);
    CHECK(p.zero == KRABKA_RESULT_INVALID_ARGUMENT && strstr(p.second_message, "expires_at_ms"),
          "an expiry of 0: %s (%s)", krabka_result_name(p.zero), p.second_message);
    CHECK(r == KRABKA_RESULT_INVALID_ARGUMENT, "an expired token: %s (%s)", krabka_result_name(r), e.buf);
    CHECK(strstr(e.buf, "token provider") && strstr(e.buf, "expired"), "says it expired: %s", e.buf);

    /* A good token is taken and sent: the PLAINTEXT listener then fails the
     * SASL handshake. */
    r = run(GOOD, &p, &e, &took);
    CHECK(p.calls == 1, "called once (%d)", p.calls);
    CHECK(r == KRABKA_RESULT_FATAL, "the handshake fails: %s (%s)", krabka_result_name(r), e.buf);
    CHECK(strstr(e.buf, "SASL OAUTHBEARER authentication with a token from the token provider") != NULL,
          "past the token, at the broker: %s", e.buf);

    /* A failed krabka_client_new frees the user data before it returns. */
    memset(&p, 0, sizeof p);
    KRABKA_CLIENT_OPTIONS_INIT(&o);
    o.oauth_token = token_callback;
    o.oauth_user_data = &p;
    o.oauth_user_data_free = free_provider;
    o.partitions = 0;
    CHECK_RESULT(krabka_client_new(keys, values, 3, &o, &client, error_init(&e)), KRABKA_RESULT_INVALID_ARGUMENT,
                 &e.err);
    CHECK(p.freed == 1 && p.calls == 0, "freed once, never called (%d, %d)", p.freed, p.calls);

    /* The request functions refuse NULLs. */
    CHECK_RESULT(krabka_oauth_request_set_token(NULL, "t", now_ms() + 1000, NULL, error_init(&e)),
                 KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "request") != NULL, "names request: %s", e.buf);
    CHECK_RESULT(krabka_oauth_request_fail(NULL, "m", false, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT, &e.err);

    /* A first-version caller: its struct ends before the OAuth fields, and
     * what lies past it is not read (garbage here). */
    {
        union {
            krabka_client_options o;
            unsigned char bytes[sizeof(krabka_client_options)];
        } old;
        const char *plain_keys[1] = {"bootstrap.servers"};
        memset(old.bytes, 0x5a, sizeof old.bytes);
        CHECK_RESULT(krabka_client_options_init(&old.o, offsetof(krabka_client_options, oauth_token)),
                     KRABKA_RESULT_OK, &e.err);
        CHECK(old.o.struct_size == offsetof(krabka_client_options, oauth_token), "the old size");
        CHECK(old.bytes[sizeof old.bytes - 1] == 0x5a, "init writes nothing past the old size");
        CHECK_RESULT(krabka_client_new(plain_keys, &bootstrap, 1, &old.o, &client, error_init(&e)), KRABKA_RESULT_OK,
                     &e.err);
        krabka_client_free(client);
        client = NULL;
        /* With OAUTHBEARER, such a caller has no callback. */
        CHECK_RESULT(krabka_client_new(keys, values, 3, &old.o, &client, error_init(&e)),
                     KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
        CHECK(strstr(e.buf, "token provider") != NULL, "no callback was read: %s", e.buf);
        /* A size between the two versions' is refused, naming them. */
        old.o.struct_size = offsetof(krabka_client_options, oauth_token) + 4;
        CHECK_RESULT(krabka_client_new(plain_keys, &bootstrap, 1, &old.o, &client, error_init(&e)),
                     KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
        CHECK(strstr(e.buf, "between the sizes of two versions") != NULL, "between versions: %s", e.buf);
    }

    return check_summary("oauth");
}
