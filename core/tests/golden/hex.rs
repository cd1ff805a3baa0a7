//! Lowercase hex, strict both ways.

/// Lowercase hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

/// The bytes of lowercase hex; an odd length or any other character is an error.
pub fn decode(s: &str) -> Result<Vec<u8>, String> {
    fn digit(c: u8) -> Result<u8, String> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(format!("{:?} is not a lowercase hex digit", c as char)),
        }
    }
    if s.len() % 2 != 0 {
        return Err(format!("odd hex length {}", s.len()));
    }
    s.as_bytes()
        .chunks_exact(2)
        .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}
