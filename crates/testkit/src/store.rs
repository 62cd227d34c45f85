//! The object store: every object as JSON keyed by (group, plural, namespace, name), the single
//! global resourceVersion counter, the bounded event history watches replay from, and the garbage
//! collector / namespace finalizer that run synchronously after each write.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::fields;
use crate::registry::{Registry, ResourceDef};
use crate::util::{format_time, make_uid};

/// Store key: (group, plural, namespace or "", name).
pub type Key = (String, String, String, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as stored in the history and fanned out to watchers.
#[derive(Clone, Debug)]
pub struct Event {
    pub rv: u64,
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub kind: EventType,
    /// The object after the change (for DELETED: the last state, at the deletion's RV).
    pub object: Value,
    /// The object before the change (selector transitions and historical lists need it).
    pub old: Option<Value>,
}

pub struct State {
    pub rv: u64,
    pub objects: BTreeMap<Key, Value>,
    pub history: VecDeque<Arc<Event>>,
    /// Events with an RV at or below this are gone: watching from before it is `410 Expired`.
    pub compacted: u64,
    pub history_limit: usize,
    pub registry: Registry,
    /// RV at which each (group, plural) started being served (its "watch cache" start).
    pub served_since: BTreeMap<(String, String), u64>,
    pub uid_seed: u64,
    pub uid_counter: u64,
    pub tx: broadcast::Sender<Arc<Event>>,
    /// Events broadcast so far (what a watch that subscribed at some count still has to see).
    pub emitted: u64,
    pub name_counter: u64,
    /// A fixed wall-clock time for every timestamp (deterministic replays), or the real clock.
    pub frozen_time: Option<String>,
    /// CRDs created but not yet marked Established (done before the next request).
    pub pending_crds: Vec<Key>,
    /// Something the garbage collector cares about changed since it last ran (a removal, an
    /// object with owners or a deletionTimestamp): without it, writes skip the O(n) scan.
    gc_dirty: bool,
}

pub fn now() -> String {
    format_time(SystemTime::now())
}

impl State {
    pub fn new(seed: u64, history_limit: usize, tx: broadcast::Sender<Arc<Event>>) -> State {
        State {
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            compacted: 0,
            history_limit,
            registry: Registry::builtin(),
            served_since: BTreeMap::new(),
            uid_seed: seed,
            uid_counter: 0,
            tx,
            emitted: 0,
            name_counter: 0,
            frozen_time: None,
            pending_crds: Vec::new(),
            gc_dirty: false,
        }
    }

    /// The time written into timestamps and managedFields.
    pub fn now(&self) -> String {
        self.frozen_time.clone().unwrap_or_else(now)
    }

    pub fn next_uid(&mut self) -> String {
        self.uid_counter += 1;
        make_uid(self.uid_seed, self.uid_counter)
    }

    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    pub fn key(def: &ResourceDef, ns: &str, name: &str) -> Key {
        (
            def.storage_group().to_string(),
            def.plural.clone(),
            if def.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name.to_string(),
        )
    }

    /// Records and broadcasts an event; the object must already carry `rv`.
    pub fn emit(&mut self, key: &Key, kind: EventType, object: Value, old: Option<Value>, rv: u64) {
        let ev = Arc::new(Event {
            rv,
            group: key.0.clone(),
            plural: key.1.clone(),
            namespace: key.2.clone(),
            kind,
            object,
            old,
        });
        self.history.push_back(ev.clone());
        while self.history.len() > self.history_limit {
            if let Some(e) = self.history.pop_front() {
                self.compacted = e.rv;
            }
        }
        self.emitted += 1;
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(ev);
    }

    /// Drops the whole history, as an etcd compaction would: older RVs become `410 Expired`.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    /// Stores a new version of an object at a fresh RV and emits ADDED/MODIFIED.
    pub fn put(&mut self, key: Key, mut obj: Value) -> Value {
        let rv = self.next_rv();
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        let meta = &obj["metadata"];
        if meta.get("deletionTimestamp").is_some() || meta.get("ownerReferences").is_some() {
            self.gc_dirty = true;
        }
        let old = self.objects.insert(key.clone(), obj.clone());
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(&key, kind, obj.clone(), old, rv);
        obj
    }

    /// Removes an object at a fresh RV and emits DELETED; returns the final state.
    pub fn remove(&mut self, key: &Key) -> Option<Value> {
        let old = self.objects.remove(key)?;
        self.gc_dirty = true;
        let rv = self.next_rv();
        let mut last = old.clone();
        last["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.emit(key, EventType::Deleted, last.clone(), Some(old), rv);
        if key.0 == "apiextensions.k8s.io" && key.1 == "customresourcedefinitions" {
            self.unregister_crd(&last);
        }
        Some(last)
    }

    pub fn register_crd(&mut self, crd: &Value) {
        for d in Registry::defs_from_crd(crd) {
            self.served_since
                .entry((d.group.clone(), d.plural.clone()))
                .or_insert(self.rv);
            self.registry.insert(d);
        }
    }

    fn unregister_crd(&mut self, crd: &Value) {
        let group = crd["spec"]["group"].as_str().unwrap_or("").to_string();
        let plural = crd["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or("")
            .to_string();
        self.registry.remove_group_plural(&group, &plural);
        self.served_since.remove(&(group.clone(), plural.clone()));
        self.objects.retain(|k, _| !(k.0 == group && k.1 == plural));
    }

    /// Current objects of one resource as they were at `rv`, rebuilt by undoing later history.
    /// `None` when the history no longer reaches back that far.
    pub fn snapshot_at(&self, group: &str, plural: &str, rv: u64) -> Option<BTreeMap<Key, Value>> {
        if rv < self.compacted {
            return None;
        }
        let mut out: BTreeMap<Key, Value> = self
            .objects
            .iter()
            .filter(|(k, _)| k.0 == group && k.1 == plural)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for ev in self.history.iter().rev() {
            if ev.rv <= rv {
                break;
            }
            if ev.group != group || ev.plural != plural {
                continue;
            }
            let name = ev.object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let key = (
                ev.group.clone(),
                ev.plural.clone(),
                ev.namespace.clone(),
                name,
            );
            match (&ev.kind, &ev.old) {
                (EventType::Added, _) => {
                    out.remove(&key);
                }
                (_, Some(old)) => {
                    out.insert(key, old.clone());
                }
                (_, None) => {}
            }
        }
        Some(out)
    }

    /// Garbage collection and namespace finalization until nothing changes: owner-reference
    /// cascades (background, foreground, orphan), dangling dependents, objects whose finalizers
    /// are all gone, and terminating namespaces once empty.
    pub fn collect_garbage(&mut self) {
        if !self.gc_dirty {
            return;
        }
        for _ in 0..10_000 {
            if !self.gc_step() {
                break;
            }
        }
        self.gc_dirty = false;
    }

    fn gc_step(&mut self) -> bool {
        let uids: BTreeMap<String, Key> = self
            .objects
            .iter()
            .filter_map(|(k, v)| {
                v["metadata"]["uid"]
                    .as_str()
                    .map(|u| (u.to_string(), k.clone()))
            })
            .collect();
        let dependents_of = |uid: &str, objects: &BTreeMap<Key, Value>| -> Vec<Key> {
            objects
                .iter()
                .filter(|(_, v)| {
                    v["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"].as_str() == Some(uid)))
                })
                .map(|(k, _)| k.clone())
                .collect()
        };
        let keys: Vec<Key> = self.objects.keys().cloned().collect();
        for key in keys {
            let Some(obj) = self.objects.get(&key).cloned() else {
                continue;
            };
            let meta = &obj["metadata"];
            let uid = meta["uid"].as_str().unwrap_or("").to_string();
            let deleting = meta.get("deletionTimestamp").is_some_and(|v| !v.is_null());
            let finalizers: Vec<String> = meta["finalizers"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if deleting {
                if key.0.is_empty() && key.1 == "namespaces" {
                    let name = key.3.clone();
                    let contents: Vec<Key> = self
                        .objects
                        .keys()
                        .filter(|k| k.2 == name && !k.2.is_empty())
                        .cloned()
                        .collect();
                    if contents.is_empty() && finalizers.is_empty() {
                        self.remove(&key);
                        return true;
                    }
                    let mut changed = false;
                    for ck in contents {
                        if self
                            .objects
                            .get(&ck)
                            .is_some_and(|o| o["metadata"].get("deletionTimestamp").is_none())
                        {
                            self.delete_object(&ck, None);
                            changed = true;
                        }
                    }
                    if changed {
                        return true;
                    }
                    continue;
                }
                if finalizers.is_empty() {
                    self.remove(&key);
                    return true;
                }
                if finalizers.iter().any(|f| f == "orphan") {
                    for dk in dependents_of(&uid, &self.objects) {
                        if let Some(mut d) = self.objects.get(&dk).cloned() {
                            if let Some(refs) = d["metadata"]["ownerReferences"].as_array_mut() {
                                refs.retain(|r| r["uid"].as_str() != Some(&uid));
                                if refs.is_empty()
                                    && let Some(m) = d["metadata"].as_object_mut()
                                {
                                    m.remove("ownerReferences");
                                }
                            }
                            let def = self
                                .registry
                                .all()
                                .find(|x| x.group == dk.0 && x.plural == dk.1)
                                .cloned();
                            if let (Some(def), Some(old)) = (def, self.objects.get(&dk).cloned()) {
                                let mut entries = fields::read_entries(&old);
                                let t = self.now();
                                fields::record_update(
                                    &def,
                                    &mut entries,
                                    &old,
                                    &d,
                                    "kube-controller-manager",
                                    None,
                                    &t,
                                );
                                fields::write_entries(&mut d, &entries);
                            }
                            self.put(dk, d);
                        }
                    }
                    self.remove_finalizer(&key, "orphan");
                    return true;
                }
                if finalizers.iter().any(|f| f == "foregroundDeletion") {
                    let deps = dependents_of(&uid, &self.objects);
                    let mut changed = false;
                    for dk in &deps {
                        if let Some(d) = self.objects.get(dk)
                            && d["metadata"].get("deletionTimestamp").is_none()
                        {
                            self.delete_object(dk, None);
                            changed = true;
                        }
                    }
                    if changed {
                        return true;
                    }
                    let blocking = dependents_of(&uid, &self.objects).iter().any(|dk| {
                        self.objects.get(dk).is_some_and(|d| {
                            d["metadata"]["ownerReferences"]
                                .as_array()
                                .is_some_and(|r| {
                                    r.iter().any(|r| {
                                        r["uid"].as_str() == Some(&uid)
                                            && r["blockOwnerDeletion"].as_bool() == Some(true)
                                    })
                                })
                        })
                    });
                    if !blocking {
                        self.remove_finalizer(&key, "foregroundDeletion");
                        return true;
                    }
                }
                continue;
            }
            // Dangling dependents: every owner is gone.
            if let Some(refs) = meta["ownerReferences"].as_array()
                && !refs.is_empty()
                && refs
                    .iter()
                    .all(|r| !uids.contains_key(r["uid"].as_str().unwrap_or("")))
            {
                self.delete_object(&key, None);
                return true;
            }
        }
        false
    }

    fn remove_finalizer(&mut self, key: &Key, fin: &str) {
        if let Some(mut o) = self.objects.get(key).cloned() {
            if let Some(f) = o["metadata"]["finalizers"].as_array_mut() {
                f.retain(|x| x.as_str() != Some(fin));
                if f.is_empty()
                    && let Some(m) = o["metadata"].as_object_mut()
                {
                    m.remove("finalizers");
                }
            }
            let done = o["metadata"].get("finalizers").is_none();
            if done {
                self.remove(key);
            } else {
                self.put(key.clone(), o);
            }
        }
    }

    /// Deletes an object as a DELETE request would (finalizers respected, propagation applied).
    /// Returns the object's state after the call and whether it is gone.
    pub fn delete_object(&mut self, key: &Key, propagation: Option<&str>) -> Option<(Value, bool)> {
        let mut obj = self.objects.get(key).cloned()?;
        let has_generation = self
            .registry
            .all()
            .find(|d| d.group == key.0 && d.plural == key.1)
            .is_some_and(ResourceDef::has_generation);
        let extra = match propagation {
            Some("Orphan") => Some("orphan"),
            Some("Foreground") => Some("foregroundDeletion"),
            _ => None,
        };
        let deleting = obj["metadata"]
            .get("deletionTimestamp")
            .is_some_and(|v| !v.is_null());
        let mut finalizers: Vec<Value> = obj["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if deleting {
            return Some((obj, false));
        }
        if let Some(f) = extra
            && !finalizers.iter().any(|x| x.as_str() == Some(f))
        {
            finalizers.push(json!(f));
        }
        let is_namespace = key.0.is_empty() && key.1 == "namespaces";
        if finalizers.is_empty() && !is_namespace {
            let last = self.remove(key)?;
            return Some((last, true));
        }
        let meta = &mut obj["metadata"];
        if !finalizers.is_empty() {
            meta["finalizers"] = Value::Array(finalizers);
        }
        meta["deletionTimestamp"] = json!(self.now());
        meta["deletionGracePeriodSeconds"] = json!(0);
        if has_generation {
            let g = meta["generation"].as_i64().unwrap_or(0);
            meta["generation"] = json!(g + 1);
        }
        if key.0.is_empty() && key.1 == "namespaces" {
            obj["status"]["phase"] = json!("Terminating");
        }
        let stored = self.put(key.clone(), obj);
        Some((stored, false))
    }
}
