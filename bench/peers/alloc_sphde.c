/* SPHDE as the allocator peer: the SAS region is joined with its store in
 * FILE (a directory of segment files, mapped at SPHDE's fixed addresses),
 * and blocks come from one SAS Simple Heap (SASSimpleHeapCreate: a
 * power-of-two block of the region, at most one 256 MiB segment on x86-64)
 * by SASSimpleHeapAlloc / SASSimpleHeapFree, the locking versions (the
 * heap's SAS lock serialises threads). CAPACITY is rounded up to a power
 * of two. The region (its files and its lock segments) is removed at exit
 * by SASRemove. */
#include <sasconf.h>
#include <sassim.h>
#include <sassimpleheap.h>

#include "alloc_common.h"

static SASSimpleHeap_t heap;

static uint64_t peer_alloc(uint64_t size) { return (uint64_t)(uintptr_t)SASSimpleHeapAlloc(heap, size); }

static void peer_free(uint64_t handle, uint64_t size) {
    if (SASSimpleHeapFree(heap, (void *)(uintptr_t)handle, size) != 0) {
        fprintf(stderr, "sphde: SASSimpleHeapFree refused a block\n");
        exit(1);
    }
}

static void *peer_address(uint64_t handle) { return (void *)(uintptr_t)handle; }

int main(int argc, char **argv) {
    struct peer_args a;
    if (peer_parse(argc, argv, &a) != 0) return 2;
    uint64_t size = 1ULL << 12;
    while (size < a.capacity) size <<= 1;
    if (size > (uint64_t)SegmentSize) {
        fprintf(stderr, "sphde: a simple heap holds at most %lu bytes, asked %llu\n", (unsigned long)SegmentSize,
                (unsigned long long)size);
        return 1;
    }
    double start = peer_now();
    if (SASJoinRegionByName(a.path) != 0) {
        fprintf(stderr, "sphde: SASJoinRegionByName(%s) failed\n", a.path);
        return 1;
    }
    heap = SASSimpleHeapCreate(size);
    if (heap == 0) {
        fprintf(stderr, "sphde: SASSimpleHeapCreate(%llu) failed\n", (unsigned long long)size);
        SASRemove();
        return 1;
    }
    double setup = peer_now() - start;
    int rc = peer_run("sphde", "SASSimpleHeap", a.path, a.ops, a.live, a.threads, a.seed, setup);
    SASRemove();
    return rc;
}
