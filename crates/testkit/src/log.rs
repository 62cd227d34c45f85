//! The request log: every request the server saw, with verb, path, field manager, user agent,
//! time since start and response status, plus counting helpers for tests and benchmarks.

use std::collections::BTreeMap;
use std::time::Duration;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct RequestRecord {
    pub seq: u64,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection,
    /// discovery or other.
    pub verb: String,
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub field_manager: Option<String>,
    pub user_agent: String,
    /// Time since the cluster started.
    pub at: Duration,
    /// Response status (0 while a watch stream is still being set up).
    pub status: u16,
}

impl RequestRecord {
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    pub fn is_read(&self) -> bool {
        matches!(self.verb.as_str(), "get" | "list" | "watch")
    }

    /// Whether the request came from `client`: a field manager or user agent equal to it.
    pub fn from_client(&self, client: &str) -> bool {
        self.field_manager.as_deref() == Some(client)
            || self.user_agent == client
            || self.user_agent.split('/').next() == Some(client)
    }
}

#[derive(Debug, Default)]
pub struct RequestLog {
    records: Vec<RequestRecord>,
    next: u64,
}

impl RequestLog {
    pub fn push(&mut self, mut r: RequestRecord) -> u64 {
        r.seq = self.next;
        self.next += 1;
        let seq = r.seq;
        self.records.push(r);
        seq
    }

    pub fn set_status(&mut self, seq: u64, status: u16) {
        if let Some(r) = self.records.iter_mut().rev().find(|r| r.seq == seq) {
            r.status = status;
        }
    }

    pub fn records(&self) -> &[RequestRecord] {
        &self.records
    }

    pub fn clear(&mut self) {
        self.records.clear();
    }
}
