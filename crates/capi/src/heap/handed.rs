//! The `larder_mfobj` and `larder_mftype` structs a heap hands to C, and
//! how a pointer C passes back is recognised: by its address, looked up
//! here, so a pointer that is not one of this heap's gives EINVAL and is
//! never read. Each struct lives until the heap is closed: an object's
//! struct stays (closed or freed) so that C's later use of it fails
//! cleanly instead of reading freed memory.

use std::collections::HashMap;

use super::{LarderMfobj, LarderMftype, LarderNptr};
use crate::status::{Failure, Outcome};

/// Where an object handed to C stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ObjectState {
    /// Attached: from mfalloc, mfgetobj, mfgetobjbyname, mfcopy, mfclone.
    Open,
    /// Detached by mfcloseobj; mfgetobj or mfgetobjbyname attaches it again.
    Closed,
    /// Freed by mffreeobj: gone for good (ids are never reused).
    Freed,
}

/// One object's struct and state.
struct Entry {
    /// The address of its `LarderMfobj`, from `Box::into_raw`.
    address: usize,
    state: ObjectState,
}

/// The structs one heap handed out.
#[derive(Default)]
pub(crate) struct Handed {
    /// Objects by id.
    objects: HashMap<u64, Entry>,
    /// Object ids by the address of their struct.
    object_addresses: HashMap<usize, u64>,
    /// Type structs by type id (addresses from `Box::into_raw`).
    types: HashMap<u64, usize>,
    /// Type ids by the address of their struct.
    type_addresses: HashMap<usize, u64>,
}

impl Handed {
    /// The struct of object `id`, now open: the one handed out before if
    /// any (so C sees one `larder_mfobj *` per object), else a new one.
    pub(crate) fn hand_out(&mut self, id: u64) -> *mut LarderMfobj {
        if let Some(entry) = self.objects.get_mut(&id) {
            entry.state = ObjectState::Open;
            return entry.address as *mut LarderMfobj;
        }
        let nptr = LarderNptr { object: id, offset: 0, generation: 0 };
        let address = Box::into_raw(Box::new(LarderMfobj { nptr })) as usize;
        self.objects.insert(id, Entry { address, state: ObjectState::Open });
        self.object_addresses.insert(address, id);
        address as *mut LarderMfobj
    }

    /// The id and state of the object whose struct is `object`.
    pub(crate) fn object(&self, object: *const LarderMfobj) -> Outcome<(u64, ObjectState)> {
        if object.is_null() {
            return Err(Failure::invalid("the mfobj is NULL"));
        }
        let id =
            self.object_addresses.get(&(object as usize)).copied().ok_or_else(|| {
                Failure::invalid("not an mfobj of this heap (from another heap, or its heap was closed)")
            })?;
        let state = self.objects.get(&id).map_or(ObjectState::Freed, |e| e.state);
        Ok((id, state))
    }

    /// The id of `object`, which must not be freed.
    pub(crate) fn live(&self, object: *const LarderMfobj) -> Outcome<u64> {
        match self.object(object)? {
            (id, ObjectState::Freed) => Err(Failure::new(libc::ENOENT, format!("object {id} was freed"))),
            (id, _) => Ok(id),
        }
    }

    /// The id of `object`, which must be attached (PSHFS: calls on an
    /// mfobj are for objects attached to the process).
    pub(crate) fn open(&self, object: *const LarderMfobj) -> Outcome<u64> {
        match self.object(object)? {
            (id, ObjectState::Open) => Ok(id),
            (id, ObjectState::Closed) => Err(Failure::new(
                libc::EBADF,
                format!("object {id} was closed (larder_mfcloseobj); larder_mfgetobj attaches it again"),
            )),
            (id, ObjectState::Freed) => Err(Failure::new(libc::ENOENT, format!("object {id} was freed"))),
        }
    }

    /// Records that object `id` is detached or freed.
    pub(crate) fn set_state(&mut self, id: u64, state: ObjectState) {
        if let Some(entry) = self.objects.get_mut(&id) {
            entry.state = state;
        }
    }

    /// The struct of type `id`: the one handed out before, or a new one.
    pub(crate) fn hand_out_type(&mut self, id: u64, pointers: usize) -> *mut LarderMftype {
        if let Some(&address) = self.types.get(&id) {
            return address as *mut LarderMftype;
        }
        let address = Box::into_raw(Box::new(LarderMftype { id, pointers })) as usize;
        self.types.insert(id, address);
        self.type_addresses.insert(address, id);
        address as *mut LarderMftype
    }

    /// The id of the type whose struct is `mftype`.
    pub(crate) fn type_id(&self, mftype: *const LarderMftype) -> Outcome<u64> {
        if mftype.is_null() {
            return Err(Failure::invalid("the mftype is NULL"));
        }
        self.type_addresses
            .get(&(mftype as usize))
            .copied()
            .ok_or_else(|| Failure::invalid("not an mftype of this heap (from another heap, or its heap was closed)"))
    }

    /// Frees every struct; C's pointers to them are invalid from now on
    /// (and not recognised: they are no longer in the table).
    pub(crate) fn free_all(&mut self) {
        for (_, entry) in self.objects.drain() {
            #[allow(unsafe_code)]
            // SAFETY: the address came from `Box::into_raw` of a
            // `LarderMfobj` in `hand_out`, and `drain` takes each entry out
            // of the table once, so each box is rebuilt and freed once.
            drop(unsafe { Box::from_raw(entry.address as *mut LarderMfobj) });
        }
        self.object_addresses.clear();
        for (_, address) in self.types.drain() {
            #[allow(unsafe_code)]
            // SAFETY: as above, from `Box::into_raw` of a `LarderMftype` in
            // `hand_out_type`, taken out of the table once.
            drop(unsafe { Box::from_raw(address as *mut LarderMftype) });
        }
        self.type_addresses.clear();
    }
}

impl Drop for Handed {
    fn drop(&mut self) {
        self.free_all();
    }
}
