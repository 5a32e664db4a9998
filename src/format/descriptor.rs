//! Deletion vector descriptors: the `deletionVector` field of add and remove
//! actions, validated at construction.
//!
//! | field          | `u` (relative)                         | `i` (inline)            | `p` (absolute) |
//! |----------------|----------------------------------------|-------------------------|----------------|
//! | pathOrInlineDv | random prefix + 20-char Z85 of a UUID  | Z85 of the bitmap bytes | URI            |
//! | offset         | of the DV in its file (default 1)      | absent                  | as `u`         |
//! | sizeInBytes    | bitmap bytes                           | bitmap bytes (pre-Z85)  | as `u`         |
//! | cardinality    | number of deleted rows                 | same                    | same           |
//!
//! A `u` DV lives at `<table root>/<prefix>/deletion_vector_<uuid>.bin`.

use std::fmt;

use percent_encoding::percent_decode_str;
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::codec::z85;
use crate::error::{Error, Location, Result};
use crate::format::bitmap;
use crate::format::file::{self, DvSlot};

/// Characters of the Z85-encoded UUID at the end of a `u` path.
pub const UUID_Z85_LEN: usize = 20;
/// Bytes of a UUID.
const UUID_LEN: usize = 16;
/// Prefix and suffix of a DV file name.
pub const DV_FILE_PREFIX: &str = "deletion_vector_";
pub const DV_FILE_SUFFIX: &str = ".bin";

/// How a descriptor stores its bitmap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StorageType {
    /// `u`: a file in the table directory named after a UUID.
    UuidRelative,
    /// `i`: the bitmap itself, Z85-encoded, inside the log.
    Inline,
    /// `p`: a file at an absolute URI.
    AbsolutePath,
}

impl StorageType {
    /// The one-letter code used in the log.
    pub fn code(self) -> &'static str {
        match self {
            StorageType::UuidRelative => "u",
            StorageType::Inline => "i",
            StorageType::AbsolutePath => "p",
        }
    }

    /// Parse a one-letter code.
    pub fn from_code(code: &str) -> Result<Self> {
        match code {
            "u" => Ok(StorageType::UuidRelative),
            "i" => Ok(StorageType::Inline),
            "p" => Ok(StorageType::AbsolutePath),
            other => Err(Error::InvalidDescriptor(format!(
                "storageType must be 'u', 'i' or 'p', found {other:?}"
            ))),
        }
    }
}

impl fmt::Display for StorageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The JSON shape of a descriptor, before validation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDescriptor {
    storage_type: String,
    path_or_inline_dv: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offset: Option<i64>,
    size_in_bytes: i64,
    cardinality: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_row_index: Option<i64>,
}

/// A validated deletion vector descriptor. An invalid one cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawDescriptor", into = "RawDescriptor")]
pub struct DeletionVectorDescriptor {
    storage_type: StorageType,
    path_or_inline_dv: String,
    offset: Option<u32>,
    size_in_bytes: u32,
    cardinality: u64,
    max_row_index: Option<u64>,
}

macro_rules! require {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(Error::InvalidDescriptor(format!($($msg)+)));
        }
    };
}

fn non_negative_u32(value: i64, field: &str) -> Result<u32> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v <= i32::MAX as u32)
        .ok_or_else(|| {
            Error::InvalidDescriptor(format!("{field} must be in 0..=2^31-1, found {value}"))
        })
}

impl DeletionVectorDescriptor {
    /// Build and validate a descriptor from its log fields.
    pub fn try_new(
        storage_type: &str,
        path_or_inline_dv: impl Into<String>,
        offset: Option<i64>,
        size_in_bytes: i64,
        cardinality: i64,
    ) -> Result<Self> {
        let storage_type = StorageType::from_code(storage_type)?;
        let path_or_inline_dv = path_or_inline_dv.into();
        let size_in_bytes = non_negative_u32(size_in_bytes, "sizeInBytes")?;
        require!(
            cardinality >= 0,
            "cardinality must be >= 0, found {cardinality}"
        );
        let offset = offset.map(|o| non_negative_u32(o, "offset")).transpose()?;
        match storage_type {
            StorageType::Inline => {
                require!(
                    offset.is_none(),
                    "an inline descriptor has no offset, found {offset:?}"
                );
                let want = z85::encoded_len(size_in_bytes as usize);
                require!(
                    path_or_inline_dv.len() == want,
                    "inline DV of {size_in_bytes} bytes must be {want} Z85 characters, found {}",
                    path_or_inline_dv.len()
                );
                if let Some((i, c)) = path_or_inline_dv
                    .char_indices()
                    .find(|(_, c)| !c.is_ascii() || !z85::ALPHABET.contains(&(*c as u8)))
                {
                    return Err(Error::InvalidDescriptor(format!(
                        "inline DV has non-Z85 character {c:?} at position {i}"
                    )));
                }
            }
            StorageType::UuidRelative => {
                require!(
                    path_or_inline_dv.len() >= UUID_Z85_LEN && path_or_inline_dv.is_char_boundary(path_or_inline_dv.len() - UUID_Z85_LEN),
                    "a 'u' path must end in {UUID_Z85_LEN} Z85 characters, found {path_or_inline_dv:?}"
                );
                let (prefix, encoded) =
                    path_or_inline_dv.split_at(path_or_inline_dv.len() - UUID_Z85_LEN);
                z85::decode(encoded, UUID_LEN).map_err(|e| {
                    Error::InvalidDescriptor(format!(
                        "bad UUID in 'u' path {path_or_inline_dv:?}: {e}"
                    ))
                })?;
                require!(
                    !prefix.starts_with('/') && !prefix.split('/').any(|s| s == ".."),
                    "the random prefix of a 'u' path must be relative, found {prefix:?}"
                );
                require!(
                    offset != Some(0),
                    "offset must be >= 1 (after the version byte), found 0"
                );
            }
            StorageType::AbsolutePath => {
                require!(
                    uri_scheme(&path_or_inline_dv).is_some(),
                    "a 'p' path must be an absolute URI with a scheme, found {path_or_inline_dv:?}"
                );
                require!(
                    offset != Some(0),
                    "offset must be >= 1 (after the version byte), found 0"
                );
            }
        }
        Ok(DeletionVectorDescriptor {
            storage_type,
            path_or_inline_dv,
            offset,
            size_in_bytes,
            cardinality: cardinality as u64,
            max_row_index: None,
        })
    }

    /// Parse the JSON object of a log action's `deletionVector` field.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|source| Error::Json {
            context: "deletionVector descriptor".to_string(),
            source,
        })
    }

    /// The JSON object for a log action.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&RawDescriptor::from(self.clone())).unwrap_or_default()
    }

    /// Descriptor of an inline DV holding `map`.
    pub fn inline(map: &RoaringTreemap) -> Result<Self> {
        let bytes = bitmap::serialize(map)?;
        let mut d = Self::try_new(
            "i",
            z85::encode(&bytes),
            None,
            bytes.len() as i64,
            map.len() as i64,
        )?;
        d.max_row_index = map.max();
        Ok(d)
    }

    /// Descriptor of a DV stored at `slot` in the file named by `uuid` under
    /// the optional random `prefix` (storage type `u`).
    pub fn relative(uuid: Uuid, prefix: &str, slot: DvSlot) -> Result<Self> {
        let encoded = z85::encode(uuid.as_bytes());
        Self::try_new(
            "u",
            format!("{prefix}{encoded}"),
            Some(slot.offset as i64),
            i64::from(slot.size_in_bytes),
            slot.cardinality as i64,
        )
    }

    /// Attach `maxRowIndex` (kept in memory; never written to JSON: Delta Spark
    /// requires it absent from the log).
    pub fn with_max_row_index(mut self, max_row_index: Option<u64>) -> Self {
        self.max_row_index = max_row_index;
        self
    }

    pub fn storage_type(&self) -> StorageType {
        self.storage_type
    }
    pub fn path_or_inline_dv(&self) -> &str {
        &self.path_or_inline_dv
    }
    pub fn offset(&self) -> Option<u32> {
        self.offset
    }
    pub fn size_in_bytes(&self) -> u32 {
        self.size_in_bytes
    }
    pub fn cardinality(&self) -> u64 {
        self.cardinality
    }
    pub fn max_row_index(&self) -> Option<u64> {
        self.max_row_index
    }

    /// `storageType + pathOrInlineDv`, plus `@offset` when an offset is present.
    pub fn unique_id(&self) -> String {
        match self.offset {
            Some(o) => format!("{}{}@{o}", self.storage_type, self.path_or_inline_dv),
            None => format!("{}{}", self.storage_type, self.path_or_inline_dv),
        }
    }

    /// The UUID of a `u` descriptor's file.
    pub fn uuid(&self) -> Option<Uuid> {
        if self.storage_type != StorageType::UuidRelative {
            return None;
        }
        let encoded = self
            .path_or_inline_dv
            .get(self.path_or_inline_dv.len() - UUID_Z85_LEN..)?;
        let bytes = z85::decode(encoded, UUID_LEN).ok()?;
        Uuid::from_slice(&bytes).ok()
    }

    /// For `u`: the DV file's path relative to the table root.
    pub fn relative_path(&self) -> Option<String> {
        let uuid = self.uuid()?;
        let prefix = self
            .path_or_inline_dv
            .get(..self.path_or_inline_dv.len() - UUID_Z85_LEN)?;
        let name = format!("{DV_FILE_PREFIX}{uuid}{DV_FILE_SUFFIX}");
        Some(if prefix.is_empty() {
            name
        } else {
            format!("{}/{name}", prefix.trim_end_matches('/'))
        })
    }

    /// Where the DV file is: `table_root` joined with the relative path for
    /// `u`, the URL-decoded URI for `p` (a plain local path for `file:` URIs),
    /// `None` for inline DVs.
    pub fn absolute_path(&self, table_root: &str) -> Option<String> {
        match self.storage_type {
            StorageType::Inline => None,
            StorageType::UuidRelative => {
                let rel = self.relative_path()?;
                Some(format!("{}/{rel}", table_root.trim_end_matches('/')))
            }
            StorageType::AbsolutePath => Some(decode_uri(&self.path_or_inline_dv)),
        }
    }

    /// Where the DV sits in its file. Absent offsets mean the file's first DV.
    pub fn slot(&self) -> DvSlot {
        DvSlot {
            offset: self.offset.map_or(file::FIRST_DV_OFFSET, u64::from),
            size_in_bytes: self.size_in_bytes,
            cardinality: self.cardinality,
        }
    }

    /// An inline DV's bitmap bytes, decoded from Z85 (not yet checked).
    fn inline_bytes(&self) -> Result<Vec<u8>> {
        if self.storage_type != StorageType::Inline {
            return Err(Error::InvalidArgument(format!(
                "descriptor {} is not inline",
                self.unique_id()
            )));
        }
        z85::decode(&self.path_or_inline_dv, self.size_in_bytes as usize)
            .map_err(|e| e.relocate(&Location::Inline, 0))
    }

    /// Decode an inline DV's bitmap and check its cardinality.
    pub fn inline_bitmap(&self) -> Result<RoaringTreemap> {
        let bytes = self.inline_bytes()?;
        let map = bitmap::deserialize(&bytes).map_err(|e| e.relocate(&Location::Inline, 0))?;
        file::check_cardinality(&map, self.cardinality, &Location::Inline, 0)?;
        Ok(map)
    }

    /// An inline DV's bitmap bytes, checked as [`Self::inline_bitmap`] checks
    /// them, without building the bitmap.
    pub fn inline_serialized(&self) -> Result<file::SerializedDv> {
        let bytes = self.inline_bytes()?;
        let rows = super::rows::validate(&bytes).map_err(|e| e.relocate(&Location::Inline, 0))?;
        file::check_count(rows, self.cardinality, &Location::Inline, 0)?;
        Ok(file::SerializedDv {
            bytes,
            cardinality: rows,
        })
    }
}

impl TryFrom<RawDescriptor> for DeletionVectorDescriptor {
    type Error = Error;
    fn try_from(raw: RawDescriptor) -> Result<Self> {
        let max_row_index = raw
            .max_row_index
            .map(|m| {
                u64::try_from(m).map_err(|_| {
                    Error::InvalidDescriptor(format!("maxRowIndex must be >= 0, found {m}"))
                })
            })
            .transpose()?;
        Ok(Self::try_new(
            &raw.storage_type,
            raw.path_or_inline_dv,
            raw.offset,
            raw.size_in_bytes,
            raw.cardinality,
        )?
        .with_max_row_index(max_row_index))
    }
}

impl From<DeletionVectorDescriptor> for RawDescriptor {
    fn from(d: DeletionVectorDescriptor) -> Self {
        RawDescriptor {
            storage_type: d.storage_type.code().to_string(),
            path_or_inline_dv: d.path_or_inline_dv,
            offset: d.offset.map(i64::from),
            size_in_bytes: i64::from(d.size_in_bytes),
            cardinality: d.cardinality as i64,
            // Transient in Delta Spark, which asserts it is absent from every
            // add it writes (a RESTORE re-writing our adds would fail): read,
            // never written.
            max_row_index: None,
        }
    }
}

/// The scheme of an absolute URI (`file`, `s3`, …), if `uri` has one.
fn uri_scheme(uri: &str) -> Option<&str> {
    let (scheme, _) = uri.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// URL-decode an absolute DV URI. `file:` URIs become plain local paths.
/// Decoding is lenient: a `%` not followed by two hex digits stays as it is,
/// so both raw and encoded forms of a path with `%` in it resolve.
fn decode_uri(uri: &str) -> String {
    if let Some(rest) = uri.strip_prefix("file:") {
        // file:/abs, file:///abs or file://localhost/abs
        let path = match rest.strip_prefix("//") {
            Some(authority_and_path) => authority_and_path
                .find('/')
                .and_then(|i| authority_and_path.get(i..))
                .unwrap_or(authority_and_path),
            None => rest,
        };
        return percent_decode_str(path).decode_utf8_lossy().into_owned();
    }
    percent_decode_str(uri).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_uuid_path_example() {
        let d = DeletionVectorDescriptor::try_new("u", "ab^-aqEH.-t@S}K{vb[*k^", Some(1), 36, 2)
            .unwrap();
        assert_eq!(
            d.relative_path().unwrap(),
            "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
        );
        assert_eq!(d.unique_id(), "uab^-aqEH.-t@S}K{vb[*k^@1");
    }

    #[test]
    fn spec_inline_example() {
        let d = DeletionVectorDescriptor::try_new(
            "i",
            "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
            None,
            44,
            6,
        )
        .unwrap();
        let rows: Vec<u64> = d.inline_bitmap().unwrap().iter().collect();
        assert_eq!(rows, vec![3, 4, 7, 11, 18, 29]);
        assert_eq!(
            d.unique_id(),
            "i^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
        );
    }

    #[test]
    fn absolute_paths_decode_raw_and_encoded() {
        for uri in [
            "file:/tmp/folder&with%special char/test%25dv%25prefix-x.bin",
            "file:///tmp/folder&with%25special%20char/test%25dv%25prefix-x.bin",
        ] {
            let d = DeletionVectorDescriptor::try_new("p", uri, Some(1), 42, 5).unwrap();
            assert_eq!(
                d.absolute_path("/ignored").unwrap(),
                "/tmp/folder&with%special char/test%dv%prefix-x.bin"
            );
        }
    }

    #[test]
    fn invalid_descriptors_cannot_be_built() {
        assert!(DeletionVectorDescriptor::try_new("x", "abc", None, 1, 1).is_err());
        assert!(DeletionVectorDescriptor::try_new("i", "abc", None, 44, 1).is_err());
        assert!(DeletionVectorDescriptor::try_new("i", "^Bg9^", Some(1), 4, 1).is_err());
        assert!(DeletionVectorDescriptor::try_new("u", "short", Some(1), 36, 2).is_err());
        assert!(
            DeletionVectorDescriptor::try_new("u", "ab^-aqEH.-t@S}K{vb[*k^", Some(0), 36, 2)
                .is_err()
        );
        assert!(DeletionVectorDescriptor::try_new(
            "u",
            "../ab^-aqEH.-t@S}K{vb[*k^",
            Some(1),
            36,
            2
        )
        .is_err());
        assert!(DeletionVectorDescriptor::try_new("p", "no-scheme/x.bin", Some(1), 36, 2).is_err());
        assert!(
            DeletionVectorDescriptor::try_new("u", "ab^-aqEH.-t@S}K{vb[*k^", Some(1), -1, 2)
                .is_err()
        );
        assert!(
            DeletionVectorDescriptor::try_new("u", "ab^-aqEH.-t@S}K{vb[*k^", Some(1), 36, -2)
                .is_err()
        );
    }

    #[test]
    fn json_round_trip() {
        let json = r#"{"storageType":"u","pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA","offset":1,"sizeInBytes":36,"cardinality":2,"maxRowIndex":9}"#;
        let d = DeletionVectorDescriptor::from_json(json).unwrap();
        assert_eq!(d.max_row_index(), Some(9));
        // maxRowIndex is read but never written (Delta Spark asserts it absent).
        let written = d.to_json();
        assert!(!written.contains("maxRowIndex"), "{written}");
        assert_eq!(
            DeletionVectorDescriptor::from_json(&written).unwrap(),
            d.clone().with_max_row_index(None)
        );
    }
}
