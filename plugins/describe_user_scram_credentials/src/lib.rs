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
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
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

impl RawHandler for DescribeUserScramCredentials {
    fn describe() -> ApiInfo {
        api_info::<DescribeUserScramCredentialsRequest>("DescribeUserScramCredentials", 0, 0)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DescribeUserScramCredentialsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = if cluster_allowed(Operation::Describe) {
            describe_users(&request)
        } else {
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
        };
        gregor_sdk::count_errors(
            std::iter::once(response.error_code)
                .chain(response.results.iter().map(|result| result.error_code)),
        );
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error at the top level and for every
    /// user named.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: DescribeUserScramCredentialsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(&request, error_code))
    }
}

/// The request answered with `error_code` at the top level and for every
/// user it names (Kafka leaves the users' names out; they are kept here).
fn error_response_for(
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
    response
}

gregor_sdk::export_raw_handler!(DescribeUserScramCredentials);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn error_responses_answer_every_user_for_every_served_version() {
        let user = |name: &str| UserName::default().with_name(str_bytes(name));
        let request = DescribeUserScramCredentialsRequest::default()
            .with_users(Some(vec![user("alice"), user("bob")]));
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(&request, code);
        assert_eq!(response.error_code, code);
        let shape: Vec<(String, i16)> = response
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect();
        assert_eq!(
            shape,
            vec![("alice".to_string(), code), ("bob".to_string(), code)]
        );
        assert!(response.encode(&mut Vec::new(), 0).is_ok());
        let all = error_response_for(&DescribeUserScramCredentialsRequest::default(), code);
        assert!(all.results.is_empty());
        assert!(all.encode(&mut Vec::new(), 0).is_ok());
    }
}
