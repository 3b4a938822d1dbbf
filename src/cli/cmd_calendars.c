/*
 * cli/cmd_calendars — `kronos calendars`: each market's calendar, the years whose holidays it
 * lists and where it was read from; and the one place the CLI loads the calendars (the
 * shipped files next to the binary, then --calendar-dir / $KRONOS_CALENDAR_DIR), so every
 * command sees the same set.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/parse.h"
#include "common/options.h"
#include "cli/share_paths.h"
#include "kronos.h"
#include "kronos/series.h"

#define CMD "calendars"

static char g_flag_dir[PATH_MAX]; /* --calendar-dir, "" when not given */

int kr_cli_load_calendars(const char *user_dir, int from_flag, char *msg, size_t cap) {
    char shipped[PATH_MAX];
    if (kr_share_path("data/calendars", shipped, sizeof shipped) != 0) shipped[0] = '\0';
    if (from_flag) snprintf(g_flag_dir, sizeof g_flag_dir, "%s", user_dir ? user_dir : "");
    kr_error err = { 0 };
    if (kr_calendar_load(shipped, user_dir, &err) != KR_OK) {
        snprintf(msg, cap, "%s", err.message);
        return -1;
    }
    return 0;
}

int kr_cli_calendar_dir_given(void) { return g_flag_dir[0] != '\0'; }

static const kr_cli_opt k_opts[] = {
    { "json", 'j', KR_CLI_FLAG, NULL, 0, 0, NULL, "one JSON object per calendar, in an array" },
    { "help", 'h', KR_CLI_FLAG, NULL, 0, 0, NULL, "this text" },
};

const kr_cli_command kr_cli_calendars_spec = {
    "calendars",
    "[--json]   (and, as every command, [--calendar-dir DIR])",
    "list the exchange calendars: each market's years of holidays and their source",
    "Lists the exchange calendars forecasts use for their future timestamps: each market,\n"
    "the years whose holidays it lists and where it was read from. Past its last year a\n"
    "calendar knows no holidays, and every output that stamps bars there says so.\n"
    "\n"
    "The calendars are compiled in, read again from the installed data/calendars (so a\n"
    "package update needs no rebuild), then from a directory of your own:\n"
    "--calendar-dir DIR (any command takes it) or $KRONOS_CALENDAR_DIR, or the\n"
    "server's calendar_dir key. A file there replaces the calendar of its name, or adds\n"
    "years to one:\n"
    "  {\"extends\": \"SSE\", \"years\": [2027, 2027], \"source\": \"State Council notice\",\n"
    "   \"holidays\": [\"2027-01-01\", ...], \"early_closes\": []}\n"
    "(data/calendars/README.md describes every field).\n",
    k_opts,
    (int)(sizeof k_opts / sizeof k_opts[0]),
    KR_CLI_FLAG,
    0,
    NULL,
    NULL,
};

int kr_cmd_calendars(int argc, char **argv) {
    int json = 0;
    kr_cli_parse ps;
    kr_cli_parse_begin(&ps, &kr_cli_calendars_spec, NULL, argc, argv);
    for (int c; (c = kr_cli_parse_next(&ps)) != 0;) {
        switch (c) {
        case 'j': json = 1; break;
        }
    }
    if (ps.status) return ps.status < 0 ? 0 : ps.status;
    if (optind < argc) return kr_cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    const kr_calendar *const *list = NULL;
    int n = 0;
    kr_error err = { 0 };
    if (kr_calendar_list(&list, &n, &err) != KR_OK) return kr_cli_fail(CMD, err.message);
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    if (!json) printf("%-8s %-11s %-10s %s\n", "market", "holidays", "aliases", "source");
    for (int i = 0; i < n; i++) {
        kr_calendar_desc d;
        kr_calendar_get_desc(list[i], &d);
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", d.name);
            cJSON_AddStringToObject(o, "title", d.title);
            cJSON *y = cJSON_AddArrayToObject(o, "years");
            cJSON_AddItemToArray(y, cJSON_CreateNumber(d.year_first));
            cJSON_AddItemToArray(y, cJSON_CreateNumber(d.year_last));
            cJSON_AddNumberToObject(o, "holidays", d.n_holidays);
            cJSON *al = cJSON_AddArrayToObject(o, "aliases");
            for (int k = 0; k < d.n_aliases; k++)
                cJSON_AddItemToArray(al, cJSON_CreateString(d.aliases[k]));
            cJSON_AddStringToObject(o, "timezone", d.timezone);
            cJSON_AddStringToObject(o, "origin", d.origin);
            cJSON_AddStringToObject(o, "source", d.source);
            cJSON_AddItemToArray(arr, o);
            continue;
        }
        char years[24], aliases[64] = "";
        snprintf(years, sizeof years, "%d-%d", d.year_first, d.year_last);
        for (int k = 0, len = 0; k < d.n_aliases && k < 2; k++)
            len += snprintf(aliases + len, sizeof aliases - (size_t)len, "%s%s", k ? "," : "",
                            d.aliases[k]);
        printf("%-8s %-11s %-10s %s\n", d.name, years, aliases, d.origin);
    }
    if (json) {
        char *text = cJSON_Print(arr);
        cJSON_Delete(arr);
        if (!text) return kr_cli_fail(CMD, "out of memory");
        printf("%s\n", text);
        cJSON_free(text);
    }
    return 0;
}
