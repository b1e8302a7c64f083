/* What every peer program of `larder-bench heap` shares: the pseudo-random
 * draws (the same functions as bench/src/heap_suite/draw.rs, so every engine
 * sees the same sizes and slots), the clock, the process's peak memory and
 * the bytes a file or directory holds. */
#ifndef LARDER_HEAP_PEERS_COMMON_H
#define LARDER_HEAP_PEERS_COMMON_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* The splitmix64 finalizer (bench/src/workload.rs: mix64). */
static inline uint64_t peer_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Smallest and largest block of the allocator workload, bytes. */
#define PEER_MIN_BLOCK 16u
#define PEER_MAX_BLOCK 4096u

/* The draw of operation `op` of thread `thread`. */
static inline uint64_t peer_draw(uint64_t seed, uint64_t thread, uint64_t op) {
    return peer_mix64(seed ^ (thread << 48) ^ op ^ 0x616c6c6f63ULL);
}

/* The slot (below `slots`) a draw frees and refills. */
static inline uint64_t peer_slot(uint64_t draw, uint64_t slots) {
    return draw % slots;
}

/* The block size of a draw, in [PEER_MIN_BLOCK, PEER_MAX_BLOCK]. */
static inline uint64_t peer_size(uint64_t draw) {
    return PEER_MIN_BLOCK + (draw >> 32) % (PEER_MAX_BLOCK - PEER_MIN_BLOCK + 1);
}

static inline double peer_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A kB field of /proc/self/status (VmHWM, ...), in KiB; 0 if absent. */
static inline unsigned long long peer_status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long v = 0;
    size_t n = strlen(field);
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

/* Sum of st_size (apparent) and st_blocks * 512 (allocated) of a file, or of
 * every regular file below a directory. */
static inline void peer_du(const char *path, unsigned long long *apparent, unsigned long long *allocated) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISREG(st.st_mode)) {
        *apparent += (unsigned long long)st.st_size;
        *allocated += (unsigned long long)st.st_blocks * 512ULL;
        return;
    }
    if (!S_ISDIR(st.st_mode)) return;
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char child[8192];
        int n = snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        if (n > 0 && (size_t)n < sizeof child) peer_du(child, apparent, allocated);
    }
    closedir(d);
}

static inline void peer_die(const char *what) {
    perror(what);
    exit(1);
}

#endif
