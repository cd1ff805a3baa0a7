/*
 * krabka_client_check_state_topic on the real local Kafka (one node): the
 * shared state topic exists (made here with the development shape if it
 * does not), so the check passes and reports its shape (the client's 16
 * partitions, replication factor 1, compacted, min.insync.replicas 1 and
 * the warning about it); a client configured with another partition count
 * is refused with FATAL naming both counts; a state topic that does not
 * exist is refused with FATAL naming the C call that creates it (not the
 * Rust one); the report's getters refuse NULLs and an index out of range.
 *
 * Environment: KRABKA_BOOTSTRAP (required: the test fails when Kafka is
 * unreachable).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

int main(void) {
    const char *bootstrap = getenv("KRABKA_BOOTSTRAP");
    const char *keys[1] = {"bootstrap.servers"};
    krabka_client *client = NULL, *four = NULL, *missing = NULL;
    char missing_topic[96];
    krabka_client_options o;
    krabka_topic_options dev;
    krabka_topic_report *report = (krabka_topic_report *)&o, *none = (krabka_topic_report *)&o;
    krabka_topic_report_fields f;
    const char *w = NULL;
    test_error e;
    bool created = false;

    REQUIRE(bootstrap && *bootstrap, "KRABKA_BOOTSTRAP is not set: this test needs the local Kafka (ci/kafka.sh start 1)");
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, NULL, &client, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    KRABKA_TOPIC_OPTIONS_INIT(&dev);
    dev.development = true;
    REQUIRE(krabka_client_ensure_state_topic(client, &dev, &created, error_init(&e)) == KRABKA_RESULT_OK,
            "Kafka at %s is unreachable or refuses the state topic: %s", bootstrap, e.buf);

    /* The shared topic: the check passes and reports its shape. */
    CHECK_RESULT(krabka_client_check_state_topic(client, &report, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    REQUIRE(report != NULL && report != (krabka_topic_report *)&o, "a report");
    memset(&f, 0, sizeof f);
    CHECK_RESULT(krabka_topic_report_get_fields(report, &f), KRABKA_RESULT_OK, &e.err);
    CHECK(f.topic && strcmp(f.topic, "__coordination_state") == 0, "the topic: %s", f.topic ? f.topic : "(null)");
    CHECK(f.partitions == 16, "16 partitions (%d)", f.partitions);
    CHECK(f.replication_factor == 1, "replication factor 1 (%d)", f.replication_factor);
    CHECK(f.cleanup_policy && strcmp(f.cleanup_policy, "compact") == 0, "compacted: %s",
          f.cleanup_policy ? f.cleanup_policy : "(null)");
    CHECK(f.has_min_insync_replicas && f.min_insync_replicas == 1, "min.insync.replicas 1 (%d, %d)",
          f.has_min_insync_replicas, f.min_insync_replicas);
    CHECK(f.warning_count == 1, "one warning (%zu)", f.warning_count);
    CHECK_RESULT(krabka_topic_report_warning(report, 0, &w, error_init(&e)), KRABKA_RESULT_OK, &e.err);
    CHECK(w && strstr(w, "min.insync.replicas=1") && strstr(w, "__coordination_state"), "the warning: %s",
          w ? w : "(null)");
    CHECK_RESULT(krabka_topic_report_warning(report, 1, &w, error_init(&e)), KRABKA_RESULT_INVALID_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "(1)") != NULL, "names the count: %s", e.buf);
    CHECK_RESULT(krabka_topic_report_warning(report, 0, NULL, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK_RESULT(krabka_topic_report_warning(NULL, 0, &w, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(krabka_topic_report_get_fields(NULL, &f) == KRABKA_RESULT_NULL_ARGUMENT, "fields of NULL");
    CHECK(krabka_topic_report_get_fields(report, NULL) == KRABKA_RESULT_NULL_ARGUMENT, "fields into NULL");
    krabka_topic_report_free(report);
    krabka_topic_report_free(NULL);

    /* Another partition count: refused, both counts named, *out NULL. */
    KRABKA_CLIENT_OPTIONS_INIT(&o);
    o.partitions = 4;
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, &o, &four, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    none = (krabka_topic_report *)&o;
    CHECK_RESULT(krabka_client_check_state_topic(four, &none, error_init(&e)), KRABKA_RESULT_FATAL, &e.err);
    CHECK(none == NULL, "no report on failure");
    CHECK(strstr(e.buf, "16 partitions") && strstr(e.buf, "configured with 4") && strstr(e.buf, "__coordination_state"),
          "the message names the topic and both counts: %s", e.buf);

    /* A state topic that does not exist: FATAL, naming this library's call. */
    snprintf(missing_topic, sizeof missing_topic, "krabka-c-missing-%ld-%d", (long)time(NULL), (int)getpid());
    KRABKA_CLIENT_OPTIONS_INIT(&o);
    o.partitions = 2;
    o.state_topic = missing_topic;
    REQUIRE(krabka_client_new(keys, &bootstrap, 1, &o, &missing, error_init(&e)) == KRABKA_RESULT_OK, "client: %s",
            e.buf);
    none = (krabka_topic_report *)&o;
    CHECK_RESULT(krabka_client_check_state_topic(missing, &none, error_init(&e)), KRABKA_RESULT_FATAL, &e.err);
    CHECK(none == NULL, "no report on failure");
    CHECK(strstr(e.buf, missing_topic) && strstr(e.buf, "does not exist"), "names the topic: %s", e.buf);
    CHECK(strstr(e.buf, "with krabka_client_ensure_state_topic() (krabka_client_ensure_state_topic() with "
                        "options.development = true on a single broker)") != NULL,
          "names the C call that creates it: %s", e.buf);
    CHECK(strstr(e.buf, "::") == NULL && strstr(e.buf, "TopicSpec") == NULL, "no Rust in the message: %s", e.buf);

    /* NULL arguments. */
    CHECK_RESULT(krabka_client_check_state_topic(NULL, &none, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "client") != NULL, "names client: %s", e.buf);
    CHECK_RESULT(krabka_client_check_state_topic(client, NULL, error_init(&e)), KRABKA_RESULT_NULL_ARGUMENT, &e.err);
    CHECK(strstr(e.buf, "out") != NULL, "names out: %s", e.buf);

    krabka_client_free(missing);
    krabka_client_free(four);
    krabka_client_free(client);
    CHECK(krabka_wait_idle(30) == KRABKA_RESULT_OK, "the library is idle after every handle was freed");
    return check_summary("topic");
}
