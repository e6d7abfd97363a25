//! The SCRAM credential store (KIP-554's user SCRAM credentials) and the
//! RFC 5802 key derivations it needs.
//!
//! Per user and mechanism the store keeps what Kafka's ScramCredential
//! holds: a salt, an iteration count, `StoredKey = H(HMAC(SaltedPassword,
//! "Client Key"))` and `ServerKey = HMAC(SaltedPassword, "Server Key")`.
//! Neither a password nor the salted password is ever stored: a SCRAM
//! client proves it knows the password against StoredKey, and PLAIN
//! derives the same keys from the presented password and compares them,
//! so both mechanisms authenticate against one store.
//!
//! The store is a crash-safe JSON document (see [`super::durable`]);
//! changes are serialized by one lock, made durable, and only then visible.
//! On a node of a cluster the credentials are the metadata log's: changes
//! go to a [`CredentialLog`] and the store follows what the log applied
//! ([`CredentialStore::replace`]).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::durable::JsonFile;

/// Kafka's bounds on SCRAM iterations (ScramMechanism min, and the
/// controller's 16384 maximum).
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;
/// Salt length for credentials the broker derives itself (admin, config).
const SALT_BYTES: usize = 32;
const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC accepts keys of any length, so new_from_slice cannot fail.
        match self {
            ScramMechanism::Sha256 => Hmac::<Sha256>::new_from_slice(key)
                .map(|mac| mac.chain_update(data).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
            ScramMechanism::Sha512 => Hmac::<Sha512>::new_from_slice(key)
                .map(|mac| mac.chain_update(data).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
        }
    }

    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's `Hi(password, salt, i)`: PBKDF2 with this HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
            }
        }
    }
}

/// What the server keeps of one user's password for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl ScramCredential {
    /// From a salted password (AlterUserScramCredentials carries one).
    pub fn from_salted(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: u32,
    ) -> Self {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        Self {
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            salt,
            iterations,
        }
    }

    /// From a password, with a fresh random salt.
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> io::Result<Self> {
        let mut salt = vec![0u8; SALT_BYTES];
        getrandom::fill(&mut salt).map_err(|error| io::Error::other(error.to_string()))?;
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        Ok(Self::from_salted(mechanism, salt, &salted, iterations))
    }

    /// Whether `password` is the one this credential was made from.
    pub fn matches_password(&self, mechanism: ScramMechanism, password: &str) -> bool {
        let salted = mechanism.salted_password(password.as_bytes(), &self.salt, self.iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        bool::from(mechanism.hash(&client_key).ct_eq(&self.stored_key))
    }
}

/// Why a change to the store was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialError {
    /// Deleting a credential that does not exist.
    NotFound,
    Io(String),
    /// The metadata log refused the change or did not answer: Kafka's
    /// error code and message.
    Log {
        code: i16,
        message: String,
    },
}

/// The on-disk form: base64 byte strings, mechanism names as keys.
#[derive(Serialize, Deserialize, Clone)]
struct StoredCredential {
    salt: String,
    stored_key: String,
    server_key: String,
    iterations: u32,
}

#[derive(Serialize, Deserialize)]
struct Document {
    version: u32,
    users: BTreeMap<String, BTreeMap<String, StoredCredential>>,
}

/// Credentials by user and mechanism.
pub type Users = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

/// A change to apply: set (Some) or delete (None) a user's credential.
pub type CredentialChange = (String, ScramMechanism, Option<ScramCredential>);

/// Where credential changes go on a node of a cluster: proposed to the
/// metadata log and, once applied, brought into this store before the
/// answers (one per change, as [`CredentialStore::apply`] gives them).
pub trait CredentialLog: Send + Sync {
    fn apply(&self, changes: Vec<CredentialChange>) -> Vec<Result<(), CredentialError>>;
}

pub struct CredentialStore {
    /// Set on a node of a cluster: changes go there.
    log: OnceLock<Arc<dyn CredentialLog>>,
    file: JsonFile,
    users: RwLock<Arc<Users>>,
    writer: Mutex<()>,
    /// Delegation tokens, which authenticate over SCRAM with `tokenauth`.
    tokens: OnceLock<Arc<crate::security::tokens::TokenManager>>,
}

impl CredentialStore {
    /// Opens `<dir>/scram-credentials.json`.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let file = JsonFile::open(dir, "scram-credentials.json")?;
        let users = match file.load::<Document>()? {
            Some(document) => decode(document)
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?,
            None => Users::new(),
        };
        Ok(Self {
            log: OnceLock::new(),
            file,
            users: RwLock::new(Arc::new(users)),
            writer: Mutex::new(()),
            tokens: OnceLock::new(),
        })
    }

    fn snapshot(&self) -> Arc<Users> {
        Arc::clone(&crate::sync::read(&self.users))
    }

    /// Lets SCRAM authenticate delegation tokens from `tokens`.
    pub fn attach_tokens(&self, tokens: Arc<crate::security::tokens::TokenManager>) {
        let _ = self.tokens.set(tokens);
    }

    /// The SCRAM credential of a live delegation token and the name of its
    /// owner, whom a connection authenticated with it acts as.
    pub fn token_credential(
        &self,
        token_id: &str,
        mechanism: ScramMechanism,
    ) -> Option<(ScramCredential, String)> {
        self.tokens.get()?.scram_credential(token_id, mechanism)
    }

    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.snapshot().get(user)?.get(&mechanism).cloned()
    }

    /// Every user with credentials, each with its mechanisms and iterations.
    pub fn list(&self) -> Vec<(String, Vec<(ScramMechanism, u32)>)> {
        self.snapshot()
            .iter()
            .map(|(user, credentials)| {
                let infos = credentials
                    .iter()
                    .map(|(mechanism, credential)| (*mechanism, credential.iterations))
                    .collect();
                (user.clone(), infos)
            })
            .collect()
    }

    /// Whether `password` is `user`'s (PLAIN): checked against the
    /// strongest SCRAM credential the user has.
    pub fn check_password(&self, user: &str, password: &str) -> bool {
        let users = self.snapshot();
        let Some(credentials) = users.get(user) else {
            return false;
        };
        match credentials.iter().next_back() {
            Some((mechanism, credential)) => credential.matches_password(*mechanism, password),
            None => false,
        }
    }

    /// Applies every change or none, durably; one result per change, in
    /// order. A deletion of a missing credential fails alone (NotFound)
    /// and the other changes still apply, as Kafka answers per user.
    pub fn apply(&self, changes: Vec<CredentialChange>) -> Vec<Result<(), CredentialError>> {
        if let Some(log) = self.log.get() {
            return log.apply(changes);
        }
        let _writer = crate::sync::lock(&self.writer);
        let mut next = Users::clone(&self.snapshot());
        let mut results = Vec::with_capacity(changes.len());
        for (user, mechanism, credential) in changes {
            match credential {
                Some(credential) => {
                    next.entry(user).or_default().insert(mechanism, credential);
                    results.push(Ok(()));
                }
                None => {
                    let removed = next
                        .get_mut(&user)
                        .and_then(|credentials| credentials.remove(&mechanism));
                    if next.get(&user).is_some_and(BTreeMap::is_empty) {
                        next.remove(&user);
                    }
                    results.push(removed.map(|_| ()).ok_or(CredentialError::NotFound));
                }
            }
        }
        if results.iter().any(Result::is_ok) {
            if let Err(error) = self.file.store(&encode(&next)) {
                let error = CredentialError::Io(error.to_string());
                return results
                    .into_iter()
                    .map(|result| result.and(Err(error.clone())))
                    .collect();
            }
            *crate::sync::write(&self.users) = Arc::new(next)
        }
        results
    }

    /// Sends every later change to `log` (a node of a cluster).
    pub fn follow(&self, log: Arc<dyn CredentialLog>) {
        let _ = self.log.set(log);
    }

    /// Every credential.
    pub fn users(&self) -> Arc<Users> {
        self.snapshot()
    }

    /// Makes the store hold exactly `users` (what the metadata log
    /// applied), durably; nothing happens when it already does.
    pub fn replace(&self, users: Users) -> Result<(), CredentialError> {
        let _writer = crate::sync::lock(&self.writer);
        if *self.snapshot() == users {
            return Ok(());
        }
        self.file
            .store(&encode(&users))
            .map_err(|error| CredentialError::Io(error.to_string()))?;
        *crate::sync::write(&self.users) = Arc::new(users);
        Ok(())
    }

    /// Sets `user`'s password for each mechanism (admin API, config
    /// bootstrap).
    pub fn set_password(
        &self,
        user: &str,
        password: &str,
        mechanisms: &[ScramMechanism],
        iterations: u32,
    ) -> Result<(), CredentialError> {
        let mut changes = Vec::new();
        for mechanism in mechanisms {
            let credential = ScramCredential::from_password(*mechanism, password, iterations)
                .map_err(|error| CredentialError::Io(error.to_string()))?;
            changes.push((user.to_string(), *mechanism, Some(credential)));
        }
        self.apply(changes).into_iter().collect()
    }

    /// Removes every credential of `user`; false if it had none.
    pub fn delete_user(&self, user: &str) -> Result<bool, CredentialError> {
        let mechanisms: Vec<ScramMechanism> = self
            .snapshot()
            .get(user)
            .map(|credentials| credentials.keys().copied().collect())
            .unwrap_or_default();
        if mechanisms.is_empty() {
            return Ok(false);
        }
        let changes = mechanisms
            .into_iter()
            .map(|mechanism| (user.to_string(), mechanism, None))
            .collect();
        self.apply(changes)
            .into_iter()
            .collect::<Result<(), _>>()
            .map(|()| true)
    }
}

fn encode(users: &Users) -> Document {
    Document {
        version: FORMAT_VERSION,
        users: users
            .iter()
            .map(|(user, credentials)| {
                let credentials = credentials
                    .iter()
                    .map(|(mechanism, c)| {
                        let stored = StoredCredential {
                            salt: BASE64.encode(&c.salt),
                            stored_key: BASE64.encode(&c.stored_key),
                            server_key: BASE64.encode(&c.server_key),
                            iterations: c.iterations,
                        };
                        (mechanism.name().to_string(), stored)
                    })
                    .collect();
                (user.clone(), credentials)
            })
            .collect(),
    }
}

fn decode(document: Document) -> Result<Users, String> {
    if document.version != FORMAT_VERSION {
        return Err(format!(
            "unsupported credential store version {}",
            document.version
        ));
    }
    let bytes = |text: &str, what: &str, user: &str| {
        BASE64
            .decode(text)
            .map_err(|_| format!("the {what} of {user:?} is not base64"))
    };
    let mut users = Users::new();
    for (user, credentials) in document.users {
        let mut decoded = BTreeMap::new();
        for (name, stored) in credentials {
            let mechanism = ScramMechanism::from_name(&name)
                .ok_or_else(|| format!("unknown mechanism {name:?} for {user:?}"))?;
            decoded.insert(
                mechanism,
                ScramCredential {
                    salt: bytes(&stored.salt, "salt", &user)?,
                    stored_key: bytes(&stored.stored_key, "stored key", &user)?,
                    server_key: bytes(&stored.server_key, "server key", &user)?,
                    iterations: stored.iterations,
                },
            );
        }
        users.insert(user, decoded);
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7677_sha256_test_vector_keys() {
        // RFC 7677 section 3: user "user", password "pencil".
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let mechanism = ScramMechanism::Sha256;
        let salted = mechanism.salted_password(b"pencil", &salt, 4096);
        let credential = ScramCredential::from_salted(mechanism, salt, &salted, 4096);
        assert!(credential.matches_password(mechanism, "pencil"));
        assert!(!credential.matches_password(mechanism, "pencil2"));
        let client_key = mechanism.hmac(&salted, b"Client Key");
        assert_eq!(mechanism.hash(&client_key), credential.stored_key);
    }

    #[test]
    fn store_persists_and_never_holds_passwords() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        store
            .set_password("alice", "alice-secret", &ScramMechanism::ALL, 4096)
            .unwrap();
        assert!(store.check_password("alice", "alice-secret"));
        assert!(!store.check_password("alice", "wrong"));
        assert!(!store.check_password("bob", "alice-secret"));
        let text = std::fs::read_to_string(dir.path().join("scram-credentials.json")).unwrap();
        assert!(!text.contains("alice-secret"));
        drop(store);

        let store = CredentialStore::open(dir.path()).unwrap();
        assert!(store.check_password("alice", "alice-secret"));
        assert_eq!(store.list().len(), 1);
        let results = store.apply(vec![
            ("alice".into(), ScramMechanism::Sha256, None),
            ("bob".into(), ScramMechanism::Sha256, None),
        ]);
        assert_eq!(results, vec![Ok(()), Err(CredentialError::NotFound)]);
        assert!(store.get("alice", ScramMechanism::Sha256).is_none());
        assert!(store.delete_user("alice").unwrap());
        assert!(!store.delete_user("alice").unwrap());
        assert!(store.list().is_empty());
    }
}
