/*
 * pshfs_basic.c: the "simple example" of paper 003 (PSHFS), section 3.3,
 * ported to Larder's heap by renaming (mfalloc -> larder_mfalloc...), with
 * every result checked: it exits 1 at the first wrong one.
 *
 *   cc -std=c11 -Wall -I crates/capi/include examples/c/pshfs_basic.c \
 *      -L target/debug -llarder -o pshfs_basic
 *   LD_LIBRARY_PATH=target/debug ./pshfs_basic /tmp/store
 *
 * Where the port differs from the paper:
 * - larder_mfdopen takes a store's directory (optionally "DIR:/heap/path")
 *   rather than a mounted PSHFS directory ("/mem"); larder_mfdopen_create
 *   creates the store if absent, which this program uses so it runs on an
 *   empty directory.
 * - The paper's `nptr *namedptr = mfobj->nptr` is a larder_nptr value: the
 *   24-byte persistent pointer (object, offset, generation) itself.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larder_heap.h"

/* Exits 1 with the reason, and the library's, unless `ok`. */
static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "pshfs_basic: FAILED: %s (errno %d: %s)\n", what, larder_mferrno(), larder_mferror());
        exit(1);
    }
}

/* Whether the `n` bytes at `p` are all `c`. */
static int all(const char *p, char c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != c) {
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s STORE_DIR[:HEAP_PATH]\n", argv[0]);
        return 2;
    }

    /* The paper's program, renamed. */
    larder_mfobj *mfobj;
    int error = larder_mfdopen_create(argv[1]); /* Attach filesystem (paper: mfdopen("/mem")) */
    check(error == 0, "larder_mfdopen_create");
    mfobj = larder_mfalloc(1000); /* Allocate object */
    check(mfobj != NULL, "larder_mfalloc(1000)");
    larder_nptr namedptr = mfobj->nptr; /* Get object's name */
    check(namedptr.object != 0 && namedptr.offset == 0 && namedptr.generation == 0, "a fresh object's nptr");
    char *ptr = larder_mfdreference(mfobj); /* Get pointer */
    check(ptr != NULL, "larder_mfdreference");
    check(all(ptr, '\0', 1000), "a new object is zeros");
    memset(ptr, '0', 1000); /* Initialize */
    check(larder_mfaddname(mfobj, "FILE1") == 0, "larder_mfaddname FILE1"); /* Give it a name */
    check(larder_mfcloseobj(mfobj) == 0, "larder_mfcloseobj"); /* Detach object */
    mfobj = larder_mfgetobjbyname("FILE1"); /* Get by name */
    check(mfobj != NULL, "larder_mfgetobjbyname FILE1");

    /* What the paper's program implies, checked before the free. */
    check(mfobj->nptr.object == namedptr.object, "FILE1 names the object allocated");
    larder_nptr again = larder_mfnptr(mfobj);
    check(memcmp(&again, &namedptr, sizeof again) == 0, "larder_mfnptr equals mfobj->nptr");
    ptr = larder_mfdreference(mfobj);
    check(ptr != NULL && all(ptr, '0', 1000), "the bytes written before the close are there after it");
    check(larder_mfsize(mfobj) == 1000, "the object's size");
    check(larder_mfgetobj(namedptr) == mfobj, "larder_mfgetobj(nptr) gives the same mfobj");

    /* Section 3.3's direct access, in place of write/lseek/read. */
    memset(ptr, '0', 5);
    ptr[5] = '\0';
    fprintf(stdout, "Current Value: %s\n", ptr);
    memset(ptr, '1', 5);
    fprintf(stdout, "Current Value: %s\n", ptr);
    check(strcmp(ptr, "11111") == 0, "direct access");

    check(larder_mffreeobj(mfobj) == 0, "larder_mffreeobj"); /* Delete */

    /* The free dropped the name and the object. */
    check(larder_mfgetobjbyname("FILE1") == NULL && errno == ENOENT, "FILE1 is gone after the free");
    check(larder_mfgetobj(namedptr) == NULL && errno == ENOENT, "the freed object's nptr is stale");
    check(larder_mfderef(namedptr) == NULL && errno == ENOENT, "dereferencing the freed object's nptr");

    error = larder_mfclose(); /* Detach file system */
    check(error == 0, "larder_mfclose");
    check(larder_mfalloc(1) == NULL && errno == EBADF, "no heap attached after larder_mfclose");
    printf("pshfs_basic: done\n");
    return 0;
}
