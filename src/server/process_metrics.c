/*
 * server/process_metrics — process series from /proc (see process_metrics.h).
 */
#include "server/process_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kronos.h"

struct kr_process_metrics {
    kr_metric *cpu, *rss, *fds, *start, *hit_ratio;
    kr_metric *queried, *hit; /* the scheduler's prefix-cache token counters */
};

/* Process start, Unix seconds: boot time (/proc/stat btime) + start ticks (/proc/self/stat
 * field 22). 0 when unreadable. */
static double start_time(void) {
    double btime = 0, ticks = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "btime ", 6)) btime = strtod(line + 6, NULL);
        fclose(f);
    }
    f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        /* The command name (field 2) may hold spaces: count fields after its ')'. */
        char *p = strrchr(buf, ')');
        for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
        if (p) ticks = strtod(p + 1, NULL);
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (btime <= 0 || hz <= 0) return 0;
    return btime + ticks / (double)hz;
}

kr_process_metrics *kr_process_metrics_create(kr_metrics *m) {
    kr_process_metrics *pm = calloc(1, sizeof *pm);
    if (!pm) return NULL;
    static const kr_metric_desc k_cpu = { "process_cpu_seconds_total", KR_METRIC_COUNTER,
                                          "Total user and system CPU time spent in seconds", NULL,
                                          0 };
    static const kr_metric_desc k_rss = { "process_resident_memory_bytes", KR_METRIC_GAUGE,
                                          "Resident memory size in bytes", NULL, 0 };
    static const kr_metric_desc k_fds = { "process_open_fds", KR_METRIC_GAUGE,
                                          "Number of open file descriptors", NULL, 0 };
    static const kr_metric_desc k_start = {
        "process_start_time_seconds", KR_METRIC_GAUGE,
        "Start time of the process since the Unix epoch in seconds", NULL, 0
    };
    static const kr_metric_desc k_hit_ratio = {
        "kronos_prefix_cache_hit_ratio", KR_METRIC_GAUGE,
        "Prefix-cache hit tokens / queried tokens since start", NULL, 0
    };
    static const kr_metric_desc k_build = { "kronos_build_info", KR_METRIC_GAUGE,
                                            "1; the library version and the SIMD kernels in use",
                                            NULL, 0 };
    pm->cpu = kr_metrics_series(m, &k_cpu, "");
    pm->rss = kr_metrics_series(m, &k_rss, "");
    pm->fds = kr_metrics_series(m, &k_fds, "");
    pm->start = kr_metrics_series(m, &k_start, "");
    pm->hit_ratio = kr_metrics_series(m, &k_hit_ratio, "");
    /* The scheduler's series (the same descriptors, so the same handles). */
    pm->queried = kr_metrics_series(m, &kr_metric_prefix_queried_tokens, "");
    pm->hit = kr_metrics_series(m, &kr_metric_prefix_hit_tokens, "");
    char labels[160];
    snprintf(labels, sizeof labels, "version=\"%s\",isa=\"%s\"", kr_version(),
             kr_isa_name(kr_isa_active()));
    kr_metric_set(kr_metrics_series(m, &k_build, labels), 1.0);
    double st = start_time();
    if (st > 0) kr_metric_set(pm->start, st);
    return pm;
}

void kr_process_metrics_free(kr_process_metrics *pm) { free(pm); }

void kr_process_metrics_update(kr_process_metrics *pm) {
    if (!pm) return;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        kr_metric_set(pm->cpu, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
                                   (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        unsigned long size = 0, resident = 0;
        if (fscanf(f, "%lu %lu", &size, &resident) == 2)
            kr_metric_set(pm->rss, (double)resident * (double)sysconf(_SC_PAGESIZE));
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int n = 0;
        for (struct dirent *e; (e = readdir(d));)
            if (e->d_name[0] != '.') n++;
        closedir(d);
        kr_metric_set(pm->fds, (double)(n - 1)); /* not counting the directory just opened */
    }
    const double queried = kr_metric_value(pm->queried), hit = kr_metric_value(pm->hit);
    kr_metric_set(pm->hit_ratio, queried > 0 ? hit / queried : 0.0);
}
