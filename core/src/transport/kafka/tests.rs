use super::*;

#[test]
fn lease_bounds_are_a_transaction_timeouts() {
    assert!(lease_millis(Duration::from_millis(999)).is_err());
    assert_eq!(lease_millis(Duration::from_secs(1)).unwrap(), 1000);
    assert!(lease_millis(Duration::from_millis(i32::MAX as u64 + 1)).is_err());
}

#[tokio::test]
async fn options_with_a_lease_below_the_minimum_are_refused_up_front() {
    // Refused before any broker is contacted; the cluster check that
    // follows fails within the connect timeout, naming the address.
    let config = KafkaConfig::new("127.0.0.1:1").with_connect_timeout(Duration::from_millis(300));
    let t = KafkaTransport::new(config, None).unwrap();
    let short = crate::ElectionOptions::default()
        .with_lease_duration(Duration::from_millis(500))
        .with_renew_interval(Duration::from_millis(100));
    let e = t.check_member("r", &short).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "invalid argument: the lease duration must be from 1 s to 2147483647 ms (24.8 days; it \
         is the transaction timeout), got 500 ms"
    );
    let e = t
        .check_member("r", &crate::ElectionOptions::default())
        .await
        .unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(format!("{e:?}").contains("127.0.0.1:1"), "{e:?}");
}

#[test]
fn deadlines_of_absurd_timeouts_do_not_overflow() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let far = deadline_in(Duration::MAX);
        assert!(far > tokio::time::Instant::now() + Duration::from_secs(86_400 * 365));
        let near = deadline_in(Duration::from_millis(5));
        assert!(near < far);
    });
}

#[test]
fn new_refuses_bad_settings_by_name() {
    let e = KafkaTransport::new(
        KafkaConfig::new("127.0.0.1:1").set("linger.ms", "not-a-number"),
        None,
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("linger.ms"), "{e}");
    let e = KafkaTransport::new(
        KafkaConfig::new("127.0.0.1:1").set("security.protocol", "SASL_GSSAPI"),
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("security.protocol=SASL_GSSAPI"),
        "{e}"
    );
}

#[tokio::test]
async fn a_read_of_an_unreachable_cluster_fails_within_the_connect_timeout() {
    use crate::transport::StateReader;
    // librdkafka's consumer would wait its operation timeout (twice); the
    // read asks the protocol client first, which gives up at the connect
    // timeout naming the address.
    let config = KafkaConfig::new("127.0.0.1:1")
        .with_connect_timeout(Duration::from_millis(500))
        .with_operation_timeout(Duration::from_secs(20));
    let t = KafkaTransport::new(config, None).unwrap();
    for read in ["read_partition", "read_state"] {
        let started = std::time::Instant::now();
        let e = match read {
            "read_partition" => t.read_partition(0).await.map(|_| ()),
            _ => t.read_state(0).await.map(|_| ()),
        }
        .unwrap_err();
        let took = started.elapsed();
        assert!(e.is_transient(), "{read}: {e}");
        assert!(format!("{e:?}").contains("127.0.0.1:1"), "{read}: {e:?}");
        assert!(took < Duration::from_secs(5), "{read} took {took:?}");
    }
}

/// Mints of many distinct roles (failing here: no broker answers) leave no
/// per-role mint lock behind once they are over. On this current-thread
/// runtime a mint's task ends, letting its lock go, before its caller
/// resumes.
#[tokio::test(flavor = "current_thread")]
async fn mint_locks_of_roles_no_mint_uses_are_let_go() {
    let config = KafkaConfig::new("127.0.0.1:1")
        .with_connect_timeout(Duration::from_millis(100))
        .with_operation_timeout(Duration::from_millis(200));
    let t = Arc::new(KafkaTransport::new(config, None).unwrap());
    let mints: Vec<_> = (0..50)
        .map(|i| {
            let t = Arc::clone(&t);
            tokio::spawn(async move {
                t.mint_epoch(&format!("job-{i}"), Duration::from_secs(5))
                    .await
            })
        })
        .collect();
    for m in mints {
        let e = m.await.unwrap().unwrap_err();
        assert!(e.is_transient(), "{e}");
    }
    assert_eq!(t.mint_locks.len(), 0);
}
