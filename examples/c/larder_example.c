/*
 * larder_example.c: a C program using a Larder store through its server,
 * with liblarder.so.
 *
 *   larder init /tmp/store && larder serve /tmp/store &
 *   cc -Wall -Wextra -Werror -std=c11 -I crates/capi/include \
 *      examples/c/larder_example.c -L target/debug -llarder \
 *      -o larder_example
 *   LD_LIBRARY_PATH=target/debug ./larder_example /tmp/store
 *
 * It makes a directory and a file, writes (copied and zero-copy), fsyncs,
 * reads back, stats, lists the directory, renames, unlinks, and puts and
 * gets a KV value, checking each result; a failure prints
 * larder_last_error() and errno, and the program exits with 1. It removes
 * what it made, and leaves the file /from-c.txt and the KV value
 * notes/from-c (crates/capi/tests/c_example.rs checks them).
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "larder_client.h"

/* Reports the failed call with the library's message and errno; exits. */
static void fail(const char *what)
{
    int error = errno;
    fprintf(stderr, "larder_example: %s failed: %s [errno %d: %s]\n", what, larder_last_error(), error,
            strerror(error));
    exit(1);
}

/* Reports a result that is not the expected one; exits. */
static void wrong(const char *what)
{
    fprintf(stderr, "larder_example: %s\n", what);
    exit(1);
}

/* Fails unless a call that returns -1 on error succeeded. */
#define CHECK(call)          \
    do {                     \
        if ((call) < 0) {    \
            fail(#call);     \
        }                    \
    } while (0)

/* Fails unless `call` failed with errno `expected`; prints the message. */
#define EXPECT_ERRNO(call, expected)                                                   \
    do {                                                                               \
        errno = 0;                                                                     \
        if ((call) != -1 || errno != (expected)) {                                     \
            fprintf(stderr, "larder_example: %s: expected %s, got errno %d\n", #call, \
                    #expected, errno);                                                 \
            exit(1);                                                                   \
        }                                                                              \
        printf("refused as expected (%s): %s\n", #expected, larder_last_error());      \
    } while (0)

/* The byte at `i` of the zero-copy pattern. */
static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 7 + i / 251 + 3);
}

static const char *type_name(uint8_t kind)
{
    switch (kind) {
    case LARDER_DT_REG:
        return "file";
    case LARDER_DT_DIR:
        return "directory";
    case LARDER_DT_LNK:
        return "symlink";
    default:
        return "other";
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s STORE_OR_SOCKET\n", argv[0]);
        return 2;
    }

    larder_client *client = larder_connect(argv[1]);
    if (client == NULL) {
        fail("larder_connect");
    }
    printf("connected\n");

    /* A directory and a new file in it. */
    CHECK(larder_mkdir(client, "/docs", 0755));
    int fd = larder_open(client, "/docs/hello.txt", O_RDWR | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        fail("larder_open");
    }
    printf("created /docs/hello.txt as file number %d\n", fd);

    /* A copied write. */
    const char greeting[] = "hello from C\n";
    size_t greeting_length = strlen(greeting);
    int64_t n = larder_pwrite(client, fd, greeting, greeting_length, 0);
    if (n < 0) {
        fail("larder_pwrite");
    }
    if ((size_t)n != greeting_length) {
        wrong("larder_pwrite wrote fewer bytes than asked");
    }
    printf("wrote %" PRId64 " bytes (copied)\n", n);

    /* A zero-copy write: the bytes go from the shared buffer to the server. */
    const size_t big = 256 * 1024;
    larder_buffer *buffer = larder_buffer_alloc(client, big);
    if (buffer == NULL) {
        fail("larder_buffer_alloc");
    }
    if (larder_buffer_len(buffer) != big) {
        wrong("larder_buffer_len is not the size allocated");
    }
    unsigned char *data = larder_buffer_data(buffer);
    for (size_t i = 0; i < big; i++) {
        data[i] = pattern(i);
    }
    n = larder_pwrite_buffer(client, fd, buffer, big, (int64_t)greeting_length);
    if (n < 0) {
        fail("larder_pwrite_buffer");
    }
    if ((size_t)n != big) {
        wrong("larder_pwrite_buffer wrote fewer bytes than asked");
    }
    printf("wrote %" PRId64 " bytes (zero-copy)\n", n);

    CHECK(larder_fsync(client, fd));
    printf("fsynced\n");

    /* Read back, copied: the greeting, and the pattern across its start. */
    char text[sizeof greeting] = {0};
    n = larder_pread(client, fd, text, greeting_length, 0);
    if (n < 0) {
        fail("larder_pread");
    }
    if ((size_t)n != greeting_length || memcmp(text, greeting, greeting_length) != 0) {
        wrong("larder_pread did not return the greeting");
    }
    printf("read back: %s", text);
    unsigned char *copy = malloc(big);
    if (copy == NULL) {
        wrong("out of memory");
    }
    n = larder_pread(client, fd, copy, big, (int64_t)greeting_length);
    if (n < 0) {
        fail("larder_pread");
    }
    for (size_t i = 0; i < big; i++) {
        if ((size_t)n != big || copy[i] != pattern(i)) {
            wrong("larder_pread did not return the zero-copy bytes");
        }
    }
    free(copy);
    printf("read back %" PRId64 " bytes (copied), pattern intact\n", n);

    /* Read back, zero-copy: the server fills the buffer. */
    memset(data, 0, big);
    n = larder_pread_buffer(client, fd, buffer, big, (int64_t)greeting_length);
    if (n < 0) {
        fail("larder_pread_buffer");
    }
    for (size_t i = 0; i < big; i++) {
        if ((size_t)n != big || data[i] != pattern(i)) {
            wrong("larder_pread_buffer did not return the written bytes");
        }
    }
    printf("read back %" PRId64 " bytes (zero-copy), pattern intact\n", n);
    n = larder_pread(client, fd, text, sizeof text, (int64_t)(greeting_length + big));
    if (n != 0) {
        wrong("larder_pread at the end of the file did not return 0");
    }
    printf("read at the end: 0 bytes\n");

    /* Attributes of the open file and of the directory. */
    struct larder_stat st;
    CHECK(larder_fstat(client, fd, &st));
    if (!S_ISREG(st.mode) || st.size != greeting_length + big || (st.mode & 07777) != 0644) {
        wrong("larder_fstat: not a 0644 file of the size written");
    }
    printf("fstat: regular file, mode %o, %" PRIu64 " bytes, inode %" PRIu64 "\n", st.mode & 07777, st.size,
           st.ino);
    uint64_t file_ino = st.ino;
    CHECK(larder_close(client, fd));
    EXPECT_ERRNO(larder_fsync(client, fd), EBADF);

    CHECK(larder_stat(client, "/docs", &st));
    if (!S_ISDIR(st.mode)) {
        wrong("larder_stat: /docs is not a directory");
    }
    printf("stat /docs: directory, mode %o\n", st.mode & 07777);

    /* List the directory (a subdirectory beside the file). */
    CHECK(larder_mkdir(client, "/docs/drafts", 0700));
    larder_dir *dir = larder_opendir(client, "/docs");
    if (dir == NULL) {
        fail("larder_opendir");
    }
    struct larder_dirent entry;
    int got, seen_file = 0, seen_directory = 0;
    while ((got = larder_readdir(dir, &entry)) == 1) {
        printf("entry: %s (%s)\n", entry.name, type_name(entry.kind));
        if (strcmp(entry.name, "hello.txt") == 0 && entry.kind == LARDER_DT_REG && entry.ino == file_ino) {
            seen_file = 1;
        }
        if (strcmp(entry.name, "drafts") == 0 && entry.kind == LARDER_DT_DIR) {
            seen_directory = 1;
        }
    }
    if (got < 0) {
        fail("larder_readdir");
    }
    CHECK(larder_closedir(dir));
    if (!seen_file || !seen_directory) {
        wrong("the listing lacks hello.txt or drafts");
    }

    /* Rename: the same inode under the new name, none under the old. */
    CHECK(larder_rename(client, "/docs/hello.txt", "/docs/drafts/greeting.txt"));
    CHECK(larder_stat(client, "/docs/drafts/greeting.txt", &st));
    if (st.ino != file_ino) {
        wrong("the renamed file has another inode");
    }
    EXPECT_ERRNO(larder_stat(client, "/docs/hello.txt", &st), ENOENT);
    printf("renamed to /docs/drafts/greeting.txt\n");

    /* Errors a C program checks for. */
    EXPECT_ERRNO(larder_mkdir(client, "/docs", 0755), EEXIST);
    EXPECT_ERRNO(larder_rmdir(client, "/docs/drafts"), ENOTEMPTY);
    EXPECT_ERRNO(larder_open(client, "/docs/missing", O_RDONLY, 0), ENOENT);

    /* Unlink and remove what was made. */
    CHECK(larder_unlink(client, "/docs/drafts/greeting.txt"));
    EXPECT_ERRNO(larder_stat(client, "/docs/drafts/greeting.txt", &st), ENOENT);
    CHECK(larder_rmdir(client, "/docs/drafts"));
    CHECK(larder_rmdir(client, "/docs"));
    printf("unlinked and removed\n");

    /* KV: a bucket, a durable put, a get (its length first), a delete. */
    CHECK(larder_kv_create_bucket(client, "notes"));
    const char value[] = "kept by the server";
    CHECK(larder_kv_put(client, "notes", "2024/first", value, strlen(value), LARDER_DURABLE));
    size_t length = 0;
    CHECK(larder_kv_get(client, "notes", "2024/first", NULL, 0, &length));
    if (length != strlen(value)) {
        wrong("larder_kv_get: the length is not the value's");
    }
    char got_value[64] = {0};
    CHECK(larder_kv_get(client, "notes", "2024/first", got_value, sizeof got_value - 1, &length));
    if (length != strlen(value) || strcmp(got_value, value) != 0) {
        wrong("larder_kv_get did not return the value put");
    }
    printf("kv get notes/2024/first: %s\n", got_value);
    /* The same value again, zero-copy: put from and get into the buffer. */
    memcpy(data, value, strlen(value));
    CHECK(larder_kv_put_buffer(client, "notes", "2024/second", buffer, strlen(value), LARDER_BUFFERED));
    memset(data, 0, big);
    CHECK(larder_kv_get_buffer(client, "notes", "2024/second", buffer, &length));
    if (length != strlen(value) || memcmp(data, value, length) != 0) {
        wrong("larder_kv_get_buffer did not return the value put");
    }
    printf("kv get notes/2024/second (zero-copy): %.*s\n", (int)length, (const char *)data);
    CHECK(larder_kv_delete(client, "notes", "2024/second", LARDER_BUFFERED));
    CHECK(larder_kv_delete(client, "notes", "2024/first", LARDER_DURABLE));
    EXPECT_ERRNO(larder_kv_get(client, "notes", "2024/first", got_value, sizeof got_value, &length), ENOENT);
    printf("kv deleted\n");

    /* What it leaves, for whoever runs it to find with other tools. */
    CHECK(larder_kv_put(client, "notes", "from-c", value, strlen(value), LARDER_DURABLE));
    fd = larder_open(client, "/from-c.txt", O_WRONLY | O_CREAT | O_TRUNC, 0640);
    if (fd < 0) {
        fail("larder_open");
    }
    const char note[] = "written by larder_example.c\n";
    if (larder_pwrite(client, fd, note, strlen(note), 0) != (int64_t)strlen(note)) {
        fail("larder_pwrite");
    }
    CHECK(larder_fsync(client, fd));
    CHECK(larder_close(client, fd));
    printf("left /from-c.txt and notes/from-c\n");

    CHECK(larder_buffer_free(buffer));
    CHECK(larder_disconnect(client));
    printf("done\n");
    return 0;
}
