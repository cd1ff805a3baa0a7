/*
 * A small JSON reader for the golden-vector test: the whole file into a
 * tree, strings decoded to UTF-8 with their byte length (they may hold
 * NUL bytes: "\u0000"), numbers kept as text (i64 fields are strings in the
 * files anyway). Test code: it refuses what it does not understand rather
 * than guessing, and frees everything it made (json_free).
 */
#ifndef KRABKA_TEST_JSON_H
#define KRABKA_TEST_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { J_NULL, J_BOOL, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT } json_type;

typedef struct json {
    json_type type;
    char *text;          /* J_STRING: decoded UTF-8; J_NUMBER: the literal */
    size_t len;          /* its length in bytes */
    int boolean;         /* J_BOOL */
    struct json **items; /* J_ARRAY, J_OBJECT: the values */
    char **keys;         /* J_OBJECT: the keys (NUL-terminated) */
    size_t count;
} json;

typedef struct {
    const char *p;
    const char *end;
    const char *error;
} json_parser;

static json *json_value(json_parser *ps);

static void json_free(json *j) {
    size_t i;
    if (!j) return;
    for (i = 0; i < j->count; i++) {
        json_free(j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->text);
    free(j);
}

static void json_ws(json_parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

static json *json_new(json_type t) {
    json *j = (json *)calloc(1, sizeof(json));
    if (j) j->type = t;
    return j;
}

static int json_hex4(json_parser *ps, unsigned *out) {
    unsigned v = 0;
    int i;
    if (ps->end - ps->p < 4) return 0;
    for (i = 0; i < 4; i++) {
        char c = *ps->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* Appends code point cp as UTF-8. */
static size_t json_utf8(char *out, unsigned long cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F)); return 4;
}

static char *json_string_raw(json_parser *ps, size_t *len) {
    /* Decoded text is never longer than the escaped text. */
    const char *start = ++ps->p;
    size_t cap = 1, n = 0;
    char *out;
    while (ps->p < ps->end && *ps->p != '"') {
        if (*ps->p == '\\') ps->p++;
        ps->p++;
    }
    if (ps->p >= ps->end) { ps->error = "unterminated string"; return NULL; }
    cap += (size_t)(ps->p - start);
    out = (char *)malloc(cap);
    if (!out) { ps->error = "out of memory"; return NULL; }
    ps->p = start;
    while (*ps->p != '"') {
        char c = *ps->p++;
        if (c != '\\') { out[n++] = c; continue; }
        c = *ps->p++;
        switch (c) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned hi, lo;
            unsigned long cp;
            if (!json_hex4(ps, &hi)) { ps->error = "bad \\u escape"; free(out); return NULL; }
            cp = hi;
            if (hi >= 0xD800 && hi <= 0xDBFF) {
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                    ps->error = "lone high surrogate"; free(out); return NULL;
                }
                ps->p += 2;
                if (!json_hex4(ps, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    ps->error = "bad low surrogate"; free(out); return NULL;
                }
                cp = 0x10000UL + (((unsigned long)hi - 0xD800UL) << 10) + ((unsigned long)lo - 0xDC00UL);
            } else if (hi >= 0xDC00 && hi <= 0xDFFF) {
                ps->error = "lone low surrogate"; free(out); return NULL;
            }
            n += json_utf8(out + n, cp);
            break;
        }
        default: ps->error = "bad escape"; free(out); return NULL;
        }
    }
    ps->p++; /* the closing quote */
    out[n] = '\0';
    *len = n;
    return out;
}

static int json_push(json *j, json *item, char *key) {
    json **items = (json **)realloc(j->items, (j->count + 1) * sizeof(json *));
    if (!items) return 0;
    j->items = items;
    if (j->type == J_OBJECT) {
        char **keys = (char **)realloc(j->keys, (j->count + 1) * sizeof(char *));
        if (!keys) return 0;
        j->keys = keys;
        j->keys[j->count] = key;
    }
    j->items[j->count++] = item;
    return 1;
}

static json *json_container(json_parser *ps, json_type t, char close) {
    json *j = json_new(t);
    if (!j) { ps->error = "out of memory"; return NULL; }
    ps->p++;
    json_ws(ps);
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return j; }
    for (;;) {
        char *key = NULL;
        json *v;
        json_ws(ps);
        if (t == J_OBJECT) {
            size_t klen;
            if (ps->p >= ps->end || *ps->p != '"') { ps->error = "expected a key"; json_free(j); return NULL; }
            key = json_string_raw(ps, &klen);
            if (!key) { json_free(j); return NULL; }
            json_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') { ps->error = "expected ':'"; free(key); json_free(j); return NULL; }
            ps->p++;
        }
        v = json_value(ps);
        if (!v) { free(key); json_free(j); return NULL; }
        if (!json_push(j, v, key)) { ps->error = "out of memory"; free(key); json_free(v); json_free(j); return NULL; }
        json_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == close) { ps->p++; return j; }
        ps->error = "expected ',' or a closing bracket";
        json_free(j);
        return NULL;
    }
}

static json *json_value(json_parser *ps) {
    json *j;
    json_ws(ps);
    if (ps->p >= ps->end) { ps->error = "unexpected end"; return NULL; }
    switch (*ps->p) {
    case '{': return json_container(ps, J_OBJECT, '}');
    case '[': return json_container(ps, J_ARRAY, ']');
    case '"':
        j = json_new(J_STRING);
        if (!j) { ps->error = "out of memory"; return NULL; }
        j->text = json_string_raw(ps, &j->len);
        if (!j->text) { json_free(j); return NULL; }
        return j;
    case 't': case 'f': case 'n': {
        const char *words[3] = {"true", "false", "null"};
        int w;
        for (w = 0; w < 3; w++) {
            size_t l = strlen(words[w]);
            if ((size_t)(ps->end - ps->p) >= l && memcmp(ps->p, words[w], l) == 0) {
                ps->p += l;
                j = json_new(w == 2 ? J_NULL : J_BOOL);
                if (j) j->boolean = (w == 0);
                return j;
            }
        }
        ps->error = "bad literal";
        return NULL;
    }
    default: {
        const char *start = ps->p;
        while (ps->p < ps->end && strchr("-+.eE0123456789", *ps->p)) ps->p++;
        if (ps->p == start) { ps->error = "unexpected character"; return NULL; }
        j = json_new(J_NUMBER);
        if (!j) { ps->error = "out of memory"; return NULL; }
        j->len = (size_t)(ps->p - start);
        j->text = (char *)malloc(j->len + 1);
        if (!j->text) { json_free(j); ps->error = "out of memory"; return NULL; }
        memcpy(j->text, start, j->len);
        j->text[j->len] = '\0';
        return j;
    }
    }
}

/* Reads and parses a whole file; NULL (with a message on stderr) on error. */
static json *json_load(const char *path) {
    FILE *f = fopen(path, "rb");
    long size;
    char *buf;
    json_parser ps;
    json *j;
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return NULL; }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (char *)malloc((size_t)size + 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "cannot read %s\n", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    ps.p = buf;
    ps.end = buf + size;
    ps.error = NULL;
    j = json_value(&ps);
    if (j) {
        json_ws(&ps);
        if (ps.p != ps.end) { ps.error = "trailing text"; json_free(j); j = NULL; }
    }
    if (!j) fprintf(stderr, "%s: bad JSON at byte %ld: %s\n", path, (long)(ps.p - buf), ps.error);
    free(buf);
    return j;
}

/* The value of key k in object o, or NULL. */
static const json *json_get(const json *o, const char *k) {
    size_t i;
    if (!o || o->type != J_OBJECT) return NULL;
    for (i = 0; i < o->count; i++)
        if (strcmp(o->keys[i], k) == 0) return o->items[i];
    return NULL;
}

/* An integer field: a JSON number, or a string of decimal digits (i64). */
static int json_int(const json *v, int64_t *out) {
    char *end;
    long long x;
    if (!v || (v->type != J_NUMBER && v->type != J_STRING) || v->len == 0) return 0;
    x = strtoll(v->text, &end, 10);
    if (*end != '\0') return 0;
    *out = (int64_t)x;
    return 1;
}

/* Decodes lowercase hex into a new buffer (free it); NULL for bad hex. */
static uint8_t *hex_decode(const json *v, size_t *len) {
    size_t i, n;
    uint8_t *out;
    if (!v || v->type != J_STRING || v->len % 2) return NULL;
    n = v->len / 2;
    out = (uint8_t *)malloc(n ? n : 1);
    if (!out) return NULL;
    for (i = 0; i < n; i++) {
        unsigned b;
        if (sscanf(v->text + 2 * i, "%2x", &b) != 1) { free(out); return NULL; }
        out[i] = (uint8_t)b;
    }
    *len = n;
    return out;
}

#endif
