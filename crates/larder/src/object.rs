//! The object store below every interface ([`larder_object`]): objects by
//! id, transactions, the options fixed at creation, health. Most programs
//! need only [`Durability`] and [`CreationOptions`] from here (both also at
//! the crate's root) and reach the store through [`crate::Store`].

pub use larder_object::{
    CreationOptions, Durability, LockRequest, ObjectError, Store, StoreHealth, StoreOptions, ThreadHealth, ThreadState,
    Transaction, ROOT_ID,
};
