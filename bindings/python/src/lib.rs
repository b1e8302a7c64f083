//! The `larder` Python module: a KV store (`Store`, `Bucket`, `Batch`)
//! and the standalone index (`Index`, `IndexBatch`, `Snapshot`), with
//! exceptions mapped from the typed errors. Every call that reads or
//! writes releases the GIL. The Python API is described in `larder.pyi`.

mod batch;
mod bucket;
mod convert;
mod errors;
mod index;
mod index_iter;
mod pending;
mod scan;
mod store;

use pyo3::prelude::*;

#[pymodule(name = "larder")]
fn larder_python(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_class::<store::Store>()?;
    module.add_class::<bucket::Bucket>()?;
    module.add_class::<bucket::Head>()?;
    module.add_class::<batch::Batch>()?;
    module.add_class::<scan::ScanIterator>()?;
    module.add_class::<index::Index>()?;
    module.add_class::<index::IndexBatch>()?;
    module.add_class::<index::Snapshot>()?;
    module.add_class::<index_iter::IndexIterator>()?;
    errors::register(module)?;
    Ok(())
}
