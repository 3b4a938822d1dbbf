/*
 * cli/cmd_gen_random — `kronos gen-random`: writes a tokenizer + predictor checkpoint pair
 * with random weights at a named public shape (tiny, mini, small, base), for tests and
 * benchmarks that need real-sized models without downloading them. Flag parsing only; the
 * work is kr_model_write_random_shape (kronos.h).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/options.h"
#include "kronos.h"

static const kr_cli_opt k_opts[] = {
    { "shape", 's', KR_CLI_TEXT, "NAME", 0, 0, NULL,
      "tiny  (tokenizer 32/2 heads, predictor 32 x 2 layers, learn_te false)\n"
      "mini  (Kronos-Tokenizer-base + Kronos-mini: 256 x 4 layers)\n"
      "small (Kronos-Tokenizer-base + Kronos-small: 512 x 8 layers)\n"
      "base  (Kronos-Tokenizer-base + Kronos-base: 832 x 12 layers)" },
    { "seed", 'S', KR_CLI_NUM, "S", 0, 0, NULL,
      "unsigned 64-bit seed, decimal or 0x hex (default 0)" },
    { "out", 'o', KR_CLI_DIR, "DIR", 0, 0, NULL,
      "output directory, created if missing; refused when it already\nholds a checkpoint "
      "(DIR/predictor or DIR/tokenizer config.json or\nmodel.safetensors)" },
    { "force", 'f', KR_CLI_FLAG, NULL, 0, 0, NULL, "replace that checkpoint with random weights" },
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

/* The flags of `kronos gen-random` (common/options.h): its --help, getopt table, completion and
 * man page. */
const kr_cli_command kr_cli_gen_random_spec = {
    "gen-random",
    "--shape tiny|mini|small|base --out DIR [--seed S] [--force]",
    "write a random-weight checkpoint of a real Kronos shape",
    "Writes DIR/tokenizer and DIR/predictor (config.json + model.safetensors) with\n"
    "deterministic random weights and the tensor names, shapes and dtypes of a real\n"
    "Kronos checkpoint. The same shape and seed always give identical files.\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    14,
    NULL,
    NULL,
};

static int usage_error(const char *fmt, const char *arg) {
    fputs("kronos gen-random: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(try 'kronos gen-random --help')\n", stderr);
    return 2;
}

/* The first file of a checkpoint that writing into out would replace (a bundled model given as
 * --out by mistake), into path; 0 when there is none. lstat: a link counts, dangling or not. */
static int checkpoint_file_in(const char *out, char *path, size_t cap) {
    static const char *const parts[] = { "predictor", "tokenizer" };
    static const char *const files[] = { "config.json", "model.safetensors" };
    for (int d = 0; d < 2; d++)
        for (int f = 0; f < 2; f++) {
            struct stat sb;
            snprintf(path, cap, "%s/%s/%s", out, parts[d], files[f]);
            if (lstat(path, &sb) == 0) return 1;
        }
    return 0;
}

int kr_cmd_gen_random(int argc, char **argv) {
    struct option opts[KR_CLI_MAX_OPTS];
    kr_cli_opts_getopt(&kr_cli_gen_random_spec, opts, KR_CLI_MAX_OPTS);
    const char *shape_name = NULL, *out = NULL;
    uint64_t seed = 0;
    int force = 0;
    /* The dispatcher may already have run getopt; 0 makes glibc reinitialise its state. */
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 's': shape_name = optarg; break;
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case 'S':
            /* Decimal (a leading zero is not octal) or 0x hex, as every other command's --seed. */
            if (!kr_arg_u64(optarg, &seed))
                return usage_error(
                    "--seed: '%s' is not an unsigned 64-bit integer (decimal or 0x hex)", optarg);
            break;
        case 'h': kr_cli_opts_help(&kr_cli_gen_random_spec, stdout); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    if (!shape_name) return usage_error("%s", "--shape is required");
    if (!out || !*out) return usage_error("%s", "--out is required");
    if (!kr_random_shape_exists(shape_name))
        return usage_error("--shape: unknown shape '%s' (expected tiny, mini, small or base)",
                           shape_name);

    char existing[4200], msg[8800];
    if (!force && checkpoint_file_in(out, existing, sizeof existing)) {
        snprintf(msg, sizeof msg,
                 "%s already exists: --out %s holds a checkpoint, which random weights would "
                 "replace; choose another --out, or add --force to overwrite it",
                 existing, out);
        return kr_cli_fail("gen-random", msg);
    }

    kr_error err = { 0 };
    if (kr_model_write_random_shape(shape_name, seed, out, &err) != KR_OK)
        return kr_cli_fail("gen-random", err.message);
    printf("wrote %s/tokenizer and %s/predictor (shape %s, seed %" PRIu64 ")\n", out, out,
           shape_name, seed);
    return 0;
}
