//! Object-store access for a table: local disk, `file://`, `memory://`, S3,
//! Azure and GCS through the `object_store` crate, with request counters.

use std::collections::HashMap;
use std::ops::Range;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutMode, PutOptions,
    PutPayload,
};
use url::Url;

use crate::error::{Error, Result};
use crate::log::path::LOG_DIR;

/// Keys deltalake accepts that configure its own behaviour rather than the
/// store; accepted and ignored here so the same `storage_options` work.
const PASSTHROUGH_KEYS: &[&str] = &[
    "aws_s3_allow_unsafe_rename",
    "aws_s3_locking_provider",
    "aws_conditional_put",
    "conditional_put",
    "aws_copy_if_not_exists",
    "allow_unsafe_rename",
];

/// Requests made through one [`TableStore`] (or its clones, and stores made
/// to count into it: [`TableStore::counting_into`]).
#[derive(Debug, Default)]
pub struct RequestCounts {
    pub gets: AtomicU64,
    /// Of `gets`, those of deletion vector files ([`TableStore::get_dv_ranges`]).
    pub dv_gets: AtomicU64,
    pub puts: AtomicU64,
    pub lists: AtomicU64,
    pub deletes: AtomicU64,
    pub heads: AtomicU64,
    /// Bytes the GETs returned.
    pub bytes_read: AtomicU64,
}

/// A snapshot of [`RequestCounts`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub gets: u64,
    pub dv_gets: u64,
    pub puts: u64,
    pub lists: u64,
    pub deletes: u64,
    pub heads: u64,
    pub bytes_read: u64,
}

impl RequestCounts {
    pub fn snapshot(&self) -> Counts {
        Counts {
            gets: self.gets.load(Ordering::Relaxed),
            dv_gets: self.dv_gets.load(Ordering::Relaxed),
            puts: self.puts.load(Ordering::Relaxed),
            lists: self.lists.load(Ordering::Relaxed),
            deletes: self.deletes.load(Ordering::Relaxed),
            heads: self.heads.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
        }
    }
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    /// Count the bytes a GET returned (and hand them on).
    fn read(&self, bytes: Bytes) -> Bytes {
        let n = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
        bytes
    }
}

/// Byte ranges of one object at most this far apart are fetched in one GET
/// (object_store's own default: a round trip costs more than ~1 MiB).
pub const COALESCE_GAP: u64 = object_store::OBJECT_STORE_COALESCE_DEFAULT;

/// Local reads of at least this many bytes map the file instead of copying it
/// into a zeroed buffer (object_store's local read). The pages are then faulted
/// in by whoever decodes them (on several threads at once) and straight from
/// the page cache, 16 pages a fault; smaller reads cost less as one `pread`.
pub const MAP_AT_LEAST: u64 = 1024 * 1024;

/// `range` of a local file, mapped read-only and clipped to the file's size.
///
/// The map lives as long as the returned [`Bytes`] (or any slice of it).
fn map_local_range(local: &std::path::Path, range: Range<u64>) -> std::io::Result<Bytes> {
    let file = std::fs::File::open(local)?;
    let size = file.metadata()?.len();
    let end = range.end.min(size);
    if range.start >= end {
        return Ok(Bytes::new());
    }
    let len = usize::try_from(end - range.start)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "range too large"))?;
    // SAFETY: the map is read-only and covers only bytes inside the file as it
    // is now (clipped to its size above). Touching a mapped page faults with
    // SIGBUS only if the file is truncated while mapped; a Delta table's data,
    // DV and log files are written once and never changed in place (replacing
    // or deleting one leaves this inode whole), as polars' local reads, maps
    // too, rely on.
    #[allow(unsafe_code)]
    let map = unsafe {
        memmap2::MmapOptions::new()
            .offset(range.start)
            .len(len)
            .map(&file)?
    };
    Ok(Bytes::from_owner(map))
}

/// The store holding one table, and the table root within it.
#[derive(Debug, Clone)]
pub struct TableStore {
    store: Arc<dyn ObjectStore>,
    /// Table root inside the store.
    root: Path,
    /// The table URI as given (normalised to a URL).
    url: Url,
    counts: Arc<RequestCounts>,
}

fn store_error(path: &str, e: object_store::Error) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound {
            path: path.to_string(),
        },
        object_store::Error::PermissionDenied { source, .. }
        | object_store::Error::Unauthenticated { source, .. } => Error::PermissionDenied {
            path: path.to_string(),
            detail: source.to_string(),
        },
        other => Error::ObjectStore {
            path: path.to_string(),
            source: Box::new(other),
        },
    }
}

/// Named in-memory stores (`memory://name/...`), shared within a process so a
/// table written through one handle can be read through another.
fn memory_store(name: &str) -> Arc<dyn ObjectStore> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    let stores = STORES.get_or_init(Default::default);
    let mut guard = match stores.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    let store = guard
        .entry(name.to_string())
        .or_insert_with(|| Arc::new(InMemory::new()));
    store.clone() as Arc<dyn ObjectStore>
}

/// A store path from raw (decoded) segments, kept literally: a `%` in a file
/// name stays a `%` in the key, as Delta writers store it.
fn raw_path(segments: impl Iterator<Item = String>) -> Result<Path> {
    let joined = segments.collect::<Vec<_>>().join("/");
    Path::parse(&joined).map_err(|e| Error::InvalidArgument(format!("bad path {joined:?}: {e}")))
}

/// Lexically drop `.` and `..` from a local path (object store paths refuse them).
fn normalize_local(path: &std::path::Path) -> std::path::PathBuf {
    let mut normal = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// Turn a table URI or local path into a URL.
pub fn table_url(uri: &str) -> Result<Url> {
    let has_scheme = uri.split_once("://").is_some_and(|(s, _)| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '+')
    });
    if has_scheme || uri.starts_with("file:") {
        return Url::parse(uri)
            .map_err(|e| Error::InvalidArgument(format!("bad table URI {uri:?}: {e}")));
    }
    let path = std::path::Path::new(uri);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| Error::Io {
                path: uri.to_string(),
                source,
            })?
            .join(path)
    };
    Url::from_directory_path(normalize_local(&absolute))
        .map_err(|()| Error::InvalidArgument(format!("bad table path {uri:?}")))
}

/// Which store a URL names (its kind, and the account/bucket/container part
/// of the URL), and the object path inside that store. `s3://b/k` and
/// `s3a://b/k` name the same store; `s3://other/k` does not.
fn store_identity(url: &Url) -> std::result::Result<(String, Path), object_store::Error> {
    if url.scheme() == "memory" {
        // memory://NAME/path (see `TableStore::open`).
        let path = Path::from_url_path(url.path())?;
        return Ok((format!("Memory/{}", url.host_str().unwrap_or("")), path));
    }
    let (kind, path) = ObjectStoreScheme::parse(url)?;
    // The leading URL path segments the scheme parser took as the container
    // (e.g. `https://account.blob.core.windows.net/container/...`).
    let segments: Vec<&str> = url
        .path_segments()
        .map(|s| s.filter(|p| !p.is_empty()).collect())
        .unwrap_or_default();
    let container = segments
        .get(..segments.len().saturating_sub(path.parts().count()))
        .map(|c| c.join("/"))
        .unwrap_or_default();
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    let identity = format!(
        "{kind:?}/{}@{host}:{}/{container}",
        url.username(),
        url.port().map_or_else(String::new, |p| p.to_string())
    );
    Ok((identity, path))
}

/// A URL for messages: no password, query or fragment.
fn display_url(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// The store part of a table URL for messages (`s3://bucket`).
fn display_store(url: &Url) -> String {
    let user = match url.username() {
        "" => String::new(),
        u => format!("{u}@"),
    };
    format!(
        "{}://{user}{}",
        url.scheme(),
        url.host_str().unwrap_or_default()
    )
}

/// A file type's name for messages.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

fn configure<B, K>(
    mut builder: B,
    options: &HashMap<String, String>,
    apply: impl Fn(B, K, String) -> B,
) -> Result<B>
where
    K: FromStr,
{
    for (key, value) in options {
        match K::from_str(&key.to_ascii_lowercase()) {
            Ok(k) => builder = apply(builder, k, value.clone()),
            Err(_) if PASSTHROUGH_KEYS.contains(&key.to_ascii_lowercase().as_str()) => {}
            Err(_) => {
                return Err(Error::InvalidArgument(format!(
                    "unknown storage option {key:?} for this store (keys as in deltalake: AWS_*, AZURE_*, GOOGLE_*)"
                )))
            }
        }
    }
    Ok(builder)
}

impl TableStore {
    /// Open the store for `uri` with deltalake-style `storage_options`
    /// (environment variables fill in what the options leave out).
    pub fn open(uri: &str, options: &HashMap<String, String>) -> Result<TableStore> {
        let url = table_url(uri)?;
        if matches!(url.scheme(), "memory" | "file") {
            // Local disk and memory take no options: a key is a mistake (a typo,
            // or options meant for another table), not something to ignore.
            if let Some(key) = options
                .keys()
                .find(|k| !PASSTHROUGH_KEYS.contains(&k.to_ascii_lowercase().as_str()))
            {
                return Err(Error::InvalidArgument(format!(
                    "unknown storage option {key:?} for {uri:?}: {} tables take no storage options",
                    if url.scheme() == "file" {
                        "local"
                    } else {
                        "memory://"
                    }
                )));
            }
        }
        if url.scheme() == "memory" {
            // memory://NAME/path: one shared in-memory store per NAME in this process.
            let root = Path::from_url_path(url.path())
                .map_err(|e| Error::InvalidArgument(format!("bad table URI {uri:?}: {e}")))?;
            return Ok(TableStore {
                store: memory_store(url.host_str().unwrap_or("")),
                root,
                url,
                counts: Arc::new(RequestCounts::default()),
            });
        }
        let (scheme, path) = ObjectStoreScheme::parse(&url)
            .map_err(|e| Error::InvalidArgument(format!("unsupported table URI {uri:?}: {e}")))?;
        let bad =
            |e: object_store::Error| Error::InvalidArgument(format!("cannot open {uri:?}: {e}"));
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::Local => Arc::new(LocalFileSystem::new()),
            ObjectStoreScheme::Memory => memory_store(url.host_str().unwrap_or("")),
            ObjectStoreScheme::AmazonS3 => {
                let b = AmazonS3Builder::from_env().with_url(url.as_str());
                let b = configure(b, options, |b, k: AmazonS3ConfigKey, v| b.with_config(k, v))?;
                Arc::new(b.build().map_err(bad)?)
            }
            ObjectStoreScheme::MicrosoftAzure => {
                let b = MicrosoftAzureBuilder::from_env().with_url(url.as_str());
                let b = configure(b, options, |b, k: AzureConfigKey, v| b.with_config(k, v))?;
                Arc::new(b.build().map_err(bad)?)
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                let b = GoogleCloudStorageBuilder::from_env().with_url(url.as_str());
                let b = configure(b, options, |b, k: GoogleConfigKey, v| b.with_config(k, v))?;
                Arc::new(b.build().map_err(bad)?)
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unsupported table URI {uri:?} ({other:?})"
                )))
            }
        };
        // `path` is already the URL's (percent-encoded) path: decode it into parts.
        // `ObjectStoreScheme::parse` already URL-decoded the path.
        let root = path;
        Ok(TableStore {
            store,
            root,
            url,
            counts: Arc::new(RequestCounts::default()),
        })
    }

    /// The table URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Request counters (shared by clones).
    pub fn counts(&self) -> Counts {
        self.counts.snapshot()
    }

    /// The counters this store's requests are counted in (shared by clones).
    pub fn counter(&self) -> Arc<RequestCounts> {
        self.counts.clone()
    }

    /// This store, its requests counted in `counts` from now on (e.g. a scan
    /// task read in the process of the table it came from counts into the
    /// table's counters).
    pub fn counting_into(mut self, counts: Arc<RequestCounts>) -> TableStore {
        self.counts = counts;
        self
    }

    /// A store path for a location relative to the table root (already
    /// URL-decoded, `/`-separated), or an absolute URI on the same store.
    pub fn path(&self, relative: &str) -> Path {
        let joined = format!("{}/{relative}", self.root.as_ref());
        let parts = joined
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        // Segments that object_store refuses (`.`/`..`) fall back to its own encoding.
        raw_path(parts).unwrap_or_else(|_| Path::from(joined.as_str()))
    }

    /// Resolve a data or DV file location: relative paths (decoded) join the
    /// table root; absolute URIs must name this store (same scheme family,
    /// bucket/container and account), anything else is refused rather than
    /// read from the table's own store under the same key.
    pub fn resolve(&self, location: &str) -> Result<Path> {
        if let Some((scheme, _)) = location.split_once(':') {
            if scheme.len() > 1 && scheme.chars().all(|c| c.is_ascii_alphanumeric()) {
                let url = Url::parse(location).map_err(|e| {
                    Error::InvalidArgument(format!("bad file URI {location:?}: {e}"))
                })?;
                let (file_store, path) = store_identity(&url).map_err(|e| {
                    Error::InvalidArgument(format!("unsupported file URI {location:?}: {e}"))
                })?;
                let (table_store, _) = store_identity(&self.url)
                    .map_err(|e| Error::InvalidArgument(format!("unsupported table URI: {e}")))?;
                if file_store != table_store {
                    return Err(Error::InvalidArgument(format!(
                        "file URI {} is not in the table's store {}: deltadv reads files \
                         only from the store holding the table",
                        display_url(&url),
                        display_store(&self.url)
                    )));
                }
                return Ok(path);
            }
        }
        if location.starts_with('/') {
            // An absolute local path (decoded), e.g. from a `p` DV on local disk.
            let normal = normalize_local(std::path::Path::new(location));
            let text = normal.to_string_lossy();
            return raw_path(
                text.split('/')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
        }
        Ok(self.path(location))
    }

    /// Whether the table is on the local file system.
    pub fn is_local(&self) -> bool {
        self.url.scheme() == "file"
    }

    /// Refuse to read a local path that exists but is not a regular file: a
    /// FIFO or device would block or never end. Other stores hold only objects.
    fn check_regular_file(&self, path: &Path) -> Result<()> {
        if !self.is_local() {
            return Ok(());
        }
        let Ok(local) = LocalFileSystem::new().path_to_filesystem(path) else {
            return Ok(());
        };
        // Not found (and other stat errors) are reported by the read itself.
        if let Ok(meta) = std::fs::metadata(&local) {
            if !meta.is_file() {
                let kind = file_kind(&meta.file_type());
                return Err(Error::Io {
                    path: local.display().to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("not a regular file ({kind}); refusing to read it"),
                    ),
                });
            }
        }
        Ok(())
    }

    /// List `_delta_log` (optionally starting after `offset`, a file name).
    pub async fn list_log(&self, offset: Option<&str>) -> Result<Vec<object_store::ObjectMeta>> {
        let prefix = self.path(LOG_DIR);
        RequestCounts::bump(&self.counts.lists);
        let stream = match offset {
            Some(o) => self
                .store
                .list_with_offset(Some(&prefix), &self.path(&format!("{LOG_DIR}/{o}"))),
            None => self.store.list(Some(&prefix)),
        };
        stream
            .try_collect()
            .await
            .map_err(|e| store_error(prefix.as_ref(), e))
    }

    /// Whether anything is stored at the table root: for a local table, whether
    /// the directory exists; elsewhere, whether any object has the root as prefix
    /// (one LIST). Tells "no such path" from "a path that is not a Delta table".
    pub async fn root_exists(&self) -> Result<bool> {
        if self.url.scheme() == "file" {
            if let Ok(dir) = self.url.to_file_path() {
                return Ok(dir.exists());
            }
        }
        RequestCounts::bump(&self.counts.lists);
        let listing = self
            .store
            .list_with_delimiter(Some(&self.root))
            .await
            .map_err(|e| store_error(self.root.as_ref(), e))?;
        Ok(!listing.objects.is_empty() || !listing.common_prefixes.is_empty())
    }

    /// Every object under the table root, recursively (LISTs of the whole
    /// tree, `_delta_log` included).
    pub async fn list_all(&self) -> Result<Vec<object_store::ObjectMeta>> {
        RequestCounts::bump(&self.counts.lists);
        self.store
            .list(Some(&self.root))
            .try_collect()
            .await
            .map_err(|e| store_error(self.root.as_ref(), e))
    }

    /// Every file under the table root: its path relative to the root
    /// (decoded), size and modification time. Directories for which
    /// `descend(name)` is false are skipped where the store has directories
    /// (a local table, walked with parallel threads); object stores are
    /// listed whole and filtered after.
    pub async fn list_files(
        &self,
        descend: fn(&str, &[String]) -> bool,
        context: Vec<String>,
    ) -> Result<Vec<ListedFile>> {
        if self.url.scheme() == "file" {
            if let Ok(dir) = self.url.to_file_path() {
                RequestCounts::bump(&self.counts.lists);
                return crate::io::spawn_blocking(move || walk_local(&dir, descend, &context))
                    .await?;
            }
        }
        let metas = self.list_all().await?;
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let relative = self.relative_to_root(&m.location)?;
                let decoded = percent_encoding::percent_decode_str(&relative)
                    .decode_utf8_lossy()
                    .into_owned();
                let mut dirs = decoded.split('/').collect::<Vec<_>>();
                dirs.pop();
                if dirs.iter().any(|d| !descend(d, &context)) {
                    return None;
                }
                Some(ListedFile {
                    relative: decoded,
                    size: m.size,
                    last_modified_ms: m.last_modified.timestamp_millis(),
                })
            })
            .collect())
    }

    /// The path of `location` (from [`TableStore::list_all`]) relative to the
    /// table root, or None for an object outside it.
    pub fn relative_to_root(&self, location: &Path) -> Option<String> {
        let prefix: Vec<_> = self.root.parts().collect();
        let mut parts = location.parts();
        for p in &prefix {
            if parts.next().as_ref() != Some(p) {
                return None;
            }
        }
        let rest: Vec<String> = parts.map(|p| p.as_ref().to_string()).collect();
        (!rest.is_empty()).then(|| rest.join("/"))
    }

    /// DELETE many objects, in parallel batches (bulk deletes where the store
    /// has them); ones already gone are fine. `done` is called with the
    /// number deleted so far as deletes finish. Returns how many were deleted.
    pub async fn delete_many(
        &self,
        paths: Vec<Path>,
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<usize> {
        use futures::StreamExt;
        let n = paths.len();
        let counts = self.counts.clone();
        let stream = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
        let mut results = self.store.delete_stream(stream);
        let mut deleted = 0;
        while let Some(r) = results.next().await {
            RequestCounts::bump(&counts.deletes);
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {
                    deleted += 1;
                    done(deleted);
                }
                Err(e) => return Err(store_error(self.root.as_ref(), e)),
            }
        }
        debug_assert!(deleted <= n);
        Ok(deleted)
    }

    /// Whether an object exists (one HEAD).
    pub async fn exists(&self, path: &Path) -> Result<bool> {
        RequestCounts::bump(&self.counts.heads);
        match self.store.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(store_error(path.as_ref(), e)),
        }
    }

    /// DELETE an object; one that is already gone is not an error.
    pub async fn delete(&self, path: &Path) -> Result<()> {
        RequestCounts::bump(&self.counts.deletes);
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error(path.as_ref(), e)),
        }
    }

    /// GET a whole object.
    pub async fn get(&self, path: &Path) -> Result<Bytes> {
        self.check_regular_file(path)?;
        RequestCounts::bump(&self.counts.gets);
        let result = self
            .store
            .get(path)
            .await
            .map_err(|e| store_error(path.as_ref(), e))?;
        let bytes = result
            .bytes()
            .await
            .map_err(|e| store_error(path.as_ref(), e))?;
        Ok(self.counts.read(bytes))
    }

    /// GET a byte range, clipped to the object's size (a range that runs past
    /// the end returns what exists, so format checks can report truncation).
    pub async fn get_range(&self, path: &Path, range: Range<u64>) -> Result<Bytes> {
        let bytes = self.get_range_uncounted(path, range).await?;
        Ok(self.counts.read(bytes))
    }

    async fn get_range_uncounted(&self, path: &Path, range: Range<u64>) -> Result<Bytes> {
        self.check_regular_file(path)?;
        RequestCounts::bump(&self.counts.gets);
        if self.is_local() && range.end.saturating_sub(range.start) >= MAP_AT_LEAST {
            if let Ok(local) = LocalFileSystem::new().path_to_filesystem(path) {
                return map_local_range(&local, range).map_err(|source| {
                    if source.kind() == std::io::ErrorKind::NotFound {
                        Error::NotFound {
                            path: path.to_string(),
                        }
                    } else {
                        Error::Io {
                            path: local.display().to_string(),
                            source,
                        }
                    }
                });
            }
        }
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..Default::default()
        };
        match self.store.get_opts(path, options).await {
            Ok(r) => r.bytes().await.map_err(|e| store_error(path.as_ref(), e)),
            Err(object_store::Error::NotModified { .. }) => Ok(Bytes::new()),
            Err(e) => {
                // Ranges starting past the end are refused by some stores: report as empty.
                let text = e.to_string();
                if text.contains("Range") || text.contains("range") {
                    if let Ok(meta) = self.store.head(path).await {
                        if range.start >= meta.size {
                            return Ok(Bytes::new());
                        }
                        RequestCounts::bump(&self.counts.gets);
                        return self
                            .store
                            .get_range(path, range.start..range.end.min(meta.size))
                            .await
                            .map_err(|e| store_error(path.as_ref(), e));
                    }
                }
                Err(store_error(path.as_ref(), e))
            }
        }
    }

    /// `path` as a URL-like text for messages (`s3://bucket/key`,
    /// `file:///dir/file`).
    pub fn display_path(&self, path: &Path) -> String {
        format!(
            "{}://{}/{}",
            self.url.scheme(),
            self.url.host_str().unwrap_or(""),
            path
        )
        .replace(":////", ":///")
    }

    /// GET several byte ranges of one object (e.g. the column chunks of a
    /// row group): ranges less than [`COALESCE_GAP`] apart are merged into
    /// one request on object stores (contiguous ones only on a local disk,
    /// where a read costs no round trip), and the merged requests run
    /// concurrently. Returns one buffer per range, in order.
    pub async fn get_ranges(&self, path: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let gap = if self.is_local() { 0 } else { COALESCE_GAP };
        object_store::coalesce_ranges(ranges, |r| self.get_range(path, r), gap).await
    }

    /// [`TableStore::get_ranges`] of a deletion vector file: each GET is
    /// also counted in `dv_gets`.
    pub async fn get_dv_ranges(&self, path: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let gap = if self.is_local() { 0 } else { COALESCE_GAP };
        let get = |r: Range<u64>| {
            RequestCounts::bump(&self.counts.dv_gets);
            self.get_range(path, r)
        };
        object_store::coalesce_ranges(ranges, get, gap).await
    }

    /// PUT an object, failing if it exists (put-if-absent).
    pub async fn put_if_absent(&self, path: &Path, bytes: Bytes) -> Result<bool> {
        RequestCounts::bump(&self.counts.puts);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .store
            .put_opts(path, PutPayload::from(bytes), opts)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(store_error(path.as_ref(), e)),
        }
    }

    /// PUT an object (overwrite).
    pub async fn put(&self, path: &Path, bytes: Bytes) -> Result<()> {
        RequestCounts::bump(&self.counts.puts);
        self.store
            .put(path, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| store_error(path.as_ref(), e))
    }

    /// A buffered writer of a new object at `path`: one PUT for a small object,
    /// a multipart upload for a large one, on `shutdown`.
    pub fn buf_writer(&self, path: &Path) -> object_store::buffered::BufWriter {
        RequestCounts::bump(&self.counts.puts);
        object_store::buffered::BufWriter::new(self.store.clone(), path.clone())
    }

    /// The underlying store (for parquet readers).
    pub fn inner(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }
}

/// A file found by [`TableStore::list_files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// Relative to the table root, decoded (`part=a b/part-0.parquet`).
    pub relative: String,
    pub size: u64,
    pub last_modified_ms: i64,
}

/// Walk a local directory tree: the top-level directories are shared among
/// threads (stat calls dominate, and they overlap); symbolic links are not
/// followed.
fn walk_local(
    root: &std::path::Path,
    descend: fn(&str, &[String]) -> bool,
    context: &[String],
) -> Result<Vec<ListedFile>> {
    use std::sync::Mutex;

    fn io_error(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.display().to_string(),
            source,
        }
    }
    fn walk(
        dir: &std::path::Path,
        prefix: &str,
        descend: fn(&str, &[String]) -> bool,
        context: &[String],
        out: &mut Vec<ListedFile>,
        subdirs: Option<&mut Vec<(std::path::PathBuf, String)>>,
    ) -> Result<()> {
        let mut pending: Vec<(std::path::PathBuf, String)> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
            let entry = entry.map_err(|e| io_error(dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().map_err(|e| io_error(&entry.path(), e))?;
            let relative = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            if kind.is_dir() {
                if descend(&name, context) {
                    pending.push((entry.path(), relative));
                }
            } else if kind.is_file() {
                let meta = entry.metadata().map_err(|e| io_error(&entry.path(), e))?;
                let modified = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                out.push(ListedFile {
                    relative,
                    size: meta.len(),
                    last_modified_ms: modified,
                });
            }
        }
        match subdirs {
            Some(list) => list.extend(pending),
            None => {
                for (path, relative) in pending {
                    walk(&path, &relative, descend, context, out, None)?;
                }
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    let mut top = Vec::new();
    if !root.exists() {
        return Ok(out);
    }
    walk(root, "", descend, context, &mut out, Some(&mut top))?;
    let threads = std::thread::available_parallelism()
        .map_or(2, usize::from)
        .clamp(1, 8);
    let queue = Mutex::new(top);
    let found = Mutex::new(Vec::new());
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let next = match queue.lock() {
                    Ok(mut q) => q.pop(),
                    Err(_) => None,
                };
                let Some((path, relative)) = next else {
                    return;
                };
                let mut mine = Vec::new();
                match walk(&path, &relative, descend, context, &mut mine, None) {
                    Ok(()) => {
                        if let Ok(mut f) = found.lock() {
                            f.extend(mine);
                        }
                    }
                    Err(e) => {
                        if let Ok(mut slot) = failure.lock() {
                            slot.get_or_insert(e);
                        }
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    out.extend(found.into_inner().unwrap_or_default());
    Ok(out)
}
