//! `gregor topic create|list|describe|delete|alter-config`: Kafka's
//! `kafka-topics.sh` and `kafka-configs.sh --entity-type topics`, as
//! CreateTopics, Metadata, DescribeConfigs, ListOffsets, DeleteTopics and
//! IncrementalAlterConfigs requests.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Subcommand;
use kafka_protocol::messages::{
    create_topics_request::{CreatableTopic, CreatableTopicConfig},
    describe_configs_request::DescribeConfigsResource,
    incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
    CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};

use super::client::{topic_name, Client, EARLIEST, LATEST};
use super::{error_name, failed_if_any, key_value, print, rows_text, text, Output};

/// DescribeConfigs' and IncrementalAlterConfigs' resource type of a topic.
const TOPIC_RESOURCE: i8 = 2;
/// How long CreateTopics and DeleteTopics may take on the broker.
const TIMEOUT_MS: i32 = 30_000;

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create topics
    Create {
        #[arg(required = true)]
        names: Vec<String>,
        /// Partitions per topic (default: the broker's num.partitions)
        #[arg(long, short = 'p', default_value_t = -1)]
        partitions: i32,
        /// Replicas per partition (default: the broker's default.replication.factor)
        #[arg(long, short = 'r', default_value_t = -1)]
        replication_factor: i16,
        /// A topic config (repeatable)
        #[arg(long = "config", short = 'c', value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    /// Topics and their partition counts
    List {
        /// Include internal topics
        #[arg(long)]
        internal: bool,
    },
    /// Partitions (leader, replicas, ISR, offsets) and configs of topics
    Describe {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Delete topics
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Set or remove a topic's configs
    AlterConfig {
        name: String,
        /// Set a config (repeatable)
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Remove a config, back to the default (repeatable)
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
    },
}

pub fn run(client: &mut Client, command: TopicCommand, output: Output) -> Result<()> {
    match command {
        TopicCommand::Create {
            names,
            partitions,
            replication_factor,
            configs,
        } => create(
            client,
            names,
            partitions,
            replication_factor,
            &configs,
            output,
        ),
        TopicCommand::List { internal } => list(client, internal, output),
        TopicCommand::Describe { names } => describe(client, &names, output),
        TopicCommand::Delete { names } => delete(client, &names, output),
        TopicCommand::AlterConfig { name, set, delete } => {
            alter_config(client, &name, &set, &delete, output)
        }
    }
}

fn create(
    client: &mut Client,
    names: Vec<String>,
    partitions: i32,
    replication_factor: i16,
    configs: &[String],
    output: Output,
) -> Result<()> {
    let configs = configs
        .iter()
        .map(|pair| {
            key_value(pair).map(|(key, value)| {
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string(key))
                    .with_value(Some(StrBytes::from_string(value)))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let topics = names
        .iter()
        .map(|name| {
            CreatableTopic::default()
                .with_name(topic_name(name))
                .with_num_partitions(partitions)
                .with_replication_factor(replication_factor)
                .with_configs(configs.clone())
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(TIMEOUT_MS);
    let answer = client.any().send(&request, 7)?;
    let results: Vec<Value> = answer
        .topics
        .iter()
        .map(|t| {
            json!({
                "topic": t.name.0.as_str(),
                "error": error_name(t.error_code),
                "message": t.error_message.as_deref(),
                "partitions": t.num_partitions,
                "replication_factor": t.replication_factor,
            })
        })
        .collect();
    let created: Vec<String> = answer
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .map(|t| t.name.0.to_string())
        .collect();
    wait_for_leaders(client, &created)?;
    let codes: Vec<i16> = answer.topics.iter().map(|r| r.error_code).collect();
    report(output, results, &codes)
}

/// Waits (printing progress) until every partition of `topics` has a
/// leader, as `kafka-topics.sh` users expect the topic usable when it
/// returns; gives up quietly after ten seconds.
fn wait_for_leaders(client: &mut Client, topics: &[String]) -> Result<()> {
    if topics.is_empty() {
        return Ok(());
    }
    let start = Instant::now();
    let mut said = false;
    while start.elapsed() < Duration::from_secs(10) {
        let metadata = client.metadata(Some(topics))?;
        let ready = metadata
            .topics
            .iter()
            .all(|t| t.error_code == 0 && t.partitions.iter().all(|p| p.leader_id.0 >= 0));
        if ready {
            return Ok(());
        }
        if !said {
            eprintln!("waiting for the new partitions' leaders...");
            said = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("some partitions have no leader yet");
    Ok(())
}

fn list(client: &mut Client, internal: bool, output: Output) -> Result<()> {
    let metadata = client.metadata(None)?;
    let mut topics: Vec<Value> = metadata
        .topics
        .iter()
        .filter(|t| internal || !t.is_internal)
        .map(|t| {
            json!({
                "topic": t.name.as_ref().map(|n| n.0.as_str()),
                "id": t.topic_id.to_string(),
                "partitions": t.partitions.len(),
                "replicas": t.partitions.first().map_or(0, |p| p.replica_nodes.len()),
                "internal": t.is_internal,
                "error": error_name(t.error_code),
            })
        })
        .collect();
    topics.sort_by(|a, b| text(&a["topic"]).cmp(&text(&b["topic"])));
    print(output, &json!({ "topics": topics }), |v| {
        rows_text(&["TOPIC", "PARTITIONS", "REPLICAS"], &v["topics"], |t| {
            vec![
                text(&t["topic"]),
                text(&t["partitions"]),
                text(&t["replicas"]),
            ]
        })
    });
    Ok(())
}

fn describe(client: &mut Client, names: &[String], output: Output) -> Result<()> {
    let metadata = client.metadata(Some(names))?;
    let starts = client.offsets(&metadata, names, EARLIEST)?;
    let ends = client.offsets(&metadata, names, LATEST)?;
    let configs = describe_configs(client, names)?;
    let mut described = Vec::new();
    for name in names {
        described.push(describe_one(&metadata, name, &starts, &ends, &configs));
    }
    let codes: Vec<i16> = metadata.topics.iter().map(|t| t.error_code).collect();
    print(output, &json!({ "topics": described }), |v| {
        let mut out = String::new();
        for topic in v["topics"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "TOPIC {}  id {}  {}\n",
                text(&topic["topic"]),
                text(&topic["id"]),
                status(topic)
            ));
            out.push_str(&rows_text(
                &[
                    "PARTITION",
                    "LEADER",
                    "EPOCH",
                    "REPLICAS",
                    "ISR",
                    "OFFLINE",
                    "LOG-START",
                    "HIGH-WATERMARK",
                ],
                &topic["partitions"],
                |p| {
                    vec![
                        text(&p["partition"]),
                        text(&p["leader"]),
                        text(&p["leader_epoch"]),
                        ids(&p["replicas"]),
                        ids(&p["isr"]),
                        ids(&p["offline"]),
                        text(&p["log_start_offset"]),
                        text(&p["high_watermark"]),
                    ]
                },
            ));
            out.push_str(&rows_text(
                &["CONFIG", "VALUE", "SOURCE"],
                &topic["configs"],
                |c| vec![text(&c["name"]), text(&c["value"]), text(&c["source"])],
            ));
            out.push('\n');
        }
        out
    });
    failed_if_any(&codes)
}

type Offsets = std::collections::HashMap<(String, i32), i64>;

fn describe_one(
    metadata: &MetadataResponse,
    name: &str,
    starts: &Offsets,
    ends: &Offsets,
    configs: &[(String, Vec<Value>)],
) -> Value {
    let Some(topic) = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
    else {
        return json!({ "topic": name, "error": "UNKNOWN_TOPIC_OR_PARTITION" });
    };
    let mut partitions: Vec<_> = topic.partitions.iter().collect();
    partitions.sort_by_key(|p| p.partition_index);
    let key = |p: i32| (name.to_string(), p);
    json!({
        "topic": name,
        "id": topic.topic_id.to_string(),
        "error": error_name(topic.error_code),
        "internal": topic.is_internal,
        "partitions": partitions.iter().map(|p| json!({
            "partition": p.partition_index,
            "leader": p.leader_id.0,
            "leader_epoch": p.leader_epoch,
            "replicas": p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
            "isr": p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
            "offline": p.offline_replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
            "log_start_offset": starts.get(&key(p.partition_index)),
            "high_watermark": ends.get(&key(p.partition_index)),
            "error": error_name(p.error_code),
        })).collect::<Vec<_>>(),
        "configs": configs
            .iter()
            .find(|(topic, _)| topic == name)
            .map(|(_, configs)| configs.clone())
            .unwrap_or_default(),
    })
}

/// Each topic's configs: name, value (None when sensitive) and source.
fn describe_configs(client: &mut Client, names: &[String]) -> Result<Vec<(String, Vec<Value>)>> {
    let request = DescribeConfigsRequest::default().with_resources(
        names
            .iter()
            .map(|name| {
                DescribeConfigsResource::default()
                    .with_resource_type(TOPIC_RESOURCE)
                    .with_resource_name(StrBytes::from_string(name.clone()))
            })
            .collect(),
    );
    let answer = client.any().send(&request, 4)?;
    Ok(answer
        .results
        .into_iter()
        .filter(|r| r.error_code == 0)
        .map(|r| {
            let configs = r
                .configs
                .iter()
                .map(|c| {
                    json!({
                        "name": c.name.as_str(),
                        "value": c.value.as_deref(),
                        "source": config_source(c.config_source),
                        "read_only": c.read_only,
                        "sensitive": c.is_sensitive,
                    })
                })
                .collect();
            (r.resource_name.to_string(), configs)
        })
        .collect())
}

/// Kafka's names of DescribeConfigs' config sources.
fn config_source(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

fn delete(client: &mut Client, names: &[String], output: Output) -> Result<()> {
    let request = DeleteTopicsRequest::default()
        .with_topic_names(names.iter().map(|n| topic_name(n)).collect())
        .with_timeout_ms(TIMEOUT_MS);
    let answer = client.any().send(&request, 5)?;
    let results: Vec<Value> = answer
        .responses
        .iter()
        .map(|r| {
            json!({
                "topic": r.name.as_ref().map(|n| n.0.as_str()),
                "error": error_name(r.error_code),
                "message": r.error_message.as_deref(),
            })
        })
        .collect();
    let codes: Vec<i16> = answer.responses.iter().map(|r| r.error_code).collect();
    report(output, results, &codes)
}

fn alter_config(
    client: &mut Client,
    name: &str,
    set: &[String],
    delete: &[String],
    output: Output,
) -> Result<()> {
    if set.is_empty() && delete.is_empty() {
        bail!("nothing to change: give --set KEY=VALUE or --delete KEY");
    }
    let mut configs = Vec::new();
    for pair in set {
        let (key, value) = key_value(pair)?;
        configs.push(
            AlterableConfig::default()
                .with_name(StrBytes::from_string(key))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value))),
        );
    }
    for key in delete {
        configs.push(
            AlterableConfig::default()
                .with_name(StrBytes::from_string(key.clone()))
                .with_config_operation(1),
        );
    }
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(configs),
    ]);
    let answer = client.any().send(&request, 1)?;
    let results: Vec<Value> = answer
        .responses
        .iter()
        .map(|r| {
            json!({
                "topic": r.resource_name.as_str(),
                "error": error_name(r.error_code),
                "message": r.error_message.as_deref(),
            })
        })
        .collect();
    let codes: Vec<i16> = answer.responses.iter().map(|r| r.error_code).collect();
    report(output, results, &codes)
}

/// Prints each topic's outcome (`TOPIC STATUS`, or the JSON results) and
/// fails when any of `codes` is an error.
fn report(output: Output, results: Vec<Value>, codes: &[i16]) -> Result<()> {
    print(output, &json!({ "topics": results }), |v| {
        rows_text(&["TOPIC", "STATUS"], &v["topics"], |t| {
            vec![text(&t["topic"]), status(t)]
        })
    });
    failed_if_any(codes)
}

/// A list of broker ids as one cell.
fn ids(value: &Value) -> String {
    let ids: Vec<String> = value.as_array().into_iter().flatten().map(text).collect();
    if ids.is_empty() {
        "-".to_string()
    } else {
        ids.join(",")
    }
}

/// `OK`, or the error and its message.
fn status(result: &Value) -> String {
    match result["error"].as_str() {
        Some("NONE") | None => "OK".to_string(),
        Some(error) => match result["message"].as_str() {
            Some(message) if !message.is_empty() => format!("{error}: {message}"),
            _ => error.to_string(),
        },
    }
}
