//! DescribeUserScramCredentials (ApiKey 50, KIP-554): the SCRAM mechanisms
//! and iteration counts each user has (never salts or keys), as Kafka's
//! controller answers it.
//!
//! - DESCRIBE on the Cluster is required; without it the whole request
//!   fails with CLUSTER_AUTHORIZATION_FAILED.
//! - No users (null or empty) describes every user with credentials.
//! - A user named twice gets DUPLICATE_RESOURCE; a named user without
//!   credentials gets RESOURCE_NOT_FOUND.

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
use gregor_sdk::{
    api_info, decode, respond, ApiInfo, Handler, Outcome, RequestContext, ResponseError,
};

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

fn failed(user: &str, error: ResponseError, message: String) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(str_bytes(user))
        .with_error_code(error.code())
        .with_error_message(Some(str_bytes(&message)))
}

impl Handler for DescribeUserScramCredentials {
    fn describe() -> ApiInfo {
        api_info::<DescribeUserScramCredentialsRequest>("DescribeUserScramCredentials", 0, 0)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DescribeUserScramCredentialsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = DescribeUserScramCredentialsResponse::default();
        if !cluster_allowed(Operation::Describe) {
            response.error_code = ResponseError::ClusterAuthorizationFailed.code();
            return respond(&ctx, &response);
        }
        let named: Vec<String> = request
            .users
            .unwrap_or_default()
            .iter()
            .map(|user| user.name.to_string())
            .collect();
        if named.is_empty() {
            response.results = scram_credentials::describe(None)
                .into_iter()
                .map(described)
                .collect();
            return respond(&ctx, &response);
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
                (1, None) => failed(
                    user,
                    ResponseError::ResourceNotFound,
                    format!("Attempt to describe a user credential that does not exist: {user}"),
                ),
                _ => failed(
                    user,
                    ResponseError::DuplicateResource,
                    format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
                ),
            };
            response.results.push(result);
        }
        respond(&ctx, &response)
    }
}

gregor_sdk::export_handler!(DescribeUserScramCredentials);
