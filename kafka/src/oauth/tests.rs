use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

fn in_ms(ms: u64) -> SystemTime {
    SystemTime::now() + Duration::from_millis(ms)
}

/// A source whose provider gives tokens `t0`, `t1`, ... living `life_ms`,
/// and the count of its calls.
fn counting(life_ms: u64) -> (Arc<TokenSource>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = Arc::clone(&calls);
    let source = TokenSource::new(move || {
        let n = c.fetch_add(1, Ordering::SeqCst);
        Ok(OAuthToken::new(format!("t{n}"), in_ms(life_ms)).with_principal("p"))
    });
    (Arc::new(source), calls)
}

fn source<F>(f: F) -> Arc<TokenSource>
where
    F: Fn() -> std::result::Result<OAuthToken, OAuthTokenError> + Send + Sync + 'static,
{
    Arc::new(TokenSource::new(f))
}

#[test]
fn a_token_is_shared_and_replaced_in_the_background_at_half_its_life() {
    let (long, calls) = counting(3_600_000);
    assert!(long.stale());
    assert_eq!(long.token().unwrap().value(), "t0");
    assert_eq!(long.token().unwrap().value(), "t0");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(!long.stale());

    // 800 ms tokens: the next one is fetched after 400 ms, without
    // anyone asking, so the clients asking at 80 % get a fresh one.
    let (short, calls) = counting(800);
    assert_eq!(short.token().unwrap().value(), "t0");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(!short.stale());
    assert_eq!(short.token().unwrap().value(), "t1");
    // The refresh thread ends with the source.
    let weak = Arc::downgrade(&short);
    drop(short);
    assert!(weak.upgrade().is_none());
}

#[test]
fn provider_errors_and_panics_are_errors_naming_the_provider() {
    #[derive(Debug)]
    struct IdpDown;
    impl fmt::Display for IdpDown {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the identity provider said no")
        }
    }
    impl std::error::Error for IdpDown {}
    let e = source(|| Err(Box::new(IdpDown))).token().unwrap_err();
    assert!(matches!(e, Error::Transient { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "transient getting an OAUTHBEARER token from the token provider: the identity \
         provider said no"
    );
    // The provider's own error is the cause.
    let cause = std::error::Error::source(&e)
        .and_then(|c| c.downcast_ref::<TokenProviderError>())
        .expect("a TokenProviderError cause");
    assert!(cause.get_ref().downcast_ref::<IdpDown>().is_some());

    let fatal = source(|| Err(Box::new(Error::fatal("fetching a token", "revoked")) as _));
    let e = fatal.token().unwrap_err();
    assert!(matches!(e, Error::Fatal { .. }), "{e}");
    assert!(e.to_string().contains("revoked"), "{e}");
    let invalid =
        source(|| Err(Box::new(Error::InvalidArgument("a bad return value".into())) as _));
    let e = invalid.token().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(
        e.to_string()
            .ends_with("from the token provider: a bad return value"),
        "{e}"
    );
    let e = source(|| panic!("boom in the provider"))
        .token()
        .unwrap_err();
    assert!(matches!(e, Error::Fatal { .. }), "{e}");
    assert!(e.to_string().contains("boom in the provider"), "{e}");
}

#[test]
fn unusable_tokens_are_refused_without_showing_them() {
    for (token, why) in [
        (OAuthToken::new("", in_ms(60_000)), "empty"),
        (
            OAuthToken::new("secret part\u{1}x", in_ms(60_000)),
            "printable ASCII",
        ),
        (OAuthToken::new("secret with space", in_ms(60_000)), "' '"),
        (
            OAuthToken::new("secret", SystemTime::now() - Duration::from_secs(5)),
            "expired",
        ),
    ] {
        let e = source(move || Ok(token.clone())).token().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::InvalidArgument(_)), "{msg}");
        assert!(msg.contains(why), "{why}: {msg}");
        assert!(!msg.contains("secret"), "the token shows: {msg}");
    }
}

#[test]
fn a_failed_refresh_keeps_the_last_token_while_it_is_good() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = Arc::clone(&calls);
    let source = source(move || {
        if c.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(OAuthToken::new("first", in_ms(800)))
        } else {
            Err("down".into())
        }
    });
    assert_eq!(source.token().unwrap().value(), "first");
    std::thread::sleep(Duration::from_millis(640));
    // The refreshes from 400 ms on failed: the token stays.
    assert!(calls.load(Ordering::SeqCst) >= 2, "asked again");
    assert_eq!(source.token().unwrap().value(), "first", "kept");
    // Past what may be handed out (720 ms): the provider is asked, and
    // its error shows.
    std::thread::sleep(Duration::from_millis(120));
    let e = source.token().unwrap_err();
    assert!(e.to_string().contains("down"), "{e}");
}

#[test]
fn clients_waiting_for_a_failing_call_share_its_error() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = Arc::clone(&calls);
    let source = source(move || {
        c.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        Err("too slow, then no".into())
    });
    let start = Arc::new(std::sync::Barrier::new(4));
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let (source, start) = (Arc::clone(&source), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                source.token().unwrap_err().to_string()
            })
        })
        .collect();
    for w in waiters {
        assert!(w.join().unwrap().contains("too slow, then no"));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one call for four clients");
}

#[test]
fn expiry_in_milliseconds_and_a_debug_without_the_token() {
    let t = OAuthToken::new("abc", UNIX_EPOCH + Duration::from_millis(1_700_000_000_123))
        .with_principal("admin");
    assert_eq!(t.expires_at_ms(), 1_700_000_000_123);
    let d = format!("{t:?}");
    assert!(!d.contains("abc") && d.contains("admin"), "{d}");
}
