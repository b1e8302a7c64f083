"""S3 write load and verification for the crash test (crash-test.sh).

    s3_load.py write JOURNAL --seconds S [--threads T] [--stop-file F]
        PutObject from T threads across the three endpoints until S seconds
        pass or F exists; every acknowledged put is appended to JOURNAL as
        "key sha256 size" (only after the 200 response).
    s3_load.py verify JOURNAL
        Reads every journaled object back through each of the three
        endpoints and compares its SHA-256; exits 1 on any loss.
    s3_load.py summary FILE
        The medians over the rounds of bench.sh's lines in FILE (written by
        the Rust load generator, s3-load/), then the issue's ratios.
    s3_load.py put KEY FILE --endpoint URL
        PutObject of FILE's bytes under KEY (the scrub test's probe).
    s3_load.py check KEY FILE --endpoint URL
        GetObject of KEY; exits 1 unless its bytes are FILE's.

Credentials and endpoints come from cluster.sh's fixed values (env
overrides: S3_ENDPOINTS, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, BUCKET).
"""

import argparse
import hashlib
import os
import random
import statistics
import sys
import threading
import time

import boto3
import botocore.config
import botocore.exceptions

ENDPOINTS = os.environ.get(
    "S3_ENDPOINTS", "http://127.0.0.1:3910 http://127.0.0.1:3920 http://127.0.0.1:3930"
).split()
ACCESS_KEY = os.environ.get("AWS_ACCESS_KEY_ID", "GK0123456789abcdef01234567")
SECRET_KEY = os.environ.get(
    "AWS_SECRET_ACCESS_KEY", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)
BUCKET = os.environ.get("BUCKET", "larder-test")


def client(endpoint):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="garage",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=botocore.config.Config(
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=5,
            read_timeout=30,
            s3={"addressing_style": "path"},
        ),
    )


def object_size(rng):
    # Mostly small objects (Garage inlines those under 3 KiB in its
    # metadata), some large ones (data blocks of up to 1 MiB each).
    if rng.random() < 0.7:
        return rng.randint(100, 3000)
    return rng.randint(64 * 1024, 1536 * 1024)


def write(args):
    journal = open(args.journal, "a", buffering=1)
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds
    counts = {"ok": 0, "failed": 0}

    def worker(tid):
        rng = random.Random(tid * 7919 + int(time.time()))
        clients = [client(e) for e in ENDPOINTS]
        i = 0
        while time.monotonic() < deadline and not (
            args.stop_file and os.path.exists(args.stop_file)
        ):
            key = "t%02d/%07d" % (tid, i)
            i += 1
            body = rng.randbytes(object_size(rng))
            c = clients[i % len(clients)]
            try:
                c.put_object(Bucket=BUCKET, Key=key, Body=body)
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
                with lock:
                    counts["failed"] += 1
                continue
            digest = hashlib.sha256(body).hexdigest()
            with lock:
                journal.write("%s %s %d\n" % (key, digest, len(body)))
                counts["ok"] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(args.threads)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    journal.close()
    print(
        "write: %d puts acknowledged, %d failed, in %.1f s (%.1f acknowledged puts/s)"
        % (counts["ok"], counts["failed"], elapsed, counts["ok"] / elapsed)
    )


def verify(args):
    entries = []
    with open(args.journal) as f:
        for line in f:
            key, digest, size = line.split()
            entries.append((key, digest, int(size)))
    lost = 0
    for endpoint in ENDPOINTS:
        c = client(endpoint)
        bad = 0
        for key, digest, size in entries:
            try:
                body = c.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
                print("verify: %s via %s: %s" % (key, endpoint, e), file=sys.stderr)
                bad += 1
                continue
            if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
                print("verify: %s via %s: wrong content" % (key, endpoint), file=sys.stderr)
                bad += 1
        print("verify: %d acknowledged objects read via %s, %d lost or wrong" % (len(entries), endpoint, bad))
        lost += bad
    if lost or not entries:
        sys.exit(1)


def put_one(args):
    with open(args.file, "rb") as f:
        data = f.read()
    client(args.endpoint).put_object(Bucket=BUCKET, Key=args.key, Body=data)


def check_one(args):
    with open(args.file, "rb") as f:
        expected = hashlib.sha256(f.read()).hexdigest()
    body = client(args.endpoint).get_object(Bucket=BUCKET, Key=args.key)["Body"].read()
    found = hashlib.sha256(body).hexdigest()
    if found != expected:
        print(f"{args.key}: read {len(body)} bytes, SHA-256 {found}, expected {expected}")
        sys.exit(1)
    print(f"{args.key}: {len(body)} bytes read back through {args.endpoint}, SHA-256 matches")


def summary(args):
    """Medians over the rounds of bench.sh's lines, then the issue's ratios."""
    rates = {}
    failures = {}
    with open(args.file) as f:
        for line in f:
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            setup = (fields["fsync"], fields["db_engine"], fields["block_store"], int(fields["size"]))
            if fields.get("no_result"):
                # No figure to take a median of: listed with the failures.
                failures.setdefault(setup + ("put",), []).append(
                    "round %s: no result (client exit %s)" % (fields.get("round", "?"), fields.get("client_exit", "?")))
                continue
            ops = ("put",) if fields.get("puts_only") == "1" else ("put", "get")
            for op in ops:
                rates.setdefault(setup + (op,), []).append(float(fields[op + "_ops_per_s"]))
                failed = fields.get(op + "_failures", "0")
                if failed.isdigit() and int(failed) > 0:
                    failures.setdefault(setup + (op,), []).append("round %s: %s failed" % (fields.get("round", "?"), failed))
    median = {key: statistics.median(values) for key, values in rates.items()}
    for key in sorted(failures):
        fsync, db, blocks, size, op = key
        print("failures: fsync=%s db_engine=%s block_store=%s size=%d %s: %s"
              % (fsync, db, blocks, size, op, ", ".join(failures[key])))
    for key in sorted(median):
        fsync, db, blocks, size, op = key
        print("median: fsync=%s db_engine=%s block_store=%s size=%d %s_ops_per_s=%.1f rounds=%d"
              % (fsync, db, blocks, size, op, median[key], len(rates[key])))

    def ratio(label, fsync, size, op, ours, theirs):
        a = median.get((fsync,) + ours + (size, op))
        b = median.get((fsync,) + theirs + (size, op))
        if a is None or b is None or b == 0:
            return
        print("ratio: %s fsync=%s size=%d %s %s/%s against %s/%s = %.2fx"
              % (label, fsync, size, op, ours[0], ours[1], theirs[0], theirs[1], a / b))

    larder_file, larder_blocks = ("larder", "file"), ("larder", "larder")
    for fsync in ("on", "off"):
        for peer in (("lmdb", "file"), ("sqlite", "file")):
            ratio("metadata", fsync, 1024, "put", larder_file, peer)
        ratio("blocks", fsync, 1048576, "put", larder_blocks, larder_file)
        ratio("blocks", fsync, 1048576, "put", larder_blocks, ("lmdb", "file"))
        # The block stores against the one that stores nothing and the one
        # that only overwrites and syncs (the ceilings).
        for ours in (larder_blocks, larder_file, ("larder", "raw")):
            ratio("ceiling", fsync, 1048576, "put", ours, ("larder", "discard"))
        for ours in (larder_blocks, larder_file):
            ratio("ceiling", fsync, 1048576, "put", ours, ("larder", "raw"))
        for size in (1024, 1048576):
            ratio("gets", fsync, size, "get", larder_blocks, larder_file)
            ratio("gets", fsync, size, "get", larder_blocks, ("lmdb", "file"))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("journal")
    w.add_argument("--seconds", type=float, required=True)
    w.add_argument("--threads", type=int, default=8)
    w.add_argument("--stop-file")
    v = sub.add_parser("verify")
    v.add_argument("journal")
    m = sub.add_parser("summary")
    m.add_argument("file")
    for name in ("put", "check"):
        one = sub.add_parser(name)
        one.add_argument("key")
        one.add_argument("file")
        one.add_argument("--endpoint", required=True)
    args = parser.parse_args()
    if args.command == "write":
        write(args)
    elif args.command == "put":
        put_one(args)
    elif args.command == "check":
        check_one(args)
    elif args.command == "summary":
        summary(args)
    else:
        verify(args)


if __name__ == "__main__":
    main()
