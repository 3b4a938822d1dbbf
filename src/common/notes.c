/*
 * common/notes — advice beside a result (see notes.h).
 */
#include "common/notes.h"

#include <stdio.h>

int kr_quantize_at_load_note(const kr_model_info *mi, double forecast_seconds, char *buf,
                             size_t size) {
    if (!mi || mi->quant_seconds <= 0 || !(forecast_seconds > 0) ||
        mi->quant_seconds <= 0.05 * forecast_seconds)
        return 0;
    snprintf(buf, size,
             "quantising to %s at load took %.2f s, %.0f %% of this forecast: run `kronos "
             "quantize --quant %s --out DIR` once and pass --model DIR to skip it",
             mi->quant, mi->quant_seconds, 100.0 * mi->quant_seconds / forecast_seconds, mi->quant);
    return 1;
}
