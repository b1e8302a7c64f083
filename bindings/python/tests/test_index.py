"""The standalone index: writes, reads, scans, batches, snapshots."""

import pytest

import larder


def test_put_get_delete_and_reopen(index_path):
    with larder.Index(index_path, memtable_bytes=1 << 20, cache_bytes=1 << 20) as index:
        assert index.path == index_path
        assert index.get(b"k") is None
        index.put(b"k", b"v")
        index.put("\x00binary", bytearray(b"\xff"))
        assert index.get("k") == b"v"
        assert index.get(b"\x00binary") == b"\xff"
        index.delete("k")
        index.delete("never there")
        assert index.get("k") is None
        index.put("k2", b"v2")
        assert index.last_seq == 5
    assert index.closed
    with larder.Index(index_path) as index:
        assert index.get("k2") == b"v2" and index.get("k") is None
        assert index.durable_seq == index.last_seq == 5


def test_flush_makes_writes_durable(index_path):
    with larder.Index(index_path) as index:
        index.put("a", b"1")
        assert index.durable_seq == 0
        index.flush()
        assert index.durable_seq == 1
        index.compact()
        assert index.get("a") == b"1"


def test_scans_ranges_prefixes_and_reverse(index_path):
    with larder.Index(index_path) as index:
        keys = [b"a", b"ab", b"abc", b"b", b"b\xff", b"c"]
        for k in keys:
            index.put(k, k.upper())
        assert list(index.scan()) == [(k, k.upper()) for k in keys]
        assert [k for k, _ in index.scan(b"ab", b"b\xff")] == [b"ab", b"abc", b"b"]
        assert [k for k, _ in index.scan(start=b"b")] == [b"b", b"b\xff", b"c"]
        assert [k for k, _ in index.scan(end=b"ab")] == [b"a"]
        assert [k for k, _ in index.scan(prefix=b"ab")] == [b"ab", b"abc"]
        assert [k for k, _ in index.scan(prefix=b"b", reverse=True)] == [b"b\xff", b"b"]
        assert [k for k, _ in index.scan(reverse=True)] == keys[::-1]
        index.delete_range(b"ab", b"b\xff")
        assert [k for k, _ in index.scan()] == [b"a", b"b\xff", b"c"]
        with pytest.raises(ValueError):
            index.scan(b"a", prefix=b"a")


def test_scans_cross_pages_and_see_the_index_as_they_began(index_path):
    with larder.Index(index_path, memtable_bytes=1 << 16) as index:
        for i in range(3000):
            index.put(f"{i:05}", f"{i}")
        it = index.scan()
        first = next(it)
        index.put("99999", b"later")
        index.delete("00001")
        rest = list(it)
        assert [first] + rest == [(f"{i:05}".encode(), str(i).encode()) for i in range(3000)]


def test_a_batch_is_written_whole_or_not_at_all(index_path):
    with larder.Index(index_path) as index:
        index.put("gone", b"x")
        with index.batch() as batch:
            batch.put("a", b"1")
            batch.delete("gone")
            batch.delete_range("m", "n")
            assert len(batch) == 3
        assert index.get("a") == b"1" and index.get("gone") is None
        seq = index.last_seq
        too_long = larder.IndexBatch()
        too_long.put("b", b"2")
        too_long.put(b"k" * (64 * 1024 + 1), b"3")
        with pytest.raises(larder.TooLarge) as raised:
            index.write(too_long)
        assert "limit" in str(raised.value)
        assert index.get("b") is None and index.last_seq == seq
        with pytest.raises(RuntimeError):
            with index.batch() as batch:
                batch.put("c", b"3")
                raise RuntimeError("stop")
        assert index.get("c") is None
        free = larder.IndexBatch()
        free.put("d", b"4")
        index.write(free)
        assert index.get("d") == b"4"
        with pytest.raises(TypeError):
            free.commit()


def test_a_bound_batch_is_used_once(index_path):
    with larder.Index(index_path) as index:
        batch = index.batch()
        batch.put("a", b"1")
        batch.commit()
        assert index.get("a") == b"1"
        with pytest.raises(larder.Closed):
            batch.put("b", b"2")
        with pytest.raises(larder.Closed):
            batch.commit()
        dropped = index.batch()
        dropped.put("c", b"3")
        dropped.discard()
        with pytest.raises(larder.Closed):
            index.write(dropped)
        assert index.get("c") is None
        free = larder.IndexBatch()
        free.put("d", b"4")
        free.discard()
        assert len(free) == 0
        free.put("e", b"5")
        index.write(free)
        assert index.get("d") is None and index.get("e") == b"5"


def test_snapshots_keep_their_view(index_path):
    with larder.Index(index_path) as index:
        index.put("k", b"old")
        with index.snapshot() as snap:
            index.put("k", b"new")
            index.put("k2", b"added")
            assert snap.get("k") == b"old" and snap.get("k2") is None
            assert list(snap.scan()) == [(b"k", b"old")]
            assert list(snap.scan(prefix="k", reverse=True)) == [(b"k", b"old")]
            assert snap.seq == 1
        assert snap.closed
        with pytest.raises(larder.Closed):
            snap.get("k")
        assert index.get("k") == b"new"


def test_closing_the_index_closes_its_snapshots_and_releases_it(index_path):
    index = larder.Index(index_path)
    index.put("k", b"v")
    snap = index.snapshot()
    with pytest.raises(larder.Locked):
        larder.Index(index_path)
    index.close()
    index.close()
    assert snap.closed
    with pytest.raises(larder.Closed):
        index.get("k")
    with larder.Index(index_path) as again:
        assert again.get("k") == b"v"


def test_a_damaged_index_is_refused_as_corrupt(index_path):
    with larder.Index(index_path) as index:
        index.put("k", b"v")
    current = index_path / "CURRENT"
    current.write_bytes(b"garbage")
    with pytest.raises(larder.Corrupt) as raised:
        larder.Index(index_path)
    assert "CURRENT" in str(raised.value)
