//! Client quotas (Kafka's ClientQuotasImage), what a single broker keeps
//! in `quotas.json`: per entity (user, client-id or both, or their
//! defaults) the quota values set. Ops were validated by the proposer
//! (`QuotaManager::alter`'s rules); an entity left without values goes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::command::{Applied, Response};
use crate::quota::{Entity, QuotaOp, QuotaValues};

/// Serialized as a list of (entity, values): an entity is a map, which
/// formats like JSON cannot use as a key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    from = "Vec<(Entity, QuotaValues)>",
    into = "Vec<(Entity, QuotaValues)>"
)]
pub struct QuotasImage {
    entities: BTreeMap<Entity, QuotaValues>,
}

impl From<Vec<(Entity, QuotaValues)>> for QuotasImage {
    fn from(entries: Vec<(Entity, QuotaValues)>) -> Self {
        Self {
            entities: entries.into_iter().collect(),
        }
    }
}

impl From<QuotasImage> for Vec<(Entity, QuotaValues)> {
    fn from(image: QuotasImage) -> Self {
        image.entities.into_iter().collect()
    }
}

impl QuotasImage {
    pub fn get(&self, entity: &Entity) -> Option<&QuotaValues> {
        self.entities.get(entity)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Entity, &QuotaValues)> {
        self.entities.iter()
    }

    pub(super) fn alter(&mut self, entity: &Entity, ops: &[QuotaOp]) -> Response {
        crate::quota::apply_ops(&mut self.entities, entity, ops);
        Ok(Applied::Done)
    }
}
