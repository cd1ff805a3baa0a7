//! Kafka settings from the command line: `--bootstrap`, repeated `-X
//! key=value` (librdkafka style) and a properties file, in that order of
//! precedence, passed unchanged to the core's Kafka transport.

use std::path::{Path, PathBuf};

use clap::Args;
use krabka_coordination::client::Client;
use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_coordination::ElectionOptions;

use crate::Failure;

/// The Kafka settings every subcommand takes.
#[derive(Debug, Args)]
pub struct KafkaArgs {
    /// Bootstrap servers (librdkafka's bootstrap.servers); default
    /// $KRABKA_BOOTSTRAP.
    #[arg(long, short = 'b', env = "KRABKA_BOOTSTRAP", global = true)]
    pub bootstrap: Option<String>,

    /// A librdkafka setting, e.g. -X security.protocol=SASL_SSL (repeatable;
    /// overrides --config).
    #[arg(short = 'X', value_name = "KEY=VALUE", global = true)]
    pub settings: Vec<String>,

    /// A file of librdkafka settings in the Java properties format, as
    /// Kafka's tools read `client.properties` (`key=value` or `key: value`,
    /// `#` and `!` comments, `\` continuations and escapes).
    #[arg(long = "config", value_name = "FILE", global = true)]
    pub config_file: Option<PathBuf>,

    // The help names the library's state topic, used when not given.
    #[arg(long, value_name = "TOPIC", global = true,
          help = format!("The state topic [default: {}]", krabka_coordination::STATE_TOPIC))]
    pub state_topic: Option<String>,

    /// The partition count of the state topic (every member must use the
    /// same).
    #[arg(long, value_name = "N", global = true, default_value_t = ElectionOptions::DEFAULT_PARTITIONS)]
    pub partitions: i32,
}

impl KafkaArgs {
    /// The transport's configuration: file, then `-X`, then `--bootstrap`.
    pub fn config(&self) -> Result<KafkaConfig, Failure> {
        let mut pairs = Vec::new();
        if let Some(file) = &self.config_file {
            pairs.extend(read_properties(file)?);
        }
        for s in &self.settings {
            pairs.push(split_setting(s, "-X")?);
        }
        let mut bootstrap = self.bootstrap.clone();
        if bootstrap.is_none() {
            bootstrap = pairs
                .iter()
                .rev()
                .find(|(k, _)| k == "bootstrap.servers")
                .map(|(_, v)| v.clone());
        }
        let Some(bootstrap) = bootstrap.filter(|b| !b.trim().is_empty()) else {
            return Err(Failure::usage(
                "no bootstrap address: give --bootstrap HOST:PORT, -X bootstrap.servers=..., a --config file \
                 with bootstrap.servers, or set KRABKA_BOOTSTRAP",
            ));
        };
        let mut config = KafkaConfig::new(bootstrap.trim());
        for (k, v) in pairs {
            if k != "bootstrap.servers" {
                config = config.set(k, v);
            }
        }
        if let Some(topic) = &self.state_topic {
            config = config.with_state_topic(topic);
        }
        Ok(config)
    }

    /// A client with these settings and partition count.
    pub fn client(&self) -> Result<Client, Failure> {
        Ok(Client::new(self.config()?)?.with_partitions(self.partitions)?)
    }
}

/// `key=value`, both sides trimmed, the key not empty.
fn split_setting(s: &str, origin: &str) -> Result<(String, String), Failure> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(Failure::usage(format!(
            "{origin} {s:?}: expected KEY=VALUE, e.g. security.protocol=SASL_SSL"
        ))),
    }
}

/// The settings of a properties file, read with Java's rules
/// ([`crate::properties`]), as Kafka's tools read `client.properties`.
fn read_properties(path: &Path) -> Result<Vec<(String, String)>, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::usage(format!("--config {}: {e}", path.display())))?;
    crate::properties::parse(&crate::properties::decode(&bytes)).map_err(|bad| {
        Failure::usage(format!(
            "--config {} line {}: {}",
            path.display(),
            bad.line,
            bad.why
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(bootstrap: Option<&str>, settings: &[&str], file: Option<PathBuf>) -> KafkaArgs {
        KafkaArgs {
            bootstrap: bootstrap.map(str::to_owned),
            settings: settings.iter().map(|s| s.to_string()).collect(),
            config_file: file,
            state_topic: None,
            partitions: 16,
        }
    }

    #[test]
    fn settings_come_from_the_file_then_x_then_bootstrap() {
        let dir = std::env::temp_dir().join(format!("krabka-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("client.properties");
        std::fs::write(
            &file,
            "# a comment\nbootstrap.servers=file:9092\nclient.id = from-file\n\nsasl.mechanism=PLAIN\n",
        )
        .unwrap();
        let c = args(None, &["client.id=from-x"], Some(file.clone()))
            .config()
            .unwrap();
        assert_eq!(c.bootstrap(), "file:9092");
        assert_eq!(c.get("client.id"), Some("from-x"));
        assert_eq!(c.get("sasl.mechanism"), Some("PLAIN"));
        let c = args(Some("flag:9092"), &["bootstrap.servers=x:1"], Some(file))
            .config()
            .unwrap();
        assert_eq!(c.bootstrap(), "flag:9092");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_settings_are_named() {
        let e = args(Some("b:1"), &["no-equals"], None)
            .config()
            .unwrap_err();
        assert!(e.message.contains("no-equals"), "{}", e.message);
        let e = args(None, &[], None).config().unwrap_err();
        assert!(e.message.contains("--bootstrap"), "{}", e.message);
        let e = args(Some("b:1"), &[], Some("/no/such/file".into()))
            .config()
            .unwrap_err();
        assert!(e.message.contains("/no/such/file"), "{}", e.message);
    }
}
