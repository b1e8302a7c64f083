//! Scans: a bucket's keys in byte order of the whole key, by range or
//! prefix, walking its directory levels.
//!
//! The dmap orders a directory's entries by name, but a key's order is
//! that of the whole path, where a level `d` sorts as `d/`: `a-b` and `a.b`
//! come before the keys under `a/` although the level `a` sorts before
//! them as a name. So a level met in a listing is deferred (a small heap
//! keyed by `name/`) and entered once every name below `name/` is out;
//! only names extending `name` with a byte below `/` fall in between, so
//! the heap stays small. Listing is paged, each directory's pages growing
//! from [`FIRST_PAGE`] to [`LAST_PAGE`] entries so that a short scan lists
//! little more than it returns. A scan is not a snapshot: a key present
//! throughout is returned exactly once, keys added or removed meanwhile
//! may or may not be. A value a scan returns ([`Scan::next_value_into`])
//! is read from the key's object as one read, so it is whole: the value
//! the key held at some moment during the scan, never a mix.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use larder_namespace::list;
use larder_object::meta::{Dentry, Kind, Name};
use larder_object::FetchedOnodes;

use crate::error::Result;
use crate::Kv;

/// Entries read by a directory's first listing call.
const FIRST_PAGE: usize = 16;
/// Most entries read per listing call (each call doubles the last).
const LAST_PAGE: usize = 256;

/// One key a scan returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanEntry {
    /// The whole key.
    pub key: Vec<u8>,
    /// The object holding its value.
    pub object: u64,
    /// The value's size in bytes.
    pub size: u64,
}

/// A level waiting to be entered: `name/`, its directory, and where the
/// scan starts inside it (relative; empty for its first key).
type Level = Reverse<(Vec<u8>, u64, Vec<u8>)>;

/// A directory being listed.
struct Cursor {
    dir: u64,
    /// The key bytes of this level, ending in `/` (empty for the bucket).
    prefix: Vec<u8>,
    page: VecDeque<(Name, Dentry)>,
    /// Last name listed (the next page starts after it).
    after: Option<Name>,
    /// Where the first page starts (relative), when the scan starts inside.
    from: Vec<u8>,
    /// Entries the next listing call asks for.
    page_size: usize,
    exhausted: bool,
    /// Levels met, keyed by `name/`, with the start inside them.
    deferred: BinaryHeap<Level>,
    /// The first part of the relative start, and what follows its `/`.
    start_part: Vec<u8>,
    start_rest: Option<Vec<u8>>,
}

/// A scan in progress (see the module doc); an iterator of entries.
pub struct Scan<'a> {
    kv: &'a Kv,
    /// The bucket's name, for the path entries of its keys.
    bucket: Vec<u8>,
    stack: Vec<Cursor>,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    /// The onodes of the objects listed next, fetched together when the
    /// first of them was to be read (see [`Scan::fetch_page`]).
    fetched: FetchedOnodes,
    /// The objects of that page left out of the fetch (ascending): their
    /// keys' path entries were cached.
    left_out: Vec<u64>,
}

impl Kv {
    /// The keys of `bucket` in `[start, end)` (no end: to the last), in
    /// byte order, each with its object and size ([`ScanEntry`]); for the
    /// values too, step it with [`Scan::next_value_into`] (or iterate
    /// [`Scan::with_values`]), which reads each value from the object the
    /// listing found, with no second lookup of its key. An I/O or corruption
    /// error is yielded as an `Err` item and ends the scan.
    ///
    /// ```
    /// use larder_kv::{Durability, Kv, KvOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let kv = Kv::create(tmp.path(), KvOptions::default())?;
    /// kv.create_bucket("b")?;
    /// for key in ["a", "b/1", "b/2", "c"] {
    ///     kv.put("b", key, key.as_bytes(), Durability::Buffered)?;
    /// }
    /// let keys = |scan: larder_kv::Scan| -> larder_kv::Result<Vec<Vec<u8>>> {
    ///     scan.map(|entry| entry.map(|e| e.key)).collect()
    /// };
    /// assert_eq!(keys(kv.scan_range("b", b"b", Some(b"c"))?)?, [b"b/1".to_vec(), b"b/2".to_vec()]);
    /// assert_eq!(keys(kv.scan_prefix("b", b"b/")?)?, [b"b/1".to_vec(), b"b/2".to_vec()]);
    /// assert_eq!(keys(kv.scan_range("b", b"", None)?)?.len(), 4);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scan_range(&self, bucket: impl AsRef<[u8]>, start: &[u8], end: Option<&[u8]>) -> Result<Scan<'_>> {
        let dir = self.bucket(bucket.as_ref())?.id;
        let name = bucket.as_ref().to_vec();
        let mut scan = Scan {
            kv: self,
            bucket: name,
            stack: Vec::new(),
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
            fetched: FetchedOnodes::default(),
            left_out: Vec::new(),
        };
        let root = scan.cursor(dir, Vec::new(), start.to_vec())?;
        scan.stack.push(root);
        Ok(scan)
    }

    /// The keys of `bucket` starting with `prefix`, in byte order (see
    /// [`Kv::scan_range`]).
    pub fn scan_prefix(&self, bucket: impl AsRef<[u8]>, prefix: &[u8]) -> Result<Scan<'_>> {
        let end = larder_object::meta::prefix_end(prefix);
        self.scan_range(bucket, prefix, end.as_deref())
    }
}

impl<'a> Scan<'a> {
    /// A cursor over `dir` whose keys start with `prefix`, starting at the
    /// relative key `from`.
    fn cursor(&self, dir: u64, prefix: Vec<u8>, from: Vec<u8>) -> Result<Cursor> {
        let (start_part, start_rest) = match from.iter().position(|&b| b == b'/') {
            Some(i) => (from[..i].to_vec(), Some(from[i + 1..].to_vec())),
            None => (from.clone(), None),
        };
        let mut deferred = BinaryHeap::new();
        // Levels named by a proper prefix P of the start's first part, with
        // the byte after P below '/', sort (as `P/`) after the start though
        // their names sort before it: find them by lookup.
        for len in 1..start_part.len() {
            if start_part[len] >= b'/' {
                continue;
            }
            let Ok(name) = Name::new(&start_part[..len]) else { continue };
            if let Some(d) = list::lookup(self.kv.store(), dir, &name)?.filter(|d| d.kind == Kind::Directory) {
                let mut k = name.into_bytes();
                k.push(b'/');
                deferred.push(Reverse((k, d.child, Vec::new())));
            }
        }
        Ok(Cursor {
            dir,
            prefix,
            page: VecDeque::new(),
            after: None,
            from: start_part.clone(),
            page_size: FIRST_PAGE,
            exhausted: false,
            deferred,
            start_part,
            start_rest,
        })
    }

    fn refill(&mut self) -> Result<()> {
        let store = self.kv.store();
        let Some(top) = self.stack.last_mut() else { return Ok(()) };
        if !top.page.is_empty() || top.exhausted {
            return Ok(());
        }
        let limit = top.page_size;
        top.page_size = (limit * 2).min(LAST_PAGE);
        let page = match &top.after {
            Some(after) => list::list(store, top.dir, Some(after), limit)?,
            None => list::list_from(store, top.dir, &top.from, limit)?,
        };
        top.exhausted = page.len() < limit;
        top.after = page.last().map(|(n, _)| n.clone()).or(top.after.take());
        top.page.extend(page);
        Ok(())
    }

    fn past_end(&self, key: &[u8]) -> bool {
        self.end.as_deref().is_some_and(|e| key >= e)
    }

    /// The next file entry listed in range: its key into `key` (replaced)
    /// and its object, or `None` at the end. The object may have gone
    /// since its listing; the callers skip it then.
    fn next_listed(&mut self, key: &mut Vec<u8>) -> Result<Option<u64>> {
        loop {
            self.refill()?;
            let Some(top) = self.stack.last_mut() else { return Ok(None) };
            if let Some((name, d)) = top.page.front().filter(|(_, d)| d.kind == Kind::Directory) {
                let mut k = name.as_bytes().to_vec();
                k.push(b'/');
                let inner = match &top.start_rest {
                    Some(rest) if name.as_bytes() == top.start_part.as_slice() => rest.clone(),
                    _ => Vec::new(),
                };
                top.deferred.push(Reverse((k, d.child, inner)));
                top.page.pop_front();
                continue;
            }
            let file = top.page.front().map(|(n, _)| n.as_bytes().to_vec());
            let level_first = match (top.deferred.peek(), &file) {
                (Some(Reverse((k, _, _))), Some(f)) => k < f,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if level_first {
                let Some(Reverse((k, child, inner))) = top.deferred.pop() else { continue };
                let mut prefix = top.prefix.clone();
                prefix.extend_from_slice(&k);
                if self.past_end(&prefix) {
                    self.stack.clear();
                    return Ok(None);
                }
                let cursor = self.cursor(child, prefix, inner)?;
                self.stack.push(cursor);
                continue;
            }
            let Some((name, d)) = top.page.pop_front() else {
                self.stack.pop();
                continue;
            };
            if d.kind != Kind::File {
                continue;
            }
            key.clear();
            key.extend_from_slice(&top.prefix);
            key.extend_from_slice(name.as_bytes());
            if key.as_slice() < self.start.as_slice() {
                continue;
            }
            if self.past_end(key) {
                self.stack.clear();
                return Ok(None);
            }
            return Ok(Some(d.child));
        }
    }

    fn step(&mut self) -> Result<Option<ScanEntry>> {
        let mut key = Vec::new();
        while let Some(object) = self.next_listed(&mut key)? {
            if !self.fetched.holds(object) && self.left_out.binary_search(&object).is_err() {
                self.fetch_page(object)?;
            }
            // A key deleted since its listing is skipped.
            if let Some(size) = self.kv.store().with_attributes_fetched(&self.fetched, object, |o| o.size)? {
                return Ok(Some(ScanEntry { key, object, size }));
            }
        }
        Ok(None)
    }

    /// The next key and its value: replaces `key` and `value` with them
    /// (their allocations reused) and returns the key's object, or returns
    /// `None` at the end of the scan. The value is read from the object the
    /// listing named, with no second lookup of the key: a small value
    /// straight from the object's onode (in the metadata cache), a large
    /// one through its extents, checked as [`Kv::get`] checks. It is one
    /// whole value the key held during the scan, never a mix of two. An
    /// error ends the scan (later calls return `None`).
    ///
    /// ```
    /// use larder_kv::{Durability, Kv, KvOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let kv = Kv::create(tmp.path(), KvOptions::default())?;
    /// kv.create_bucket("b")?;
    /// for key in ["a", "b/1", "c"] {
    ///     kv.put("b", key, key.to_uppercase().as_bytes(), Durability::Buffered)?;
    /// }
    /// let mut scan = kv.scan_range("b", b"b", None)?;
    /// let (mut key, mut value) = (Vec::new(), Vec::new());
    /// let mut seen = Vec::new();
    /// while scan.next_value_into(&mut key, &mut value)?.is_some() {
    ///     seen.push((key.clone(), value.clone()));
    /// }
    /// assert_eq!(seen, [(b"b/1".to_vec(), b"B/1".to_vec()), (b"c".to_vec(), b"C".to_vec())]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_value_into(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<Option<u64>> {
        let found = self.next_value_step(key, value);
        if found.is_err() {
            self.stack.clear();
        }
        found
    }

    fn next_value_step(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<Option<u64>> {
        while let Some(object) = self.next_listed(key)? {
            // A key deleted since its listing is skipped: its object is
            // gone, and object ids are never reused. An object fetched with
            // its page is read from the fetch (as of then: a value the key
            // held during the scan), with no cache search; a key a get read
            // is answered by its path entry (reading the onode into the
            // cache again would keep it twice).
            let found = if self.fetched.holds(object) {
                self.kv.store().read_to_end_fetched(&self.fetched, object, value)?
            } else {
                match self.kv.read_path_cached(&self.bucket, key, object, value)? {
                    Some(found) => found,
                    None if self.left_out.binary_search(&object).is_ok() => {
                        self.kv.store().read_to_end_into(object, value)?
                    }
                    None => {
                        self.fetch_page(object)?;
                        self.kv.store().read_to_end_fetched(&self.fetched, object, value)?
                    }
                }
            };
            if found {
                return Ok(Some(object));
            }
        }
        Ok(None)
    }

    /// Fetches together the onodes of `object` (listed last) and of the
    /// objects of the keys left in the page being read, up to the scan's
    /// end (for their values, or for their sizes when the scan yields
    /// [`ScanEntry`]s): one sorted multi-get of the index for them all, where reading
    /// each in turn was one point get each (object ids follow creation
    /// order, not key order, so a page's onodes are scattered: a point get
    /// each was three quarters of a scan). A key whose path entry is
    /// cached is left out: its value is read from there.
    fn fetch_page(&mut self, object: u64) -> Result<()> {
        let mut objects = vec![object];
        self.left_out.clear();
        if let Some(top) = self.stack.last() {
            let mut key = top.prefix.clone();
            for (name, d) in top.page.iter().filter(|(_, d)| d.kind == Kind::File) {
                key.truncate(top.prefix.len());
                key.extend_from_slice(name.as_bytes());
                if self.past_end(&key) {
                    break;
                }
                if self.kv.path_cached_leads_to(&self.bucket, &key, d.child) {
                    self.left_out.push(d.child);
                } else {
                    objects.push(d.child);
                }
            }
        }
        self.left_out.sort_unstable();
        self.fetched = self.kv.store().fetch_onodes(&objects)?;
        Ok(())
    }

    /// Sizes the scan's first listing for a caller that means to read
    /// about `keys` keys (at most 256 are listed at once): a
    /// short scan of known length then lists its directory once instead
    /// of in pages growing from 16 (each listing is an index range read).
    /// Call it before the first step; it changes only how the scan reads,
    /// never what it returns.
    pub fn expecting(mut self, keys: usize) -> Self {
        if let Some(top) = self.stack.last_mut().filter(|c| c.page.is_empty() && c.after.is_none()) {
            top.page_size = keys.clamp(1, LAST_PAGE);
        }
        self
    }

    /// This scan as an iterator of `(key, value)` pairs (see
    /// [`Scan::next_value_into`]; that call reuses its buffers, this one
    /// allocates a key and a value per item).
    pub fn with_values(self) -> ScanValues<'a> {
        ScanValues { scan: self }
    }
}

/// A scan yielding keys with their values (from [`Scan::with_values`]).
pub struct ScanValues<'a> {
    scan: Scan<'a>,
}

impl Iterator for ScanValues<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        match self.scan.next_value_into(&mut key, &mut value) {
            Ok(Some(_)) => Some(Ok((key, value))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<ScanEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => None,
            Err(e) => {
                self.stack.clear();
                Some(Err(e))
            }
        }
    }
}
