//! ProduceUnready (ApiKey 0): a deliberately broken "new version" of the
//! Produce handler, for trying canary and shadow rollouts (PLUGINS.md,
//! "Rolling out a new version"). Never let it serve for real.
//!
//! It appends nothing and answers every partition NOT_ENOUGH_REPLICAS
//! (19), which producers retry: routed to as a canary, its error rate
//! trips the automatic rollback while clients only see retries; run as a
//! shadow, the comparison names `error_code` as the field that differs.
//! It serves versions 3-13 (one magic-v2 batch per partition), so the
//! host routes only those versions to it.

use gregor_sdk::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use gregor_sdk::kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct ProduceUnready;

impl Handler for ProduceUnready {
    gregor_sdk::api!(ProduceRequest, 3..=13);

    fn handle(_ctx: &RequestContext, request: &ProduceRequest) -> Reply<ProduceResponse> {
        let mut response = ProduceResponse::default();
        for topic in &request.topic_data {
            let mut answer = TopicProduceResponse::default();
            answer.name = topic.name.clone();
            answer.topic_id = topic.topic_id;
            for partition in &topic.partition_data {
                let mut partition_answer = PartitionProduceResponse::default();
                partition_answer.index = partition.index;
                partition_answer.error_code = ResponseError::NotEnoughReplicas.code();
                partition_answer.base_offset = -1;
                partition_answer.log_start_offset = -1;
                answer.partition_responses.push(partition_answer);
            }
            response.responses.push(answer);
        }
        if request.acks == 0 {
            // Kafka closes an acks=0 connection whose partition failed.
            return Reply::WithholdAndClose(response);
        }
        Reply::Respond(response)
    }
}

gregor_sdk::export_handler!(ProduceUnready);
