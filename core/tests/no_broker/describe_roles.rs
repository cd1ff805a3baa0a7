//! `describe_roles`: every role of the state topic read once, on the memory
//! transport.

use std::sync::Arc;

use krabka_coordination::codec::{encode_key, encode_lease, encode_registration, Key, Lease};
use krabka_coordination::leadership::describe_roles;
use krabka_coordination::transport::memory::MemoryCluster;
use krabka_coordination::transport::{Registrar, StateRecord};
use krabka_coordination::{role_partition, FencingToken, ManualClock, Part, Registration};

const PARTITIONS: i32 = 4;

async fn put(t: &dyn Registrar, role: &str, key: Key, value: Option<Vec<u8>>) -> i64 {
    t.append(StateRecord {
        partition: role_partition(role, PARTITIONS).unwrap(),
        key: encode_key(&key).unwrap(),
        value,
    })
    .await
    .unwrap()
}

fn registration(member: &str) -> Option<Vec<u8>> {
    Some(
        encode_registration(&Registration {
            member: member.to_owned(),
            registered_at: 1,
        })
        .unwrap(),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn every_role_with_a_roster_or_a_lease_is_listed_once() {
    let cluster = MemoryCluster::new(Arc::new(ManualClock::new(0)));
    let t = cluster.transport();
    // Enough roles that several share a partition.
    let roles: Vec<String> = (0..12).map(|i| format!("role-{i}")).collect();
    for (i, role) in roles.iter().enumerate() {
        put(&t, role, Key::registration(role, "a"), registration("a")).await;
        put(&t, role, Key::registration(role, "b"), registration("b")).await;
        if i % 2 == 0 {
            let lease = Lease {
                member: "a".to_owned(),
                token: FencingToken::new(i as i64, 0),
                granted_at: 10,
                deadline: 20,
            };
            put(
                &t,
                role,
                Key::lease(role),
                Some(encode_lease(&lease).unwrap()),
            )
            .await;
        }
    }
    // A role whose members all left is not listed; one left, one stayed.
    put(
        &t,
        "gone",
        Key::registration("gone", "x"),
        registration("x"),
    )
    .await;
    put(&t, "gone", Key::registration("gone", "x"), None).await;
    put(&t, "role-0", Key::registration("role-0", "a"), None).await;
    // A bad value makes its role unreadable, and no other.
    put(&t, "bad", Key::lease("bad"), Some(vec![1, 2, 3])).await;

    let listing = describe_roles(&t, PARTITIONS).await.unwrap();
    let mut names: Vec<&str> = listing.roles.iter().map(|r| r.role.as_str()).collect();
    names.sort_unstable();
    let mut expected: Vec<&str> = roles.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(names, expected);
    for r in &listing.roles {
        assert_eq!(r.partition, role_partition(&r.role, PARTITIONS).unwrap());
        let i: i64 = r.role["role-".len()..].parse().unwrap();
        assert_eq!(
            r.lease.as_ref().map(|l| l.token.producer_id),
            (i % 2 == 0).then_some(i)
        );
        let roster: Vec<&str> = r.roster.iter().map(|e| e.member.as_str()).collect();
        if r.role == "role-0" {
            assert_eq!(roster, ["b"]);
        } else {
            assert_eq!(roster, ["a", "b"]);
        }
    }
    assert_eq!(listing.unreadable.len(), 1);
    let (role, partition, error) = &listing.unreadable[0];
    assert_eq!(
        (role.as_str(), *partition),
        ("bad", role_partition("bad", PARTITIONS).unwrap())
    );
    assert_eq!(error.part, Part::LeaseValue);
    assert_eq!(listing.malformed_keys, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_key_that_does_not_decode_is_counted_and_a_bad_count_refused() {
    let cluster = MemoryCluster::new(Arc::new(ManualClock::new(0)));
    let t = cluster.transport();
    t.append(StateRecord {
        partition: 1,
        key: vec![0xff; 3],
        value: Some(vec![]),
    })
    .await
    .unwrap();
    let listing = describe_roles(&t, PARTITIONS).await.unwrap();
    assert!(listing.roles.is_empty());
    assert_eq!(listing.malformed_keys, 1);
    assert!(describe_roles(&t, 0).await.is_err());
}
