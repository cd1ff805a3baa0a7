//! Command-line helpers shared by the binaries and the benchmark: every
//! error names the flag and the value.

use std::time::Duration;

/// The arguments of a command line, consumed flag by flag.
#[derive(Debug)]
pub struct Flags {
    args: std::vec::IntoIter<String>,
}

impl Flags {
    /// The flags of `args` (without the program name).
    pub fn new(args: impl IntoIterator<Item = String>) -> Flags {
        Flags {
            args: args.into_iter().collect::<Vec<_>>().into_iter(),
        }
    }

    /// The process's own arguments, without the program name.
    pub fn from_env() -> Flags {
        Flags::new(std::env::args().skip(1))
    }

    /// The next flag, or `None` at the end.
    pub fn next_flag(&mut self) -> Option<String> {
        self.args.next()
    }

    /// The value of `flag` (the next argument).
    pub fn value(&mut self, flag: &str) -> Result<String, String> {
        self.args
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))
    }

    /// The value of `flag` as whole milliseconds.
    pub fn millis(&mut self, flag: &str) -> Result<Duration, String> {
        let v = self.value(flag)?;
        parse_ms(flag, &v)
    }

    /// The value of `flag` as a whole number.
    pub fn number<T: std::str::FromStr>(&mut self, flag: &str) -> Result<T, String> {
        let v = self.value(flag)?;
        v.parse()
            .map_err(|_| format!("{flag} takes a whole number, got {v:?}"))
    }

    /// The value of `flag` as a `KEY=VALUE` librdkafka setting.
    pub fn setting(&mut self, flag: &str) -> Result<(String, String), String> {
        let v = self.value(flag)?;
        parse_setting(flag, &v)
    }
}

/// Parses whole milliseconds.
pub fn parse_ms(flag: &str, value: &str) -> Result<Duration, String> {
    value
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("{flag} takes whole milliseconds, got {value:?}"))
}

/// Parses a `KEY=VALUE` setting with a non-empty key.
pub fn parse_setting(flag: &str, value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{flag} takes KEY=VALUE, got {value:?}")),
    }
}

/// A command line's outcome when it asks for help (`Err` with an empty
/// message) or is wrong: prints the message and the usage, and returns the
/// exit code (0 for help, 2 for a mistake).
pub fn usage_exit(program: &str, message: &str, usage: &str) -> i32 {
    if !message.is_empty() {
        eprintln!("{program}: {message}");
    }
    eprintln!("{usage}");
    if message.is_empty() {
        0
    } else {
        crate::exit::USAGE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_parsed_and_mistakes_named() {
        let mut f = Flags::new(
            ["--lease-ms", "250", "--n", "x", "--s", "a=b=c", "--last"].map(String::from),
        );
        assert_eq!(f.next_flag().as_deref(), Some("--lease-ms"));
        assert_eq!(f.millis("--lease-ms"), Ok(Duration::from_millis(250)));
        f.next_flag();
        let e = f.number::<u32>("--n").unwrap_err();
        assert!(e.contains("--n") && e.contains("\"x\""), "{e}");
        f.next_flag();
        assert_eq!(f.setting("--s"), Ok(("a".into(), "b=c".into())));
        f.next_flag();
        assert_eq!(f.value("--last"), Err("--last needs a value".into()));
        assert!(parse_setting("--k", "=v")
            .unwrap_err()
            .contains("KEY=VALUE"));
        assert!(parse_ms("--ms", "-1").unwrap_err().contains("--ms"));
    }
}
