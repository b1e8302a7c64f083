//! Entry points for fuzz targets and their stable-toolchain replay
//! (`tests/meta_decoders.rs`): each feeds arbitrary bytes to a decoder,
//! which must return an error or a value and never panic. A value it
//! accepts must re-encode to exactly the input (the encodings are
//! canonical), which is asserted: a failure there is a bug worth a panic
//! in a fuzzer, never reachable from the engine.

use super::{
    Dentry, ExtentMapEntry, HeapObject, HeapPageImage, HeapRoot, HeapType, MetaKey, MetaLimits, Onode, Orphan,
    XattrValue,
};

/// Limits the entry points check against: small, so that random inputs
/// reach the inline and container bounds.
pub const FUZZ_LIMITS: MetaLimits = MetaLimits { inline_max_bytes: 64, container_bytes: 1 << 20, compact_onodes: true };

/// Decodes `data` as an index key of any map. Returns whether it was
/// accepted.
pub fn key(data: &[u8]) -> bool {
    match MetaKey::decode(data) {
        Ok(k) => {
            assert_eq!(k.encode(), data, "key did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as an onode, of either layout. Returns whether it was
/// accepted.
pub fn onode(data: &[u8]) -> bool {
    match Onode::decode(data, &FUZZ_LIMITS) {
        Ok(o) => {
            // Re-encoded in the layout it came in (its version byte).
            let limits = MetaLimits { compact_onodes: data.first() != Some(&1), ..FUZZ_LIMITS };
            assert_eq!(o.encode(&limits).ok().as_deref(), Some(data), "onode did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as a dentry. Returns whether it was accepted.
pub fn dentry(data: &[u8]) -> bool {
    match Dentry::decode(data) {
        Ok(d) => {
            assert_eq!(d.encode().ok().as_ref().map(|b| &b[..]), Some(data), "dentry did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as an fmap entry. Returns whether it was accepted.
pub fn extent_entry(data: &[u8]) -> bool {
    match ExtentMapEntry::decode(data, &FUZZ_LIMITS) {
        Ok(e) => {
            assert_eq!(e.encode(&FUZZ_LIMITS).ok().as_deref(), Some(data), "fmap entry did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as an orphan record. Returns whether it was accepted.
pub fn orphan(data: &[u8]) -> bool {
    match Orphan::decode(data) {
        Ok(o) => {
            assert_eq!(o.encode().ok().as_ref().map(|b| &b[..]), Some(data), "orphan record did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as an extended attribute value. Returns whether it was
/// accepted.
pub fn xattr_value(data: &[u8]) -> bool {
    match XattrValue::decode(data) {
        Ok(v) => {
            assert_eq!(v.encode().ok().as_deref(), Some(data), "xattr value did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as an intent-log record's payload (an index batch or an
/// ingest marker, format.md section 14), as recovery does. Returns whether
/// it was accepted.
pub fn log_payload(data: &[u8]) -> bool {
    use crate::store::payload::{decode, encode_batch, encode_ingested, Payload};
    match decode(data) {
        Ok(p) => {
            let again = match &p {
                Payload::Batch(b) => {
                    // Every operation of an accepted batch can be walked.
                    assert_eq!(b.iter().count(), b.len(), "batch operations");
                    encode_batch(b)
                }
                Payload::Ingested { run } => encode_ingested(*run),
            };
            assert_eq!(again, data, "log payload did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as a heap root record. Returns whether it was accepted.
pub fn heap_root(data: &[u8]) -> bool {
    match HeapRoot::decode(data) {
        Ok(r) => {
            assert_eq!(r.encode().ok().as_ref().map(|b| &b[..]), Some(data), "heap root did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as a heap object table entry. Returns whether it was
/// accepted.
pub fn heap_object(data: &[u8]) -> bool {
    match HeapObject::decode(data) {
        Ok(o) => {
            assert_eq!(o.encode().ok().as_ref().map(|b| &b[..]), Some(data), "heap object did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as a heap page image. Returns whether it was accepted.
pub fn heap_page_image(data: &[u8]) -> bool {
    match HeapPageImage::decode(data) {
        Ok(image) => {
            assert_eq!(image.encode().ok().as_deref(), Some(data), "heap page image did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as a heap type record. Returns whether it was accepted.
pub fn heap_type(data: &[u8]) -> bool {
    match HeapType::decode(data) {
        Ok(t) => {
            assert_eq!(t.encode().ok().as_deref(), Some(data), "heap type did not round-trip");
            true
        }
        Err(_) => false,
    }
}

/// Decodes `data` as each kind of tree record (catalog value, id
/// high-water mark, count). Returns whether any kind accepted it.
pub fn tree_record(data: &[u8]) -> bool {
    use super::tree::{decode_tree_record, encode_tree_record, TreeRecordKind};
    let mut accepted = false;
    for kind in [TreeRecordKind::Catalog, TreeRecordKind::NextId, TreeRecordKind::Count] {
        if let Ok(v) = decode_tree_record(kind, data) {
            assert_eq!(&encode_tree_record(v)[..], data, "tree record did not round-trip");
            accepted = true;
        }
    }
    accepted
}

/// Decodes `data` as a key of the trees map. Returns whether it was
/// accepted.
pub fn tree_key(data: &[u8]) -> bool {
    match super::keys::decode_tree_key(data) {
        Ok(k) => {
            assert_eq!(k.encode(), data, "tree key did not round-trip");
            true
        }
        Err(_) => false,
    }
}
