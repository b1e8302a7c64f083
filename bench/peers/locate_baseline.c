/* The paper's locate baseline: an slocate-style database, front-coded the way
 * GNU locate's frcode and slocate encode it (LOCATE02: each path is stored as
 * the signed change of the length of the prefix it shares with the previous
 * path, then the rest of the path and a NUL; a change outside -127..127 is
 * the byte 0x80 and a big-endian 16-bit value), searched by decoding the
 * whole database sequentially and comparing each path's last component with
 * the name asked for (exact match).
 *
 *   locate_baseline build PATHLIST DB      sorted paths, one a line
 *   locate_baseline search DB QUERIES      names, one a line
 *
 * Each prints one JSON line. `build` times encoding + write + fsync of the
 * database from the list in memory; `search` times, per name, open + a
 * sequential read of the database + decode + compare + close, as slocate
 * does per invocation, and prints the matches' count and a checksum of
 * the matching paths so the harness can compare engines. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "common.h"

#define HEADER "\0LOCATE02"
#define HEADER_BYTES 10 /* with its NUL */
#define MAX_PATH_BYTES 4096

/* Reads a whole file into memory (NUL-terminated). */
static char *slurp(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) peer_die(path);
    struct stat st;
    if (fstat(fd, &st) != 0) peer_die("fstat");
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) peer_die("malloc");
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0) peer_die("read");
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    *len = got;
    return buf;
}

/* Splits a buffer into its lines (in place); returns their count. */
static size_t lines(char *buf, size_t len, char ***out) {
    size_t n = 0, cap = 1024;
    char **v = malloc(cap * sizeof *v);
    if (!v) peer_die("malloc");
    char *p = buf, *end = buf + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        *nl = 0;
        if (nl > p) {
            if (n == cap) {
                cap *= 2;
                v = realloc(v, cap * sizeof *v);
                if (!v) peer_die("realloc");
            }
            v[n++] = p;
        }
        p = nl + 1;
    }
    *out = v;
    return n;
}

/* A growing output buffer. */
struct out {
    char *bytes;
    size_t len, cap;
};

static void put(struct out *o, const void *b, size_t n) {
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2;
        o->bytes = realloc(o->bytes, o->cap);
        if (!o->bytes) peer_die("realloc");
    }
    memcpy(o->bytes + o->len, b, n);
    o->len += n;
}

static int build(const char *list_path, const char *db_path) {
    size_t len;
    char *list = slurp(list_path, &len);
    char **paths;
    size_t n = lines(list, len, &paths);
    double start = peer_now();
    struct out o = {0};
    put(&o, HEADER, HEADER_BYTES);
    long prev_shared = 0;
    const char *prev = "";
    for (size_t i = 0; i < n; i++) {
        const char *p = paths[i];
        long shared = 0;
        while (p[shared] && p[shared] == prev[shared]) shared++;
        long diff = shared - prev_shared;
        if (diff > 127 || diff < -127) {
            unsigned char esc[3] = {0x80, (unsigned char)((diff >> 8) & 0xff), (unsigned char)(diff & 0xff)};
            put(&o, esc, 3);
        } else {
            signed char d = (signed char)diff;
            put(&o, &d, 1);
        }
        put(&o, p + shared, strlen(p + shared) + 1);
        prev = p;
        prev_shared = shared;
    }
    int fd = open(db_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) peer_die(db_path);
    size_t done = 0;
    while (done < o.len) {
        ssize_t w = write(fd, o.bytes + done, o.len - done);
        if (w < 0) peer_die("write");
        done += (size_t)w;
    }
    if (fsync(fd) != 0) peer_die("fsync");
    close(fd);
    double secs = peer_now() - start;
    printf("{\"paths\":%zu,\"secs\":%.9f,\"db_bytes\":%zu,\"vmhwm_kib\":%llu}\n", n, secs, o.len,
           peer_status_kib("VmHWM"));
    return 0;
}

/* FNV-1a over a matching path, summed into the checksum of one search. */
static uint64_t fnv(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* One search: scans the database for paths whose last component is `name`. */
static void scan(const char *db_path, const char *name, uint64_t *matches, uint64_t *checksum) {
    int fd = open(db_path, O_RDONLY);
    if (fd < 0) peer_die(db_path);
    static unsigned char buf[1 << 16];
    char path[MAX_PATH_BYTES + 1];
    size_t have = 0, at = 0;
    long shared = 0;
    int skipped_header = 0;
    size_t name_len = strlen(name);
    /* The decoder's state: 0 reading the prefix change, 1..2 the escape's
     * bytes, 3 the suffix. */
    int state = 0;
    unsigned char esc_hi = 0;
    long len = 0;
    for (;;) {
        if (at == have) {
            ssize_t r = read(fd, buf, sizeof buf);
            if (r < 0) peer_die("read");
            if (r == 0) break;
            have = (size_t)r;
            at = 0;
            if (!skipped_header) {
                if (have < HEADER_BYTES || memcmp(buf, HEADER, HEADER_BYTES) != 0) {
                    fprintf(stderr, "%s: not a LOCATE02 database\n", db_path);
                    exit(1);
                }
                at = HEADER_BYTES;
                skipped_header = 1;
                continue;
            }
        }
        unsigned char c = buf[at++];
        switch (state) {
        case 0:
            if (c == 0x80) {
                state = 1;
            } else {
                shared += (signed char)c;
                len = shared;
                state = 3;
            }
            break;
        case 1:
            esc_hi = c;
            state = 2;
            break;
        case 2:
            shared += (int16_t)(((uint16_t)esc_hi << 8) | c);
            len = shared;
            state = 3;
            break;
        default:
            if (c != 0) {
                if (len < MAX_PATH_BYTES) path[len++] = (char)c;
                break;
            }
            path[len] = 0;
            {
                const char *slash = strrchr(path, '/');
                const char *base = slash ? slash + 1 : path;
                if ((size_t)(path + len - base) == name_len && memcmp(base, name, name_len) == 0) {
                    *matches += 1;
                    *checksum += fnv(path);
                }
            }
            state = 0;
            break;
        }
    }
    close(fd);
}

static int search(const char *db_path, const char *queries_path) {
    size_t len;
    char *text = slurp(queries_path, &len);
    char **names;
    size_t n = lines(text, len, &names);
    uint64_t matches = 0, checksum = 0;
    double start = peer_now();
    for (size_t i = 0; i < n; i++) scan(db_path, names[i], &matches, &checksum);
    double secs = peer_now() - start;
    printf("{\"searches\":%zu,\"secs\":%.9f,\"matches\":%llu,\"checksum\":%llu,\"vmhwm_kib\":%llu}\n", n, secs,
           (unsigned long long)matches, (unsigned long long)checksum, peer_status_kib("VmHWM"));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "build") == 0) return build(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "search") == 0) return search(argv[2], argv[3]);
    fprintf(stderr, "usage: %s build PATHLIST DB | search DB QUERIES\n", argv[0]);
    return 2;
}
