/* analyst/render — format names and the dispatcher (see render.h). */
#include "analyst/render.h"

#include <string.h>

#include "base/error.h"

int kr_report_format_parse(const char *s, kr_report_format *out) {
    if (!s) return -1;
    if (!strcmp(s, "json"))
        *out = KR_FORMAT_JSON;
    else if (!strcmp(s, "md") || !strcmp(s, "markdown"))
        *out = KR_FORMAT_MD;
    else if (!strcmp(s, "html"))
        *out = KR_FORMAT_HTML;
    else
        return -1;
    return 0;
}

kr_status kr_render(const kr_report_set *set, kr_report_format fmt, char **out, kr_error *err) {
    switch (fmt) {
    case KR_FORMAT_JSON: return kr_render_json(set, out, err);
    case KR_FORMAT_MD: return kr_render_md(set, out, err);
    case KR_FORMAT_HTML: return kr_render_html(set, out, err);
    }
    return kr_error_set(err, KR_ERR_INVALID_ARG, "render: unknown format %d", (int)fmt);
}
