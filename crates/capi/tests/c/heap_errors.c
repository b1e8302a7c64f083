/*
 * heap_errors.c: the heap API's failures, from C. Every wrong call must
 * return -1, NULL or the null larder_nptr, set errno (and larder_mferrno)
 * to the documented value and leave the heap usable; none may crash.
 * Exits 1 at the first call that does otherwise.
 *
 *   ./heap_errors STORE_DIR        the errors of an embedded heap
 *   ./heap_errors --list STORE     then, in a new process: the blocks left
 *                                  by the first run are there
 *   ./heap_errors --busy STORE     a store another process holds: EBUSY
 *   ./heap_errors --race STORE NAME   a store `larder serve` serves: racing
 *                                  processes for one name, one winner
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larder_heap.h"

static int failures;

/* A node of the list of blocks the test builds with larder_mfalloc_in. */
typedef struct {
    larder_nptr next;
    uint64_t value;
} list_node;

/* Checks that the call just made failed with `expected`: `failed` says it
 * returned its failure value. */
static void expect(int failed, int expected, const char *what)
{
    int seen = errno;
    if (!failed || seen != expected || larder_mferrno() != expected) {
        fprintf(stderr, "heap_errors: FAILED: %s: failed %d, errno %d, larder_mferrno %d, wanted %d (%s)\n", what,
                failed, seen, larder_mferrno(), expected, larder_mferror());
        failures++;
    }
}

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "heap_errors: FAILED: %s (errno %d: %s)\n", what, larder_mferrno(), larder_mferror());
        exit(1);
    }
}

static int is_null(larder_nptr p)
{
    return p.object == 0 && p.offset == 0 && p.generation == 0;
}

/* In a new process: the list of blocks heap_errors left is there, and
 * its freed blocks stayed freed. */
static int walk_list(const char *store)
{
    check(larder_mfdopen(store) == 0, "larder_mfdopen");
    larder_mfobj *arena = larder_mfgetobjbyname("list");
    check(arena != NULL, "the list's object by name");
    larder_nptr at = *(larder_nptr *)larder_mfdreference(arena);
    larder_nptr first = at;
    int seen = 0;
    for (; !is_null(at); seen++) {
        list_node *node = larder_mfderef(at);
        check(node != NULL && node->value == (uint64_t)(99 - 2 * seen), "a block's value in a new process");
        at = node->next;
    }
    check(seen == 50, "fifty blocks in a new process");
    check(larder_mffree_in(first) == 0, "freeing a block in a new process");
    expect(larder_mfderef(first) == NULL, ESTALE, "the block freed in a new process");
    check(larder_mfclose() == 0, "larder_mfclose");
    printf("list: 50 blocks\n");
    return failures == 0 ? 0 : 1;
}

/* A store another process has open (and no server answers for). */
static int busy(const char *store)
{
    expect(larder_mfdopen(store) == -1, EBUSY, "larder_mfdopen of a store another process holds");
    expect(larder_heap_open(store, NULL, 0) == NULL, EBUSY, "larder_heap_open of a store another process holds");
    printf("busy: refused with EBUSY\n");
    return failures == 0 ? 0 : 1;
}

/* A store `larder serve` serves: the heap is the server's. One of the
 * processes racing for `name` wins it; every one then finds the winner's
 * object by the name, with the bytes the winner wrote before naming it;
 * the losers free their own objects. */
static int race(const char *store, const char *name)
{
    check(larder_mfdopen(store) == 0, "larder_mfdopen of a served store");
    larder_mfobj *mine = larder_mfalloc(64);
    check(mine != NULL, "larder_mfalloc");
    char *bytes = larder_mfdreference(mine);
    check(bytes != NULL, "larder_mfdreference");
    snprintf(bytes, 64, "object %llu", (unsigned long long)mine->nptr.object);
    int won = larder_mfaddname(mine, name) == 0;
    if (!won) {
        expect(1, EEXIST, "larder_mfaddname of a name another process took");
    }
    larder_mfobj *named = larder_mfgetobjbyname(name);
    check(named != NULL, "larder_mfgetobjbyname of the raced name");
    check(won == (named->nptr.object == mine->nptr.object), "the name names the winner's object");
    const char *seen = larder_mfdreference(named);
    check(seen != NULL, "larder_mfdreference of the named object");
    char want[64];
    snprintf(want, sizeof want, "object %llu", (unsigned long long)named->nptr.object);
    check(strncmp(seen, want, sizeof want) == 0, "the winner's bytes, through the name");
    /* Blocks and growth are requests to the server too. */
    larder_nptr block = larder_mfalloc_in(mine, 24, 8);
    check(!is_null(block), "larder_mfalloc_in on a served heap");
    char *in_block = larder_mfderef(block);
    check(in_block != NULL, "larder_mfderef of the block");
    memset(in_block, 0x5a, 24);
    check(larder_mffree_in(block) == 0, "larder_mffree_in");
    expect(larder_mfderef(block) == NULL, ESTALE, "larder_mfderef of a freed block");
    check(larder_mfgrow(mine, 1 << 20) == 0, "larder_mfgrow");
    check(larder_mfsize(mine) == 1 << 20, "the size after larder_mfgrow");
    if (!won) {
        check(larder_mffreeobj(mine) == 0, "larder_mffreeobj of a loser's object");
        expect(larder_mfgetobj(mine->nptr) == NULL, ENOENT, "larder_mfgetobj of a freed object");
    }
    /* The structs go with the heap: keep the id. */
    unsigned long long winner = (unsigned long long)named->nptr.object;
    check(larder_mfsync() == 0, "larder_mfsync");
    check(larder_mfclose() == 0, "larder_mfclose");
    printf("race: %s %llu\n", won ? "won" : "lost to", winner);
    return failures == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--race") == 0) {
        return race(argv[2], argv[3]);
    }
    if (argc == 3 && strcmp(argv[1], "--busy") == 0) {
        return busy(argv[2]);
    }
    if (argc == 3 && strcmp(argv[1], "--list") == 0) {
        return walk_list(argv[2]);
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s STORE_DIR | --list|--busy STORE_DIR | --race STORE_DIR NAME\n", argv[0]);
        return 2;
    }
    const char *store = argv[1];
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/no-such-dir/store", store);

    /* No heap attached yet. */
    expect(larder_mfalloc(8) == NULL, EBADF, "larder_mfalloc before larder_mfdopen");
    expect(larder_mfclose() == -1, EBADF, "larder_mfclose before larder_mfdopen");
    expect(larder_mfsync() == -1, EBADF, "larder_mfsync before larder_mfdopen");
    expect(larder_mfdopen(NULL) == -1, EINVAL, "larder_mfdopen(NULL)");
    expect(larder_mfdopen(missing) == -1, ENOENT, "larder_mfdopen of no store");
    check(strstr(larder_mferror(), "larder_mfdopen") == larder_mferror(), "the message starts with the call");

    check(larder_mfdopen_create(store) == 0, "larder_mfdopen_create");
    expect(larder_mfdopen(store) == -1, EBUSY, "a second larder_mfdopen");

    /* Objects and names. */
    larder_mfobj *obj = larder_mfalloc(64);
    check(obj != NULL, "larder_mfalloc(64)");
    expect(larder_mfaddname(NULL, "x") == -1, EINVAL, "larder_mfaddname(NULL, ...)");
    expect(larder_mfaddname(obj, NULL) == -1, EINVAL, "larder_mfaddname(..., NULL)");
    expect(larder_mfaddname(obj, "a/b") == -1, EINVAL, "a name with a slash");
    expect(larder_mfaddname(obj, "") == -1, EINVAL, "an empty name");
    check(larder_mfaddname(obj, "taken") == 0, "larder_mfaddname taken");
    larder_mfobj *other = larder_mfalloc(8);
    check(other != NULL, "larder_mfalloc(8)");
    expect(larder_mfaddname(other, "taken") == -1, EEXIST, "a name already given");
    expect(larder_mfgetobjbyname("nobody") == NULL, ENOENT, "an unknown name");
    check(strstr(larder_mferror(), "larder_mfgetobjbyname") != NULL, "the message names the call");
    expect(larder_mfgetobjbyname(NULL) == NULL, EINVAL, "larder_mfgetobjbyname(NULL)");
    check(larder_mfgetobjbyname("taken") == obj, "one mfobj per object");

    /* Pointers that are not the heap's are refused, never read. */
    larder_mfobj fake = {obj->nptr};
    expect(larder_mfdreference(&fake) == NULL, EINVAL, "an mfobj the heap did not hand out");
    expect(larder_mfdreference(NULL) == NULL, EINVAL, "larder_mfdreference(NULL)");
    expect(larder_mftypeatt(obj, (larder_mftype *)obj) == -1, EINVAL, "an mfobj passed as an mftype");
    larder_nptr null = {0, 0, 0};
    expect(larder_mfgetobj(null) == NULL, EINVAL, "larder_mfgetobj of the null nptr");
    larder_nptr nowhere = {(uint64_t)1 << 62, 0, 0};
    expect(larder_mfgetobj(nowhere) == NULL, ENOENT, "larder_mfgetobj of no object");
    expect(larder_mfderef(null) == NULL, EFAULT, "larder_mfderef of the null nptr");
    larder_nptr past = {obj->nptr.object, 64, 0};
    expect(larder_mfderef(past) == NULL, EFAULT, "larder_mfderef past the object's end");
    larder_nptr inside = {obj->nptr.object, 63, 0};
    check(larder_mfderef(inside) == (char *)larder_mfdreference(obj) + 63, "larder_mfderef inside the object");

    /* Sizes. */
    expect(larder_mfgrow(obj, 32) == -1, EINVAL, "shrinking an object");
    check(larder_mfgrow(obj, 1 << 20) == 0, "growing an object");
    check(larder_mfsize(obj) == 1 << 20, "its new size");
    ((char *)larder_mfdreference(obj))[(1 << 20) - 1] = 'z';

    /* Types. */
    size_t odd[] = {4};
    expect(larder_mfalloctype(odd, 1) == NULL, EINVAL, "an offset that is not a multiple of 8");
    size_t unordered[] = {24, 0};
    expect(larder_mfalloctype(unordered, 2) == NULL, EINVAL, "offsets out of order");
    expect(larder_mfalloctype(NULL, 2) == NULL, EINVAL, "NULL offsets");
    size_t far[] = {128};
    larder_mftype *far_type = larder_mfalloctype(far, 1);
    check(far_type != NULL, "larder_mfalloctype {128}");
    expect(larder_mftypeatt(other, far_type) == -1, EINVAL, "a type past the object's end");
    size_t first[] = {0};
    larder_mftype *one = larder_mfalloctype(first, 1);
    check(one != NULL && one->pointers == 1, "larder_mfalloctype {0}");
    larder_mfobj *node = larder_mfalloc(sizeof(larder_nptr));
    check(node != NULL, "larder_mfalloc of a node");
    check(larder_mftypeatt(node, one) == 0, "larder_mftypeatt");
    larder_nptr *field = larder_mfdreference(node);
    *field = nowhere;
    expect(larder_mfclone(node) == NULL, EFAULT, "cloning a pointer to no object");
    *field = past;
    check(larder_mfclone(node) != NULL, "cloning a pointer inside its (grown) target");

    /* Closed objects. */
    larder_nptr obj_nptr = obj->nptr;
    check(larder_mfcloseobj(obj) == 0, "larder_mfcloseobj");
    expect(larder_mfdreference(obj) == NULL, EBADF, "larder_mfdreference of a closed object");
    expect(larder_mfcloseobj(obj) == -1, EBADF, "closing twice");
    check(larder_mfgetobj(obj_nptr) == obj, "larder_mfgetobj attaches it again, same mfobj");
    check(((char *)larder_mfdreference(obj))[(1 << 20) - 1] == 'z', "its bytes");

    /* Freed objects: stale everywhere. */
    check(larder_mffreeobj(obj) == 0, "larder_mffreeobj");
    expect(larder_mfgetobjbyname("taken") == NULL, ENOENT, "the freed object's name");
    expect(larder_mfgetobj(obj_nptr) == NULL, ENOENT, "larder_mfgetobj of a freed object");
    expect(larder_mfderef(obj_nptr) == NULL, ENOENT, "larder_mfderef of a freed object");
    expect(larder_mfdreference(obj) == NULL, ENOENT, "larder_mfdreference of a freed mfobj");
    expect(is_null(larder_mfnptr(obj)), ENOENT, "larder_mfnptr of a freed mfobj");
    expect(larder_mffreeobj(obj) == -1, ENOENT, "freeing twice");
    expect(larder_mfclone(node) == NULL, EFAULT, "cloning a pointer to a freed object");
    check(larder_mfaddname(other, "taken") == 0, "the freed object's name is free again");

    /* Blocks inside an object: a list of 100 nodes, half freed. */
    larder_mfobj *arena = larder_mfalloc(64);
    check(arena != NULL, "larder_mfalloc of an arena");
    expect(is_null(larder_mfalloc_in(arena, 0, 8)), EINVAL, "a block of 0 bytes");
    expect(is_null(larder_mfalloc_in(arena, 16, 3)), EINVAL, "an alignment that is not a power of two");
    expect(is_null(larder_mfalloc_in(arena, 16, 8192)), EINVAL, "an alignment above a page");
    expect(is_null(larder_mfalloc_in(NULL, 16, 8)), EINVAL, "larder_mfalloc_in(NULL, ...)");
    larder_nptr blocks[100];
    larder_nptr head = {0, 0, 0};
    for (int i = 0; i < 100; i++) {
        blocks[i] = larder_mfalloc_in(arena, sizeof(list_node) + (size_t)(i % 7) * 40, 16);
        check(!is_null(blocks[i]), "larder_mfalloc_in");
        check(blocks[i].object == arena->nptr.object && blocks[i].generation != 0, "a block's pointer");
        check(blocks[i].offset % 16 == 0 && blocks[i].offset >= 64, "a block's alignment, past the user bytes");
        list_node *n = larder_mfderef(blocks[i]);
        check(n != NULL, "larder_mfderef of a block");
        n->next = head;
        n->value = (uint64_t)i;
        head = blocks[i];
    }
    for (int i = 0; i < 100; i += 2) {
        list_node *n = larder_mfderef(blocks[i]);
        check(n != NULL, "a block before its free");
        if (i + 1 < 100) {
            list_node *up = larder_mfderef(blocks[i + 1]);
            check(up != NULL, "the block pointing at it");
            up->next = n->next;
        }
        check(larder_mffree_in(blocks[i]) == 0, "larder_mffree_in");
        expect(larder_mfderef(blocks[i]) == NULL, ESTALE, "larder_mfderef of a freed block");
        expect(larder_mffree_in(blocks[i]) == -1, ESTALE, "freeing a block twice");
    }
    int seen = 0;
    for (larder_nptr at = head; !is_null(at); seen++) {
        list_node *n = larder_mfderef(at);
        check(n != NULL && n->value == (uint64_t)(99 - 2 * seen), "walking the list of live blocks");
        at = n->next;
    }
    check(seen == 50, "fifty blocks are left");
    /* The list's head in the object's own bytes, for `--list` to walk in
     * another process. */
    *(larder_nptr *)larder_mfdreference(arena) = head;
    check(larder_mfaddname(arena, "list") == 0, "naming the list's object");
    larder_nptr zero = {0, 0, 0};
    expect(larder_mffree_in(zero) == -1, EINVAL, "larder_mffree_in of the null pointer");
    larder_nptr user = {arena->nptr.object, 0, 0};
    expect(larder_mffree_in(user) == -1, ESTALE, "larder_mffree_in of the object's own bytes");
    check(larder_mfcloseobj(arena) == 0, "closing the arena object");
    expect(is_null(larder_mfalloc_in(arena, 16, 8)), EBADF, "larder_mfalloc_in in a closed object");
    check(larder_mfgetobj(head) == arena, "attaching the arena again");
    check(((list_node *)larder_mfderef(head))->value == 99, "its blocks after a close");

    /* Many heaps: handles beside the current heap, on the same store. */
    expect(larder_heap_open(store, "/other", 2) == NULL, EINVAL, "unknown flags");
    expect(larder_heap_open(NULL, NULL, 0) == NULL, EINVAL, "larder_heap_open(NULL, ...)");
    larder_heap *h = larder_heap_open(store, "/other", 0);
    check(h != NULL, "larder_heap_open /other");
    larder_heap *h2 = larder_heap_open(store, "/third", 0);
    check(h2 != NULL, "larder_heap_open /third");
    larder_mfobj *in_h = larder_heap_alloc(h, 16);
    check(in_h != NULL, "larder_heap_alloc");
    check(larder_heap_addname(h, in_h, "taken") == 0, "names are per heap");
    expect(larder_mfdreference(in_h) == NULL, EINVAL, "another heap's mfobj on the current heap");
    expect(larder_heap_dreference(h2, in_h) == NULL, EINVAL, "another heap's mfobj on a handle");
    check(larder_heap_getobjbyname(h, "taken") == in_h, "larder_heap_getobjbyname");
    check(larder_mfgetobjbyname("taken") == other, "the current heap's name is its own");
    expect(larder_heap_alloc(NULL, 1) == NULL, EINVAL, "larder_heap_alloc(NULL, ...)");
    check(larder_heap_close(h2) == 0, "larder_heap_close /third");
    check(larder_heap_close(h) == 0, "larder_heap_close /other");
    expect(larder_heap_alloc(h, 1) == NULL, EBADF, "a closed handle");
    expect(larder_heap_close(h) == -1, EBADF, "closing a handle twice");

    check(larder_mfsync() == 0, "larder_mfsync");
    check(larder_mfclose() == 0, "larder_mfclose");
    expect(larder_mfclose() == -1, EBADF, "larder_mfclose twice");
    expect(larder_mfdreference(other) == NULL, EBADF, "an mfobj after larder_mfclose");

    /* The handle's heap persisted, and the store opens again. */
    larder_heap *again = larder_heap_open(store, "/other", 0);
    check(again != NULL, "larder_heap_open /other again");
    larder_mfobj *found = larder_heap_getobjbyname(again, "taken");
    check(found != NULL && larder_heap_size(again, found) == 16, "the other heap's object");
    check(larder_heap_close(again) == 0, "larder_heap_close");

    if (failures == 0) {
        printf("heap_errors: done\n");
    }
    return failures == 0 ? 0 : 1;
}
