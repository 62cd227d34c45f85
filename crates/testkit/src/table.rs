//! `as=Table` list renderings (what kubectl asks for): the default Name/Age columns, plus the
//! Data column of ConfigMaps and Secrets, with `PartialObjectMetadata` row objects.

use serde_json::{Value, json};

use crate::registry::ResourceDef;

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const DATA_DESC: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";

fn has_data_column(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "configmaps"
}

pub fn render(def: &ResourceDef, meta: Value, rows: Vec<Value>) -> Value {
    let col = |name: &str, format: &str, desc: &str| json!({"name": name, "type": "string", "format": format, "description": desc, "priority": 0});
    let mut cols = vec![col("Name", "name", NAME_DESC)];
    if has_data_column(def) {
        cols.push(col("Data", "", DATA_DESC));
    }
    cols.push(col("Age", "", AGE_DESC));
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": cols, "rows": rows})
}

pub fn row(def: &ResourceDef, obj: &Value, now: &str) -> Value {
    let mut cells = vec![obj["metadata"]["name"].clone()];
    if has_data_column(def) {
        let n = obj["data"].as_object().map_or(0, |m| m.len())
            + obj["binaryData"].as_object().map_or(0, |m| m.len());
        cells.push(json!(n));
    }
    let created = obj["metadata"]["creationTimestamp"].as_str().unwrap_or("");
    cells.push(json!(human_age(seconds(now) - seconds(created))));
    json!({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}})
}

/// Seconds since the epoch of an RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SSZ`).
fn seconds(t: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| t.get(r).and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

/// kubectl's `HumanDuration`.
fn human_age(s: i64) -> String {
    let s = s.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
}
