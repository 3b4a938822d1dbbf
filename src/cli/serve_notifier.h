/*
 * cli/serve_notifier — `kronos serve` under a service manager (systemd Type=notify): READY
 * once it listens, a STATUS line kept current, STOPPING when a drain starts, and the
 * watchdog's pings, each sent only after the engine thread came round between two steps
 * (kr_context_ping), so a stuck engine stops the pings and the manager restarts the service.
 * Nothing happens without $NOTIFY_SOCKET.
 */
#ifndef KR_CLI_SERVE_NOTIFIER_H
#define KR_CLI_SERVE_NOTIFIER_H

#include "kronos/server.h"

typedef struct serve_notifier serve_notifier;

/* Says READY (with MAINPID and `status`) and starts the status/watchdog thread. A manager
 * that cannot be told is said once on stderr through log; serving goes on. NULL when there
 * is no manager (or no thread could be started). */
serve_notifier *serve_notifier_start(kr_server *srv, const char *status,
                                     void (*log)(void *user, const char *line));
/* Says STOPPING with `status` (the drain has begun). n may be NULL. */
void serve_notifier_stopping(serve_notifier *n, const char *status);
/* Stops the thread and frees. n may be NULL. */
void serve_notifier_free(serve_notifier *n);

#endif
