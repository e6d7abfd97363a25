//! What the SDK needs to know of every response message: where its error
//! codes are (for the broker's `gregor_response_errors_total`), whether
//! it carries a throttle time, and, for a message whose error is one
//! top-level code, Kafka's generic error response. Protocol knowledge, kept here once so that a
//! handler (or a replacement handler someone writes for the same ApiKey)
//! holds nothing but its logic.

use kafka_protocol::messages::*;

/// A response message as the handler layer finishes it.
pub trait KafkaResponse {
    /// Every error code the response carries, top level first; NONE (0)
    /// codes are included and ignored by the counter.
    fn error_codes(&self) -> Vec<i16>;

    /// The throttle time set so far, or None when the message has no such
    /// field (SASL, WriteTxnMarkers).
    fn throttle_time_ms(&self) -> Option<i32>;

    /// Sets the throttle time; a message without the field ignores it.
    fn set_throttle_time_ms(&mut self, ms: i32);

    /// Kafka's generic `getErrorResponse`, for a message whose error is its
    /// top-level code: the empty message carrying `error_code`. None for a
    /// message that answers an error per element of the request (its
    /// handler writes `Handler::failed`).
    fn error_response(error_code: i16) -> Option<Self>
    where
        Self: Sized,
    {
        let _ = error_code;
        None
    }
}

/// Implements [`KafkaResponse`] for messages with a `throttle_time_ms`
/// field, given how to list each one's error codes; `, top_level_error`
/// after them gives the message Kafka's generic error response.
macro_rules! throttled {
    ($($ty:ty => |$r:ident| $codes:expr $(, $generic:ident)?;)*) => {$(
        impl KafkaResponse for $ty {
            fn error_codes(&self) -> Vec<i16> {
                let $r = self;
                $codes.into_iter().collect()
            }
            fn throttle_time_ms(&self) -> Option<i32> {
                Some(self.throttle_time_ms)
            }
            fn set_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = ms;
            }
            $(generic_error_response!($generic);)?
        }
    )*};
}

/// Implements [`KafkaResponse`] for messages without a throttle time.
macro_rules! unthrottled {
    ($($ty:ty => |$r:ident| $codes:expr $(, $generic:ident)?;)*) => {$(
        impl KafkaResponse for $ty {
            fn error_codes(&self) -> Vec<i16> {
                let $r = self;
                $codes.into_iter().collect()
            }
            fn throttle_time_ms(&self) -> Option<i32> {
                None
            }
            fn set_throttle_time_ms(&mut self, _ms: i32) {}
            $(generic_error_response!($generic);)?
        }
    )*};
}

/// [`KafkaResponse::error_response`] for a message whose error response is
/// its top-level `error_code` alone.
macro_rules! generic_error_response {
    (top_level_error) => {
        fn error_response(error_code: i16) -> Option<Self> {
            Some(Self::default().with_error_code(error_code))
        }
    };
}

/// The top-level code followed by `rest`.
fn top_then(code: i16, rest: impl IntoIterator<Item = i16>) -> Vec<i16> {
    std::iter::once(code).chain(rest).collect()
}

throttled! {
    // The top-level error alone, also what Kafka's generic error response sets.
    AddOffsetsToTxnResponse => |r| [r.error_code], top_level_error;
    AllocateProducerIdsResponse => |r| [r.error_code], top_level_error;
    ApiVersionsResponse => |r| [r.error_code], top_level_error;
    BrokerHeartbeatResponse => |r| [r.error_code], top_level_error;
    BrokerRegistrationResponse => |r| [r.error_code], top_level_error;
    ConsumerGroupHeartbeatResponse => |r| [r.error_code], top_level_error;
    CreateDelegationTokenResponse => |r| [r.error_code], top_level_error;
    DescribeAclsResponse => |r| [r.error_code], top_level_error;
    DescribeClientQuotasResponse => |r| [r.error_code], top_level_error;
    DescribeClusterResponse => |r| [r.error_code], top_level_error;
    DescribeDelegationTokenResponse => |r| [r.error_code], top_level_error;
    EndTxnResponse => |r| [r.error_code], top_level_error;
    ExpireDelegationTokenResponse => |r| [r.error_code], top_level_error;
    GetTelemetrySubscriptionsResponse => |r| [r.error_code], top_level_error;
    HeartbeatResponse => |r| [r.error_code], top_level_error;
    InitProducerIdResponse => |r| [r.error_code], top_level_error;
    JoinGroupResponse => |r| [r.error_code], top_level_error;
    ListConfigResourcesResponse => |r| [r.error_code], top_level_error;
    ListGroupsResponse => |r| [r.error_code], top_level_error;
    ListPartitionReassignmentsResponse => |r| [r.error_code], top_level_error;
    ListTransactionsResponse => |r| [r.error_code], top_level_error;
    PushTelemetryResponse => |r| [r.error_code], top_level_error;
    RenewDelegationTokenResponse => |r| [r.error_code], top_level_error;
    SyncGroupResponse => |r| [r.error_code], top_level_error;
    UnregisterBrokerResponse => |r| [r.error_code], top_level_error;
    UpdateFeaturesResponse => |r| [r.error_code], top_level_error;

    // One code per element.
    AlterClientQuotasResponse => |r| r.entries.iter().map(|e| e.error_code);
    AlterConfigsResponse => |r| r.responses.iter().map(|e| e.error_code);
    AlterUserScramCredentialsResponse => |r| r.results.iter().map(|e| e.error_code);
    ConsumerGroupDescribeResponse => |r| r.groups.iter().map(|e| e.error_code);
    CreateAclsResponse => |r| r.results.iter().map(|e| e.error_code);
    CreatePartitionsResponse => |r| r.results.iter().map(|e| e.error_code);
    CreateTopicsResponse => |r| r.topics.iter().map(|e| e.error_code);
    DeleteGroupsResponse => |r| r.results.iter().map(|e| e.error_code);
    DeleteTopicsResponse => |r| r.responses.iter().map(|e| e.error_code);
    DescribeConfigsResponse => |r| r.results.iter().map(|e| e.error_code);
    DescribeGroupsResponse => |r| r.groups.iter().map(|e| e.error_code);
    DescribeTransactionsResponse => |r| r.transaction_states.iter().map(|e| e.error_code);
    IncrementalAlterConfigsResponse => |r| r.responses.iter().map(|e| e.error_code);

    // The top level and one code per element.
    DescribeLogDirsResponse => |r| top_then(r.error_code, r.results.iter().map(|e| e.error_code));
    DescribeUserScramCredentialsResponse =>
        |r| top_then(r.error_code, r.results.iter().map(|e| e.error_code));
    FindCoordinatorResponse =>
        |r| top_then(r.error_code, r.coordinators.iter().map(|e| e.error_code));
    // Kafka's error response sets the top-level code only.
    LeaveGroupResponse =>
        |r| top_then(r.error_code, r.members.iter().map(|e| e.error_code)), top_level_error;

    // Per partition.
    AlterReplicaLogDirsResponse =>
        |r| r.results.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
    DeleteRecordsResponse => |r| r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
    DescribeProducersResponse =>
        |r| r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
    FetchResponse => |r| r.responses.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
    ListOffsetsResponse => |r| r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
    OffsetCommitResponse => |r| r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
    OffsetForLeaderEpochResponse =>
        |r| r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
    ProduceResponse =>
        |r| r.responses.iter().flat_map(|t| &t.partition_responses).map(|p| p.error_code);
    TxnOffsetCommitResponse =>
        |r| r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);

    // The top level and per partition.
    AlterPartitionResponse => |r| top_then(
        r.error_code,
        r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code),
    ), top_level_error;
    AlterPartitionReassignmentsResponse => |r| top_then(
        r.error_code,
        r.responses.iter().flat_map(|t| &t.partitions).map(|p| p.error_code),
    );
    ElectLeadersResponse => |r| top_then(
        r.error_code,
        r.replica_election_results.iter().flat_map(|t| &t.partition_result).map(|p| p.error_code),
    );
    // Kafka's error response sets the top-level code only.
    OffsetDeleteResponse => |r| top_then(
        r.error_code,
        r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code),
    ), top_level_error;

    // Nested further.
    AddPartitionsToTxnResponse => |r| {
        let topics = r
            .results_by_topic_v3_and_below
            .iter()
            .chain(r.results_by_transaction.iter().flat_map(|t| &t.topic_results));
        top_then(
            r.error_code,
            topics.flat_map(|t| &t.results_by_partition).map(|p| p.partition_error_code),
        )
    };
    DeleteAclsResponse => |r| r.filter_results.iter().flat_map(|f| {
        std::iter::once(f.error_code).chain(f.matching_acls.iter().map(|acl| acl.error_code))
    });
    DescribeTopicPartitionsResponse => |r| r.topics.iter().flat_map(|t| {
        std::iter::once(t.error_code).chain(t.partitions.iter().map(|p| p.error_code))
    });
    MetadataResponse => |r| top_then(
        r.error_code,
        r.topics.iter().flat_map(|t| {
            std::iter::once(t.error_code).chain(t.partitions.iter().map(|p| p.error_code))
        }),
    );
    OffsetFetchResponse => |r| {
        let partitions = r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
        let groups = r.groups.iter().flat_map(|g| {
            std::iter::once(g.error_code)
                .chain(g.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code))
        });
        top_then(r.error_code, partitions.chain(groups))
    };
}

unthrottled! {
    DescribeQuorumResponse => |r| top_then(
        r.error_code,
        r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code),
    ), top_level_error;
    SaslAuthenticateResponse => |r| [r.error_code], top_level_error;
    SaslHandshakeResponse => |r| [r.error_code], top_level_error;
    WriteTxnMarkersResponse => |r| r
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code);
}
