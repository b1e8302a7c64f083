//! Progress bars on stderr, hidden when stderr is not a terminal so logs
//! and pipes get only the commands' real output.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

fn styled(len: u64, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    let style = ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    pb
}

/// A bar counting bytes, with a message (files done, say) beside it.
pub(crate) fn bytes(total: u64) -> ProgressBar {
    styled(total, "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})")
}

/// A bar counting items of some kind.
pub(crate) fn items(total: u64, what: &str) -> ProgressBar {
    let pb = styled(total, "{msg:>10} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})");
    pb.set_message(what.to_string());
    pb
}

/// A counter for work whose size is not known ahead.
pub(crate) fn spinner(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    let style = ProgressStyle::with_template("{spinner} {msg} {pos} ({per_sec})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    pb.set_style(style);
    pb.set_message(what.to_string());
    pb
}
