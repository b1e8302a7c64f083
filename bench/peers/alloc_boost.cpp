// Boost.Interprocess's managed_mapped_file as the allocator peer: one file
// of CAPACITY bytes (managed_mapped_file cannot grow while mapped), its
// segment manager's default allocator (rbtree best fit, behind the
// segment's interprocess mutex), allocate/deallocate per block.
#include <boost/interprocess/managed_mapped_file.hpp>

#include "alloc_common.h"

namespace bip = boost::interprocess;

static bip::managed_mapped_file *segment;

static uint64_t peer_alloc(uint64_t size) {
    void *p = segment->allocate(size, std::nothrow);
    return reinterpret_cast<uint64_t>(p);
}

static void peer_free(uint64_t handle, uint64_t) { segment->deallocate(reinterpret_cast<void *>(handle)); }

static void *peer_address(uint64_t handle) { return reinterpret_cast<void *>(handle); }

int main(int argc, char **argv) {
    peer_args a;
    if (peer_parse(argc, argv, &a) != 0) return 2;
    double start = peer_now();
    bip::file_mapping::remove(a.path);
    try {
        bip::managed_mapped_file file(bip::create_only, a.path, a.capacity);
        segment = &file;
        double setup = peer_now() - start;
        int rc = peer_run("boost", "managed_mapped_file", a.path, a.ops, a.live, a.threads, a.seed, setup);
        file.flush();
        return rc;
    } catch (const std::exception &e) {
        fprintf(stderr, "boost: %s\n", e.what());
        return 1;
    }
}
