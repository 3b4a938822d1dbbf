/*
 * Tests for the `kronos finetune` configuration: the official finetune_csv YAML accepted as
 * it is, its derived paths and fallbacks as config_loader.py makes them, and every kind of
 * bad config refused by name (key, file, line).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "finetune/config.h"
#include "kronos/finetune.h"
#include "test_support.h"

static kr_finetune_config *fresh(void) {
    kr_finetune_config *cfg = NULL;
    kr_error err = { 0 };
    if (kr_finetune_config_create(&cfg, &err) != KR_OK) fail_msg("%s", err.message);
    return cfg;
}

static const char *get(const kr_finetune_config *cfg, const char *key) {
    static char buf[1024];
    kr_error err = { 0 };
    if (kr_finetune_config_get(cfg, key, buf, sizeof buf, &err) != KR_OK)
        fail_msg("%s", err.message);
    return buf;
}

/* Writes `yaml` to a file in a fresh directory and loads it; returns the status, err filled. */
static kr_status load_text(kr_finetune_config *cfg, const char *yaml, kr_error *err, char *path,
                           size_t cap) {
    const char *dir = kr_test_fresh_dir();
    snprintf(path, cap, "%s/config.yaml", dir);
    assert_int_equal(kr_test_write_file(path, yaml, strlen(yaml)), 0);
    kr_status st = kr_finetune_config_load_yaml(cfg, path, err);
    return st;
}

/* Expects the YAML text to be refused with a message containing each of the needles. */
static void refused(const char *yaml, kr_status want, const char *needle1, const char *needle2) {
    kr_finetune_config *cfg = fresh();
    kr_error err = { 0 };
    char path[512];
    kr_status st = load_text(cfg, yaml, &err, path, sizeof path);
    if (st != want) fail_msg("status %d, want %d: %s", st, want, err.message);
    if (!strstr(err.message, needle1)) fail_msg("'%s' not in: %s", needle1, err.message);
    if (needle2 && !strstr(err.message, needle2)) fail_msg("'%s' not in: %s", needle2, err.message);
    kr_finetune_config_free(cfg);
}

/* The official config, every key of it, read as it is. */
static void test_official_config(void **state) {
    (void)state;
    kr_finetune_config *cfg = fresh();
    kr_error err = { 0 };
    if (kr_finetune_config_load_yaml(cfg, kr_test_fixture("finetune/official_keys.yaml"), &err) !=
        KR_OK)
        fail_msg("%s", err.message);
    assert_string_equal(get(cfg, "data.data_path"), "/data/HK_ali_09988_kline_5min_all.csv");
    assert_string_equal(get(cfg, "data.lookback_window"), "512");
    assert_string_equal(get(cfg, "training.basemodel_epochs"), "20");
    assert_string_equal(get(cfg, "training.batch_size"), "32");
    assert_string_equal(get(cfg, "training.seed"), "42");
    assert_true(cfg->predictor_learning_rate == 0.000001);
    assert_true(cfg->tokenizer_learning_rate == 0.0002);
    assert_string_equal(get(cfg, "model_paths.pretrained_predictor"), "NeoQuasar/Kronos-base");
    assert_string_equal(get(cfg, "experiment.skip_existing"), "false");
    char ignored[512];
    assert_int_equal(kr_finetune_config_ignored(cfg, ignored, sizeof ignored), 5);
    assert_string_equal(ignored, "data.max_context, training.num_workers, experiment.use_comet, "
                                 "device.use_cuda, device.device_id");
    /* The paths config_loader.py derives from exp_name and base_path. */
    kr_ft_resolved r;
    assert_int_equal(kr_ft_config_resolve(cfg, &r, &err), KR_OK);
    assert_string_equal(r.base_save_path, "/runs/finetuned/HK_ali_09988_kline_5min_all");
    assert_string_equal(r.tokenizer_dir, "/runs/finetuned/HK_ali_09988_kline_5min_all/tokenizer");
    assert_string_equal(r.predictor_dir, "/runs/finetuned/HK_ali_09988_kline_5min_all/basemodel");
    assert_string_equal(r.finetuned_tokenizer,
                        "/runs/finetuned/HK_ali_09988_kline_5min_all/tokenizer/best_model");
    assert_string_equal(r.log_dir, "/runs/finetuned/HK_ali_09988_kline_5min_all/logs");
    assert_int_equal(r.tokenizer_epochs, 30);
    assert_int_equal(r.basemodel_epochs, 20);
    assert_int_equal(r.pre_trained_tokenizer, 1);
    assert_int_equal(r.pre_trained_predictor, 1);
    kr_finetune_config_free(cfg);
}

/* {exp_name} templates, training.epochs and experiment.pre_trained as the loader reads them;
 * a YAML list of data paths. */
static void test_derived_values(void **state) {
    (void)state;
    kr_finetune_config *cfg = fresh();
    kr_error err = { 0 };
    char path[512];
    const char *yaml = "data:\n  data_path: [a.csv, 'dir/']\n"
                       "training:\n  epochs: 5\n  basemodel_epochs: 2\n"
                       "model_paths:\n  exp_name: run1\n  base_save_path: out/{exp_name}/x\n"
                       "  finetuned_tokenizer: tok/{exp_name}\n"
                       "experiment:\n  pre_trained: false\n  pre_trained_predictor: true\n"
                       "device:\n";
    if (load_text(cfg, yaml, &err, path, sizeof path) != KR_OK) fail_msg("%s", err.message);
    assert_string_equal(get(cfg, "data.data_path"), "a.csv\ndir/");
    kr_ft_resolved r;
    assert_int_equal(kr_ft_config_resolve(cfg, &r, &err), KR_OK);
    assert_int_equal(r.tokenizer_epochs, 5);
    assert_int_equal(r.basemodel_epochs, 2);
    assert_string_equal(r.base_save_path, "out/run1/x");
    assert_string_equal(r.finetuned_tokenizer, "tok/run1");
    assert_int_equal(r.pre_trained_tokenizer, 0);
    assert_int_equal(r.pre_trained_predictor, 1);
    /* Nowhere to write: said plainly. */
    assert_int_equal(kr_finetune_config_set(cfg, "model_paths.base_save_path", "", &err), KR_OK);
    assert_int_equal(kr_ft_config_resolve(cfg, &r, &err), KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "model_paths.base_save_path is not set"));
    kr_finetune_config_free(cfg);
}

/* Unknown names, wrong types, ranges, duplicates and broken YAML: each refused, naming the
 * key and the line. */
static void test_bad_configs_named(void **state) {
    (void)state;
    refused("training:\n  batch_size: 4\n  batch_sise: 8\n", KR_ERR_INVALID_ARG,
            "config.yaml:3: training.batch_sise: unknown key", NULL);
    refused("trainig:\n  batch_size: 4\n", KR_ERR_INVALID_ARG,
            "config.yaml:1: trainig: unknown section", NULL);
    refused("training:\n  batch_size: \"32\"\n", KR_ERR_INVALID_ARG,
            "config.yaml:2: training.batch_size: wrong type: expected an integer, got the string",
            NULL);
    refused("training:\n  batch_size: 32.5\n", KR_ERR_INVALID_ARG,
            "training.batch_size: wrong type: expected an integer, got the number '32.5'", NULL);
    refused("training:\n  batch_size: true\n", KR_ERR_INVALID_ARG,
            "training.batch_size: wrong type", "boolean");
    refused("training:\n  batch_size: [1, 2]\n", KR_ERR_INVALID_ARG,
            "training.batch_size: wrong type: expected an integer, got a list", NULL);
    refused("experiment:\n  skip_existing: 1\n", KR_ERR_INVALID_ARG,
            "experiment.skip_existing: wrong type: expected true or false", NULL);
    refused("data:\n  clip: five\n", KR_ERR_INVALID_ARG, "data.clip: wrong type: expected a number",
            NULL);
    refused("data:\n  lookback_window: null\n", KR_ERR_INVALID_ARG,
            "data.lookback_window: wrong type: expected an integer, got null", NULL);
    refused("training:\n  batch_size: 0\n", KR_ERR_INVALID_ARG,
            "training.batch_size: 0 is out of range", NULL);
    refused("data:\n  train_ratio: 1.5\n", KR_ERR_INVALID_ARG,
            "data.train_ratio: 1.5 is out of range", NULL);
    refused("data:\n  clip: 5\n  clip: 6\n", KR_ERR_INVALID_ARG,
            "config.yaml:3: data.clip: duplicate key", NULL);
    refused("data:\n  clip: 5\ndata:\n  clip: 6\n", KR_ERR_INVALID_ARG, "data: duplicate section",
            NULL);
    refused("data:\n  clip: [5\n", KR_ERR_FORMAT, "not valid YAML", NULL);
    refused("data: 5\n", KR_ERR_INVALID_ARG, "data: a section must be a mapping", NULL);
    refused("- a\n- b\n", KR_ERR_FORMAT, "must be a mapping of sections", NULL);
    refused("", KR_ERR_FORMAT, "empty config", NULL);
    refused("data:\n  clip: 5\n---\ndata:\n  clip: 6\n", KR_ERR_FORMAT,
            "more than one YAML document", NULL);
    refused("model_paths:\n  exp_name:\n    nested: 1\n", KR_ERR_INVALID_ARG,
            "model_paths.exp_name: wrong type: expected a value, got a mapping", NULL);
}

/* The setters the flags and Python use: one type check for all. */
static void test_setters(void **state) {
    (void)state;
    kr_finetune_config *cfg = fresh();
    kr_error err = { 0 };
    assert_int_equal(kr_finetune_config_set(cfg, "training.predictor_learning_rate", "1e-6", &err),
                     KR_OK);
    assert_true(cfg->predictor_learning_rate == 1e-6);
    assert_int_equal(kr_finetune_config_set_string(cfg, "training.epochs", "3", &err),
                     KR_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "training.epochs: wrong type"));
    assert_int_equal(kr_finetune_config_set(cfg, "training.nope", "3", &err), KR_ERR_INVALID_ARG);
    assert_string_equal(err.message, "training.nope: unknown key");
    assert_int_equal(kr_finetune_config_set(cfg, "nope", "3", &err), KR_ERR_INVALID_ARG);
    assert_string_equal(err.message, "nope: unknown section or key");
    assert_int_equal(kr_finetune_config_add(cfg, "kronos.symbols", "AAPL", &err), KR_OK);
    assert_int_equal(kr_finetune_config_add(cfg, "kronos.symbols", "MSFT", &err), KR_OK);
    assert_string_equal(get(cfg, "kronos.symbols"), "AAPL\nMSFT");
    assert_int_equal(kr_finetune_config_add(cfg, "training.seed", "1", &err), KR_ERR_INVALID_ARG);
    assert_int_equal(kr_finetune_config_set(cfg, "kronos.force", "yes", &err), KR_OK);
    assert_string_equal(get(cfg, "kronos.force"), "true");
    /* Every key has a flag, a type and a default that reads back. */
    for (int i = 0; i < kr_finetune_n_keys(); i++) {
        const kr_finetune_key *k = kr_finetune_key_at(i);
        assert_non_null(k->flag);
        assert_true(strlen(k->doc) > 10);
    }
    assert_null(kr_finetune_key_at(kr_finetune_n_keys()));
    kr_finetune_config_free(cfg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_official_config),
        cmocka_unit_test(test_derived_values),
        cmocka_unit_test(test_bad_configs_named),
        cmocka_unit_test(test_setters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
