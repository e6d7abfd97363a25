//! Test helpers: a metadata log applied in order to one image.

use crate::cluster::command::{
    Applied, BrokerRegistrationRecord, Command, Endpoint, NewTopicRecord, PartitionChangeRecord,
    PartitionRecord, Response, Uuid,
};
use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::StateMachine;

/// An image and the index of the next command.
#[derive(Debug, Clone, Default)]
pub struct Log {
    pub image: MetadataImage,
    pub index: u64,
}

impl Log {
    /// Brokers 1..=n, registered and unfenced.
    pub fn with_brokers(n: i32) -> Self {
        let mut log = Self::default();
        for id in 1..=n {
            log.register(id);
        }
        log
    }

    pub fn apply(&mut self, command: &Command) -> Response {
        self.index += 1;
        self.image.apply(self.index, command)
    }

    /// Applies a command that must be accepted.
    pub fn ok(&mut self, command: &Command) -> Applied {
        match self.apply(command) {
            Ok(applied) => applied,
            Err(refusal) => panic!("{command:?} refused: {refusal}"),
        }
    }

    /// Registers and unfences broker `id` (incarnation `id`); its epoch.
    pub fn register(&mut self, id: i32) -> i64 {
        let epoch = match self.ok(&Command::RegisterBroker(registration(id, id as u128))) {
            Applied::BrokerRegistered { epoch } => epoch,
            other => panic!("{other:?}"),
        };
        self.ok(&Command::UnfenceBroker {
            broker_id: id,
            epoch,
        });
        epoch
    }

    pub fn epoch(&self, id: i32) -> i64 {
        self.image
            .cluster()
            .broker(id)
            .map(|b| b.epoch)
            .unwrap_or(-1)
    }

    /// Fences broker `id` at its current epoch.
    pub fn fence(&mut self, id: i32) -> Applied {
        let epoch = self.epoch(id);
        self.ok(&Command::FenceBroker {
            broker_id: id,
            epoch,
        })
    }

    /// Shrinks partition 0 of topic `id` to this ISR (at partition epoch 0).
    pub fn shrink_isr(&mut self, id: Uuid, isr: Vec<i32>) -> Applied {
        self.ok(&Command::ChangePartition(PartitionChangeRecord {
            isr: Some(isr),
            ..PartitionChangeRecord::new(id, 0, 0)
        }))
    }

    /// A topic with these replicas per partition (all in the ISR, the
    /// first leading); its id.
    pub fn topic(&mut self, name: &str, assignment: &[&[i32]]) -> Uuid {
        let id = Uuid(0x1000 + self.index as u128);
        let partitions = assignment
            .iter()
            .enumerate()
            .map(|(partition, replicas)| PartitionRecord {
                partition: partition as i32,
                replicas: replicas.to_vec(),
                isr: replicas.to_vec(),
                leader: replicas[0],
            })
            .collect();
        self.ok(&Command::CreateTopic(NewTopicRecord {
            name: name.to_string(),
            id,
            partitions,
            configs: Default::default(),
        }));
        id
    }
}

pub fn registration(id: i32, incarnation: u128) -> BrokerRegistrationRecord {
    BrokerRegistrationRecord {
        broker_id: id,
        incarnation_id: Uuid(incarnation),
        listeners: vec![
            Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9091 + id as u16,
                security_protocol: "PLAINTEXT".into(),
            },
            Endpoint {
                name: "INTERNAL".into(),
                host: format!("10.0.0.{id}"),
                port: 9999,
                security_protocol: "SSL".into(),
            },
        ],
        rack: None,
        features: Default::default(),
    }
}
