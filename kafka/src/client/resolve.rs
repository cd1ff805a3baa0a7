//! A bootstrap address whose host names do not resolve fails at once,
//! naming them, rather than as a connect timeout.
//!
//! Only before any broker has answered the client: once one has, a name
//! that stops resolving (a broker restarting under a new address) is the
//! connect path's to retry like any unreachable broker.

use std::sync::atomic::Ordering;

use super::Client;
use crate::error::{Error, Result};

impl Client {
    /// Before any broker has answered: [`Error::Fatal`] (or
    /// [`Error::Transient`] when the resolver says to try again) naming the
    /// bootstrap address when none of its hosts resolves. `Ok` when one
    /// resolves, when a broker has answered, or when the resolver does not
    /// answer within the connect timeout (the connect then times out as
    /// usual). Each host is asked once per call.
    pub(super) async fn check_resolves(&self) -> Result<()> {
        if self.inner.reached.load(Ordering::Relaxed) {
            return Ok(());
        }
        let within = self.inner.connect_timeout;
        let mut failures = Vec::new();
        for addr in &self.inner.bootstrap {
            match tokio::time::timeout(within, tokio::net::lookup_host(addr.as_str())).await {
                Ok(Ok(mut found)) => {
                    if found.next().is_some() {
                        return Ok(());
                    }
                    failures.push((addr.as_str(), "it has no address".to_owned()));
                }
                Ok(Err(e)) => failures.push((addr.as_str(), e.to_string())),
                Err(_) => return Ok(()),
            }
        }
        Err(unresolved(&self.inner.bootstrap_text, &failures))
    }
}

/// The error of a bootstrap address none of whose hosts resolves.
fn unresolved(bootstrap: &str, failures: &[(&str, String)]) -> Error {
    let again = failures
        .iter()
        .any(|(_, why)| why.to_ascii_lowercase().contains("temporary failure"));
    let hosts: Vec<String> = failures
        .iter()
        .map(|(addr, why)| {
            let host = addr.rsplit_once(':').map_or(*addr, |(h, _)| h);
            format!("{host:?} ({why})")
        })
        .collect();
    let context = format!("connecting to the bootstrap address {bootstrap}");
    let cause = format!(
        "the host name does not resolve: {}; check the name in bootstrap.servers",
        hosts.join(", ")
    );
    if again {
        Error::transient(context, cause)
    } else {
        Error::fatal(context, cause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settings;

    #[tokio::test]
    async fn a_host_that_does_not_resolve_fails_at_once_naming_it() {
        let client = Client::new(&Settings::new("no-such-host.invalid:9092")).unwrap();
        let started = std::time::Instant::now();
        let e = client.check_resolves().await.unwrap_err();
        assert!(started.elapsed() < client.inner.connect_timeout, "{e}");
        let m = e.to_string();
        assert!(m.contains("\"no-such-host.invalid\""), "{m}");
        assert!(m.contains("does not resolve"), "{m}");
    }

    #[tokio::test]
    async fn one_host_that_resolves_is_enough() {
        let client = Client::new(&Settings::new("no-such-host.invalid:9092,127.0.0.1:1")).unwrap();
        client.check_resolves().await.unwrap();
    }
}
