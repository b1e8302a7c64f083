//! The C example, examples/c/larder_example.c, compiled with the system's
//! C compiler against include/larder_client.h and liblarder_client.so,
//! run against a real `larder serve` on a fresh store: it must exit 0
//! having done every step, leave what it says it leaves (read back here
//! through the Rust client), and the stopped store must be clean. And
//! every function the header declares links and loads from the library.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{fsck_clean, library_dir, Served};

/// How a program is linked to the library.
#[derive(Clone, Copy, Debug)]
enum Linking {
    Shared,
    Static,
}

/// Compiles the C file `source` into `out` against the header and the
/// library; fails clearly without a C compiler.
fn compile(source: &Path, out: &Path, linking: Linking) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(&compiler)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(source)
        .args(match linking {
            Linking::Shared => vec!["-L".into(), library_dir().into_os_string(), "-llarder_client".into()],
            Linking::Static => vec![library_dir().join("liblarder_client.a").into_os_string()],
        })
        .arg("-o")
        .arg(out)
        .output()
        .unwrap_or_else(|e| {
            panic!("no C compiler: running `{compiler}` failed ({e}); install gcc (scripts/setup.sh does) or set CC")
        });
    assert!(
        output.status.success(),
        "compiling {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

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

#[test]
fn every_function_of_the_header_links_and_loads() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(crate_dir.join("include/larder_client.h")).unwrap();
    let functions = declared_functions(&header);
    let exported: usize = std::fs::read_dir(crate_dir.join("src"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap().matches("#[no_mangle]").count())
        .sum();
    assert_eq!(functions.len(), exported, "the header declares {functions:?}, the source exports {exported}");

    let dir = tempfile::tempdir().unwrap();
    let pointers: Vec<String> = functions.iter().map(|f| format!("    (void (*)(void)){f},")).collect();
    let program = format!(
        "#include <stdio.h>\n#include \"larder_client.h\"\n\nint main(void)\n{{\n  void (*functions[])(void) = {{\n{}\n  }};\n  \
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
