//! The nearest known name to a misspelt one, for errors that name an
//! unknown setting or option ("unknown option `leese`; did you mean `lease`?").
//!
//! Names are compared by their words, whatever the casing convention:
//! `renew_interval`, `renewInterval`, `renew-interval` and `renew.interval`
//! are the same name here, so a binding may pass its own spelling of the
//! known names and get one of them back. A suggestion is made only when the
//! edit distance between the two word strings is at most a third of the
//! longer one (at least 1), so `x` never suggests `lease`.

/// The known name nearest to `name`, or `None` when none is near enough.
/// Ties go to the first in `known`. An exact match (after normalising the
/// casing convention) is returned as itself.
pub fn nearest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let wanted = words(name);
    let mut best: Option<(usize, &'a str)> = None;
    for &k in known {
        let d = distance(&wanted, &words(k));
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, k));
        }
    }
    let (d, k) = best?;
    let longer = wanted.chars().count().max(words(k).chars().count());
    (d <= (longer / 3).max(1)).then_some(k)
}

/// `name` in lower case with every word separator (`_`, `-`, `.`, a case
/// change) removed.
fn words(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTIONS: &[&str] = &["lease", "renewInterval", "acquireTimeout", "signal"];

    #[test]
    fn a_typo_suggests_the_known_name_in_the_callers_spelling() {
        assert_eq!(nearest("leese", OPTIONS), Some("lease"));
        assert_eq!(nearest("renew_interval", OPTIONS), Some("renewInterval"));
        assert_eq!(nearest("acquiretimeot", OPTIONS), Some("acquireTimeout"));
        assert_eq!(
            nearest("bootstrap.server", &["bootstrap.servers", "client.id"]),
            Some("bootstrap.servers")
        );
    }

    #[test]
    fn a_name_unlike_every_known_one_suggests_nothing() {
        assert_eq!(nearest("x", OPTIONS), None);
        assert_eq!(nearest("timeout", OPTIONS), None);
        assert_eq!(nearest("anything", &[]), None);
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("abc", "abc"), 0);
    }
}
