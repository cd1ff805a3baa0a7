/*
 * Every golden vector of the repository (the JSON files in golden/), through the C ABI.
 *
 * Each file is walked whole; every case is counted, and the counts must
 * equal the number of entries in the file (and be above zero, for each
 * record part too), so a skipped vector or a file that shrank fails the
 * suite. Usage: test_golden GOLDEN_DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"

static const char *golden_dir;

static json *load(const char *name) {
    char path[4096];
    json *j;
    int64_t format = 0;
    snprintf(path, sizeof path, "%s/%s", golden_dir, name);
    j = json_load(path);
    REQUIRE(j != NULL, "cannot load %s", path);
    REQUIRE(json_int(json_get(j, "format"), &format) && format == 1, "%s: format is not 1", path);
    return j;
}

static int same_text(const char *p, size_t n, const json *want) {
    return want && want->type == J_STRING && want->len == n && (n == 0 || memcmp(p, want->text, n) == 0);
}

static const char *str(const json *case_, const char *key) {
    const json *v = json_get(case_, key);
    return v && v->type == J_STRING ? v->text : NULL;
}

static int64_t i64(const json *case_, const char *key) {
    int64_t v = 0;
    REQUIRE(json_int(json_get(case_, key), &v), "field %s missing or not an integer", key);
    return v;
}

/* The part a case's "part" names. */
static krabka_part part_of(const char *name) {
    if (strcmp(name, "key") == 0) return KRABKA_PART_KEY;
    if (strcmp(name, "registration value") == 0) return KRABKA_PART_REGISTRATION_VALUE;
    if (strcmp(name, "lease value") == 0) return KRABKA_PART_LEASE_VALUE;
    return KRABKA_PART_NONE;
}

/* Decodes a case, checks every field, encodes the listed fields and checks
 * the bytes. Returns 1 when everything matched. */
static int record_case(const json *c) {
    const char *name = str(c, "name");
    const char *part = str(c, "part");
    const json *role = json_get(c, "role"), *member = json_get(c, "member");
    size_t len = 0, out_len = 0;
    uint8_t *data = hex_decode(json_get(c, "hex"), &len);
    uint8_t *out = (uint8_t *)malloc(len + 16);
    test_error e;
    krabka_error *err = error_init(&e);
    int ok = 1;
    REQUIRE(data && out && name && part, "a case without name, part or hex");
    switch (part_of(part)) {
    case KRABKA_PART_KEY: {
        krabka_key *key = NULL;
        krabka_key_fields f;
        const char *kind = str(c, "kind");
        uint32_t want_kind = strcmp(kind, "registration") == 0 ? KRABKA_KEY_KIND_REGISTRATION : KRABKA_KEY_KIND_LEASE;
        if (krabka_decode_key(data, len, &key, err) != KRABKA_RESULT_OK) { ok = 0; break; }
        krabka_key_get_fields(key, &f);
        ok = f.kind == want_kind && same_text(f.role, f.role_len, role) && same_text(f.member, f.member_len, member);
        krabka_key_free(key);
        f.kind = want_kind;
        f.role = role->text;
        f.role_len = role->len;
        f.member = member->text;
        f.member_len = member->len;
        ok = ok && krabka_encode_key(&f, out, len + 16, &out_len, err) == KRABKA_RESULT_OK;
        break;
    }
    case KRABKA_PART_REGISTRATION_VALUE: {
        krabka_registration *reg = NULL;
        krabka_registration_fields f;
        if (krabka_decode_registration(data, len, &reg, err) != KRABKA_RESULT_OK) { ok = 0; break; }
        krabka_registration_get_fields(reg, &f);
        ok = same_text(f.member, f.member_len, member) && f.registered_at == i64(c, "registered_at");
        krabka_registration_free(reg);
        f.member = member->text;
        f.member_len = member->len;
        f.registered_at = i64(c, "registered_at");
        ok = ok && krabka_encode_registration(&f, out, len + 16, &out_len, err) == KRABKA_RESULT_OK;
        break;
    }
    case KRABKA_PART_LEASE_VALUE: {
        krabka_lease *lease = NULL;
        krabka_lease_fields f;
        if (krabka_decode_lease(data, len, &lease, err) != KRABKA_RESULT_OK) { ok = 0; break; }
        krabka_lease_get_fields(lease, &f);
        ok = same_text(f.member, f.member_len, member) && f.token.producer_id == i64(c, "producer_id") &&
             f.token.producer_epoch == (int16_t)i64(c, "producer_epoch") &&
             f.granted_at == i64(c, "granted_at") && f.deadline == i64(c, "deadline");
        krabka_lease_free(lease);
        f.member = member->text;
        f.member_len = member->len;
        f.token.producer_id = i64(c, "producer_id");
        f.token.producer_epoch = (int16_t)i64(c, "producer_epoch");
        f.granted_at = i64(c, "granted_at");
        f.deadline = i64(c, "deadline");
        ok = ok && krabka_encode_lease(&f, out, len + 16, &out_len, err) == KRABKA_RESULT_OK;
        break;
    }
    default:
        ok = 0;
    }
    ok = ok && out_len == len && memcmp(out, data, len) == 0;
    CHECK(ok, "record case '%s' (%s): %s", name, part, e.buf);
    free(data);
    free(out);
    return ok;
}

static void records(void) {
    json *j = load("records.json");
    const json *cases = json_get(j, "cases"), *malformed = json_get(j, "malformed");
    size_t i, checked = 0, bad_checked = 0;
    size_t per_part[4] = {0, 0, 0, 0}, bad_per_part[4] = {0, 0, 0, 0};
    REQUIRE(cases && cases->type == J_ARRAY && cases->count > 0, "records.json has no cases");
    REQUIRE(malformed && malformed->type == J_ARRAY && malformed->count > 0, "records.json has no malformed entries");
    for (i = 0; i < cases->count; i++) {
        if (record_case(cases->items[i])) {
            checked++;
            per_part[part_of(str(cases->items[i], "part"))]++;
        }
    }
    for (i = 0; i < malformed->count; i++) {
        const json *m = malformed->items[i];
        const char *name = str(m, "name"), *part = str(m, "part");
        krabka_part want = part_of(part);
        size_t len = 0;
        uint8_t *data = hex_decode(json_get(m, "hex"), &len);
        test_error e;
        krabka_error *err = error_init(&e);
        krabka_result r = KRABKA_RESULT_OK;
        REQUIRE(data && name && want != KRABKA_PART_NONE, "a malformed entry without name, part or hex");
        if (want == KRABKA_PART_KEY) {
            krabka_key *k = (krabka_key *)1; /* must be set to NULL */
            r = krabka_decode_key(data, len, &k, err);
            CHECK(k == NULL, "'%s': out not set to NULL", name);
        } else if (want == KRABKA_PART_REGISTRATION_VALUE) {
            krabka_registration *v = (krabka_registration *)1;
            r = krabka_decode_registration(data, len, &v, err);
            CHECK(v == NULL, "'%s': out not set to NULL", name);
        } else {
            krabka_lease *v = (krabka_lease *)1;
            r = krabka_decode_lease(data, len, &v, err);
            CHECK(v == NULL, "'%s': out not set to NULL", name);
        }
        if (r == KRABKA_RESULT_FORMAT && e.err.part == want && e.err.length > 0 &&
            strcmp(krabka_part_name(e.err.part), part) == 0 && strlen(e.buf) == e.err.length) {
            check_passed++;
            bad_checked++;
            bad_per_part[want]++;
        } else {
            CHECK(0, "malformed '%s' (%s): %s, part %s: %s", name, part, krabka_result_name(r),
                  krabka_part_name(e.err.part), e.buf);
        }
        free(data);
    }
    CHECK(checked == cases->count, "records: %zu of %zu cases checked", checked, cases->count);
    CHECK(bad_checked == malformed->count, "malformed: %zu of %zu checked", bad_checked, malformed->count);
    for (i = 1; i < 4; i++) {
        CHECK(per_part[i] > 0, "no case of part %s", krabka_part_name((uint32_t)i));
        CHECK(bad_per_part[i] > 0, "no malformed entry of part %s", krabka_part_name((uint32_t)i));
    }
    printf("golden records.json: %zu/%zu cases (key %zu, registration value %zu, lease value %zu), "
           "%zu/%zu malformed (key %zu, registration value %zu, lease value %zu)\n",
           checked, cases->count, per_part[1], per_part[2], per_part[3], bad_checked, malformed->count,
           bad_per_part[1], bad_per_part[2], bad_per_part[3]);
    json_free(j);
}

static void partitions(void) {
    json *j = load("partitions.json");
    const json *cases = json_get(j, "cases");
    size_t i, checked = 0, negative = 0;
    REQUIRE(cases && cases->type == J_ARRAY && cases->count > 0, "partitions.json has no cases");
    for (i = 0; i < cases->count; i++) {
        const json *c = cases->items[i];
        const json *role = json_get(c, "role");
        int32_t hash = 0, partition = -1;
        test_error e;
        krabka_error *err = error_init(&e);
        krabka_result r1 = krabka_murmur2((const uint8_t *)role->text, role->len, &hash, err);
        krabka_result r2 = krabka_role_partition(role->text, role->len, (int32_t)i64(c, "partitions"), &partition, err);
        if (r1 == KRABKA_RESULT_OK && r2 == KRABKA_RESULT_OK && hash == (int32_t)i64(c, "murmur2") &&
            partition == (int32_t)i64(c, "partition")) {
            check_passed++;
            checked++;
            negative += hash < 0;
        } else {
            CHECK(0, "partition of '%s' in %lld: %s/%s murmur2 %d partition %d: %s", role->text,
                  (long long)i64(c, "partitions"), krabka_result_name(r1), krabka_result_name(r2), hash,
                  partition, e.buf);
        }
    }
    CHECK(checked == cases->count, "partitions: %zu of %zu checked", checked, cases->count);
    CHECK(negative > 0, "no case hashes to a negative number (toPositive is untested)");
    printf("golden partitions.json: %zu/%zu cases (%zu with a negative hash)\n", checked, cases->count, negative);
    json_free(j);
}

static krabka_fencing_token token_of(const json *t) {
    krabka_fencing_token k;
    k.producer_id = i64(t, "producer_id");
    k.producer_epoch = (int16_t)i64(t, "producer_epoch");
    return k;
}

static void tokens(void) {
    json *j = load("tokens.json");
    const json *cases = json_get(j, "cases");
    size_t i, checked = 0, seen[3] = {0, 0, 0}, no_epoch = 0;
    REQUIRE(cases && cases->type == J_ARRAY && cases->count > 0, "tokens.json has no cases");
    for (i = 0; i < cases->count; i++) {
        const json *c = cases->items[i];
        krabka_fencing_token a = token_of(json_get(c, "a")), b = token_of(json_get(c, "b"));
        const char *order = str(c, "order");
        int want = strcmp(order, "less") == 0 ? -1 : strcmp(order, "equal") == 0 ? 0 : 1;
        int32_t got = 7, back = 7;
        bool a_none = false, b_none = false;
        krabka_fencing_token_compare(&a, &b, &got);
        krabka_fencing_token_compare(&b, &a, &back);
        krabka_fencing_token_is_no_epoch(&a, &a_none);
        krabka_fencing_token_is_no_epoch(&b, &b_none);
        if (got == want && back == -want) {
            check_passed++;
            checked++;
            seen[want + 1]++;
            no_epoch += a_none || b_none;
        } else {
            CHECK(0, "(%lld,%d) vs (%lld,%d): %d, wanted %s", (long long)a.producer_id, a.producer_epoch,
                  (long long)b.producer_id, b.producer_epoch, got, order);
        }
    }
    CHECK(checked == cases->count, "tokens: %zu of %zu checked", checked, cases->count);
    CHECK(seen[0] && seen[1] && seen[2], "not every order is among the cases");
    CHECK(no_epoch > 0, "no case has NoEpoch");
    printf("golden tokens.json: %zu/%zu cases (less %zu, equal %zu, greater %zu; %zu with NoEpoch)\n", checked,
           cases->count, seen[0], seen[1], seen[2], no_epoch);
    json_free(j);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 2, "usage: %s GOLDEN_DIR", argv[0]);
    golden_dir = argv[1];
    records();
    partitions();
    tokens();
    return check_summary("golden");
}
