"""Put, get, head and delete of one key; the mapping protocol; errors."""

import pytest

import larder


def test_put_get_head_delete(bucket):
    assert bucket.get("k") is None
    assert bucket.head("k") is None
    bucket.put("k", b"value")
    assert bucket.get("k") == b"value"
    head = bucket.head("k")
    assert head.size == 5 and head.object > 0
    bucket.put("k", b"longer value", durable=False)
    assert bucket.get("k") == b"longer value"
    assert bucket.head("k").size == 12
    assert bucket.delete("k") is True
    assert bucket.delete("k") is False
    assert bucket.get("k") is None


def test_keys_and_values_are_bytes_bytearray_or_str(bucket):
    bucket.put(b"a/b", bytearray(b"\x00\xff"))
    bucket.put("a/c", "é")
    assert bucket.get("a/b") == b"\x00\xff"
    assert bucket.get(bytearray(b"a/c")) == "é".encode()
    with pytest.raises(TypeError) as raised:
        bucket.put(1, b"v")
    assert "key must be bytes" in str(raised.value)
    with pytest.raises(TypeError):
        bucket.put("k", 3.5)


def test_large_values_go_to_containers(bucket):
    value = bytes(range(256)) * 4096  # 1 MiB, above the inline limit
    bucket.put("big", value)
    assert bucket.get("big") == value
    assert bucket.head("big").size == len(value)


def test_invalid_keys_are_refused_and_change_nothing(bucket):
    for bad in ["", "/a", "a/", "a//b", "a/./b", "..", "a/\0", "x" * 256, "a/" * 2048 + "a"]:
        with pytest.raises(larder.InvalidKey) as raised:
            bucket.put(bad, b"v")
        assert "refused" in str(raised.value)
    assert list(bucket) == []


def test_a_key_and_a_level_cannot_share_a_name(bucket):
    bucket.put("a/b", b"1")
    with pytest.raises(larder.KeyConflict) as raised:
        bucket.put("a", b"2")
    assert "conflicts" in str(raised.value)
    bucket.put("c", b"3")
    with pytest.raises(larder.KeyConflict):
        bucket.put("c/d", b"4")
    assert bucket.get("a/b") == b"1" and bucket.get("c") == b"3"
    # Deleting the last key under a level removes the level.
    bucket.delete("a/b")
    bucket.put("a", b"5")
    assert bucket.get("a") == b"5"


def test_the_mapping_protocol(bucket):
    bucket["x"] = b"1"
    assert bucket["x"] == b"1"
    assert "x" in bucket and "y" not in bucket
    with pytest.raises(KeyError):
        bucket["y"]
    del bucket["x"]
    with pytest.raises(KeyError):
        del bucket["x"]
    assert "x" not in bucket
    assert "Bucket" in repr(bucket)


def test_exception_classes_form_a_hierarchy():
    for name in [
        "NotFound", "AlreadyExists", "InvalidKey", "InvalidBucket", "BucketNotEmpty", "KeyConflict",
        "Contended", "NoSpace", "TooLarge", "Corrupt", "Poisoned", "Locked", "Unsupported",
        "InvalidOption", "IoError", "Closed",
    ]:
        assert issubclass(getattr(larder, name), larder.Error), name
    assert issubclass(larder.NoSuchBucket, larder.NotFound)
    assert issubclass(larder.NotAStore, larder.NotFound)
    assert issubclass(larder.BucketExists, larder.AlreadyExists)
    assert issubclass(larder.Error, Exception)
