//! The security of a connection to a broker: TLS through rustls (on
//! *ring*) and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER).
//!
//! [`Security`] says what a connection does; [`TlsOptions`] are the inputs
//! of its TLS side, named after the librdkafka keys they mirror (the
//! coordination core's transport reads those keys and fills them in), so
//! every error names the setting the user wrote. Building a [`Security`]
//! reads the files the options name and fails with
//! [`Error::InvalidArgument`] naming the setting; a connection never reads
//! a file.

use std::fmt;
use std::sync::Arc;

use crate::error::{quote, Error, Result};
use crate::oauth::TokenSource;

mod tls;

use tls::tls_settings;
pub(crate) use tls::{server_name, tls_error};

/// The `security.protocol` of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// No TLS, no SASL.
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl Protocol {
    /// The protocol a `security.protocol` value names (any case).
    pub fn parse(value: &str) -> Option<Protocol> {
        Some(match value.to_ascii_lowercase().as_str() {
            "plaintext" => Protocol::Plaintext,
            "ssl" => Protocol::Ssl,
            "sasl_plaintext" => Protocol::SaslPlaintext,
            "sasl_ssl" => Protocol::SaslSsl,
            _ => return None,
        })
    }

    /// The name librdkafka and Kafka use.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Plaintext => "PLAINTEXT",
            Protocol::Ssl => "SSL",
            Protocol::SaslPlaintext => "SASL_PLAINTEXT",
            Protocol::SaslSsl => "SASL_SSL",
        }
    }

    /// True for SSL and SASL_SSL.
    pub fn tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }

    /// True for SASL_PLAINTEXT and SASL_SSL.
    pub fn sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
}

/// A SASL mechanism the protocol client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// PLAIN.
    Plain,
    /// SCRAM-SHA-256.
    ScramSha256,
    /// SCRAM-SHA-512.
    ScramSha512,
    /// OAUTHBEARER, with tokens from a [`TokenSource`].
    OAuthBearer,
}

impl Mechanism {
    /// The mechanism a `sasl.mechanism` value names (as written).
    pub fn parse(value: &str) -> Option<Mechanism> {
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
    pub fn name(self) -> &'static str {
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
pub enum Credentials {
    /// PLAIN and SCRAM: a user name and a password.
    Password {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// OAUTHBEARER: tokens from the configuration's token provider.
    Token(Arc<TokenSource>),
}

/// The SASL mechanism and credentials.
#[derive(Clone)]
pub struct SaslSettings {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// What it authenticates with.
    pub credentials: Credentials,
}

impl SaslSettings {
    /// PLAIN or SCRAM with a user name and a password.
    pub fn password(mechanism: Mechanism, username: &str, password: &str) -> SaslSettings {
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
    pub fn who(&self) -> String {
        match &self.credentials {
            Credentials::Password { username, .. } => {
                format!("user {}", quote(username))
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
pub struct TlsSettings {
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

/// What the client does to secure a connection.
#[derive(Debug, Clone)]
pub struct Security {
    /// The `security.protocol`.
    pub protocol: Protocol,
    /// TLS, when the protocol has it.
    pub tls: Option<TlsSettings>,
    /// SASL, when the protocol has it.
    pub sasl: Option<SaslSettings>,
}

impl Security {
    /// No TLS, no SASL.
    pub fn plaintext() -> Security {
        Security {
            protocol: Protocol::Plaintext,
            tls: None,
            sasl: None,
        }
    }
}

/// The inputs of a connection's TLS side, each named after the librdkafka
/// key it mirrors; [`TlsSettings::build`] loads and checks them.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// `ssl.ca.location`: a PEM file or a folder of PEM files (`probe` or
    /// unset, with no `ca_pem` either: the system's CA store).
    pub ca_location: Option<String>,
    /// `ssl.ca.pem`: CA certificates as PEM text.
    pub ca_pem: Option<String>,
    /// `ssl.certificate.location`: the client certificate (chain), PEM.
    pub certificate_location: Option<String>,
    /// `ssl.certificate.pem`.
    pub certificate_pem: Option<String>,
    /// `ssl.key.location`: the client key, PEM (PKCS#8, PKCS#1, SEC1, or
    /// an encrypted PKCS#8 key).
    pub key_location: Option<String>,
    /// `ssl.key.pem`.
    pub key_pem: Option<String>,
    /// `ssl.key.password`, for an encrypted key.
    pub key_password: Option<String>,
    /// False with `ssl.endpoint.identification.algorithm=none`.
    pub verify_hostname: bool,
    /// The `security.protocol` as given, for messages.
    pub protocol_name: String,
}

impl TlsSettings {
    /// Loads the files `options` name and builds the TLS configuration
    /// ([`Error::InvalidArgument`] naming the setting at fault).
    pub fn build(options: &TlsOptions) -> Result<TlsSettings> {
        tls_settings(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;

    #[test]
    fn names_a_missing_ca_file() {
        let e = TlsSettings::build(&TlsOptions {
            ca_location: Some("/no/such/ca.pem".into()),
            verify_hostname: true,
            protocol_name: "SSL".into(),
            ..TlsOptions::default()
        })
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
