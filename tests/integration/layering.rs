//! `format/` and `log/` do no I/O: they take bytes, batches and listings and
//! return values. Their sources must not name the storage layer, the async
//! runtime or the file system.

use std::fs;
use std::path::{Path, PathBuf};

/// What pure modules must not name.
const FORBIDDEN: &[&str] = &[
    "crate::io",
    "crate::table",
    "crate::scan",
    "crate::write",
    "object_store",
    "tokio",
    "std::fs",
    "std::net",
    "File::open",
    "spawn_blocking",
    "block_on",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The forbidden names a source text uses outside `#[cfg(test)]` modules and
/// comments, as (line number, name).
fn violations(text: &str) -> Vec<(usize, &'static str)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        for name in FORBIDDEN {
            if line.contains(name) {
                out.push((i + 1, *name));
            }
        }
    }
    out
}

#[test]
fn the_check_sees_io_in_code_but_not_in_comments_or_tests() {
    let src = "use bytes::Bytes;\n// tokio is mentioned here\nuse crate::io::TableStore;\n\
               #[cfg(test)]\nmod tests { use std::fs; }\n";
    assert_eq!(violations(src), [(3, "crate::io")]);
}

#[test]
fn format_and_log_do_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in ["format", "log", "codec"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(
        files.iter().any(|f| f.ends_with("log/checkpoint/read.rs")),
        "checkpoint decoding lives in log/"
    );
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = fs::read_to_string(f).unwrap();
            violations(&text)
                .into_iter()
                .map(|(line, name)| format!("{}:{line}: {name}", f.display()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        found.is_empty(),
        "I/O in a pure module:\n{}",
        found.join("\n")
    );
}
