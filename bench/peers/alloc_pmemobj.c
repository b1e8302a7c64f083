/* libpmemobj (PMDK) on a plain file as the allocator peer: a pool of
 * CAPACITY bytes created in FILE. On a file that is not persistent memory,
 * libpmemobj makes each allocation durable with msync (its durable path;
 * PMEM_IS_PMEM_FORCE is left unset). MODE:
 *   atomic  pmemobj_free + pmemobj_alloc (the non-transactional API; each
 *           call is durable when it returns)
 *   tx      one transaction per operation: pmemobj_tx_free + pmemobj_tx_alloc
 * A block's handle is its offset in the pool (PMEMoid.off). */
#include <unistd.h>

#include <libpmemobj.h>

#include "alloc_common.h"

static PMEMobjpool *pool;
static uint64_t pool_uuid;
static int transactional;

static PMEMoid oid_of(uint64_t off) {
    PMEMoid oid = {pool_uuid, off};
    return oid;
}

static uint64_t peer_alloc(uint64_t size) {
    PMEMoid oid = OID_NULL;
    if (!transactional) {
        if (pmemobj_alloc(pool, &oid, size, 0, NULL, NULL) != 0) return 0;
        return oid.off;
    }
    int failed = 0;
    TX_BEGIN(pool) {
        oid = pmemobj_tx_alloc(size, 0);
    }
    TX_ONABORT {
        failed = 1;
    }
    TX_END
    return failed ? 0 : oid.off;
}

static void peer_free(uint64_t handle, uint64_t size) {
    (void)size;
    PMEMoid oid = oid_of(handle);
    if (!transactional) {
        pmemobj_free(&oid);
        return;
    }
    TX_BEGIN(pool) {
        pmemobj_tx_free(oid);
    }
    TX_ONABORT {
        fprintf(stderr, "pmemobj: a free's transaction aborted\n");
        exit(1);
    }
    TX_END
}

static void *peer_address(uint64_t handle) { return pmemobj_direct(oid_of(handle)); }

int main(int argc, char **argv) {
    struct peer_args a;
    if (peer_parse(argc, argv, &a) != 0) return 2;
    if (strcmp(a.mode, "atomic") == 0) {
        transactional = 0;
    } else if (strcmp(a.mode, "tx") == 0) {
        transactional = 1;
    } else {
        fprintf(stderr, "pmemobj: MODE is atomic or tx\n");
        return 2;
    }
    if (a.capacity < PMEMOBJ_MIN_POOL) a.capacity = PMEMOBJ_MIN_POOL;
    double start = peer_now();
    unlink(a.path);
    pool = pmemobj_create(a.path, "larder-bench-heap", a.capacity, 0644);
    if (pool == NULL) {
        fprintf(stderr, "pmemobj: %s\n", pmemobj_errormsg());
        return 1;
    }
    pool_uuid = pmemobj_root(pool, 8).pool_uuid_lo;
    double setup = peer_now() - start;
    int rc = peer_run("pmemobj", a.mode, a.path, a.ops, a.live, a.threads, a.seed, setup);
    pmemobj_close(pool);
    return rc;
}
