//! The client side of the SASL mechanisms the protocol client speaks: PLAIN
//! (RFC 4616), SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) and
//! OAUTHBEARER (RFC 7628, KIP-255), as Kafka runs them inside
//! SaslAuthenticate requests (KIP-152).
//!
//! OAUTHBEARER sends one message, the GS2 header without channel binding or
//! authorization id and the token: `n,,\x01auth=Bearer <token>\x01\x01` (no
//! extensions). The broker answers nothing when it takes the token; when it
//! refuses it, it answers a JSON error (`{"status":"invalid_token"}`), the
//! client answers `\x01`, and the broker then fails the exchange.
//!
//! Only the message exchange lives here; the hashing is *ring*'s (HMAC,
//! SHA-2, PBKDF2). As in Kafka's Java client and in librdkafka, the password
//! is used as its UTF-8 bytes (no SASLprep), no channel binding is offered
//! (`n,,`), and the server's signature is checked before the exchange counts
//! as done.

use std::num::NonZeroU32;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ring::rand::SecureRandom as _;
use ring::{digest, hmac, pbkdf2};

use crate::security::{Credentials, Mechanism, SaslSettings};

/// The fewest PBKDF2 iterations a SCRAM server may ask for (Kafka's minimum).
const MIN_ITERATIONS: u32 = 4096;

/// What to do after a server message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send these bytes in the next SaslAuthenticate request.
    Send(Vec<u8>),
    /// Authenticated.
    Done,
}

/// The hash functions of one SCRAM variant.
#[derive(Clone, Copy)]
pub(crate) struct ScramHash {
    digest: &'static digest::Algorithm,
    hmac: hmac::Algorithm,
    pbkdf2: pbkdf2::Algorithm,
}

impl ScramHash {
    /// SCRAM-SHA-256 (RFC 7677).
    pub(crate) fn sha256() -> ScramHash {
        ScramHash {
            digest: &digest::SHA256,
            hmac: hmac::HMAC_SHA256,
            pbkdf2: pbkdf2::PBKDF2_HMAC_SHA256,
        }
    }

    /// SCRAM-SHA-512, as Kafka defines it.
    pub(crate) fn sha512() -> ScramHash {
        ScramHash {
            digest: &digest::SHA512,
            hmac: hmac::HMAC_SHA512,
            pbkdf2: pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// SCRAM-SHA-1: only for RFC 5802's own test vector.
    #[cfg(test)]
    fn sha1() -> ScramHash {
        ScramHash {
            digest: &digest::SHA1_FOR_LEGACY_USE_ONLY,
            hmac: hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            pbkdf2: pbkdf2::PBKDF2_HMAC_SHA1,
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac, key), data)
            .as_ref()
            .to_vec()
    }
}

enum State {
    /// PLAIN: the one message went out.
    PlainSent,
    /// SCRAM: client-first went out.
    FirstSent {
        client_first_bare: String,
        nonce: String,
    },
    /// SCRAM: client-final went out; the server must prove this signature.
    FinalSent {
        server_signature: Vec<u8>,
    },
    /// OAUTHBEARER: the token went out.
    TokenSent,
    /// OAUTHBEARER: the server refused the token (its error, as it sent
    /// it); the client acknowledged, the server ends the exchange.
    TokenRefused,
    Done,
}

/// One SASL exchange, from the first client message to the server's last.
pub(crate) struct Exchange {
    hash: Option<ScramHash>,
    password: Vec<u8>,
    state: State,
    /// What the server said when it refused the credentials, if it said
    /// anything (OAUTHBEARER's JSON error).
    refusal: Option<String>,
}

impl Exchange {
    /// Starts an exchange for `settings`: the exchange and the first message
    /// to send. OAUTHBEARER starts with [`Exchange::oauth`] instead, once
    /// the token is at hand.
    pub(crate) fn start(settings: &SaslSettings) -> Result<(Exchange, Vec<u8>), String> {
        let Credentials::Password { username, password } = &settings.credentials else {
            return Err("OAUTHBEARER starts with a token".into());
        };
        match settings.mechanism {
            Mechanism::Plain => {
                // [authzid] NUL authcid NUL passwd, no authzid.
                let mut msg = Vec::with_capacity(2 + username.len() + password.len());
                msg.push(0);
                msg.extend_from_slice(username.as_bytes());
                msg.push(0);
                msg.extend_from_slice(password.as_bytes());
                Ok((Exchange::new(State::PlainSent), msg))
            }
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let hash = if settings.mechanism == Mechanism::ScramSha256 {
                    ScramHash::sha256()
                } else {
                    ScramHash::sha512()
                };
                Ok(Exchange::scram(hash, username, password, &new_nonce()?))
            }
            Mechanism::OAuthBearer => Err("OAUTHBEARER starts with a token".into()),
        }
    }

    fn new(state: State) -> Exchange {
        Exchange {
            hash: None,
            password: Vec::new(),
            state,
            refusal: None,
        }
    }

    /// An OAUTHBEARER exchange with `token` (RFC 7628 section 3.1, no
    /// authorization id, no extensions): the exchange and its one message.
    pub(crate) fn oauth(token: &str) -> (Exchange, Vec<u8>) {
        let msg = format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes();
        (Exchange::new(State::TokenSent), msg)
    }

    /// What the server said when it refused the credentials, if anything.
    pub(crate) fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// A SCRAM exchange with a given client nonce.
    pub(crate) fn scram(
        hash: ScramHash,
        username: &str,
        password: &str,
        nonce: &str,
    ) -> (Exchange, Vec<u8>) {
        let client_first_bare = format!("n={},r={nonce}", escape_name(username));
        let first = format!("n,,{client_first_bare}").into_bytes();
        let exchange = Exchange {
            hash: Some(hash),
            password: password.as_bytes().to_vec(),
            state: State::FirstSent {
                client_first_bare,
                nonce: nonce.to_owned(),
            },
            refusal: None,
        };
        (exchange, first)
    }

    /// Takes the server's answer to the last message sent. An error says
    /// what was wrong with it (never a secret).
    pub(crate) fn step(&mut self, server: &[u8]) -> Result<Step, String> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::PlainSent => Ok(Step::Done),
            State::TokenSent if server.is_empty() => Ok(Step::Done),
            State::TokenSent => {
                // RFC 7628 section 3.2.2: the error is acknowledged with a
                // lone 0x01; the server then fails the exchange.
                self.refusal = Some(String::from_utf8_lossy(server).into_owned());
                self.state = State::TokenRefused;
                Ok(Step::Send(vec![0x01]))
            }
            State::TokenRefused => Err(format!(
                "the server refused the token ({}) but did not end the exchange",
                self.refusal.as_deref().unwrap_or_default()
            )),
            State::FirstSent {
                client_first_bare,
                nonce,
            } => {
                let hash = self.hash.expect("SCRAM has a hash");
                let server_first = std::str::from_utf8(server)
                    .map_err(|_| "the server-first-message is not UTF-8".to_owned())?;
                let (final_msg, server_signature) = client_final(
                    hash,
                    &self.password,
                    &client_first_bare,
                    &nonce,
                    server_first,
                )?;
                self.password.clear();
                self.state = State::FinalSent { server_signature };
                Ok(Step::Send(final_msg.into_bytes()))
            }
            State::FinalSent { server_signature } => {
                let server_final = std::str::from_utf8(server)
                    .map_err(|_| "the server-final-message is not UTF-8".to_owned())?;
                if let Some(e) = server_final.strip_prefix("e=") {
                    return Err(format!("the server refused the proof: {e}"));
                }
                let v = attribute(server_final, 'v').ok_or_else(|| {
                    format!("the server-final-message {server_final:?} has no v=")
                })?;
                let v = B64
                    .decode(v)
                    .map_err(|_| "the server signature is not base64".to_owned())?;
                if !same(&v, &server_signature) {
                    return Err(
                        "the server's signature is wrong: the broker does not know the password \
                         (not the broker holding the credentials, or a man in the middle)"
                            .into(),
                    );
                }
                Ok(Step::Done)
            }
            State::Done => Err("the server sent more after the exchange ended".into()),
        }
    }
}

/// The client-final-message and the server signature to expect, from the
/// server-first-message (RFC 5802 section 3).
fn client_final(
    hash: ScramHash,
    password: &[u8],
    client_first_bare: &str,
    nonce: &str,
    server_first: &str,
) -> Result<(String, Vec<u8>), String> {
    if server_first.starts_with("m=") {
        return Err("the server asks for a SCRAM extension (m=) this client does not know".into());
    }
    let r = attribute(server_first, 'r')
        .ok_or_else(|| format!("the server-first-message {server_first:?} has no nonce (r=)"))?;
    if !r.starts_with(nonce) || r.len() == nonce.len() {
        return Err("the server's nonce does not extend the client's".into());
    }
    let salt = attribute(server_first, 's')
        .ok_or_else(|| format!("the server-first-message {server_first:?} has no salt (s=)"))?;
    let salt = B64
        .decode(salt)
        .map_err(|_| "the server's salt is not base64".to_owned())?;
    let iterations: u32 = attribute(server_first, 'i')
        .and_then(|i| i.parse().ok())
        .ok_or_else(|| {
            format!("the server-first-message {server_first:?} has no iteration count (i=)")
        })?;
    if iterations < MIN_ITERATIONS {
        return Err(format!(
            "the server asks for {iterations} iterations, fewer than the minimum {MIN_ITERATIONS}"
        ));
    }
    let mut salted = vec![0u8; hash.digest.output_len()];
    pbkdf2::derive(
        hash.pbkdf2,
        NonZeroU32::new(iterations).expect("at least MIN_ITERATIONS"),
        &salt,
        password,
        &mut salted,
    );
    let client_key = hash.hmac(&salted, b"Client Key");
    let stored_key = digest::digest(hash.digest, &client_key);
    // "biws" is base64("n,,"): no channel binding, no authzid.
    let without_proof = format!("c=biws,r={r}");
    let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
    let client_signature = hash.hmac(stored_key.as_ref(), auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&client_signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let server_key = hash.hmac(&salted, b"Server Key");
    let server_signature = hash.hmac(&server_key, auth_message.as_bytes());
    Ok((
        format!("{without_proof},p={}", B64.encode(proof)),
        server_signature,
    ))
}

/// The value of attribute `name` (`name=value`) of a SCRAM message.
fn attribute(message: &str, name: char) -> Option<&str> {
    message.split(',').find_map(|a| {
        let mut chars = a.chars();
        (chars.next() == Some(name) && chars.next() == Some('=')).then(|| &a[2..])
    })
}

/// A user name as SCRAM writes it: `=` as `=3D`, `,` as `=2C`.
fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// A fresh client nonce: 24 random bytes, base64 (printable, no comma).
fn new_nonce() -> Result<String, String> {
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "no random bytes for the SCRAM nonce".to_owned())?;
    Ok(B64.encode(bytes))
}

/// Equality in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one exchange against the messages of a published example.
    fn check_vector(
        hash: ScramHash,
        nonce: &str,
        client_first: &str,
        server_first: &str,
        client_final: &str,
        server_final: &str,
    ) {
        let (mut ex, first) = Exchange::scram(hash, "user", "pencil", nonce);
        assert_eq!(String::from_utf8(first).unwrap(), client_first);
        let Step::Send(fin) = ex.step(server_first.as_bytes()).unwrap() else {
            panic!("SCRAM sends a client-final-message")
        };
        assert_eq!(String::from_utf8(fin).unwrap(), client_final);
        assert_eq!(ex.step(server_final.as_bytes()).unwrap(), Step::Done);
    }

    #[test]
    fn rfc_7677_scram_sha_256_vector() {
        check_vector(
            ScramHash::sha256(),
            "rOprNGfwEbeRWgbNEkqO",
            "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        );
    }

    #[test]
    fn rfc_5802_scram_sha_1_vector() {
        // The same exchange code with SHA-1 reproduces RFC 5802's example.
        check_vector(
            ScramHash::sha1(),
            "fyko+d2lbbFgONRv9qkxdawL",
            "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
        );
    }

    fn after_first(server_first: &str) -> Result<Step, String> {
        let (mut ex, _) = Exchange::scram(
            ScramHash::sha256(),
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        ex.step(server_first.as_bytes())
    }

    #[test]
    fn refuses_a_bad_server() {
        let good = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        assert!(after_first(good).is_ok());
        // A nonce that is not the client's, or adds nothing.
        assert!(after_first("r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").is_err());
        assert!(after_first("r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").is_err());
        // Too few iterations, a missing salt, an extension.
        let e =
            after_first("r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000").unwrap_err();
        assert!(e.contains("1000"), "{e}");
        assert!(after_first("r=rOprNGfwEbeRWgbNEkqOx,i=4096").is_err());
        assert!(
            after_first("m=x,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").is_err()
        );

        // A wrong server signature, an error from the server.
        let (mut ex, _) = Exchange::scram(
            ScramHash::sha256(),
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        ex.step(good.as_bytes()).unwrap();
        let e = ex
            .step(b"v=AAAARBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(e.contains("signature"), "{e}");
        let (mut ex, _) = Exchange::scram(
            ScramHash::sha256(),
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        ex.step(good.as_bytes()).unwrap();
        let e = ex.step(b"e=invalid-proof").unwrap_err();
        assert!(e.contains("invalid-proof"), "{e}");
    }

    #[test]
    fn escapes_user_names_and_makes_plain_messages() {
        let (_, first) = Exchange::scram(ScramHash::sha512(), "a=b,c", "p", "n0");
        assert_eq!(first, b"n,,n=a=3Db=2Cc,r=n0");
        let settings = SaslSettings::password(Mechanism::Plain, "alice", "pw");
        let (mut ex, msg) = Exchange::start(&settings).unwrap();
        assert_eq!(msg, b"\0alice\0pw");
        assert_eq!(ex.step(b"").unwrap(), Step::Done);
    }

    #[test]
    fn nonces_are_fresh_and_printable() {
        let settings = SaslSettings::password(Mechanism::ScramSha512, "u", "p");
        let (_, a) = Exchange::start(&settings).unwrap();
        let (_, b) = Exchange::start(&settings).unwrap();
        assert_ne!(a, b);
        let a = String::from_utf8(a).unwrap();
        assert!(a.starts_with("n,,n=u,r=") && a.len() > 20, "{a}");
    }

    #[test]
    fn oauthbearer_sends_the_rfc_7628_initial_response() {
        let (mut ex, msg) = Exchange::oauth("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.");
        assert_eq!(
            msg,
            b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.\x01\x01"
        );
        // An empty answer: the broker took the token.
        assert_eq!(ex.step(b"").unwrap(), Step::Done);
        assert!(ex.refusal().is_none());
    }

    #[test]
    fn oauthbearer_acknowledges_a_refusal_and_keeps_what_the_server_said() {
        let (mut ex, _) = Exchange::oauth("bad");
        let error = br#"{"status":"invalid_token"}"#;
        assert_eq!(ex.step(error).unwrap(), Step::Send(vec![0x01]));
        assert_eq!(ex.refusal(), Some(r#"{"status":"invalid_token"}"#));
        // A server that goes on instead of failing the exchange.
        let e = ex.step(b"").unwrap_err();
        assert!(e.contains("invalid_token"), "{e}");
    }
}
