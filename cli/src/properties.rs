//! A properties file read with the rules of Java's `Properties.load`, as
//! Kafka's own tools read `client.properties`: `=`, `:` or whitespace
//! between key and value; `#` and `!` comments; a line ending in an odd
//! number of backslashes continues on the next one; escapes (`\t`, `\n`,
//! `\r`, `\f`, `\uXXXX`, and a backslash before any other character stands
//! for that character, so `\=`, `\:`, `\ ` and `\\` work in keys and
//! values). Leading whitespace of a value is dropped, trailing whitespace
//! kept, as Java does.
//!
//! The text is UTF-8, or ISO-8859-1 (Java's encoding for `load` from a
//! stream) when it is not valid UTF-8.

/// What is wrong with a properties file: the 1-based line and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// The line (of the file, the first of a continued line).
    pub line: usize,
    /// Why.
    pub why: String,
}

/// Decodes a file's bytes: UTF-8, else ISO-8859-1.
pub fn decode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

/// The key-value pairs of `text`, in file order (a later duplicate wins
/// where the caller keeps the last).
pub fn parse(text: &str) -> Result<Vec<(String, String)>, BadLine> {
    // Natural lines end with "\n", "\r" or "\r\n".
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let natural: Vec<&str> = text.split('\n').collect();
    let white = [' ', '\t', '\x0c'];
    let mut pairs = Vec::new();
    let mut i = 0;
    while i < natural.len() {
        let first = i + 1;
        let mut piece = natural[i].trim_start_matches(white);
        i += 1;
        if piece.is_empty() || piece.starts_with(['#', '!']) {
            continue;
        }
        let mut logical = String::new();
        loop {
            let trailing = piece.len() - piece.trim_end_matches('\\').len();
            if trailing % 2 == 0 {
                logical.push_str(piece);
                break;
            }
            // An odd number of backslashes: the next line continues this one.
            logical.push_str(&piece[..piece.len() - 1]);
            let Some(next) = natural.get(i) else {
                break;
            };
            piece = next.trim_start_matches(white);
            i += 1;
        }
        pairs.push(split(&logical).map_err(|why| BadLine { line: first, why })?);
    }
    Ok(pairs)
}

/// One logical line: the key up to the first unescaped `=`, `:` or
/// whitespace, then the value after whitespace and at most one `=` or `:`.
fn split(logical: &str) -> Result<(String, String), String> {
    let chars: Vec<char> = logical.chars().collect();
    let mut k = 0;
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 2,
            '=' | ':' | ' ' | '\t' | '\x0c' => break,
            _ => k += 1,
        }
    }
    let k = k.min(chars.len());
    let mut v = k;
    while v < chars.len() && matches!(chars[v], ' ' | '\t' | '\x0c') {
        v += 1;
    }
    if v < chars.len() && matches!(chars[v], '=' | ':') {
        v += 1;
        while v < chars.len() && matches!(chars[v], ' ' | '\t' | '\x0c') {
            v += 1;
        }
    }
    let key = unescape(&chars[..k])?;
    if key.is_empty() {
        return Err("no key before the value".to_owned());
    }
    let value = unescape(&chars[v..])?;
    Ok((key, value))
}

/// Java's escapes.
fn unescape(chars: &[char]) -> Result<String, String> {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = chars.get(i) else {
            break;
        };
        i += 1;
        match e {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\x0c'),
            'u' => {
                let hex: String = chars
                    .get(i..i + 4)
                    .map(|h| h.iter().collect())
                    .unwrap_or_default();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .ok_or_else(|| format!("malformed \\uxxxx escape \\u{hex}"))?;
                i += 4;
                // A surrogate pair, as Java writes characters past U+FFFF.
                if (0xD800..0xDC00).contains(&code) {
                    let low: String = chars
                        .get(i..i + 6)
                        .map(|h| h.iter().collect())
                        .unwrap_or_default();
                    let lo = low
                        .strip_prefix("\\u")
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .filter(|lo| (0xDC00..0xE000).contains(lo))
                        .ok_or_else(|| format!("\\u{hex} is half of a surrogate pair"))?;
                    i += 6;
                    let c = 0x10000 + ((code - 0xD800) << 10) + (lo - 0xDC00);
                    out.push(char::from_u32(c).ok_or("an invalid \\u escape")?);
                } else {
                    out.push(
                        char::from_u32(code)
                            .ok_or_else(|| format!("\\u{hex} is half of a surrogate pair"))?,
                    );
                }
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text).unwrap()
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn separators_comments_and_whitespace_follow_java() {
        let text = "# comment\n! also a comment\n\n  a=1\nb : 2\nc 3\nd\t=\t4  \ne=\nf\n  # indented comment\ng==5\n";
        assert_eq!(
            pairs(text),
            vec![
                kv("a", "1"),
                kv("b", "2"),
                kv("c", "3"),
                kv("d", "4  "),
                kv("e", ""),
                kv("f", ""),
                kv("g", "=5"),
            ]
        );
    }

    #[test]
    fn continuations_and_escapes() {
        let text = "sasl.jaas.config=org.Example required \\\n    username=\"u\" \\\r\n    password=\"p\";\n\
                    key\\=with\\:seps\\ x = v\\\\\nlit=a\\tb\\u0041\\ud83d\\ude00\\q\n\
                    even=ends with two \\\\\nnext=1\n";
        assert_eq!(
            pairs(text),
            vec![
                kv(
                    "sasl.jaas.config",
                    "org.Example required username=\"u\" password=\"p\";"
                ),
                kv("key=with:seps x", "v\\"),
                kv("lit", "a\tbA\u{1F600}q"),
                kv("even", "ends with two \\"),
                kv("next", "1"),
            ]
        );
        // A comment line never continues, and a last line may end in one
        // backslash.
        assert_eq!(
            pairs("# c \\\nx=1\ny=2\\"),
            vec![kv("x", "1"), kv("y", "2")]
        );
        // CR-only and CRLF line ends.
        assert_eq!(
            pairs("a=1\rb=2\r\nc=3"),
            vec![kv("a", "1"), kv("b", "2"), kv("c", "3")]
        );
        assert_eq!(pairs("a=1\r\n\r\nb=2"), vec![kv("a", "1"), kv("b", "2")]);
    }

    #[test]
    fn bad_lines_are_named() {
        assert_eq!(
            parse("a=1\n=2\n").unwrap_err(),
            BadLine {
                line: 2,
                why: "no key before the value".to_owned()
            }
        );
        let e = parse("a=1\n\nb=\\u12G4\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.why.contains("\\u12G4"), "{e:?}");
        assert!(parse("a=\\ud83d\n").unwrap_err().why.contains("surrogate"));
    }

    #[test]
    fn latin1_when_not_utf8() {
        assert_eq!(decode(b"p=caf\xe9"), "p=caf\u{e9}");
        assert_eq!(decode("p=café".as_bytes()), "p=café");
    }
}
