//! `delegation-tokens`: create, renew, expire and list tokens as the
//! principal of the request being handled. Kafka refuses token requests on
//! connections that cannot carry them safely (`allowTokenRequests`): plain
//! text, one-way SSL (an anonymous principal), and connections that
//! authenticated with a delegation token themselves.

use crate::error_code::ErrorCode;
use crate::plugins::bindings::handler::gregor::broker::delegation_tokens::{self, TokenInfo};
use crate::plugins::bindings::handler::gregor::broker::types::KafkaError;
use crate::plugins::state::HandlerState;
use crate::security::tokens::{self, TokenError};

const ANONYMOUS: &str = "User:ANONYMOUS";

fn kafka_error(error: TokenError) -> KafkaError {
    KafkaError {
        code: error.code,
        message: error.message,
    }
}

fn info(token: tokens::TokenInfo) -> TokenInfo {
    TokenInfo {
        token_id: token.token_id,
        hmac: token.hmac,
        owner: token.owner,
        requester: token.requester,
        renewers: token.renewers,
        issue_timestamp_ms: token.issue_timestamp_ms,
        expiry_timestamp_ms: token.expiry_timestamp_ms,
        max_timestamp_ms: token.max_timestamp_ms,
    }
}

impl HandlerState {
    /// The requesting principal, if this connection may manage tokens.
    fn token_requester(&self) -> Result<String, KafkaError> {
        let refused = || KafkaError {
            code: ErrorCode::DelegationTokenRequestNotAllowed.code(),
            message: None,
        };
        let session = self.session.as_ref().ok_or_else(refused)?;
        let principal = session.principal().to_string();
        let protocol = session.security_protocol.as_str();
        let allowed = !session.auth.token_authenticated()
            && protocol != "PLAINTEXT"
            && !(protocol == "SSL" && principal == ANONYMOUS);
        if allowed {
            Ok(principal)
        } else {
            Err(refused())
        }
    }

    fn tokens_enabled(&self) -> Result<(), KafkaError> {
        if self.services.tokens.enabled() {
            Ok(())
        } else {
            Err(KafkaError {
                code: ErrorCode::DelegationTokenAuthDisabled.code(),
                message: None,
            })
        }
    }
}

impl delegation_tokens::Host for HandlerState {
    fn requests_allowed(&mut self) -> Result<(), KafkaError> {
        self.token_requester().map(|_| ())
    }

    fn create(
        &mut self,
        owner: Option<String>,
        renewers: Vec<String>,
        max_lifetime_ms: i64,
    ) -> Result<TokenInfo, KafkaError> {
        let requester = self.token_requester()?;
        let owner = owner.unwrap_or_else(|| requester.clone());
        self.broker_work(|state| {
            state
                .services
                .tokens
                .create(&owner, &requester, &renewers, max_lifetime_ms)
        })
        .map(info)
        .map_err(kafka_error)
    }

    fn renew(&mut self, hmac: Vec<u8>, renew_period_ms: i64) -> Result<i64, KafkaError> {
        let requester = self.token_requester()?;
        self.broker_work(|state| {
            state
                .services
                .tokens
                .renew(&requester, &hmac, renew_period_ms)
        })
        .map_err(kafka_error)
    }

    fn expire(&mut self, hmac: Vec<u8>, expiry_period_ms: i64) -> Result<i64, KafkaError> {
        let requester = self.token_requester()?;
        self.broker_work(|state| {
            state
                .services
                .tokens
                .expire(&requester, &hmac, expiry_period_ms)
        })
        .map_err(kafka_error)
    }

    fn list_tokens(&mut self) -> Result<Vec<TokenInfo>, KafkaError> {
        self.token_requester()?;
        self.tokens_enabled()?;
        Ok(self.services.tokens.list().into_iter().map(info).collect())
    }
}
