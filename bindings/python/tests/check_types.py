"""Not a test: typical uses of the API, type-checked by mypy --strict
against the stub in the installed wheel (scripts/test-python.sh)."""

import tempfile
from typing import Optional

import larder

directory = tempfile.mkdtemp()
with larder.Store(directory + "/store") as store:
    b = store.bucket("b", create=True)
    b.put("k", b"v", durable=False)
    v: Optional[bytes] = b.get("k")
    for key, value in b.scan(prefix="k"):
        print(key.decode(), len(value))
    for key, size in b.scan_sizes():
        print(size + 1)
    with b.batch() as batch:
        batch.put("a", "b")
    h = b.head("k")
    if h is not None:
        print(h.size + h.object)
with larder.Index(directory + "/index") as index:
    with index.snapshot() as snap:
        for k, val in snap.scan(reverse=True):
            print(k + val)
try:
    pass
except larder.NoSuchBucket as e:
    print(e)
