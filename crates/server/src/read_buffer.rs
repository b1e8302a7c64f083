//! One buffer per thread for the bytes of a read: a worker gives the
//! buffer of each `Data` answer back once the answer is encoded, and the
//! next read fills it again, so a read allocates nothing, and zeroes
//! only what the last answer's bytes did not reach (nothing, when reads
//! are of one size): the bytes left from the last read are overwritten
//! by this one's, and what it did not fill is cut off.

use std::cell::RefCell;

/// Buffers larger than this are not kept: a thread holds at most this
/// much between reads.
const KEPT_BYTES: usize = 1 << 20;

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `length` bytes to read into: the thread's kept buffer if
/// it has one, its contents those of an earlier read.
pub(crate) fn take(length: usize) -> Vec<u8> {
    let mut buffer = BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()));
    if buffer.len() < length {
        buffer.resize(length, 0);
    } else {
        buffer.truncate(length);
    }
    buffer
}

/// Keeps `buffer` for the thread's next read (unless it is too large).
pub(crate) fn give_back(buffer: Vec<u8>) {
    if buffer.capacity() <= KEPT_BYTES {
        BUFFER.with(|b| *b.borrow_mut() = buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_is_reused_at_the_asked_length() {
        give_back(vec![9u8; 4096]);
        let buffer = take(100);
        assert_eq!(buffer.len(), 100);
        assert!(buffer.capacity() >= 4096, "the kept allocation is reused");
        give_back(buffer);
        // Longer than what was kept: extended with zeros.
        let longer = take(200);
        assert_eq!(longer.len(), 200);
        assert!(longer[100..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_large_buffer_is_not_kept() {
        let _ = take(0);
        give_back(vec![0u8; KEPT_BYTES + 1]);
        assert_eq!(take(0).capacity(), 0);
    }
}
