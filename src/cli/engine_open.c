/* cli/engine_open — see engine_open.h. */
#include "cli/engine_open.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/progress.h"

int kr_cli_engine_open(const char *cmd, const char *pred_dir, const char *tok_dir,
                       const char *quant, int allow_nonfinite, int threads, const char *kv_dtype,
                       kr_cli_engine *e) {
    const kr_context_params cp = kr_context_default_params();
    return kr_cli_engine_open_with(cmd, pred_dir, tok_dir, quant, allow_nonfinite, threads,
                                   kv_dtype, &cp, e);
}

int kr_cli_engine_open_with(const char *cmd, const char *pred_dir, const char *tok_dir,
                            const char *quant, int allow_nonfinite, int threads,
                            const char *kv_dtype, const kr_context_params *params,
                            kr_cli_engine *e) {
    memset(e, 0, sizeof *e);
    kr_error err = { 0 };
    kr_model_params mp = kr_model_default_params();
    mp.quant = quant;
    mp.allow_nonfinite = allow_nonfinite;
    if (kr_model_load(pred_dir, tok_dir, &mp, &e->model, &err) != KR_OK) {
        /* Swapped --model / --tokenizer and the like get a hint. */
        char hint[2 * PATH_MAX + 128], msg[sizeof err.message + sizeof hint];
        kr_cli_model_hint(pred_dir, tok_dir, hint, sizeof hint);
        snprintf(msg, sizeof msg, "%s%s", err.message, hint);
        return kr_cli_fail(cmd, msg);
    }
    kr_context_params cp = *params;
    cp.n_threads = threads;
    cp.kv_dtype = kv_dtype;
    if (kr_context_create(e->model, &cp, &e->ctx, &err) != KR_OK) {
        kr_model_free(e->model);
        e->model = NULL;
        return kr_cli_fail(cmd, err.message);
    }
    return 0;
}

void kr_cli_engine_close(kr_cli_engine *e) {
    kr_context_free(e->ctx);
    kr_model_free(e->model);
    memset(e, 0, sizeof *e);
}
