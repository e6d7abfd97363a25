//! The client side of SASL, for the broker's own connections (the
//! channel to the active controller, the replica fetchers' and the
//! transaction markers' channels to partition leaders): PLAIN (RFC 4616) and SCRAM-SHA-256/
//! 512 (RFC 5802, as Kafka's ScramSaslClient runs it: client-first,
//! server-first, client-final, server-final, whose signature is checked so
//! the broker knows it talks to a server holding its credential).
//!
//! The credentials are Kafka's: the mechanism from
//! `sasl.mechanism.controller.protocol` (towards controllers) or
//! `sasl.mechanism.inter.broker.protocol` (towards brokers on the
//! inter-broker listener) and the `username`/`password` of
//! the JAAS config for that listener and mechanism
//! (`listener.name.<listener>.<mechanism>.sasl.jaas.config`, else
//! `sasl.jaas.config`). Only those two options of the JAAS text are read:
//! the login module names nothing Gregor loads.

use anyhow::{bail, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use crate::config::BrokerConfig;
use crate::security::credentials::ScramMechanism;

/// Kafka's name for the mechanism brokers use towards controllers.
pub const CONTROLLER_MECHANISM: &str = "sasl.mechanism.controller.protocol";
/// Kafka's name for the mechanism brokers use towards each other.
pub const INTER_BROKER_MECHANISM: &str = "sasl.mechanism.inter.broker.protocol";

/// Random bytes of the client nonce.
const NONCE_BYTES: usize = 24;

/// Who the broker logs in as, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

/// The credentials for a SASL controller listener `listener`: the
/// mechanism and the JAAS config's username and password, or why they are
/// missing (the message names the settings).
pub fn controller_credentials(config: &BrokerConfig, listener: &str) -> Result<SaslCredentials> {
    credentials(config, CONTROLLER_MECHANISM, "controller", listener)
}

/// The credentials for a SASL inter-broker listener `listener`, as
/// [`controller_credentials`] with `sasl.mechanism.inter.broker.protocol`.
pub fn inter_broker_credentials(config: &BrokerConfig, listener: &str) -> Result<SaslCredentials> {
    credentials(config, INTER_BROKER_MECHANISM, "inter-broker", listener)
}

/// The login on the `role` listener `listener`, with the mechanism the
/// setting `mechanism_key` names.
fn credentials(
    config: &BrokerConfig,
    mechanism_key: &str,
    role: &str,
    listener: &str,
) -> Result<SaslCredentials> {
    let Some(mechanism) = config.get(mechanism_key).map(str::trim) else {
        bail!(
            "the {role} listener {listener} uses SASL: set {mechanism_key} to PLAIN, \
             SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default, GSSAPI, is not supported)"
        );
    };
    if mechanism != "PLAIN" && ScramMechanism::from_name(mechanism).is_none() {
        bail!("{mechanism_key}={mechanism} is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512");
    }
    let scoped = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase()
    );
    let Some(jaas) = config
        .get(&scoped)
        .or_else(|| config.get("sasl.jaas.config"))
    else {
        bail!(
            "the {role} listener {listener} uses SASL: give the broker's login in {scoped} \
             (or sasl.jaas.config), e.g. `... required username=\"broker\" password=\"...\";`"
        );
    };
    let option = |name: &str| {
        jaas_option(jaas, name)
            .ok_or_else(|| anyhow::anyhow!("{scoped} (or sasl.jaas.config) has no {name}=\"...\""))
    };
    Ok(SaslCredentials {
        mechanism: mechanism.to_string(),
        username: option("username")?,
        password: option("password")?,
    })
}

/// The value of `name="value"` (or `name=value`) in a JAAS config text.
fn jaas_option(jaas: &str, name: &str) -> Option<String> {
    let mut rest = jaas;
    loop {
        let at = rest.find(name)?;
        let before = rest[..at].chars().next_back();
        let after = rest[at + name.len()..].trim_start();
        rest = &rest[at + name.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(value) = after.strip_prefix('=').map(str::trim_start) else {
            continue;
        };
        return Some(match value.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or_default().to_string(),
            None => value
                .split(|c: char| c.is_whitespace() || c == ';')
                .next()
                .unwrap_or_default()
                .to_string(),
        });
    }
}

enum Stage {
    First,
    /// Sent client-first; waiting for server-first.
    ServerFirst {
        nonce: String,
        first_bare: String,
    },
    /// Sent client-final; waiting for server-final's signature.
    ServerFinal {
        signature: Vec<u8>,
    },
    Done,
}

/// One exchange: [`SaslClient::step`] with the server's last token (empty
/// at first) gives the next token to send, or `None` once authenticated.
pub struct SaslClient {
    credentials: SaslCredentials,
    scram: Option<ScramMechanism>,
    stage: Stage,
}

impl SaslClient {
    pub fn new(credentials: SaslCredentials) -> Self {
        let scram = ScramMechanism::from_name(&credentials.mechanism);
        Self {
            credentials,
            scram,
            stage: Stage::First,
        }
    }

    pub fn mechanism(&self) -> &str {
        &self.credentials.mechanism
    }

    pub fn username(&self) -> &str {
        &self.credentials.username
    }

    /// The next token for the server, `None` when done; an error when the
    /// server's token is wrong (a server without our credential).
    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let Some(mechanism) = self.scram else {
            return Ok(match std::mem::replace(&mut self.stage, Stage::Done) {
                Stage::First => Some(
                    format!(
                        "\0{}\0{}",
                        self.credentials.username, self.credentials.password
                    )
                    .into_bytes(),
                ),
                _ => None,
            });
        };
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::First => {
                let mut random = [0u8; NONCE_BYTES];
                getrandom::fill(&mut random).map_err(|e| format!("no randomness: {e}"))?;
                let nonce = BASE64.encode(random);
                let user = self
                    .credentials
                    .username
                    .replace('=', "=3D")
                    .replace(',', "=2C");
                let first_bare = format!("n={user},r={nonce}");
                let token = format!("n,,{first_bare}").into_bytes();
                self.stage = Stage::ServerFirst { nonce, first_bare };
                Ok(Some(token))
            }
            Stage::ServerFirst { nonce, first_bare } => {
                let server_first = std::str::from_utf8(server)
                    .map_err(|_| "the server-first message is not UTF-8".to_string())?;
                let (final_message, signature) = client_final(
                    mechanism,
                    &self.credentials.password,
                    &nonce,
                    &first_bare,
                    server_first,
                )?;
                self.stage = Stage::ServerFinal { signature };
                Ok(Some(final_message.into_bytes()))
            }
            Stage::ServerFinal { signature } => {
                let text = std::str::from_utf8(server).unwrap_or_default();
                if let Some(error) = text.strip_prefix("e=") {
                    return Err(format!("the server refused the login: {error}"));
                }
                let verifier = text
                    .strip_prefix("v=")
                    .and_then(|v| BASE64.decode(v).ok())
                    .ok_or("the server-final message has no verifier")?;
                if verifier != signature {
                    return Err("the server's SCRAM signature is wrong".to_string());
                }
                Ok(None)
            }
            Stage::Done => Ok(None),
        }
    }
}

/// RFC 5802's client-final message for `server_first`, and the server
/// signature to expect.
fn client_final(
    mechanism: ScramMechanism,
    password: &str,
    client_nonce: &str,
    first_bare: &str,
    server_first: &str,
) -> Result<(String, Vec<u8>), String> {
    let invalid = || format!("invalid SCRAM server-first message {server_first:?}");
    let mut attributes = server_first.split(',');
    let nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|nonce| nonce.starts_with(client_nonce) && nonce.len() > client_nonce.len())
        .ok_or_else(invalid)?;
    let salt = attributes
        .next()
        .and_then(|a| a.strip_prefix("s="))
        .and_then(|s| BASE64.decode(s).ok())
        .ok_or_else(invalid)?;
    let iterations: u32 = attributes
        .next()
        .and_then(|a| a.strip_prefix("i="))
        .and_then(|i| i.parse().ok())
        .filter(|&i| i > 0)
        .ok_or_else(invalid)?;
    let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
    let client_key = mechanism.hmac(&salted, b"Client Key");
    let stored_key = mechanism.hash(&client_key);
    let without_proof = format!("c={},r={nonce}", BASE64.encode("n,,"));
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let client_signature = mechanism.hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&client_signature)
        .map(|(key, signature)| key ^ signature)
        .collect();
    let server_key = mechanism.hmac(&salted, b"Server Key");
    let server_signature = mechanism.hmac(&server_key, auth_message.as_bytes());
    Ok((
        format!("{without_proof},p={}", BASE64.encode(proof)),
        server_signature,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::credentials::CredentialStore;
    use crate::security::scram::{ScramServer, ScramStep};

    fn config(pairs: &[&str]) -> BrokerConfig {
        BrokerConfig::from_pairs(pairs)
    }

    #[test]
    fn credentials_come_from_the_mechanism_and_the_listener_jaas_config() {
        let jaas = "listener.name.controller.scram-sha-256.sasl.jaas.config=org.apache.kafka.\
                    common.security.scram.ScramLoginModule required username=\"broker\" \
                    password=\"s3cret\";";
        let found = controller_credentials(
            &config(&["sasl.mechanism.controller.protocol=SCRAM-SHA-256", jaas]),
            "CONTROLLER",
        )
        .unwrap();
        assert_eq!(
            (
                found.mechanism.as_str(),
                found.username.as_str(),
                found.password.as_str()
            ),
            ("SCRAM-SHA-256", "broker", "s3cret")
        );
        let general = config(&[
            "sasl.mechanism.controller.protocol=PLAIN",
            "sasl.jaas.config=x required user_admin=\"no\" username=admin password=pw;",
        ]);
        let found = controller_credentials(&general, "CONTROLLER").unwrap();
        assert_eq!(
            (found.username.as_str(), found.password.as_str()),
            ("admin", "pw")
        );

        let missing = controller_credentials(&config(&[]), "CONTROLLER").unwrap_err();
        assert!(
            missing.to_string().contains(CONTROLLER_MECHANISM),
            "{missing}"
        );
        let gssapi = config(&["sasl.mechanism.controller.protocol=GSSAPI"]);
        assert!(controller_credentials(&gssapi, "CONTROLLER").is_err());
        let no_login = config(&["sasl.mechanism.controller.protocol=PLAIN"]);
        let error = controller_credentials(&no_login, "CONTROLLER").unwrap_err();
        assert!(error
            .to_string()
            .contains("listener.name.controller.plain.sasl.jaas.config"));
    }

    #[test]
    fn inter_broker_credentials_use_their_own_mechanism_setting() {
        let jaas = "listener.name.internal.plain.sasl.jaas.config=x required \
                    username=\"broker\" password=\"pw\";";
        let found = inter_broker_credentials(
            &config(&["sasl.mechanism.inter.broker.protocol=PLAIN", jaas]),
            "INTERNAL",
        )
        .unwrap();
        assert_eq!(
            (found.mechanism.as_str(), found.username.as_str()),
            ("PLAIN", "broker")
        );
        let controller_only = config(&["sasl.mechanism.controller.protocol=PLAIN", jaas]);
        let error = inter_broker_credentials(&controller_only, "INTERNAL").unwrap_err();
        assert!(
            error.to_string().contains(INTER_BROKER_MECHANISM)
                && error.to_string().contains("inter-broker listener INTERNAL"),
            "{error}"
        );
    }

    fn credentials(mechanism: &str, password: &str) -> SaslCredentials {
        SaslCredentials {
            mechanism: mechanism.to_string(),
            username: "broker".to_string(),
            password: password.to_string(),
        }
    }

    /// Runs the client against the host's SCRAM server: the user it
    /// authenticated, or the first error of either side.
    fn exchange(mechanism: ScramMechanism, password: &str) -> Result<String, String> {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        store
            .set_password("broker", "right", &[mechanism], 4096)
            .unwrap();
        let mut client = SaslClient::new(credentials(mechanism.name(), password));
        let mut server = ScramServer::new(mechanism);
        let mut token = client.step(&[])?.unwrap();
        loop {
            match server.step(&token, &store).map_err(|e| e.0)? {
                ScramStep::Continue(answer) => token = client.step(&answer)?.unwrap(),
                ScramStep::Complete { user, token } => {
                    assert_eq!(client.step(&token)?, None);
                    return Ok(user);
                }
            }
        }
    }

    #[test]
    fn scram_logs_in_against_the_host_server_and_checks_its_signature() {
        for mechanism in ScramMechanism::ALL {
            assert_eq!(exchange(mechanism, "right").as_deref(), Ok("broker"));
            assert!(exchange(mechanism, "wrong").is_err());
        }
        let mut client = SaslClient::new(credentials("SCRAM-SHA-256", "pw"));
        let first = String::from_utf8(client.step(&[]).unwrap().unwrap()).unwrap();
        let nonce = first.rsplit_once("r=").unwrap().1;
        let server_first = format!("r={nonce}xyz,s={},i=4096", BASE64.encode(b"salt"));
        client.step(server_first.as_bytes()).unwrap();
        assert!(client.step(b"v=AAAA").is_err(), "a forged signature");
    }

    #[test]
    fn plain_sends_one_token() {
        let mut client = SaslClient::new(credentials("PLAIN", "pw"));
        assert_eq!(client.step(&[]).unwrap().unwrap(), b"\0broker\0pw");
        assert_eq!(client.step(&[]).unwrap(), None);
    }
}
