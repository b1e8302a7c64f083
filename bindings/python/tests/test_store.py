"""Opening, creating, closing and reopening stores; buckets."""

import pytest

import larder
from conftest import SMALL


def test_store_is_created_then_reopened_with_its_data(store_path):
    with larder.Store(store_path, **SMALL) as s:
        assert not s.closed
        assert s.path == store_path
        s.create_bucket("b").put("k", b"v", durable=False)
    assert s.closed
    with larder.Store(store_path, create=False) as s:
        assert s.bucket("b").get("k") == b"v"


def test_buffered_puts_are_durable_after_close(store_path):
    with larder.Store(store_path, durable=False, **SMALL) as s:
        assert s.durable is False
        b = s.create_bucket("b")
        for i in range(200):
            b.put(f"k{i:03}", f"v{i}")
    with larder.Store(store_path) as s:
        b = s.bucket("b")
        assert [k for k in b] == [f"k{i:03}".encode() for i in range(200)]
        assert b.get("k199") == b"v199"


def test_open_without_create_refuses_a_directory_without_a_store(tmp_path):
    with pytest.raises(larder.NotAStore) as raised:
        larder.Store(tmp_path, create=False)
    assert "no store here" in str(raised.value)
    assert isinstance(raised.value, larder.NotFound)


def test_create_refuses_an_existing_store(store_path):
    larder.Store.create(store_path, **SMALL).close()
    with pytest.raises(larder.AlreadyExists) as raised:
        larder.Store.create(store_path, **SMALL)
    assert "already exists" in str(raised.value)


def test_a_store_open_twice_is_locked(store):
    with pytest.raises(larder.Locked) as raised:
        larder.Store(store.path)
    assert "locked" in str(raised.value)


def test_calls_after_close_raise_closed_and_close_twice_is_allowed(store_path):
    s = larder.Store(store_path, **SMALL)
    b = s.create_bucket("b")
    b.put("k", b"v")
    s.close()
    s.close()
    for call in (lambda: b.get("k"), lambda: b.put("k", b"w"), lambda: s.buckets(), s.sync):
        with pytest.raises(larder.Closed):
            call()
    # Closed released the directory: it opens again in this process.
    with larder.Store(store_path) as again:
        assert again.bucket("b").get("k") == b"v"


def test_a_store_dropped_without_close_is_closed_durably(store_path):
    s = larder.Store(store_path, durable=False, **SMALL)
    s.create_bucket("b").put("k", b"v")
    del s
    with larder.Store(store_path) as s:
        assert s.bucket("b").get("k") == b"v"


def test_the_with_block_closes_the_store_when_it_raises(store_path):
    with pytest.raises(RuntimeError):
        with larder.Store(store_path, **SMALL) as s:
            s.create_bucket("b").put("k", b"v", durable=False)
            raise RuntimeError("boom")
    assert s.closed
    with larder.Store(store_path) as s:
        assert s.bucket("b").get("k") == b"v"


def test_options_are_taken_and_checked(store_path):
    with larder.Store(store_path, memtable_bytes=1 << 20, cache_bytes=1 << 20, meta_cache_bytes=0, **SMALL) as s:
        s.create_bucket("b").put("k", b"v")
        assert s.bucket("b").get("k") == b"v"
    with pytest.raises(larder.InvalidOption) as raised:
        larder.Store(store_path.parent / "other", log_segment_bytes=1000)
    assert "log_segment_bytes" in str(raised.value)


def test_buckets_are_created_listed_and_deleted(store):
    assert store.buckets() == []
    store.create_bucket("b2")
    store.create_bucket(b"b1")
    assert store.buckets() == [b"b1", b"b2"]
    assert store.bucket("b1").name == b"b1"
    with pytest.raises(larder.BucketExists):
        store.create_bucket("b1")
    with pytest.raises(larder.NoSuchBucket) as raised:
        store.bucket("missing")
    assert "missing" in str(raised.value)
    assert store.bucket("made", create=True).name == b"made"
    assert store.bucket("made", create=True).name == b"made"
    store.bucket("b2").put("k", b"v")
    with pytest.raises(larder.BucketNotEmpty):
        store.delete_bucket("b2")
    store.bucket("b2").delete("k")
    store.delete_bucket("b2")
    assert store.buckets() == [b"b1", b"made"]
    with pytest.raises(larder.InvalidBucket):
        store.create_bucket("a/b")
    with pytest.raises(larder.NoSuchBucket):
        store.delete_bucket("b2")


def test_a_bucket_deleted_under_a_handle_raises_no_such_bucket(store):
    b = store.create_bucket("gone")
    store.delete_bucket("gone")
    with pytest.raises(larder.NoSuchBucket):
        b.put("k", b"v")


def test_sync_stats_and_budget(store, bucket):
    before = store.stats()
    bucket.put("k", b"v", durable=False)
    store.sync()
    after = store.stats()
    assert after["log_records"] == before["log_records"] + 1
    assert after["log_syncs"] > before["log_syncs"]
    assert store.batch_budget_bytes > 0
    assert "open" in repr(store)
