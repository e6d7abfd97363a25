//! Every request type a bundled handler decodes, for the decode fuzzers
//! (the seeded test below and `plugins/sdk/fuzz`): one [`Api`] per ApiKey
//! with the versions `kafka-protocol` knows (a superset of those served).

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Message, Request};

use super::{decode_bounded, DecodeError, DECODE_BUDGET};

/// One request type.
pub struct Api {
    pub key: i16,
    pub name: &'static str,
    pub min_version: i16,
    pub max_version: i16,
    check: fn(&[u8], i16) -> Result<Checked, String>,
    sample: fn(i16) -> Vec<u8>,
}

/// What a bounded decode of one input did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Decoded, and equal to what the unbounded decoder makes of it.
    Decoded,
    /// Refused as malformed.
    Malformed,
    /// Refused as too large for the budget.
    TooLarge,
}

impl Api {
    /// Decodes `body` bounded; a decoded request must equal the crate's own
    /// decoding of it (safe then: every large count was checked to fit).
    pub fn check(&self, body: &[u8], version: i16) -> Result<Checked, String> {
        (self.check)(body, version)
    }

    /// A valid body: the default request, encoded.
    pub fn sample(&self, version: i16) -> Vec<u8> {
        (self.sample)(version)
    }
}

fn check<R: Request + PartialEq + Debug>(body: &[u8], version: i16) -> Result<Checked, String> {
    let flexible = R::header_version(version) >= 2;
    match decode_bounded::<R>(body, version, flexible, DECODE_BUDGET) {
        Ok(bounded) => {
            let plain = R::decode(&mut Bytes::copy_from_slice(body), version).map_err(|error| {
                format!("bounded decode accepted what the crate refuses: {error}")
            })?;
            if plain == bounded {
                Ok(Checked::Decoded)
            } else {
                Err(format!(
                    "bounded decode differs: {bounded:?} instead of {plain:?}"
                ))
            }
        }
        Err(DecodeError::Malformed(_)) => Ok(Checked::Malformed),
        Err(DecodeError::TooLarge) => Ok(Checked::TooLarge),
    }
}

fn sample<R: Request + Default>(version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    match R::default().encode(&mut buf, version) {
        Ok(()) => buf.to_vec(),
        Err(_) => Vec::new(),
    }
}

macro_rules! apis {
    ($($name:ident),* $(,)?) => {
        /// Every request type a bundled handler decodes.
        pub fn apis() -> Vec<Api> {
            vec![$(Api {
                key: <$name as Request>::KEY,
                name: stringify!($name),
                min_version: <$name as Message>::VERSIONS.min,
                max_version: <$name as Message>::VERSIONS.max,
                check: check::<$name>,
                sample: sample::<$name>,
            }),*]
        }
    };
}

apis! {
    ProduceRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
    OffsetCommitRequest, OffsetFetchRequest, FindCoordinatorRequest,
    JoinGroupRequest, HeartbeatRequest, LeaveGroupRequest, SyncGroupRequest,
    DescribeGroupsRequest, ListGroupsRequest, SaslHandshakeRequest,
    ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DeleteRecordsRequest, InitProducerIdRequest, OffsetForLeaderEpochRequest,
    AddPartitionsToTxnRequest, AddOffsetsToTxnRequest, EndTxnRequest,
    WriteTxnMarkersRequest, TxnOffsetCommitRequest, DescribeAclsRequest,
    CreateAclsRequest, DeleteAclsRequest, DescribeConfigsRequest,
    AlterConfigsRequest, AlterReplicaLogDirsRequest, DescribeLogDirsRequest,
    SaslAuthenticateRequest, CreatePartitionsRequest,
    CreateDelegationTokenRequest, RenewDelegationTokenRequest,
    ExpireDelegationTokenRequest, DescribeDelegationTokenRequest,
    DeleteGroupsRequest, ElectLeadersRequest, IncrementalAlterConfigsRequest,
    AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest,
    OffsetDeleteRequest, DescribeClientQuotasRequest, AlterClientQuotasRequest,
    DescribeUserScramCredentialsRequest, AlterUserScramCredentialsRequest,
    DescribeProducersRequest, DescribeTransactionsRequest,
    ListTransactionsRequest, DescribeClusterRequest,
    ConsumerGroupHeartbeatRequest, ConsumerGroupDescribeRequest,
    GetTelemetrySubscriptionsRequest, PushTelemetryRequest,
    UpdateFeaturesRequest, DescribeTopicPartitionsRequest,
    ListConfigResourcesRequest,
}
