/*
 * Input offsets in the guarded transaction, on the real local Kafka: a
 * leader writes outputs with its consumer group's input offsets and
 * krabka_leadership_committed_offsets returns them (in the order asked,
 * with their metadata, a too-small metadata buffer refused with the size
 * needed); bad offsets are refused at the call naming the value, the term
 * going on; a deposed leader's write with offsets is KRABKA_RESULT_FENCED
 * and the group's committed offsets stay where they were for the next
 * leader, whose own write moves them; after a resign the write is
 * KRABKA_RESULT_RESIGNED.
 *
 * Environment: KRABKA_BOOTSTRAP (required: the test fails when Kafka is
 * unreachable), KRABKA_C_TOPIC (a topic for guarded writes),
 * KRABKA_C_INPUT_TOPIC (an input topic with 2 partitions), KRABKA_KAFKA_SH
 * (ci/kafka.sh, for its admin tool), KRABKA_C_SLOW (set under valgrind:
 * longer lease timings).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const char *topic, *input_topic;

/* A guarded write of one output `value` with the positions `at0` and
 * `at1` of the input's partitions 0 and 1 (metadata `meta0` on 0). */
static krabka_result write_at(krabka_leadership *l, const char *group, const char *value, int64_t at0,
                              const char *meta0, int64_t at1, krabka_error *err) {
    krabka_record rec;
    krabka_input_offset in[2];
    krabka_consumed_offsets co;
    krabka_record_init(&rec, topic);
    rec.value = (const uint8_t *)value;
    rec.value_len = strlen(value);
    krabka_input_offset_init(&in[0], input_topic, 0, at0);
    in[0].metadata = meta0;
    krabka_input_offset_init(&in[1], input_topic, 1, at1);
    KRABKA_CONSUMED_OFFSETS_INIT(&co);
    co.group = group;
    co.offsets = in;
    co.offset_count = 2;
    return krabka_leadership_write_with_offsets(l, &rec, 1, &co, err);
}

/* The group's committed offsets of input partitions 1 then 0 into
 * found[0] and found[1]. */
static krabka_result committed(krabka_leadership *l, const char *group, krabka_committed_offset found[2],
                               char *meta, size_t cap, size_t *meta_len, krabka_error *err) {
    krabka_topic_partition asked[2];
    asked[0].topic = input_topic;
    asked[0].partition = 1;
    asked[1].topic = input_topic;
    asked[1].partition = 0;
    return krabka_leadership_committed_offsets(l, group, asked, 2, found, meta, cap, meta_len, err);
}

/* Bad offsets and questions: refused at the call, naming the value. */
static void bad_arguments(krabka_leadership *l, const char *group, test_error *te) {
    krabka_error *err = &te->err;
    krabka_consumed_offsets co;
    krabka_input_offset in;
    krabka_topic_partition asked;
    krabka_committed_offset found;
    size_t need = 0;
    bool held = false;

    CHECK_RESULT(write_at(l, "", "x", 1, NULL, 1, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te->buf, "consumer group") != NULL && strstr(te->buf, "empty") != NULL, "%s", te->buf);
    CHECK_RESULT(write_at(l, group, "x", -1, NULL, 1, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te->buf, "offset -1") != NULL && strstr(te->buf, "negative") != NULL, "%s", te->buf);
    KRABKA_CONSUMED_OFFSETS_INIT(&co);
    co.group = group;
    krabka_input_offset_init(&in, input_topic, -2, 0);
    co.offsets = &in;
    co.offset_count = 1;
    CHECK_RESULT(krabka_leadership_write_with_offsets(l, NULL, 0, &co, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te->buf, "partition -2") != NULL, "%s", te->buf);
    in.topic = NULL;
    CHECK_RESULT(krabka_leadership_write_with_offsets(l, NULL, 0, &co, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK(strstr(te->buf, "offsets.offsets[0].topic must not be NULL") != NULL, "%s", te->buf);
    co.offsets = NULL;
    CHECK_RESULT(krabka_leadership_write_with_offsets(l, NULL, 0, &co, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    co.offset_count = 0;
    co.group = NULL;
    CHECK_RESULT(krabka_leadership_write_with_offsets(l, NULL, 0, &co, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK(strstr(te->buf, "offsets.group must not be NULL") != NULL, "%s", te->buf);
    co.group = group;
    co.struct_size = 0;
    CHECK_RESULT(krabka_leadership_write_with_offsets(l, NULL, 0, &co, err), KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te->buf, "krabka_consumed_offsets.struct_size") != NULL, "%s", te->buf);
    CHECK_RESULT(krabka_leadership_write_with_offsets(l, NULL, 0, NULL, err), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_consumed_offsets_init(NULL, sizeof co), KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_input_offset_init(NULL, input_topic, 0, 0), KRABKA_RESULT_NULL_ARGUMENT, err);

    asked.topic = input_topic;
    asked.partition = 0;
    CHECK_RESULT(krabka_leadership_committed_offsets(l, "", &asked, 1, &found, NULL, 0, &need, err),
                 KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te->buf, "consumer group") != NULL, "%s", te->buf);
    asked.partition = -1;
    CHECK_RESULT(krabka_leadership_committed_offsets(l, group, &asked, 1, &found, NULL, 0, &need, err),
                 KRABKA_RESULT_INVALID_ARGUMENT, err);
    CHECK(strstr(te->buf, "partition -1") != NULL, "%s", te->buf);
    asked.partition = 0;
    CHECK_RESULT(krabka_leadership_committed_offsets(l, NULL, &asked, 1, &found, NULL, 0, &need, err),
                 KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_committed_offsets(l, group, &asked, 1, NULL, NULL, 0, &need, err),
                 KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_committed_offsets(l, group, &asked, 1, &found, NULL, 0, NULL, err),
                 KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_committed_offsets(l, group, &asked, 1, &found, NULL, 8, &need, err),
                 KRABKA_RESULT_NULL_ARGUMENT, err);
    CHECK_RESULT(krabka_leadership_committed_offsets(l, group, NULL, 1, &found, NULL, 0, &need, err),
                 KRABKA_RESULT_NULL_ARGUMENT, err);

    /* Nothing was sent: the term goes on. */
    CHECK_RESULT(krabka_leadership_is_held(l, &held, err), KRABKA_RESULT_OK, err);
    CHECK(held, "bad arguments do not end the term");
}

/* Waits up to `secs` for the role's term to end, returning its reason. */
static krabka_result ended(krabka_leadership *l, double secs, krabka_error *err) {
    krabka_result reason = KRABKA_RESULT_OK;
    krabka_leadership_wait(l, secs, &reason, err);
    return reason;
}

int main(void) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *kafka_sh = getenv("KRABKA_KAFKA_SH");
    const char *keys[1] = {"bootstrap.servers"};
    char role[128], group[128], cmd[1024], meta[64];
    test_error te;
    krabka_error *err = error_init(&te);
    krabka_client *client = NULL, *next = NULL;
    krabka_leadership *a = NULL, *b = NULL;
    krabka_leadership_options fast;
    krabka_topic_options to;
    krabka_committed_offset found[2];
    bool created = false;
    size_t need = 0;

    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    REQUIRE(kafka_sh && *kafka_sh, "KRABKA_KAFKA_SH is not set (ci/kafka.sh)");
    topic = getenv("KRABKA_C_TOPIC");
    REQUIRE(topic && *topic, "KRABKA_C_TOPIC is not set");
    input_topic = getenv("KRABKA_C_INPUT_TOPIC");
    REQUIRE(input_topic && *input_topic, "KRABKA_C_INPUT_TOPIC is not set");
    snprintf(role, sizeof role, "c-offsets-%ld-%ld", (long)getpid(), (long)time(NULL));
    snprintf(group, sizeof group, "c-offsets-group-%ld-%ld", (long)getpid(), (long)time(NULL));

    CHECK_RESULT(krabka_client_new(keys, &bootstrap, 1, NULL, &client, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(krabka_client_new(keys, &bootstrap, 1, NULL, &next, err), KRABKA_RESULT_OK, err);
    REQUIRE(client && next, "no client");
    KRABKA_TOPIC_OPTIONS_INIT(&to);
    to.development = true;
    REQUIRE(krabka_client_ensure_state_topic(client, &to, &created, err) == KRABKA_RESULT_OK,
            "Kafka at %s is unreachable or refuses the state topic: %s", bootstrap, te.buf);
    KRABKA_LEADERSHIP_OPTIONS_INIT(&fast);
    fast.lease_duration = 3.0;
    fast.renew_interval = 1.0;
    fast.challenge_stagger = 0.0;
    if (getenv("KRABKA_C_SLOW")) {
        fast.lease_duration = 20.0;
        fast.renew_interval = 5.0;
    }
    CHECK_RESULT(krabka_client_acquire(client, role, "a", &fast, 60.0, NULL, NULL, NULL, &a, err),
                 KRABKA_RESULT_OK, err);
    REQUIRE(a != NULL, "not elected: %s", te.buf);

    /* A fresh group has committed nothing. */
    memset(found, 0x55, sizeof found);
    CHECK_RESULT(committed(a, group, found, NULL, 0, &need, err), KRABKA_RESULT_OK, err);
    CHECK(found[0].offset == KRABKA_NO_OFFSET && found[1].offset == KRABKA_NO_OFFSET && need == 0,
          "nothing committed yet: %lld, %lld", (long long)found[0].offset, (long long)found[1].offset);
    CHECK(found[0].metadata == NULL && found[1].metadata == NULL, "no metadata yet");

    /* The leader writes outputs with its input offsets: they commit. */
    CHECK_RESULT(write_at(a, group, "out-0", 1, "m-first", 0, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(write_at(a, group, "out-1", 3, "m0", 7, err), KRABKA_RESULT_OK, err);
    memset(found, 0x55, sizeof found);
    memset(meta, 'x', sizeof meta);
    CHECK_RESULT(committed(a, group, found, meta, 2, &need, err), KRABKA_RESULT_BUFFER_TOO_SMALL, err);
    /* "m0" and its NUL, and an empty text's NUL where Kafka answers an
     * offset committed without metadata with "". */
    CHECK(need == 3 || need == 4, "the metadata needs 3 or 4 bytes, got %zu", need);
    CHECK(meta[0] == 'x' && found[0].partition == 0x55555555, "nothing written when the buffer is too small");
    CHECK_RESULT(committed(a, group, found, meta, sizeof meta, &need, err), KRABKA_RESULT_OK, err);
    CHECK(found[0].topic == input_topic && found[0].partition == 1 && found[0].offset == 7 &&
              found[0].metadata_len == 0 && (found[0].metadata == NULL || found[0].metadata[0] == '\0'),
          "partition 1 at 7 without metadata: %d at %lld", found[0].partition, (long long)found[0].offset);
    CHECK(found[1].topic == input_topic && found[1].partition == 0 && found[1].offset == 3 &&
              found[1].metadata != NULL && found[1].metadata_len == 2 && strcmp(found[1].metadata, "m0") == 0,
          "partition 0 at 3 with its metadata: %d at %lld", found[1].partition, (long long)found[1].offset);
    CHECK(need == 3 + (found[0].metadata ? 1u : 0u) && (found[0].metadata == NULL || found[0].metadata == meta) &&
              found[1].metadata == meta + (found[0].metadata ? 1 : 0),
          "the texts lie NUL-terminated in the caller's buffer, in order (%zu bytes)", need);
    /* Offsets alone (no records). */
    {
        krabka_input_offset in;
        krabka_consumed_offsets co;
        krabka_input_offset_init(&in, input_topic, 1, 8);
        KRABKA_CONSUMED_OFFSETS_INIT(&co);
        co.group = group;
        co.offsets = &in;
        co.offset_count = 1;
        CHECK_RESULT(krabka_leadership_write_with_offsets(a, NULL, 0, &co, err), KRABKA_RESULT_OK, err);
        CHECK_RESULT(committed(a, group, found, meta, sizeof meta, &need, err), KRABKA_RESULT_OK, err);
        CHECK(found[0].offset == 8 && found[1].offset == 3, "offsets alone commit: %lld, %lld",
              (long long)found[0].offset, (long long)found[1].offset);
    }

    bad_arguments(a, group, &te);

    /* Another party mints a newer epoch of the role (Kafka's own admin
     * tool, as an operator would fence a holder): a is deposed. */
    snprintf(cmd, sizeof cmd,
             "'%s' tool transactions --bootstrap-server '%s' forceTerminateTransaction --transactionalId '%s' "
             ">/dev/null 2>&1",
             kafka_sh, bootstrap, role);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    CHECK_RESULT(write_at(a, group, "out-deposed", 9, "late", 9, err), KRABKA_RESULT_FENCED, err);
    CHECK(ended(a, 30.0, err) == KRABKA_RESULT_FENCED, "a's term ended fenced");

    /* The next leader resumes where a's last committed write left the
     * group: the deposed write moved nothing. */
    CHECK_RESULT(krabka_client_acquire(next, role, "b", &fast, 90.0, NULL, NULL, NULL, &b, err), KRABKA_RESULT_OK,
                 err);
    REQUIRE(b != NULL, "b not elected: %s", te.buf);
    memset(found, 0x55, sizeof found);
    CHECK_RESULT(committed(b, group, found, meta, sizeof meta, &need, err), KRABKA_RESULT_OK, err);
    CHECK(found[0].offset == 8 && found[1].offset == 3 && found[1].metadata && strcmp(found[1].metadata, "m0") == 0,
          "the deposed write moved nothing: %lld, %lld", (long long)found[0].offset, (long long)found[1].offset);
    CHECK_RESULT(write_at(b, group, "out-2", 4, NULL, 9, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(committed(b, group, found, meta, sizeof meta, &need, err), KRABKA_RESULT_OK, err);
    CHECK(found[0].offset == 9 && found[1].offset == 4 && found[1].metadata_len == 0,
          "the next leader's write moves them: %lld, %lld", (long long)found[0].offset, (long long)found[1].offset);

    /* After a resign: refused as a plain write is. */
    CHECK_RESULT(krabka_leadership_resign(b, err), KRABKA_RESULT_OK, err);
    CHECK_RESULT(write_at(b, group, "out-3", 5, NULL, 10, err), KRABKA_RESULT_RESIGNED, err);

    krabka_leadership_free(b);
    krabka_leadership_free(a);
    krabka_client_free(next);
    krabka_client_free(client);
    CHECK(krabka_wait_idle(30) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    return check_summary("offsets");
}
