/*
 * cli/service_notify — the service manager's readiness and watchdog protocol (systemd's
 * sd_notify, spoken directly: one datagram of "KEY=value" lines to the unix socket named by
 * $NOTIFY_SOCKET), so `kronos serve` can run as Type=notify with WatchdogSec= without
 * linking libsystemd. Without $NOTIFY_SOCKET every call does nothing.
 */
#ifndef KR_CLI_SERVICE_NOTIFY_H
#define KR_CLI_SERVICE_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

/* Sends `state` ("READY=1\nSTATUS=...") to $NOTIFY_SOCKET: 1 when sent, 0 when there is no
 * such variable, -1 when it could not be sent (why says so: an unusable address, a socket
 * that is gone). */
int kr_service_notify(const char *state, char *why, size_t cap);

/* The watchdog interval the manager asks for ($WATCHDOG_USEC, for this process: a
 * $WATCHDOG_PID naming another process means none), in microseconds; 0 for none. A value
 * that is not a positive integer is none too, with why saying so. */
uint64_t kr_service_watchdog_usec(char *why, size_t cap);

#endif
