/*
 * fuzz_finetune_config — libFuzzer target for the `kronos finetune` YAML config
 * (finetune/config_yaml.c over libyaml, finetune/config.c's key table). Any input is accepted
 * or refused with a message; an accepted config reads back every key, and its derived paths
 * either resolve or are refused with a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "finetune/config.h"

#define CHECK(cond)           \
    do {                      \
        if (!(cond)) abort(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kr_finetune_config *cfg = NULL;
    kr_error err = { 0 };
    CHECK(kr_finetune_config_create(&cfg, &err) == KR_OK);
    kr_status st = kr_ft_config_parse_yaml(cfg, (const char *)data, size, "fuzz.yaml", &err);
    if (st != KR_OK) {
        CHECK(st == KR_ERR_INVALID_ARG || st == KR_ERR_FORMAT || st == KR_ERR_NOMEM);
        CHECK(memchr(err.message, '\0', sizeof err.message) && err.message[0]);
    } else {
        char value[4096];
        for (int i = 0; i < kr_finetune_n_keys(); i++)
            CHECK(kr_finetune_config_get(cfg, kr_finetune_key_at(i)->key, value, sizeof value,
                                         &err) == KR_OK);
        kr_ft_resolved r;
        if (kr_ft_config_resolve(cfg, &r, &err) == KR_OK)
            CHECK(r.base_save_path[0] && r.tokenizer_dir[0] && r.predictor_dir[0]);
        else
            CHECK(err.message[0]);
    }
    kr_finetune_config_free(cfg);
    return 0;
}
