//! The C example, examples/c/larder_example.c, compiled with the system's
//! C compiler against include/larder_client.h and liblarder.so,
//! run against a real `larder serve` on a fresh store: it must exit 0
//! having done every step, leave what it says it leaves (read back here
//! through the Rust client), and the stopped store must be clean. And
//! every function either header (larder_client.h, larder_heap.h) declares
//! links and loads from the library, shared and static.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{compile, fsck_clean, library_dir, Linking, Served};

#[test]
fn the_c_example_runs_against_a_server() {
    let mut served = Served::start(false);
    let program = served.dir.path().join("larder_example");
    compile(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/c/larder_example.c"),
        &program,
        Linking::Shared,
    );

    let output = Command::new(&program).arg(&served.store).env("LD_LIBRARY_PATH", library_dir()).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the example exited with {}:\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "connected",
        "wrote 13 bytes (copied)",
        "wrote 262144 bytes (zero-copy)",
        "fsynced",
        "read back: hello from C",
        "read back 262144 bytes (copied), pattern intact",
        "read back 262144 bytes (zero-copy), pattern intact",
        "read at the end: 0 bytes",
        "fstat: regular file, mode 644, 262157 bytes",
        "refused as expected (EBADF): larder_fsync: ",
        "stat /docs: directory, mode 755",
        "entry: hello.txt (file)",
        "entry: drafts (directory)",
        "renamed to /docs/drafts/greeting.txt",
        "refused as expected (EEXIST): larder_mkdir: ",
        "refused as expected (ENOTEMPTY): larder_rmdir: ",
        "refused as expected (ENOENT): larder_open: /docs/missing",
        "unlinked and removed",
        "kv get notes/2024/first: kept by the server",
        "kv get notes/2024/second (zero-copy): kept by the server",
        "kv deleted",
        "done",
    ] {
        assert!(stdout.contains(line), "the example's output lacks {line:?}:\n{stdout}");
    }

    // What the example left, seen by another client: the Rust one.
    let client = client::Client::connect(&served.store).unwrap();
    assert_eq!(client.read("/from-c.txt").unwrap(), b"written by larder_example.c\n");
    assert_eq!(client.metadata("/from-c.txt").unwrap().mode() & 0o7777, 0o640);
    assert_eq!(client.get("notes", "from-c").unwrap().as_deref(), Some(&b"kept by the server"[..]));
    assert!(client.get("notes", "2024/first").unwrap().is_none(), "the deleted key is back");
    assert!(client.get("notes", "2024/second").unwrap().is_none(), "the deleted key is back");
    assert!(client.metadata("/docs").unwrap_err().is_not_found(), "/docs was removed");
    drop(client);

    served.stop();
    fsck_clean(&served.store);
}

/// The functions `header` declares: each name `larder_...` followed by
/// `(` on a line that is not a comment or a preprocessor line.
fn declared_functions(header: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in header.lines() {
        if line.starts_with([' ', '*', '/', '#']) {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("larder_") {
            let tail = &rest[at..];
            let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
            if tail[end..].starts_with('(') {
                names.push(tail[..end].to_string());
                break;
            }
            rest = &tail[end..];
        }
    }
    names
}

/// The `#[no_mangle]` functions of the files directly in `dir`.
fn exported_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| std::fs::read_to_string(path).unwrap().matches("#[no_mangle]").count())
        .sum()
}

/// Every function `header` declares is exported by the sources in
/// `sources` (as many), and a C program taking each one's address links
/// with the shared and with the static library and runs.
fn every_function_links_and_loads(header: &str, sources: &str) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(crate_dir.join("include").join(header)).unwrap();
    let functions = declared_functions(&text);
    let exported = exported_in(&crate_dir.join(sources));
    assert_eq!(functions.len(), exported, "{header} declares {functions:?}, {sources} exports {exported}");

    let dir = tempfile::tempdir().unwrap();
    let pointers: Vec<String> = functions.iter().map(|f| format!("    (void (*)(void)){f},")).collect();
    let program = format!(
        "#include <stdio.h>\n#include \"{header}\"\n\nint main(void)\n{{\n  void (*functions[])(void) = {{\n{}\n  }};\n  \
         size_t n = sizeof functions / sizeof functions[0];\n  for (size_t i = 0; i < n; i++) {{\n    \
         if (functions[i] == NULL) {{\n      return 1;\n    }}\n  }}\n  printf(\"%zu functions\\n\", n);\n  \
         return 0;\n}}\n",
        pointers.join("\n")
    );
    let source = dir.path().join("symbols.c");
    std::fs::write(&source, program).unwrap();
    for linking in [Linking::Shared, Linking::Static] {
        let out = dir.path().join(format!("symbols-{linking:?}"));
        compile(&source, &out, linking);
        let run = Command::new(&out).env("LD_LIBRARY_PATH", library_dir()).output().unwrap();
        assert!(run.status.success(), "{linking:?}: {}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(String::from_utf8_lossy(&run.stdout), format!("{} functions\n", functions.len()), "{linking:?}");
    }
}

#[test]
fn every_function_of_the_client_header_links_and_loads() {
    every_function_links_and_loads("larder_client.h", "src");
}

#[test]
fn every_function_of_the_heap_header_links_and_loads() {
    every_function_links_and_loads("larder_heap.h", "src/heap");
}
