/*
 * The size rule of the option structs (krabka_client_options,
 * krabka_leadership_options, krabka_topic_options): the init macros give
 * the documented defaults and struct_size; a struct_size of 0, one below
 * the first version's size, one between two versions' sizes, and a larger
 * one with non-zero trailing bytes are refused naming the struct (and, for
 * the small ones, the sizes); a larger one with zero trailing bytes (a newer
 * caller that leaves its new fields unset) is accepted, and its fields are
 * read. Every function that
 * takes one is checked: krabka_client_new, krabka_client_acquire,
 * krabka_client_lead and krabka_client_ensure_state_topic.
 *
 * The refusals need no cluster (they come before any I/O); the accepted
 * acquire and state topic run on KRABKA_BOOTSTRAP (the one-node cluster).
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* A newer caller's structs: this header's, then fields of a later version. */
typedef struct {
    krabka_client_options o;
    uint64_t newer[3];
} newer_client_options;
typedef struct {
    krabka_leadership_options o;
    uint64_t newer[3];
} newer_leadership_options;
typedef struct {
    krabka_topic_options o;
    uint64_t newer[3];
} newer_topic_options;

static test_error te;

static const char *dead_keys[1] = {"bootstrap.servers"};
static const char *dead_values[1] = {"127.0.0.1:1"};

static uint32_t never_called(const krabka_leadership *l, const krabka_term_signal *ended, void *user_data) {
    (void)l;
    (void)ended;
    (void)user_data;
    return 0;
}

/* `what` was refused with INVALID_ARGUMENT and a message holding each of
 * the NULL-terminated words. */
static void refused(krabka_result got, const char *what, const char *const *words) {
    CHECK(got == KRABKA_RESULT_INVALID_ARGUMENT, "%s: %s (%s), wanted INVALID_ARGUMENT", what, krabka_result_name(got),
          te.buf);
    for (; *words; words++) CHECK(strstr(te.buf, *words) != NULL, "%s: '%s' is not in: %s", what, *words, te.buf);
}

static void defaults(void) {
    krabka_client_options co;
    krabka_leadership_options lo;
    krabka_topic_options to;
    newer_client_options big;

    memset(&co, 0x5a, sizeof co);
    CHECK(KRABKA_CLIENT_OPTIONS_INIT(&co) == KRABKA_RESULT_OK, "client init");
    CHECK(co.struct_size == sizeof co, "client struct_size %zu, sizeof %zu", co.struct_size, sizeof co);
    CHECK(co.partitions == 16 && co.state_topic == NULL && co.connect_timeout == 10.0 && co.operation_timeout == 30.0,
          "client defaults: %d %p %g %g", co.partitions, (const void *)co.state_topic, co.connect_timeout,
          co.operation_timeout);

    memset(&lo, 0x5a, sizeof lo);
    CHECK(KRABKA_LEADERSHIP_OPTIONS_INIT(&lo) == KRABKA_RESULT_OK, "leadership init");
    CHECK(lo.struct_size == sizeof lo, "leadership struct_size %zu", lo.struct_size);
    CHECK(lo.lease_duration == 30.0 && lo.renew_interval == 10.0 && lo.challenge_stagger == 5.0,
          "leadership defaults: %g %g %g", lo.lease_duration, lo.renew_interval, lo.challenge_stagger);

    memset(&to, 0x5a, sizeof to);
    CHECK(KRABKA_TOPIC_OPTIONS_INIT(&to) == KRABKA_RESULT_OK, "topic init");
    CHECK(to.struct_size == sizeof to, "topic struct_size %zu", to.struct_size);
    CHECK(!to.development && to.replication_factor == 0 && to.min_insync_replicas == 0, "topic defaults: %d %d %d",
          (int)to.development, to.replication_factor, to.min_insync_replicas);

    /* The _default functions set the size too. */
    memset(&co, 0, sizeof co);
    /* (krabka_client_options is at version 2: _default writes version 1.) */
    CHECK(krabka_client_options_default(&co) == KRABKA_RESULT_OK &&
              co.struct_size == offsetof(krabka_client_options, oauth_token) && co.partitions == 16,
          "client _default: struct_size %zu", co.struct_size);
    memset(&lo, 0, sizeof lo);
    CHECK(krabka_leadership_options_default(&lo) == KRABKA_RESULT_OK && lo.struct_size == sizeof lo &&
              lo.lease_duration == 30.0,
          "leadership _default: struct_size %zu", lo.struct_size);

    /* A newer caller's init: the defaults, zeroes past what the library
     * knows, struct_size the caller's. */
    memset(&big, 0x5a, sizeof big);
    CHECK(KRABKA_CLIENT_OPTIONS_INIT(&big.o) == KRABKA_RESULT_OK, "init of the inner struct");
    CHECK(big.newer[0] == 0x5a5a5a5a5a5a5a5aULL, "init of sizeof *o writes nothing past it");
    CHECK(krabka_client_options_init(&big.o, sizeof big) == KRABKA_RESULT_OK, "init of a newer size");
    CHECK(big.o.struct_size == sizeof big && big.o.partitions == 16, "newer size: struct_size %zu", big.o.struct_size);
    CHECK(big.newer[0] == 0 && big.newer[1] == 0 && big.newer[2] == 0, "the bytes past the library's are zeroed");

    /* An init with a size no version has writes nothing. */
    memset(&co, 0x5a, sizeof co);
    CHECK(krabka_client_options_init(&co, 0) == KRABKA_RESULT_INVALID_ARGUMENT, "init of size 0");
    CHECK(krabka_client_options_init(&co, sizeof co - 1) == KRABKA_RESULT_INVALID_ARGUMENT, "init of a short size");
    CHECK(co.partitions == 0x5a5a5a5a, "a refused init writes nothing");
    CHECK(krabka_client_options_init(NULL, sizeof co) == KRABKA_RESULT_NULL_ARGUMENT, "init of NULL");
    CHECK(krabka_leadership_options_init(NULL, sizeof lo) == KRABKA_RESULT_NULL_ARGUMENT, "init of NULL");
    CHECK(krabka_topic_options_init(NULL, sizeof to) == KRABKA_RESULT_NULL_ARGUMENT, "init of NULL");
    CHECK(krabka_leadership_options_init(&lo, 1) == KRABKA_RESULT_INVALID_ARGUMENT, "leadership init of size 1");
    CHECK(krabka_topic_options_init(&to, 1) == KRABKA_RESULT_INVALID_ARGUMENT, "topic init of size 1");
}

/* The client options at krabka_client_new. */
static void client_options(void) {
    newer_client_options big;
    krabka_client *client = NULL;
    char small[32], size0[32], versions[64];
    const char *w_zero[] = {"krabka_client_options.struct_size", small, "got 0", NULL};
    const char *w_small[] = {"krabka_client_options.struct_size", small, size0, NULL};
    const char *w_between[] = {"krabka_client_options.struct_size", "between the sizes of two versions", versions, NULL};
    const char *w_tail[] = {"krabka_client_options", "not zero", NULL};
    const char *w_partitions[] = {"partitions", NULL};

    /* The first version ended before the OAuth fields. */
    snprintf(small, sizeof small, "from %zu", offsetof(krabka_client_options, oauth_token));
    snprintf(size0, sizeof size0, "got %zu", offsetof(krabka_client_options, oauth_token) - 1);
    snprintf(versions, sizeof versions, "(%zu, %zu)", offsetof(krabka_client_options, oauth_token),
             sizeof(krabka_client_options));

    KRABKA_CLIENT_OPTIONS_INIT(&big.o);
    big.o.struct_size = 0;
    refused(krabka_client_new(dead_keys, dead_values, 1, &big.o, &client, error_init(&te)), "client size 0", w_zero);
    CHECK(client == NULL, "no client");
    big.o.struct_size = offsetof(krabka_client_options, oauth_token) - 1;
    refused(krabka_client_new(dead_keys, dead_values, 1, &big.o, &client, error_init(&te)), "client size short",
            w_small);
    big.o.struct_size = sizeof big.o - 1;
    refused(krabka_client_new(dead_keys, dead_values, 1, &big.o, &client, error_init(&te)), "client size between",
            w_between);

    krabka_client_options_init(&big.o, sizeof big);
    big.newer[1] = 1;
    refused(krabka_client_new(dead_keys, dead_values, 1, &big.o, &client, error_init(&te)), "client tail", w_tail);
    CHECK(client == NULL, "no client");

    /* Zero trailing bytes: accepted, and the fields are read (a bad one is
     * refused by name, a good one makes a client). */
    big.newer[1] = 0;
    big.o.partitions = 0;
    refused(krabka_client_new(dead_keys, dead_values, 1, &big.o, &client, error_init(&te)), "client newer, bad field",
            w_partitions);
    big.o.partitions = 4;
    CHECK_RESULT(krabka_client_new(dead_keys, dead_values, 1, &big.o, &client, error_init(&te)), KRABKA_RESULT_OK,
                 &te.err);
    CHECK(client != NULL, "a client from a newer caller's options");
    krabka_client_free(client);
}

/* The leadership and topic options at acquire, lead and
 * ensure_state_topic: refusals before any I/O (a client on a dead port). */
static void refusals_before_io(void) {
    newer_leadership_options bl;
    newer_topic_options bt;
    krabka_client *client = NULL;
    krabka_leadership *l = NULL;
    bool created = false;
    char lsmall[32], tsmall[32];
    const char *w_l0[] = {"krabka_leadership_options.struct_size", lsmall, "got 0", NULL};
    const char *w_lshort[] = {"krabka_leadership_options.struct_size", lsmall, "got 8", NULL};
    const char *w_ltail[] = {"krabka_leadership_options", "not zero", NULL};
    const char *w_t0[] = {"krabka_topic_options.struct_size", tsmall, "got 0", NULL};
    const char *w_tshort[] = {"krabka_topic_options.struct_size", tsmall, "got 8", NULL};
    const char *w_ttail[] = {"krabka_topic_options", "not zero", NULL};
    const char *w_lease[] = {"lease_duration", NULL};
    time_t t0;

    snprintf(lsmall, sizeof lsmall, "from %zu", sizeof(krabka_leadership_options));
    snprintf(tsmall, sizeof tsmall, "from %zu", sizeof(krabka_topic_options));
    REQUIRE(krabka_client_new(dead_keys, dead_values, 1, NULL, &client, error_init(&te)) == KRABKA_RESULT_OK,
            "client: %s", te.buf);
    t0 = time(NULL);

    KRABKA_LEADERSHIP_OPTIONS_INIT(&bl.o);
    bl.o.struct_size = 0;
    refused(krabka_client_acquire(client, "r", "m", &bl.o, 0, NULL, NULL, NULL, &l, error_init(&te)), "acquire size 0",
            w_l0);
    refused(krabka_client_lead(client, "r", "m", &bl.o, NULL, never_called, NULL, error_init(&te)), "lead size 0",
            w_l0);
    bl.o.struct_size = 8;
    refused(krabka_client_acquire(client, "r", "m", &bl.o, 0, NULL, NULL, NULL, &l, error_init(&te)),
            "acquire size short", w_lshort);
    refused(krabka_client_lead(client, "r", "m", &bl.o, NULL, never_called, NULL, error_init(&te)), "lead size short",
            w_lshort);
    krabka_leadership_options_init(&bl.o, sizeof bl);
    bl.newer[2] = 0xff;
    refused(krabka_client_acquire(client, "r", "m", &bl.o, 0, NULL, NULL, NULL, &l, error_init(&te)), "acquire tail",
            w_ltail);
    refused(krabka_client_lead(client, "r", "m", &bl.o, NULL, never_called, NULL, error_init(&te)), "lead tail",
            w_ltail);
    CHECK(l == NULL, "no leadership");
    /* Zero trailing bytes: read, so a bad timing is refused by its name. */
    bl.newer[2] = 0;
    bl.o.lease_duration = -1;
    refused(krabka_client_acquire(client, "r", "m", &bl.o, 0, NULL, NULL, NULL, &l, error_init(&te)),
            "acquire newer, bad field", w_lease);
    refused(krabka_client_lead(client, "r", "m", &bl.o, NULL, never_called, NULL, error_init(&te)),
            "lead newer, bad field", w_lease);

    KRABKA_TOPIC_OPTIONS_INIT(&bt.o);
    bt.o.struct_size = 0;
    refused(krabka_client_ensure_state_topic(client, &bt.o, &created, error_init(&te)), "topic size 0", w_t0);
    bt.o.struct_size = 8;
    refused(krabka_client_ensure_state_topic(client, &bt.o, &created, error_init(&te)), "topic size short", w_tshort);
    krabka_topic_options_init(&bt.o, sizeof bt);
    bt.newer[0] = 1;
    refused(krabka_client_ensure_state_topic(client, &bt.o, &created, error_init(&te)), "topic tail", w_ttail);

    CHECK(time(NULL) - t0 <= 2, "the refusals come before any I/O (%ld s)", (long)(time(NULL) - t0));
    krabka_client_free(client);
}

/* A newer caller's leadership and topic options, trailing bytes zero, on
 * the real cluster: accepted, and their fields used. */
static void accepted_on_kafka(const char *bootstrap) {
    newer_leadership_options bl;
    newer_topic_options bt;
    const char *keys[1] = {"bootstrap.servers"};
    krabka_client *client = NULL;
    krabka_leadership *l = NULL;
    krabka_fencing_token token;
    bool created = false;
    char role[64];

    snprintf(role, sizeof role, "c-options-%ld-%ld", (long)getpid(), (long)time(NULL));
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &client, error_init(&te)) == KRABKA_RESULT_OK, "client: %s",
            te.buf);
    krabka_topic_options_init(&bt.o, sizeof bt);
    bt.o.development = true;
    CHECK_RESULT(krabka_client_ensure_state_topic(client, &bt.o, &created, error_init(&te)), KRABKA_RESULT_OK,
                 &te.err);

    krabka_leadership_options_init(&bl.o, sizeof bl);
    bl.o.lease_duration = getenv("KRABKA_C_SLOW") ? 20.0 : 3.0;
    bl.o.renew_interval = getenv("KRABKA_C_SLOW") ? 5.0 : 1.0;
    bl.o.challenge_stagger = 0;
    CHECK_RESULT(krabka_client_acquire(client, role, "m", &bl.o, 60, NULL, NULL, NULL, &l, error_init(&te)),
                 KRABKA_RESULT_OK, &te.err);
    if (l) {
        CHECK(krabka_leadership_token(l, &token, NULL) == KRABKA_RESULT_OK && token.producer_id >= 0, "a token");
        CHECK_RESULT(krabka_leadership_resign(l, error_init(&te)), KRABKA_RESULT_OK, &te.err);
        krabka_leadership_free(l);
    }
    krabka_client_free(client);
}

int main(void) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    defaults();
    client_options();
    refusals_before_io();
    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    accepted_on_kafka(bootstrap);
    krabka_wait_idle(30);
    return check_summary("options");
}
