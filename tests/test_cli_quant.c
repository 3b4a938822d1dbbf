/*
 * The quantisation commands as a user runs them: `kronos quantize` writes a checkpoint that
 * `kronos forecast --model` loads, `--quant` quantises at load, `kronos eval-quant` prints
 * and writes its fidelity report, and bad flags are usage errors naming the flag.
 * `quantize --method gptq` writes a GPTQ checkpoint; `eval-quant --gate FILE` exits 0 when
 * every gate holds, 3 naming each failed gate and by how much, 1 on a malformed gate file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "test_support.h"

static const char *g_tmp; /* kr_test_dir() */

static const kr_test_run *kronos(const char *args) { return kr_test_kronos(g_tmp, "", args); }

/* mkdir -p for the fixtures below. */
static int kr_mkdir_p_test(const char *path) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    return system(cmd) == 0 ? 0 : -1;
}

static int setup(void **state) {
    (void)state;
    g_tmp = kr_test_dir();
    return g_tmp ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return 0;
}

static void test_quantize_then_forecast(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args,
             "quantize --quant q4 --group 64 --calib %s --windows 2 --lookback 200 --out %s/q4",
             KR_SOURCE_DIR "/data/MSFT_1d.csv", g_tmp);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_non_null(strstr(r->err, "q4 (awq, group 64)"));
    char cfg[4096];
    snprintf(args, sizeof args, "%s/q4/predictor/config.json", g_tmp);
    kr_test_slurp(args, cfg, sizeof cfg);
    assert_non_null(strstr(cfg, "\"quantization\""));
    assert_non_null(strstr(cfg, "\"group_size\": 64"));

    /* The quantised checkpoint forecasts; --quant at load gives the same CSV shape. */
    snprintf(args, sizeof args, "forecast --model %s/q4 --input %s --pred-len 3 --top-k 1", g_tmp,
             kr_test_fixture("regression_input.csv"));
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_true(strncmp(r->out, "timestamps,open,high,low,close,volume,amount,", 45) == 0);
    assert_null(strstr(r->err, "kronos quantize")); /* nothing was quantised at load */
    snprintf(args, sizeof args,
             "forecast --quant int8 --kv-dtype f32 --input %s --pred-len 3 --top-k 1",
             kr_test_fixture("regression_input.csv"));
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);

    /* Re-quantising a quantised checkpoint is refused with the reason. */
    snprintf(args, sizeof args, "quantize --model %s/q4 --quant int8 --out %s/again", g_tmp, g_tmp);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "already"));
}

/* Where kronos quantize writes: never over the checkpoint it reads, never to "" (which used to
 * write /predictor and /tokenizer), an unusable --out refused before the model is even loaded,
 * a previous output replaced as a whole, a directory holding anything else left alone, and the
 * staging directory a killed run leaves removed by the next run. */
static void test_quantize_output_dir(void **state) {
    (void)state;
    char args[4096], path[4096], cfg[4096];
    snprintf(args, sizeof args, "gen-random --shape tiny --out %s/src", g_tmp);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);

    snprintf(args, sizeof args, "quantize --model %s/src --quant int8 --out %s/src", g_tmp, g_tmp);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "being quantised"));
    snprintf(path, sizeof path, "%s/src/predictor/config.json", g_tmp);
    kr_test_slurp(path, cfg, sizeof cfg);
    assert_null(strstr(cfg, "\"quantization\"")); /* the f32 original is intact */
    snprintf(args, sizeof args, "quantize --model %s/src --quant int8 --out %s/src/predictor",
             g_tmp, g_tmp);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "being quantised"));

    snprintf(args, sizeof args, "quantize --model %s/src --quant int8 --out ''", g_tmp);
    r = kronos(args);
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "--out"));

    /* The output is checked first: the error names it, not the missing tokenizer. */
    snprintf(args, sizeof args,
             "quantize --model %s/src/predictor --tokenizer %s/nonexistent --quant int8 "
             "--out /dev/null/q",
             g_tmp, g_tmp);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "/dev/null/q"));

    snprintf(args, sizeof args, "quantize --model %s/src --quant int8 --out %s/dst", g_tmp, g_tmp);
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    /* What a run killed while writing leaves (pid 999999999 is beyond any pid_max). */
    snprintf(path, sizeof path, "%s/dst/.kronos-quantize-999999999-abcdef/predictor", g_tmp);
    assert_int_equal(kr_mkdir_p_test(path), 0);
    snprintf(path, sizeof path,
             "%s/dst/.kronos-quantize-999999999-abcdef/predictor/model.safetensors.tmp", g_tmp);
    assert_int_equal(kr_test_write_file(path, "partial", 7), 0);
    snprintf(args, sizeof args, "quantize --model %s/src --quant q4 --out %s/dst", g_tmp, g_tmp);
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    const char *halves[2] = { "predictor", "tokenizer" };
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/dst/%s/config.json", g_tmp, halves[i]);
        kr_test_slurp(path, cfg, sizeof cfg);
        assert_non_null(strstr(cfg, "\"format\": \"q4\""));
    }
    snprintf(path, sizeof path, "%s/dst/.kronos-quantize-999999999-abcdef", g_tmp);
    assert_int_not_equal(access(path, F_OK), 0);
    snprintf(args, sizeof args, "ls -a %s/dst | grep -c kronos-quantize", g_tmp);
    FILE *ls = popen(args, "r");
    assert_non_null(ls);
    int staged = -1;
    assert_int_equal(fscanf(ls, "%d", &staged), 1);
    pclose(ls);
    assert_int_equal(staged, 0);

    /* Something in dst/predictor that kronos quantize did not write: refused, kept. */
    snprintf(path, sizeof path, "%s/dst/predictor/notes.txt", g_tmp);
    assert_int_equal(kr_test_write_file(path, "mine", 4), 0);
    snprintf(args, sizeof args, "quantize --model %s/src --quant int8 --out %s/dst", g_tmp, g_tmp);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "notes.txt"));
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/dst/predictor/config.json", g_tmp);
    kr_test_slurp(path, cfg, sizeof cfg);
    assert_non_null(strstr(cfg, "\"format\": \"q4\""));
}

static void test_eval_quant_report(void **state) {
    (void)state;
    char args[4096], json[256];
    snprintf(json, sizeof json, "%s/fid.json", g_tmp);
    snprintf(args, sizeof args,
             "eval-quant --quant int8 --data %s --data %s --windows 3 --lookback 64 --pred-len 4 "
             "--paths 4 --json %s",
             KR_SOURCE_DIR "/data/AAPL_1d.csv", KR_SOURCE_DIR "/data/BTCUSDT_1h.csv", json);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_non_null(strstr(r->out, "### int8 rtn, kv f32 vs f32"));
    assert_non_null(strstr(r->out, "s1 top-1 agreement"));
    assert_non_null(strstr(r->out, "KS two-sample"));
    static char text[65536];
    kr_test_slurp(json, text, sizeof text);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    assert_int_equal(cJSON_GetObjectItem(j, "windows")->valueint, 6);
    cJSON *nt = cJSON_GetObjectItem(j, "next_token");
    double agree = cJSON_GetObjectItem(nt, "s1_top1_agreement")->valuedouble;
    assert_true(agree > 0.9 && agree <= 1.0);
    assert_true(cJSON_GetObjectItem(nt, "s1_mean_kl")->valuedouble >= 0);
    double decisive = cJSON_GetObjectItem(nt, "s1_decisive_fraction")->valuedouble;
    assert_true(decisive > 0 && decisive <= 1);
    double dagree = cJSON_GetObjectItem(nt, "s1_top1_agreement_decisive")->valuedouble;
    assert_true(dagree > 0.9 && dagree <= 1.0);
    assert_non_null(strstr(r->out, "leads by >= 0.1 nats"));
    cJSON *fc = cJSON_GetObjectItem(j, "forecast");
    cJSON *ks = cJSON_GetObjectItem(fc, "ks_path_returns");
    assert_int_equal(cJSON_GetObjectItem(ks, "n")->valueint, 24);
    double p = cJSON_GetObjectItem(ks, "p_value")->valuedouble;
    assert_true(p >= 0 && p <= 1);
    cJSON_Delete(j);
}

static void test_usage_errors(void **state) {
    (void)state;
    const kr_test_run *r = kronos("quantize --quant int3 --out x");
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "--quant"));
    r = kronos("quantize --quant q4");
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "--out"));
    r = kronos("quantize --quant q4 --group 48 --out x");
    assert_int_equal(r->code, 2);
    /* A flag the format or method never reads is refused, not ignored (each used to write an
     * output that quietly did not do what was asked). */
    static const char *const unread[][2] = {
        { "quantize --quant int8 --group 64 --out x", "--group applies to q4" },
        { "quantize --quant bf16 --calib x.csv --out x", "--calib applies to int8 and q4" },
        { "quantize --quant fp8 --calib x.csv --out x", "--calib applies to int8 and q4" },
        { "quantize --quant q4 --damp 0.1 --out x", "--damp applies to --method gptq" },
        { "quantize --quant q4 --calib x.csv --damp 0.1 --out x", "--damp applies to" },
        { "quantize --quant q4 --windows 4 --out x", "apply to --calib files" },
        { "quantize --quant int8 --lookback 64 --out x", "apply to --calib files" },
    };
    for (size_t i = 0; i < sizeof unread / sizeof unread[0]; i++) {
        r = kronos(unread[i][0]);
        if (r->code != 2 || !strstr(r->err, unread[i][1]))
            fail_msg("kronos %s: exit %d, stderr %s (want 2, '%s')", unread[i][0], r->code, r->err,
                     unread[i][1]);
    }
    r = kronos("forecast --quant q5 --input x.csv --pred-len 2");
    assert_int_equal(r->code, 2);
    r = kronos("forecast --kv-dtype f16 --input x.csv --pred-len 2");
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "--kv-dtype"));
    r = kronos("eval-quant --windows 2");
    assert_int_equal(r->code, 2);
    r = kronos("eval-quant --quant int8 --data /nonexistent.csv");
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "/nonexistent.csv"));
    /* Like every command that loads a checkpoint (README), eval-quant takes this flag. */
    r = kronos("eval-quant --allow-nonfinite-weights --quant int8 --data /nonexistent.csv");
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "/nonexistent.csv"));
    r = kronos("bench --quant int9");
    assert_int_equal(r->code, 2);
    /* An unknown flag: named, a pointer to --help, not the whole usage text (as elsewhere). */
    static const char *const unknown[] = { "quantize --bogus", "eval-quant --bogus" };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        r = kronos(unknown[i]);
        assert_int_equal(r->code, 2);
        assert_non_null(strstr(r->err, "'--bogus'"));
        assert_non_null(strstr(r->err, "--help'"));
        assert_null(strstr(r->err, "usage:"));
    }

    /* Directories of the wrong kind: the error says which flag got what. */
    const char *demo = KR_SOURCE_DIR "/models/kronos-demo";
    char args[4096];
    snprintf(args, sizeof args,
             "quantize --model %s/tokenizer --tokenizer %s/predictor --quant int8 --out %s/sw",
             demo, demo, g_tmp);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "this is a predictor config"));
    assert_non_null(strstr(r->err, "are --model and --tokenizer swapped?"));
    snprintf(args, sizeof args,
             "eval-quant --model %s/predictor --tokenizer %s/predictor --quant int8", demo, demo);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err,
                           "--tokenizer " KR_SOURCE_DIR
                           "/models/kronos-demo/predictor is a predictor, not a tokenizer"));
    assert_null(strstr(r->err, "swapped"));

    /* A --quant-model is compared with the checkpoint it was made from, or refused: here one
     * quantised from a random tiny model against the default --model, the demo. */
    snprintf(args, sizeof args, "gen-random --shape tiny --out %s/evsrc", g_tmp);
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    snprintf(args, sizeof args, "quantize --model %s/evsrc --quant int8 --out %s/evq", g_tmp,
             g_tmp);
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    snprintf(args, sizeof args,
             "eval-quant --quant-model %s/evq --data %s/data/AAPL_1d.csv --windows 1", g_tmp,
             KR_SOURCE_DIR);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "was not made from --model"));
    assert_non_null(strstr(r->err, "d_model 32 there, 128 here"));
    assert_null(strstr(r->out, "###")); /* nothing evaluated */
    snprintf(args, sizeof args, "eval-quant --quant-model %s/nonexistent --data x.csv", g_tmp);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "--quant-model"));
}

static void test_gptq_and_gates(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args,
             "quantize --quant q4 --method gptq --calib %s --windows 2 --lookback 200 --out %s/gq",
             KR_SOURCE_DIR "/data/MSFT_1d.csv", g_tmp);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_non_null(strstr(r->err, "q4 (gptq, group 32)"));
    char cfg[4096];
    snprintf(args, sizeof args, "%s/gq/predictor/config.json", g_tmp);
    kr_test_slurp(args, cfg, sizeof cfg);
    assert_non_null(strstr(cfg, "\"method\": \"gptq\""));

    char pass[256], fail[256], bad[256];
    snprintf(pass, sizeof pass, "%s/pass.json", g_tmp);
    snprintf(fail, sizeof fail, "%s/fail.json", g_tmp);
    snprintf(bad, sizeof bad, "%s/bad.json", g_tmp);
    static const char pass_text[] = "{\"s1_top1_agreement_min\": 0.5, \"s1_kl_max\": 1}";
    static const char fail_text[] = "{\"s1_top1_agreement_min\": 0.5, \"s1_kl_max\": 0}";
    static const char bad_text[] = "{\"s1_kl_max\": 1, \"kl_maximum\": 1}";
    assert_int_equal(kr_test_write_file(pass, pass_text, strlen(pass_text)), 0);
    assert_int_equal(kr_test_write_file(fail, fail_text, strlen(fail_text)), 0);
    assert_int_equal(kr_test_write_file(bad, bad_text, strlen(bad_text)), 0);
    const char *common = "--data " KR_SOURCE_DIR "/data/AAPL_1d.csv --windows 2 --lookback 64 "
                         "--pred-len 4 --paths 4";
    snprintf(args, sizeof args, "eval-quant --quant-model %s/gq %s --gate %s", g_tmp, common, pass);
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_non_null(strstr(r->err, "every gate holds"));
    assert_non_null(strstr(r->out, "**pass**"));
    assert_non_null(strstr(r->out, "Risk control"));

    snprintf(args, sizeof args, "eval-quant --quant-model %s/gq %s --gate %s", g_tmp, common, fail);
    r = kronos(args);
    assert_int_equal(r->code, 3);
    assert_non_null(strstr(r->err, "gate s1_kl_max failed: mean KL(f32 ‖ quant) s1 = "));
    assert_non_null(strstr(r->err, "above the maximum 0 by"));
    assert_non_null(strstr(r->err, "1 gate failed"));
    assert_non_null(strstr(r->out, "**FAIL**"));

    snprintf(args, sizeof args, "eval-quant --quant int8 %s --gate %s", common, bad);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "bad.json: unknown gate 'kl_maximum'"));
    assert_null(strstr(r->out, "###")); /* refused before evaluating */

    /* --method misuse is a usage error naming the flag. */
    r = kronos("quantize --quant q4 --method gptq --out x");
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "--method gptq needs --calib"));
    r = kronos("quantize --quant q4 --method optq --out x");
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "--method"));
    r = kronos("eval-quant --quant q4 --method awq");
    assert_int_equal(r->code, 2);
    r = kronos("quantize --quant q4 --method rtn --calib x.csv --out x");
    assert_int_equal(r->code, 2);
    assert_non_null(strstr(r->err, "--method rtn uses no --calib"));
}

/* kronos ARGS with stdout on /dev/full (every write fails, at the flush): the exit code,
 * stderr in err. */
static int run_to_full_disk(const char *args, char *err, size_t cap) {
    char cmd[8192], errp[4200];
    snprintf(errp, sizeof errp, "%s/stderr-full", g_tmp);
    snprintf(cmd, sizeof cmd, "env -u KRONOS_DB %s/kronos %s >/dev/full 2>%s </dev/null",
             KR_BINARY_DIR, args, errp);
    int st = system(cmd);
    kr_test_slurp(errp, err, cap);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Reports that cannot be written, gate files with more than one object, data too short and
 * figures that cannot be measured: each a clear error or an explicit "n/a", never exit 0 over
 * a lost report or "nan" in a table. */
static void test_eval_quant_and_bench_hostile(void **state) {
    (void)state;
    char args[4096], err[4096], csv[256], gate[256];
    /* 40 rows: one window of 16 + 2 fits, a bench of 16 + 30 does not. */
    snprintf(csv, sizeof csv, "%s/short.csv", g_tmp);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "head -41 '%s' > '%s'", KR_SOURCE_DIR "/data/AAPL_1d.csv", csv);
    assert_int_equal(system(cmd), 0);
    const char *small = "--quant int8 --windows 1 --paths 2 --pred-len 2 --lookback 16";

    /* One window: ROC-AUC and the rank correlations cannot be measured. */
    snprintf(args, sizeof args, "eval-quant %s --data %s", small, csv);
    const kr_test_run *r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    assert_null(strstr(r->out, "nan"));
    assert_non_null(
        strstr(r->out, "| ROC-AUC of P(up) vs realised direction: f32 / quant | n/a / n/a |"));

    if (access("/dev/full", W_OK) == 0) {
        assert_int_equal(run_to_full_disk(args, err, sizeof err), 1);
        assert_non_null(strstr(err, "kronos eval-quant: error: stdout: write failed"));
        snprintf(args, sizeof args,
                 "bench --shape tiny --paths 1 --pred-len 2 --lookback 16 --repeat 1 --data %s",
                 csv);
        assert_int_equal(run_to_full_disk(args, err, sizeof err), 1);
        assert_non_null(strstr(err, "kronos bench: error: stdout: write failed"));
    }

    /* More windows than the file has room for: run on what fits, and say so. */
    snprintf(args, sizeof args,
             "eval-quant --quant int8 --windows 30 --paths 2 --pred-len 2 --lookback 16 --data %s",
             csv);
    r = kronos(args);
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->err);
    if (!strstr(r->err, "note: 23 windows evaluated, fewer than the 30 asked (--windows 30 x 1 "
                        "file)"))
        fail_msg("no note of the windows: %s", r->err);

    /* A second object after the first: its gate would never apply. */
    snprintf(gate, sizeof gate, "%s/two-objects.json", g_tmp);
    FILE *f = fopen(gate, "w");
    assert_non_null(f);
    fputs("{\"s1_kl_max\": 1}\n{\"s2_kl_max\": 0}\n", f);
    fclose(f);
    snprintf(args, sizeof args, "eval-quant %s --data %s --gate %s", small, csv, gate);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    assert_non_null(strstr(r->err, "two-objects.json: text after the JSON object (line 2)"));

    /* Too short for the bench: the file, its rows and what was asked. */
    snprintf(args, sizeof args,
             "bench --shape tiny --paths 1 --pred-len 30 --lookback 16 --repeat 1 --data %s", csv);
    r = kronos(args);
    assert_int_equal(r->code, 1);
    if (!strstr(r->err, "short.csv: 40 rows, too few for --lookback 16 + --pred-len 30 (46 rows "
                        "needed)"))
        fail_msg("%s", r->err);

    /* Flags that used to be read loosely: an empty count in --paths, a --lookback-max that
     * one series ignores or that is below --lookback. Refused before any model is made. */
    static const struct {
        const char *args, *says;
    } bad[] = {
        { "bench --shape tiny --paths 1,,2", "bad --paths '1,,2'" },
        { "bench --shape tiny --paths 8,", "bad --paths '8,'" },
        { "bench --shape tiny --paths ,8", "bad --paths ',8'" },
        { "bench --shape tiny --lookback-max 500", "--lookback-max 500 spreads the lookbacks" },
        { "bench --shape tiny --series 2 --lookback 400 --lookback-max 100",
          "--lookback-max 100 is below --lookback" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        r = kronos(bad[k].args);
        if (r->code != 2 || !strstr(r->err, bad[k].says))
            fail_msg("%s: want exit 2 saying \"%s\", got %d: %s", bad[k].args, bad[k].says, r->code,
                     r->err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_then_forecast),
        cmocka_unit_test(test_quantize_output_dir),
        cmocka_unit_test(test_eval_quant_report),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_gptq_and_gates),
        cmocka_unit_test(test_eval_quant_and_bench_hostile),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
