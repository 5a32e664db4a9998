//! Shared helpers: where the golden tables are.

use std::path::PathBuf;

/// `../shared/golden` (or `$DELTADV_GOLDEN`), if present. When it is absent the
/// calling test prints why and returns, unless `DELTADV_REQUIRE_GOLDEN=1` (set in
/// CI), where a missing corpus is a failure.
pub fn golden_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("DELTADV_GOLDEN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/golden"));
    if dir.join("dv_contents.json").is_file() {
        return Some(dir);
    }
    if std::env::var("DELTADV_REQUIRE_GOLDEN").as_deref() == Ok("1") {
        panic!("golden tables required but not found at {}", dir.display());
    }
    eprintln!(
        "SKIPPED: golden tables not found at {} (set DELTADV_GOLDEN to their path)",
        dir.display()
    );
    None
}
