/*
 * kernels/thread_scratch — per-thread scratch buffers of the kernels (kernels_internal.h):
 * the packed W block of the f32 GEMM, the AMX B panels of the int8 GEMM.
 *
 * A kernel runs on whatever thread the caller's pool gives it and takes no scratch argument,
 * so its packing buffer lives with the thread: grown on demand, never shrunk (the sizes a model
 * asks for repeat every step, so after the first step nothing is allocated), freed by a pthread
 * key destructor when the thread exits; the main thread's stays reachable through the
 * thread-local pointer until the process ends.
 */
#include "kernels/kernels_internal.h"

#include <pthread.h>
#include <stdlib.h>

static _Thread_local void *t_buf[KR_SCRATCH_SLOTS];
static _Thread_local size_t t_bytes[KR_SCRATCH_SLOTS];
static pthread_key_t g_key[KR_SCRATCH_SLOTS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_keys_ok;

static void keys_make(void) {
    int ok = 1;
    for (int i = 0; i < KR_SCRATCH_SLOTS; i++) ok = ok && pthread_key_create(&g_key[i], free) == 0;
    g_keys_ok = ok;
}

void *kr_thread_scratch(kr_scratch_slot slot, size_t bytes) {
    if ((int)slot < 0 || slot >= KR_SCRATCH_SLOTS) return NULL;
    if (t_bytes[slot] >= bytes && t_buf[slot]) return t_buf[slot];
    pthread_once(&g_once, keys_make);
    if (!g_keys_ok) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
    /* The key holds the newest buffer, so the destructor frees exactly the one in use. */
    if (pthread_setspecific(g_key[slot], p) != 0) {
        free(p);
        return NULL;
    }
    free(t_buf[slot]);
    t_buf[slot] = p;
    t_bytes[slot] = bytes;
    return p;
}
