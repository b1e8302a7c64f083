"""A full file system: puts raise NoSpace with the Rust message and change
nothing; deletes go through and give the space back.

Mounting a small tmpfs needs root: without it this test FAILS unless
LARDER_SKIP_ROOT=1 says to skip it (as the Rust full-disk tests do)."""

import os
import subprocess

import pytest

import larder

VALUE = b"x" * (256 << 10)


@pytest.fixture
def small_file_system(tmp_path):
    if os.geteuid() != 0:
        if os.environ.get("LARDER_SKIP_ROOT") == "1":
            pytest.skip("needs root to mount a tmpfs (LARDER_SKIP_ROOT=1)")
        pytest.fail("needs root to mount a small tmpfs; set LARDER_SKIP_ROOT=1 to skip on purpose")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_file_system_raises_no_space_and_deletes_give_it_back(small_file_system):
    path = small_file_system / "store"
    with larder.Store(path, log_segment_bytes=1 << 20) as store:
        bucket = store.create_bucket("b")
        written = 0
        with pytest.raises(larder.NoSpace) as raised:
            while written < 1000:
                bucket.put(f"k{written}", VALUE)
                written += 1
        assert "no space" in str(raised.value)
        assert 10 < written < 1000
        # The refused put changed nothing.
        assert bucket.get(f"k{written}") is None
        assert len(list(bucket)) == written
        for i in range(written):
            assert bucket.delete(f"k{i}") is True
    # Freed space is reusable once the deletes are checkpointed (at close).
    with larder.Store(path) as store:
        bucket = store.bucket("b")
        for i in range(written // 2):
            bucket.put(f"again{i}", VALUE)
        assert len(list(bucket)) == written // 2
