"""Batches: all or none, in order, as context managers or values."""

import pytest

import larder


def test_a_batch_commits_at_the_end_of_its_block(bucket):
    bucket.put("old", b"1")
    with bucket.batch() as batch:
        batch.put("a/x", b"1")
        batch.put("b", "2")
        batch.delete("old")
        assert len(batch) == 3
        assert bucket.get("a/x") is None  # nothing before the commit
    assert bucket.get("a/x") == b"1" and bucket.get("b") == b"2" and bucket.get("old") is None
    with pytest.raises(larder.Closed):
        batch.put("c", b"3")


def test_operations_apply_in_order(bucket):
    with bucket.batch(durable=False) as batch:
        batch.put("k", b"first")
        batch.delete("k")
        batch.put("j", b"first")
        batch.put("j", b"second")
    assert bucket.get("k") is None and bucket.get("j") == b"second"


def test_a_block_that_raises_writes_nothing(bucket):
    with pytest.raises(RuntimeError):
        with bucket.batch() as batch:
            batch.put("a", b"1")
            raise RuntimeError("stop")
    assert bucket.get("a") is None
    with pytest.raises(larder.Closed):
        batch.commit()


@pytest.mark.parametrize(
    "bad, error",
    [("", larder.InvalidKey), ("a//b", larder.InvalidKey), ("x/y", larder.KeyConflict)],
)
def test_a_failing_batch_changes_nothing(bucket, bad, error):
    bucket.put("x", b"file")
    bucket.put("keep", b"old")
    before = list(bucket.scan())
    batch = bucket.batch()
    batch.put("new1", b"1")
    batch.delete("keep")
    batch.put("dir/new2", b"2")
    batch.put(bad, b"3")
    batch.put("new4", b"4")
    with pytest.raises(error):
        batch.commit()
    assert list(bucket.scan()) == before


def test_a_free_batch_is_written_with_bucket_write(store, bucket):
    batch = larder.Batch()
    batch.put("a", b"1")
    batch.put("b/c", b"2")
    with batch:  # an unbound batch is not committed by its block
        pass
    assert bucket.get("a") is None
    bucket.write(batch, durable=True)
    other = store.create_bucket("other")
    other.write(batch)
    assert list(bucket.scan()) == list(other.scan()) == [(b"a", b"1"), (b"b/c", b"2")]
    with pytest.raises(TypeError):
        batch.commit()
    batch.discard()
    assert len(batch) == 0
    assert "Batch" in repr(batch)


def test_batched_changes_survive_a_reopen(store_path):
    from conftest import SMALL

    with larder.Store(store_path, **SMALL) as s:
        with s.create_bucket("b").batch(durable=False) as batch:
            for i in range(100):
                batch.put(f"k/{i:03}", str(i))
    with larder.Store(store_path) as s:
        assert len(list(s.bucket("b"))) == 100


def test_a_batch_too_large_for_one_log_record_is_refused_whole(store, bucket):
    bucket.put("keep", b"old")
    batch = bucket.batch()
    # Inline values travel in the batch's one log record; with 1 MiB log
    # segments about 1.6 MB of them cannot fit.
    for i in range(400):
        batch.put(f"k{i:03}", b"x" * 4000)
    batch.delete("keep")
    assert 400 * 4000 > store.batch_budget_bytes
    with pytest.raises(larder.TooLarge) as raised:
        batch.commit()
    assert "limit" in str(raised.value)
    assert list(bucket.scan()) == [(b"keep", b"old")]
