//! The broker's stores on the metadata log (Kafka's
//! `BrokerMetadataPublisher` handing config, ACL, SCRAM, quota and token
//! deltas to the broker's managers).
//!
//! Two halves, both here so the stores know nothing of the cluster:
//! - [`StoreFollower`] makes every store hold what the applied image
//!   holds (dynamic broker configs of this node and the cluster default,
//!   group and client-metrics configs, ACLs, SCRAM credentials, client
//!   quotas, delegation tokens), after every applied change and on start,
//!   so reads stay the stores' own and a restarted node catches up with
//!   the log. Topic configs go with the topics (`reconciler`).
//! - [`StoreLog`] is each store's log seam (`AclLog`, `CredentialLog`,
//!   `TokenLog`, `QuotaLog`, `ConfigLog`): the store validated the change
//!   as on a single node; it is proposed as a command, and answered once
//!   it is applied here and the stores followed, so the client's next
//!   request to this broker sees it. A refusal is the image's Kafka
//!   error; no quorum is NOT_CONTROLLER, an unknown outcome
//!   REQUEST_TIMED_OUT, never a hang (proposals are bounded in time).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tracing::warn;

use crate::cluster::command::{Applied, Command, ConfigResource, Refusal, Response};
use crate::cluster::image::{Configs, MetadataImage};
use crate::cluster::quorum::Quorum;
use crate::cluster::reconciler;
use crate::config_admin::{ConfigError, ConfigLog, ResourceType};
use crate::error_code::ErrorCode;
use crate::metadata::topics::TopicError;
use crate::quota::{Entity, QuotaError, QuotaLog, QuotaOp};
use crate::security::acl_store::{AclBinding, AclChangeError, AclFilter, AclLog};
use crate::security::credentials::{
    CredentialChange, CredentialError, CredentialLog, ScramCredential, ScramMechanism,
    MIN_ITERATIONS,
};
use crate::security::tokens::{TokenError, TokenInfo, TokenLog};
use crate::services::Services;

pub struct StoreFollower {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    node_id: i32,
    /// Its stores are the ones that follow.
    services: Arc<Services>,
    /// One sync at a time, each on the image newest when it starts, so an
    /// older image never overwrites a newer one's state.
    syncing: Mutex<()>,
}

impl StoreFollower {
    pub fn new(
        quorum: Arc<dyn Quorum<MetadataImage>>,
        node_id: i32,
        services: Arc<Services>,
    ) -> Self {
        Self {
            quorum,
            node_id,
            services,
            syncing: Mutex::new(()),
        }
    }

    /// Brings every store to the applied image; a store that cannot be
    /// written is logged and tried again on the next change.
    pub fn sync(&self) {
        let _one = crate::sync::lock(&self.syncing);
        let image = self.quorum.image();
        let stores = &self.services;
        self.sync_configs(&image);
        let acls = stores.acls.replace(image.acls().bindings());
        logged("ACLs", acls.map_err(|error| error.to_string()));
        let scram = image.scram().users();
        let users = scram.map(|(user, mechanisms)| (user.clone(), mechanisms.clone()));
        logged(
            "SCRAM credentials",
            stores.credentials.replace(users.collect()),
        );
        let tokens = image
            .tokens()
            .iter()
            .map(|t| (t.token_id.clone(), t.clone()));
        logged("delegation tokens", stores.tokens.replace(tokens.collect()));
        let quotas = image.quotas().iter().map(|(e, v)| (e.clone(), v.clone()));
        logged("client quotas", stores.quotas.replace(quotas.collect()));
    }

    /// Dynamic configs: this broker's and the cluster default (every
    /// partition log follows a change), groups', client-metrics'.
    fn sync_configs(&self, image: &MetadataImage) {
        let dynamic = &self.services.dynamic;
        let configs = image.configs();
        let layers = dynamic.broker_layers();
        let per_broker = configs.get(&ConfigResource::Broker(self.node_id));
        let default = configs.get(&ConfigResource::BrokerDefault);
        let mut written = Vec::new();
        if layers.per_broker != *per_broker {
            written.push(dynamic.set_broker(true, per_broker.clone()));
        }
        if layers.cluster_default != *default {
            written.push(dynamic.set_broker(false, default.clone()));
        }
        let brokers_changed = !written.is_empty();
        let groups = (configs.groups().collect(), dynamic.group_config_names());
        let group_of = |name: &str| dynamic.group_configs_of(name);
        let set_group = |name: &str, configs| dynamic.set_group_configs(name, configs);
        follow_named(&mut written, groups, &group_of, &set_group);
        let metrics = (
            configs.client_metrics().collect(),
            dynamic.client_metrics_names(),
        );
        let metrics_of = |name: &str| dynamic.client_metrics_of(name);
        let set_metrics = |name: &str, configs| dynamic.set_client_metrics(name, configs);
        follow_named(&mut written, metrics, &metrics_of, &set_metrics);
        for error in written.into_iter().filter_map(Result::err) {
            warn!(%error, "following the metadata log's dynamic configs");
        }
        if brokers_changed {
            if let Err(error) = self.services.topics.reapply_configs() {
                warn!(error = %error.message, "applying changed broker configs to the logs");
            }
        }
    }
}

/// A store that could not follow the image (tried again on the next change).
fn logged<E: std::fmt::Debug>(what: &str, result: Result<(), E>) {
    if let Err(error) = result {
        warn!(?error, "following the metadata log's {what}");
    }
}

/// Brings named config sets (groups', subscriptions') to `wanted`: the
/// ones the image lacks are removed (set empty), the differing ones set.
fn follow_named(
    written: &mut Vec<std::io::Result<()>>,
    (wanted, known): (BTreeMap<&String, &Configs>, Vec<String>),
    current: &dyn Fn(&str) -> Configs,
    set: &dyn Fn(&str, Configs) -> std::io::Result<()>,
) {
    for name in known.iter().filter(|name| !wanted.contains_key(name)) {
        written.push(set(name, Configs::new()));
    }
    for (name, configs) in wanted {
        if current(name) != *configs {
            written.push(set(name, configs.clone()));
        }
    }
}

/// Follows the image after every applied change, until the quorum stops.
async fn follow(quorum: Arc<dyn Quorum<MetadataImage>>, follower: Arc<StoreFollower>) {
    let mut applied = quorum.watch();
    loop {
        let follower = Arc::clone(&follower);
        let _ = tokio::task::spawn_blocking(move || follower.sync()).await;
        if applied.changed().await.is_err() {
            return;
        }
    }
}

/// Puts this node's stores on the metadata log: their changes are proposed
/// from now on, the bootstrap users (`sasl.bootstrap.users`) the image
/// lacks are proposed, and the stores follow the image from then on: the
/// follower, to sync at will.
pub async fn attach(
    quorum: Arc<dyn Quorum<MetadataImage>>,
    node_id: i32,
    services: &Arc<Services>,
) -> anyhow::Result<Arc<StoreFollower>> {
    let follower = Arc::new(StoreFollower::new(
        Arc::clone(&quorum),
        node_id,
        Arc::clone(services),
    ));
    let log = Arc::new(StoreLog {
        quorum: Arc::clone(&quorum),
        follower: Arc::clone(&follower),
        runtime: Handle::current(),
    });
    services.acls.follow(log.clone());
    services.credentials.follow(log.clone());
    services.tokens.follow(log.clone());
    services.quotas.follow(log.clone());
    services.configs.follow(log);
    let missing = bootstrap_credentials(&quorum.image(), services)?;
    if !missing.is_empty() {
        if let Err(error) = quorum.propose(Command::Each(missing)).await {
            warn!(%error, "proposing the sasl.bootstrap.users credentials");
        }
    }
    tokio::spawn(follow(quorum, Arc::clone(&follower)));
    Ok(follower)
}

/// Credentials for the bootstrap users that have none in the image.
fn bootstrap_credentials(
    image: &MetadataImage,
    services: &Services,
) -> anyhow::Result<Vec<Command>> {
    let mut commands = Vec::new();
    for (user, password) in crate::security::settings::bootstrap_users(&services.config)? {
        if image.scram().users().any(|(known, _)| *known == user) {
            continue;
        }
        for mechanism in ScramMechanism::ALL {
            commands.push(Command::UpsertScramCredential {
                user: user.clone(),
                mechanism,
                credential: ScramCredential::from_password(mechanism, &password, MIN_ITERATIONS)?,
            });
        }
    }
    Ok(commands)
}

/// The stores' changes, proposed to the quorum.
pub struct StoreLog {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    follower: Arc<StoreFollower>,
    runtime: Handle,
}

impl StoreLog {
    /// Proposes `command`, then brings the stores to the image, so the
    /// answer is visible here; a failure is Kafka's code and message.
    fn propose(&self, command: Command) -> Result<Applied, TopicError> {
        let answer =
            tokio::task::block_in_place(|| self.runtime.block_on(self.quorum.propose(command)));
        self.follower.sync();
        match answer {
            Ok(Ok(applied)) => Ok(applied),
            Ok(Err(refusal)) => Err(super::refused(refusal)),
            Err(error) => Err(super::quorum_failed(&error)),
        }
    }

    /// Independent changes in one entry, each answered on its own (a
    /// failure of the whole is every change's answer).
    fn propose_each(&self, commands: Vec<Command>) -> Vec<Result<(), TopicError>> {
        let count = commands.len();
        match self.propose(Command::Each(commands)) {
            Ok(Applied::Each(answers)) => answers.into_iter().map(each_answer).collect(),
            Ok(_) => vec![Ok(()); count],
            Err(error) => vec![Err(error); count],
        }
    }
}

fn each_answer(response: Response) -> Result<(), TopicError> {
    response
        .map(drop)
        .map_err(|refusal: Refusal| super::refused(refusal))
}

impl AclLog for StoreLog {
    fn create(&self, bindings: Vec<AclBinding>) -> Result<(), AclChangeError> {
        self.propose(Command::CreateAcls(bindings))
            .map(drop)
            .map_err(acl_error)
    }

    fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclChangeError> {
        match self.propose(Command::DeleteAcls(filters.to_vec())) {
            Ok(Applied::AclsDeleted(matched)) => Ok(matched),
            Ok(_) => Ok(vec![Vec::new(); filters.len()]),
            Err(error) => Err(acl_error(error)),
        }
    }
}

/// The image's cap on records is the store's own TooLarge.
fn acl_error(error: TopicError) -> AclChangeError {
    if error.code == ErrorCode::PolicyViolation.code() {
        AclChangeError::TooLarge(error.message)
    } else {
        AclChangeError::Log {
            code: error.code,
            message: error.message,
        }
    }
}

impl CredentialLog for StoreLog {
    fn apply(&self, changes: Vec<CredentialChange>) -> Vec<Result<(), CredentialError>> {
        if changes.is_empty() {
            return Vec::new();
        }
        let commands = changes
            .into_iter()
            .map(|(user, mechanism, credential)| match credential {
                Some(credential) => Command::UpsertScramCredential {
                    user,
                    mechanism,
                    credential,
                },
                None => Command::DeleteScramCredential { user, mechanism },
            })
            .collect();
        self.propose_each(commands)
            .into_iter()
            .map(|answer| {
                answer.map_err(|error| {
                    if error.code == ErrorCode::ResourceNotFound.code() {
                        CredentialError::NotFound
                    } else {
                        CredentialError::Log {
                            code: error.code,
                            message: error.message,
                        }
                    }
                })
            })
            .collect()
    }
}

impl TokenLog for StoreLog {
    fn change(
        &self,
        upserts: Vec<(TokenInfo, bool)>,
        removals: Vec<String>,
    ) -> Result<(), TokenError> {
        let removing = removals.len();
        let commands: Vec<Command> = removals
            .into_iter()
            .map(|token_id| Command::RemoveDelegationToken { token_id })
            .chain(
                upserts
                    .into_iter()
                    .map(|(token, create)| Command::UpsertDelegationToken { token, create }),
            )
            .collect();
        for (position, answer) in self.propose_each(commands).into_iter().enumerate() {
            match answer {
                Ok(()) => {}
                // Another node removed it first (an expiry sweep).
                Err(error)
                    if position < removing
                        && error.code == ErrorCode::DelegationTokenNotFound.code() => {}
                Err(error) => {
                    return Err(TokenError {
                        code: error.code,
                        message: Some(error.message),
                    })
                }
            }
        }
        Ok(())
    }
}

impl QuotaLog for StoreLog {
    fn alter(&self, entity: &Entity, ops: &[QuotaOp]) -> Result<(), QuotaError> {
        let command = Command::AlterClientQuota {
            entity: entity.clone(),
            ops: ops.to_vec(),
        };
        self.propose(command).map(drop).map_err(|error| QuotaError {
            code: error.code,
            message: error.message,
        })
    }
}

impl ConfigLog for StoreLog {
    fn alter(
        &self,
        resource_type: ResourceType,
        name: &str,
        changes: Vec<(String, Option<String>)>,
    ) -> Result<(), ConfigError> {
        let resource = config_resource(resource_type, name)?;
        let topic = matches!(resource, ConfigResource::Topic(_));
        let answer = self.propose(Command::AlterConfigs {
            resource,
            changes,
            replace: false,
        });
        if topic {
            // A topic's configs live with the topic and its logs.
            let stores = &self.follower.services;
            reconciler::sync(
                self.quorum.as_ref(),
                self.follower.node_id,
                &stores.topics,
                reconciler::Removal::Keep,
                &|_| {},
            );
        }
        answer.map(drop).map_err(ConfigError::from)
    }
}

/// The image's resource for a config resource of a request (names were
/// checked by the resource type).
fn config_resource(resource_type: ResourceType, name: &str) -> Result<ConfigResource, ConfigError> {
    Ok(match resource_type {
        ResourceType::Topic => ConfigResource::Topic(name.to_string()),
        ResourceType::Broker if name.is_empty() => ConfigResource::BrokerDefault,
        ResourceType::Broker => ConfigResource::Broker(name.parse().map_err(|_| {
            ConfigError::invalid_request(format!("Node id must be an integer, but it is: {name}"))
        })?),
        ResourceType::Group => ConfigResource::Group(name.to_string()),
        ResourceType::ClientMetrics => ConfigResource::ClientMetrics(name.to_string()),
        ResourceType::BrokerLogger => {
            return Err(ConfigError::invalid_request(
                "BROKER_LOGGER configs are per node and not in the metadata log",
            ))
        }
    })
}

#[cfg(test)]
mod tests;
