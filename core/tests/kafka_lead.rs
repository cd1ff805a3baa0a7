//! The leader loop on a real Kafka: two members, one
//! in this process and one in another, alternate as the role is handed
//! over (the first's work returns) and as the other is killed with
//! SIGKILL; each term's token is the one the coordinator reports.
#![cfg(feature = "kafka")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::leadership::LeadershipOptions;
use krabka_coordination::FencingToken;
use support::*;

fn client() -> Client {
    Client::new(config(&bootstrap()))
        .unwrap()
        .with_partitions(STATE_PARTITIONS)
        .unwrap()
}

fn options(c: &Client) -> LeadershipOptions {
    c.leadership_options()
        .with_lease_duration(Duration::from_secs(3))
        .with_renew_interval(Duration::from_secs(1))
        .with_challenge_stagger(Duration::from_millis(500))
}

/// Child mode: member "b" leads in a loop, printing each term's token,
/// until it is killed.
async fn member_b_child(role: &str) {
    init_tracing();
    let c = client();
    c.lead(role, "b", options(&c), |term| async move {
        let t = term.token();
        println!("TERM {} {}", t.producer_id, t.producer_epoch);
        term.ended().cancelled().await;
        Ok(())
    })
    .await
    .unwrap();
    panic!("the child's loop ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_alternate_through_a_handover_and_a_kill() {
    if let Ok(role) = std::env::var(CHILD_ENV) {
        return member_b_child(&role).await;
    }
    init_tracing();
    let role = unique("lead");
    let _ = transport("lead-setup").await; // the shared state topic
    let c = client();
    let opts = options(&c);
    let stop = opts.cancel.clone();
    let terms: Arc<Mutex<Vec<(u64, FencingToken, Instant)>>> = Arc::default();
    let a = {
        let (c, role, terms) = (c.clone(), role.clone(), terms.clone());
        tokio::spawn(async move {
            c.lead(&role, "a", opts, |term| {
                let terms = terms.clone();
                async move {
                    terms
                        .lock()
                        .unwrap()
                        .push((term.number(), term.token(), Instant::now()));
                    if term.number() == 1 {
                        // Hand over after a moment of work.
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    } else {
                        term.ended().cancelled().await;
                    }
                    Ok(())
                }
            })
            .await
        })
    };
    let started = Instant::now();
    while terms.lock().unwrap().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(30), "a never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let a1 = terms.lock().unwrap()[0].1;
    assert!(c
        .describe_leadership(&role)
        .await
        .unwrap()
        .authoritative(&a1));
    let mut child = spawn_child(
        "two_processes_alternate_through_a_handover_and_a_kill",
        &[(CHILD_ENV, role.clone()), ("KRABKA_BOOTSTRAP", bootstrap())],
    );
    // a's work returns: b's term starts.
    let line = wait_for_line(&mut child, "TERM", Duration::from_secs(30));
    let mut parts = line.split_whitespace().map(|s| s.parse::<i64>().unwrap());
    let b1 = FencingToken::new(parts.next().unwrap(), parts.next().unwrap() as i16);
    assert!(b1 > a1);
    assert!(c
        .describe_leadership(&role)
        .await
        .unwrap()
        .authoritative(&b1));
    // b is killed: a's loop, contending again, takes its second term.
    let killed = Instant::now();
    sigkill(&mut child);
    while terms.lock().unwrap().len() < 2 {
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "a never led again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (n, a2, at) = terms.lock().unwrap()[1];
    assert_eq!(n, 2);
    assert!(a2 > b1, "{b1} -> {a2}");
    assert!(c
        .describe_leadership(&role)
        .await
        .unwrap()
        .authoritative(&a2));
    println!("lead: a's second term {:?} after the kill", at - killed);
    // Cancelling the loop resigns.
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(20), a)
        .await
        .expect("the loop ends once cancelled")
        .unwrap()
        .unwrap();
    let state = c.describe_role_state(&role).await.unwrap();
    assert!(
        state.lease.is_none() && state.roster.is_empty(),
        "{state:?}"
    );
}
