//! `gregor cluster info`: the cluster id, the active controller and every
//! broker, from Metadata, and DescribeCluster where the broker serves it
//! (it also names fenced brokers, KIP-919's view), as `rpk cluster info`.

use anyhow::Result;
use kafka_protocol::messages::DescribeClusterRequest;
use serde_json::{json, Value};

use super::client::Client;
use super::{print, rows_text, text, Output};

pub fn info(client: &mut Client, output: Output) -> Result<()> {
    let metadata = client.metadata(Some(&[]))?;
    let mut brokers: Vec<Value> = metadata
        .brokers
        .iter()
        .map(|b| {
            json!({
                "id": b.node_id.0,
                "host": b.host.as_str(),
                "port": b.port,
                "rack": b.rack.as_deref(),
                "fenced": false,
            })
        })
        .collect();
    // DescribeCluster v1+ lists fenced brokers too (v2); older brokers
    // (Kafka before 2.8) do not serve it: Metadata is then the answer.
    if let Ok(version) = client.any().version_of::<DescribeClusterRequest>() {
        let version = version.min(2);
        let request = DescribeClusterRequest::default().with_include_fenced_brokers(version >= 2);
        let answer = client.any().send_at(&request, version)?;
        if answer.error_code == 0 {
            brokers = answer
                .brokers
                .iter()
                .map(|b| {
                    json!({
                        "id": b.broker_id.0,
                        "host": b.host.as_str(),
                        "port": b.port,
                        "rack": b.rack.as_deref(),
                        "fenced": b.is_fenced,
                    })
                })
                .collect();
        }
    }
    brokers.sort_by_key(|b| b["id"].as_i64());
    let controller = metadata.controller_id.0;
    let value = json!({
        "cluster_id": metadata.cluster_id.as_deref(),
        "controller": controller,
        "brokers": brokers,
    });
    print(output, &value, |v| {
        let mut out = format!(
            "CLUSTER {}\nCONTROLLER {}\n\n",
            text(&v["cluster_id"]),
            text(&v["controller"])
        );
        out.push_str(&rows_text(
            &["ID", "HOST", "PORT", "RACK", "FENCED"],
            &v["brokers"],
            |b| {
                let id = text(&b["id"]);
                let id = if b["id"].as_i64() == Some(i64::from(controller)) {
                    format!("{id}*")
                } else {
                    id
                };
                vec![
                    id,
                    text(&b["host"]),
                    text(&b["port"]),
                    text(&b["rack"]),
                    text(&b["fenced"]),
                ]
            },
        ));
        out
    });
    Ok(())
}
