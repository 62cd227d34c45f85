//! Workload simulation (opt-in): plays the controller-manager and kubelet for status only.
//! After a configurable delay, Deployments and DaemonSets get a status matching their spec and
//! the simulated Nodes; rollouts can be hung and Nodes made NotReady.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fields;
use crate::store::{Key, State};

/// Knobs of the simulation.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Time between seeing a new generation and reporting it rolled out.
    pub delay: Duration,
    /// How often the simulation looks at the store.
    pub tick: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            delay: Duration::from_millis(200),
            tick: Duration::from_millis(50),
        }
    }
}

/// Mutable simulation state: rollouts that must not finish and first-seen times.
#[derive(Debug, Default)]
pub struct SimState {
    pub hung: BTreeSet<(String, String)>,
    seen: BTreeMap<(Key, i64), Instant>,
}

const MANAGER: &str = "kube-controller-manager";

fn node_ready(n: &Value) -> bool {
    n["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .is_none_or(|c| c["status"] == "True")
}

pub fn tick(st: &mut State, sim: &mut SimState, cfg: &SimConfig) {
    let nodes: Vec<Value> = st
        .objects
        .iter()
        .filter(|(k, _)| k.0.is_empty() && k.1 == "nodes")
        .map(|(_, v)| v.clone())
        .collect();
    let total = nodes.len() as i64;
    let ready = nodes.iter().filter(|n| node_ready(n)).count() as i64;
    let keys: Vec<Key> = st
        .objects
        .keys()
        .filter(|k| k.0 == "apps" && (k.1 == "deployments" || k.1 == "daemonsets"))
        .cloned()
        .collect();
    let live: BTreeSet<Key> = keys.iter().cloned().collect();
    let t_now = st.now();
    sim.seen.retain(|(k, _), _| live.contains(k));
    for key in keys {
        let Some(obj) = st.objects.get(&key).cloned() else {
            continue;
        };
        if obj["metadata"].get("deletionTimestamp").is_some() {
            continue;
        }
        let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
        let first = *sim
            .seen
            .entry((key.clone(), generation))
            .or_insert_with(Instant::now);
        if first.elapsed() < cfg.delay {
            continue;
        }
        let hung = sim.hung.contains(&(key.2.clone(), key.3.clone()));
        let status = if key.1 == "deployments" {
            let want = obj["spec"]["replicas"].as_i64().unwrap_or(1);
            if hung {
                json!({"observedGeneration": generation, "replicas": want, "updatedReplicas": 0,
                       "readyReplicas": 0, "availableReplicas": 0, "unavailableReplicas": want,
                       "conditions": [
                         {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."},
                         {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": format!("ReplicaSet \"{}\" has timed out progressing.", key.3)}]})
            } else {
                json!({"observedGeneration": generation, "replicas": want, "updatedReplicas": want,
                       "readyReplicas": want, "availableReplicas": want,
                       "conditions": [
                         {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                         {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": format!("ReplicaSet \"{}\" has successfully progressed.", key.3)}]})
            }
        } else {
            let ok = if hung { 0 } else { ready };
            json!({"observedGeneration": generation, "desiredNumberScheduled": total,
                   "currentNumberScheduled": total, "numberMisscheduled": 0, "numberReady": ok,
                   "updatedNumberScheduled": if hung { 0 } else { total },
                   "numberAvailable": ok, "numberUnavailable": total - ok})
        };
        let mut status = status;
        // Keep condition timestamps stable when nothing changed, so idle ticks write nothing.
        if let Some(conds) = status["conditions"].as_array_mut() {
            for c in conds.iter_mut() {
                let prev = obj["status"]["conditions"]
                    .as_array()
                    .and_then(|p| p.iter().find(|p| p["type"] == c["type"]));
                let t = match prev {
                    Some(p) if p["status"] == c["status"] => p["lastTransitionTime"].clone(),
                    _ => json!(t_now),
                };
                c["lastTransitionTime"] = t.clone();
                c["lastUpdateTime"] = prev
                    .filter(|p| p["reason"] == c["reason"])
                    .map(|p| p["lastUpdateTime"].clone())
                    .unwrap_or(t);
            }
        }
        if obj.get("status") == Some(&status) {
            continue;
        }
        let mut new = obj.clone();
        new["status"] = status;
        let def = st
            .registry
            .all()
            .find(|d| d.group == key.0 && d.plural == key.1)
            .cloned();
        if let Some(def) = def {
            let mut entries = fields::read_entries(&obj);
            fields::record_update(
                &def,
                &mut entries,
                &obj,
                &new,
                MANAGER,
                Some("status"),
                &t_now,
            );
            fields::write_entries(&mut new, &entries);
        }
        st.put(key, new);
    }
}
