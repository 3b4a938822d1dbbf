/* cli/args — see args.h. */
#include "cli/args.h"
#include "cli/share_paths.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kronos/hub_cache.h"

int kr_arg_int(const char *s, long min, long max, int *out) {
    if (!s || !*s) return 0;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max) return 0;
    *out = (int)v;
    return 1;
}

int kr_arg_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return 0;
    errno = 0;
    char *end;
    /* Decimal, or hex with 0x: a leading zero is not octal ("010" is ten, as everywhere else). */
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const char *digits = hex ? s + 2 : s;
    if (hex ? !isxdigit((unsigned char)*digits) : !isdigit((unsigned char)*digits)) return 0;
    unsigned long long v = strtoull(digits, &end, hex ? 16 : 10);
    if (errno || *end) return 0;
    *out = (uint64_t)v;
    return 1;
}

int kr_arg_double(const char *s, double min, double max, double *out) {
    if (!s || !*s) return 0;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max) return 0;
    *out = v;
    return 1;
}

int kr_arg_float(const char *s, double min, double max, float *out) {
    double v;
    if (!kr_arg_double(s, min, max, &v)) return 0;
    *out = (float)v;
    return 1;
}

static int is_file(const char *dir, const char *sub, const char *name) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s%s%s/%s", dir, sub ? "/" : "", sub ? sub : "", name);
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A --model / --tokenizer value that is not a directory but has the shape of a hub id
 * ("NeoQuasar/Kronos-small") names a snapshot pulled into the hub cache. Returns 1 with the
 * snapshot directory in buf[PATH_MAX], 0 when the value is to be used as given, -1 with a
 * message when it is a hub id that has not been pulled. An existing directory always wins,
 * so relative paths like models/kronos-demo keep working. */
static int resolve_hub_name(const char *value, char *buf, char *msg, size_t msglen) {
    struct stat sb;
    if (!value || !kr_hub_is_repo_id(value) || (stat(value, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return 0;
    kr_error err = { 0 };
    if (kr_hub_resolve_cached(value, NULL, buf, PATH_MAX, &err) == KR_OK) return 1;
    if (err.status == KR_ERR_INVALID_ARG) /* no usable cache location (HOME unset, ...) */
        snprintf(msg, msglen, "%s", err.message);
    else
        snprintf(msg, msglen, "%s is not downloaded; run: kronos pull %s", value, value);
    return -1;
}

int kr_resolve_model_dirs(const char *model, const char *tokenizer, char *pred_dir, char *tok_dir,
                          char *msg, size_t msglen) {
    char model_snap[PATH_MAX], tok_snap[PATH_MAX];
    int r = resolve_hub_name(model, model_snap, msg, msglen);
    if (r < 0) return -2;
    if (r > 0) model = model_snap;
    r = resolve_hub_name(tokenizer, tok_snap, msg, msglen);
    if (r < 0) return -2;
    if (r > 0) tokenizer = tok_snap;
    char fallback[PATH_MAX];
    if (!model && !tokenizer) {
        kr_share_path("models/kronos-demo", fallback, sizeof fallback);
        model = fallback;
    }
    /* One directory alone that is not there is the problem to name, before any talk of
     * pairs (with both given, loading names the missing one, after the output checks). */
    for (int k = 0; k < 2 && !(model && tokenizer); k++) {
        const char *dir = k ? tokenizer : model;
        struct stat sb;
        if (!dir || dir == fallback) continue;
        if (stat(dir, &sb) != 0) {
            snprintf(msg, msglen, "--%s %s: no such directory", k ? "tokenizer" : "model", dir);
            return -1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            snprintf(msg, msglen,
                     "--%s %s: not a directory (give the directory holding config.json and "
                     "model.safetensors)",
                     k ? "tokenizer" : "model", dir);
            return -1;
        }
    }
    if (model && !is_file(model, NULL, "config.json") &&
        is_file(model, "predictor", "config.json")) {
        snprintf(pred_dir, PATH_MAX, "%s/predictor", model);
        if (tokenizer)
            snprintf(tok_dir, PATH_MAX, "%s", tokenizer);
        else if (is_file(model, "tokenizer", "config.json"))
            snprintf(tok_dir, PATH_MAX, "%s/tokenizer", model);
        else {
            snprintf(msg, msglen, "%s has no tokenizer/ directory; pass --tokenizer DIR", model);
            return -1;
        }
        return 0;
    }
    if (model && !tokenizer && !is_file(model, NULL, "config.json")) {
        snprintf(msg, msglen,
                 "--model %s holds no config.json and no predictor/ directory: give a "
                 "checkpoint directory (config.json + model.safetensors), or one holding "
                 "predictor/ and tokenizer/",
                 model);
        return -1;
    }
    if (!model || !tokenizer) {
        snprintf(msg, msglen,
                 "%s: give both --model DIR and --tokenizer DIR (or --model DIR holding "
                 "predictor/ and tokenizer/)",
                 model ? "--model is a predictor directory without its tokenizer"
                       : "--tokenizer without --model");
        return -1;
    }
    snprintf(pred_dir, PATH_MAX, "%s", model);
    snprintf(tok_dir, PATH_MAX, "%s", tokenizer);
    return 0;
}

int kr_cli_fail(const char *cmd, const char *msg) {
    fprintf(stderr, "kronos %s: error: %s\n", cmd, msg);
    return 1;
}

int kr_cli_check_writable(const char *cmd, const char *path) {
    char msg[PATH_MAX + 128];
    struct stat sb;
    int existed = stat(path, &sb) == 0;
    if (existed && S_ISDIR(sb.st_mode)) {
        snprintf(msg, sizeof msg, "%s: is a directory, not a file to write", path);
        return kr_cli_fail(cmd, msg);
    }
    FILE *f = fopen(path, "a");
    if (!f) {
        snprintf(msg, sizeof msg, "%s: cannot write: %s", path, strerror(errno));
        return kr_cli_fail(cmd, msg);
    }
    fclose(f);
    if (!existed) unlink(path);
    return 0;
}

int kr_cli_write_text(const char *cmd, const char *path, const char *text) {
    FILE *f = path ? fopen(path, "w") : stdout;
    char msg[PATH_MAX + 128];
    if (!f) {
        snprintf(msg, sizeof msg, "%s: cannot write: %s", path, strerror(errno));
        return kr_cli_fail(cmd, msg);
    }
    int bad = fputs(text, f) < 0;
    if (f != stdout)
        bad |= fclose(f) != 0;
    else
        bad |= fflush(f) != 0;
    if (bad) {
        snprintf(msg, sizeof msg, "%s: write failed", path ? path : "stdout");
        return kr_cli_fail(cmd, msg);
    }
    if (path) fprintf(stderr, "kronos %s: wrote %s\n", cmd, path);
    return 0;
}

int kr_cli_db_flag(const char *cmd, const char *value) {
    if (*value) return 0;
    return kr_cli_usage_error(
        cmd, "%s", "--db is empty; leave it out for the default store (or name a file or URL)");
}

int kr_cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int kr_cli_refuse_same_file(const char *cmd, const char *output, const char *other,
                            const char *what) {
    if (!kr_cli_same_file(output, other)) return 0;
    char msg[PATH_MAX + 256];
    snprintf(msg, sizeof msg, "%s is %s; writing there would destroy it (name another file)",
             output, what);
    return kr_cli_usage_error(cmd, "%s", msg);
}

int kr_cli_usage_error(const char *cmd, const char *fmt, const char *arg) {
    fprintf(stderr, "kronos %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try 'kronos %s --help')\n", cmd);
    return 2;
}

int kr_arg_quant(const char *s) {
    static const char *const names[] = { "f32", "bf16", "int8", "fp8", "q4" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i]) == 0) return 1;
    return 0;
}

int kr_arg_kv_dtype(const char *s) {
    return strcmp(s, "f32") == 0 || strcmp(s, "bf16") == 0 || strcmp(s, "int8") == 0;
}

int kr_arg_quant_method(const char *s) {
    return strcmp(s, "rtn") == 0 || strcmp(s, "awq") == 0 || strcmp(s, "smoothquant") == 0 ||
           strcmp(s, "gptq") == 0;
}

const char *kr_arg_quant_method_mismatch(const char *method, const char *quant) {
    if (!method || !quant) return NULL;
    int q4 = !strcmp(quant, "q4"), int8 = !strcmp(quant, "int8");
    if (!strcmp(method, "awq") && !q4)
        return int8 ? "--method awq applies to q4 (int8's calibrated method is smoothquant)"
                    : "--method awq applies to q4";
    if (!strcmp(method, "smoothquant") && !int8) return "--method smoothquant applies to int8";
    if (!strcmp(method, "gptq") && !q4 && !int8) return "--method gptq applies to q4 and int8";
    return NULL;
}
