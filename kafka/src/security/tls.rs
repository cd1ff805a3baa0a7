//! The TLS side of a connection's security: the rustls configuration built
//! from [`TlsOptions`] (CA certificates, the client's identity and its
//! key, hostname verification), and the errors of a handshake named after
//! the setting that would mend them.

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::*;

/// The crypto of every TLS connection: rustls with *ring*.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(key: &str, value: &str, why: impl fmt::Display) -> Error {
    Error::InvalidArgument(format!("the setting {key}={value}: {why}"))
}

pub(super) fn tls_settings(options: &TlsOptions) -> Result<TlsSettings> {
    let verify_hostname = options.verify_hostname;
    let mut roots = RootCertStore::empty();
    let mut trust = Vec::new();
    let location = options
        .ca_location
        .as_deref()
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
    if let Some(pem) = options.ca_pem.as_deref() {
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
                options.protocol_name,
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
    let config = match client_identity(options)? {
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
    options: &TlsOptions,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>> {
    let cert = match (
        options.certificate_location.as_deref(),
        options.certificate_pem.as_deref(),
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
    let password = options.key_password.as_deref();
    let key = match (options.key_location.as_deref(), options.key_pem.as_deref()) {
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
