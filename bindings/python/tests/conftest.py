"""Shared fixtures: stores and indexes in pytest's temporary directories."""

import pytest

import larder

# Small log segments: a store zero-fills two segments when it is created.
SMALL = {"log_segment_bytes": 1 << 20}


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def store(store_path):
    with larder.Store(store_path, **SMALL) as s:
        yield s


@pytest.fixture
def bucket(store):
    return store.create_bucket("b")


@pytest.fixture
def index_path(tmp_path):
    return tmp_path / "index"
