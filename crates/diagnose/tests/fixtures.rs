//! Recorded snapshots, one directory each under `tests/fixtures/<case>/`: `snapshot.json` is
//! what a gatherer read, `expect.json` the subject, the finding's kind, messages its evidence
//! must carry verbatim and words its fix must name. A new recording needs no new code.

use std::fs;
use std::path::Path;

use diagnose::{Report, Snapshot, diagnose_driver, diagnose_pod, diagnose_pvc};
use serde::Deserialize;

#[derive(Deserialize)]
struct Subject {
    kind: String,
    #[serde(default)]
    namespace: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    subject: Subject,
    finding: Option<String>,
    #[serde(default)]
    evidence: Vec<String>,
    #[serde(default)]
    fix: Vec<String>,
}

fn run(snap: &Snapshot, subject: &Subject) -> Report {
    match subject.kind.as_str() {
        "pvc" => diagnose_pvc(snap, &subject.namespace, &subject.name),
        "pod" => diagnose_pod(snap, &subject.namespace, &subject.name),
        "driver" => diagnose_driver(snap, &subject.name),
        other => panic!("unknown subject kind {other}"),
    }
}

#[test]
fn every_recorded_case_gives_its_finding() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut cases = 0;
    for entry in fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let read = |file: &str| fs::read_to_string(dir.join(file)).unwrap();
        let snap: Snapshot = serde_json::from_str(&read("snapshot.json"))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let expect: Expect = serde_json::from_str(&read("expect.json")).unwrap();
        let report = run(&snap, &expect.subject);
        let case = dir.display();
        let kind = report.finding.as_ref().map(|f| f.kind.to_string());
        assert_eq!(kind, expect.finding, "{case}:\n{report}");
        if let Some(finding) = &report.finding {
            for message in &expect.evidence {
                assert!(
                    finding.evidence.iter().any(|e| &e.message == message),
                    "{case}: no evidence says {message:?}:\n{report}"
                );
            }
            for part in &expect.fix {
                assert!(
                    finding.fix.contains(part.as_str()),
                    "{case}: fix lacks {part:?}:\n{report}"
                );
            }
        }
        cases += 1;
    }
    assert!(cases >= 2, "the fixtures were found");
}
