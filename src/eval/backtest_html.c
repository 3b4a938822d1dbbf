/* eval/backtest_html — placeholder (filled in below). */
#include "base/error.h"
#include "eval/backtest_internal.h"

kr_status kr_bt_render_html(const kr_backtest_report *r, char **out, kr_error *err) {
    (void)r;
    (void)out;
    return kr_error_set(err, KR_ERR_UNSUPPORTED, "backtest HTML: not yet");
}
