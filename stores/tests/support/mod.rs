//! Elections on the core's test kit for the store tests: no Kafka.

#![allow(dead_code)]

use std::time::Duration;

use krabka_coordination::leadership::Leadership;
use krabka_coordination::testing::{TestCluster, TestProcess};
use krabka_coordination::Error;
use tokio::task::JoinHandle;

pub const ROLE: &str = "billing";

/// `p`'s member of its own name contends for [`ROLE`] in a task.
pub fn contend(p: &TestProcess) -> JoinHandle<Result<Leadership, Error>> {
    let client = p.client().clone();
    let member = p.name().to_owned();
    tokio::spawn(async move {
        client
            .acquire(ROLE, &member, client.leadership_options())
            .await
    })
}

/// The leadership a finished contention won.
pub async fn won(task: JoinHandle<Result<Leadership, Error>>) -> Leadership {
    assert!(task.is_finished(), "the member should lead by now");
    task.await.unwrap().unwrap()
}

/// `a` leads [`ROLE`] and `b` waits as its standby.
pub async fn leader_and_standby(
    cluster: &TestCluster,
    a: &TestProcess,
    b: &TestProcess,
) -> (Leadership, JoinHandle<Result<Leadership, Error>>) {
    let task = contend(a);
    cluster.settle().await;
    let lead = won(task).await;
    let standby = contend(b);
    cluster.settle().await;
    (lead, standby)
}

/// Past the lease (30 s) and the standby's stagger: a leader that stopped
/// renewing is replaced.
pub async fn past_the_lease(cluster: &TestCluster) {
    cluster.advance(Duration::from_secs(60)).await;
}
