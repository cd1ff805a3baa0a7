/*
 * The tests' checks: each CHECK counts as passed or failed, a failure prints
 * where and what, and check_summary() prints the closing line
 * "N passed, M failed" and returns the exit status (non-zero on any failure
 * or when nothing was checked).
 */
#ifndef KRABKA_TEST_CHECK_H
#define KRABKA_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "krabka_coordination.h"

static long check_passed, check_failed;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (cond) {                                                              \
            check_passed++;                                                      \
        } else {                                                                 \
            check_failed++;                                                      \
            fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

/* A check of a result code, with the error record's message on failure. */
#define CHECK_RESULT(call, want, err)                                            \
    do {                                                                         \
        krabka_result got_ = (call);                                             \
        CHECK(got_ == (krabka_result)(want), "%s returned %s (%s), wanted %s",   \
              #call, krabka_result_name(got_), (err)->message,                   \
              krabka_result_name(want));                                         \
    } while (0)

/* Stops the test at once (a check the rest depends on failed). */
#define REQUIRE(cond, ...)                                                       \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "REQUIRED %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            exit(2);                                                             \
        }                                                                        \
    } while (0)

/* An error record with a buffer of its own. */
typedef struct {
    krabka_error err;
    char buf[1024];
} test_error;

static krabka_error *error_init(test_error *e) {
    memset(e, 0, sizeof *e);
    e->err.message = e->buf;
    e->err.capacity = sizeof e->buf;
    return &e->err;
}

static int check_summary(const char *suite) {
    printf("%s: %ld passed, %ld failed\n", suite, check_passed, check_failed);
    printf("%ld passed, %ld failed\n", check_passed, check_failed);
    fflush(stdout);
    return (check_failed == 0 && check_passed > 0) ? 0 : 1;
}

#endif
