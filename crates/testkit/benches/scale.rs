//! Scale figures for testkit: list latency over 10,000 objects and watch-event fan-out to 100
//! concurrent watchers, through real `kube::Api` clients. Prints numbers; asserts nothing.
//! Run with `cargo bench -p testkit --bench scale`.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use testkit::Cluster;

const OBJECTS: usize = 10_000;
const WATCHERS: usize = 100;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_string());
    c.data = Some([("k".to_string(), "v".to_string())].into());
    c
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let t = Instant::now();
    for i in 0..OBJECTS {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:05}")))
            .await?;
    }
    println!("create {OBJECTS} objects: {:?}", t.elapsed());

    let mut samples = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let list = api.list(&ListParams::default()).await?;
        samples.push(t.elapsed());
        assert_eq!(list.items.len(), OBJECTS);
    }
    samples.sort();
    println!(
        "list {OBJECTS} objects: min {:?} median {:?} max {:?}",
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );

    let rv = api
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut handles = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(WATCHERS);
    for _ in 0..WATCHERS {
        let api = api.clone();
        let rv = rv.clone();
        let ready = ready_tx.clone();
        handles.push(tokio::spawn(async move {
            let stream = api.watch(&WatchParams::default().timeout(60), &rv).await?;
            let _ = ready.send(()).await;
            let mut stream = stream.boxed();
            while let Some(ev) = stream.try_next().await? {
                if let WatchEvent::Added(_) = ev {
                    return Ok::<Instant, kube::Error>(Instant::now());
                }
            }
            Ok(Instant::now())
        }));
    }
    for _ in 0..WATCHERS {
        ready_rx.recv().await;
    }
    // Give every stream time to reach its wait; the figure below is from the write on.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    api.create(&PostParams::default(), &cm("fanout")).await?;
    let mut last = t;
    for h in handles {
        let done = h.await??;
        last = last.max(done);
    }
    println!(
        "watch fan-out of one event to {WATCHERS} watchers: {:?}",
        last - t
    );
    let reqs = cluster.requests();
    println!("requests served: {}", reqs.len());
    Ok(())
}
