//! What a connection does once connected and before its first request:
//! ApiVersions, and SASL (SaslHandshake v1, then SaslAuthenticate until
//! the mechanism is done, with an OAUTHBEARER token when that is the
//! mechanism).

use super::*;

impl Connection {
    /// SaslHandshake v1 then SaslAuthenticate until the mechanism is done
    /// (KIP-152). Returns the session lifetime the broker set, if any.
    pub(super) async fn authenticate(
        &self,
        sasl: &SaslSettings,
        deadline: Instant,
    ) -> Result<Option<std::time::Duration>, OpenError> {
        let context = || {
            format!(
                "SASL {} authentication with {} at {}",
                sasl.mechanism,
                sasl.who(),
                self.addr
            )
        };
        let fatal = |why: String| OpenError::Fail(Error::fatal(context(), why));
        if self.version_for(ApiKey::SaslHandshake, (1, 1)).is_none() {
            return Err(fatal(
                "the broker does not speak SaslHandshake v1 (Kafka 1.0 or newer is needed)".into(),
            ));
        }
        let Some(auth_version) = self.version_for(ApiKey::SaslAuthenticate, (0, 2)) else {
            return Err(fatal("the broker does not speak SaslAuthenticate".into()));
        };
        let mut req = SaslHandshakeRequest::default();
        req.mechanism = StrBytes::from_static_str(sasl.mechanism.name());
        let resp: SaslHandshakeResponse = self
            .request(ApiKey::SaslHandshake, 1, &req, deadline)
            .await?;
        match resp.error_code {
            codes::NONE => {}
            codes::UNSUPPORTED_SASL_MECHANISM => {
                let enabled: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
                return Err(fatal(format!(
                    "the broker does not enable the mechanism {} on this listener (it enables: {})",
                    sasl.mechanism,
                    enabled.join(", ")
                )));
            }
            code => return Err(fatal(format!("SaslHandshake answered {}", code_name(code)))),
        }
        let (mut exchange, first) = match &sasl.credentials {
            Credentials::Token(source) => {
                let token = self.token(source, deadline).await?;
                Exchange::oauth(token.value())
            }
            Credentials::Password { .. } => Exchange::start(sasl).map_err(fatal)?,
        };
        let mut out = first;
        loop {
            let mut req = SaslAuthenticateRequest::default();
            req.auth_bytes = Bytes::from(std::mem::take(&mut out));
            let resp: SaslAuthenticateResponse = self
                .request(ApiKey::SaslAuthenticate, auth_version, &req, deadline)
                .await?;
            if resp.error_code != codes::NONE {
                // The broker's message names the mechanism, never the password.
                return Err(fatal(format!(
                    "the broker refused the credentials: {}{}{}",
                    code_name(resp.error_code),
                    resp.error_message
                        .as_ref()
                        .map(|m| format!(": {}", m.as_str()))
                        .unwrap_or_default(),
                    exchange
                        .refusal()
                        .map(|r| format!(" (the broker's answer to the token: {r})"))
                        .unwrap_or_default()
                )));
            }
            match exchange.step(&resp.auth_bytes).map_err(fatal)? {
                Step::Send(next) => out = next,
                Step::Done => {
                    let lifetime = u64::try_from(resp.session_lifetime_ms)
                        .ok()
                        .filter(|ms| *ms > 0)
                        .map(std::time::Duration::from_millis);
                    return Ok(lifetime);
                }
            }
        }
    }

    /// A token from the OAUTHBEARER token provider (which may block) on
    /// tokio's blocking pool, by `deadline`.
    pub(super) async fn token(
        &self,
        source: &Arc<TokenSource>,
        deadline: Instant,
    ) -> Result<OAuthToken, OpenError> {
        let source = Arc::clone(source);
        match tokio::time::timeout_at(
            deadline,
            tokio::task::spawn_blocking(move || source.token()),
        )
        .await
        {
            Ok(Ok(Ok(token))) => Ok(token),
            Ok(Ok(Err(e))) => Err(OpenError::Fail(e)),
            Ok(Err(join)) => Err(OpenError::Fail(Error::fatal(
                "getting an OAUTHBEARER token from the token provider",
                join.to_string(),
            ))),
            Err(_) => Err(OpenError::Retry(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the OAUTHBEARER token provider did not answer within the connect timeout",
            ))),
        }
    }

    pub(super) async fn api_versions(
        &self,
        deadline: Instant,
    ) -> std::io::Result<HashMap<i16, (i16, i16)>> {
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str("krabka-coordination");
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let mut resp: ApiVersionsResponse =
            self.request(ApiKey::ApiVersions, 3, &req, deadline).await?;
        if resp.error_code == codes::UNSUPPORTED_VERSION {
            // UNSUPPORTED_VERSION: an old broker; v0 has no body fields.
            resp = self.request(ApiKey::ApiVersions, 0, &req, deadline).await?;
        }
        if resp.error_code != codes::NONE {
            return Err(std::io::Error::other(format!(
                "ApiVersions answered {}",
                code_name(resp.error_code)
            )));
        }
        Ok(resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect())
    }
}
