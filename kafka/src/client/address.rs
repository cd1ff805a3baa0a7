//! Broker addresses: the bootstrap list a client is given, and the
//! `host:port` form of an address a broker names.

use crate::error::{Error, Result};

/// `host:port`, with an IPv6 host in brackets.
pub(super) fn format_addr(host: &str, port: i32) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Splits `host:port[,host:port...]`, dropping a `<protocol>://` prefix that
/// names the configured `security.protocol` (librdkafka refuses another one
/// too).
pub(super) fn parse_bootstrap(bootstrap: &str, protocol: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for raw in bootstrap.split(',') {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        let entry = match entry.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case(protocol) => rest,
            Some((scheme, _)) => {
                return Err(Error::InvalidArgument(format!(
                    "bootstrap address {entry:?} names the protocol {scheme}, but security.protocol is {protocol}"
                )))
            }
            None => entry,
        };
        let port_ok = entry
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !port_ok {
            return Err(Error::InvalidArgument(format!(
                "bootstrap address {entry:?} is not host:port"
            )));
        }
        out.push(entry.to_owned());
    }
    if out.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "bootstrap address {bootstrap:?} names no broker"
        )));
    }
    Ok(out)
}
