//! The member's command line.

use std::time::Duration;

use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_examples::cli::Flags;

use crate::pipe::Pipe;

/// `member --help`.
pub const USAGE: &str = "\
usage: member --bootstrap HOST:PORT --role ROLE --member ID [options]

  --bootstrap HOST:PORT     Kafka bootstrap servers (or KRABKA_BOOTSTRAP)
  --role ROLE               the role (or KRABKA_ROLE)
  --member ID               this member's id (or KRABKA_MEMBER)
  --partitions N            partitions of the state topic (default 16)
  --lease-ms MS             lease duration (default 3000)
  --renew-ms MS             renew interval (default 1000)
  --stagger-ms MS           challenge stagger (default 1000)
  --poll-wait-ms MS         longest wait of one poll of the state partition (default 1000)
  --fetch-wait-ms MS        fetch.wait.max.ms of the state consumer (transport default)
  --state-topic NAME        the state topic (default __coordination_state)
  --data-topic NAME         write guarded records to partition 0 of NAME while leading
  --write-every-ms MS       pause between guarded writes (default 150)
  --pipe-from TOPIC         while leading, pipe partition 0 of TOPIC to --pipe-to, one output
                            per input, the input offsets committed in each guarded write
  --pipe-to TOPIC           the pipeline's output topic (partition 0)
  --pipe-group GROUP        the consumer group of the pipeline's offsets (default: ROLE-pipe)
  --pipe-batch N            the most inputs whose outputs go in one transaction (default 100)
  --kafka-setting KEY=VAL   a librdkafka setting for every client (repeatable)
  --skip-topic-check        do not check the state topic's partitions and cleanup policy
  --rejoin                  after a `resign` command, register again and wait for a turn
  --exit-on-stdin-eof       the end of stdin stops the member like SIGTERM

stdin commands: resign, status, quit. stdout: JSON lines. exit: 0 ok, 1 error, 2 usage, 3 fenced, 4 lease expired.";

/// The parsed command line.
#[derive(Debug, Clone)]
pub struct Args {
    /// Kafka bootstrap servers.
    pub bootstrap: String,
    /// The role.
    pub role: String,
    /// This member's id.
    pub member: String,
    /// Partitions of the state topic.
    pub partitions: i32,
    /// Lease duration.
    pub lease: Duration,
    /// Renew interval.
    pub renew: Duration,
    /// Challenge stagger.
    pub stagger: Duration,
    /// Longest wait of one poll of the state partition.
    pub poll_wait: Duration,
    /// `fetch.wait.max.ms` of the state consumer, if not the default.
    pub fetch_wait: Option<Duration>,
    /// The state topic, if not the default.
    pub state_topic: Option<String>,
    /// Where guarded records go while leading.
    pub data_topic: Option<String>,
    /// Pause between guarded writes.
    pub write_every: Duration,
    /// librdkafka settings for every client.
    pub settings: Vec<(String, String)>,
    /// The pipeline run while leading, instead of `data_topic`'s writes.
    pub pipe: Option<Pipe>,
    /// Skip the state topic's check.
    pub skip_topic_check: bool,
    /// Register again after a `resign` command.
    pub rejoin: bool,
    /// Stop like on SIGTERM when stdin ends.
    pub exit_on_stdin_eof: bool,
}

impl Args {
    /// Parses `flags`; `Err("")` asks for the usage text.
    pub fn parse(mut flags: Flags) -> Result<Args, String> {
        let env = |k: &str| std::env::var(k).unwrap_or_default();
        let mut a = Args {
            bootstrap: env("KRABKA_BOOTSTRAP"),
            role: env("KRABKA_ROLE"),
            member: env("KRABKA_MEMBER"),
            partitions: 16,
            lease: Duration::from_secs(3),
            renew: Duration::from_secs(1),
            stagger: Duration::from_secs(1),
            poll_wait: Duration::from_secs(1),
            fetch_wait: None,
            state_topic: None,
            data_topic: None,
            write_every: Duration::from_millis(150),
            settings: Vec::new(),
            pipe: None,
            skip_topic_check: false,
            rejoin: false,
            exit_on_stdin_eof: false,
        };
        let (mut from, mut to, mut group, mut batch) = (None, None, None, 100usize);
        while let Some(flag) = flags.next_flag() {
            let f = flag.as_str();
            match f {
                "--bootstrap" => a.bootstrap = flags.value(f)?,
                "--role" => a.role = flags.value(f)?,
                "--member" => a.member = flags.value(f)?,
                "--partitions" => a.partitions = flags.number(f)?,
                "--lease-ms" => a.lease = flags.millis(f)?,
                "--renew-ms" => a.renew = flags.millis(f)?,
                "--stagger-ms" => a.stagger = flags.millis(f)?,
                "--poll-wait-ms" => a.poll_wait = flags.millis(f)?,
                "--fetch-wait-ms" => a.fetch_wait = Some(flags.millis(f)?),
                "--write-every-ms" => a.write_every = flags.millis(f)?,
                "--state-topic" => a.state_topic = Some(flags.value(f)?),
                "--data-topic" => a.data_topic = Some(flags.value(f)?),
                "--kafka-setting" => a.settings.push(flags.setting(f)?),
                "--pipe-from" => from = Some(flags.value(f)?),
                "--pipe-to" => to = Some(flags.value(f)?),
                "--pipe-group" => group = Some(flags.value(f)?),
                "--pipe-batch" => batch = flags.number(f)?,
                "--skip-topic-check" => a.skip_topic_check = true,
                "--rejoin" => a.rejoin = true,
                "--exit-on-stdin-eof" => a.exit_on_stdin_eof = true,
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        for (name, v) in [
            ("--bootstrap", &a.bootstrap),
            ("--role", &a.role),
            ("--member", &a.member),
        ] {
            if v.is_empty() {
                return Err(format!("{name} is required"));
            }
        }
        a.pipe = match (from, to) {
            (Some(from), Some(to)) if batch > 0 => Some(Pipe {
                from,
                to,
                group: group.unwrap_or_else(|| format!("{}-pipe", a.role)),
                batch,
            }),
            (Some(_), Some(_)) => return Err("--pipe-batch must be above zero".into()),
            (None, None) if group.is_none() => None,
            _ => {
                return Err(
                    "--pipe-from and --pipe-to go together (and --pipe-group with them)".into(),
                )
            }
        };
        if a.write_every.is_zero() {
            return Err("--write-every-ms must be above zero".into());
        }
        Ok(a)
    }

    /// The Kafka configuration of every client of the member.
    pub fn kafka_config(&self) -> KafkaConfig {
        let mut config = KafkaConfig::new(self.bootstrap.clone());
        for (k, v) in &self.settings {
            config = config.set(k.clone(), v.clone());
        }
        if let Some(t) = &self.state_topic {
            config = config.with_state_topic(t.clone());
        }
        if let Some(w) = self.fetch_wait {
            config = config.with_fetch_wait(w);
        }
        // The member's id in the clients' client.id, where broker logs show it.
        if config.get("client.id").is_none() {
            config = config.set("client.id", format!("krabka-{}", self.member));
        }
        config
    }
}
