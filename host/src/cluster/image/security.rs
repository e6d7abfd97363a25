//! SCRAM credentials and delegation tokens (Kafka's ScramImage and
//! DelegationTokenImage): what a single broker keeps in
//! `security/scram-credentials.json` and `delegation-tokens.json`.
//!
//! A token's timestamps and id come in the command (the proposer read the
//! clock and drew the id); a renewal or expiry of a token that was removed
//! meanwhile is refused, so it cannot bring the token back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::command::{Applied, Refusal, Response};
use crate::error_code::ErrorCode;
use crate::security::credentials::{ScramCredential, ScramMechanism};
use crate::security::tokens::TokenInfo;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramImage {
    users: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
}

impl ScramImage {
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(&mechanism)
    }

    /// Every user with the mechanisms and iterations they have
    /// (DescribeUserScramCredentials).
    pub fn users(
        &self,
    ) -> impl Iterator<Item = (&String, &BTreeMap<ScramMechanism, ScramCredential>)> {
        self.users.iter()
    }

    pub(super) fn upsert(
        &mut self,
        user: &str,
        mechanism: ScramMechanism,
        credential: &ScramCredential,
    ) -> Response {
        self.users
            .entry(user.to_string())
            .or_default()
            .insert(mechanism, credential.clone());
        Ok(Applied::Done)
    }

    pub(super) fn delete(&mut self, user: &str, mechanism: ScramMechanism) -> Response {
        let removed = self
            .users
            .get_mut(user)
            .and_then(|mechanisms| mechanisms.remove(&mechanism));
        if removed.is_none() {
            return Err(Refusal::new(
                ErrorCode::ResourceNotFound,
                "Attempt to delete a user credential that does not exist",
            ));
        }
        if self.users.get(user).is_some_and(BTreeMap::is_empty) {
            self.users.remove(user);
        }
        Ok(Applied::Done)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokensImage {
    /// By token id.
    tokens: BTreeMap<String, TokenInfo>,
}

impl TokensImage {
    pub fn get(&self, token_id: &str) -> Option<&TokenInfo> {
        self.tokens.get(token_id)
    }

    /// Every token, expired ones included (the reader knows the time).
    pub fn iter(&self) -> impl Iterator<Item = &TokenInfo> {
        self.tokens.values()
    }

    pub fn by_hmac(&self, hmac: &[u8]) -> Option<&TokenInfo> {
        self.tokens.values().find(|token| token.hmac == hmac)
    }

    pub(super) fn upsert(&mut self, token: &TokenInfo, create: bool) -> Response {
        let exists = self.tokens.contains_key(&token.token_id);
        if create && exists {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                format!("Delegation token {} already exists.", token.token_id),
            ));
        }
        if !create && !exists {
            return Err(not_found());
        }
        self.tokens.insert(token.token_id.clone(), token.clone());
        Ok(Applied::Done)
    }

    pub(super) fn remove(&mut self, token_id: &str) -> Response {
        self.tokens.remove(token_id).ok_or_else(not_found)?;
        Ok(Applied::Done)
    }
}

fn not_found() -> Refusal {
    Refusal::new(
        ErrorCode::DelegationTokenNotFound,
        "The delegation token does not exist.",
    )
}
