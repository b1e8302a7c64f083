//! The `--raw` file of the suites: every child's JSON result, one line each.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

/// Where the children's results are copied, if `--raw` was given.
pub struct RawResults(Option<File>);

impl RawResults {
    /// Creates (or truncates) the file at `path`; with no path, results
    /// are not copied anywhere.
    pub fn create(path: Option<&Path>) -> Result<RawResults> {
        let file = match path {
            Some(p) => Some(File::create(p).with_context(|| format!("creating {}", p.display()))?),
            None => None,
        };
        Ok(RawResults(file))
    }

    /// Appends `result` as one JSON line. A failed write only loses the
    /// copy: the suite's report does not depend on it.
    pub fn append(&mut self, result: &impl Serialize) {
        if let Some(f) = &mut self.0 {
            if let Ok(line) = serde_json::to_string(result) {
                let _ = writeln!(f, "{line}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RawResults;

    #[test]
    fn each_result_is_one_json_line_and_no_path_writes_nothing() {
        let path = std::env::temp_dir().join(format!("larder-bench-raw-test-{}", std::process::id()));
        let mut raw = RawResults::create(Some(&path)).expect("create the raw file");
        raw.append(&serde_json::json!({"ops": 1}));
        raw.append(&"second");
        drop(raw);
        let text = std::fs::read_to_string(&path).expect("read the raw file");
        let _ = std::fs::remove_file(&path);
        assert_eq!(text, "{\"ops\":1}\n\"second\"\n");
        let mut none = RawResults::create(None).expect("no file to create");
        none.append(&1);
        assert!(none.0.is_none());
    }
}
