//! Why bytes are not a message.

/// Why bytes did not decode as a message. `field` names the field as
/// `Variant.field` (`Rename.new_name`, `Attributes.atime.nanoseconds`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The whole message is over [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES).
    #[error("message of {length} bytes is over the limit of {limit}")]
    MessageTooLong {
        /// The message's length.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// A field needs more bytes than are left.
    #[error("{field}: needs {needed} bytes, {left} left")]
    Truncated {
        /// The field.
        field: &'static str,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the message.
        left: usize,
    },
    /// A byte string or text is over its limit.
    #[error("{field}: {length} bytes, over the limit of {limit}")]
    FieldTooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        length: u64,
        /// The limit.
        limit: usize,
    },
    /// A list has more elements than its limit.
    #[error("{field}: {count} elements, over the limit of {limit}")]
    TooManyElements {
        /// The field.
        field: &'static str,
        /// The count.
        count: u64,
        /// The limit.
        limit: usize,
    },
    /// A request's opcode is not one this build knows.
    #[error("unknown request opcode {0}")]
    UnknownOpcode(u16),
    /// A response's kind is not one this build knows.
    #[error("unknown response kind {0}")]
    UnknownResponseKind(u16),
    /// An option, enum or boolean tag is not one of its values.
    #[error("{field}: unknown tag {tag}")]
    UnknownTag {
        /// The field.
        field: &'static str,
        /// The tag.
        tag: u8,
    },
    /// A reserved field or flag bit is not 0.
    #[error("{field}: reserved bits {bits:#x} are set")]
    ReservedBits {
        /// The field.
        field: &'static str,
        /// The bits.
        bits: u16,
    },
    /// A value is outside its range.
    #[error("{field}: {reason}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A text field is not UTF-8.
    #[error("{field}: not UTF-8")]
    NotUtf8 {
        /// The field.
        field: &'static str,
        /// Where the bytes stop being UTF-8.
        #[source]
        source: std::str::Utf8Error,
    },
    /// Bytes follow the message's last field.
    #[error("{count} bytes after the message's last field")]
    TrailingBytes {
        /// How many.
        count: usize,
    },
}
