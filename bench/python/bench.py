#!/usr/bin/env python3
"""Larder from Python against py-lmdb and rocksdict: the same keys and
values, each engine in its own process, rounds alternating, medians.

    python3 -m venv target/bench-venv
    target/bench-venv/bin/pip install lmdb rocksdict target/python-wheels/larder-*.whl
    target/bench-venv/bin/python bench/python/bench.py --dir /var/tmp/pybench

(`scripts/test-python.sh` builds the wheel into target/python-wheels.)

Workloads, each timed alone (operations per second):
  put_buffered  N puts, one call (one transaction) each, not synced
  put_batched   N puts in batches of 1000, not synced
  put_durable   D puts, one call each, each on disk when it returns
  put_durable_8 D puts from 8 threads at once, each on disk when it returns
  get           N gets of present keys in random order (median of 3 timed
                passes after an untimed one)
  scan          every (key, value) in key order (the same)

Settings, as a careful user would choose them:
  larder        Store defaults (64 MiB memtable, block and metadata caches);
                a bucket; put(durable=False/True); get; bucket.scan().
  larder-meta256  the same with a 256 MiB metadata cache (meta_cache_bytes)
  larder-index  the standalone Index (64 MiB memtable and cache); no per-call
                durability (flush() makes writes durable), so no put_durable.
  lmdb          map_size 1 GiB; buffered: sync=False, metasync=False (synced
                once at the end); durable: sync=True, metasync=True (the
                defaults); a write transaction per put; gets in one read
                transaction with buffers=False; scans with a cursor.
  rocksdict     raw_mode (bytes, no pickling); 64 MiB write buffer, 64 MiB
                LRU block cache, 10-bit bloom filters, increase_parallelism(2);
                buffered: WriteOptions(sync=False) (the WAL is written, not
                synced); durable: WriteOptions.sync = True; scans with items().
  ceiling       not an engine: the least a durable write can do, a 4 KiB
                overwrite of written blocks and fdatasync (os.pwrite,
                os.fdatasync), for the durable rows only: this VM's disk is
                shared and its sync latency swings by 5x within minutes.

With --out DIR the medians are also written to DIR/python.json in the
results format of larder-bench (BENCHMARKS.md, "Results files"), which
`larder-bench chart DIR/python.json --out DIR` draws as DIR/python.svg.
"""

import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time

ENGINES = ["larder", "larder-meta256", "larder-index", "lmdb", "rocksdict", "ceiling"]
METRICS = ["put_buffered", "put_batched", "put_durable", "put_durable_8", "get", "scan", "peak_rss_mib"]
THREADS = 8
# Timed passes of gets and scans per child, after an untimed one; the
# child reports their median.
PASSES = 3
BATCH = 1000


def dataset(n, seed=23):
    """N distinct 16-byte keys (hex of a bijective hash: random order, no
    '/' so they are valid Larder KV keys) and 100-byte values."""
    keys = [b"%016x" % ((i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) for i in range(n)]
    rng = random.Random(seed)
    values = [rng.randbytes(100) for _ in range(n)]
    return keys, values


class Larder:
    META_CACHE_BYTES = None

    def __init__(self, path, durable):
        import larder

        self.store = larder.Store(path, durable=durable, meta_cache_bytes=self.META_CACHE_BYTES)
        self.bucket = self.store.bucket("bench", create=True)
        self.durable = durable

    def put_each(self, keys, values):
        put, durable = self.bucket.put, self.durable
        for k, v in zip(keys, values):
            put(k, v, durable=durable)

    def put_batches(self, keys, values):
        for i in range(0, len(keys), BATCH):
            with self.bucket.batch(durable=False) as batch:
                put = batch.put
                for k, v in zip(keys[i : i + BATCH], values[i : i + BATCH]):
                    put(k, v)

    def get_all(self, keys):
        get = self.bucket.get
        return sum(1 for k in keys if get(k) is not None)

    def scan_all(self):
        return sum(1 for _ in self.bucket.scan())

    def close(self):
        self.store.close()


class LarderMeta256(Larder):
    """A metadata cache of 256 MiB instead of 64: room for every key's
    entry several times over (the default holds the 100K keys' entries,
    about 500 bytes each, once)."""

    META_CACHE_BYTES = 256 << 20


class LarderIndex:
    def __init__(self, path, durable):
        import larder

        self.larder = larder
        self.index = larder.Index(path)

    def put_each(self, keys, values):
        put = self.index.put
        for k, v in zip(keys, values):
            put(k, v)

    def put_batches(self, keys, values):
        for i in range(0, len(keys), BATCH):
            batch = self.larder.IndexBatch()
            put = batch.put
            for k, v in zip(keys[i : i + BATCH], values[i : i + BATCH]):
                put(k, v)
            self.index.write(batch)

    def get_all(self, keys):
        get = self.index.get
        return sum(1 for k in keys if get(k) is not None)

    def scan_all(self):
        return sum(1 for _ in self.index.scan())

    def close(self):
        self.index.close()


class Lmdb:
    def __init__(self, path, durable):
        import lmdb

        os.makedirs(path, exist_ok=True)
        self.env = lmdb.open(path, map_size=1 << 30, sync=durable, metasync=durable)

    def put_each(self, keys, values):
        begin = self.env.begin
        for k, v in zip(keys, values):
            with begin(write=True) as txn:
                txn.put(k, v)

    def put_batches(self, keys, values):
        for i in range(0, len(keys), BATCH):
            with self.env.begin(write=True) as txn:
                put = txn.put
                for k, v in zip(keys[i : i + BATCH], values[i : i + BATCH]):
                    put(k, v)

    def get_all(self, keys):
        with self.env.begin(buffers=False) as txn:
            get = txn.get
            return sum(1 for k in keys if get(k) is not None)

    def scan_all(self):
        with self.env.begin(buffers=False) as txn:
            return sum(1 for _ in txn.cursor())

    def close(self):
        self.env.sync(True)
        self.env.close()


class RocksDict:
    def __init__(self, path, durable):
        import rocksdict

        self.rocksdict = rocksdict
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        options.increase_parallelism(2)
        options.set_write_buffer_size(64 << 20)
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(rocksdict.Cache(64 << 20))
        table.set_bloom_filter(10, False)
        options.set_block_based_table_factory(table)
        self.db = rocksdict.Rdict(path, options)
        write = rocksdict.WriteOptions()
        write.sync = durable
        self.db.set_write_options(write)

    def put_each(self, keys, values):
        put = self.db.put
        for k, v in zip(keys, values):
            put(k, v)

    def put_batches(self, keys, values):
        for i in range(0, len(keys), BATCH):
            batch = self.rocksdict.WriteBatch(raw_mode=True)
            for k, v in zip(keys[i : i + BATCH], values[i : i + BATCH]):
                batch.put(k, v)
            self.db.write(batch)

    def get_all(self, keys):
        get = self.db.get
        return sum(1 for k in keys if get(k) is not None)

    def scan_all(self):
        return sum(1 for _ in self.db.items())

    def close(self):
        self.db.close()


class Ceiling:
    """Overwrite of written 4 KiB blocks + fdatasync per write."""

    BLOCKS = 1024

    def __init__(self, path, durable):
        os.makedirs(path, exist_ok=True)
        self.fd = os.open(os.path.join(path, "file"), os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(self.fd, bytes(4096 * self.BLOCKS), 0)
        os.fsync(self.fd)
        self.next = 0
        self.lock = threading.Lock()

    def put_each(self, keys, values):
        block = bytes(4096)
        for _ in keys:
            with self.lock:
                offset = (self.next % self.BLOCKS) * 4096
                self.next += 1
            os.pwrite(self.fd, block, offset)
            os.fdatasync(self.fd)

    def close(self):
        os.close(self.fd)


OPENERS = {"larder": Larder, "larder-meta256": LarderMeta256, "larder-index": LarderIndex, "lmdb": Lmdb, "rocksdict": RocksDict, "ceiling": Ceiling}


def put_from_threads(db, keys, values):
    """Puts of `keys` split among THREADS threads started together."""
    start = threading.Barrier(THREADS)
    errors = []

    def run(n):
        try:
            start.wait()
            db.put_each(keys[n::THREADS], values[n::THREADS])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def peak_rss_mib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(call):
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def child(engine, directory, n, durable_n):
    """One engine, every workload, in fresh directories under `directory`."""
    open_engine = OPENERS[engine]
    keys, values = dataset(n)
    rates = {}

    if engine != "larder-index":
        db = open_engine(os.path.join(directory, "durable"), True)
        _, seconds = timed(lambda: db.put_each(keys[:durable_n], values[:durable_n]))
        rates["put_durable"] = durable_n / seconds
        db.close()
        db = open_engine(os.path.join(directory, "durable8"), True)
        _, seconds = timed(lambda: put_from_threads(db, keys[:durable_n], values[:durable_n]))
        rates["put_durable_8"] = durable_n / seconds
        db.close()
    if engine == "ceiling":
        rates["peak_rss_mib"] = peak_rss_mib()
        return rates

    db = open_engine(os.path.join(directory, "buffered"), False)
    _, seconds = timed(lambda: db.put_each(keys, values))
    rates["put_buffered"] = n / seconds
    db.close()

    db = open_engine(os.path.join(directory, "batched"), False)
    _, seconds = timed(lambda: db.put_batches(keys, values))
    rates["put_batched"] = n / seconds
    db.close()

    # Reads on the store the buffered puts filled, reopened.
    db = open_engine(os.path.join(directory, "buffered"), False)
    order = list(keys)
    random.Random(5).shuffle(order)
    db.get_all(order)
    passes = []
    for _ in range(PASSES):
        hits, seconds = timed(lambda: db.get_all(order))
        if hits != n:
            raise SystemExit(f"{engine}: {hits} of {n} gets found their key")
        passes.append(n / seconds)
    rates["get"] = statistics.median(passes)
    db.scan_all()
    passes = []
    for _ in range(PASSES):
        count, seconds = timed(db.scan_all)
        if count != n:
            raise SystemExit(f"{engine}: the scan returned {count} of {n} keys")
        passes.append(n / seconds)
    rates["scan"] = statistics.median(passes)
    db.close()
    rates["peak_rss_mib"] = peak_rss_mib()
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="scratch directory (removed and made again per run)")
    parser.add_argument("--n", type=int, default=100_000, help="keys (default 100000)")
    parser.add_argument("--durable", type=int, default=1000, help="durable puts (default 1000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--out", help="also write the medians to OUT/python.json (larder-bench's results format)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(child(args.child, args.dir, args.n, args.durable)))
        return

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    engines = args.engines.split(",")
    results = {e: {m: [] for m in METRICS} for e in engines}
    for round_number in range(args.rounds):
        # Alternate the order so no engine always runs first or last.
        shift = round_number % len(engines)
        for engine in engines[shift:] + engines[:shift]:
            directory = os.path.join(args.dir, engine)
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            command = [sys.executable, __file__, "--child", engine, "--dir", directory, "--n", str(args.n),
                       "--durable", str(args.durable)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            rates = json.loads(out.strip().splitlines()[-1])
            for metric, rate in rates.items():
                results[engine][metric].append(rate)
            print(f"round {round_number + 1} {engine}: " + ", ".join(f"{m} {r:,.0f}" for m, r in rates.items()),
                  file=sys.stderr)
            shutil.rmtree(directory, ignore_errors=True)

    median = {e: {m: statistics.median(r) for m, r in ms.items() if r} for e, ms in results.items()}
    print(f"\n{args.n} keys of 16 B, values of 100 B, {args.durable} durable puts; "
          f"median of {args.rounds} rounds, operations per second (peak RSS in MiB)\n")
    print("| workload | " + " | ".join(engines) + " | larder / lmdb | larder / rocksdict |")
    print("|---" * (len(engines) + 3) + "|")
    for metric in METRICS:
        cells = [f"{median[e][metric]:,.0f}" if metric in median[e] else "n/a" for e in engines]
        ratios = []
        for peer in ("lmdb", "rocksdict"):
            if metric != "peak_rss_mib" and metric in median.get("larder", {}) and metric in median.get(peer, {}):
                ratios.append(f"{median['larder'][metric] / median[peer][metric]:.2f}x")
            else:
                ratios.append("")
        print(f"| {metric} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    if args.out:
        write_results(args.out, started, " ".join(shlex.quote(a) for a in sys.argv), engines, median)


def results_document(date, commit, command, engines, median):
    """The medians in larder-bench's results format (format 1): one
    operation per workload, larder the subject; peak RSS is not drawn."""
    operations = []
    for metric in METRICS:
        if metric == "peak_rss_mib":
            continue
        values = [{"engine": e, "value": median[e][metric]} for e in engines if metric in median[e]]
        if values:
            operations.append({"name": metric, "unit": "ops/s", "higher_is_better": True, "subject": "larder",
                               "values": values})
    return {"format": 1, "suite": "python", "title": "Python: larder vs py-lmdb and rocksdict", "date": date,
            "commit": commit, "command": command, "source": "", "operations": operations}


def write_results(out, date, command, engines, median):
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "python.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results_document(date, commit, command, engines, median), f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
