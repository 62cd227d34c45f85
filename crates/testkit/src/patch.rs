//! The three non-apply patch types: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the
//! strategic merge patch of built-in kinds (list merging by the same keys SSA uses, plus the
//! `$patch`, `$setElementOrder`, `$deleteFromPrimitiveList` and `$retainKeys` directives).

use serde_json::{Map, Value};

use crate::registry::{ListType, ResourceDef};

pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Applies an RFC 6902 patch; any failure maps to the apiserver's generic 422.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let p: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| e.to_string())?;
    json_patch::patch(target, &p).map_err(|e| e.to_string())
}

/// Strategic merge patch. Errors are the apiserver's 500 messages for unknown directives.
pub fn strategic_merge(res: &ResourceDef, target: &mut Value, patch: &Value) -> Result<(), String> {
    let mut names = Vec::new();
    smp_map(res, &mut names, target, patch)
}

fn list_keys(res: &ResourceDef, names: &[String]) -> Option<String> {
    // SMP uses a single merge key; the first list-map key is that key for every built-in list.
    match res.list_type(names) {
        ListType::Map(keys) => keys.first().cloned(),
        _ => None,
    }
}

fn is_primitive_merge_list(names: &[String]) -> bool {
    // `metadata.finalizers` has patchStrategy=merge on primitives.
    names.len() == 2 && names[0] == "metadata" && names[1] == "finalizers"
}

fn smp_map(
    res: &ResourceDef,
    names: &mut Vec<String>,
    target: &mut Value,
    patch: &Value,
) -> Result<(), String> {
    let Some(pm) = patch.as_object() else {
        *target = patch.clone();
        return Ok(());
    };
    if let Some(d) = pm.get("$patch").and_then(Value::as_str) {
        match d {
            "replace" => {
                let mut p = pm.clone();
                p.remove("$patch");
                *target = Value::Object(p);
                return Ok(());
            }
            "delete" => {
                *target = Value::Object(Map::new());
                return Ok(());
            }
            "merge" => {}
            other => return Err(unknown_directive(other, pm)),
        }
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(tm) = target.as_object_mut() else {
        return Ok(());
    };
    if let Some(keep) = pm.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        tm.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, pv) in pm {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(del)) = (tm.get_mut(field), pv.as_array()) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        names.push(k.clone());
        if pv.is_null() {
            tm.remove(k);
        } else if let Value::Array(pa) = pv {
            let order = pm
                .get(&format!("$setElementOrder/{k}"))
                .and_then(Value::as_array);
            let cur = tm.remove(k).unwrap_or(Value::Array(Vec::new()));
            let merged = smp_list(res, names, cur, pa, order)?;
            tm.insert(k.clone(), merged);
        } else if pv.is_object() {
            let entry = tm.entry(k.clone()).or_insert(Value::Null);
            smp_map(res, names, entry, pv)?;
        } else {
            tm.insert(k.clone(), pv.clone());
        }
        names.pop();
    }
    Ok(())
}

fn unknown_directive(d: &str, m: &Map<String, Value>) -> String {
    let mut parts: Vec<String> = m
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}:{s}"),
            other => format!("{k}:{other}"),
        })
        .collect();
    parts.sort();
    format!("unknown patch type: {d} in map: map[{}]", parts.join(" "))
}

fn smp_list(
    res: &ResourceDef,
    names: &mut Vec<String>,
    cur: Value,
    patch: &[Value],
    order: Option<&Vec<Value>>,
) -> Result<Value, String> {
    let mut cur = match cur {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    if is_primitive_merge_list(names) {
        // The patch's items come first, then the original items it did not repeat.
        let mut out: Vec<Value> = patch.to_vec();
        for c in cur {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        return Ok(Value::Array(out));
    }
    let Some(key) = list_keys(res, names) else {
        return Ok(Value::Array(patch.to_vec()));
    };
    // `{"$patch": "replace"}` as an item replaces the whole list with the other items.
    if patch.iter().any(|p| {
        p.get("$patch").and_then(Value::as_str) == Some("replace") && p.get(&key).is_none()
    }) {
        return Ok(Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .cloned()
                .collect(),
        ));
    }
    for p in patch {
        let Some(kv) = p.get(&key) else {
            continue;
        };
        let pos = cur.iter().position(|c| c.get(&key) == Some(kv));
        match p.get("$patch").and_then(Value::as_str) {
            Some("delete") => {
                if let Some(i) = pos {
                    cur.remove(i);
                }
                continue;
            }
            Some("replace") => {
                let mut item = p.clone();
                if let Some(m) = item.as_object_mut() {
                    m.remove("$patch");
                }
                match pos {
                    Some(i) => cur[i] = item,
                    None => cur.push(item),
                }
                continue;
            }
            Some("merge") | None => {}
            Some(other) => {
                return Err(unknown_directive(
                    other,
                    p.as_object().unwrap_or(&Map::new()),
                ));
            }
        }
        match pos {
            Some(i) => smp_map(res, names, &mut cur[i], p)?,
            None => {
                let mut item = Value::Object(Map::new());
                smp_map(res, names, &mut item, p)?;
                cur.push(item);
            }
        }
    }
    if let Some(order) = order {
        let idx = |v: &Value| {
            order
                .iter()
                .position(|o| o.get(&key).is_some() && o.get(&key) == v.get(&key))
        };
        // Items named in the order come in that order; others keep their relative place at the end.
        let mut with: Vec<(usize, Value)> = Vec::new();
        let mut without = Vec::new();
        for it in cur {
            match idx(&it) {
                Some(i) => with.push((i, it)),
                None => without.push(it),
            }
        }
        with.sort_by_key(|(i, _)| *i);
        cur = with.into_iter().map(|(_, v)| v).chain(without).collect();
    }
    Ok(Value::Array(cur))
}
