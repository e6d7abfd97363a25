//! The admin endpoint's user management: list, set and delete SCRAM
//! credentials of a running broker (what `gregor users` calls). Passwords
//! arrive in the request body and are turned into salted credentials at
//! once; they are never stored or logged. User names arrive decoded
//! from the route (percent-encoding is the HTTP layer's).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::security::credentials::{
    CredentialStore, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS,
};

#[derive(Deserialize)]
struct SetUser {
    password: String,
    #[serde(default)]
    mechanisms: Vec<String>,
    iterations: Option<u32>,
}

pub fn list_users(credentials: &CredentialStore) -> Value {
    let users: Vec<Value> = credentials
        .list()
        .into_iter()
        .map(|(user, credentials)| {
            let credentials: Vec<Value> = credentials
                .into_iter()
                .map(|(mechanism, iterations)| {
                    json!({ "mechanism": mechanism.name(), "iterations": iterations })
                })
                .collect();
            json!({ "name": user, "credentials": credentials })
        })
        .collect();
    json!({ "users": users })
}

pub async fn set_user(
    credentials: &Arc<CredentialStore>,
    name: &str,
    body: &[u8],
) -> Result<String, String> {
    if name.is_empty() {
        return Err("invalid user name \"\"".to_string());
    }
    let user = name.to_string();
    let request: SetUser =
        serde_json::from_slice(body).map_err(|error| format!("invalid body: {error}"))?;
    if request.password.is_empty() {
        return Err("the password is empty".to_string());
    }
    let mechanisms = if request.mechanisms.is_empty() {
        ScramMechanism::ALL.to_vec()
    } else {
        request
            .mechanisms
            .iter()
            .map(|name| {
                ScramMechanism::from_name(name).ok_or_else(|| {
                    format!("unknown mechanism {name:?}: use SCRAM-SHA-256 or SCRAM-SHA-512")
                })
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    let iterations = request.iterations.unwrap_or(MIN_ITERATIONS);
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(format!(
            "iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"
        ));
    }
    // PBKDF2 takes milliseconds: keep it off the async workers.
    let store = Arc::clone(credentials);
    let stored_user = user.clone();
    let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
    let what = format!("set {} credentials of {user}", names.join(" and "));
    tokio::task::spawn_blocking(move || {
        store.set_password(&stored_user, &request.password, &mechanisms, iterations)
    })
    .await
    .map_err(|error| format!("credential task failed: {error}"))?
    .map_err(|error| format!("storing the credentials failed: {error:?}"))?;
    Ok(what)
}

pub fn delete_user(credentials: &CredentialStore, user: &str) -> Result<String, String> {
    match credentials.delete_user(user) {
        Ok(true) => Ok(format!("deleted the credentials of {user}")),
        Ok(false) => Err(format!("{user} has no credentials")),
        Err(error) => Err(format!("deleting the credentials failed: {error:?}")),
    }
}
