//! The FUSE mount ([`larder_fuse`]): the file system API served to other
//! processes through the kernel. Needs `/dev/fuse` and `fusermount3`
//! (Debian's `fuse3`) at run time.
//!
//! [`spawn`] mounts [`Store::fs`](crate::Store::fs) on background threads
//! and returns a [`Mounted`] that unmounts when dropped; [`run`] serves on
//! the calling thread until unmounted. `fsync` and `fsyncdir` through the
//! mount are durable when they return; everything else is as for the
//! file system API.

pub use larder_fuse::{run, spawn, MountError, MountOptions, Mounted, Unmounter, MAX_WRITE_BYTES};
