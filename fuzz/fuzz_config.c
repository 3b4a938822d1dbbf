/*
 * fuzz_config — libFuzzer target for the server's JSON config file (server/config:
 * kr_server_config_parse, what `kronos serve --config` and `--check-config` read). The input is
 * a config document. A document is taken whole or refused: on success the config passes
 * kr_server_config_validate (the ranges a flag would be held to), its strings are terminated
 * and non-empty where set, and its profiles are within the table; on failure the message is a
 * terminated, non-empty text that names the source label.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kronos/server.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

static int terminated(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static kr_server_config c; /* ~30 KB of paths: off the stack */
    kr_server_config_defaults(&c);
    kr_error err = { 0 };
    kr_status st = kr_server_config_parse((const char *)data, size, "fuzz.json", &c, &err);
    if (st != KR_OK) {
        CHECK(terminated(err.message, sizeof err.message) && err.message[0]);
        CHECK(strstr(err.message, "fuzz.json") != NULL);
        return 0;
    }
    kr_error verr = { 0 };
    CHECK(kr_server_config_validate(&c, &verr) == KR_OK);
    CHECK(terminated(c.model, sizeof c.model) && terminated(c.host, sizeof c.host) &&
          terminated(c.api_key_file, sizeof c.api_key_file) &&
          terminated(c.access_log, sizeof c.access_log) && terminated(c.db, sizeof c.db) &&
          terminated(c.web_root, sizeof c.web_root) && terminated(c.llm_url, sizeof c.llm_url));
    CHECK(c.host[0]); /* never empty: the default, or a value the parser took */
    CHECK(c.n_profiles >= 0 && c.n_profiles <= KR_SERVER_MAX_PROFILES);
    for (int i = 0; i < c.n_profiles; i++) {
        const kr_server_profile *p = &c.profiles[i];
        CHECK(p->name[0] && terminated(p->name, sizeof p->name));
        CHECK(p->from_min >= 0 && p->from_min < 24 * 60 && p->to_min >= 0 && p->to_min < 24 * 60 &&
              p->from_min != p->to_min);
    }
    CHECK(c.max_request_memory <= c.max_memory_in_flight);
    /* Parsing the same document again over the result changes nothing it set. */
    static kr_server_config again;
    again = c;
    CHECK(kr_server_config_parse((const char *)data, size, "fuzz.json", &again, &err) == KR_OK);
    CHECK(again.port == c.port && again.max_memory_in_flight == c.max_memory_in_flight &&
          again.sched.kv_budget_bytes == c.sched.kv_budget_bytes &&
          again.n_profiles == c.n_profiles && !strcmp(again.host, c.host));
    return 0;
}
