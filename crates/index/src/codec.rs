//! The engine's shared encoding helpers (`larder_io::codec`), under the
//! name the index's modules use.

pub(crate) use larder_io::codec::*;
