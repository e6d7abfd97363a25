//! The security settings of the broker, with Kafka's property names:
//!
//! - `listeners` names each listener; `listener.security.protocol.map`
//!   (`NAME:PROTOCOL,...`) gives its protocol: PLAINTEXT, SSL,
//!   SASL_PLAINTEXT or SASL_SSL. Listeners named after a protocol need no
//!   entry (Kafka's default map).
//! - TLS (SSL, SASL_SSL), from PEM files: `ssl.keystore.location` (one PEM
//!   file with the private key and the certificate chain, Kafka's
//!   `ssl.keystore.type=PEM`), or `ssl.certificate.location` (chain) plus
//!   `ssl.key.location` (key); `ssl.truststore.location` (PEM CA
//!   certificates that client certificates must chain to) and
//!   `ssl.client.auth` = `required`, `requested` or `none` (default).
//!   JKS and PKCS12 stores and encrypted keys (`ssl.key.password`) are not
//!   supported.
//! - SASL (SASL_PLAINTEXT, SASL_SSL): `sasl.enabled.mechanisms`, any of
//!   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (default: all three).
//! - `sasl.bootstrap.users` = `user:password,...`: SCRAM credentials (both
//!   mechanisms) created at start for users that have none yet, so a fresh
//!   broker has someone to log in as. Passwords may not contain ','.
//!
//! Every per-listener setting can be given for one listener only with
//! Kafka's prefix `listener.name.<lower-case listener name>.` (e.g.
//! `listener.name.internal.ssl.client.auth=required`).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::config::BrokerConfig;
use crate::security::sasl::SUPPORTED_MECHANISMS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|protocol| protocol.name().eq_ignore_ascii_case(name))
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// Where a TLS listener's certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The PEM file holding the certificate chain.
    pub certificates: PathBuf,
    /// The PEM file holding the private key (may be the same file).
    pub key: PathBuf,
    pub truststore: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

/// A per-listener setting: `listener.name.<name>.<key>`, else `<key>`.
pub fn listener_setting<'a>(
    config: &'a BrokerConfig,
    listener: &str,
    key: &str,
) -> Option<&'a str> {
    let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
    config
        .explicit(&prefixed)
        .or_else(|| config.get(key))
        .map(str::trim)
        .filter(|value| !value.is_empty())
}

/// The security protocol of a listener, by its name.
pub fn listener_protocol(config: &BrokerConfig, listener: &str) -> Result<SecurityProtocol> {
    let raw = config
        .get("listener.security.protocol.map")
        .unwrap_or_default();
    let mut map = HashMap::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, protocol)) = entry.split_once(':') else {
            bail!("listener.security.protocol.map entry {entry:?} is not NAME:PROTOCOL");
        };
        let Some(protocol) = SecurityProtocol::parse(protocol.trim()) else {
            bail!("listener.security.protocol.map: unknown security protocol {protocol:?}");
        };
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    map.get(&listener.to_ascii_uppercase())
        .copied()
        .or_else(|| SecurityProtocol::parse(listener))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "listener {listener} has no security protocol: add {listener}:PROTOCOL to listener.security.protocol.map"
            )
        })
}

/// The SASL mechanisms enabled on a listener.
pub fn sasl_mechanisms(config: &BrokerConfig, listener: &str) -> Result<Vec<String>> {
    let raw = listener_setting(config, listener, "sasl.enabled.mechanisms").unwrap_or_default();
    let mut mechanisms = Vec::new();
    for mechanism in raw.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        if !SUPPORTED_MECHANISMS.contains(&mechanism) {
            bail!(
                "sasl.enabled.mechanisms: {mechanism} is not supported (supported: {})",
                SUPPORTED_MECHANISMS.join(", ")
            );
        }
        mechanisms.push(mechanism.to_string());
    }
    if mechanisms.is_empty() {
        bail!("sasl.enabled.mechanisms is empty for SASL listener {listener}");
    }
    Ok(mechanisms)
}

/// The TLS settings of a listener.
pub fn tls_settings(config: &BrokerConfig, listener: &str) -> Result<TlsSettings> {
    let setting = |key: &str| listener_setting(config, listener, key);
    for (key, supported) in [("ssl.keystore.type", "PEM"), ("ssl.truststore.type", "PEM")] {
        if let Some(kind) = setting(key) {
            if !kind.eq_ignore_ascii_case(supported) {
                bail!("{key}={kind} is not supported on listener {listener}: use PEM files");
            }
        }
    }
    if setting("ssl.key.password").is_some() {
        bail!("ssl.key.password is not supported: give an unencrypted PEM key");
    }
    let (certificates, key) = match (
        setting("ssl.keystore.location"),
        setting("ssl.certificate.location"),
        setting("ssl.key.location"),
    ) {
        (_, Some(certificates), Some(key)) => (PathBuf::from(certificates), PathBuf::from(key)),
        (Some(keystore), None, None) => (PathBuf::from(keystore), PathBuf::from(keystore)),
        _ => bail!(
            "TLS listener {listener} needs ssl.keystore.location (PEM key and certificate chain) \
             or ssl.certificate.location and ssl.key.location"
        ),
    };
    let client_auth = match setting("ssl.client.auth").unwrap_or("none") {
        "none" => ClientAuth::None,
        "requested" => ClientAuth::Requested,
        "required" => ClientAuth::Required,
        other => bail!("ssl.client.auth={other:?}: expected required, requested or none"),
    };
    let truststore = setting("ssl.truststore.location").map(PathBuf::from);
    if client_auth != ClientAuth::None && truststore.is_none() {
        bail!("ssl.client.auth on listener {listener} needs ssl.truststore.location (PEM CA certificates)");
    }
    Ok(TlsSettings {
        certificates,
        key,
        truststore,
        client_auth,
    })
}

/// `sasl.bootstrap.users`: (user, password) pairs.
pub fn bootstrap_users(config: &BrokerConfig) -> Result<Vec<(String, String)>> {
    let raw = config.get("sasl.bootstrap.users").unwrap_or_default();
    let mut users = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() => {
                users.push((user.to_string(), password.to_string()));
            }
            _ => bail!("sasl.bootstrap.users entry {entry:?} is not user:password"),
        }
    }
    Ok(users)
}

/// Checks every security setting the listeners need, so a bad config
/// fails at start (the files themselves are read when binding).
pub fn validate(config: &BrokerConfig) -> Result<()> {
    for listener in config.listeners()? {
        let protocol = listener_protocol(config, &listener.name)?;
        if protocol.uses_tls() {
            tls_settings(config, &listener.name)?;
        }
        if protocol.uses_sasl() {
            sasl_mechanisms(config, &listener.name)?;
        }
    }
    bootstrap_users(config)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[&str]) -> BrokerConfig {
        BrokerConfig::from_pairs(pairs)
    }

    #[test]
    fn protocols_and_per_listener_settings() {
        let config = config(&[
            "listeners=PLAINTEXT://:9092,CLIENT://:9093,SASL_SSL://:9094",
            "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT",
            "ssl.keystore.location=/tmp/server.pem",
            "listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-512",
        ]);
        assert_eq!(
            listener_protocol(&config, "CLIENT").unwrap(),
            SecurityProtocol::SaslPlaintext
        );
        assert_eq!(
            listener_protocol(&config, "SASL_SSL").unwrap(),
            SecurityProtocol::SaslSsl
        );
        assert_eq!(
            sasl_mechanisms(&config, "CLIENT").unwrap(),
            vec!["SCRAM-SHA-512"]
        );
        assert_eq!(sasl_mechanisms(&config, "SASL_SSL").unwrap().len(), 3);
        let tls = tls_settings(&config, "SASL_SSL").unwrap();
        assert_eq!(tls.key, PathBuf::from("/tmp/server.pem"));
        assert_eq!(tls.client_auth, ClientAuth::None);
        validate(&config).unwrap();
    }

    #[test]
    fn bad_settings_fail() {
        assert!(listener_protocol(&config(&[]), "INTERNAL").is_err());
        let missing_keystore = config(&["listeners=SSL://:9093"]);
        assert!(validate(&missing_keystore).is_err());
        let no_truststore = config(&[
            "listeners=SSL://:9093",
            "ssl.keystore.location=/x.pem",
            "ssl.client.auth=required",
        ]);
        assert!(validate(&no_truststore).is_err());
        assert!(sasl_mechanisms(&config(&["sasl.enabled.mechanisms=GSSAPI"]), "SASL_SSL").is_err());
        assert_eq!(
            bootstrap_users(&config(&["sasl.bootstrap.users=a:x,b:y:z"])).unwrap(),
            vec![("a".into(), "x".into()), ("b".into(), "y:z".into())]
        );
        assert!(bootstrap_users(&config(&["sasl.bootstrap.users=a"])).is_err());
    }
}
