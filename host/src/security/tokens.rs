//! Delegation tokens (KIP-48): Kafka's DelegationTokenManager and the
//! controller's DelegationTokenControlManager in one.
//!
//! A token is an id (a random Kafka UUID) and an HMAC-SHA512 of that id
//! keyed with `delegation.token.secret.key`; the HMAC is the token's
//! password. Tokens have an owner, the principal that requested them, and
//! renewers; an expiry time (renewable up to a maximum lifetime) after
//! which they are removed. They are kept in a crash-safe JSON document
//! under the security directory, so they survive restarts, as Kafka keeps
//! them in its metadata log.
//!
//! Authentication with a token is SASL/SCRAM with the token id as user
//! name, the base64 HMAC as password and the `tokenauth=true` extension;
//! the connection then acts as the token's owner ([`TokenManager::scram_credential`]
//! gives the SCRAM server the credential of a token id).
//!
//! On a node of a cluster the tokens are the metadata log's: what a
//! change would do to the tokens is sent to a [`TokenLog`] instead of the
//! file (the ids, HMACs and timestamps are decided here, so every node
//! applies the same), and the store follows what the log applied
//! ([`TokenManager::replace`]).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha512;
use tracing::info;

use crate::durable::JsonFile;
use crate::error_code::ErrorCode;
use crate::security::credentials::{ScramCredential, ScramMechanism, MIN_ITERATIONS};

const FILE_NAME: &str = "delegation-tokens.json";
const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub token_id: String,
    /// HMAC-SHA512 of the token id with the secret key.
    #[serde(with = "base64_bytes")]
    pub hmac: Vec<u8>,
    pub owner: String,
    pub requester: String,
    pub renewers: Vec<String>,
    pub issue_timestamp_ms: i64,
    pub expiry_timestamp_ms: i64,
    pub max_timestamp_ms: i64,
}

impl TokenInfo {
    /// Kafka's `ownerOrRenewer`: the owner, the requester and renewers may
    /// renew, expire and always describe the token.
    pub fn owner_or_renewer(&self, principal: &str) -> bool {
        self.owner == principal
            || self.requester == principal
            || self.renewers.iter().any(|renewer| renewer == principal)
    }

    fn expired(&self, now: i64) -> bool {
        self.max_timestamp_ms < now || self.expiry_timestamp_ms < now
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    pub code: i16,
    pub message: Option<String>,
}

impl TokenError {
    fn of(code: i16) -> Self {
        Self {
            code,
            message: None,
        }
    }
}

/// The token settings, with Kafka's names and defaults.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    /// `delegation.token.secret.key`; tokens are disabled without it.
    pub secret: Option<String>,
    /// `delegation.token.max.lifetime.ms`.
    pub max_lifetime_ms: i64,
    /// `delegation.token.expiry.time.ms`.
    pub renew_lifetime_ms: i64,
    /// `delegation.token.expiry.check.interval.ms`.
    pub check_interval: Duration,
}

#[derive(Serialize, Deserialize)]
struct Document {
    version: u32,
    tokens: Vec<TokenInfo>,
}

/// Where a token change goes on a node of a cluster: tokens created or
/// updated (with whether each is new) and token ids removed, proposed to
/// the metadata log and, once applied, brought into this store before the
/// answer. Removing a token already gone is no error (two nodes' sweeps
/// may race).
pub trait TokenLog: Send + Sync {
    fn change(
        &self,
        upserts: Vec<(TokenInfo, bool)>,
        removals: Vec<String>,
    ) -> Result<(), TokenError>;
}

/// Tokens by id.
pub type Tokens = BTreeMap<String, TokenInfo>;

pub struct TokenManager {
    /// Set on a node of a cluster: changes go there.
    log: OnceLock<Arc<dyn TokenLog>>,
    config: TokenConfig,
    file: JsonFile,
    write_lock: Mutex<()>,
    /// By token id.
    tokens: RwLock<BTreeMap<String, TokenInfo>>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Kafka's `Uuid.randomUuid().toString()`: 16 random bytes in URL-safe
/// base64 without padding, never starting with '-'.
fn random_token_id() -> io::Result<String> {
    loop {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|error| io::Error::other(error.to_string()))?;
        let id = URL_SAFE_NO_PAD.encode(bytes);
        if !id.starts_with('-') {
            return Ok(id);
        }
    }
}

impl TokenManager {
    /// Opens the token store in `dir` with the broker's `delegation.token.*`
    /// settings.
    pub fn from_config(config: &crate::config::BrokerConfig, dir: &Path) -> anyhow::Result<Self> {
        use crate::metadata::broker_config::static_number;
        let secret = config
            .explicit("delegation.token.secret.key")
            .or_else(|| config.explicit("delegation.token.master.key"))
            .filter(|secret| !secret.is_empty())
            .map(str::to_string);
        let check_ms = static_number(config, "delegation.token.expiry.check.interval.ms")?;
        let token_config = TokenConfig {
            secret,
            max_lifetime_ms: static_number(config, "delegation.token.max.lifetime.ms")?,
            renew_lifetime_ms: static_number(config, "delegation.token.expiry.time.ms")?,
            check_interval: Duration::from_millis(u64::try_from(check_ms)?),
        };
        Self::open(dir, token_config)
            .map_err(|error| anyhow::anyhow!("opening the delegation token store: {error}"))
    }

    pub fn open(dir: &Path, config: TokenConfig) -> io::Result<Self> {
        let file = JsonFile::open(dir, FILE_NAME)?;
        let document = file
            .load_versioned(FORMAT_VERSION, |document: &Document| document.version)?
            .unwrap_or(Document {
                version: FORMAT_VERSION,
                tokens: Vec::new(),
            });
        let tokens = document
            .tokens
            .into_iter()
            .map(|token| (token.token_id.clone(), token))
            .collect();
        Ok(Self {
            log: OnceLock::new(),
            config,
            file,
            write_lock: Mutex::new(()),
            tokens: RwLock::new(tokens),
        })
    }

    pub fn enabled(&self) -> bool {
        self.config.secret.is_some()
    }

    /// Create, renew and expire answer DELEGATION_TOKEN_AUTH_DISABLED without a secret.
    fn require_enabled(&self) -> Result<(), TokenError> {
        if self.enabled() {
            Ok(())
        } else {
            Err(TokenError::of(
                ErrorCode::DelegationTokenAuthDisabled.code(),
            ))
        }
    }

    pub fn check_interval(&self) -> Duration {
        self.config.check_interval
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, TokenInfo>> {
        crate::sync::read(&self.tokens)
    }

    /// Applies `change` to a copy of the tokens, stores them, then makes
    /// them visible. `change` returns what the caller gets back.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, TokenInfo>) -> Result<T, TokenError>,
    ) -> Result<T, TokenError> {
        if let Some(log) = self.log.get() {
            let current = self.read().clone();
            let mut next = current.clone();
            let answer = change(&mut next)?;
            let upserts: Vec<(TokenInfo, bool)> = next
                .values()
                .filter(|token| current.get(&token.token_id) != Some(*token))
                .map(|token| (token.clone(), !current.contains_key(&token.token_id)))
                .collect();
            let removals: Vec<String> = current
                .keys()
                .filter(|id| !next.contains_key(*id))
                .cloned()
                .collect();
            if !upserts.is_empty() || !removals.is_empty() {
                log.change(upserts, removals)?;
            }
            return Ok(answer);
        }
        let _writer = crate::sync::lock(&self.write_lock);
        let mut next = self.read().clone();
        let answer = change(&mut next)?;
        self.store(next)?;
        Ok(answer)
    }

    /// Sends every later change to `log` (a node of a cluster).
    pub fn follow(&self, log: Arc<dyn TokenLog>) {
        let _ = self.log.set(log);
    }

    /// Every token, expired ones included.
    pub fn tokens(&self) -> Tokens {
        self.read().clone()
    }

    /// Makes the store hold exactly `tokens` (what the metadata log
    /// applied), durably; nothing happens when it already does.
    pub fn replace(&self, tokens: Tokens) -> Result<(), TokenError> {
        let _writer = crate::sync::lock(&self.write_lock);
        if *self.read() == tokens {
            return Ok(());
        }
        self.store(tokens)
    }

    /// Persists `next`, then makes it visible (the caller holds the write
    /// lock).
    fn store(&self, next: Tokens) -> Result<(), TokenError> {
        let document = Document {
            version: FORMAT_VERSION,
            tokens: next.values().cloned().collect(),
        };
        self.file.store(&document).map_err(|error| TokenError {
            code: ErrorCode::KafkaStorageError.code(),
            message: Some(error.to_string()),
        })?;
        *crate::sync::write(&self.tokens) = next;
        Ok(())
    }

    fn hmac(&self, token_id: &str) -> Result<Vec<u8>, TokenError> {
        let Some(secret) = &self.config.secret else {
            return Err(TokenError::of(
                ErrorCode::DelegationTokenAuthDisabled.code(),
            ));
        };
        let mut mac =
            Hmac::<Sha512>::new_from_slice(secret.as_bytes()).map_err(|_| TokenError {
                code: ErrorCode::DelegationTokenAuthDisabled.code(),
                message: Some("unusable delegation.token.secret.key".into()),
            })?;
        mac.update(token_id.as_bytes());
        Ok(mac.finalize().into_bytes().to_vec())
    }

    /// CreateDelegationToken for `owner`, requested by `requester`.
    pub fn create(
        &self,
        owner: &str,
        requester: &str,
        renewers: &[String],
        max_lifetime_ms: i64,
    ) -> Result<TokenInfo, TokenError> {
        self.require_enabled()?;
        if renewers.iter().any(|renewer| !renewer.starts_with("User:")) {
            return Err(TokenError::of(ErrorCode::InvalidPrincipalType.code()));
        }
        let now = now_ms();
        let mut max_lifetime = self.config.max_lifetime_ms;
        if max_lifetime_ms > 0 {
            max_lifetime = max_lifetime.min(max_lifetime_ms);
        }
        let max_timestamp = now.saturating_add(max_lifetime);
        let expiry = max_timestamp.min(now.saturating_add(self.config.renew_lifetime_ms));
        let token_id = random_token_id().map_err(|error| TokenError {
            code: ErrorCode::KafkaStorageError.code(),
            message: Some(error.to_string()),
        })?;
        let token = TokenInfo {
            hmac: self.hmac(&token_id)?,
            token_id,
            owner: owner.to_string(),
            requester: requester.to_string(),
            renewers: renewers.to_vec(),
            issue_timestamp_ms: now,
            expiry_timestamp_ms: expiry,
            max_timestamp_ms: max_timestamp,
        };
        self.update(|tokens| {
            tokens.insert(token.token_id.clone(), token.clone());
            Ok(())
        })?;
        info!(token_id = %token.token_id, owner = %token.owner, "delegation token created");
        Ok(token)
    }

    /// RenewDelegationToken: the new expiry time.
    pub fn renew(
        &self,
        principal: &str,
        hmac: &[u8],
        renew_period_ms: i64,
    ) -> Result<i64, TokenError> {
        self.require_enabled()?;
        let now = now_ms();
        let renew_lifetime = if renew_period_ms > 0 {
            self.config.renew_lifetime_ms.min(renew_period_ms)
        } else {
            self.config.renew_lifetime_ms
        };
        self.update(|tokens| {
            let token = by_hmac(tokens, hmac)?;
            if token.expired(now) {
                return Err(TokenError::of(ErrorCode::DelegationTokenExpired.code()));
            }
            require_owner_or_renewer(token, principal)?;
            token.expiry_timestamp_ms = token
                .max_timestamp_ms
                .min(now.saturating_add(renew_lifetime));
            Ok(token.expiry_timestamp_ms)
        })
    }

    /// ExpireDelegationToken: the new expiry time; a negative period
    /// removes the token now.
    pub fn expire(
        &self,
        principal: &str,
        hmac: &[u8],
        expiry_period_ms: i64,
    ) -> Result<i64, TokenError> {
        self.require_enabled()?;
        let now = now_ms();
        let result = self.update(|tokens| {
            let token = by_hmac(tokens, hmac)?;
            require_owner_or_renewer(token, principal)?;
            if expiry_period_ms < 0 {
                let id = token.token_id.clone();
                tokens.remove(&id);
                return Ok((now, Some(id)));
            }
            if token.expired(now) {
                return Err(TokenError::of(ErrorCode::DelegationTokenExpired.code()));
            }
            token.expiry_timestamp_ms = token
                .max_timestamp_ms
                .min(now.saturating_add(expiry_period_ms));
            Ok((token.expiry_timestamp_ms, None))
        })?;
        if let Some(id) = result.1 {
            info!(token_id = %id, "delegation token expired");
        }
        Ok(result.0)
    }

    /// Every live token.
    pub fn list(&self) -> Vec<TokenInfo> {
        let now = now_ms();
        self.read()
            .values()
            .filter(|token| !token.expired(now))
            .cloned()
            .collect()
    }

    /// Removes expired tokens (the periodic sweep); how many went.
    pub fn sweep(&self) -> usize {
        let now = now_ms();
        if !self.read().values().any(|token| token.expired(now)) {
            return 0;
        }
        let removed = self.update(|tokens| {
            let before = tokens.len();
            tokens.retain(|_, token| !token.expired(now));
            Ok(before - tokens.len())
        });
        match removed {
            Ok(count) => {
                if count > 0 {
                    info!(count, "expired delegation tokens removed");
                }
                count
            }
            Err(error) => {
                tracing::warn!(?error, "cannot remove expired delegation tokens");
                0
            }
        }
    }

    /// The SCRAM credential a live token authenticates with (password: the
    /// base64 HMAC, salted afresh), and the name of the token's owner.
    pub fn scram_credential(
        &self,
        token_id: &str,
        mechanism: ScramMechanism,
    ) -> Option<(ScramCredential, String)> {
        let token = self.read().get(token_id).cloned()?;
        if token.expired(now_ms()) {
            return None;
        }
        let password = STANDARD.encode(&token.hmac);
        let credential =
            ScramCredential::from_password(mechanism, &password, MIN_ITERATIONS).ok()?;
        // The owner acts as a User principal of the owner's name.
        let owner = token
            .owner
            .split_once(':')
            .map_or(token.owner.as_str(), |(_, name)| name)
            .to_string();
        Some((credential, owner))
    }
}

/// Renew and expire are for the owner and renewers only (DELEGATION_TOKEN_OWNER_MISMATCH).
fn require_owner_or_renewer(token: &TokenInfo, principal: &str) -> Result<(), TokenError> {
    if token.owner_or_renewer(principal) {
        Ok(())
    } else {
        Err(TokenError::of(
            ErrorCode::DelegationTokenOwnerMismatch.code(),
        ))
    }
}

fn by_hmac<'a>(
    tokens: &'a mut BTreeMap<String, TokenInfo>,
    hmac: &[u8],
) -> Result<&'a mut TokenInfo, TokenError> {
    tokens
        .values_mut()
        .find(|token| token.hmac == hmac)
        .ok_or(TokenError::of(ErrorCode::DelegationTokenNotFound.code()))
}

/// Serde for bytes as standard base64.
mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(secret: Option<&str>) -> TokenConfig {
        TokenConfig {
            secret: secret.map(str::to_string),
            max_lifetime_ms: 7 * 24 * 3600 * 1000,
            renew_lifetime_ms: 24 * 3600 * 1000,
            check_interval: Duration::from_secs(3600),
        }
    }

    #[test]
    fn tokens_are_created_renewed_expired_and_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = TokenManager::open(dir.path(), config(Some("s3cret"))).unwrap();
        let renewers = vec!["User:bob".to_string()];
        let token = tokens
            .create("User:alice", "User:alice", &renewers, 3_600_000)
            .unwrap();
        assert_eq!(token.token_id.len(), 22);
        assert_eq!(token.hmac.len(), 64);
        assert_eq!(token.max_timestamp_ms - token.issue_timestamp_ms, 3_600_000);
        assert_eq!(token.expiry_timestamp_ms, token.max_timestamp_ms);
        assert_eq!(
            tokens
                .renew("User:eve", &token.hmac, 1000)
                .unwrap_err()
                .code,
            ErrorCode::DelegationTokenOwnerMismatch.code()
        );
        let (_, owner) = tokens
            .scram_credential(&token.token_id, ScramMechanism::Sha256)
            .unwrap();
        assert_eq!(owner, "alice");
        let renewed = tokens.renew("User:bob", &token.hmac, 1000).unwrap();
        assert!(renewed < token.expiry_timestamp_ms);
        assert_eq!(
            tokens.renew("User:bob", b"nope", 1000).unwrap_err().code,
            ErrorCode::DelegationTokenNotFound.code()
        );
        drop(tokens);

        let tokens = TokenManager::open(dir.path(), config(Some("s3cret"))).unwrap();
        assert_eq!(tokens.list().len(), 1);
        tokens.expire("User:alice", &token.hmac, -1).unwrap();
        assert!(tokens.list().is_empty());
        assert_eq!(
            tokens
                .expire("User:alice", &token.hmac, -1)
                .unwrap_err()
                .code,
            ErrorCode::DelegationTokenNotFound.code()
        );
    }

    #[test]
    fn expired_tokens_are_swept_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = TokenManager::open(dir.path(), config(Some("k"))).unwrap();
        let token = tokens.create("User:a", "User:a", &[], 0).unwrap();
        let expiry = tokens.expire("User:a", &token.hmac, 0).unwrap();
        assert!(expiry <= now_ms());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            tokens.renew("User:a", &token.hmac, 1000).unwrap_err().code,
            ErrorCode::DelegationTokenExpired.code()
        );
        assert!(tokens
            .scram_credential(&token.token_id, ScramMechanism::Sha512)
            .is_none());
        assert_eq!(tokens.sweep(), 1);
        assert_eq!(tokens.sweep(), 0);
    }

    #[test]
    fn disabled_without_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = TokenManager::open(dir.path(), config(None)).unwrap();
        assert_eq!(
            tokens.create("User:a", "User:a", &[], 0).unwrap_err().code,
            ErrorCode::DelegationTokenAuthDisabled.code()
        );
        let group = vec!["Group:x".to_string()];
        let tokens = TokenManager::open(dir.path(), config(Some("k"))).unwrap();
        assert_eq!(
            tokens
                .create("User:a", "User:a", &group, 0)
                .unwrap_err()
                .code,
            ErrorCode::InvalidPrincipalType.code()
        );
    }
}
