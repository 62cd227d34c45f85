//! Version conversion between the two Event APIs: core/v1 Events and events.k8s.io/v1 Events are
//! one stored object (kept in core/v1 shape) seen through either API, with the apiserver's field
//! mapping. `managedFields` are stored as written, in the writer's version.

use serde_json::{Map, Value, json};

use crate::registry::ResourceDef;

fn is_events_v1(def: &ResourceDef) -> bool {
    def.group == "events.k8s.io" && def.plural == "events"
}

fn move_field(from: &mut Map<String, Value>, to: &mut Map<String, Value>, a: &str, b: &str) {
    if let Some(v) = from.remove(a) {
        to.insert(b.to_string(), v);
    }
}

/// Stored (core/v1) shape to what `def`'s API returns.
pub fn to_view(def: &ResourceDef, v: Value) -> Value {
    if !is_events_v1(def) {
        return v;
    }
    let Value::Object(mut core) = v else { return v };
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("kind".into(), json!("Event"));
    move_field(&mut core, &mut out, "metadata", "metadata");
    out.insert(
        "eventTime".into(),
        core.remove("eventTime").unwrap_or(Value::Null),
    );
    move_field(&mut core, &mut out, "series", "series");
    for (a, b) in [
        ("reportingComponent", "reportingController"),
        ("reportingInstance", "reportingInstance"),
    ] {
        match core.remove(a) {
            Some(Value::String(s)) if s.is_empty() => {}
            Some(x) => {
                out.insert(b.into(), x);
            }
            None => {}
        }
    }
    move_field(&mut core, &mut out, "action", "action");
    move_field(&mut core, &mut out, "reason", "reason");
    move_field(&mut core, &mut out, "involvedObject", "regarding");
    move_field(&mut core, &mut out, "related", "related");
    move_field(&mut core, &mut out, "message", "note");
    move_field(&mut core, &mut out, "type", "type");
    out.insert(
        "deprecatedSource".into(),
        core.remove("source").unwrap_or(json!({})),
    );
    out.insert(
        "deprecatedFirstTimestamp".into(),
        core.remove("firstTimestamp").unwrap_or(Value::Null),
    );
    out.insert(
        "deprecatedLastTimestamp".into(),
        core.remove("lastTimestamp").unwrap_or(Value::Null),
    );
    match core.remove("count") {
        Some(Value::Number(n)) if n.as_i64() == Some(0) => {}
        Some(c) => {
            out.insert("deprecatedCount".into(), c);
        }
        None => {}
    }
    Value::Object(out)
}

/// What `def`'s API received to the stored (core/v1) shape.
pub fn to_storage(def: &ResourceDef, v: Value) -> Value {
    if !is_events_v1(def) {
        return v;
    }
    let Value::Object(mut ev) = v else { return v };
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    move_field(&mut ev, &mut out, "metadata", "metadata");
    move_field(&mut ev, &mut out, "regarding", "involvedObject");
    move_field(&mut ev, &mut out, "reason", "reason");
    move_field(&mut ev, &mut out, "note", "message");
    out.insert(
        "source".into(),
        ev.remove("deprecatedSource")
            .filter(|s| !s.is_null())
            .unwrap_or(json!({})),
    );
    out.insert(
        "firstTimestamp".into(),
        ev.remove("deprecatedFirstTimestamp").unwrap_or(Value::Null),
    );
    out.insert(
        "lastTimestamp".into(),
        ev.remove("deprecatedLastTimestamp").unwrap_or(Value::Null),
    );
    move_field(&mut ev, &mut out, "deprecatedCount", "count");
    move_field(&mut ev, &mut out, "type", "type");
    out.insert(
        "eventTime".into(),
        ev.remove("eventTime").unwrap_or(Value::Null),
    );
    move_field(&mut ev, &mut out, "series", "series");
    move_field(&mut ev, &mut out, "action", "action");
    move_field(&mut ev, &mut out, "related", "related");
    out.insert(
        "reportingComponent".into(),
        ev.remove("reportingController").unwrap_or(json!("")),
    );
    out.insert(
        "reportingInstance".into(),
        ev.remove("reportingInstance").unwrap_or(json!("")),
    );
    Value::Object(out)
}
