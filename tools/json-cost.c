/*
 * json-cost.c -- what making the JSON of the TechEmpower test types costs
 * with each of Debian's C JSON libraries, against writing it by hand as
 * modules/tfb.c does: {"message":"Hello, World!"} (the /json test: an
 * object made and serialized per request) and an array of 20
 * {"id":N,"randomNumber":N} objects (/queries?queries=20).  Counted in
 * instructions (doc/benchmarks.md, "JSON: a library or by hand"):
 *
 *   cc -O2 -o json-hand tools/json-cost.c     # modules/tfb-json.h's functions
 *   cc -O2 -DUSE_JANSSON -o json-jansson tools/json-cost.c $(pkg-config --cflags --libs jansson)
 *   cc -O2 -DUSE_JSONC -o json-c tools/json-cost.c $(pkg-config --cflags --libs json-c)
 *   cc -O2 -DUSE_CJSON -o json-cjson tools/json-cost.c $(pkg-config --cflags --libs libcjson)
 *   valgrind --tool=callgrind --callgrind-out-file=cg.%p ./json-X message 1000   # and 11000
 *   (Ir(11000) - Ir(1000)) / 10000 per document ("worlds" for the array)
 *
 * (jansson and json-c cannot share a file: both name a json_object_iter.)
 *
 * Each round makes the document from the values, writes it into a buffer
 * and frees what the library allocated (as a request would).
 */
#if defined(USE_JANSSON)
#include <jansson.h>
#elif defined(USE_JSONC)
#include <json-c/json.h>
#elif defined(USE_CJSON)
#include <cjson/cJSON.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char out[4096];
static size_t out_len;
static int ids[20], rns[20];

#if !defined(USE_JANSSON) && !defined(USE_JSONC) && !defined(USE_CJSON)
/* ---- by hand: the functions of modules/tfb.c ---- */
#include "../modules/tfb-json.h"

static void hand(int which)
{
    char *p = out;
    if (which == 0) {
        memcpy(p, "{\"message\":", 11);
        p = json_str(p + 11, "Hello, World!", 13);
        *p++ = '}';
    } else {
        *p++ = '[';
        for (int i = 0; i < 20; i++) {
            world_t w = {ids[i], rns[i]};
            if (i)
                *p++ = ',';
            p = json_world(p, &w);
        }
        *p++ = ']';
    }
    out_len = (size_t)(p - out);
}
#define MAKE hand

#elif defined(USE_JANSSON)
/* ---- jansson ---- */
static void with_jansson(int which)
{
    json_t *j;
    if (which == 0) {
        j = json_object();
        json_object_set_new(j, "message", json_string("Hello, World!"));
    } else {
        j = json_array();
        for (int i = 0; i < 20; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "id", json_integer(ids[i]));
            json_object_set_new(o, "randomNumber", json_integer(rns[i]));
            json_array_append_new(j, o);
        }
    }
    out_len = json_dumpb(j, out, sizeof(out), JSON_COMPACT);
    json_decref(j);
}
#define MAKE with_jansson

#elif defined(USE_JSONC)
/* ---- json-c ---- */
static void with_json_c(int which)
{
    struct json_object *j;
    if (which == 0) {
        j = json_object_new_object();
        json_object_object_add(j, "message", json_object_new_string("Hello, World!"));
    } else {
        j = json_object_new_array();
        for (int i = 0; i < 20; i++) {
            struct json_object *o = json_object_new_object();
            json_object_object_add(o, "id", json_object_new_int(ids[i]));
            json_object_object_add(o, "randomNumber", json_object_new_int(rns[i]));
            json_object_array_add(j, o);
        }
    }
    size_t n;
    const char *s = json_object_to_json_string_length(j, JSON_C_TO_STRING_PLAIN, &n);
    memcpy(out, s, n);
    out_len = n;
    json_object_put(j);
}
#define MAKE with_json_c

#else
/* ---- cJSON ---- */
static void with_cjson(int which)
{
    cJSON *j;
    if (which == 0) {
        j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "message", "Hello, World!");
    } else {
        j = cJSON_CreateArray();
        for (int i = 0; i < 20; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "id", ids[i]);
            cJSON_AddNumberToObject(o, "randomNumber", rns[i]);
            cJSON_AddItemToArray(j, o);
        }
    }
    cJSON_PrintPreallocated(j, out, sizeof(out), 0);
    out_len = strlen(out);
    cJSON_Delete(j);
}
#define MAKE with_cjson
#endif

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: json-cost message|worlds N\n");
        return 2;
    }
    int which = strcmp(argv[1], "message") == 0 ? 0 : 1;
    long n = atol(argv[2]);
    for (int i = 0; i < 20; i++) {
        ids[i] = 1 + (i * 7919) % 10000;
        rns[i] = 1 + (i * 104729) % 10000;
    }
    for (long i = 0; i < n; i++)
        MAKE(which);
    fwrite(out, 1, out_len, stdout);
    putchar('\n');
    return 0;
}
