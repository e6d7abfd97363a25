//! The server side of a SCRAM exchange (RFC 5802, as Kafka's
//! ScramSaslServer runs it): client-first, server-first, client-final,
//! server-final. The state lives in the host, one per connection; every
//! token is client input, so parsing never panics and every malformed or
//! wrong message is an authentication failure.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use subtle::ConstantTimeEq;

use crate::security::credentials::{CredentialStore, ScramCredential, ScramMechanism};

/// Random bytes in the server's part of the nonce.
const SERVER_NONCE_BYTES: usize = 18;

/// Why an exchange failed (the message goes to the client, as Kafka's
/// SaslAuthenticationException messages do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramError(pub String);

/// What a step produced.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    /// Send this token and wait for the client's next.
    Continue(Vec<u8>),
    /// Authenticated as `user`; send the final token.
    Complete { user: String, token: Vec<u8> },
}

enum Stage {
    ClientFirst,
    ClientFinal {
        user: String,
        gs2_header: String,
        client_first_bare: String,
        server_first: String,
        nonce: String,
        credential: ScramCredential,
    },
    Done,
}

pub struct ScramServer {
    mechanism: ScramMechanism,
    stage: Stage,
    /// The client authenticated with a delegation token (`tokenauth=true`).
    delegation_token: bool,
}

fn fail(message: &str) -> ScramError {
    ScramError(message.to_string())
}

/// RFC 5802 saslname: `=2C` is ',' and `=3D` is '='; any other '=' is
/// malformed.
fn decode_saslname(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3)?;
        match escape {
            "=2C" => out.push(','),
            "=3D" => out.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> Self {
        Self {
            mechanism,
            stage: Stage::ClientFirst,
            delegation_token: false,
        }
    }

    /// Whether the client authenticated with a delegation token.
    pub fn delegation_token(&self) -> bool {
        self.delegation_token
    }

    pub fn step(&mut self, token: &[u8], store: &CredentialStore) -> Result<ScramStep, ScramError> {
        let message = std::str::from_utf8(token)
            .map_err(|_| fail("Authentication failed: SCRAM message is not UTF-8"))?;
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::ClientFirst => self.client_first(message, store),
            Stage::ClientFinal {
                user,
                gs2_header,
                client_first_bare,
                server_first,
                nonce,
                credential,
            } => {
                let auth = Exchange {
                    gs2_header: &gs2_header,
                    client_first_bare: &client_first_bare,
                    server_first: &server_first,
                    nonce: &nonce,
                };
                let token = self.client_final(message, &auth, &credential)?;
                Ok(ScramStep::Complete { user, token })
            }
            Stage::Done => Err(fail("Authentication failed: unexpected SCRAM message")),
        }
    }

    fn client_first(
        &mut self,
        message: &str,
        store: &CredentialStore,
    ) -> Result<ScramStep, ScramError> {
        let invalid = || fail("Authentication failed: invalid SCRAM client-first message");
        // gs2-header: cbind-flag "," [authzid] ","
        let mut parts = message.splitn(3, ',');
        let flag = parts.next().ok_or_else(invalid)?;
        let authzid_raw = parts.next().ok_or_else(invalid)?;
        let bare = parts.next().ok_or_else(invalid)?;
        if flag != "n" && flag != "y" {
            return Err(fail(
                "Authentication failed: SCRAM channel binding is not supported",
            ));
        }
        let authzid = match authzid_raw {
            "" => None,
            other => Some(
                other
                    .strip_prefix("a=")
                    .and_then(decode_saslname)
                    .ok_or_else(invalid)?,
            ),
        };
        let mut attributes = bare.split(',');
        let user = attributes
            .next()
            .and_then(|a| a.strip_prefix("n="))
            .and_then(decode_saslname)
            .ok_or_else(invalid)?;
        let client_nonce = attributes
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .filter(|nonce| !nonce.is_empty())
            .ok_or_else(invalid)?;
        // KIP-48: `tokenauth=true` names a delegation token id and its
        // HMAC is the password; the connection then acts as its owner.
        let delegation_token = attributes.any(|extension| extension == "tokenauth=true");
        if authzid.as_ref().is_some_and(|id| *id != user) {
            return Err(fail(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        let (credential, user) = if delegation_token {
            store
                .token_credential(&user, self.mechanism)
                .ok_or_else(|| fail("Authentication failed: Invalid user credentials"))?
        } else {
            let credential = store
                .get(&user, self.mechanism)
                .ok_or_else(|| fail("Authentication failed: Invalid user credentials"))?;
            (credential, user)
        };
        self.delegation_token = delegation_token;
        let mut random = [0u8; SERVER_NONCE_BYTES];
        getrandom::fill(&mut random).map_err(|_| fail("Authentication failed: no randomness"))?;
        let nonce = format!("{client_nonce}{}", BASE64.encode(random));
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let gs2_header = format!("{flag},{authzid_raw},");
        self.stage = Stage::ClientFinal {
            user,
            gs2_header,
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
            credential,
        };
        Ok(ScramStep::Continue(server_first.into_bytes()))
    }

    fn client_final(
        &self,
        message: &str,
        exchange: &Exchange<'_>,
        credential: &ScramCredential,
    ) -> Result<Vec<u8>, ScramError> {
        let invalid = || fail("Authentication failed: invalid SCRAM client-final message");
        let (without_proof, proof) = message.rsplit_once(",p=").ok_or_else(invalid)?;
        let mut attributes = without_proof.split(',');
        let binding = attributes
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or_else(invalid)?;
        let nonce = attributes
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or_else(invalid)?;
        if BASE64.decode(binding).ok().as_deref() != Some(exchange.gs2_header.as_bytes()) {
            return Err(fail("Authentication failed: Invalid channel binding"));
        }
        // Kafka accepts any nonce that ends with the server's: librdkafka
        // before 2.6.1 sends the client nonce followed by the whole server
        // nonce (which already starts with it). The proof below covers the
        // message as sent, so the client still proves it saw this nonce.
        if !nonce.ends_with(exchange.nonce) {
            return Err(fail("Authentication failed: Invalid nonce"));
        }
        let proof = BASE64.decode(proof).map_err(|_| invalid())?;
        let auth_message = format!(
            "{},{},{without_proof}",
            exchange.client_first_bare, exchange.server_first
        );
        let mechanism = self.mechanism;
        let signature = mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(invalid());
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let valid: bool = mechanism
            .hash(&client_key)
            .ct_eq(&credential.stored_key)
            .into();
        if !valid {
            return Err(fail("Authentication failed: Invalid client proof"));
        }
        let server_signature = mechanism.hmac(&credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", BASE64.encode(server_signature)).into_bytes())
    }
}

struct Exchange<'a> {
    gs2_header: &'a str,
    client_first_bare: &'a str,
    server_first: &'a str,
    nonce: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SCRAM client, as librdkafka computes it.
    fn client_final(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> String {
        client_final_with_nonce(mechanism, password, client_first_bare, server_first, "")
    }

    /// A client whose final nonce is `prefix` followed by the server's
    /// (librdkafka before 2.6.1 repeats its own nonce in front).
    fn client_final_with_nonce(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        prefix: &str,
    ) -> String {
        let mut fields = server_first.split(',');
        let nonce = fields.next().unwrap().strip_prefix("r=").unwrap();
        let salt = BASE64
            .decode(fields.next().unwrap().strip_prefix("s=").unwrap())
            .unwrap();
        let iterations: u32 = fields
            .next()
            .unwrap()
            .strip_prefix("i=")
            .unwrap()
            .parse()
            .unwrap();
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        let stored_key = mechanism.hash(&client_key);
        let without_proof = format!("c=biws,r={prefix}{nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    /// Sends the client-first message for `bare`; the server-first answer.
    fn server_first(server: &mut ScramServer, bare: &str, store: &CredentialStore) -> String {
        let ScramStep::Continue(first) =
            server.step(format!("n,,{bare}").as_bytes(), store).unwrap()
        else {
            panic!("expected server-first");
        };
        String::from_utf8(first).unwrap()
    }

    fn store_with(user: &str, password: &str) -> (tempfile::TempDir, CredentialStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        store
            .set_password(user, password, &ScramMechanism::ALL, 4096)
            .unwrap();
        (dir, store)
    }

    #[test]
    fn full_exchange_for_both_mechanisms() {
        let (_dir, store) = store_with("al,ice", "secret");
        for mechanism in ScramMechanism::ALL {
            let mut server = ScramServer::new(mechanism);
            let bare = "n=al=2Cice,r=fyko+d2lbbFgONRv9qkxdawL";
            let server_first = server_first(&mut server, bare, &store);
            assert!(server_first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL"));
            let last = client_final(mechanism, "secret", bare, &server_first);
            match server.step(last.as_bytes(), &store).unwrap() {
                ScramStep::Complete { user, token } => {
                    assert_eq!(user, "al,ice");
                    assert!(token.starts_with(b"v="));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn wrong_password_unknown_user_and_garbage_fail() {
        let (_dir, store) = store_with("alice", "secret");
        let mechanism = ScramMechanism::Sha512;
        let mut server = ScramServer::new(mechanism);
        let bare = "n=alice,r=abc";
        let first = server_first(&mut server, bare, &store);
        let last = client_final(mechanism, "wrong", bare, &first);
        assert!(server.step(last.as_bytes(), &store).is_err());
        assert!(ScramServer::new(mechanism)
            .step(b"n,,n=bob,r=abc", &store)
            .is_err());
        assert!(ScramServer::new(mechanism)
            .step(b"n,a=bob,n=alice,r=abc", &store)
            .is_err());
        for garbage in [
            &b""[..],
            b"n",
            b"p=x,,n=alice,r=1",
            b"n,,n=al=ice,r=1",
            &[0xff, 0xfe],
        ] {
            assert!(ScramServer::new(mechanism).step(garbage, &store).is_err());
        }
    }

    /// The nonce check of Kafka's ScramSaslServer: the client-final nonce
    /// must end with the server nonce; the proof covers what was sent.
    #[test]
    fn old_librdkafka_nonce_is_accepted_and_others_are_not() {
        let (_dir, store) = store_with("alice", "secret");
        let bare = "n=alice,r=clientnonce";
        let exchange = |prefix: &str, suffix: &str| {
            let mechanism = ScramMechanism::Sha256;
            let mut server = ScramServer::new(mechanism);
            let first = server_first(&mut server, bare, &store);
            let mut last = client_final_with_nonce(mechanism, "secret", bare, &first, prefix);
            if !suffix.is_empty() {
                // A nonce that no longer ends with the server's.
                let (start, proof) = last.rsplit_once(",p=").unwrap();
                last = format!("{start}{suffix},p={proof}");
            }
            server.step(last.as_bytes(), &store)
        };
        assert!(matches!(
            exchange("clientnonce", ""),
            Ok(ScramStep::Complete { .. })
        ));
        assert_eq!(
            exchange("", "x").unwrap_err().0,
            "Authentication failed: Invalid nonce"
        );
        // The proof is over the message as sent: a nonce the proof did not
        // cover fails even though it ends with the server's.
        let mechanism = ScramMechanism::Sha512;
        let mut server = ScramServer::new(mechanism);
        let first = server_first(&mut server, bare, &store);
        let last = client_final(mechanism, "secret", bare, &first).replacen("r=", "r=extra", 1);
        assert_eq!(
            server.step(last.as_bytes(), &store).unwrap_err().0,
            "Authentication failed: Invalid client proof"
        );
    }
}
