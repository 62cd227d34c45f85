//! Field sets and the server-side apply engine: `fieldsV1` encoding, the per-manager ownership
//! bookkeeping of `metadata.managedFields`, apply merging, conflicts and removal of dropped fields.
//!
//! A field set is kept as a flat set of member paths (each path a list of `f:`/`k:`/`v:` elements)
//! rather than a tree: set algebra is then plain `BTreeSet` algebra and the tree shape only matters
//! when encoding to or decoding from `fieldsV1`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::registry::{ListType, ResourceDef};

/// One path element, already in its `fieldsV1` spelling (`f:name`, `k:{"name":"a"}`, `v:"x"`).
pub type Path = Vec<String>;

/// A set of owned field paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet(pub BTreeSet<Path>);

impl FieldSet {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether this set owns `p` itself or anything beneath it.
    pub fn touches(&self, p: &Path) -> bool {
        self.0
            .range(p.clone()..)
            .next()
            .is_some_and(|q| q.starts_with(p))
    }

    pub fn to_json(&self) -> Value {
        #[derive(Default)]
        struct Node {
            member: bool,
            children: BTreeMap<String, Node>,
        }
        let mut root = Node::default();
        for p in &self.0 {
            let mut n = &mut root;
            for e in p {
                n = n.children.entry(e.clone()).or_default();
            }
            n.member = true;
        }
        fn enc(n: &Node) -> Value {
            let mut m = Map::new();
            if n.member && !n.children.is_empty() {
                m.insert(".".into(), Value::Object(Map::new()));
            }
            for (k, c) in &n.children {
                m.insert(k.clone(), enc(c));
            }
            Value::Object(m)
        }
        enc(&root)
    }

    pub fn from_json(v: &Value) -> FieldSet {
        fn dec(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
            let Some(m) = v.as_object() else { return };
            if m.is_empty() {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
                return;
            }
            for (k, c) in m {
                if k == "." {
                    out.insert(path.clone());
                    continue;
                }
                path.push(k.clone());
                dec(c, path, out);
                path.pop();
            }
        }
        let mut out = BTreeSet::new();
        dec(v, &mut Vec::new(), &mut out);
        FieldSet(out)
    }
}

/// Renders a list-map key the way structured-merge-diff does: compact JSON, keys in schema order.
fn key_element(keys: &[String], item: &Value) -> Option<String> {
    let mut parts = Vec::new();
    for k in keys {
        let v = match item.get(k) {
            Some(v) => v.clone(),
            // Container and service ports default their protocol, and the key uses the default.
            None if k == "protocol" => Value::String("TCP".into()),
            None => return None,
        };
        parts.push(format!("{}:{}", Value::String(k.clone()), v));
    }
    Some(format!("k:{{{}}}", parts.join(",")))
}

/// The element naming `item` in a list of the given type, if the list is granular.
pub fn item_element(lt: &ListType, item: &Value) -> Option<String> {
    match lt {
        ListType::Map(keys) => key_element(keys, item),
        ListType::Set => Some(format!("v:{item}")),
        ListType::Atomic => None,
    }
}

/// Schema context while walking an object: field names only (list indices dropped).
struct Ctx<'a> {
    res: &'a ResourceDef,
    names: Vec<String>,
}

impl Ctx<'_> {
    fn list_type(&self) -> ListType {
        self.res.list_type(&self.names)
    }
    fn atomic_object(&self) -> bool {
        self.res.atomic_object(&self.names)
    }
    fn value_struct(&self) -> bool {
        self.res.value_struct(&self.names)
    }
}

/// Top-level and metadata fields no manager ever owns.
fn ignored(names: &[String]) -> bool {
    match names {
        [a] => a == "apiVersion" || a == "kind",
        [m, f] if m == "metadata" => matches!(
            f.as_str(),
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "managedFields"
                | "selfLink"
        ),
        _ => false,
    }
}

/// The set an applier owns after applying `cfg`: every leaf, atomic value and list item it names.
pub fn apply_set(res: &ResourceDef, cfg: &Value) -> FieldSet {
    let mut out = BTreeSet::new();
    let mut ctx = Ctx {
        res,
        names: Vec::new(),
    };
    walk_set(&mut ctx, cfg, &mut Vec::new(), &mut out, false);
    FieldSet(out)
}

/// Walks `v` inserting its paths; `all_members` also makes every non-struct object a member
/// (the shape an Update manager gets for fields it added).
fn walk_set(
    ctx: &mut Ctx,
    v: &Value,
    path: &mut Path,
    out: &mut BTreeSet<Path>,
    all_members: bool,
) {
    match v {
        Value::Object(m) => {
            if m.is_empty() || (!ctx.names.is_empty() && ctx.atomic_object()) {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
                return;
            }
            if all_members && !path.is_empty() && !ctx.value_struct() {
                out.insert(path.clone());
            }
            for (k, c) in m {
                if c.is_null() {
                    continue;
                }
                ctx.names.push(k.clone());
                if !ignored(&ctx.names) {
                    path.push(format!("f:{k}"));
                    walk_set(ctx, c, path, out, all_members);
                    path.pop();
                }
                ctx.names.pop();
            }
        }
        Value::Array(items) => {
            let lt = ctx.list_type();
            if matches!(lt, ListType::Atomic) {
                out.insert(path.clone());
                return;
            }
            if all_members && !ctx.value_struct() {
                out.insert(path.clone());
            }
            let atomic_items = ctx.res.atomic_items(&ctx.names);
            for it in items {
                let Some(e) = item_element(&lt, it) else {
                    continue;
                };
                path.push(e);
                out.insert(path.clone());
                if let (ListType::Map(_), Value::Object(_), false) = (&lt, it, atomic_items) {
                    walk_item_fields(ctx, it, path, out, all_members);
                }
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

fn walk_item_fields(
    ctx: &mut Ctx,
    it: &Value,
    path: &mut Path,
    out: &mut BTreeSet<Path>,
    all: bool,
) {
    if let Value::Object(m) = it {
        for (k, c) in m.iter().filter(|(_, c)| !c.is_null()) {
            ctx.names.push(k.clone());
            path.push(format!("f:{k}"));
            walk_set(ctx, c, path, out, all);
            path.pop();
            ctx.names.pop();
        }
    }
}

/// Result of comparing two versions of an object for an Update manager.
#[derive(Default)]
pub struct Diff {
    /// Paths added or whose value changed.
    pub changed: BTreeSet<Path>,
    /// Paths present before and gone now.
    pub removed: BTreeSet<Path>,
}

pub fn diff(res: &ResourceDef, old: &Value, new: &Value) -> Diff {
    let mut d = Diff::default();
    let mut ctx = Ctx {
        res,
        names: Vec::new(),
    };
    diff_walk(&mut ctx, Some(old), new, &mut Vec::new(), &mut d);
    d
}

fn diff_walk(ctx: &mut Ctx, old: Option<&Value>, new: &Value, path: &mut Path, d: &mut Diff) {
    let Some(old) = old else {
        walk_set(ctx, new, path, &mut d.changed, true);
        return;
    };
    match (old, new) {
        (Value::Object(om), Value::Object(nm))
            if !nm.is_empty() && (ctx.names.is_empty() || !ctx.atomic_object()) =>
        {
            for (k, nv) in nm {
                if nv.is_null() {
                    continue;
                }
                ctx.names.push(k.clone());
                if !ignored(&ctx.names) {
                    path.push(format!("f:{k}"));
                    let was_null = om.get(k).is_some_and(Value::is_null);
                    let had = d.changed.contains(path);
                    diff_walk(ctx, om.get(k).filter(|o| !o.is_null()), nv, path, d);
                    // A field present as null before existed already (Go non-omitempty field).
                    if was_null
                        && !had
                        && (nv.is_array() || nv.is_object())
                        && !nv.as_array().is_some_and(Vec::is_empty)
                        && !nv.as_object().is_some_and(Map::is_empty)
                    {
                        d.changed.remove(path);
                    }
                    path.pop();
                }
                ctx.names.pop();
            }
            for (k, ov) in om {
                if nm.get(k).is_some_and(|n| !n.is_null()) || ov.is_null() {
                    continue;
                }
                ctx.names.push(k.clone());
                if !ignored(&ctx.names) {
                    path.push(format!("f:{k}"));
                    walk_set(ctx, ov, path, &mut d.removed, true);
                    d.removed.insert(path.clone());
                    path.pop();
                }
                ctx.names.pop();
            }
        }
        (Value::Array(oa), Value::Array(na)) if !matches!(ctx.list_type(), ListType::Atomic) => {
            let lt = ctx.list_type();
            let mut old_items: BTreeMap<String, &Value> = BTreeMap::new();
            for it in oa {
                if let Some(e) = item_element(&lt, it) {
                    old_items.insert(e, it);
                }
            }
            let mut seen = BTreeSet::new();
            for it in na {
                let Some(e) = item_element(&lt, it) else {
                    continue;
                };
                seen.insert(e.clone());
                path.push(e.clone());
                match old_items.get(&e) {
                    None => {
                        d.changed.insert(path.clone());
                        if matches!(lt, ListType::Map(_)) && !ctx.res.atomic_items(&ctx.names) {
                            walk_item_fields(ctx, it, path, &mut d.changed, true);
                        }
                    }
                    Some(o) => {
                        if ctx.res.atomic_items(&ctx.names) {
                            if *o != it {
                                d.changed.insert(path.clone());
                            }
                        } else if let ListType::Map(_) = lt {
                            diff_walk(ctx, Some(o), it, path, d);
                        }
                    }
                }
                path.pop();
            }
            for (e, it) in old_items {
                if seen.contains(&e) {
                    continue;
                }
                path.push(e);
                d.removed.insert(path.clone());
                if matches!(lt, ListType::Map(_)) && !ctx.res.atomic_items(&ctx.names) {
                    walk_item_fields(ctx, it, path, &mut d.removed, true);
                }
                path.pop();
            }
        }
        (o, n) => {
            if o != n && !path.is_empty() {
                // A value that changed shape or content: the whole subtree is the writer's now.
                if o.is_object() != n.is_object() || o.is_array() != n.is_array() {
                    walk_set(ctx, n, path, &mut d.changed, true);
                }
                d.changed.insert(path.clone());
            }
        }
    }
}

/// Looks up the value at a field path, if present.
pub fn get_path<'a>(v: &'a Value, p: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for e in p {
        cur = step(cur, e)?;
    }
    Some(cur)
}

fn item_matches(e: &str, it: &Value) -> bool {
    if let Some(k) = e.strip_prefix("k:") {
        let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(k) else {
            return false;
        };
        keys.iter().all(|(kk, kv)| match it.get(kk) {
            Some(x) => x == kv,
            None => kk == "protocol" && kv == "TCP",
        })
    } else if let Some(v) = e.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|x| &x == it)
    } else {
        false
    }
}

fn step<'a>(cur: &'a Value, e: &str) -> Option<&'a Value> {
    if let Some(f) = e.strip_prefix("f:") {
        cur.get(f)
    } else {
        cur.as_array()?.iter().find(|it| item_matches(e, it))
    }
}

/// Removes the value at a field path; missing paths are ignored.
pub fn remove_path(v: &mut Value, p: &[String]) {
    let Some((last, parent)) = p.split_last() else {
        return;
    };
    let mut cur = v;
    for e in parent {
        let next = if let Some(f) = e.strip_prefix("f:") {
            cur.get_mut(f)
        } else {
            cur.as_array_mut()
                .and_then(|a| a.iter_mut().find(|it| item_matches(e, it)))
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(a) = cur.as_array_mut() {
        a.retain(|it| !item_matches(last, it));
    }
}

/// Removes objects that the removal of `p` left empty (the apiserver does not keep `labels: {}`).
fn prune_empty_parents(v: &mut Value, p: &[String]) {
    for n in (1..p.len()).rev() {
        let parent = &p[..n];
        let empty = get_path(v, parent).is_some_and(|x| {
            x.as_object().is_some_and(Map::is_empty) || x.as_array().is_some_and(Vec::is_empty)
        });
        if empty && parent.last().is_some_and(|e| e.starts_with("f:")) {
            remove_path(v, parent);
        } else {
            return;
        }
    }
}

/// Human spelling of a path in conflict messages: `.spec.ports[name="http"].port`.
pub fn display_path(p: &[String]) -> String {
    let mut s = String::new();
    for e in p {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(k) {
                let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!("[{}]", parts.join(",")));
            }
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

/// Merges an applied configuration into the live object: maps field by field, list-maps by key,
/// sets by value, everything else replaced.
pub fn merge_apply(res: &ResourceDef, live: &mut Value, cfg: &Value) {
    let mut ctx = Ctx {
        res,
        names: Vec::new(),
    };
    merge_walk(&mut ctx, live, cfg);
}

fn merge_walk(ctx: &mut Ctx, live: &mut Value, cfg: &Value) {
    match (live, cfg) {
        (Value::Object(lm), Value::Object(cm)) if ctx.names.is_empty() || !ctx.atomic_object() => {
            for (k, cv) in cm {
                ctx.names.push(k.clone());
                match lm.get_mut(k) {
                    Some(lv) => merge_walk(ctx, lv, cv),
                    None => {
                        lm.insert(k.clone(), cv.clone());
                    }
                }
                ctx.names.pop();
            }
        }
        (Value::Array(la), Value::Array(ca)) if !matches!(ctx.list_type(), ListType::Atomic) => {
            let lt = ctx.list_type();
            let applied: Vec<(String, &Value)> = ca
                .iter()
                .filter_map(|ci| item_element(&lt, ci).map(|e| (e, ci)))
                .collect();
            let merged = merge_list_items(std::mem::take(la), &applied, |live, ci| {
                if let ListType::Map(_) = lt {
                    merge_walk(ctx, live, ci);
                }
            });
            *la = merged;
        }
        (l, c) => *l = c.clone(),
    }
}

/// The items of a granular list after an apply, in the order structured-merge-diff gives them
/// (checked against kube-apiserver): the applied items in the applied order, each merged into
/// its live counterpart by `merge`, with the live items the apply does not name kept where
/// they stand between them. E.g. live `[a, c, b, e]` applied as `[b, a]` gives `[c, b, e, a]`.
fn merge_list_items(
    live: Vec<Value>,
    applied: &[(String, &Value)],
    mut merge: impl FnMut(&mut Value, &Value),
) -> Vec<Value> {
    let live_keys: Vec<Option<String>> = live
        .iter()
        .map(|li| {
            applied
                .iter()
                .find(|(e, _)| item_matches(e, li))
                .map(|(e, _)| e.clone())
        })
        .collect();
    let in_live = |e: &String| live_keys.iter().any(|k| k.as_ref() == Some(e));
    // The applied items that are live too, in the applied order: the next one is the live item
    // the walk waits for before taking live items the apply names.
    let mut shared = applied
        .iter()
        .filter(|(e, _)| in_live(e))
        .map(|(e, _)| e.clone())
        .collect::<std::collections::VecDeque<_>>();
    let mut next_shared = shared.pop_front();
    let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(live.len() + applied.len());
    let merged_item =
        |key: &String, ci: &Value, merge: &mut dyn FnMut(&mut Value, &Value)| match live_keys
            .iter()
            .position(|k| k.as_ref() == Some(key))
        {
            Some(i) => {
                let mut item = live[i].clone();
                merge(&mut item, ci);
                item
            }
            None => ci.clone(),
        };
    let (mut li, mut ri) = (0, 0);
    while li < live.len() || ri < applied.len() {
        if li < live.len() && ri < applied.len() {
            if live_keys[li].as_ref() == Some(&applied[ri].0) {
                let key = &applied[ri].0;
                out.push(merged_item(key, applied[ri].1, &mut merge));
                taken.insert(key.clone());
                if next_shared.as_ref() == Some(key) {
                    next_shared = shared.pop_front();
                }
                li += 1;
                ri += 1;
                continue;
            }
            if live_keys[li].is_some() && next_shared.is_some() && live_keys[li] != next_shared {
                li += 1;
                continue;
            }
        }
        if li < live.len() {
            match &live_keys[li] {
                None => {
                    out.push(live[li].clone());
                    li += 1;
                    continue;
                }
                Some(key) if taken.contains(key) => {
                    li += 1;
                    continue;
                }
                Some(_) => {}
            }
        }
        if ri < applied.len() {
            let (key, ci) = &applied[ri];
            out.push(merged_item(key, ci, &mut merge));
            taken.insert(key.clone());
            if next_shared.as_ref() == Some(key) {
                next_shared = shared.pop_front();
            }
            ri += 1;
        }
    }
    out
}

/// Finds duplicate keys in granular lists of an apply configuration (a 500 on a real server).
pub fn find_duplicate(res: &ResourceDef, cfg: &Value) -> Option<(String, String)> {
    fn walk(ctx: &mut Ctx, v: &Value, path: &mut Path) -> Option<(String, String)> {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    ctx.names.push(k.clone());
                    path.push(format!("f:{k}"));
                    let r = walk(ctx, c, path);
                    path.pop();
                    ctx.names.pop();
                    if r.is_some() {
                        return r;
                    }
                }
                None
            }
            Value::Array(items) => {
                let lt = ctx.list_type();
                let mut seen = BTreeSet::new();
                for it in items {
                    if let Some(e) = item_element(&lt, it) {
                        if !seen.insert(e.clone()) {
                            let key = match (&lt, it) {
                                (ListType::Map(keys), _) => keys
                                    .iter()
                                    .map(|k| {
                                        format!("{k}={}", it.get(k).cloned().unwrap_or(Value::Null))
                                    })
                                    .collect::<Vec<_>>()
                                    .join(","),
                                _ => it.to_string(),
                            };
                            return Some((display_path(path), key));
                        }
                        if let ListType::Map(_) = lt {
                            path.push(e);
                            let r = walk(ctx, it, path);
                            path.pop();
                            if r.is_some() {
                                return r;
                            }
                        }
                    }
                }
                None
            }
            _ => None,
        }
    }
    let mut ctx = Ctx {
        res,
        names: Vec::new(),
    };
    walk(&mut ctx, cfg, &mut Vec::new())
}

/// One entry of `metadata.managedFields`.
#[derive(Clone, Debug)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub set: FieldSet,
}

impl Entry {
    fn same_owner(&self, manager: &str, op: &str, sub: Option<&str>) -> bool {
        self.manager == manager && self.operation == op && self.subresource.as_deref() == sub
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), Value::String(self.manager.clone()));
        m.insert("operation".into(), Value::String(self.operation.clone()));
        m.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        // A client may write an entry without a time; the apiserver keeps it so.
        if !self.time.is_empty() {
            m.insert("time".into(), Value::String(self.time.clone()));
        }
        m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        m.insert("fieldsV1".into(), self.set.to_json());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), Value::String(s.clone()));
        }
        Value::Object(m)
    }
}

pub fn read_entries(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let s = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    list.iter()
        .filter(|e| e.get("manager").is_some())
        .map(|e| Entry {
            manager: s(e, "manager"),
            operation: s(e, "operation"),
            api_version: s(e, "apiVersion"),
            time: s(e, "time"),
            subresource: e
                .get("subresource")
                .and_then(Value::as_str)
                .map(str::to_string),
            set: e
                .get("fieldsV1")
                .map(FieldSet::from_json)
                .unwrap_or_default(),
        })
        .collect()
}

pub fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    // The apiserver keeps entries sorted: operation, time (seconds), manager, apiVersion, subresource.
    let mut sorted: Vec<&Entry> = entries.iter().filter(|e| !e.set.is_empty()).collect();
    sorted.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let list: Vec<Value> = sorted.into_iter().map(Entry::to_json).collect();
    if list.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

/// Records an Update-style write by `manager`: it gains what changed, everyone loses what changed
/// or disappeared.
pub fn record_update(
    res: &ResourceDef,
    entries: &mut Vec<Entry>,
    old: &Value,
    new: &Value,
    manager: &str,
    sub: Option<&str>,
    now: &str,
) {
    let d = diff(res, old, new);
    for e in entries.iter_mut() {
        let before = e.set.clone();
        e.set
            .0
            .retain(|p| !d.changed.contains(p) && !d.removed.contains(p));
        if e.set != before && e.same_owner(manager, "Update", sub) {
            e.time = now.to_string();
        }
    }
    if d.changed.is_empty() {
        entries.retain(|e| !e.set.is_empty());
        return;
    }
    match entries
        .iter_mut()
        .find(|e| e.same_owner(manager, "Update", sub))
    {
        Some(e) => {
            e.set.0.extend(d.changed);
            e.time = now.to_string();
            e.api_version = res.api_version();
        }
        None => entries.push(Entry {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version: res.api_version(),
            time: now.to_string(),
            subresource: sub.map(str::to_string),
            set: FieldSet(d.changed),
        }),
    }
    entries.retain(|e| !e.set.is_empty());
}

/// A field another manager owns with a different value than the apply asks for.
#[derive(Clone, Debug)]
pub struct Conflict {
    pub manager: String,
    pub api_version: Option<String>,
    pub path: String,
}

/// Applies `cfg` as `manager` on `live` (already stripped to what the endpoint may change).
/// Returns the new object or the conflicts when `force` is false.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    res: &ResourceDef,
    live: &Value,
    cfg: &Value,
    manager: &str,
    sub: Option<&str>,
    force: bool,
    now: &str,
) -> Result<Value, Vec<Conflict>> {
    let mut entries = read_entries(live);
    let new_set = apply_set(res, cfg);
    let mut merged = live.clone();
    merge_apply(res, &mut merged, cfg);

    let mut conflicts = Vec::new();
    for e in entries.iter() {
        if e.same_owner(manager, "Apply", sub) {
            continue;
        }
        for p in e.set.0.intersection(&new_set.0) {
            let is_item = p.last().is_some_and(|l| l.starts_with("k:"));
            if is_item {
                continue;
            }
            let lv = get_path(live, p);
            let nv = get_path(&merged, p);
            if lv.is_some() && lv != nv {
                conflicts.push((e.clone(), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts
            .into_iter()
            .map(|(e, p)| Conflict {
                api_version: (e.operation == "Update").then(|| e.api_version.clone()),
                manager: e.manager,
                path: display_path(&p),
            })
            .collect());
    }
    for (ce, p) in &conflicts {
        for e in entries.iter_mut() {
            if e.same_owner(&ce.manager, &ce.operation, ce.subresource.as_deref()) {
                e.set.0.remove(p);
            }
        }
    }

    let old_set = entries
        .iter()
        .find(|e| e.same_owner(manager, "Apply", sub))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    // Fields this manager stops applying go away unless someone else still owns them.
    let dropped: Vec<&Path> = old_set.0.difference(&new_set.0).collect();
    for p in dropped.iter() {
        if new_set.touches(p) {
            continue;
        }
        let others = entries
            .iter()
            .any(|e| !e.same_owner(manager, "Apply", sub) && e.set.touches(p));
        if !others {
            remove_path(&mut merged, p);
            prune_empty_parents(&mut merged, p);
        }
    }

    match entries
        .iter_mut()
        .find(|e| e.same_owner(manager, "Apply", sub))
    {
        Some(e) => {
            if e.set != new_set {
                e.set = new_set;
                e.time = now.to_string();
            }
            if e.api_version != res.api_version() {
                e.api_version = res.api_version();
                e.time = now.to_string();
            }
        }
        None => entries.push(Entry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: res.api_version(),
            time: now.to_string(),
            subresource: sub.map(str::to_string),
            set: new_set,
        }),
    }
    write_entries(&mut merged, &entries);
    Ok(merged)
}

/// The 409 message for apply conflicts, in the apiserver's wording.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    let who = |c: &Conflict| match &c.api_version {
        Some(v) => format!("\"{}\" using {}", c.manager, v),
        None => format!("\"{}\"", c.manager),
    };
    let n = conflicts.len();
    if n == 1 {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            who(&conflicts[0]),
            conflicts[0].path
        );
    }
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for c in conflicts {
        let w = who(c);
        match groups.iter_mut().find(|(g, _)| *g == w) {
            Some((_, ps)) => ps.push(c.path.clone()),
            None => groups.push((w, vec![c.path.clone()])),
        }
    }
    let mut s = format!("Apply failed with {n} conflicts:");
    for (w, ps) in groups {
        if ps.len() == 1 {
            s.push_str(&format!(" conflict with {w}: {}", ps[0]));
        } else {
            s.push_str(&format!(" conflicts with {w}:"));
            for p in ps {
                s.push_str(&format!("\n- {p}"));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names(items: &[Value]) -> Vec<&str> {
        items.iter().map(|i| i["name"].as_str().unwrap()).collect()
    }

    fn order(live: &[&str], applied: &[&str]) -> Vec<String> {
        let live: Vec<Value> = live.iter().map(|n| json!({"name": n})).collect();
        let cfg: Vec<Value> = applied
            .iter()
            .map(|n| json!({"name": n, "new": true}))
            .collect();
        let applied: Vec<(String, &Value)> = cfg
            .iter()
            .map(|c| (format!("k:{{\"name\":{}}}", c["name"]), c))
            .collect();
        let out = merge_list_items(live, &applied, |l, c| l["new"] = c["new"].clone());
        for item in &out {
            let applied_item = applied.iter().any(|(_, c)| c["name"] == item["name"]);
            assert_eq!(item.get("new").is_some(), applied_item, "{item}");
        }
        names(&out).into_iter().map(str::to_owned).collect()
    }

    /// The orders kube-apiserver v1.36.2 gave for a Deployment's volumeMounts created by one
    /// manager and applied by another.
    #[test]
    fn applied_list_items_take_the_applied_order_around_the_live_ones() {
        assert_eq!(
            order(&["a", "b", "c"], &["d", "a", "b"]),
            ["d", "a", "b", "c"]
        );
        assert_eq!(
            order(&["a", "c", "b", "e"], &["b", "a"]),
            ["c", "b", "e", "a"]
        );
        assert_eq!(
            order(&["a", "b", "c", "e"], &["b", "a", "c", "e"]),
            ["b", "a", "c", "e"]
        );
        assert_eq!(order(&[], &["a", "b"]), ["a", "b"]);
        assert_eq!(order(&["a", "b"], &[]), ["a", "b"]);
    }
}
