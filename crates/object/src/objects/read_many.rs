//! Reads of many objects' bytes whose onodes are fetched together: a
//! caller that is about to read a set of scattered objects (the KV API's
//! scan, one object per key listed) fetches their onodes in one sorted
//! multi-get of the index instead of one point get each.

use std::sync::Arc;

use crate::error::Result;
use crate::meta::{onode_key, Onode};
use crate::store::{MetaValue, Store};

/// The onodes of a set of objects, fetched together
/// ([`Store::fetch_onodes`]), each as of the moment they were fetched.
#[derive(Debug, Default)]
pub struct FetchedOnodes {
    /// Ascending, distinct.
    objects: Vec<u64>,
    /// The onode value of each (`None`: the object did not exist).
    values: Vec<Option<Arc<MetaValue>>>,
}

impl FetchedOnodes {
    /// Whether `object`'s onode is among these.
    pub fn holds(&self, object: u64) -> bool {
        self.objects.binary_search(&object).is_ok()
    }

    /// How many objects' onodes these are.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

impl Store {
    /// The onodes of `objects` (any order, repeats allowed), as
    /// [`Store::get_meta`] reads each: from the metadata cache, the rest
    /// from one sorted multi-get of the index ([`Store::get_meta_many`]),
    /// not kept in the cache (a scan reads each once). Object ids are
    /// onode keys in the same order, so the multi-get walks each run once,
    /// in file order.
    pub fn fetch_onodes(&self, objects: &[u64]) -> Result<FetchedOnodes> {
        let mut objects = objects.to_vec();
        objects.sort_unstable();
        objects.dedup();
        let keys: Vec<_> = objects.iter().map(|&o| onode_key(o)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let values = self.get_meta_many(&refs)?;
        Ok(FetchedOnodes { objects, values })
    }

    /// As [`Store::with_attributes`], with `object`'s onode taken from
    /// `fetched` when it is there (as of when it was fetched), else read
    /// now.
    pub fn with_attributes_fetched<T>(
        &self,
        fetched: &FetchedOnodes,
        object: u64,
        f: impl FnOnce(&Onode) -> T,
    ) -> Result<Option<T>> {
        match fetched.objects.binary_search(&object) {
            Ok(at) => match &fetched.values[at] {
                Some(value) => Ok(Some(f(value.attributes(&self.limits())?))),
                None => Ok(None),
            },
            Err(_) => self.with_attributes(object, f),
        }
    }

    /// As [`Store::read_to_end_into`], with `object`'s onode taken from
    /// `fetched` when it is there (as of when it was fetched: an object
    /// deleted since reads as its bytes then, one deleted before as
    /// absent), else read now. The bytes are one whole value the object
    /// held, never a mix, checked as [`Store::read`] checks.
    pub fn read_to_end_fetched(&self, fetched: &FetchedOnodes, object: u64, out: &mut Vec<u8>) -> Result<bool> {
        match fetched.objects.binary_search(&object) {
            Ok(at) => self.read_to_end_from(fetched.values[at].clone(), object, out),
            Err(_) => self.read_to_end_into(object, out),
        }
    }
}
