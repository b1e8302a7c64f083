"""Scans: whole-key byte order across directory levels, ranges, prefixes,
pages, and agreement with a model."""

import random

import pytest

import larder

def fill(bucket, keys):
    for k in keys:
        try:
            bucket.put(k, ("v:" + k).encode(), durable=False)
        except larder.KeyConflict:
            pass


def test_scan_returns_whole_keys_in_byte_order(bucket):
    # Levels sort as `name/`: `a-b` and `a.b` come before the keys under `a/`.
    fill(bucket, ["a-b", "a.b", "a/c", "a/d/e", "a0", "b/c"])
    expected = sorted(k.encode() for k in ["a-b", "a.b", "a/c", "a/d/e", "a0", "b/c"])
    assert [k for k, _ in bucket.scan()] == expected
    assert list(bucket.scan()) == [(k, b"v:" + k) for k in expected]
    assert list(bucket.scan_sizes()) == [(k, len(b"v:" + k)) for k in expected]
    assert list(bucket) == expected


def test_ranges_and_prefixes(bucket):
    fill(bucket, ["a-b", "a.b", "a/c", "a/d/e", "a0", "b/c"])
    assert [k for k, _ in bucket.scan("a.b", "a0")] == [b"a.b", b"a/c", b"a/d/e"]
    assert [k for k, _ in bucket.scan(start="a/d")] == [b"a/d/e", b"a0", b"b/c"]
    assert [k for k, _ in bucket.scan(end="a.b")] == [b"a-b"]
    assert [k for k, _ in bucket.scan(prefix="a/")] == [b"a/c", b"a/d/e"]
    assert [k for k, _ in bucket.scan_sizes(prefix="a")] == [b"a-b", b"a.b", b"a/c", b"a/d/e", b"a0"]
    assert list(bucket.scan(prefix="zz")) == []
    with pytest.raises(ValueError):
        bucket.scan("a", prefix="a")


def test_scans_cross_pages(bucket):
    keys = [f"d{i // 100}/k{i:05}" for i in range(1300)] + [f"top{i:04}" for i in range(700)]
    with bucket.batch(durable=False) as batch:
        for k in keys:
            batch.put(k, k)
    got = list(bucket.scan())
    assert [k for k, _ in got] == sorted(k.encode() for k in keys)
    assert all(v == k for k, v in got)
    assert [k for k in bucket.scan_sizes(start="d5/")][:1] == [(b"d5/k00500", 9)]


def test_scan_agrees_with_a_model(bucket):
    rng = random.Random(23)
    model = {}
    for _ in range(600):
        parts = [rng.choice("ab.-_0") * rng.randint(1, 2) for _ in range(rng.randint(1, 3))]
        parts = ["c" if p in (".", "..") else p for p in parts]
        key = "/".join(parts)
        if rng.random() < 0.2 and model:
            victim = rng.choice(sorted(model))
            assert bucket.delete(victim, durable=False) is True
            del model[victim]
            continue
        value = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        try:
            bucket.put(key, value, durable=False)
        except larder.KeyConflict:
            assert any(k.startswith(key + "/") or key.startswith(k + "/") for k in model)
            continue
        model[key] = value
    expected = sorted((k.encode(), v) for k, v in model.items())
    assert list(bucket.scan()) == expected
    for _ in range(50):
        lo, hi = sorted(rng.choice(expected)[0] for _ in range(2))
        assert list(bucket.scan(lo, hi)) == [(k, v) for k, v in expected if lo <= k < hi]


def test_a_key_present_throughout_is_returned_once_while_others_change(bucket):
    keep = [f"keep{i:04}" for i in range(1200)]
    fill(bucket, keep)
    seen = []
    for i, (key, _) in enumerate(bucket.scan()):
        seen.append(key)
        if i % 100 == 0:
            bucket.put(f"keep{i:04}x", b"new", durable=False)
            bucket.delete(f"keep{i:04}x", durable=False)
    assert [k for k in seen if not k.endswith(b"x")] == [k.encode() for k in keep]


def test_an_unfinished_scan_raises_closed_once_its_store_closes(store):
    b = store.create_bucket("b")
    fill(b, [f"k{i:04}" for i in range(1500)])
    it = b.scan()
    next(it)
    store.close()
    with pytest.raises(larder.Closed):
        for _ in it:
            pass
