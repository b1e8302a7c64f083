/* The allocator workload of `larder-bench heap`, shared by the C and C++
 * peers (bench/src/heap_suite/alloc.rs runs the same steps on Larder):
 * each thread owns LIVE / THREADS slots; it first fills every slot with a
 * block (the fill phase), then, OPS / THREADS times, picks a slot by a draw,
 * frees its block and allocates a new one of the draw's size (16 B..4 KiB)
 * in it, writing the block's first 8 bytes (so its page is touched). The live
 * set stays LIVE blocks. A peer supplies `peer_alloc` and `peer_free` over a
 * 64-bit handle (an address, or a pool offset for libpmemobj).
 *
 *   PROGRAM FILE OPS LIVE THREADS SEED CAPACITY [MODE]
 *
 * prints one JSON line: the phases' times, the live bytes at the end and the
 * bytes of the heap's file(s) (apparent and allocated). */
#ifndef LARDER_HEAP_PEERS_ALLOC_COMMON_H
#define LARDER_HEAP_PEERS_ALLOC_COMMON_H

#include <pthread.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocates `size` bytes; returns the block's handle, 0 if out of space. */
static uint64_t peer_alloc(uint64_t size);
/* Frees the block `handle` of `size` bytes. */
static void peer_free(uint64_t handle, uint64_t size);
/* The address of block `handle`. */
static void *peer_address(uint64_t handle);

struct peer_thread {
    pthread_t id;
    uint64_t index, seed, slots, ops;
    uint64_t *handle, *size;
    pthread_barrier_t *fill_done, *go;
    int failed;
};

/* Draws of the fill phase are apart from those of the timed phase. */
#define PEER_FILL_SALT (1ULL << 40)

static int peer_place(struct peer_thread *t, uint64_t slot, uint64_t draw) {
    uint64_t size = peer_size(draw);
    uint64_t h = peer_alloc(size);
    if (h == 0) return -1;
    uint64_t tag = draw;
    memcpy(peer_address(h), &tag, sizeof tag);
    t->handle[slot] = h;
    t->size[slot] = size;
    return 0;
}

static void *peer_thread_main(void *arg) {
    struct peer_thread *t = (struct peer_thread *)arg;
    for (uint64_t s = 0; s < t->slots && !t->failed; s++) {
        if (peer_place(t, s, peer_draw(t->seed, t->index, PEER_FILL_SALT + s)) != 0) t->failed = 1;
    }
    pthread_barrier_wait(t->fill_done);
    pthread_barrier_wait(t->go);
    for (uint64_t i = 0; i < t->ops && !t->failed; i++) {
        uint64_t d = peer_draw(t->seed, t->index, i);
        uint64_t s = peer_slot(d, t->slots);
        peer_free(t->handle[s], t->size[s]);
        if (peer_place(t, s, d) != 0) t->failed = 1;
    }
    return NULL;
}

/* Runs the workload; `path` is the heap's file or directory, measured at the
 * end. Returns the exit code. */
static int peer_run(const char *peer, const char *mode, const char *path, uint64_t ops, uint64_t live,
                    uint64_t threads, uint64_t seed, double setup_secs) {
    if (threads == 0 || live < threads) {
        fprintf(stderr, "need 1 <= THREADS <= LIVE\n");
        return 2;
    }
    struct peer_thread *t = (struct peer_thread *)calloc(threads, sizeof *t);
    pthread_barrier_t fill_done, go;
    pthread_barrier_init(&fill_done, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < threads; i++) {
        t[i].index = i;
        t[i].seed = seed;
        t[i].slots = live / threads;
        t[i].ops = ops / threads;
        t[i].handle = (uint64_t *)calloc(t[i].slots, sizeof(uint64_t));
        t[i].size = (uint64_t *)calloc(t[i].slots, sizeof(uint64_t));
        t[i].fill_done = &fill_done;
        t[i].go = &go;
    }
    double fill_start = peer_now();
    for (uint64_t i = 0; i < threads; i++) pthread_create(&t[i].id, NULL, peer_thread_main, &t[i]);
    pthread_barrier_wait(&fill_done);
    double start = peer_now();
    pthread_barrier_wait(&go);
    for (uint64_t i = 0; i < threads; i++) pthread_join(t[i].id, NULL);
    double secs = peer_now() - start;
    uint64_t live_bytes = 0, blocks = 0, done_ops = 0;
    for (uint64_t i = 0; i < threads; i++) {
        if (t[i].failed) {
            fprintf(stderr, "%s: out of space (capacity too small for the live set)\n", peer);
            return 1;
        }
        for (uint64_t s = 0; s < t[i].slots; s++) live_bytes += t[i].size[s];
        blocks += t[i].slots;
        done_ops += t[i].ops;
    }
    unsigned long long apparent = 0, allocated = 0;
    peer_du(path, &apparent, &allocated);
    printf("{\"peer\":\"%s\",\"mode\":\"%s\",\"threads\":%llu,\"ops\":%llu,\"setup_secs\":%.9f,"
           "\"fill_secs\":%.9f,\"secs\":%.9f,\"live_blocks\":%llu,\"live_bytes\":%llu,"
           "\"file_apparent_bytes\":%llu,\"file_allocated_bytes\":%llu,\"vmhwm_kib\":%llu}\n",
           peer, mode, (unsigned long long)threads, (unsigned long long)done_ops, setup_secs, start - fill_start, secs,
           (unsigned long long)blocks, (unsigned long long)live_bytes, apparent, allocated,
           peer_status_kib("VmHWM"));
    return 0;
}

/* Parses the command line shared by the peers. */
struct peer_args {
    const char *path, *mode;
    uint64_t ops, live, threads, seed, capacity;
};

static int peer_parse(int argc, char **argv, struct peer_args *a) {
    if (argc < 7 || argc > 8) {
        fprintf(stderr, "usage: %s FILE OPS LIVE THREADS SEED CAPACITY [MODE]\n", argv[0]);
        return -1;
    }
    a->path = argv[1];
    a->ops = strtoull(argv[2], NULL, 10);
    a->live = strtoull(argv[3], NULL, 10);
    a->threads = strtoull(argv[4], NULL, 10);
    a->seed = strtoull(argv[5], NULL, 10);
    a->capacity = strtoull(argv[6], NULL, 10);
    a->mode = argc == 8 ? argv[7] : "default";
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif
