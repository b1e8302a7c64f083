//! Extended attributes: (object, name) -> value keys in the index, changed
//! in the object's transactions (so an xattr and the data it describes can
//! change atomically) and read from one snapshot.

use std::ops::Bound;

use crate::error::{ObjectError, Result};
use crate::meta::{decode_xattr_key, prefix_end, xattr_key, xattr_prefix, Timestamp, XattrName, XattrValue};
use crate::store::{Durability, Store};
use crate::txn::Transaction;

impl Transaction<'_> {
    /// Sets xattr `name` of `object` (held exclusively) to `value`.
    pub fn set_xattr(&mut self, object: u64, name: &XattrName, value: &[u8]) -> Result<()> {
        let mut onode = self.onode(object)?.ok_or(ObjectError::NoSuchObject { object })?;
        self.check_locked(object)?;
        let bytes = XattrValue(value.to_vec()).encode()?;
        self.put(&xattr_key(object, name), &bytes);
        onode.ctime = Timestamp::now();
        self.put_onode(object, &onode)
    }

    /// Removes xattr `name` of `object` (held exclusively); returns
    /// whether it was there.
    pub fn remove_xattr(&mut self, object: u64, name: &XattrName) -> Result<bool> {
        let mut onode = self.onode(object)?.ok_or(ObjectError::NoSuchObject { object })?;
        self.check_locked(object)?;
        let key = xattr_key(object, name);
        if self.get(&key)?.is_none() {
            return Ok(false);
        }
        self.delete(&key);
        onode.ctime = Timestamp::now();
        self.put_onode(object, &onode)?;
        Ok(true)
    }
}

impl Store {
    /// Sets xattr `name` of `object` to `value`.
    pub fn set_xattr(&self, object: u64, name: &XattrName, value: &[u8], durability: Durability) -> Result<()> {
        self.transact(&[object], durability, |txn| txn.set_xattr(object, name, value))?;
        Ok(())
    }

    /// Removes xattr `name` of `object`; returns whether it was there.
    pub fn remove_xattr(&self, object: u64, name: &XattrName, durability: Durability) -> Result<bool> {
        Ok(self.transact(&[object], durability, |txn| txn.remove_xattr(object, name))?.0)
    }

    /// The value of xattr `name` of `object`, if set.
    pub fn get_xattr(&self, object: u64, name: &XattrName) -> Result<Option<Vec<u8>>> {
        self.index().get(&xattr_key(object, name))?.map(|v| XattrValue::decode(&v).map(|x| x.0)).transpose()
    }

    /// Every xattr name of `object`, in byte order.
    pub fn list_xattrs(&self, object: u64) -> Result<Vec<XattrName>> {
        let prefix = xattr_prefix(object);
        let end = prefix_end(&prefix).unwrap_or_default();
        let mut out = Vec::new();
        for kv in self.index().range(Bound::Included(&prefix[..]), Bound::Excluded(&end[..]), true)? {
            let (k, _) = kv?;
            out.push(decode_xattr_key(&k)?.1);
        }
        Ok(out)
    }
}
