//! DescribeUserScramCredentials (ApiKey 50, KIP-554): the SCRAM mechanisms
//! and iteration counts each user has (never salts or keys), as Kafka's
//! controller answers it.
//!
//! - DESCRIBE on the Cluster is required; without it the whole request
//!   fails with CLUSTER_AUTHORIZATION_FAILED.
//! - No users (null or empty) describes every user with credentials.
//! - A user named twice gets DUPLICATE_RESOURCE; a named user without
//!   credentials gets RESOURCE_NOT_FOUND.
//! - Error response (a trap or timeout): the error at the top level and
//!   for every user named, as Kafka's
//!   `DescribeUserScramCredentialsRequest.getErrorResponse`.

use std::collections::HashMap;

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use gregor_sdk::kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use gregor_sdk::scram_credentials::{self, Mechanism, UserCredentials};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct DescribeUserScramCredentials;

/// Kafka's ScramMechanism type byte.
fn mechanism_code(mechanism: Mechanism) -> i8 {
    match mechanism {
        Mechanism::ScramSha256 => 1,
        Mechanism::ScramSha512 => 2,
    }
}

fn described(user: UserCredentials) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(str_bytes(&user.user))
        .with_credential_infos(
            user.credentials
                .iter()
                .map(|info| {
                    CredentialInfo::default()
                        .with_mechanism(mechanism_code(info.mechanism))
                        .with_iterations(info.iterations)
                })
                .collect(),
        )
}

fn refused(
    user: &str,
    error: ResponseError,
    message: String,
) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(str_bytes(user))
        .with_error_code(error.code())
        .with_error_message(Some(str_bytes(&message)))
}

impl Handler for DescribeUserScramCredentials {
    gregor_sdk::api!(DescribeUserScramCredentialsRequest, 0..=0);

    fn handle(
        _: &RequestContext,
        request: &DescribeUserScramCredentialsRequest,
    ) -> Reply<DescribeUserScramCredentialsResponse> {
        if cluster_allowed(Operation::Describe) {
            describe_users(request).into()
        } else {
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                .into()
        }
    }

    /// Kafka's `getErrorResponse`: the error at the top level and for every
    /// user named (Kafka leaves the users' names out; they are kept here).
    fn failed(
        _: &RequestContext,
        request: &DescribeUserScramCredentialsRequest,
        error_code: i16,
    ) -> DescribeUserScramCredentialsResponse {
        let results = request
            .users
            .iter()
            .flatten()
            .map(|user| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(user.name.clone())
                    .with_error_code(error_code)
                    .with_error_message(None)
            })
            .collect();
        DescribeUserScramCredentialsResponse::default()
            .with_error_code(error_code)
            .with_error_message(None)
            .with_results(results)
    }
}

/// The credentials of every user (none named) or of each named user, once.
fn describe_users(
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let mut response = DescribeUserScramCredentialsResponse::default();
    let named: Vec<String> = request
        .users
        .iter()
        .flatten()
        .map(|user| user.name.to_string())
        .collect();
    if named.is_empty() {
        response.results = scram_credentials::describe(None)
            .into_iter()
            .map(described)
            .collect();
        return response;
    }
    let mut mentions: HashMap<&str, usize> = HashMap::new();
    for user in &named {
        *mentions.entry(user.as_str()).or_default() += 1;
    }
    let mut found: HashMap<String, UserCredentials> = scram_credentials::describe(Some(&named))
        .into_iter()
        .map(|user| (user.user.clone(), user))
        .collect();
    for user in &named {
        // Each user is answered once, at its first mention.
        let Some(count) = mentions.insert(user.as_str(), 0) else {
            continue;
        };
        let result = match (count, found.remove(user)) {
            (0, _) => continue,
            (1, Some(credentials)) => described(credentials),
            (1, None) => refused(
                user,
                ResponseError::ResourceNotFound,
                format!("Attempt to describe a user credential that does not exist: {user}"),
            ),
            _ => refused(
                user,
                ResponseError::DuplicateResource,
                format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
            ),
        };
        response.results.push(result);
    }
    response
}

gregor_sdk::export_handler!(DescribeUserScramCredentials);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use gregor_sdk::scram_credentials::CredentialInfo as Info;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn request(users: &[&str]) -> DescribeUserScramCredentialsRequest {
        let users = users
            .iter()
            .map(|name| UserName::default().with_name(str_bytes(name)))
            .collect();
        DescribeUserScramCredentialsRequest::default().with_users(Some(users))
    }

    #[test]
    fn encodes_for_every_served_version() {
        let credentials = UserCredentials {
            user: "alice".to_string(),
            credentials: vec![Info {
                mechanism: Mechanism::ScramSha512,
                iterations: 8192,
            }],
        };
        let missing = ResponseError::ResourceNotFound;
        assert_encodes_for_served_versions::<DescribeUserScramCredentials>(
            &[request(&["alice", "bob"])],
            &[
                DescribeUserScramCredentialsResponse::default().with_results(vec![
                    described(credentials),
                    refused("bob", missing, "no such user".to_string()),
                ]),
            ],
        );
    }

    #[test]
    fn a_failure_answers_every_user_named() {
        let code = ResponseError::UnknownServerError.code();
        let ctx = fake::context::<DescribeUserScramCredentials>(0);
        let response =
            DescribeUserScramCredentials::failed(&ctx, &request(&["alice", "bob"]), code);
        let shape: Vec<(String, i16)> = response
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect();
        assert_eq!(
            shape,
            [("alice".to_string(), code), ("bob".to_string(), code)]
        );
        assert_eq!(response.error_code, code);
    }

    /// A credential store where only alice has credentials; DESCRIBE on
    /// the Cluster as `allowed` says.
    struct Store {
        allowed: bool,
    }

    impl FakeHost for Store {
        fn authorize(&self, _: &Action) -> bool {
            self.allowed
        }
        fn describe_scram_credentials(&self, users: Option<&[String]>) -> Vec<UserCredentials> {
            assert!(self.allowed, "an unauthorized request reached the store");
            let alice = UserCredentials {
                user: "alice".to_string(),
                credentials: vec![Info {
                    mechanism: Mechanism::ScramSha256,
                    iterations: 4096,
                }],
            };
            match users {
                Some(users) if !users.iter().any(|u| u == "alice") => Vec::new(),
                _ => vec![alice],
            }
        }
    }

    fn results(response: &DescribeUserScramCredentialsResponse) -> Vec<(String, i16, usize)> {
        response
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code, r.credential_infos.len()))
            .collect()
    }

    #[test]
    fn each_named_user_is_answered_once() {
        let duplicate = ResponseError::DuplicateResource.code();
        let missing = ResponseError::ResourceNotFound.code();
        let handled = fake::handle::<DescribeUserScramCredentials>(
            Store { allowed: true },
            0,
            &request(&["bob", "alice", "carol", "bob"]),
        );
        let response = handled.response.unwrap();
        assert_eq!(
            results(&response),
            [
                ("bob".to_string(), duplicate, 0),
                ("alice".to_string(), 0, 1),
                ("carol".to_string(), missing, 0),
            ]
        );
        assert_eq!(handled.counted_errors, [duplicate, missing]);
    }

    #[test]
    fn no_users_describes_everyone_and_denial_asks_no_store() {
        let all = DescribeUserScramCredentialsRequest::default();
        let handled =
            fake::handle::<DescribeUserScramCredentials>(Store { allowed: true }, 0, &all);
        assert_eq!(
            results(&handled.response.unwrap()),
            [("alice".to_string(), 0, 1)]
        );

        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let handled = fake::handle::<DescribeUserScramCredentials>(
            Store { allowed: false },
            0,
            &request(&["alice"]),
        );
        let response = handled.response.unwrap();
        assert_eq!((response.error_code, response.results.len()), (denied, 0));
        assert_eq!(handled.counted_errors, [denied]);
    }
}
