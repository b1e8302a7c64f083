"""Larder from Python: a key-value store and a standalone ordered index.

Keys and values are ``bytes``, ``bytearray`` or ``str`` (as its UTF-8
bytes); what comes back is always ``bytes``. Every call that reads or
writes releases the GIL, so threads run Larder's work in parallel.
"""

import os
import pathlib
from types import TracebackType
from typing import Generic, Optional, Tuple, Type, TypeVar, Union

__version__: str

BytesLike = Union[bytes, bytearray, str]
Path = Union[str, "os.PathLike[str]"]
_Item = TypeVar("_Item")

class Store:
    """An open store: a directory holding Larder's files.

    ``Store(path)`` opens the store in ``path``, creating it first if the
    directory holds none (``create=False``: raise ``NotAStore`` instead).
    ``durable`` is the durability of the calls that do not say: durable
    calls return once the change is on disk; buffered ones return at once
    and are durable within about 10 ms (a crash loses at most a suffix of
    them). ``memtable_bytes`` and ``cache_bytes`` are the index's memtable
    and block cache budgets (64 MiB each by default), ``meta_cache_bytes``
    the metadata cache's (64 MiB); ``log_segment_bytes`` (only when the
    store is created) the size of its log segments (fitted to the file
    system's free space by default, at most 64 MiB).

    A store is a context manager; ``close()`` (or the end of the ``with``
    block) makes everything durable and releases the directory.
    """

    def __init__(
        self,
        path: Path,
        *,
        create: bool = True,
        durable: bool = True,
        memtable_bytes: Optional[int] = None,
        cache_bytes: Optional[int] = None,
        meta_cache_bytes: Optional[int] = None,
        log_segment_bytes: Optional[int] = None,
    ) -> None: ...
    @staticmethod
    def create(
        path: Path,
        *,
        durable: bool = True,
        memtable_bytes: Optional[int] = None,
        cache_bytes: Optional[int] = None,
        meta_cache_bytes: Optional[int] = None,
        log_segment_bytes: Optional[int] = None,
    ) -> "Store":
        """Creates a new store in ``path``; ``AlreadyExists`` if one is there."""
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def durable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def batch_budget_bytes(self) -> int:
        """Bytes of values a batch should hold at most."""
    def create_bucket(self, name: BytesLike) -> "Bucket":
        """Creates bucket ``name`` durably; ``BucketExists`` if it is there."""
    def bucket(self, name: BytesLike, *, create: bool = False) -> "Bucket":
        """Bucket ``name``; ``NoSuchBucket`` if missing unless ``create``."""
    def delete_bucket(self, name: BytesLike) -> None:
        """Deletes an empty bucket durably; ``BucketNotEmpty`` otherwise."""
    def buckets(self) -> list[bytes]:
        """Every bucket's name, in byte order."""
    def sync(self) -> None:
        """Makes every change so far durable."""
    def stats(self) -> dict[str, int]:
        """Counters of the store's log: log_records, log_groups, log_syncs, log_bytes_written."""
    def close(self) -> None:
        """Makes everything durable and closes the store (twice is allowed)."""
    def __enter__(self) -> "Store": ...
    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class Head:
    """What a key names: its object's id and the value's size."""

    @property
    def object(self) -> int: ...
    @property
    def size(self) -> int: ...

class Bucket:
    """A bucket of a store. Keys are paths: ``/`` separates directory
    levels, each a valid file name (no empty level, no ``.`` or ``..``, at
    most 255 bytes, no NUL; a key at most 4095 bytes), so ``a`` cannot be a key while ``a/b`` is one
    (``KeyConflict``). ``durable=None`` means the store's default.

    It is also a mapping: ``b[key]`` (``KeyError`` if absent),
    ``b[key] = value``, ``del b[key]``, ``key in b``, ``iter(b)`` (keys).
    """

    @property
    def name(self) -> bytes: ...
    def put(self, key: BytesLike, value: BytesLike, *, durable: Optional[bool] = None) -> None:
        """Stores ``value`` under ``key``, replacing any value, atomically."""
    def get(self, key: BytesLike) -> Optional[bytes]:
        """The value under ``key``, or ``None``."""
    def head(self, key: BytesLike) -> Optional[Head]:
        """The object and size under ``key``, or ``None``, without reading the value."""
    def delete(self, key: BytesLike, *, durable: Optional[bool] = None) -> bool:
        """Removes ``key``; returns whether it was there."""
    def scan(
        self,
        start: Optional[BytesLike] = None,
        end: Optional[BytesLike] = None,
        *,
        prefix: Optional[BytesLike] = None,
    ) -> "ScanIterator[Tuple[bytes, bytes]]":
        """``(key, value)`` for the keys in ``[start, end)`` or starting with
        ``prefix``, in byte order. Not a snapshot: a key present throughout
        is returned exactly once."""
    def scan_sizes(
        self,
        start: Optional[BytesLike] = None,
        end: Optional[BytesLike] = None,
        *,
        prefix: Optional[BytesLike] = None,
    ) -> "ScanIterator[Tuple[bytes, int]]":
        """Like ``scan``, yielding ``(key, size)`` without reading values."""
    def batch(self, *, durable: Optional[bool] = None) -> "Batch":
        """A batch bound to this bucket: committed at the end of a ``with``
        block, or by ``commit()``; nothing of it if the block raised."""
    def write(self, batch: "Batch", *, durable: Optional[bool] = None) -> None:
        """Applies ``batch`` atomically: every operation or none."""
    def __getitem__(self, key: BytesLike) -> bytes: ...
    def __setitem__(self, key: BytesLike, value: BytesLike) -> None: ...
    def __delitem__(self, key: BytesLike) -> None: ...
    def __contains__(self, key: BytesLike) -> bool: ...
    def __iter__(self) -> "ScanIterator[bytes]": ...

class ScanIterator(Generic[_Item]):
    """An iterator over a bucket's keys, read a page at a time."""

    def __iter__(self) -> "ScanIterator[_Item]": ...
    def __next__(self) -> _Item: ...

class Batch:
    """Puts and deletes applied in order, all or none. ``Batch()`` is
    applied with ``Bucket.write``; ``Bucket.batch()`` makes one that
    commits itself once."""

    def __init__(self) -> None: ...
    def put(self, key: BytesLike, value: BytesLike) -> None: ...
    def delete(self, key: BytesLike) -> None: ...
    def commit(self) -> None:
        """Commits a batch from ``Bucket.batch()``; it cannot be used again."""
    def discard(self) -> None: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "Batch": ...
    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class Index:
    """A persistent, ordered map of byte keys to byte values in a
    directory, usable without a store (created if the directory is empty
    or missing). Each put, delete or batch is atomic; writes are durable
    after ``flush()`` or ``close()`` (the index keeps no log: a crash loses
    unflushed writes, never part of a batch)."""

    def __init__(
        self,
        path: Path,
        *,
        memtable_bytes: Optional[int] = None,
        cache_bytes: Optional[int] = None,
    ) -> None: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def closed(self) -> bool: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def durable_seq(self) -> int: ...
    def put(self, key: BytesLike, value: BytesLike) -> None: ...
    def delete(self, key: BytesLike) -> None: ...
    def delete_range(self, start: BytesLike, end: BytesLike) -> None:
        """Removes every key in ``[start, end)``."""
    def get(self, key: BytesLike) -> Optional[bytes]: ...
    def scan(
        self,
        start: Optional[BytesLike] = None,
        end: Optional[BytesLike] = None,
        *,
        prefix: Optional[BytesLike] = None,
        reverse: bool = False,
    ) -> "IndexIterator":
        """``(key, value)`` over ``[start, end)`` or a prefix, forward or
        backward, as the index was when the scan began."""
    def batch(self) -> "IndexBatch": ...
    def write(self, batch: "IndexBatch") -> None: ...
    def snapshot(self) -> "Snapshot": ...
    def flush(self) -> None:
        """Makes every write so far durable."""
    def compact(self) -> None: ...
    def close(self) -> None:
        """Flushes and closes the index and its snapshots."""
    def __enter__(self) -> "Index": ...
    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class IndexBatch:
    """Puts, deletes and range deletes applied in order, all or none."""

    def __init__(self) -> None: ...
    def put(self, key: BytesLike, value: BytesLike) -> None: ...
    def delete(self, key: BytesLike) -> None: ...
    def delete_range(self, start: BytesLike, end: BytesLike) -> None: ...
    def commit(self) -> None: ...
    def discard(self) -> None: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "IndexBatch": ...
    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class Snapshot:
    """A fixed view of an index; close it to release what it keeps alive."""

    @property
    def seq(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def get(self, key: BytesLike) -> Optional[bytes]: ...
    def scan(
        self,
        start: Optional[BytesLike] = None,
        end: Optional[BytesLike] = None,
        *,
        prefix: Optional[BytesLike] = None,
        reverse: bool = False,
    ) -> "IndexIterator": ...
    def close(self) -> None: ...
    def __enter__(self) -> "Snapshot": ...
    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class IndexIterator:
    def __iter__(self) -> "IndexIterator": ...
    def __next__(self) -> Tuple[bytes, bytes]: ...

class Error(Exception):
    """Base class of every error Larder raises; the message is Rust's."""

class NotFound(Error): ...
class NoSuchBucket(NotFound): ...
class NotAStore(NotFound): ...
class AlreadyExists(Error): ...
class BucketExists(AlreadyExists): ...
class InvalidKey(Error): ...
class InvalidBucket(Error): ...
class BucketNotEmpty(Error): ...
class KeyConflict(Error): ...
class Contended(Error): ...
class NoSpace(Error): ...
class TooLarge(Error): ...
class Corrupt(Error): ...
class Poisoned(Error): ...
class Locked(Error): ...
class Unsupported(Error): ...
class InvalidOption(Error): ...
class IoError(Error): ...
class Closed(Error): ...
