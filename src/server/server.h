/*
 * server/server — what the server's own files and tests need beyond kronos/server.h (the
 * server's API, routes and status codes): the drift monitor and the metrics registry.
 */
#ifndef KR_SERVER_SERVER_H
#define KR_SERVER_SERVER_H

#include "engine/context.h"
#include "engine/metrics.h"
#include "kronos.h"
#include "kronos/server.h"
#include "server/config.h"

struct kr_drift *kr_server_drift(kr_server *s); /* NULL without a shadow (tests flush it) */
/* The metrics registry (borrowed). */
kr_metrics *kr_server_metrics(kr_server *s);

#endif
