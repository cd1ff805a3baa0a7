// The header as C++ (`extern "C"`, no C-only constructs): compiled with
// -std=c++11 -Wall -Wextra -pedantic -Werror and linked, by ci/c.sh.
#include <cstdio>
#include <cstring>

#include "krabka_coordination.h"

int main() {
    krabka_fencing_token a = {7, 1}, b = {7, 2};
    int32_t order = 0;
    krabka_result r = krabka_fencing_token_compare(&a, &b, &order);
    krabka_key_fields key = {KRABKA_KEY_KIND_LEASE, "role", 4, nullptr, 0};
    uint8_t buf[32];
    size_t len = 0;
    char message[256];
    krabka_error err;
    krabka_error_init(&err, message, sizeof message);
    krabka_result e = krabka_encode_key(&key, buf, sizeof buf, &len, &err);
    krabka_leadership *l = nullptr;
    krabka_leadership_free(l);
    std::printf("c++: compare %s %d, encode %s %zu bytes, version %s\n", krabka_result_name(r), order,
                krabka_result_name(e), len, krabka_version());
    return r == KRABKA_RESULT_OK && order == -1 && e == KRABKA_RESULT_OK && len == 12 ? 0 : 1;
}
