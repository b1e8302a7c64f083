//! What can go wrong building, opening or searching a locate database.

/// A locate table that cannot be built or read.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The table's bytes break its format (damaged, or not a table).
    #[error("the locate table is damaged: {0}")]
    Damaged(String),
    /// The path list does not fit the format's limits.
    #[error("the path list is too large for a locate table: {0}")]
    TooLarge(&'static str),
}

/// A locate database that cannot be opened, built or searched.
#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    /// The table itself.
    #[error(transparent)]
    Table(#[from] TableError),
    /// The heap holding it.
    #[error("heap: {0}")]
    Heap(#[from] larder_heap::HeapError),
    /// The store holding the heap.
    #[error("store: {0}")]
    Store(#[from] larder_object::ObjectError),
    /// The table object is larger than this machine's address space.
    #[error("the table object ({0} bytes) does not fit this machine's address space")]
    TooLargeToMap(u64),
}
