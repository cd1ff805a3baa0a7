//! The ACLs of a member and of a describe-only party, on the secured cluster
//! (SASL_SSL, KRaft's StandardAuthorizer: no ACL means denied).
//!
//! Principals (SCRAM-SHA-512):
//! * `alice`, a member: exactly the ACLs docs/security.md lists: Topic `<state>`
//!   READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS; Group
//!   `krabka-coordination-reader` DESCRIBE; TransactionalId `<role>` WRITE,
//!   DESCRIBE (here a prefix of the test's roles); Topic `<data>` WRITE,
//!   DESCRIBE for guarded writes.
//! * `bob`: all of alice's, except WRITE on the TransactionalId.
//! * `carol` (made by the test): DESCRIBE on the TransactionalId only, the
//!   ACL of a third party that checks who is authoritative.
//!
//! The ACLs are granted once per run with Kafka's own `kafka-acls` tool
//! (`ci/kafka.sh tool acls`, as the admin).
#![cfg(feature = "kafka")]

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::events::{self, EventReceiver};
use krabka_coordination::leadership::LeadershipOptions;
use krabka_coordination::transport::kafka::{
    ensure_state_topic, KafkaClient, KafkaConfig, KafkaTransport, TopicSpec,
};
use krabka_coordination::transport::LeaseWriter;
use krabka_coordination::ErrorKind;
use support::*;
use tokio::sync::OnceCell;

/// The longest any awaited step may take before the test gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// How long an authorization error may take: a few requests on loopback.
const PROMPT: Duration = Duration::from_secs(5);

/// What the tests share: the topics, the role prefix, and the cluster.
struct Setup {
    cluster: Secured,
    state_topic: String,
    data_topic: String,
    /// A one-partition state topic alice may write, describe and describe
    /// the configuration of, but not read.
    unread_topic: String,
    role_prefix: String,
}

impl Setup {
    /// The settings of `user` (SCRAM-SHA-512) with the test's state topic.
    fn config(&self, user: &str) -> KafkaConfig {
        self.cluster
            .config("SCRAM-SHA-512", user)
            .with_state_topic(&self.state_topic)
    }

    /// A role under the granted prefix.
    fn role(&self, name: &str) -> String {
        format!("{}-{name}", self.role_prefix)
    }
}

/// Runs `ci/kafka.sh tool <tool> --bootstrap-server .. --command-config
/// <admin> <args>`, the admin's Java tool.
fn admin_tool(cluster: &Secured, tool: &str, args: &[&str]) -> Result<String, String> {
    let admin = PathBuf::from(&cluster.ca)
        .parent()
        .and_then(|tls| tls.parent())
        .map(|dir| dir.join("admin.properties"))
        .ok_or("no folder above the CA file")?;
    if !admin.exists() {
        return Err(format!("{} does not exist", admin.display()));
    }
    let admin = admin.to_string_lossy().into_owned();
    let mut all = vec![
        "tool",
        tool,
        "--bootstrap-server",
        &cluster.bootstrap,
        "--command-config",
        &admin,
    ];
    all.extend_from_slice(args);
    kafka_sh_stdout(&all)
}

/// Grants `operations` on one resource (`--topic X`, `--group X`,
/// `--transactional-id X`, with `prefixed` for a prefix) to `users`.
fn grant(cluster: &Secured, users: &[&str], operations: &[&str], resource: &[&str]) {
    let mut args = vec!["--add"];
    let principals: Vec<String> = users.iter().map(|u| format!("User:{u}")).collect();
    for p in &principals {
        args.extend(["--allow-principal", p.as_str()]);
    }
    for op in operations {
        args.extend(["--operation", op]);
    }
    args.extend_from_slice(resource);
    admin_tool(cluster, "acls", &args)
        .unwrap_or_else(|e| panic!("granting {operations:?} on {resource:?} to {users:?}: {e}"));
}

async fn setup() -> &'static Setup {
    static SETUP: OnceCell<Setup> = OnceCell::const_new();
    SETUP
        .get_or_init(|| async {
            init_tracing();
            let cluster = secured();
            let setup = Setup {
                state_topic: unique("krabka-test-acl-state"),
                data_topic: unique("krabka-test-acl-data"),
                unread_topic: unique("krabka-test-acl-unread"),
                role_prefix: unique("acl"),
                cluster,
            };
            // The admin makes the topics.
            {
                let admin = Client::new(setup.config("admin")).unwrap();
                admin
                    .ensure_state_topic(TopicSpec::development())
                    .await
                    .expect("the state topic");
                let data = setup.config("admin").with_state_topic(&setup.data_topic);
                ensure_state_topic(&data, 1, 1, 1)
                    .await
                    .expect("the data topic");
                let unread = setup.config("admin").with_state_topic(&setup.unread_topic);
                ensure_state_topic(&unread, 1, 1, 1)
                    .await
                    .expect("the unread topic");
            }
            tokio::task::spawn_blocking(move || {
                let c = &setup.cluster;
                admin_tool(
                    c,
                    "kafka.admin.ConfigCommand",
                    &[
                        "--alter",
                        "--add-config",
                        "SCRAM-SHA-512=[iterations=4096,password=carol-secret]",
                        "--entity-type",
                        "users",
                        "--entity-name",
                        "carol",
                    ],
                )
                .expect("the user carol");
                let (state, data, unread, prefix) = (
                    setup.state_topic.as_str(),
                    setup.data_topic.as_str(),
                    setup.unread_topic.as_str(),
                    setup.role_prefix.as_str(),
                );
                // Independent grants, made side by side (each a JVM start).
                std::thread::scope(|s| {
                    s.spawn(|| {
                        grant(
                            c,
                            &["alice", "bob"],
                            &["Read", "Write", "Describe", "DescribeConfigs"],
                            &["--topic", state],
                        )
                    });
                    s.spawn(|| {
                        grant(
                            c,
                            &["alice", "bob"],
                            &["Read"],
                            &["--group", "krabka-coordination-reader"],
                        )
                    });
                    s.spawn(|| {
                        grant(
                            c,
                            &["alice", "bob"],
                            &["Write", "Describe"],
                            &["--topic", data],
                        )
                    });
                    s.spawn(|| {
                        grant(
                            c,
                            &["alice"],
                            &["Write", "Describe", "DescribeConfigs"],
                            &["--topic", unread],
                        )
                    });
                    s.spawn(|| {
                        grant(
                            c,
                            &["alice"],
                            &["Write", "Describe"],
                            &[
                                "--transactional-id",
                                prefix,
                                "--resource-pattern-type",
                                "prefixed",
                            ],
                        )
                    });
                    s.spawn(|| {
                        grant(
                            c,
                            &["bob", "carol"],
                            &["Describe"],
                            &[
                                "--transactional-id",
                                prefix,
                                "--resource-pattern-type",
                                "prefixed",
                            ],
                        )
                    });
                });
                setup
            })
            .await
            .expect("the ACL grants")
        })
        .await
}

fn options(client: &Client) -> LeadershipOptions {
    client
        .leadership_options()
        .with_lease_duration(Duration::from_secs(10))
        .with_renew_interval(Duration::from_secs(2))
        .with_challenge_stagger(Duration::from_secs(1))
}

/// Receives events until one named `name`; returns the names seen.
async fn until_event(rx: &mut EventReceiver, name: &str) -> Vec<&'static str> {
    let mut seen = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        loop {
            let e = rx.recv().await.expect("the member's events ended");
            seen.push(e.kind.name());
            if e.kind.name() == name {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {name:?} event; saw {seen:?}"));
    seen
}

/// The names of the events received so far.
fn drain(rx: &mut EventReceiver) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    while let Ok(e) = rx.try_recv() {
        kinds.push(e.kind.name());
    }
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_the_listed_acls_leads_hands_over_and_is_fenced() {
    let s = setup().await;
    let role = s.role("member");
    let a = Client::new(s.config("alice")).unwrap();
    let b = Client::new(s.config("alice")).unwrap();
    let first = a.acquire(&role, "a", options(&a)).await.expect("a leads");
    first
        .write(vec![data_record(&s.data_topic, 0, b"from a")])
        .await
        .expect("a's guarded write");

    // b waits, and takes over when a resigns.
    let (tx, mut rx) = events::channel();
    let waiting = {
        let (b, role) = (b.clone(), role.clone());
        let opts = options(&b).with_events(tx);
        tokio::spawn(async move { b.acquire(&role, "b", opts).await })
    };
    until_event(&mut rx, "waiting").await;
    first.resign().await.expect("a resigns");
    let second = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("b takes over")
        .unwrap()
        .expect("b leads");
    assert!(second.token() > first.token());
    second
        .write(vec![data_record(&s.data_topic, 0, b"from b")])
        .await
        .expect("b's guarded write");

    // A third member of the same principal mints a newer epoch: the broker
    // fences b's next guarded write (not an authorization error).
    let other = KafkaTransport::new(s.config("alice"), Some("c")).unwrap();
    let newer = other
        .mint_epoch(&role, Duration::from_secs(10))
        .await
        .expect("alice may mint the role's epoch");
    assert!(newer.token() > second.token());
    let e = second
        .write(vec![data_record(&s.data_topic, 0, b"deposed")])
        .await
        .expect_err("a deposed leader's write");
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    drop(newer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_write_on_the_transactional_id_a_member_is_refused_before_it_registers() {
    let s = setup().await;
    let role = s.role("no-write");
    let alice = Client::new(s.config("alice")).unwrap();
    let leader = alice
        .acquire(&role, "a", options(&alice))
        .await
        .expect("alice leads");

    let bob = Client::new(s.config("bob")).unwrap();
    let (tx, mut rx) = events::channel();
    let started = Instant::now();
    let e = tokio::time::timeout(
        PATIENCE,
        bob.acquire(&role, "bob", options(&bob).with_events(tx)),
    )
    .await
    .expect("an answer")
    .expect_err("bob must not lead");
    let took = started.elapsed();
    eprintln!("after {took:?}: {e}");
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("WRITE") && msg.contains("TransactionalId") && msg.contains(&role),
        "{msg}"
    );
    assert!(took < PROMPT, "took {took:?}");
    let kinds = drain(&mut rx);
    assert!(!kinds.contains(&"registered"), "{kinds:?}");
    // Nothing of bob is in the role's state, and alice's term stands.
    let state = alice.describe_role_state(&role).await.unwrap();
    let roster: Vec<_> = state.roster.iter().map(|e| e.member.as_str()).collect();
    assert_eq!(roster, ["a"]);
    let status = alice.describe_leadership(&role).await.unwrap();
    assert!(status.authoritative(&leader.token()), "{status:?}");
    leader
        .write(vec![data_record(&s.data_topic, 0, b"still a")])
        .await
        .expect("alice writes on");
    // bob may still describe the role (DESCRIBE on the transactional id).
    let seen = bob.describe_leadership(&role).await.expect("bob describes");
    assert!(seen.authoritative(&leader.token()));
    leader.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_describe_only_party_checks_authority_but_cannot_lead() {
    let s = setup().await;
    let role = s.role("describe-only");
    let alice = Client::new(s.config("alice")).unwrap();
    let leader = alice.acquire(&role, "a", options(&alice)).await.unwrap();

    // carol's protocol client alone: one request per describe.
    let carol = KafkaClient::new(&s.config("carol")).unwrap();
    assert_eq!(carol.describe_epoch(&role).await.unwrap(), leader.token());
    let client = Client::new(s.config("carol")).unwrap();
    let status = client.describe_leadership(&role).await.expect("describe");
    assert!(status.authoritative(&leader.token()), "{status:?}");

    // The role's state is on the state topic, which she may not read.
    let e = client.describe_role_state(&role).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    assert!(
        e.to_string().contains("not authorized") && e.to_string().contains(&s.state_topic),
        "{e}"
    );

    // carol cannot lead: she is refused before registering, promptly.
    let started = Instant::now();
    let e = client
        .acquire(&role, "carol", options(&client))
        .await
        .expect_err("carol must not lead");
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    assert!(e.to_string().contains(&s.state_topic), "{e}");

    // A role outside her ACLs: not even DESCRIBE.
    let foreign = unique("acl-foreign");
    let e = carol.describe_epoch(&foreign).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    assert!(e.to_string().contains("DESCRIBE on TransactionalId"), "{e}");
    let status = alice.describe_leadership(&role).await.unwrap();
    assert!(status.authoritative(&leader.token()));
    leader.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_missing_the_readers_group_or_topic_read_is_refused_by_name() {
    // alice's settings with another group.id (no ACL on it), and with a
    // state topic she may write but not read.
    let s = setup().await;
    let cases = [
        (
            "group",
            s.config("alice").set("group.id", unique("acl-no-group")),
            STATE_PARTITIONS,
            "Group",
        ),
        (
            "topic",
            s.config("alice").with_state_topic(&s.unread_topic),
            1,
            "READ the state topic",
        ),
    ];
    for (what, config, partitions, needle) in cases {
        let client = Client::new(config)
            .and_then(|c| c.with_partitions(partitions))
            .unwrap();
        let role = s.role(&format!("missing-{what}"));
        let (tx, mut rx) = events::channel();
        let started = Instant::now();
        let e = client
            .acquire(
                &role,
                "m",
                options(&client).with_partitions(partitions).with_events(tx),
            )
            .await
            .expect_err(what);
        eprintln!("{what}: after {:?}: {e}", started.elapsed());
        assert_eq!(e.kind(), ErrorKind::Fatal, "{what}: {e}");
        assert!(e.to_string().contains(needle), "{what}: {e}");
        assert!(
            started.elapsed() < PROMPT,
            "{what}: {:?}",
            started.elapsed()
        );
        let kinds = drain(&mut rx);
        assert!(!kinds.contains(&"registered"), "{what}: {kinds:?}");
    }
}
