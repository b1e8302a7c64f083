/*
 * pshfs_tree.c: the tree program of paper 003 (PSHFS), Figure 3-8, ported
 * to Larder's heap by renaming, with every result checked (exit 1 at the
 * first wrong one). Run it three times on one store, each a new process:
 *
 *   ./pshfs_tree STORE create    the paper's program: a root and two sons,
 *                                named, copied (mfcopy) and cloned (mfclone)
 *   ./pshfs_tree STORE reattach  finds them by name after the first process
 *                                exited, checks them, clones again with the
 *                                types the first process attached, frees
 *                                the copy and the clones
 *   ./pshfs_tree STORE verify    the frees and their names stayed gone, the
 *                                tree stayed
 *
 * Where the port differs from the paper:
 * - `larder_nptr left` instead of `nptr *left`: the node holds the 24-byte
 *   persistent pointer itself, which stays valid in other processes and
 *   after a reboot.
 * - `size_t type[] = {offsetof(tree_node, left), offsetof(tree_node,
 *   right)}` instead of the paper's hard-coded {0, 4} (32-bit pointers):
 *   the offsets of the larder_nptr fields, 0 and 24.
 * - larder_mfdopen_create takes a store's directory; the paper's program
 *   does not show its mfdopen.
 * - Types are kept with the objects, so the second process clones without
 *   attaching them again (PSHFS kept them per process).
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larder_heap.h"

typedef struct {
    larder_nptr left;  /* Pointer to left child (paper: nptr *left) */
    larder_nptr right; /* Pointer to right child */
    int val;           /* Node value */
} tree_node;

/* Exits 1 with the reason, and the library's, unless `ok`. */
static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "pshfs_tree: FAILED: %s (errno %d: %s)\n", what, larder_mferrno(), larder_mferror());
        exit(1);
    }
}

static int same(larder_nptr a, larder_nptr b)
{
    return a.object == b.object && a.offset == b.offset && a.generation == b.generation;
}

/* The node `nptr` points to, attaching its object. */
static tree_node *node(larder_nptr nptr)
{
    tree_node *p = larder_mfderef(nptr);
    check(p != NULL, "larder_mfderef of a child");
    return p;
}

/* Checks the tree rooted at `root`: values 1, 2, 3, and its sons; returns
 * the root node. */
static tree_node *check_tree(larder_mfobj *root, const char *what)
{
    check(root != NULL, what);
    tree_node *r = larder_mfdreference(root);
    check(r != NULL, "larder_mfdreference of a root");
    check(r->val == 1, "the root's value is 1");
    check(r->left.object != 0 && r->right.object != 0, "the root has two sons");
    check(node(r->left)->val == 2, "the left son's value is 2");
    check(node(r->right)->val == 3, "the right son's value is 3");
    return r;
}

/* Checks that `clone` is a deep copy of `tree`: the same values, and
 * fresh objects for all three nodes. */
static void check_clone(larder_mfobj *clone, larder_mfobj *tree)
{
    tree_node *c = check_tree(clone, "a clone");
    tree_node *t = larder_mfdreference(tree);
    check(t != NULL, "larder_mfdreference of the tree");
    larder_nptr ids[6] = {tree->nptr, t->left, t->right, clone->nptr, c->left, c->right};
    for (int i = 0; i < 6; i++) {
        for (int j = i + 1; j < 6; j++) {
            check(ids[i].object != ids[j].object, "every node of a clone is a fresh object");
        }
    }
    check(c->left.offset == 0 && c->right.offset == 0, "a clone's pointers point at its nodes' starts");
}

/* Frees `obj` and checks its name `name` went with it and its nptr is
 * stale. */
static void free_named(larder_mfobj *obj, const char *name)
{
    larder_nptr nptr = obj->nptr;
    check(larder_mffreeobj(obj) == 0, "larder_mffreeobj");
    if (name != NULL) {
        check(larder_mfgetobjbyname(name) == NULL && errno == ENOENT, "a freed object's name is gone");
    }
    check(larder_mfgetobj(nptr) == NULL && errno == ENOENT, "a freed object's nptr is stale");
    check(larder_mfderef(nptr) == NULL && errno == ENOENT, "dereferencing a freed object's nptr fails");
}

static void create(void)
{
    /* The paper's program, renamed. */
    // Create tree
    larder_mfobj *root = larder_mfalloc(sizeof(tree_node));
    check(root != NULL, "larder_mfalloc of the root");
    tree_node *root_ptr = larder_mfdreference(root);
    check(root_ptr != NULL, "larder_mfdreference of the root");
    root_ptr->left = larder_mfnptr(larder_mfalloc(sizeof(tree_node)));
    root_ptr->right = larder_mfnptr(larder_mfalloc(sizeof(tree_node)));
    check(root_ptr->left.object != 0 && root_ptr->right.object != 0, "allocating the sons");

    check(larder_mfaddname(root, "THIS_IS_A_TREE") == 0, "larder_mfaddname THIS_IS_A_TREE");

    // Assign values
    tree_node *left_ptr = larder_mfdreference(larder_mfgetobj(root_ptr->left));
    tree_node *right_ptr = larder_mfdreference(larder_mfgetobj(root_ptr->right));
    check(left_ptr != NULL && right_ptr != NULL, "larder_mfdreference of the sons");
    root_ptr->val = 1;
    left_ptr->val = 2;
    right_ptr->val = 3;

    // Detach objects
    check(larder_mfcloseobj(larder_mfgetobj(root_ptr->left)) == 0, "closing the left son");
    check(larder_mfcloseobj(larder_mfgetobj(root_ptr->right)) == 0, "closing the right son");

    larder_nptr root_nptr = root->nptr;
    check(larder_mfcloseobj(root) == 0, "closing the root");

    // Re-attach (just for the example)
    root = larder_mfgetobjbyname("THIS_IS_A_TREE");
    check(root != NULL && same(root->nptr, root_nptr), "THIS_IS_A_TREE names the root");
    root_ptr = larder_mfdreference(root);
    check(root_ptr != NULL, "larder_mfdreference of the root again");

    // Make a copy of root node only
    larder_mfobj *copy = larder_mfcopy(root);
    check(copy != NULL, "larder_mfcopy");
    check(larder_mfaddname(copy, "COPY_TREE") == 0, "larder_mfaddname COPY_TREE");

    // Clone the whole tree
    size_t type[] = {offsetof(tree_node, left), offsetof(tree_node, right)}; /* paper: {0,4} */
    larder_mftype *mftype;
    mftype = larder_mfalloctype(type, 2);
    check(mftype != NULL, "larder_mfalloctype");
    check(larder_mftypeatt(root, mftype) == 0, "larder_mftypeatt root");
    check(larder_mftypeatt(larder_mfgetobj(root_ptr->left), mftype) == 0, "larder_mftypeatt left");
    check(larder_mftypeatt(larder_mfgetobj(root_ptr->right), mftype) == 0, "larder_mftypeatt right");
    larder_mfobj *clone = larder_mfclone(root);
    check(clone != NULL, "larder_mfclone");
    check(larder_mfaddname(clone, "CLONE_TREE") == 0, "larder_mfaddname CLONE_TREE");
    tree_node *clone_ptr = larder_mfdreference(clone);
    check(clone_ptr != NULL, "larder_mfdreference of the clone");

    /* What the figure implies, checked. */
    check_tree(root, "the tree");
    check_clone(clone, root);
    tree_node *copy_ptr = larder_mfdreference(copy);
    check(copy_ptr != NULL, "larder_mfdreference of the copy");
    check(copy->nptr.object != root->nptr.object, "the copy is a new object");
    check(copy_ptr->val == 1, "the copy's value is 1");
    check(same(copy_ptr->left, root_ptr->left) && same(copy_ptr->right, root_ptr->right),
          "the copy is of the root only: its sons are the tree's");
    larder_mfobj *typed_copy = larder_mfcopy(root);
    tree_node *typed_copy_ptr = larder_mfdreference(typed_copy);
    check(typed_copy_ptr != NULL && typed_copy_ptr->val == 1, "a copy of the typed root");
    check(same(typed_copy_ptr->left, root_ptr->left) && same(typed_copy_ptr->right, root_ptr->right),
          "with types attached, larder_mfcopy still copies the root only");
    free_named(typed_copy, NULL);
    check(larder_mfgetobjbyname("COPY_TREE") == copy, "COPY_TREE names the copy");
    check(larder_mfgetobjbyname("CLONE_TREE") == clone, "CLONE_TREE names the clone");
    check(larder_mfaddname(copy, "THIS_IS_A_TREE") == -1 && errno == EEXIST, "a name names one object");

    /* The structs go with the heap at larder_mfclose: print first. */
    printf("created: tree %llu, copy %llu, clone %llu\n", (unsigned long long)root_nptr.object,
           (unsigned long long)copy->nptr.object, (unsigned long long)clone->nptr.object);
    check(larder_mfsync() == 0, "larder_mfsync");
    check(larder_mfclose() == 0, "larder_mfclose");
}

static void reattach(void)
{
    larder_mfobj *root = larder_mfgetobjbyname("THIS_IS_A_TREE");
    tree_node *root_ptr = check_tree(root, "THIS_IS_A_TREE after a new process attached");
    larder_mfobj *clone = larder_mfgetobjbyname("CLONE_TREE");
    check_clone(clone, root);
    larder_mfobj *copy = larder_mfgetobjbyname("COPY_TREE");
    check(copy != NULL, "COPY_TREE after a new process attached");
    tree_node *copy_ptr = larder_mfdreference(copy);
    check(copy_ptr != NULL && copy_ptr->val == 1, "the copy's value");
    check(same(copy_ptr->left, root_ptr->left) && same(copy_ptr->right, root_ptr->right),
          "the copy still shares the tree's sons");

    /* The types came with the objects: clone again without attaching. */
    larder_mfobj *again = larder_mfclone(root);
    check_clone(again, root);
    tree_node *again_ptr = larder_mfdreference(again);
    check(again_ptr != NULL, "larder_mfdreference of the second clone");
    check(again->nptr.object != clone->nptr.object, "the second clone is new");

    /* Frees: the copy (its sons are the tree's, which stay), then the
     * clones node by node. */
    free_named(copy, "COPY_TREE");
    check_tree(root, "the tree after freeing its copy");
    tree_node *clone_ptr = larder_mfdreference(clone);
    check(clone_ptr != NULL, "larder_mfdreference of the clone");
    larder_nptr sons[4] = {clone_ptr->left, clone_ptr->right, again_ptr->left, again_ptr->right};
    free_named(clone, "CLONE_TREE");
    free_named(again, NULL);
    for (int i = 0; i < 4; i++) {
        larder_mfobj *son = larder_mfgetobj(sons[i]);
        check(son != NULL, "a clone's son outlives its parent's free");
        free_named(son, NULL);
    }
    check_tree(root, "the tree after freeing the clones");
    check(larder_mfsync() == 0, "larder_mfsync");
    check(larder_mfclose() == 0, "larder_mfclose");
    printf("reattached: tree checked, copy and clones freed\n");
}

static void verify(void)
{
    check_tree(larder_mfgetobjbyname("THIS_IS_A_TREE"), "THIS_IS_A_TREE in a third process");
    check(larder_mfgetobjbyname("COPY_TREE") == NULL && errno == ENOENT, "COPY_TREE stayed freed");
    check(larder_mfgetobjbyname("CLONE_TREE") == NULL && errno == ENOENT, "CLONE_TREE stayed freed");
    check(larder_mfclose() == 0, "larder_mfclose");
    printf("verified: the frees persisted\n");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s STORE_DIR[:HEAP_PATH] create|reattach|verify\n", argv[0]);
        return 2;
    }
    check(larder_mfdopen_create(argv[1]) == 0, "larder_mfdopen_create");
    if (strcmp(argv[2], "create") == 0) {
        create();
    } else if (strcmp(argv[2], "reattach") == 0) {
        reattach();
    } else if (strcmp(argv[2], "verify") == 0) {
        verify();
    } else {
        fprintf(stderr, "unknown step %s\n", argv[2]);
        return 2;
    }
    printf("pshfs_tree: done\n");
    return 0;
}
