/*
 * The in-process servers of the server tests, on the bundled demo model (header-only: only
 * tests linking the whole library include it).
 */
#ifndef KR_TEST_SERVER_FIXTURES_H
#define KR_TEST_SERVER_FIXTURES_H

#include <stdio.h>

#include "kronos.h"
#include "server/server.h"
#include "test_support.h"

#define KR_TEST_DEMO_PREDICTOR KR_SOURCE_DIR "/models/kronos-demo/predictor"
#define KR_TEST_DEMO_TOKENIZER KR_SOURCE_DIR "/models/kronos-demo/tokenizer"

static inline void kr_test_quiet_log(void *user, const char *line) {
    (void)user;
    (void)line;
}

/* The demo model (quant: NULL for f32), or NULL after printing why (for set-ups). */
static inline kr_model *kr_test_demo_model(const char *quant) {
    kr_model_params mp = kr_model_default_params();
    mp.quant = quant;
    kr_model *m = NULL;
    kr_error err = { 0 };
    if (kr_model_load(KR_TEST_DEMO_PREDICTOR, KR_TEST_DEMO_TOKENIZER, &mp, &m, &err) != KR_OK) {
        fprintf(stderr, "demo model: %s\n", err.message);
        return NULL;
    }
    return m;
}

/* Defaults on an ephemeral port, naming the demo model, logging nowhere. */
static inline kr_server_config kr_test_server_config(void) {
    kr_server_config c;
    kr_server_config_defaults(&c);
    c.port = 0;
    snprintf(c.model, sizeof c.model, "%s", KR_TEST_DEMO_PREDICTOR);
    snprintf(c.tokenizer, sizeof c.tokenizer, "%s", KR_TEST_DEMO_TOKENIZER);
    c.sched.log = kr_test_quiet_log;
    return c;
}

/* A started server on m; fails the test when it cannot start. */
static inline kr_server *kr_test_server_start(const kr_model *m, const kr_server_config *cfg) {
    kr_server *s = NULL;
    kr_error err = { 0 };
    if (kr_server_create(m, cfg, &s, &err) != KR_OK) fail_msg("server: %s", err.message);
    assert_true(kr_server_port(s) > 0);
    return s;
}

#endif
