use super::*;

#[test]
fn the_removed_lease_path_setting_is_refused_by_name_whatever_its_value() {
    for value in ["librdkafka", "protocol", "native", ""] {
        let c = KafkaConfig::new("h:1").set(KafkaConfig::REMOVED_LEASE_PATH_SETTING, value);
        assert_eq!(
            c.get(KafkaConfig::REMOVED_LEASE_PATH_SETTING),
            None,
            "no librdkafka client gets it"
        );
        let e = c.validate().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("krabka.lease.path") && text.contains("removed"),
            "{text}"
        );
        assert!(text.contains(&format!("{value:?}")), "{text}");
    }
    KafkaConfig::new("h:1").validate().unwrap();
}

#[test]
fn settings_pass_through_unchanged() {
    let c = KafkaConfig::new("h:1")
        .set("socket.timeout.ms", "1234")
        .set("client.id", "x");
    let cc = c.client_config("reg");
    assert_eq!(cc.get("bootstrap.servers"), Some("h:1"));
    assert_eq!(cc.get("socket.timeout.ms"), Some("1234"));
    // A user client.id wins over the default.
    assert_eq!(cc.get("client.id"), Some("x"));
    let c = KafkaConfig::new("h:1").set("bootstrap.servers", "h:2");
    assert_eq!(c.bootstrap(), "h:2");
    assert_eq!(c.get("bootstrap.servers"), None);
}

#[test]
fn ca_location_is_probed_only_with_the_vendored_openssl_and_no_user_ca() {
    let cc = KafkaConfig::new("h:1").client_config("reg");
    if cfg!(feature = "vendored") {
        // The vendored OpenSSL's own CA directory is not on users' machines.
        assert_eq!(cc.get("ssl.ca.location"), Some("probe"));
    } else {
        // The system OpenSSL knows where its distribution keeps the CAs.
        assert_eq!(cc.get("ssl.ca.location"), None);
    }
    // CAs the user names are the only ones, in either build.
    let cc = KafkaConfig::new("h:1")
        .set("ssl.ca.location", "/etc/my-ca.pem")
        .client_config("reg");
    assert_eq!(cc.get("ssl.ca.location"), Some("/etc/my-ca.pem"));
    let cc = KafkaConfig::new("h:1")
        .set("ssl.ca.pem", "-----BEGIN CERTIFICATE-----")
        .client_config("reg");
    assert_eq!(cc.get("ssl.ca.location"), None);
    assert_eq!(cc.get("ssl.ca.pem"), Some("-----BEGIN CERTIFICATE-----"));
}

#[test]
fn checks_security_as_the_protocol_client_reads_it() {
    assert!(KafkaConfig::new("h:1").check_security().is_ok());
    assert!(KafkaConfig::new("h:1")
        .set("security.protocol", "PLAINTEXT")
        .check_security()
        .is_ok());
    assert!(KafkaConfig::new("h:1")
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-256")
        .set("sasl.username", "u")
        .set("sasl.password", "p")
        .check_security()
        .is_ok());
    let e = KafkaConfig::new("h:1")
        .set("security.protocol", "SASL_SSL")
        .set("sasl.mechanism", "GSSAPI")
        .set("ssl.keystore.location", "/x")
        .check_security()
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::InvalidArgument(_)), "{msg}");
    for name in ["sasl.mechanism=GSSAPI", "ssl.keystore.location"] {
        assert!(msg.contains(name), "{msg} should name {name}");
    }
}

#[test]
fn debug_hides_secrets() {
    let c = KafkaConfig::new("h:1")
        .set("sasl.password", "hunter2")
        .set("linger.ms", "5");
    let s = format!("{c:?}");
    assert!(!s.contains("hunter2"), "{s}");
    assert!(s.contains("linger.ms"), "{s}");
}

#[test]
fn validate_names_bad_values() {
    assert!(KafkaConfig::new(" ")
        .validate()
        .unwrap_err()
        .to_string()
        .contains("bootstrap"));
    assert!(KafkaConfig::new("h:1")
        .with_state_topic("")
        .validate()
        .is_err());
    assert!(KafkaConfig::new("h:1")
        .with_operation_timeout(Duration::ZERO)
        .validate()
        .is_err());
    assert!(KafkaConfig::new("h:1")
        .with_fetch_wait(Duration::from_secs(301))
        .validate()
        .is_err());
    assert!(KafkaConfig::new("h:1").validate().is_ok());
}

#[test]
fn validate_refuses_absurd_timeouts_by_value() {
    for d in [
        Duration::ZERO,
        Duration::MAX,
        KafkaConfig::MAX_TIMEOUT + Duration::from_millis(1),
    ] {
        let e = KafkaConfig::new("h:1")
            .with_connect_timeout(d)
            .validate()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("connect timeout"), "{e}");
        assert!(
            e.to_string()
                .contains(&crate::human::duration(d).to_string()),
            "{e}"
        );
        let e = KafkaConfig::new("h:1")
            .with_operation_timeout(d)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("operation timeout"), "{e}");
    }
    assert!(KafkaConfig::new("h:1")
        .with_connect_timeout(KafkaConfig::MAX_TIMEOUT)
        .with_operation_timeout(KafkaConfig::MAX_TIMEOUT)
        .validate()
        .is_ok());
}

#[test]
fn validate_refuses_a_transactional_id_and_an_overlong_client_id() {
    let e = KafkaConfig::new("h:1")
        .set("transactional.id", "mine")
        .validate()
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("transactional.id=\"mine\""), "{e}");
    let long = "c".repeat(KafkaConfig::MAX_CLIENT_ID_LEN + 1);
    let e = KafkaConfig::new("h:1")
        .set("client.id", long)
        .validate()
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("client.id") && msg.contains("32768 bytes"),
        "{msg}"
    );
    assert!(msg.len() < 300, "the value is quoted only in part: {msg}");
}

#[test]
fn member_ids_in_client_ids_stay_short_and_plain() {
    assert_eq!(client_id_part("node-1.a_b"), "node-1.a_b");
    let long = "m".repeat(32_767);
    let part = client_id_part(&long);
    assert!(part.len() < 64, "{part}");
    assert_ne!(client_id_part(&long), client_id_part(&"m".repeat(32_766)));
    let odd = client_id_part("a b\0c\u{e9}");
    assert!(odd.starts_with("a_b_c_-"), "{odd}");
    assert!(!odd.contains('\0'));
    assert_eq!(odd, client_id_part("a b\0c\u{e9}"), "stable");
}

#[test]
fn the_hanging_transactions_setting_is_the_transports_own_and_checked() {
    let key = KafkaConfig::ALLOW_HANGING_TRANSACTIONS_SETTING;
    assert!(!KafkaConfig::new("h:1").allows_hanging_transactions());
    for (value, allows) in [("true", true), (" TRUE ", true), ("false", false)] {
        let c = KafkaConfig::new("h:1").set(key, value);
        assert_eq!(c.get(key), None, "no librdkafka client gets it");
        assert_eq!(c.allows_hanging_transactions(), allows, "{value}");
        c.validate().unwrap();
    }
    assert!(KafkaConfig::new("h:1")
        .allow_hanging_transactions(true)
        .allows_hanging_transactions());
    for value in ["yes", "1", ""] {
        let e = KafkaConfig::new("h:1")
            .set(key, value)
            .validate()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains(key) && text.contains("true or false"),
            "{text}"
        );
    }
}
