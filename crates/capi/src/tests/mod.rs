//! Tests of the exported functions, called from Rust. They are unit tests
//! because the crate builds no rlib for integration tests to link
//! (Cargo.toml says why); tests/ holds the C programs' tests.

#![allow(clippy::unwrap_used)]

#[path = "../../tests/common/mod.rs"]
mod common;
mod errno;
mod heap;
