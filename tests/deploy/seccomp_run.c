/*
 * seccomp_run — runs a command under the system-call filter a systemd unit gives it, so the
 * tests can run `kronos serve` as deploy/kronos-serve.service would confine it without
 * systemd as PID 1: SystemCallFilter= (an allow list: every other system call fails with
 * --errno's error or, with --kill, kills the process), and MemoryDenyWriteExecute=yes the way
 * systemd builds it (mmap with both PROT_WRITE and PROT_EXEC, mprotect and pkey_mprotect with
 * PROT_EXEC, shmat with SHM_EXEC fail with EPERM).
 *
 *   seccomp_run --allow FILE [--kill | --errno N] [--deny-write-execute] -- COMMAND [ARG...]
 *
 * FILE holds system-call names, one per line (`systemd-analyze syscall-filter` expanded);
 * names this kernel or libseccomp does not know are skipped, as systemd skips them.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

static int usage(void) {
    fputs("usage: seccomp_run --allow FILE [--kill | --errno N] [--deny-write-execute] -- "
          "COMMAND [ARG...]\n",
          stderr);
    return 2;
}

/* Adds every known name of path to ctx as allowed; returns the count, -1 on a read error. */
static int allow_listed(scmp_filter_ctx ctx, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "seccomp_run: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, " \t\r\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        int nr = seccomp_syscall_resolve_name(line);
        if (nr == __NR_SCMP_ERROR) continue; /* unknown here: systemd skips it too */
        if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) == 0) n++;
    }
    fclose(f);
    return n;
}

/* systemd's MemoryDenyWriteExecute=yes: the calls that would make memory writable and
 * executable at once, or executable after the fact, fail with EPERM. */
static int deny_write_execute(scmp_filter_ctx ctx) {
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    const scmp_datum_t wx = PROT_WRITE | PROT_EXEC;
    int rc = 0;
    rc |= seccomp_rule_add(ctx, eperm, SCMP_SYS(mmap), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, wx, wx));
    rc |= seccomp_rule_add(ctx, eperm, SCMP_SYS(mprotect), 1,
                           SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
    rc |= seccomp_rule_add(ctx, eperm, SCMP_SYS(pkey_mprotect), 1,
                           SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC));
    rc |= seccomp_rule_add(ctx, eperm, SCMP_SYS(shmat), 1,
                           SCMP_A2(SCMP_CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC));
    return rc;
}

/* Loads ctx (no_new_privs set, as NoNewPrivileges=yes does, so no privilege is needed) and
 * releases it; 0 on success. */
static int load(scmp_filter_ctx ctx) {
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1) != 0 || seccomp_load(ctx) != 0;
    seccomp_release(ctx);
    if (rc) fputs("seccomp_run: could not load a filter\n", stderr);
    return rc;
}

int main(int argc, char **argv) {
    const char *allow = NULL;
    int kill = 0, err_no = EPERM, wx = 0, i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--allow") && i + 1 < argc)
            allow = argv[++i];
        else if (!strcmp(argv[i], "--kill"))
            kill = 1;
        else if (!strcmp(argv[i], "--errno") && i + 1 < argc)
            err_no = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--deny-write-execute"))
            wx = 1;
        else if (!strcmp(argv[i], "--"))
            break;
        else
            return usage();
    }
    if (!allow || i + 1 >= argc || err_no <= 0) return usage();
    /* Two filters, as systemd loads them: the kernel runs every loaded filter and the most
     * restrictive answer wins, so the write-execute rules refuse what the allow list lets
     * through. That one first: once the allow list is in, seccomp(2) itself is not allowed. */
    if (wx) {
        scmp_filter_ctx deny = seccomp_init(SCMP_ACT_ALLOW);
        if (!deny || deny_write_execute(deny) != 0) {
            fputs("seccomp_run: could not build the write-execute filter\n", stderr);
            if (deny) seccomp_release(deny);
            return 1;
        }
        if (load(deny)) return 1;
    }
    scmp_filter_ctx ctx = seccomp_init(kill ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(err_no));
    if (!ctx) {
        fputs("seccomp_run: seccomp_init failed\n", stderr);
        return 1;
    }
    const int n = allow_listed(ctx, allow);
    if (n <= 0) {
        if (n == 0) fputs("seccomp_run: no known system call in the allow list\n", stderr);
        seccomp_release(ctx);
        return 1;
    }
    if (load(ctx)) return 1;
    execvp(argv[i + 1], argv + i + 1);
    fprintf(stderr, "seccomp_run: %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}
