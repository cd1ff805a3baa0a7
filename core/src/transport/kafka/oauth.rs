//! OAUTHBEARER tokens for the librdkafka clients: the transport's
//! registration producer, state consumer and admin clients take their tokens
//! from the configuration's [`TokenSource`] (the one the protocol client
//! uses too), through rust-rdkafka's `generate_oauth_token`, and set directly
//! on the clients that nothing polls.

use std::sync::Arc;
use std::time::SystemTime;

use krabka_kafka::oauth::RETRY_AFTER_FAILURE;
pub(crate) use krabka_kafka::oauth::{ClientToken, TokenSource};
pub use krabka_kafka::oauth::{OAuthToken, OAuthTokenError, TokenProviderError};

use crate::error::{Error, Result};

/// What a failed token lookup is said to be doing.
const CONTEXT: &str = "getting an OAUTHBEARER token from the token provider";

/// Keeps the OAUTHBEARER token of `client`, a consumer that may go
/// unpolled for long (a state reader between reads, the high-watermark
/// probe), fresh: a task gives it a new token when its token is due
/// ([`ensure_token`]) for as long as the client lives. librdkafka
/// re-authenticates its connections with the token it holds (KIP-368) and
/// opens new ones with it, so a token that expired while nobody polled the
/// client would fail them. Needs a tokio runtime; a no-op without
/// OAUTHBEARER.
pub(crate) fn keep_fresh<T>(client: &Arc<T>)
where
    T: rdkafka::consumer::Consumer<super::TransportContext> + Send + Sync + 'static,
{
    if client.client().context().oauth().is_none() {
        return;
    }
    let weak = Arc::downgrade(client);
    tokio::spawn(async move {
        let mut retry_at = None;
        loop {
            let next = {
                let Some(client) = weak.upgrade() else { return };
                let state = client
                    .client()
                    .context()
                    .oauth()
                    .map(ClientToken::next_refresh);
                match (state, retry_at) {
                    (None, _) => return,
                    (Some(Some(at)), None) => at,
                    (Some(_), Some(at)) => at,
                    (Some(None), None) => SystemTime::now(),
                }
            };
            let wait = next.duration_since(SystemTime::now()).unwrap_or_default();
            tokio::time::sleep(wait).await;
            // The client is kept alive only for the call, never across the
            // sleep: dropping it ends the task.
            let Some(client) = weak.upgrade() else { return };
            let done = tokio::task::spawn_blocking(move || {
                let r = ensure_token(client.client());
                // Dropped here, on the blocking pool (a client's drop blocks).
                drop(client);
                r
            })
            .await;
            retry_at = match done {
                Ok(Ok(())) => None,
                Ok(Err(e)) => {
                    tracing::warn!(
                        "could not refresh the OAUTHBEARER token of a state consumer (retried in {RETRY_AFTER_FAILURE:?}): {e}"
                    );
                    Some(SystemTime::now() + RETRY_AFTER_FAILURE)
                }
                Err(_) => return,
            };
        }
    });
}

/// Gives librdkafka client `client` a token when it has none or its token is
/// due for a refresh: for the clients nothing polls (the admin client, the
/// high-watermark probe, a state reader before its first receive), which
/// would otherwise never serve librdkafka's token refresh event and wait for
/// a token forever. Blocks while the token provider runs. A no-op without
/// OAUTHBEARER.
pub(crate) fn ensure_token(
    client: &rdkafka::client::Client<super::TransportContext>,
) -> Result<()> {
    let Some(state) = client.context().oauth() else {
        return Ok(());
    };
    if !state.due() {
        return Ok(());
    }
    let token = state.token()?;
    set_token(client.native_ptr(), &token)
}

/// `rd_kafka_oauthbearer_set_token` on the client `rk`.
fn set_token(rk: *mut rdkafka::bindings::rd_kafka_t, token: &OAuthToken) -> Result<()> {
    use std::ffi::{c_char, CStr, CString};
    let value = CString::new(token.value())
        .map_err(|_| Error::InvalidArgument(format!("{CONTEXT}: the token holds a NUL byte")))?;
    let principal = CString::new(token.principal()).map_err(|_| {
        Error::InvalidArgument(format!("{CONTEXT}: the principal holds a NUL byte"))
    })?;
    let mut errstr: [c_char; 512] = [0; 512];
    // SAFETY: `rk` is the handle of a live client (the caller borrows the
    // client for the call); the strings are NUL-terminated and outlive the
    // call, which copies them; no extensions (a null array of size 0);
    // `errstr` is writable for its whole length, and librdkafka writes a
    // NUL-terminated string into it on error only.
    let code = unsafe {
        rdkafka::bindings::rd_kafka_oauthbearer_set_token(
            rk,
            value.as_ptr(),
            token.expires_at_ms(),
            principal.as_ptr(),
            std::ptr::null_mut(),
            0,
            errstr.as_mut_ptr(),
            errstr.len(),
        )
    };
    if code == rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Ok(());
    }
    // SAFETY: zero-initialised and at most `len - 1` bytes written by
    // librdkafka, so there is a NUL within the buffer.
    let why = unsafe { CStr::from_ptr(errstr.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Err(Error::fatal(
        "setting the OAUTHBEARER token on a librdkafka client",
        format!("librdkafka refused it ({code:?}): {why}"),
    ))
}
