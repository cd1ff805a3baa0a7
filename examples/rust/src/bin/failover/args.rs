//! The demo's command line.

use std::path::PathBuf;
use std::time::Duration;

use krabka_examples::cli::Flags;

/// `failover --help`.
pub const USAGE: &str = "\
usage: failover [--bootstrap HOST:PORT] [options]

  --bootstrap HOST:PORT     an existing cluster (default: start the local one with ci/kafka.sh)
  --partitions N            partitions of the state topic (default 16)
  --lease-ms MS             lease duration (default 3000)
  --renew-ms MS             renew interval (default 1000)
  --stagger-ms MS           challenge stagger (default 1000)
  --refresh-ms MS           how often the view refreshes (default 250)
  --kafka-setting KEY=VAL   a librdkafka setting for every client (repeatable)
  --member-bin PATH         the member binary (default: next to this one)
  --plain                   no terminal redrawing (one snapshot per change)";

/// The parsed command line.
#[derive(Clone, Debug)]
pub struct Args {
    /// An existing cluster, else the local one.
    pub bootstrap: Option<String>,
    /// Partitions of the state topic.
    pub partitions: i32,
    /// Lease duration (ms).
    pub lease_ms: u64,
    /// Renew interval (ms).
    pub renew_ms: u64,
    /// Challenge stagger (ms).
    pub stagger_ms: u64,
    /// How often the view refreshes.
    pub refresh: Duration,
    /// librdkafka settings for every client.
    pub settings: Vec<(String, String)>,
    /// The member binary, if not the one next to this binary.
    pub member_bin: Option<PathBuf>,
    /// No terminal redrawing.
    pub plain: bool,
}

impl Args {
    /// Parses `flags`; `Err("")` asks for the usage text.
    pub fn parse(mut flags: Flags) -> Result<Args, String> {
        let mut a = Args {
            bootstrap: None,
            partitions: 16,
            lease_ms: 3000,
            renew_ms: 1000,
            stagger_ms: 1000,
            refresh: Duration::from_millis(250),
            settings: Vec::new(),
            member_bin: None,
            plain: false,
        };
        while let Some(flag) = flags.next_flag() {
            let f = flag.as_str();
            match f {
                "--bootstrap" => a.bootstrap = Some(flags.value(f)?),
                "--partitions" => a.partitions = flags.number(f)?,
                "--lease-ms" => a.lease_ms = flags.number(f)?,
                "--renew-ms" => a.renew_ms = flags.number(f)?,
                "--stagger-ms" => a.stagger_ms = flags.number(f)?,
                "--refresh-ms" => {
                    a.refresh = flags.millis(f)?.max(Duration::from_millis(50));
                }
                "--kafka-setting" => a.settings.push(flags.setting(f)?),
                "--member-bin" => a.member_bin = Some(PathBuf::from(flags.value(f)?)),
                "--plain" => a.plain = true,
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(a)
    }
}
