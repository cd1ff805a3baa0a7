//! The adapter from librdkafka-style settings to the Kafka client's own
//! ([`krabka_kafka::Settings`]): the same keys the librdkafka clients get
//! unchanged configure the protocol client's TLS (rustls) and SASL (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER).
//!
//! | key | values | as librdkafka |
//! |-----|--------|---------------|
//! | `security.protocol` | `plaintext` (default), `ssl`, `sasl_plaintext`, `sasl_ssl` (any case) | yes |
//! | `sasl.mechanism` / `sasl.mechanisms` | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` (with [`KafkaConfig::with_oauth_token_provider`]) | yes (librdkafka's default, GSSAPI, is refused) |
//! | `sasl.username`, `sasl.password` | the credentials (not used by OAUTHBEARER) | yes |
//! | `sasl.oauthbearer.method` | `default` only (tokens from the token provider) | `oidc` (librdkafka fetches tokens itself) is refused |
//! | `ssl.ca.location` | a PEM file or a folder of PEM files, or `probe`; unset: the system's CA store | yes |
//! | `ssl.ca.pem` | CA certificates as PEM text | yes |
//! | `ssl.certificate.location` / `ssl.certificate.pem` | the client certificate (chain), PEM | yes |
//! | `ssl.key.location` / `ssl.key.pem` | its private key, PEM (PKCS#8, PKCS#1 or SEC1; an encrypted PKCS#8 key with `ssl.key.password`) | yes |
//! | `ssl.endpoint.identification.algorithm` | `https` (default: the broker's certificate must name the host connected to) or `none` | yes |
//! | `enable.ssl.certificate.verification` | `true` only | `false` is refused |
//!
//! Every other `ssl.*`, `ssl_*` or `sasl.*` key is refused, named in the
//! error, since the client could not honour it (so are librdkafka's own
//! OAUTHBEARER token sources: `sasl.oauthbearer.config`, the OIDC settings,
//! `enable.sasl.oauthbearer.unsecure.jwt=true`); the settings of a family
//! the protocol does not use (SASL keys with `ssl`, say) are read and checked
//! the same way but do nothing, as in librdkafka.

use std::time::Duration;

use krabka_kafka::security::{
    Credentials, Mechanism, Protocol, SaslSettings, Security, TlsOptions, TlsSettings,
};

use super::config::KafkaConfig;
use crate::error::{Error, Result};

/// The Kafka client's settings from `config` (after
/// [`KafkaConfig::validate`]): the bootstrap address, `client.id`
/// (`krabka-describe` unless set), the operation and connect timeouts, the
/// request timeout of one attempt (`request.timeout.ms`, by default the
/// client's 5 s), and the security the librdkafka keys below say.
pub(crate) fn settings(config: &KafkaConfig) -> Result<krabka_kafka::Settings> {
    config.validate()?;
    let request_timeout = match config.get("request.timeout.ms") {
        None => krabka_kafka::Settings::DEFAULT_REQUEST_TIMEOUT,
        Some(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "request.timeout.ms must be a positive number of milliseconds, got {v:?}"
                )))
            }
        },
    };
    Ok(krabka_kafka::Settings {
        bootstrap: config.bootstrap().to_owned(),
        client_id: config
            .get("client.id")
            .map(str::to_owned)
            .unwrap_or_else(|| "krabka-describe".to_owned()),
        operation_timeout: config.operation_timeout(),
        connect_timeout: config.connect_timeout(),
        request_timeout,
        security: security(config)?,
    })
}

/// The `ssl.*` keys the protocol client honours.
const SSL_KEYS: &[&str] = &[
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
];

/// The `sasl.*` keys the protocol client honours.
const SASL_KEYS: &[&str] = &[
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.method",
];

/// Gathers the problems of one configuration, so one error names them all.
#[derive(Default)]
struct Refusals(Vec<String>);

impl Refusals {
    fn push(&mut self, why: impl Into<String>) {
        self.0.push(why.into());
    }

    fn into_result(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "the Kafka protocol client (DescribeTransactions, the epoch bump) cannot honour these \
                 security settings: {}",
                self.0.join("; ")
            )))
        }
    }
}

/// Reads the security settings of `config`, loads the files they name and
/// builds the TLS configuration. Every problem is an
/// [`Error::InvalidArgument`] naming the setting.
pub(crate) fn security(config: &KafkaConfig) -> Result<Security> {
    let mut refused = Refusals::default();
    refuse_unsupported(config, &mut refused);
    let protocol = match config.get("security.protocol") {
        None => Protocol::Plaintext,
        Some(v) => Protocol::parse(v).unwrap_or_else(|| {
            refused.push(format!(
                "security.protocol={v} (supported: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
            ));
            Protocol::Plaintext
        }),
    };
    let verify_hostname = match config.get("ssl.endpoint.identification.algorithm") {
        None => true,
        Some(v) if v.eq_ignore_ascii_case("https") => true,
        Some(v) if v.eq_ignore_ascii_case("none") => false,
        Some(v) => {
            refused.push(format!(
                "ssl.endpoint.identification.algorithm={v} (supported: https, none)"
            ));
            true
        }
    };
    let sasl = sasl_settings(config, protocol, &mut refused);
    refused.into_result()?;
    let tls = if protocol.tls() {
        let get = |k: &str| config.get(k).map(str::to_owned);
        Some(TlsSettings::build(&TlsOptions {
            ca_location: get("ssl.ca.location"),
            ca_pem: get("ssl.ca.pem"),
            certificate_location: get("ssl.certificate.location"),
            certificate_pem: get("ssl.certificate.pem"),
            key_location: get("ssl.key.location"),
            key_pem: get("ssl.key.pem"),
            key_password: get("ssl.key.password"),
            verify_hostname,
            protocol_name: get("security.protocol").unwrap_or_default(),
        })?)
    } else {
        None
    };
    Ok(Security {
        protocol,
        tls,
        sasl: if protocol.sasl() { sasl } else { None },
    })
}

/// Adds to `refused` every setting of `config` the protocol client does not
/// honour: an `ssl.*` or `sasl.*` key it does not know, and librdkafka's own
/// token retrieval, unsigned test tokens and unverified certificates.
fn refuse_unsupported(config: &KafkaConfig, refused: &mut Refusals) {
    for (key, value) in config.settings() {
        let lower = key.to_ascii_lowercase();
        let family = lower.starts_with("ssl.")
            || lower.starts_with("ssl_")
            || lower.starts_with("sasl.")
            || lower.starts_with("sasl_");
        if family && !SSL_KEYS.contains(&key) && !SASL_KEYS.contains(&key) {
            if lower.starts_with("sasl.oauthbearer.") {
                refused.push(format!(
                    "{key} is not supported (librdkafka's own OAUTHBEARER token retrieval; \
                         supply tokens with a token provider instead)"
                ));
            } else {
                refused.push(format!("{key} is not supported"));
            }
        }
        if key == "enable.sasl.oauthbearer.unsecure.jwt"
            && !matches!(value.to_ascii_lowercase().as_str(), "false" | "0")
        {
            refused.push(format!(
                "enable.sasl.oauthbearer.unsecure.jwt={value} (librdkafka's own unsigned test \
                     tokens; supply tokens with a token provider instead)"
            ));
        }
        if key == "sasl.oauthbearer.method" && !value.eq_ignore_ascii_case("default") {
            refused.push(format!(
                "sasl.oauthbearer.method={value} (librdkafka fetching tokens itself; only \
                     `default` is supported: supply tokens with a token provider)"
            ));
        }
        if key == "enable.ssl.certificate.verification"
            && !matches!(value.to_ascii_lowercase().as_str(), "true" | "1")
        {
            refused.push(format!(
                "enable.ssl.certificate.verification={value} (the protocol client always \
                     verifies the broker's certificate; trust its CA with ssl.ca.location instead)"
            ));
        }
    }
}

fn sasl_settings(
    config: &KafkaConfig,
    protocol: Protocol,
    refused: &mut Refusals,
) -> Option<SaslSettings> {
    let mechanism = match (config.get("sasl.mechanism"), config.get("sasl.mechanisms")) {
        (Some(a), Some(b)) if a != b => {
            refused.push(format!(
                "sasl.mechanism={a} and sasl.mechanisms={b} disagree (they are one setting)"
            ));
            return None;
        }
        (Some(m), _) | (None, Some(m)) => Some(m),
        (None, None) => None,
    };
    if !protocol.sasl() {
        return None;
    }
    let mechanism = match mechanism {
        None => {
            refused.push(format!(
                "sasl.mechanism is unset with security.protocol={}: librdkafka's default GSSAPI \
                 (Kerberos) is not supported; set PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or \
                 OAUTHBEARER",
                protocol.name()
            ));
            return None;
        }
        Some(m) => match Mechanism::parse(m) {
            Some(m) => m,
            None => {
                refused.push(format!(
                    "sasl.mechanism={m} (supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, \
                     OAUTHBEARER)"
                ));
                return None;
            }
        },
    };
    if mechanism == Mechanism::OAuthBearer {
        let Some(source) = config.token_source() else {
            refused.push(
                "sasl.mechanism=OAUTHBEARER needs a token provider \
                 (KafkaConfig::with_oauth_token_provider, or the binding's token provider \
                 option): the project does not fetch tokens itself",
            );
            return None;
        };
        return Some(SaslSettings {
            mechanism,
            credentials: Credentials::Token(source),
        });
    }
    if config.has_oauth_token_provider() {
        refused.push(format!(
            "an OAUTHBEARER token provider is given but sasl.mechanism={mechanism}: set \
             sasl.mechanism=OAUTHBEARER, or drop the provider"
        ));
        return None;
    }
    let (username, password) = (config.get("sasl.username"), config.get("sasl.password"));
    let (Some(username), Some(password)) = (username, password) else {
        let missing: Vec<&str> = [("sasl.username", username), ("sasl.password", password)]
            .into_iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k)
            .collect();
        refused.push(format!(
            "{} unset: SASL {mechanism} needs a user name and a password",
            missing.join(" and ")
        ));
        return None;
    };
    Some(SaslSettings {
        mechanism,
        credentials: Credentials::Password {
            username: username.to_owned(),
            password: password.to_owned(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(c: KafkaConfig) -> String {
        match security(&c) {
            Err(e @ Error::InvalidArgument(_)) => e.to_string(),
            Err(e) => panic!("not an invalid argument: {e}"),
            Ok(s) => panic!("accepted: {s:?}"),
        }
    }

    #[test]
    fn the_request_timeout_is_request_timeout_ms_or_five_seconds() {
        let s = settings(&KafkaConfig::new("h:1")).unwrap();
        assert_eq!(
            s.request_timeout,
            krabka_kafka::Settings::DEFAULT_REQUEST_TIMEOUT
        );
        let s = settings(&KafkaConfig::new("h:1").set("request.timeout.ms", "1500")).unwrap();
        assert_eq!(s.request_timeout, Duration::from_millis(1500));
        for bad in ["0", "-1", "soon", ""] {
            let e = settings(&KafkaConfig::new("h:1").set("request.timeout.ms", bad)).unwrap_err();
            assert!(
                e.to_string().contains("request.timeout.ms") && e.to_string().contains(bad),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn plaintext_by_default() {
        let s = security(&KafkaConfig::new("h:1")).unwrap();
        assert_eq!(s.protocol, Protocol::Plaintext);
        assert!(s.tls.is_none() && s.sasl.is_none());
        let s = security(&KafkaConfig::new("h:1").set("security.protocol", "plaintext")).unwrap();
        assert_eq!(s.protocol, Protocol::Plaintext);
    }

    #[test]
    fn sasl_plaintext_with_each_mechanism() {
        for m in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
            let s = security(
                &KafkaConfig::new("h:1")
                    .set("security.protocol", "SASL_PLAINTEXT")
                    .set("sasl.mechanisms", m)
                    .set("sasl.username", "alice")
                    .set("sasl.password", "hunter2"),
            )
            .unwrap();
            assert_eq!(s.protocol, Protocol::SaslPlaintext);
            let sasl = s.sasl.unwrap();
            assert_eq!(sasl.mechanism.name(), m);
            assert_eq!(sasl.who(), "user \"alice\"");
            assert!(!format!("{sasl:?}").contains("hunter2"));
            assert!(s.tls.is_none());
        }
    }

    #[test]
    fn sasl_keys_do_nothing_without_a_sasl_protocol() {
        let s = security(
            &KafkaConfig::new("h:1")
                .set("sasl.mechanism", "GSSAPI")
                .set("sasl.username", "u"),
        )
        .unwrap();
        assert!(s.sasl.is_none());
    }

    #[test]
    fn refuses_what_it_cannot_honour_by_name() {
        let msg = refusal(
            KafkaConfig::new("h:1")
                .set("security.protocol", "SASL_SSL")
                .set("sasl.mechanism", "GSSAPI")
                .set("ssl.keystore.location", "/k.p12")
                .set("sasl.kerberos.service.name", "kafka")
                .set("ssl.endpoint.identification.algorithm", "dns")
                .set("enable.ssl.certificate.verification", "false"),
        );
        for name in [
            "sasl.mechanism=GSSAPI",
            "ssl.keystore.location",
            "sasl.kerberos.service.name",
            "ssl.endpoint.identification.algorithm=dns",
            "enable.ssl.certificate.verification=false",
        ] {
            assert!(msg.contains(name), "{msg} should name {name}");
        }
        let msg = refusal(KafkaConfig::new("h:1").set("security.protocol", "SASL_SCRAM"));
        assert!(msg.contains("security.protocol=SASL_SCRAM"), "{msg}");
        let msg = refusal(KafkaConfig::new("h:1").set("security.protocol", "SASL_PLAINTEXT"));
        assert!(
            msg.contains("sasl.mechanism is unset") && msg.contains("GSSAPI"),
            "{msg}"
        );
        let msg = refusal(
            KafkaConfig::new("h:1")
                .set("security.protocol", "SASL_PLAINTEXT")
                .set("sasl.mechanism", "plain"),
        );
        assert!(msg.contains("sasl.mechanism=plain"), "{msg}");
        let msg = refusal(
            KafkaConfig::new("h:1")
                .set("security.protocol", "SASL_PLAINTEXT")
                .set("sasl.mechanism", "SCRAM-SHA-256")
                .set("sasl.password", "secret-value"),
        );
        assert!(msg.contains("sasl.username unset"), "{msg}");
        assert!(!msg.contains("secret-value"), "{msg}");
        let msg = refusal(
            KafkaConfig::new("h:1")
                .set("sasl.mechanism", "PLAIN")
                .set("sasl.mechanisms", "SCRAM-SHA-256"),
        );
        assert!(msg.contains("disagree"), "{msg}");
    }

    fn with_provider(c: KafkaConfig) -> KafkaConfig {
        c.with_oauth_token_provider(|| {
            Ok(super::super::OAuthToken::new(
                "t",
                std::time::SystemTime::now() + std::time::Duration::from_secs(60),
            ))
        })
    }

    #[test]
    fn oauthbearer_takes_a_token_provider_and_refuses_librdkafkas_own_token_sources() {
        let oauth = KafkaConfig::new("h:1")
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "OAUTHBEARER");
        let s = security(&with_provider(oauth.clone())).unwrap();
        let sasl = s.sasl.unwrap();
        assert_eq!(sasl.mechanism, Mechanism::OAuthBearer);
        assert!(matches!(sasl.credentials, Credentials::Token(_)));
        assert_eq!(sasl.who(), "a token from the token provider");
        // sasl.oauthbearer.method=default is librdkafka's default: the token
        // comes from the application.
        let default = with_provider(oauth.clone().set("sasl.oauthbearer.method", "default"));
        assert!(security(&default).is_ok());

        let msg = refusal(oauth.clone());
        assert!(
            msg.contains("OAUTHBEARER needs a token provider")
                && msg.contains("with_oauth_token_provider"),
            "{msg}"
        );
        let msg = refusal(with_provider(
            oauth
                .clone()
                .set("sasl.oauthbearer.method", "oidc")
                .set("sasl.oauthbearer.token.endpoint.url", "https://idp/token")
                .set("sasl.oauthbearer.config", "principal=admin")
                .set("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        ));
        for name in [
            "sasl.oauthbearer.method=oidc",
            "sasl.oauthbearer.token.endpoint.url",
            "sasl.oauthbearer.config",
            "enable.sasl.oauthbearer.unsecure.jwt=true",
        ] {
            assert!(msg.contains(name), "{msg} should name {name}");
        }
        assert!(msg.contains("token provider"), "{msg}");
        // A provider with another mechanism is a mistake, named.
        let msg = refusal(with_provider(
            KafkaConfig::new("h:1")
                .set("security.protocol", "SASL_SSL")
                .set("sasl.mechanism", "PLAIN")
                .set("sasl.username", "u")
                .set("sasl.password", "p"),
        ));
        assert!(
            msg.contains("token provider is given but sasl.mechanism=PLAIN"),
            "{msg}"
        );
        // Without SASL it does nothing, as the other SASL settings.
        assert!(security(&with_provider(KafkaConfig::new("h:1")))
            .unwrap()
            .sasl
            .is_none());
    }

    #[test]
    fn names_a_missing_ca_file_setting() {
        let e = security(
            &KafkaConfig::new("h:1")
                .set("security.protocol", "SSL")
                .set("ssl.ca.location", "/no/such/ca.pem"),
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(
            e.to_string().contains("ssl.ca.location=/no/such/ca.pem"),
            "{e}"
        );
    }
}
