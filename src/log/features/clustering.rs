//! Liquid clustering (PROTOCOL.md "Clustered Table"): the `delta.clustering`
//! domain naming the clustering columns, the protocol a clustered table
//! needs, and how files written by a clustering OPTIMIZE are marked.
//! Pure: schema, protocol and domain JSON in, values out.
//!
//! What Delta Spark 4.4 writes, and deltadv mirrors:
//! - `CREATE TABLE … CLUSTER BY (a, c)`: writer features `domainMetadata`
//!   and `clustering` (writer 7), and in version 0
//!   a `domainMetadata` action for the domain [`CLUSTERING_DOMAIN`] whose
//!   configuration is the JSON object `clusteringColumns: [[a], [c]]` plus
//!   `domainName` (the domain's name), not removed (paths of physical names). `PARTITIONED BY` together
//!   with `CLUSTER BY` is refused.
//! - Plain writes (appends, DELETE, UPDATE, MERGE) leave the domain alone and
//!   add files without `clusteringProvider` or tags.
//! - OPTIMIZE adds files with `clusteringProvider: "liquid"` and the tags
//!   `ZCUBE_ID` (one id per OPTIMIZE run) and `ZCUBE_ZORDER_BY` (the
//!   clustering columns' logical names as a JSON list).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::log::actions::{Add, DomainMetadata, Protocol};
use crate::log::schema::{ColumnMappingMode, DataType, StructField, StructType};

use super::writer_features;

pub use super::properties::CLUSTERING_DOMAIN;
/// The writer feature of clustered tables.
pub const CLUSTERING_FEATURE: &str = "clustering";
/// `add.clusteringProvider` of files an OPTIMIZE clustered.
pub const LIQUID_PROVIDER: &str = "liquid";
/// Tag: the id of the ZCube (one clustering run's output) a file belongs to.
pub const ZCUBE_ID_TAG: &str = "ZCUBE_ID";
/// Tag: the columns (logical names, JSON list) the ZCube was clustered by.
pub const ZCUBE_ZORDER_BY_TAG: &str = "ZCUBE_ZORDER_BY";
/// Delta Spark's limit on clustering columns.
pub const MAX_CLUSTERING_COLUMNS: usize = 4;

/// `delta.clustering`'s configuration JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusteringDomain {
    clustering_columns: Vec<Vec<String>>,
    #[serde(default = "domain_name")]
    domain_name: String,
}

fn domain_name() -> String {
    CLUSTERING_DOMAIN.to_string()
}

/// One clustering column: its logical path and physical path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusteringColumn {
    pub logical: Vec<String>,
    pub physical: Vec<String>,
}

impl ClusteringColumn {
    /// The logical path, dot-joined (as Delta Spark shows it in
    /// `DESCRIBE DETAIL` and `operationParameters.clusterBy`).
    pub fn name(&self) -> String {
        self.logical.join(".")
    }
}

fn schema_err(text: String) -> Error {
    Error::InvalidArgument(text)
}

/// The field at a logical path of `schema`.
fn field_at<'a>(schema: &'a StructType, path: &[String]) -> Option<&'a StructField> {
    let (first, rest) = path.split_first()?;
    let field = schema.field(first)?;
    if rest.is_empty() {
        return Some(field);
    }
    match &field.data_type {
        DataType::Struct(inner) => field_at(inner, rest),
        _ => None,
    }
}

/// Whether Delta Spark collects min/max stats for the type (clustering
/// columns must have them).
fn clusterable(t: &DataType) -> bool {
    !matches!(
        t,
        DataType::Struct(_)
            | DataType::Array { .. }
            | DataType::Map { .. }
            | DataType::Boolean
            | DataType::Binary
            | DataType::Variant
    )
}

/// Resolve `cluster_by` (logical names, nested fields dot-separated) of a
/// table about to be created with `schema` and `partition_by`, as Delta
/// Spark's `CREATE TABLE … CLUSTER BY` checks them.
pub fn resolve_cluster_by(
    schema: &StructType,
    partition_by: &[String],
    cluster_by: &[String],
    mode: ColumnMappingMode,
) -> Result<Vec<ClusteringColumn>> {
    if !partition_by.is_empty() && !cluster_by.is_empty() {
        return Err(schema_err(
            "clustering and partitioning cannot both be specified (as in Delta Spark): \
             give cluster_by or partition_by, not both"
                .into(),
        ));
    }
    if cluster_by.len() > MAX_CLUSTERING_COLUMNS {
        return Err(schema_err(format!(
            "at most {MAX_CLUSTERING_COLUMNS} clustering columns are allowed, {} given ({cluster_by:?})",
            cluster_by.len()
        )));
    }
    let mut out: Vec<ClusteringColumn> = Vec::new();
    for name in cluster_by {
        let logical: Vec<String> = name.split('.').map(str::to_string).collect();
        let physical = physical_path(schema, &logical, mode)?.ok_or_else(|| {
            schema_err(format!(
                "clustering column {name:?} is not in the schema (columns: {:?})",
                schema.fields.iter().map(|f| &f.name).collect::<Vec<_>>()
            ))
        })?;
        if let Some(f) = field_at(schema, &logical) {
            if !clusterable(&f.data_type) {
                return Err(schema_err(format!(
                    "clustering column {name:?} has type {}, for which Delta collects no \
                     min/max statistics: it cannot be a clustering column",
                    f.data_type
                )));
            }
        }
        if out.iter().any(|c| c.logical == logical) {
            return Err(schema_err(format!(
                "clustering column {name:?} is given twice"
            )));
        }
        out.push(ClusteringColumn { logical, physical });
    }
    Ok(out)
}

/// The physical path of a logical path, `None` when it is not in the schema.
fn physical_path(
    schema: &StructType,
    logical: &[String],
    mode: ColumnMappingMode,
) -> Result<Option<Vec<String>>> {
    let mut fields = schema;
    let mut out = Vec::new();
    for (i, part) in logical.iter().enumerate() {
        let Some(f) = fields.field(part) else {
            return Ok(None);
        };
        out.push(f.physical_name(mode)?.to_string());
        match &f.data_type {
            DataType::Struct(inner) => fields = inner,
            _ if i + 1 < logical.len() => return Ok(None),
            _ => {}
        }
    }
    Ok(Some(out))
}

/// The logical path of a physical path, `None` when no column has it.
fn logical_path(
    schema: &StructType,
    physical: &[String],
    mode: ColumnMappingMode,
) -> Result<Option<Vec<String>>> {
    let mut fields = schema;
    let mut out = Vec::new();
    for (i, part) in physical.iter().enumerate() {
        let mut found = None;
        for f in &fields.fields {
            if f.physical_name(mode)? == part {
                found = Some(f);
                break;
            }
        }
        let Some(f) = found else {
            return Ok(None);
        };
        out.push(f.name.clone());
        match &f.data_type {
            DataType::Struct(inner) => fields = inner,
            _ if i + 1 < physical.len() => return Ok(None),
            _ => {}
        }
    }
    Ok(Some(out))
}

/// The `delta.clustering` domain action for `columns`.
pub fn clustering_domain(columns: &[ClusteringColumn]) -> Result<DomainMetadata> {
    let config = ClusteringDomain {
        clustering_columns: columns.iter().map(|c| c.physical.clone()).collect(),
        domain_name: domain_name(),
    };
    let configuration = serde_json::to_string(&config).map_err(|source| Error::Json {
        context: format!("{CLUSTERING_DOMAIN} domain"),
        source,
    })?;
    Ok(DomainMetadata {
        domain: CLUSTERING_DOMAIN.to_string(),
        configuration,
        removed: false,
    })
}

/// The clustering columns of a table (from its domains), `None` when it is
/// not clustered (no `clustering` feature, or no live `delta.clustering`
/// domain). An error names a column the schema does not have.
pub fn clustering_columns(
    protocol: &Protocol,
    domains: &HashMap<String, DomainMetadata>,
    schema: &StructType,
    mode: ColumnMappingMode,
) -> Result<Option<Vec<ClusteringColumn>>> {
    if !writer_features(protocol).any(|f| f == CLUSTERING_FEATURE) {
        return Ok(None);
    }
    let Some(domain) = domains.get(CLUSTERING_DOMAIN).filter(|d| !d.removed) else {
        return Ok(None);
    };
    let config: ClusteringDomain =
        serde_json::from_str(&domain.configuration).map_err(|source| Error::Json {
            context: format!("{CLUSTERING_DOMAIN} domain configuration"),
            source,
        })?;
    let mut out = Vec::new();
    for physical in config.clustering_columns {
        let logical = logical_path(schema, &physical, mode)?.ok_or_else(|| {
            Error::Schema(format!(
                "clustering column {physical:?} of the {CLUSTERING_DOMAIN} domain is not in \
                 the table's schema"
            ))
        })?;
        out.push(ClusteringColumn { logical, physical });
    }
    Ok(Some(out))
}

/// `protocol` with the writer features a clustered table needs
/// (`domainMetadata`, `clustering`), at writer version 7 (the features the
/// legacy versions implied kept).
pub fn with_clustering(protocol: &Protocol) -> Protocol {
    super::protocol::with_writer_features(protocol, &["domainMetadata", CLUSTERING_FEATURE])
}

/// `ZCUBE_ZORDER_BY` for `columns`: their logical names as a JSON list.
pub fn zorder_by_tag(columns: &[ClusteringColumn]) -> String {
    serde_json::Value::from(columns.iter().map(|c| c.name()).collect::<Vec<_>>()).to_string()
}

/// How a clustering OPTIMIZE over `columns` sees a file (Delta Spark's
/// `ClusteringStrategy.applyMinZCube`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileClustering<'a> {
    /// No ZCube tags: no OPTIMIZE clustered it.
    Unclustered,
    /// In the ZCube of this id, clustered by `columns`.
    InZCube(&'a str),
    /// Clustered by other columns or by another provider: a plain OPTIMIZE
    /// leaves it alone, OPTIMIZE FULL reclusters it.
    OtherLayout,
}

/// Where `add` stands for a clustering OPTIMIZE over `columns`: a file whose
/// `clusteringProvider` is neither absent nor "liquid", or whose
/// `ZCUBE_ZORDER_BY` names other columns, has another layout.
pub fn file_clustering<'a>(add: &'a Add, columns: &[ClusteringColumn]) -> FileClustering<'a> {
    let provider_ok = add
        .clustering_provider
        .as_deref()
        .is_none_or(|p| p == LIQUID_PROVIDER);
    let tag = |name: &str| {
        add.tags
            .as_ref()
            .and_then(|t| t.get(name))
            .and_then(|v| v.as_deref())
    };
    let cube = match (tag(ZCUBE_ID_TAG), tag(ZCUBE_ZORDER_BY_TAG)) {
        (Some(id), Some(by)) => {
            let names: Vec<String> = columns.iter().map(|c| c.name()).collect();
            let same = serde_json::from_str::<Vec<String>>(by).is_ok_and(|by| by == names);
            Some((id, same))
        }
        _ => None,
    };
    match cube {
        _ if !provider_ok => FileClustering::OtherLayout,
        Some((_, false)) => FileClustering::OtherLayout,
        Some((id, true)) => FileClustering::InZCube(id),
        None => FileClustering::Unclustered,
    }
}

/// Mark a file an OPTIMIZE clustered into ZCube `zcube_id`.
pub fn mark_clustered(add: &mut Add, zcube_id: &str, zorder_by: &str) {
    add.clustering_provider = Some(LIQUID_PROVIDER.to_string());
    let tags = add.tags.get_or_insert_with(HashMap::new);
    tags.insert(ZCUBE_ID_TAG.to_string(), Some(zcube_id.to_string()));
    tags.insert(ZCUBE_ZORDER_BY_TAG.to_string(), Some(zorder_by.to_string()));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::protocol;
    use super::*;

    fn schema() -> StructType {
        StructType::new(vec![
            StructField::new("a", DataType::Integer, true),
            StructField::new("b", DataType::String, true),
            StructField::new(
                "s",
                DataType::Struct(StructType::new(vec![StructField::new(
                    "x",
                    DataType::Long,
                    true,
                )])),
                true,
            ),
            StructField::new("flag", DataType::Boolean, true),
        ])
    }

    #[test]
    fn cluster_by_resolves_and_refuses_as_delta_spark() {
        let s = schema();
        let cols = resolve_cluster_by(
            &s,
            &[],
            &["a".into(), "s.x".into()],
            ColumnMappingMode::None,
        )
        .unwrap();
        assert_eq!(cols[1].physical, vec!["s", "x"]);
        let d = clustering_domain(&cols).unwrap();
        assert_eq!(d.domain, "delta.clustering");
        // Delta Spark 4.4's CREATE TABLE … CLUSTER BY (a, s.x) writes this JSON
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&d.configuration).unwrap(),
            json!({"clusteringColumns": [["a"], ["s", "x"]], "domainName": "delta.clustering"})
        );
        let none = ColumnMappingMode::None;
        let e = resolve_cluster_by(&s, &["b".into()], &["a".into()], none).unwrap_err();
        assert!(e.to_string().contains("cannot both"), "{e}");
        let e = resolve_cluster_by(&s, &[], &["zz".into()], none).unwrap_err();
        assert!(e.to_string().contains("\"zz\" is not in the schema"), "{e}");
        let e = resolve_cluster_by(&s, &[], &["s".into()], none).unwrap_err();
        assert!(e.to_string().contains("no min/max"), "{e}");
        let e = resolve_cluster_by(&s, &[], &["flag".into()], none).unwrap_err();
        assert!(e.to_string().contains("no min/max"), "{e}");
        let five: Vec<String> = ["a", "b", "s.x", "a", "b"].map(String::from).to_vec();
        let e = resolve_cluster_by(&s, &[], &five, none).unwrap_err();
        assert!(e.to_string().contains("at most 4"), "{e}");
    }

    #[test]
    fn clustering_columns_come_from_the_domain() {
        let s = schema();
        let p = protocol(1, 7, &[], &["domainMetadata", "clustering"]);
        let cols = resolve_cluster_by(&s, &[], &["s.x".into()], ColumnMappingMode::None).unwrap();
        let mut domains = HashMap::new();
        domains.insert(
            CLUSTERING_DOMAIN.to_string(),
            clustering_domain(&cols).unwrap(),
        );
        let read = clustering_columns(&p, &domains, &s, ColumnMappingMode::None)
            .unwrap()
            .unwrap();
        assert_eq!(read, cols);
        assert_eq!(read[0].name(), "s.x");
        // without the feature: not clustered
        let plain = protocol(1, 7, &[], &["domainMetadata"]);
        assert_eq!(
            clustering_columns(&plain, &domains, &s, ColumnMappingMode::None).unwrap(),
            None
        );
        // a column the schema lacks
        domains.get_mut(CLUSTERING_DOMAIN).unwrap().configuration =
            r#"{"clusteringColumns":[["gone"]],"domainName":"delta.clustering"}"#.into();
        let e = clustering_columns(&p, &domains, &s, ColumnMappingMode::None).unwrap_err();
        assert!(e.to_string().contains("\"gone\""), "{e}");
    }

    #[test]
    fn protocols_gain_the_clustering_features() {
        let p = with_clustering(&protocol(1, 2, &[], &[]));
        assert_eq!(
            p,
            protocol(
                1,
                7,
                &[],
                &["appendOnly", "invariants", "domainMetadata", "clustering"]
            )
        );
        let dv = protocol(3, 7, &["deletionVectors"], &["deletionVectors"]);
        let p = with_clustering(&dv);
        assert_eq!(
            p,
            protocol(
                3,
                7,
                &["deletionVectors"],
                &["deletionVectors", "domainMetadata", "clustering"]
            )
        );
        assert_eq!(with_clustering(&p), p);
    }

    #[test]
    fn zcubes_are_recognised_by_provider_and_columns() {
        let s = schema();
        let cols = resolve_cluster_by(&s, &[], &["a".into()], ColumnMappingMode::None).unwrap();
        let mut add: Add = serde_json::from_value(json!({"path": "f.parquet"})).unwrap();
        assert_eq!(file_clustering(&add, &cols), FileClustering::Unclustered);
        mark_clustered(&mut add, "z1", &zorder_by_tag(&cols));
        assert_eq!(add.clustering_provider.as_deref(), Some("liquid"));
        assert_eq!(file_clustering(&add, &cols), FileClustering::InZCube("z1"));
        let other = resolve_cluster_by(&s, &[], &["b".into()], ColumnMappingMode::None).unwrap();
        assert_eq!(file_clustering(&add, &other), FileClustering::OtherLayout);
        // another provider: another layout, tags or not
        add.clustering_provider = Some("other".into());
        assert_eq!(file_clustering(&add, &cols), FileClustering::OtherLayout);
        add.tags = None;
        assert_eq!(file_clustering(&add, &cols), FileClustering::OtherLayout);
    }
}
