//! Keys of the object layer's maps: round trips, byte order equal to the
//! typed order, exact prefix scans, and refusal of malformed keys and
//! names.

#![allow(clippy::unwrap_used)]

use larder_object::meta::keys::FMAP_KEY_BYTES;
use larder_object::meta::{
    decode_dentry_key, decode_fmap_key, decode_onode_key, decode_orphan_key, decode_store_key, decode_xattr_key,
    dentry_key, dmap_prefix, fmap_key, fmap_prefix, map_prefix, onode_key, orphan_key, prefix_end, xattr_key,
    xattr_prefix, DentryKey, Map, MetaKey, Name, StoreName, XattrName, MAX_OBJECT_BYTES, NEXT_OBJECT_ID,
};
use larder_object::ObjectError;
use proptest::prelude::*;

/// Ids biased to the edges where byte order and numeric order part ways
/// under little-endian (carries across bytes, the top bit).
fn id() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..600,
        Just(u64::MAX),
        (0u32..64).prop_map(|s| 1u64 << s),
        (0u32..64).prop_map(|s| (1u64 << s).wrapping_sub(1)),
    ]
}

fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..1000, any::<u64>().prop_map(|v| v % (MAX_OBJECT_BYTES / 4096)), Just(MAX_OBJECT_BYTES / 4096 - 1)]
        .prop_map(|b| b * 4096)
}

fn file_name() -> impl Strategy<Value = Name> {
    prop_oneof![
        proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'.'), Just(0xFFu8), Just(1u8)], 1..6),
        proptest::collection::vec(any::<u8>(), 1..=255),
    ]
    .prop_filter_map("invalid name", |b| Name::new(b).ok())
}

fn xattr_name() -> impl Strategy<Value = XattrName> {
    proptest::collection::vec(prop_oneof![Just(b'u'), Just(b'.'), Just(b'/'), any::<u8>()], 1..=255)
        .prop_filter_map("invalid name", |b| XattrName::new(b).ok())
}

fn store_name() -> impl Strategy<Value = StoreName> {
    "[a-z0-9_.]{1,40}".prop_map(|s| StoreName::new(s.into_bytes()).unwrap())
}

fn any_key() -> impl Strategy<Value = MetaKey> {
    prop_oneof![
        store_name().prop_map(MetaKey::Store),
        id().prop_map(|object| MetaKey::Onode { object }),
        (id(), offset()).prop_map(|(object, offset)| MetaKey::Extent { object, offset }),
        (id(), file_name()).prop_map(|(parent, name)| MetaKey::Dentry { parent, name }),
        (id(), xattr_name()).prop_map(|(object, name)| MetaKey::Xattr { object, name }),
        id().prop_map(|object| MetaKey::Orphan { object }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn every_key_round_trips(k in any_key()) {
        let bytes = k.encode();
        prop_assert_eq!(bytes[0], k.map().prefix());
        prop_assert_eq!(MetaKey::decode(&bytes).unwrap(), k);
    }

    #[test]
    fn byte_order_is_typed_order_across_all_maps(a in any_key(), b in any_key()) {
        prop_assert_eq!(a.encode().cmp(&b.encode()), a.cmp(&b), "{:?} vs {:?}", a, b);
    }

    #[test]
    fn fmap_byte_order_is_id_offset_order(a in (id(), offset()), b in (id(), offset())) {
        prop_assert_eq!(fmap_key(a.0, a.1).cmp(&fmap_key(b.0, b.1)), a.cmp(&b));
    }

    #[test]
    fn dmap_byte_order_is_parent_name_order(a in (id(), file_name()), b in (id(), file_name())) {
        let (ka, kb) = (dentry_key(a.0, &a.1), dentry_key(b.0, &b.1));
        prop_assert_eq!(ka.cmp(&kb), (a.0, a.1.as_bytes()).cmp(&(b.0, b.1.as_bytes())));
    }

    #[test]
    fn omap_and_orphan_byte_order_is_id_order(a in id(), b in id()) {
        prop_assert_eq!(onode_key(a).cmp(&onode_key(b)), a.cmp(&b));
        prop_assert_eq!(orphan_key(a).cmp(&orphan_key(b)), a.cmp(&b));
    }

    /// A prefix scan `[prefix, prefix_end)` returns exactly the keys of
    /// that object or directory: no other object's keys, none missed.
    #[test]
    fn prefix_scans_are_exact(k in any_key(), other in id(), own in any::<bool>()) {
        let bytes = k.encode();
        let scan = |id: u64| match &k {
            MetaKey::Extent { .. } => Some(fmap_prefix(id)),
            MetaKey::Dentry { .. } => Some(dmap_prefix(id)),
            MetaKey::Xattr { .. } => Some(xattr_prefix(id)),
            _ => None,
        };
        let owner = match &k {
            MetaKey::Extent { object, .. } | MetaKey::Xattr { object, .. } => *object,
            MetaKey::Dentry { parent, .. } => *parent,
            _ => 0,
        };
        let scanned = if own { owner } else { other };
        if let Some(prefix) = scan(scanned) {
            let in_range =
                bytes.as_slice() >= &prefix[..] && prefix_end(&prefix).is_none_or(|end| bytes < end);
            prop_assert_eq!(in_range, scanned == owner);
            prop_assert_eq!(bytes.starts_with(&prefix), scanned == owner);
        }
        // Every key lies in its map's scan range and no other map's.
        for m in Map::ALL {
            let p = map_prefix(m);
            let end = prefix_end(&p).unwrap();
            prop_assert_eq!(bytes.as_slice() >= &p[..] && bytes < end, m == k.map());
        }
    }
}

#[test]
fn layouts_are_big_endian_ids_after_the_prefix() {
    assert_eq!(onode_key(0x0102), [0x10, 0, 0, 0, 0, 0, 0, 0x01, 0x02]);
    assert_eq!(orphan_key(7), [0x50, 0, 0, 0, 0, 0, 0, 0, 7]);
    assert_eq!(fmap_key(1, 0x3000), [0x20, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x30, 0]);
    assert_eq!(fmap_key(1, 0).len(), FMAP_KEY_BYTES);
    assert_eq!(dentry_key(2, &Name::new("ab").unwrap()), [0x30, 0, 0, 0, 0, 0, 0, 0, 2, b'a', b'b']);
    assert_eq!(xattr_key(3, &XattrName::new("user.x").unwrap())[..9], [0x40, 0, 0, 0, 0, 0, 0, 0, 3]);
    let next = StoreName::new(NEXT_OBJECT_ID).unwrap();
    assert_eq!(MetaKey::Store(next.clone()).encode(), b"\x01next_object_id");
    assert_eq!(decode_store_key(b"\x01next_object_id").unwrap(), next);
}

#[test]
fn prefix_end_is_the_next_prefix() {
    assert_eq!(prefix_end(&[0x20, 0, 5]), Some(vec![0x20, 0, 6]));
    assert_eq!(prefix_end(&[0x20, 0xFF, 0xFF]), Some(vec![0x21]));
    assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
    assert_eq!(prefix_end(&[]), None);
    assert_eq!(prefix_end(&fmap_prefix(u64::MAX)), Some(vec![0x21]));
}

#[test]
fn typed_decoders_refuse_other_maps() {
    let dentry = dentry_key(1, &Name::new("x").unwrap());
    assert_eq!(decode_dentry_key(&dentry).unwrap(), (1, Name::new("x").unwrap()));
    assert_eq!(decode_fmap_key(&fmap_key(4, 8192)).unwrap(), (4, 8192));
    assert_eq!(decode_onode_key(&onode_key(9)).unwrap(), 9);
    assert_eq!(decode_orphan_key(&orphan_key(9)).unwrap(), 9);
    assert_eq!(decode_xattr_key(&xattr_key(9, &XattrName::new("a/b").unwrap())).unwrap().0, 9);
    let e = decode_fmap_key(&dentry).unwrap_err();
    assert!(matches!(e, ObjectError::BadRecord { record: "fmap key", .. }), "{e}");
    assert!(e.to_string().contains("dmap"), "{e}");
    assert!(decode_onode_key(&orphan_key(9)).is_err());
}

#[test]
fn malformed_keys_are_refused_with_a_reason() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "empty key"),
        (vec![0x00; 9], "unknown map prefix 0x00"),
        (vec![0x11, 0, 0, 0, 0, 0, 0, 0, 1], "unknown map prefix 0x11"),
        (vec![0xFF], "unknown map prefix 0xff"),
        (onode_key(1)[..8].to_vec(), "needs 8 bytes"),
        ([&onode_key(1)[..], &[0][..]].concat(), "trailing"),
        (orphan_key(1)[..1].to_vec(), "needs 8 bytes"),
        (fmap_key(1, 4096)[..16].to_vec(), "needs 8 bytes"),
        ([&fmap_key(1, 4096)[..], &[0][..]].concat(), "trailing"),
        (fmap_key(1, 4097).to_vec(), "not a multiple of 4096"),
        (fmap_key(1, u64::MAX - 4095).to_vec(), "largest object"),
        (dmap_prefix(1).to_vec(), "empty"),
        ([&dmap_prefix(1)[..], b"a/b"].concat(), "'/'"),
        ([&dmap_prefix(1)[..], b"a\0b"].concat(), "NUL"),
        ([&dmap_prefix(1)[..], b".."].concat(), "'.'"),
        ([&dmap_prefix(1)[..], &[b'x'; 256][..]].concat(), "longer than 255"),
        (dmap_prefix(1)[..5].to_vec(), "needs 8 bytes"),
        (xattr_prefix(1).to_vec(), "empty"),
        ([&xattr_prefix(1)[..], b"a\0"].concat(), "NUL"),
        (vec![0x01], "empty"),
        (b"\x01Next".to_vec(), "only a-z"),
    ];
    for (key, what) in cases {
        let e = MetaKey::decode(&key).unwrap_err();
        assert!(matches!(e, ObjectError::BadRecord { .. }), "{key:x?}: {e}");
        assert!(e.to_string().contains(what), "{key:x?}: {e} (expected {what:?})");
    }
    // The longest valid names are accepted.
    let long = [&dmap_prefix(1)[..], &[b'x'; 255][..]].concat();
    assert!(MetaKey::decode(&long).is_ok());
}

#[test]
fn name_validation_says_why() {
    let cases: [(&[u8], &str); 7] = [
        (b"", "empty"),
        (&[b'a'; 256], "longer than 255 bytes"),
        (b"a\0", "contains a NUL byte"),
        (b"a/b", "contains '/'"),
        (b"/", "contains '/'"),
        (b".", "'.' and '..' are not stored names"),
        (b"..", "'.' and '..' are not stored names"),
    ];
    for (name, why) in cases {
        let e = Name::new(name).unwrap_err();
        match &e {
            ObjectError::InvalidName { class: "file name", reason, .. } => assert_eq!(*reason, why, "{e}"),
            _ => panic!("{name:?}: {e}"),
        }
        assert!(e.to_string().contains("invalid file name"), "{e}");
    }
    for ok in [&b"..."[..], b".a", b"a.", b" ", &[0xFF, 0xFE], &[b'a'; 255], b"\x01"] {
        assert_eq!(Name::new(ok).unwrap().as_bytes(), ok);
    }
    // Errors escape unprintable bytes and cut long names.
    let e = Name::new([&[b'z'; 300][..], b"\0"].concat()).unwrap_err().to_string();
    assert!(e.contains("(301 bytes)") && e.len() < 200, "{e}");
    let e = Name::new(&b"\x07/"[..]).unwrap_err().to_string();
    assert!(e.contains("\\x07/"), "{e}");

    // Xattr names allow '/' and dots but not NUL or emptiness.
    assert!(XattrName::new("user.a/b").is_ok());
    assert!(XattrName::new(".").is_ok());
    assert!(XattrName::new("").is_err());
    assert!(XattrName::new(&b"a\0"[..]).is_err());
    assert!(XattrName::new(vec![b'u'; 256]).is_err());
    let e = StoreName::new("Next").unwrap_err();
    assert!(matches!(e, ObjectError::InvalidName { class: "store metadata name", .. }), "{e}");
    assert!(Name::try_from("ok").is_ok());
}

proptest! {
    /// A dentry key built in place is `dentry_key`'s bytes for every name
    /// `Name::new` takes, and refused, as `Name::new` refuses it, for every
    /// other.
    #[test]
    fn a_dentry_key_in_place_is_the_same_key_or_the_same_refusal(
        parent in id(),
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::collection::vec(b'a'..=b'z', 1..256),
            Just(b".".to_vec()),
            Just(b"..".to_vec()),
        ],
    ) {
        match (Name::new(bytes.clone()), DentryKey::new(parent, &bytes)) {
            (Ok(name), Ok(key)) => {
                prop_assert_eq!(key.as_bytes(), &dentry_key(parent, &name)[..]);
                let built = DentryKey::of(parent, &name);
                prop_assert_eq!(built.as_bytes(), &dentry_key(parent, &name)[..]);
            }
            (Err(ObjectError::InvalidName { reason: a, .. }), Err(ObjectError::InvalidName { reason: b, .. })) => {
                prop_assert_eq!(a, b)
            }
            (a, b) => prop_assert!(false, "Name::new gave {:?}, DentryKey::new {:?}", a.is_ok(), b.is_ok()),
        }
    }
}
