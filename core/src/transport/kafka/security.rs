//! The security settings of the project's own Kafka protocol client (the
//! DescribeTransactions client and its InitProducerId requests): TLS through
//! rustls and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), read
//! from the same librdkafka keys the librdkafka clients get unchanged.
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
//! error, since this client could not honour it (so are librdkafka's own
//! OAUTHBEARER token sources: `sasl.oauthbearer.config`, the OIDC settings,
//! `enable.sasl.oauthbearer.unsecure.jwt=true`); the settings of a family
//! the protocol does not use (SASL keys with `ssl`, say) are read and checked
//! the same way but do nothing, as in librdkafka.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::config::KafkaConfig;
use super::oauth::TokenSource;
use crate::error::{Error, Result};

/// The `security.protocol` of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl Protocol {
    fn parse(value: &str) -> Option<Protocol> {
        Some(match value.to_ascii_lowercase().as_str() {
            "plaintext" => Protocol::Plaintext,
            "ssl" => Protocol::Ssl,
            "sasl_plaintext" => Protocol::SaslPlaintext,
            "sasl_ssl" => Protocol::SaslSsl,
            _ => return None,
        })
    }

    /// The name librdkafka and Kafka use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::Plaintext => "PLAINTEXT",
            Protocol::Ssl => "SSL",
            Protocol::SaslPlaintext => "SASL_PLAINTEXT",
            Protocol::SaslSsl => "SASL_SSL",
        }
    }

    fn tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }

    fn sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
}

/// A SASL mechanism the protocol client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl Mechanism {
    fn parse(value: &str) -> Option<Mechanism> {
        // librdkafka compares mechanism names as written.
        Some(match value {
            "PLAIN" => Mechanism::Plain,
            "SCRAM-SHA-256" => Mechanism::ScramSha256,
            "SCRAM-SHA-512" => Mechanism::ScramSha512,
            "OAUTHBEARER" => Mechanism::OAuthBearer,
            _ => return None,
        })
    }

    /// The name SaslHandshake carries.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a SASL mechanism authenticates with.
#[derive(Clone)]
pub(crate) enum Credentials {
    /// PLAIN and SCRAM: a user name and a password.
    Password { username: String, password: String },
    /// OAUTHBEARER: tokens from the configuration's token provider.
    Token(Arc<TokenSource>),
}

/// The SASL mechanism and credentials.
#[derive(Clone)]
pub(crate) struct SaslSettings {
    pub(crate) mechanism: Mechanism,
    pub(crate) credentials: Credentials,
}

impl SaslSettings {
    /// PLAIN or SCRAM with a user name and a password.
    #[cfg(test)]
    pub(crate) fn password(mechanism: Mechanism, username: &str, password: &str) -> SaslSettings {
        SaslSettings {
            mechanism,
            credentials: Credentials::Password {
                username: username.to_owned(),
                password: password.to_owned(),
            },
        }
    }

    /// Who authenticates, for error messages: `user "alice"`, or `a token
    /// from the token provider`.
    pub(crate) fn who(&self) -> String {
        match &self.credentials {
            Credentials::Password { username, .. } => {
                format!("user {}", crate::error::quote(username))
            }
            Credentials::Token(_) => "a token from the token provider".to_owned(),
        }
    }
}

impl fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SaslSettings");
        d.field("mechanism", &self.mechanism);
        match &self.credentials {
            Credentials::Password { username, .. } => {
                d.field("username", username).field("password", &"***")
            }
            Credentials::Token(_) => d.field("token", &"(from the token provider)"),
        };
        d.finish()
    }
}

/// The TLS side of a connection.
#[derive(Clone)]
pub(crate) struct TlsSettings {
    pub(crate) config: Arc<rustls::ClientConfig>,
    /// Where the trusted CAs come from, for error messages.
    pub(crate) trust: String,
    /// False with `ssl.endpoint.identification.algorithm=none`.
    pub(crate) verify_hostname: bool,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("trust", &self.trust)
            .field("verify_hostname", &self.verify_hostname)
            .finish_non_exhaustive()
    }
}

/// What the protocol client does to secure a connection, read from a
/// [`KafkaConfig`] by [`Security::from_config`].
#[derive(Debug, Clone)]
pub(crate) struct Security {
    pub(crate) protocol: Protocol,
    pub(crate) tls: Option<TlsSettings>,
    pub(crate) sasl: Option<SaslSettings>,
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

impl Security {
    /// No TLS, no SASL.
    #[cfg(test)]
    pub(crate) fn plaintext() -> Security {
        Security {
            protocol: Protocol::Plaintext,
            tls: None,
            sasl: None,
        }
    }

    /// Reads the security settings of `config`, loads the files they name
    /// and builds the TLS configuration. Every problem is an
    /// [`Error::InvalidArgument`] naming the setting.
    pub(crate) fn from_config(config: &KafkaConfig) -> Result<Security> {
        let mut refused = Refusals::default();
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
            Some(tls_settings(config, verify_hostname)?)
        } else {
            None
        };
        Ok(Security {
            protocol,
            tls,
            sasl: if protocol.sasl() { sasl } else { None },
        })
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
                 (KafkaConfig::with_oauth_token_provider; in Python, oauth_token=): the project \
                 does not fetch tokens itself",
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

/// The crypto of every TLS connection: rustls with *ring*.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(key: &str, value: &str, why: impl fmt::Display) -> Error {
    Error::InvalidArgument(format!("the setting {key}={value}: {why}"))
}

fn tls_settings(config: &KafkaConfig, verify_hostname: bool) -> Result<TlsSettings> {
    let mut roots = RootCertStore::empty();
    let mut trust = Vec::new();
    let location = config
        .get("ssl.ca.location")
        .filter(|l| !l.eq_ignore_ascii_case("probe"));
    if let Some(location) = location {
        let certs = load_ca_location(location)?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(invalid(
                "ssl.ca.location",
                location,
                "no usable CA certificate in it",
            ));
        }
        trust.push(format!("ssl.ca.location={location}"));
    }
    if let Some(pem) = config.get("ssl.ca.pem") {
        let certs = certs_from_pem(pem.as_bytes())
            .map_err(|e| Error::InvalidArgument(format!("the setting ssl.ca.pem: {e}")))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(Error::InvalidArgument(
                "the setting ssl.ca.pem holds no usable CA certificate".into(),
            ));
        }
        trust.push("ssl.ca.pem".to_owned());
    }
    if trust.is_empty() {
        // As librdkafka: without ssl.ca.location (or with "probe"), the
        // system's CA store.
        let native = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 {
            return Err(Error::InvalidArgument(format!(
                "TLS is on (security.protocol={}) but the system's CA store has no usable \
                 certificate{}; set ssl.ca.location to the CA that signed the brokers' certificates",
                config.get("security.protocol").unwrap_or_default(),
                native
                    .errors
                    .first()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )));
        }
        trust.push("the system's CA store".to_owned());
    }
    let provider = provider();
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| Error::InvalidArgument(format!("the trusted CA certificates: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = if verify_hostname {
        webpki
    } else {
        Arc::new(AnyHostname(webpki))
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::fatal("building the TLS configuration", e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match client_identity(config)? {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
            Error::InvalidArgument(format!(
                "the client certificate and key (ssl.certificate.*, ssl.key.*): {e}"
            ))
        })?,
        None => builder.with_no_client_auth(),
    };
    Ok(TlsSettings {
        config: Arc::new(config),
        trust: trust.join(" and "),
        verify_hostname,
    })
}

/// The certificates of a PEM file, or of every file of a folder.
fn load_ca_location(location: &str) -> Result<Vec<CertificateDer<'static>>> {
    let path = Path::new(location);
    let read = |p: &Path| {
        std::fs::read(p)
            .map_err(|e| invalid("ssl.ca.location", location, format!("{}: {e}", p.display())))
    };
    if path.is_dir() {
        let entries =
            std::fs::read_dir(path).map_err(|e| invalid("ssl.ca.location", location, e))?;
        let mut certs = Vec::new();
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_file() {
                // Files that are not PEM certificates are skipped, as
                // OpenSSL's lookup in a folder skips them.
                certs.extend(certs_from_pem(&read(&p)?).unwrap_or_default());
            }
        }
        Ok(certs)
    } else {
        certs_from_pem(&read(path)?).map_err(|e| invalid("ssl.ca.location", location, e))
    }
}

fn certs_from_pem(pem: &[u8]) -> std::result::Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into());
    }
    Ok(certs)
}

/// The client certificate chain and key for mutual TLS, if configured.
#[allow(clippy::type_complexity)]
fn client_identity(
    config: &KafkaConfig,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>> {
    let cert = match (
        config.get("ssl.certificate.location"),
        config.get("ssl.certificate.pem"),
    ) {
        (Some(_), Some(_)) => {
            return Err(Error::InvalidArgument(
                "set ssl.certificate.location or ssl.certificate.pem, not both".into(),
            ))
        }
        (Some(location), None) => {
            let pem = std::fs::read(location)
                .map_err(|e| invalid("ssl.certificate.location", location, e))?;
            Some(
                certs_from_pem(&pem)
                    .map_err(|e| invalid("ssl.certificate.location", location, e))?,
            )
        }
        (None, Some(pem)) => Some(certs_from_pem(pem.as_bytes()).map_err(|e| {
            Error::InvalidArgument(format!("the setting ssl.certificate.pem: {e}"))
        })?),
        (None, None) => None,
    };
    let password = config.get("ssl.key.password");
    let key = match (config.get("ssl.key.location"), config.get("ssl.key.pem")) {
        (Some(_), Some(_)) => {
            return Err(Error::InvalidArgument(
                "set ssl.key.location or ssl.key.pem, not both".into(),
            ))
        }
        (Some(location), None) => {
            let pem =
                std::fs::read(location).map_err(|e| invalid("ssl.key.location", location, e))?;
            Some(
                private_key(&pem, password)
                    .map_err(|e| invalid("ssl.key.location", location, e))?,
            )
        }
        (None, Some(pem)) => Some(
            private_key(pem.as_bytes(), password)
                .map_err(|e| Error::InvalidArgument(format!("the setting ssl.key.pem: {e}")))?,
        ),
        (None, None) => None,
    };
    match (cert, key) {
        (Some(chain), Some(key)) => Ok(Some((chain, key))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(Error::InvalidArgument(
            "a client certificate (ssl.certificate.*) needs its key (ssl.key.location or ssl.key.pem)"
                .into(),
        )),
        (None, Some(_)) => Err(Error::InvalidArgument(
            "a client key (ssl.key.*) needs its certificate (ssl.certificate.location or \
             ssl.certificate.pem)"
                .into(),
        )),
    }
}

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// A private key from PEM: PKCS#8, PKCS#1 (RSA) or SEC1 (EC), or an
/// encrypted PKCS#8 key (PBES2) opened with `password`.
fn private_key(
    pem: &[u8],
    password: Option<&str>,
) -> std::result::Result<PrivateKeyDer<'static>, String> {
    let text = String::from_utf8_lossy(pem);
    if let Some(start) = text.find(ENCRYPTED_BEGIN) {
        let body = &text[start + ENCRYPTED_BEGIN.len()..];
        let end = body
            .find(ENCRYPTED_END)
            .ok_or("an ENCRYPTED PRIVATE KEY block without its end line")?;
        let b64: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| format!("the encrypted key is not base64: {e}"))?;
        let Some(password) = password else {
            return Err("the key is encrypted and ssl.key.password is unset".into());
        };
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
            .map_err(|e| format!("the encrypted key is not PKCS#8: {e}"))?;
        let plain = info.decrypt(password.as_bytes()).map_err(|e| {
            format!("the key cannot be decrypted with ssl.key.password (a wrong password, or a cipher other than PBES2 with AES): {e}")
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(
            "the key is encrypted in OpenSSL's legacy PEM format, which is not supported; convert \
             it with `openssl pkcs8 -topk8 -v2 aes-256-cbc`"
                .into(),
        );
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("no PEM private key in it: {e}"))
}

/// Checks the broker's certificate chain as the wrapped verifier does, but
/// accepts a certificate that does not name the host connected to
/// (`ssl.endpoint.identification.algorithm=none`). webpki checks the name
/// after the chain, so a name error means the chain was good.
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The error of a failed TLS handshake with `addr`: a [`rustls::Error`] is
/// fatal (an untrusted or misnamed certificate, a listener that does not
/// speak TLS: no retry mends it), naming what to change.
pub(crate) fn tls_error(addr: &str, tls: &TlsSettings, e: &rustls::Error) -> Error {
    let context = format!("TLS handshake with {addr}");
    let why = match e {
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "the broker's certificate does not name the host connected to ({e}); connect with a \
             host name the certificate lists, or turn hostname verification off with \
             ssl.endpoint.identification.algorithm=none"
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => format!(
            "the broker's certificate is not trusted ({e}): no CA of {} signed it; set \
             ssl.ca.location to the CA that did",
            tls.trust
        ),
        rustls::Error::InvalidCertificate(_) => {
            format!("the broker's certificate is refused: {e}")
        }
        rustls::Error::InvalidMessage(_) => format!(
            "the broker does not speak TLS there ({e}); is it a PLAINTEXT or SASL_PLAINTEXT \
             listener?"
        ),
        _ => format!("TLS failed: {e}"),
    };
    Error::fatal(context, why)
}

/// The server name of a `host:port` address (`[v6]:port` too) for TLS.
pub(crate) fn server_name(addr: &str) -> std::result::Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| format!("{host:?} is not a host name: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(c: KafkaConfig) -> String {
        match Security::from_config(&c) {
            Err(e @ Error::InvalidArgument(_)) => e.to_string(),
            Err(e) => panic!("not an invalid argument: {e}"),
            Ok(s) => panic!("accepted: {s:?}"),
        }
    }

    #[test]
    fn plaintext_by_default() {
        let s = Security::from_config(&KafkaConfig::new("h:1")).unwrap();
        assert_eq!(s.protocol, Protocol::Plaintext);
        assert!(s.tls.is_none() && s.sasl.is_none());
        let s =
            Security::from_config(&KafkaConfig::new("h:1").set("security.protocol", "plaintext"))
                .unwrap();
        assert_eq!(s.protocol, Protocol::Plaintext);
    }

    #[test]
    fn sasl_plaintext_with_each_mechanism() {
        for m in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
            let s = Security::from_config(
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
        let s = Security::from_config(
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
        let s = Security::from_config(&with_provider(oauth.clone())).unwrap();
        let sasl = s.sasl.unwrap();
        assert_eq!(sasl.mechanism, Mechanism::OAuthBearer);
        assert!(matches!(sasl.credentials, Credentials::Token(_)));
        assert_eq!(sasl.who(), "a token from the token provider");
        // sasl.oauthbearer.method=default is librdkafka's default: the token
        // comes from the application.
        let default = with_provider(oauth.clone().set("sasl.oauthbearer.method", "default"));
        assert!(Security::from_config(&default).is_ok());

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
        assert!(
            Security::from_config(&with_provider(KafkaConfig::new("h:1")))
                .unwrap()
                .sasl
                .is_none()
        );
    }

    #[test]
    fn names_a_missing_ca_file() {
        let e = Security::from_config(
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

    #[test]
    fn server_names_of_addresses() {
        assert!(matches!(
            server_name("localhost:9092"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(matches!(
            server_name("127.0.0.1:9092"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:9092"),
            Ok(ServerName::IpAddress(_))
        ));
    }
}
