/*
 * NULL and bad-length arguments for every function of the header, the error
 * record's conventions, the output buffers, and the codes' names. Needs no
 * Kafka: the client made here points at a port where nothing listens, and
 * its acquire must fail within the connect timeout naming the address.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

static test_error te;
static krabka_error *err;

#define EXPECT(call, want) CHECK_RESULT(call, want, err)
#define EXPECT_NULL(call, name)                                                                  \
    do {                                                                                         \
        EXPECT(call, KRABKA_RESULT_NULL_ARGUMENT);                                               \
        CHECK(strstr(te.buf, name " must not be NULL") != NULL, "%s: message '%s' does not name " \
              name, #call, te.buf);                                                              \
    } while (0)

static const size_t HUGE_LEN = SIZE_MAX;

static void error_record(void) {
    krabka_error small;
    char buf[8];
    krabka_key *key = NULL;
    uint8_t junk[1] = {0};
    /* No record at all. */
    CHECK(krabka_decode_key(junk, 1, &key, NULL) == KRABKA_RESULT_FORMAT, "decode without err");
    /* A record with no buffer: length and part only. */
    memset(&small, 0, sizeof small);
    CHECK(krabka_decode_key(junk, 1, &key, &small) == KRABKA_RESULT_FORMAT, "decode, no buffer");
    CHECK(small.length > 8 && small.part == KRABKA_PART_KEY, "length %zu part %u", small.length, small.part);
    /* A small buffer: cut, NUL-terminated, whole length reported. */
    small.message = buf;
    small.capacity = sizeof buf;
    memset(buf, 'x', sizeof buf);
    CHECK(krabka_decode_key(junk, 1, &key, &small) == KRABKA_RESULT_FORMAT, "decode, small buffer");
    CHECK(buf[7] == '\0' && strlen(buf) == 7 && small.length > 7, "cut message '%s' length %zu", buf, small.length);
    /* Success clears the record. */
    {
        krabka_fencing_token a = {1, 1};
        int32_t order = 9;
        CHECK(krabka_fencing_token_compare(&a, &a, &order) == KRABKA_RESULT_OK && order == 0, "compare");
    }
    {
        int32_t hash = 0;
        CHECK(krabka_murmur2(junk, 1, &hash, &small) == KRABKA_RESULT_OK, "murmur2");
        CHECK(small.length == 0 && small.part == KRABKA_PART_NONE && buf[0] == '\0', "cleared on success");
    }
}

static void names(void) {
    CHECK(strcmp(krabka_result_name(KRABKA_RESULT_OK), "OK") == 0, "OK");
    CHECK(strcmp(krabka_result_name(KRABKA_RESULT_FENCED), "FENCED") == 0, "FENCED");
    CHECK(strcmp(krabka_result_name(KRABKA_RESULT_NULL_ARGUMENT), "NULL_ARGUMENT") == 0, "NULL_ARGUMENT");
    CHECK(strcmp(krabka_result_name(999), "UNKNOWN") == 0, "unknown code");
    CHECK(strcmp(krabka_part_name(KRABKA_PART_LEASE_VALUE), "lease value") == 0, "part name");
    CHECK(strcmp(krabka_part_name(KRABKA_PART_NONE), "") == 0, "no part");
    CHECK(strcmp(krabka_part_name(77), "UNKNOWN") == 0, "unknown part");
    CHECK(strlen(krabka_version()) > 0, "version");
    /* The core's kinds keep the core's values (the ABI promises them). */
    CHECK(KRABKA_RESULT_FORMAT == 1 && KRABKA_RESULT_ENCODE == 2 && KRABKA_RESULT_INVALID_ARGUMENT == 3 &&
              KRABKA_RESULT_FENCED == 4 && KRABKA_RESULT_TRANSIENT == 5 && KRABKA_RESULT_FATAL == 6 &&
              KRABKA_RESULT_RESIGNED == 7 && KRABKA_RESULT_CANCELLED == 8 && KRABKA_RESULT_LEASE_EXPIRED == 9 &&
              KRABKA_RESULT_OUTCOME_UNKNOWN == 10 && KRABKA_RESULT_NULL_ARGUMENT == 100,
          "result values");
}

static void keys(void) {
    uint8_t buf[64];
    size_t len = 0;
    krabka_key *key = NULL;
    krabka_key_fields f = {KRABKA_KEY_KIND_REGISTRATION, "role", 4, "m", 1}, got;
    EXPECT(krabka_encode_key(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_OK);
    EXPECT_NULL(krabka_encode_key(NULL, buf, sizeof buf, &len, err), "key");
    EXPECT_NULL(krabka_encode_key(&f, NULL, sizeof buf, &len, err), "out");
    EXPECT_NULL(krabka_encode_key(&f, buf, sizeof buf, NULL, err), "out_len");
    EXPECT(krabka_encode_key(&f, buf, HUGE_LEN, &len, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "out_capacity must be at most") != NULL, "%s", te.buf);
    /* A buffer too small: the length needed, nothing written. */
    memset(buf, 0xAB, sizeof buf);
    EXPECT(krabka_encode_key(&f, buf, 3, &len, err), KRABKA_RESULT_BUFFER_TOO_SMALL);
    CHECK(len == 4 + 2 + 4 + 2 + 1 && buf[0] == 0xAB, "needed %zu", len);
    /* Strings: NULL with a length, a length no object has, bad UTF-8. */
    f.role = NULL;
    EXPECT_NULL(krabka_encode_key(&f, buf, sizeof buf, &len, err), "key.role");
    f.role = "role";
    f.role_len = HUGE_LEN;
    EXPECT(krabka_encode_key(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "key.role_len must be at most") != NULL, "%s", te.buf);
    f.role = "\xff\xfe";
    f.role_len = 2;
    EXPECT(krabka_encode_key(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "key.role must be valid UTF-8") != NULL, "%s", te.buf);
    f.member = NULL;
    f.member_len = 1;
    f.role = "role";
    f.role_len = 4;
    EXPECT_NULL(krabka_encode_key(&f, buf, sizeof buf, &len, err), "key.member");
    /* NULL with length 0 is the empty string: the core refuses it, part key. */
    f.member_len = 0;
    EXPECT(krabka_encode_key(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_ENCODE);
    CHECK(te.err.part == KRABKA_PART_KEY && strstr(te.buf, "member") != NULL, "%s", te.buf);
    f.kind = 7;
    EXPECT(krabka_encode_key(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "kind must be 0") != NULL, "%s", te.buf);
    /* A lease key with a member: the core refuses it. */
    f.kind = KRABKA_KEY_KIND_LEASE;
    f.member = "m";
    f.member_len = 1;
    EXPECT(krabka_encode_key(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_ENCODE);

    f.kind = KRABKA_KEY_KIND_REGISTRATION;
    EXPECT(krabka_encode_key(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_OK);
    EXPECT_NULL(krabka_decode_key(NULL, len, &key, err), "data");
    EXPECT_NULL(krabka_decode_key(buf, len, NULL, err), "out");
    key = (krabka_key *)&f;
    EXPECT(krabka_decode_key(buf, HUGE_LEN, &key, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(key == NULL, "out not cleared on failure");
    CHECK(strstr(te.buf, "data_len must be at most") != NULL, "%s", te.buf);
    EXPECT(krabka_decode_key(buf, len - 1, &key, err), KRABKA_RESULT_FORMAT);
    CHECK(te.err.part == KRABKA_PART_KEY, "part %u", te.err.part);
    EXPECT(krabka_decode_key(buf, len, &key, err), KRABKA_RESULT_OK);
    EXPECT(krabka_key_get_fields(NULL, &got), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_key_get_fields(key, NULL), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_key_get_fields(key, &got), KRABKA_RESULT_OK);
    CHECK(got.role_len == 4 && memcmp(got.role, "role", 4) == 0 && got.kind == KRABKA_KEY_KIND_REGISTRATION, "fields");
    krabka_key_free(key);
    krabka_key_free(NULL);
}

static void registrations(void) {
    uint8_t buf[64];
    size_t len = 0;
    krabka_registration *reg = NULL;
    krabka_registration_fields f = {"m", 1, 1700000000000LL}, got;
    EXPECT_NULL(krabka_encode_registration(NULL, buf, sizeof buf, &len, err), "registration");
    EXPECT_NULL(krabka_encode_registration(&f, NULL, sizeof buf, &len, err), "out");
    EXPECT_NULL(krabka_encode_registration(&f, buf, sizeof buf, NULL, err), "out_len");
    EXPECT(krabka_encode_registration(&f, buf, HUGE_LEN, &len, err), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_encode_registration(&f, buf, 2, &len, err), KRABKA_RESULT_BUFFER_TOO_SMALL);
    CHECK(len == 2 + 2 + 1 + 8, "needed %zu", len);
    f.member = NULL;
    EXPECT_NULL(krabka_encode_registration(&f, buf, sizeof buf, &len, err), "registration.member");
    f.member = "m";
    f.member_len = HUGE_LEN;
    EXPECT(krabka_encode_registration(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_INVALID_ARGUMENT);
    f.member_len = 0;
    EXPECT(krabka_encode_registration(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_ENCODE);
    CHECK(te.err.part == KRABKA_PART_REGISTRATION_VALUE, "part %u", te.err.part);
    f.member_len = 1;
    EXPECT(krabka_encode_registration(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_OK);
    EXPECT_NULL(krabka_decode_registration(NULL, len, &reg, err), "data");
    EXPECT_NULL(krabka_decode_registration(buf, len, NULL, err), "out");
    EXPECT(krabka_decode_registration(buf, HUGE_LEN, &reg, err), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_decode_registration(buf, len + 1, &reg, err), KRABKA_RESULT_FORMAT);
    CHECK(te.err.part == KRABKA_PART_REGISTRATION_VALUE && reg == NULL, "part %u", te.err.part);
    EXPECT(krabka_decode_registration(buf, len, &reg, err), KRABKA_RESULT_OK);
    EXPECT(krabka_registration_get_fields(NULL, &got), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_registration_get_fields(reg, NULL), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_registration_get_fields(reg, &got), KRABKA_RESULT_OK);
    CHECK(got.registered_at == 1700000000000LL && got.member_len == 1, "fields");
    krabka_registration_free(reg);
    krabka_registration_free(NULL);
}

static void leases(void) {
    uint8_t buf[64];
    size_t len = 0;
    krabka_lease *lease = NULL;
    krabka_lease_fields f = {"m", 1, {1000, 3}, 10, 20}, got;
    EXPECT_NULL(krabka_encode_lease(NULL, buf, sizeof buf, &len, err), "lease");
    EXPECT_NULL(krabka_encode_lease(&f, NULL, sizeof buf, &len, err), "out");
    EXPECT_NULL(krabka_encode_lease(&f, buf, sizeof buf, NULL, err), "out_len");
    EXPECT(krabka_encode_lease(&f, buf, HUGE_LEN, &len, err), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_encode_lease(&f, buf, 0, &len, err), KRABKA_RESULT_BUFFER_TOO_SMALL);
    CHECK(len == 2 + 2 + 1 + 8 + 2 + 8 + 8, "needed %zu", len);
    f.member = NULL;
    EXPECT_NULL(krabka_encode_lease(&f, buf, sizeof buf, &len, err), "lease.member");
    f.member = "m";
    f.member_len = HUGE_LEN;
    EXPECT(krabka_encode_lease(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_INVALID_ARGUMENT);
    f.member_len = 0;
    EXPECT(krabka_encode_lease(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_ENCODE);
    CHECK(te.err.part == KRABKA_PART_LEASE_VALUE, "part %u", te.err.part);
    f.member_len = 1;
    EXPECT(krabka_encode_lease(&f, buf, sizeof buf, &len, err), KRABKA_RESULT_OK);
    EXPECT_NULL(krabka_decode_lease(NULL, len, &lease, err), "data");
    EXPECT_NULL(krabka_decode_lease(buf, len, NULL, err), "out");
    EXPECT(krabka_decode_lease(buf, HUGE_LEN, &lease, err), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_decode_lease(buf, 3, &lease, err), KRABKA_RESULT_FORMAT);
    CHECK(te.err.part == KRABKA_PART_LEASE_VALUE && lease == NULL, "part %u", te.err.part);
    EXPECT(krabka_decode_lease(buf, len, &lease, err), KRABKA_RESULT_OK);
    EXPECT(krabka_lease_get_fields(NULL, &got), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_lease_get_fields(lease, NULL), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_lease_get_fields(lease, &got), KRABKA_RESULT_OK);
    CHECK(got.token.producer_id == 1000 && got.token.producer_epoch == 3 && got.deadline == 20, "fields");
    krabka_lease_free(lease);
    krabka_lease_free(NULL);
}

static void partitions_and_tokens(void) {
    int32_t out = -7, order = 9;
    bool none = false;
    krabka_fencing_token a = {5, 1}, b = {4, 32000}, no;
    EXPECT(krabka_role_partition("billing", 7, 16, &out, err), KRABKA_RESULT_OK);
    CHECK(out >= 0 && out < 16, "partition %d", out);
    EXPECT_NULL(krabka_role_partition(NULL, 7, 16, &out, err), "role");
    EXPECT_NULL(krabka_role_partition("billing", 7, 16, NULL, err), "out");
    EXPECT(krabka_role_partition("billing", HUGE_LEN, 16, &out, err), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_role_partition("billing", 7, 0, &out, err), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_role_partition("billing", 0, 16, &out, err), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_role_partition("\xc3", 1, 16, &out, err), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_murmur2((const uint8_t *)"", 0, &out, err), KRABKA_RESULT_OK);
    EXPECT_NULL(krabka_murmur2(NULL, 0, &out, err), "data");
    EXPECT_NULL(krabka_murmur2((const uint8_t *)"x", 1, NULL, err), "out");
    EXPECT(krabka_murmur2((const uint8_t *)"x", HUGE_LEN, &out, err), KRABKA_RESULT_INVALID_ARGUMENT);

    EXPECT(krabka_fencing_token_compare(&a, &b, &order), KRABKA_RESULT_OK);
    CHECK(order == 1, "a new producer id at a low epoch outranks the old id: %d", order);
    EXPECT(krabka_fencing_token_compare(NULL, &b, &order), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_fencing_token_compare(&a, NULL, &order), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_fencing_token_compare(&a, &b, NULL), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_fencing_token_no_epoch(&no), KRABKA_RESULT_OK);
    CHECK(no.producer_id == -1 && no.producer_epoch == -1, "NoEpoch");
    EXPECT(krabka_fencing_token_no_epoch(NULL), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_fencing_token_is_no_epoch(&no, &none), KRABKA_RESULT_OK);
    CHECK(none, "NoEpoch is NoEpoch");
    EXPECT(krabka_fencing_token_is_no_epoch(&a, &none), KRABKA_RESULT_OK);
    CHECK(!none, "a minted token is not NoEpoch");
    EXPECT(krabka_fencing_token_is_no_epoch(NULL, &none), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_fencing_token_is_no_epoch(&a, NULL), KRABKA_RESULT_NULL_ARGUMENT);
}

/* The token's wire form: format and parse round-trip through the core's
 * text; malformed texts are INVALID_ARGUMENT naming the text, `*out`
 * untouched. */
static void token_text(void) {
    static const char *const bad[] = {"", "7", "7/", "/7", "7/3/1", " 7/3", "7/ 3", "+7/3", "7/32768",
                                      "9223372036854775808/0", "noepoch", "0x7/3", "\xc3"};
    krabka_fencing_token t = {0, 0}, min = {INT64_MIN, -32768}, no;
    char buf[KRABKA_TOKEN_TEXT_MAX], small[4];
    size_t len = 0, i;
    EXPECT(krabka_token_parse("4001/7", &t, err), KRABKA_RESULT_OK);
    CHECK(t.producer_id == 4001 && t.producer_epoch == 7, "parsed %lld/%d", (long long)t.producer_id, t.producer_epoch);
    EXPECT(krabka_token_parse("NoEpoch", &t, err), KRABKA_RESULT_OK);
    CHECK(t.producer_id == -1 && t.producer_epoch == -1, "NoEpoch parsed");
    EXPECT(krabka_token_parse("-4242/-2", &t, err), KRABKA_RESULT_OK);
    CHECK(t.producer_id == -4242 && t.producer_epoch == -2, "negative parts");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        krabka_fencing_token kept = {99, 9};
        EXPECT(krabka_token_parse(bad[i], &kept, err), KRABKA_RESULT_INVALID_ARGUMENT);
        CHECK(kept.producer_id == 99 && kept.producer_epoch == 9, "'%s' left out untouched", bad[i]);
        CHECK(i == sizeof bad / sizeof bad[0] - 1 || strstr(te.buf, "is not a fencing token") != NULL,
              "'%s': message '%s'", bad[i], te.buf);
    }
    CHECK(strstr(te.buf, "UTF-8") != NULL, "not UTF-8: '%s'", te.buf);
    EXPECT(krabka_token_parse("7/3", &t, err), KRABKA_RESULT_OK);
    EXPECT_NULL(krabka_token_parse(NULL, &t, err), "text");
    EXPECT_NULL(krabka_token_parse("7/3", NULL, err), "out");

    EXPECT(krabka_token_format(&t, buf, sizeof buf, &len, err), KRABKA_RESULT_OK);
    CHECK(strcmp(buf, "7/3") == 0 && len == 3, "formatted '%s' (%zu)", buf, len);
    EXPECT(krabka_token_format(&min, buf, sizeof buf, &len, err), KRABKA_RESULT_OK);
    CHECK(strcmp(buf, "-9223372036854775808/-32768") == 0 && len + 1 == KRABKA_TOKEN_TEXT_MAX, "the longest: '%s'", buf);
    EXPECT(krabka_token_parse(buf, &t, err), KRABKA_RESULT_OK);
    CHECK(t.producer_id == INT64_MIN && t.producer_epoch == -32768, "the longest parses back");
    EXPECT(krabka_fencing_token_no_epoch(&no), KRABKA_RESULT_OK);
    EXPECT(krabka_token_format(&no, buf, sizeof buf, NULL, err), KRABKA_RESULT_OK);
    CHECK(strcmp(buf, "NoEpoch") == 0, "NoEpoch formatted '%s'", buf);
    memset(small, 'x', sizeof small);
    EXPECT(krabka_token_format(&no, small, sizeof small, &len, err), KRABKA_RESULT_BUFFER_TOO_SMALL);
    CHECK(len == 7 && small[0] == 'x', "too small: length %zu, nothing written", len);
    EXPECT_NULL(krabka_token_format(NULL, buf, sizeof buf, &len, err), "token");
    EXPECT_NULL(krabka_token_format(&no, NULL, sizeof buf, &len, err), "buf");
}

/* The init functions of the error record and of a guarded record: fields set
 * by name afterwards. */
static void inits(void) {
    krabka_error e;
    krabka_record rec;
    char msg[16];
    memset(&e, 0x55, sizeof e);
    memset(msg, 'x', sizeof msg);
    CHECK(krabka_error_init(&e, msg, sizeof msg) == KRABKA_RESULT_OK, "error init");
    CHECK(e.message == msg && e.capacity == sizeof msg && e.length == 0 && e.part == KRABKA_PART_NONE &&
              msg[0] == '\0', "error record filled");
    CHECK(krabka_error_init(&e, NULL, 0) == KRABKA_RESULT_OK && e.message == NULL && e.capacity == 0, "no buffer");
    CHECK(krabka_error_init(NULL, msg, sizeof msg) == KRABKA_RESULT_NULL_ARGUMENT, "NULL record");
    memset(&rec, 0x55, sizeof rec);
    CHECK(krabka_record_init(&rec, "results") == KRABKA_RESULT_OK, "record init");
    CHECK(strcmp(rec.topic, "results") == 0 && rec.partition == KRABKA_ANY_PARTITION && rec.key == NULL &&
              rec.key_len == 0 && rec.value == NULL && rec.value_len == 0 && rec.headers == NULL &&
              rec.header_count == 0, "record defaults");
    CHECK(krabka_record_init(NULL, "results") == KRABKA_RESULT_NULL_ARGUMENT, "NULL record");
    {
        krabka_input_offset in;
        krabka_consumed_offsets co;
        memset(&in, 0x55, sizeof in);
        CHECK(krabka_input_offset_init(&in, "input", 2, 40) == KRABKA_RESULT_OK, "input offset init");
        CHECK(strcmp(in.topic, "input") == 0 && in.partition == 2 && in.offset == 40 && in.metadata == NULL,
              "input offset defaults");
        CHECK(krabka_input_offset_init(NULL, "input", 0, 0) == KRABKA_RESULT_NULL_ARGUMENT, "NULL input offset");
        memset(&co, 0x55, sizeof co);
        CHECK(KRABKA_CONSUMED_OFFSETS_INIT(&co) == KRABKA_RESULT_OK, "consumed offsets init");
        CHECK(co.struct_size == sizeof co && co.group == NULL && co.offsets == NULL && co.offset_count == 0,
              "consumed offsets defaults");
        CHECK(krabka_consumed_offsets_init(&co, 0) == KRABKA_RESULT_INVALID_ARGUMENT, "size 0 refused");
        CHECK(krabka_consumed_offsets_init(NULL, sizeof co) == KRABKA_RESULT_NULL_ARGUMENT, "NULL offsets");
    }
}

/* Every client and leadership function with NULL handles and arguments; a
 * client on a port where nothing listens for the rest. */
static void clients(void) {
    const char *keys[2] = {"bootstrap.servers", "client.id"};
    const char *values[2] = {"127.0.0.1:1", "test-args"};
    const char *bad_keys[1] = {NULL};
    krabka_client_options co;
    krabka_leadership_options lo;
    krabka_topic_options to;
    krabka_client *client = NULL;
    krabka_leadership *l = (krabka_leadership *)&co;
    krabka_role_state *state = NULL;
    krabka_leadership_status status, status_out;
    krabka_fencing_token token = {1, 1};
    krabka_roster_entry entry;
    krabka_lease_fields lf;
    krabka_record rec;
    krabka_result reason;
    bool flag = false;
    int32_t part = 0;
    size_t n = 0;
    double secs = 0;

    EXPECT(krabka_client_options_default(&co), KRABKA_RESULT_OK);
    /* _default writes the first version (without the OAuth fields). */
    CHECK(co.struct_size == offsetof(krabka_client_options, oauth_token) && co.partitions == 16 &&
              co.connect_timeout == 10.0 &&
              co.operation_timeout == 30.0 && co.state_topic == NULL,
          "client defaults");
    EXPECT(krabka_client_options_default(NULL), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_leadership_options_default(&lo), KRABKA_RESULT_OK);
    CHECK(lo.struct_size == sizeof lo && lo.lease_duration == 30.0 && lo.renew_interval == 10.0 &&
              lo.challenge_stagger == 5.0,
          "leadership defaults");
    EXPECT(krabka_leadership_options_default(NULL), KRABKA_RESULT_NULL_ARGUMENT);

    EXPECT_NULL(krabka_client_new(keys, values, 2, NULL, NULL, err), "out");
    EXPECT_NULL(krabka_client_new(NULL, values, 2, NULL, &client, err), "keys");
    EXPECT_NULL(krabka_client_new(keys, NULL, 2, NULL, &client, err), "values");
    EXPECT_NULL(krabka_client_new(bad_keys, values, 1, NULL, &client, err), "keys[0]");
    EXPECT(krabka_client_new(keys, values, HUGE_LEN, NULL, &client, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(client == NULL, "no client on failure");
    /* No settings at all: no bootstrap address. */
    EXPECT(krabka_client_new(NULL, NULL, 0, NULL, &client, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "bootstrap") != NULL, "%s", te.buf);
    {
        const char *k[2] = {"bootstrap.servers", "no.such.setting"};
        const char *v[2] = {"127.0.0.1:1", "1"};
        EXPECT(krabka_client_new(k, v, 2, NULL, &client, err), KRABKA_RESULT_INVALID_ARGUMENT);
        CHECK(strstr(te.buf, "no.such.setting") != NULL, "the refused setting is named: %s", te.buf);
    }
    {
        const char *k[1] = {"\xff"};
        EXPECT(krabka_client_new(k, values, 1, NULL, &client, err), KRABKA_RESULT_INVALID_ARGUMENT);
        CHECK(strstr(te.buf, "keys[0] must be valid UTF-8") != NULL, "%s", te.buf);
    }
    co.partitions = 0;
    EXPECT(krabka_client_new(keys, values, 2, &co, &client, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "partitions must be an integer from 1") != NULL, "%s", te.buf);
    co.partitions = 16;
    co.connect_timeout = -1;
    EXPECT(krabka_client_new(keys, values, 2, &co, &client, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "connect_timeout must be a positive number of seconds, got -1") != NULL, "%s", te.buf);
    co.connect_timeout = 0.5;
    co.operation_timeout = NAN;
    EXPECT(krabka_client_new(keys, values, 2, &co, &client, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "operation_timeout") != NULL, "%s", te.buf);
    co.operation_timeout = 2;
    EXPECT(krabka_client_new(keys, values, 2, &co, &client, err), KRABKA_RESULT_OK);
    REQUIRE(client != NULL, "no client: %s", te.buf);

    /* acquire */
    EXPECT_NULL(krabka_client_acquire(NULL, "r", "m", NULL, 1, NULL, NULL, NULL, &l, err), "client");
    CHECK(l == NULL, "out cleared");
    EXPECT_NULL(krabka_client_acquire(client, NULL, "m", NULL, 1, NULL, NULL, NULL, &l, err), "role");
    EXPECT_NULL(krabka_client_acquire(client, "r", NULL, NULL, 1, NULL, NULL, NULL, &l, err), "member");
    EXPECT_NULL(krabka_client_acquire(client, "r", "m", NULL, 1, NULL, NULL, NULL, NULL, err), "out");
    EXPECT(krabka_client_acquire(client, "r", "m", NULL, -2, NULL, NULL, NULL, &l, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "timeout must be a non-negative number of seconds, got -2") != NULL, "%s", te.buf);
    EXPECT(krabka_client_acquire(client, "", "m", NULL, 1, NULL, NULL, NULL, &l, err), KRABKA_RESULT_INVALID_ARGUMENT);
    lo.lease_duration = 3;
    EXPECT(krabka_client_acquire(client, "r", "m", &lo, 1, NULL, NULL, NULL, &l, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "lease duration") != NULL, "the core relates the timings: %s", te.buf);
    lo.renew_interval = NAN;
    EXPECT(krabka_client_acquire(client, "r", "m", &lo, 1, NULL, NULL, NULL, &l, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "renew_interval must be a positive number of seconds, got NaN") != NULL, "%s", te.buf);
    /* Nothing listens: the acquire fails within the connect timeout, naming
     * the address, and nothing is left running. */
    EXPECT(krabka_client_acquire(client, "r", "m", NULL, KRABKA_NO_TIMEOUT, NULL, NULL, NULL, &l, err),
           KRABKA_RESULT_TRANSIENT);
    CHECK(strstr(te.buf, "127.0.0.1:1") != NULL, "the bootstrap address is named: %s", te.buf);
    CHECK(l == NULL, "no leadership");

    /* cancellations */
    {
        krabka_cancel *cancel = NULL;
        EXPECT(krabka_cancel_new(NULL), KRABKA_RESULT_NULL_ARGUMENT);
        EXPECT(krabka_cancel_fire(NULL), KRABKA_RESULT_NULL_ARGUMENT);
        EXPECT(krabka_cancel_new(&cancel), KRABKA_RESULT_OK);
        EXPECT(krabka_cancel_fire(cancel), KRABKA_RESULT_OK);
        EXPECT(krabka_cancel_fire(cancel), KRABKA_RESULT_OK);
        krabka_cancel_free(cancel);
        krabka_cancel_free(NULL);
    }

    /* describe, role state, topic */
    EXPECT_NULL(krabka_client_describe_leadership(NULL, "r", &status, err), "client");
    EXPECT_NULL(krabka_client_describe_leadership(client, NULL, &status, err), "role");
    EXPECT_NULL(krabka_client_describe_leadership(client, "r", NULL, err), "out");
    EXPECT(krabka_client_describe_leadership(client, "", &status, err), KRABKA_RESULT_INVALID_ARGUMENT);
    status.token = token;
    EXPECT(krabka_leadership_status_authoritative(&status, &token, &flag), KRABKA_RESULT_OK);
    CHECK(flag, "equal tokens are authoritative");
    EXPECT(krabka_leadership_status_authoritative(NULL, &token, &flag), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_leadership_status_authoritative(&status, NULL, &flag), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_leadership_status_authoritative(&status, &token, NULL), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT_NULL(krabka_client_describe_role_state(NULL, "r", &state, err), "client");
    EXPECT_NULL(krabka_client_describe_role_state(client, NULL, &state, err), "role");
    EXPECT_NULL(krabka_client_describe_role_state(client, "r", NULL, err), "out");
    EXPECT(krabka_role_state_partition(NULL, &part), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_role_state_roster_len(NULL, &n), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_role_state_roster_entry(NULL, 0, &entry, err), KRABKA_RESULT_NULL_ARGUMENT);
    EXPECT(krabka_role_state_lease(NULL, &flag, &lf), KRABKA_RESULT_NULL_ARGUMENT);
    krabka_role_state_free(NULL);
    KRABKA_TOPIC_OPTIONS_INIT(&to);
    to.development = true;
    EXPECT_NULL(krabka_client_ensure_state_topic(NULL, &to, &flag, err), "client");
    EXPECT_NULL(krabka_client_ensure_state_topic(client, &to, NULL, err), "created");
    to.min_insync_replicas = -1;
    EXPECT(krabka_client_ensure_state_topic(client, &to, &flag, err), KRABKA_RESULT_INVALID_ARGUMENT);
    CHECK(strstr(te.buf, "min_insync_replicas must be an integer from 1") != NULL, "%s", te.buf);

    /* A forked child may not use its parent's client: FATAL, nothing run. */
    {
        pid_t pid;
        int status = -1;
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid == 0) {
            test_error ce;
            krabka_result r = krabka_client_describe_leadership(client, "r", &status_out, error_init(&ce));
            int ok = r == KRABKA_RESULT_FATAL && strstr(ce.buf, "using a krabka_client in process") != NULL;
            if (!ok) fprintf(stderr, "child: %s: %s\n", krabka_result_name(r), ce.buf);
            krabka_client_free(client); /* leaked there by design, never dropped */
            /* The child holds the parent's client on purpose: it ends by a
             * signal, so no leak checker's exit hook reports that. */
            if (ok) raise(SIGUSR1);
            _exit(1);
        }
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1,
              "a forked child's call on the parent's client returns FATAL (status %d)", status);
    }

    /* leadership functions with no leadership */
    memset(&rec, 0, sizeof rec);
    EXPECT_NULL(krabka_leadership_token(NULL, &token, err), "leadership");
    EXPECT_NULL(krabka_leadership_is_held(NULL, &flag, err), "leadership");
    EXPECT_NULL(krabka_leadership_lease_left(NULL, &secs, err), "leadership");
    EXPECT_NULL(krabka_leadership_partition(NULL, &part, err), "leadership");
    {
        uint32_t failures = 0;
        krabka_lease *lease = (krabka_lease *)&co;
        EXPECT_NULL(krabka_leadership_renewal_failures(NULL, &failures, err), "leadership");
        EXPECT_NULL(krabka_leadership_lease(NULL, &lease, err), "leadership");
        CHECK(lease == NULL, "out cleared");
    }
    EXPECT_NULL(krabka_leadership_reason(NULL, &reason, err), "leadership");
    EXPECT_NULL(krabka_leadership_wait(NULL, 0, &reason, err), "leadership");
    EXPECT_NULL(krabka_leadership_write(NULL, &rec, 1, err), "leadership");
    {
        krabka_consumed_offsets offsets;
        krabka_topic_partition asked;
        krabka_committed_offset found;
        size_t need = 0;
        KRABKA_CONSUMED_OFFSETS_INIT(&offsets);
        offsets.group = "g";
        asked.topic = "input";
        asked.partition = 0;
        EXPECT_NULL(krabka_leadership_write_with_offsets(NULL, &rec, 1, &offsets, err), "leadership");
        EXPECT_NULL(krabka_leadership_committed_offsets(NULL, "g", &asked, 1, &found, NULL, 0, &need, err),
                    "leadership");
    }
    EXPECT_NULL(krabka_leadership_resign(NULL, err), "leadership");
    krabka_leadership_free(NULL);

    krabka_client_free(client);
    krabka_client_free(NULL);
    EXPECT(krabka_wait_idle(-3), KRABKA_RESULT_INVALID_ARGUMENT);
    EXPECT(krabka_wait_idle(30), KRABKA_RESULT_OK);
}

/* krabka_event.committed (write_resolved) was added last: the fields before
 * it keep their offsets (holder was the last one before it). */
static void event_layout(void) {
    krabka_event e;
    memset(&e, 0, sizeof e);
    CHECK(offsetof(krabka_event, committed) > offsetof(krabka_event, holder), "committed comes after holder");
    CHECK(offsetof(krabka_event, committed) + sizeof e.committed <= sizeof e &&
              sizeof e - offsetof(krabka_event, committed) < sizeof(void *) + sizeof e.committed,
          "committed is the last field (offset %zu of %zu)", offsetof(krabka_event, committed), sizeof e);
    CHECK(!e.committed, "a zeroed event has committed false");
}

int main(void) {
    err = error_init(&te);
    event_layout();
    error_record();
    names();
    keys();
    registrations();
    leases();
    partitions_and_tokens();
    token_text();
    inits();
    clients();
    return check_summary("args");
}
