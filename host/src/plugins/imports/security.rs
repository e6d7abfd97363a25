//! `sasl`, `scram-credentials` and `acl-admin`: the host side of the
//! SaslHandshake, SaslAuthenticate, Describe/AlterUserScramCredentials and
//! Create/Describe/DeleteAcls handlers. Authentication acts on the
//! connection of the request being handled, never one the guest names.

use crate::error_code::ErrorCode;
use crate::plugins::bindings::handler::gregor::broker::acl_admin::{
    self, AclBindingFilter, PatternTypeFilter, PermissionTypeFilter,
};
use crate::plugins::bindings::handler::gregor::broker::sasl::{
    self, AuthenticateResult, HandshakeResult,
};
use crate::plugins::bindings::handler::gregor::broker::scram_credentials::{
    self, CredentialInfo, Deletion, Mechanism, Upsertion, UserCredentials,
};
use crate::plugins::bindings::handler::gregor::broker::types::{AclBinding, KafkaError};
use crate::plugins::imports::acls::{from_wit_binding, to_wit_binding};
use crate::plugins::imports::{error_field, error_of};
use crate::plugins::state::HandlerState;
use crate::security::acl_store::{AclChangeError, AclFilter, PatternFilter, PermissionFilter};
use crate::security::credentials::{
    CredentialChange, CredentialError, ScramCredential, ScramMechanism, MAX_ITERATIONS,
    MIN_ITERATIONS,
};

fn error(code: i16, message: String) -> KafkaError {
    KafkaError {
        code,
        message: Some(message),
    }
}

impl sasl::Host for HandlerState {
    fn handshake(&mut self, mechanism: String) -> HandshakeResult {
        let Some(session) = &self.session else {
            return HandshakeResult {
                error: error_of(ErrorCode::IllegalSaslState.code()),
                mechanisms: Vec::new(),
            };
        };
        let outcome = session.auth.handshake(&mechanism);
        HandshakeResult {
            error: error_of(outcome.error_code),
            mechanisms: outcome.mechanisms,
        }
    }

    fn authenticate(&mut self, auth_bytes: Vec<u8>) -> AuthenticateResult {
        let Some(session) = &self.session else {
            return AuthenticateResult {
                error: Some(error(
                    ErrorCode::IllegalSaslState.code(),
                    "no connection".to_string(),
                )),
                auth_bytes: Vec::new(),
                session_lifetime_ms: 0,
            };
        };
        let outcome = session
            .auth
            .authenticate(&auth_bytes, &self.services.credentials);
        AuthenticateResult {
            error: error_field(outcome.error_code, outcome.error_message),
            auth_bytes: outcome.token,
            session_lifetime_ms: 0,
        }
    }
}

fn mechanism_of(mechanism: Mechanism) -> ScramMechanism {
    match mechanism {
        Mechanism::ScramSha256 => ScramMechanism::Sha256,
        Mechanism::ScramSha512 => ScramMechanism::Sha512,
    }
}

fn mechanism_to_wit(mechanism: ScramMechanism) -> Mechanism {
    match mechanism {
        ScramMechanism::Sha256 => Mechanism::ScramSha256,
        ScramMechanism::Sha512 => Mechanism::ScramSha512,
    }
}

impl scram_credentials::Host for HandlerState {
    fn describe(&mut self, users: Option<Vec<String>>) -> Vec<UserCredentials> {
        self.services
            .credentials
            .list()
            .into_iter()
            .filter(|(user, _)| users.as_ref().is_none_or(|wanted| wanted.contains(user)))
            .map(|(user, credentials)| UserCredentials {
                user,
                credentials: credentials
                    .into_iter()
                    .map(|(mechanism, iterations)| CredentialInfo {
                        mechanism: mechanism_to_wit(mechanism),
                        iterations: i32::try_from(iterations).unwrap_or(i32::MAX),
                    })
                    .collect(),
            })
            .collect()
    }

    fn alter(
        &mut self,
        deletions: Vec<Deletion>,
        upsertions: Vec<Upsertion>,
    ) -> Vec<Option<KafkaError>> {
        let deletion_count = deletions.len();
        // Some: refused before the store is asked.
        let mut answers: Vec<Option<KafkaError>> = Vec::new();
        let mut changes: Vec<CredentialChange> = Vec::new();
        for deletion in deletions {
            answers.push(None);
            changes.push((deletion.user, mechanism_of(deletion.mechanism), None));
        }
        for upsertion in upsertions {
            let iterations = u32::try_from(upsertion.iterations).unwrap_or(0);
            if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations)
                || upsertion.salt.is_empty()
                || upsertion.salted_password.is_empty()
            {
                answers.push(Some(error(
                    ErrorCode::UnacceptableCredential.code(),
                    "Invalid iteration count, salt or salted password".to_string(),
                )));
                continue;
            }
            let mechanism = mechanism_of(upsertion.mechanism);
            let credential = ScramCredential::from_salted(
                mechanism,
                upsertion.salt,
                &upsertion.salted_password,
                iterations,
            );
            answers.push(None);
            changes.push((upsertion.user, mechanism, Some(credential)));
        }
        let mut results = self
            .broker_work(|state| state.services.credentials.apply(changes))
            .into_iter();
        answers
            .into_iter()
            .enumerate()
            .map(|(i, answer)| {
                answer.or_else(|| match results.next() {
                    Some(Ok(())) => None,
                    Some(Err(CredentialError::NotFound)) if i < deletion_count => Some(error(
                        ErrorCode::ResourceNotFound.code(),
                        "Attempt to delete a user credential that does not exist".to_string(),
                    )),
                    Some(Err(CredentialError::NotFound)) => None,
                    Some(Err(CredentialError::Io(message))) => {
                        Some(error(ErrorCode::UnknownServerError.code(), message))
                    }
                    Some(Err(CredentialError::Log { code, message })) => Some(error(code, message)),
                    None => Some(error(
                        ErrorCode::UnknownServerError.code(),
                        "no result".to_string(),
                    )),
                })
            })
            .collect()
    }
}

fn filter_of(filter: AclBindingFilter) -> AclFilter {
    AclFilter {
        resource_type: filter.resource_type.into(),
        resource_name: filter.resource_name,
        pattern: match filter.pattern_type {
            PatternTypeFilter::Any => PatternFilter::Any,
            PatternTypeFilter::Match => PatternFilter::Match,
            PatternTypeFilter::Literal => PatternFilter::Literal,
            PatternTypeFilter::Prefixed => PatternFilter::Prefixed,
        },
        principal: filter.principal,
        host: filter.host,
        operation: filter.operation.into(),
        permission: match filter.permission {
            PermissionTypeFilter::Any => PermissionFilter::Any,
            PermissionTypeFilter::Deny => PermissionFilter::Deny,
            PermissionTypeFilter::Allow => PermissionFilter::Allow,
        },
    }
}

/// An ACL change refused as too large is Kafka's POLICY_VIOLATION; a
/// failed write is UNKNOWN_SERVER_ERROR.
fn acl_change_error(failure: &AclChangeError) -> KafkaError {
    let code = match failure {
        AclChangeError::TooLarge(_) => ErrorCode::PolicyViolation.code(),
        AclChangeError::Io(_) => ErrorCode::UnknownServerError.code(),
        AclChangeError::Log { code, .. } => *code,
    };
    error(code, failure.to_string())
}

impl acl_admin::Host for HandlerState {
    fn create_acls(&mut self, bindings: Vec<AclBinding>) -> Vec<Option<KafkaError>> {
        let count = bindings.len();
        let bindings = bindings.into_iter().map(from_wit_binding).collect();
        match self.broker_work(|state| state.services.acls.create(bindings)) {
            Ok(()) => vec![None; count],
            Err(failure) => vec![Some(acl_change_error(&failure)); count],
        }
    }

    fn describe_acls(&mut self, filter: AclBindingFilter) -> Vec<AclBinding> {
        self.services
            .acls
            .matching(&filter_of(filter))
            .iter()
            .map(to_wit_binding)
            .collect()
    }

    fn delete_acls(
        &mut self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, KafkaError> {
        let filters: Vec<AclFilter> = filters.into_iter().map(filter_of).collect();
        match self.broker_work(|state| state.services.acls.delete(&filters)) {
            Ok(matched) => Ok(matched
                .iter()
                .map(|bindings| bindings.iter().map(to_wit_binding).collect())
                .collect()),
            Err(failure) => Err(acl_change_error(&failure)),
        }
    }
}
