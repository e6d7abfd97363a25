//! AlterUserScramCredentials (ApiKey 51, KIP-554): set or delete SCRAM
//! credentials, as Kafka's ScramControlManager validates them. The client
//! sends a salt and the salted password (never the password); the host
//! derives and stores the stored and server keys.
//!
//! - ALTER on the Cluster is required; without it every user gets
//!   CLUSTER_AUTHORIZATION_FAILED.
//! - A user may appear once per request (deletions and upsertions
//!   together): a second mention is DUPLICATE_RESOURCE for that user.
//! - An empty user name, an iteration count outside 4096..=16384 or an
//!   empty salt or salted password is UNACCEPTABLE_CREDENTIAL; an unknown
//!   mechanism is UNSUPPORTED_SASL_MECHANISM; deleting a credential that
//!   does not exist is RESOURCE_NOT_FOUND.
//! - One result per user, in the order users first appear.
//! - Error response (a trap or timeout): every user named, each once and
//!   sorted, with the error, as Kafka's
//!   `AlterUserScramCredentialsRequest.getErrorResponse`.

use gregor_sdk::AnswerError;
use std::collections::{BTreeSet, HashMap};

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use gregor_sdk::kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use gregor_sdk::scram_credentials::{self, Deletion, Mechanism, Upsertion};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

const MIN_ITERATIONS: i32 = 4096;
const MAX_ITERATIONS: i32 = 16384;

struct AlterUserScramCredentials;

fn mechanism(code: i8) -> Option<Mechanism> {
    match code {
        1 => Some(Mechanism::ScramSha256),
        2 => Some(Mechanism::ScramSha512),
        _ => None,
    }
}

/// The mechanism a deletion or upsertion names, or why the change is
/// refused before its own checks: an empty user name, then an unknown
/// mechanism (Kafka checks them in this order for both).
fn named_mechanism(user: &str, code: i8) -> Result<Mechanism, (ResponseError, String)> {
    match mechanism(code) {
        _ if user.is_empty() => Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".to_string(),
        )),
        None => Err((
            ResponseError::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism".to_string(),
        )),
        Some(mechanism) => Ok(mechanism),
    }
}

/// What to do for one user.
enum Change {
    Delete(Deletion),
    Upsert(Upsertion),
}

type Verdict = Result<Change, (ResponseError, String)>;

impl Handler for AlterUserScramCredentials {
    gregor_sdk::api!(AlterUserScramCredentialsRequest, 0..=0);

    fn handle(
        _: &RequestContext,
        request: &AlterUserScramCredentialsRequest,
    ) -> Reply<AlterUserScramCredentialsResponse> {
        alter(request).into()
    }

    /// Kafka's `getErrorResponse`: every user the request names (deletions
    /// and upsertions), each once and sorted as Kafka does, with the error.
    fn failed(
        _: &RequestContext,
        request: &AlterUserScramCredentialsRequest,
        error_code: i16,
    ) -> AlterUserScramCredentialsResponse {
        let users: BTreeSet<&str> = request
            .deletions
            .iter()
            .map(|deletion| deletion.name.as_str())
            .chain(
                request
                    .upsertions
                    .iter()
                    .map(|upsertion| upsertion.name.as_str()),
            )
            .collect();
        let results = users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(str_bytes(user))
                    .with_error_code(error_code)
                    .with_error_message(None)
            })
            .collect();
        AlterUserScramCredentialsResponse::default().with_results(results)
    }
}

/// Validates every user's change, then (with ALTER on the Cluster) applies
/// the valid ones in one step; one result per user, in order of first
/// appearance.
fn alter(request: &AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse {
    let authorized = cluster_allowed(Operation::Alter);
    // Users in order of first appearance, each with its verdict.
    let mut order: Vec<String> = Vec::new();
    let mut verdicts: HashMap<String, Verdict> = HashMap::new();
    let mut note = |user: String, verdict: Verdict| match verdicts.get(&user) {
        None => {
            order.push(user.clone());
            verdicts.insert(user, verdict);
        }
        Some(_) => {
            verdicts.insert(
                user,
                Err((
                    ResponseError::DuplicateResource,
                    "A user credential cannot be altered twice in the same request".to_string(),
                )),
            );
        }
    };
    for deletion in &request.deletions {
        let user = deletion.name.to_string();
        let verdict = named_mechanism(&user, deletion.mechanism).map(|mechanism| {
            Change::Delete(Deletion {
                user: user.clone(),
                mechanism,
            })
        });
        note(user, verdict);
    }
    for upsertion in &request.upsertions {
        let user = upsertion.name.to_string();
        let verdict = match named_mechanism(&user, upsertion.mechanism) {
            Err(refused) => Err(refused),
            Ok(_) if upsertion.iterations < MIN_ITERATIONS => Err((
                ResponseError::UnacceptableCredential,
                "Too few iterations".to_string(),
            )),
            Ok(_) if upsertion.iterations > MAX_ITERATIONS => Err((
                ResponseError::UnacceptableCredential,
                "Too many iterations".to_string(),
            )),
            Ok(_) if upsertion.salt.is_empty() || upsertion.salted_password.is_empty() => Err((
                ResponseError::UnacceptableCredential,
                "Salt and salted password must not be empty".to_string(),
            )),
            Ok(mechanism) => Ok(Change::Upsert(Upsertion {
                user: user.clone(),
                mechanism,
                iterations: upsertion.iterations,
                salt: upsertion.salt.to_vec(),
                salted_password: upsertion.salted_password.to_vec(),
            })),
        };
        note(user, verdict);
    }

    let mut errors: HashMap<String, (i16, Option<String>)> = HashMap::new();
    if authorized {
        let mut deletions = Vec::new();
        let mut upsertions = Vec::new();
        for user in &order {
            match verdicts.remove(user) {
                Some(Ok(Change::Delete(deletion))) => deletions.push(deletion),
                Some(Ok(Change::Upsert(upsertion))) => upsertions.push(upsertion),
                Some(Err((error, message))) => {
                    errors.insert(user.clone(), (error.code(), Some(message)));
                }
                None => {}
            }
        }
        let users: Vec<String> = deletions
            .iter()
            .map(|d| d.user.clone())
            .chain(upsertions.iter().map(|u| u.user.clone()))
            .collect();
        let results = scram_credentials::alter(&deletions, &upsertions);
        for (user, result) in users.into_iter().zip(results) {
            errors.insert(user, (result.error_code(), result.error_message()));
        }
    }
    let mut response = AlterUserScramCredentialsResponse::default();
    for user in order {
        let (code, message) = if authorized {
            errors.remove(&user).unwrap_or((0, None))
        } else {
            (ResponseError::ClusterAuthorizationFailed.code(), None)
        };
        response.results.push(
            AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(&user))
                .with_error_code(code)
                .with_error_message(message.as_deref().map(str_bytes)),
        );
    }
    response
}

gregor_sdk::export_handler!(AlterUserScramCredentials);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::KafkaError;

    fn deletion(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        ScramCredentialDeletion::default()
            .with_name(str_bytes(name))
            .with_mechanism(mechanism)
    }

    fn upsertion(name: &str, iterations: i32) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(str_bytes(name))
            .with_mechanism(1)
            .with_iterations(iterations)
            .with_salt(b"salt".to_vec().into())
            .with_salted_password(b"salted".to_vec().into())
    }

    fn results(response: &AlterUserScramCredentialsResponse) -> Vec<(String, i16)> {
        response
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect()
    }

    #[test]
    fn encodes_for_every_served_version() {
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![deletion("carol", 1), deletion("alice", 2)])
            .with_upsertions(vec![upsertion("bob", 4096), upsertion("alice", 4096)]);
        let duplicate = AlterUserScramCredentialsResult::default()
            .with_user(str_bytes("alice"))
            .with_error_code(ResponseError::DuplicateResource.code())
            .with_error_message(Some(str_bytes("twice")));
        assert_encodes_for_served_versions::<AlterUserScramCredentials>(
            &[request],
            &[AlterUserScramCredentialsResponse::default().with_results(vec![duplicate])],
        );
    }

    #[test]
    fn a_failure_answers_every_user_once_sorted() {
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![deletion("carol", 1), deletion("alice", 1)])
            .with_upsertions(vec![upsertion("bob", 4096), upsertion("alice", 4096)]);
        let code = ResponseError::UnknownServerError.code();
        let ctx = fake::context::<AlterUserScramCredentials>(0);
        let response = AlterUserScramCredentials::failed(&ctx, &request, code);
        assert_eq!(
            results(&response),
            [
                ("alice".to_string(), code),
                ("bob".to_string(), code),
                ("carol".to_string(), code)
            ]
        );
    }

    /// A store that has no credential to delete and accepts every upsertion.
    struct Store {
        allowed: bool,
    }

    impl FakeHost for Store {
        fn authorize(&self, _: &Action) -> bool {
            self.allowed
        }
        fn alter_scram_credentials(
            &self,
            deletions: &[Deletion],
            upsertions: &[Upsertion],
        ) -> Vec<Option<KafkaError>> {
            assert!(self.allowed, "an unauthorized change reached the store");
            let missing = Some(KafkaError {
                code: ResponseError::ResourceNotFound.code(),
                message: Some("no such credential".to_string()),
            });
            let stored = None;
            let deleted = deletions.iter().map(|_| missing.clone());
            deleted
                .chain(upsertions.iter().map(|_| stored.clone()))
                .collect()
        }
    }

    #[test]
    fn only_valid_changes_reach_the_store() {
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![deletion("dave", 1), deletion("erin", 9)])
            .with_upsertions(vec![
                upsertion("alice", 4096),
                upsertion("bob", 100),
                upsertion("alice", 8192),
                upsertion("", 4096),
            ]);
        let handled =
            fake::handle::<AlterUserScramCredentials>(Store { allowed: true }, 0, &request);
        let unacceptable = ResponseError::UnacceptableCredential.code();
        assert_eq!(
            results(&handled.response.unwrap()),
            [
                ("dave".to_string(), ResponseError::ResourceNotFound.code()),
                (
                    "erin".to_string(),
                    ResponseError::UnsupportedSaslMechanism.code()
                ),
                ("alice".to_string(), ResponseError::DuplicateResource.code()),
                ("bob".to_string(), unacceptable),
                (String::new(), unacceptable),
            ]
        );
    }

    #[test]
    fn without_alter_on_the_cluster_every_user_is_refused() {
        let request = AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![upsertion("alice", 4096), upsertion("bob", 1)]);
        let handled =
            fake::handle::<AlterUserScramCredentials>(Store { allowed: false }, 0, &request);
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        assert_eq!(
            results(&handled.response.unwrap()),
            [("alice".to_string(), denied), ("bob".to_string(), denied)]
        );
        assert_eq!(handled.counted_errors, [denied, denied]);
    }
}
