//! The console's pages, rendered from `views.rs` (topics, groups, the
//! cluster) and from the admin API's own answers (`PluginManager::status`
//! and `authorizer_status`, the JSON of `GET /plugins` and
//! `GET /authorizer`), so the console and the API cannot disagree.

use serde_json::Value;

use super::html::{bytes, escape, ids, maybe, page, table};
use super::views::{GroupRow, Overview, TopicRow};
use crate::metadata::topic_config::EffectiveConfig;

pub fn overview(overview: &Overview, authorizer: &Value) -> String {
    let brokers: Vec<Vec<String>> = overview
        .brokers
        .iter()
        .map(|broker| {
            let mut roles = Vec::new();
            if broker.id == overview.node_id {
                roles.push("this node");
            }
            if broker.id == overview.controller_id {
                roles.push("controller");
            }
            vec![
                broker.id.to_string(),
                escape(&format!("{}:{}", broker.host, broker.port)),
                escape(broker.rack.as_deref().unwrap_or("–")),
                escape(&roles.join(", ")),
            ]
        })
        .collect();
    let listeners: Vec<Vec<String>> = overview
        .listeners
        .iter()
        .map(|l| vec![escape(&l.name), escape(&format!("{}:{}", l.host, l.port))])
        .collect();
    let active = authorizer["active"].as_str().unwrap_or("none");
    let mode = if overview.clustered {
        format!("cluster (controller: node {})", overview.controller_id)
    } else {
        "single node".to_string()
    };
    let body = format!(
        "<section class=\"cards\">\
         <div class=\"card\"><span>Cluster</span><b id=\"cluster-id\">{cluster}</b><small>{mode}</small></div>\
         <div class=\"card\"><span>Node</span><b>{node}</b></div>\
         <div class=\"card\"><span>Topics</span><b id=\"topic-count\">{topics}</b><small>{partitions} partitions</small></div>\
         <div class=\"card\"><span>Groups</span><b id=\"group-count\">{groups}</b></div>\
         <div class=\"card\"><span>Authorizer</span><b id=\"authorizer-active\">{active}</b></div>\
         </section>\
         <h2>Live</h2>\
         <section class=\"charts\">\
         <figure><figcaption>Requests/s by API</figcaption><svg id=\"chart-rate\" data-chart=\"rate\"></svg><div class=\"legend\" id=\"legend-rate\"></div></figure>\
         <figure><figcaption>p99 latency (ms) by API</figcaption><svg id=\"chart-latency\" data-chart=\"latency\"></svg><div class=\"legend\" id=\"legend-latency\"></div></figure>\
         <figure><figcaption>Produce / fetch bytes/s</figcaption><svg id=\"chart-bytes\" data-chart=\"bytes\"></svg><div class=\"legend\" id=\"legend-bytes\"></div></figure>\
         </section>\
         <h2>Brokers</h2>{brokers}<h2>Listeners</h2>{listeners}",
        cluster = escape(&overview.cluster_id),
        node = overview.node_id,
        topics = overview.topics,
        partitions = overview.partitions,
        groups = overview.groups,
        active = escape(active),
        brokers = table("brokers", &["Id", "Address", "Rack", "Role"], &brokers),
        listeners = table("listeners", &["Name", "Address"], &listeners),
    );
    page("Overview", "/", &body)
}

pub fn topics(topics: &[TopicRow]) -> String {
    let rows: Vec<Vec<String>> = topics
        .iter()
        .map(|topic| {
            vec![
                format!(
                    "<a href=\"/console/topics/{0}\">{0}</a>",
                    escape(&topic.name)
                ),
                topic.partitions.len().to_string(),
                topic.records().to_string(),
                bytes(topic.size()),
                topic.overrides.to_string(),
            ]
        })
        .collect();
    let body = table(
        "topics",
        &["Topic", "Partitions", "Records", "Size", "Config overrides"],
        &rows,
    );
    page("Topics", "/console/topics", &body)
}

pub fn topic(topic: &TopicRow, configs: &[EffectiveConfig]) -> String {
    let partitions: Vec<Vec<String>> = topic
        .partitions
        .iter()
        .map(|p| {
            vec![
                p.partition.to_string(),
                p.leader.to_string(),
                ids(&p.replicas),
                ids(&p.isr),
                maybe(p.log_start),
                maybe(p.end),
                p.size.map_or_else(|| "–".to_string(), bytes),
                escape(p.dir.as_deref().unwrap_or("–")),
            ]
        })
        .collect();
    let configs: Vec<Vec<String>> = configs
        .iter()
        .map(|config| {
            vec![
                escape(config.name),
                escape(&config.value),
                escape(&format!("{:?}", config.source)),
            ]
        })
        .collect();
    let body = format!(
        "<p>Id <code>{id:032x}</code> · {records} records · {size}</p>\
         <h2>Partitions</h2>{partitions}<h2>Configs</h2>{configs}",
        id = topic.id,
        records = topic.records(),
        size = bytes(topic.size()),
        partitions = table(
            "partitions",
            &[
                "Partition",
                "Leader",
                "Replicas",
                "ISR",
                "Log start",
                "End offset",
                "Size",
                "Log dir"
            ],
            &partitions
        ),
        configs = table("configs", &["Name", "Value", "Source"], &configs),
    );
    page(&format!("Topic {}", topic.name), "/console/topics", &body)
}

pub fn groups(groups: &[GroupRow]) -> String {
    let summary: Vec<Vec<String>> = groups
        .iter()
        .map(|group| {
            vec![
                format!("<a href=\"#group-{0}\">{0}</a>", escape(&group.group_id)),
                escape(&group.state),
                escape(&group.group_type),
                escape(&group.protocol),
                group.members.len().to_string(),
                format!("<span class=\"lag\">{}</span>", group.lag()),
            ]
        })
        .collect();
    let mut body = table(
        "groups",
        &["Group", "State", "Type", "Protocol", "Members", "Lag"],
        &summary,
    );
    for group in groups {
        let members: Vec<Vec<String>> = group
            .members
            .iter()
            .map(|member| {
                let assigned = member
                    .assigned
                    .iter()
                    .map(|(topic, partitions)| format!("{}: {}", escape(topic), ids(partitions)))
                    .collect::<Vec<_>>()
                    .join("; ");
                vec![
                    escape(&member.member_id),
                    escape(member.instance_id.as_deref().unwrap_or("–")),
                    escape(&member.client_id),
                    escape(&member.client_host),
                    assigned,
                ]
            })
            .collect();
        let offsets: Vec<Vec<String>> = group
            .offsets
            .iter()
            .map(|offset| {
                vec![
                    escape(&offset.topic),
                    offset.partition.to_string(),
                    offset.committed.to_string(),
                    maybe(offset.end),
                    maybe(offset.lag()),
                ]
            })
            .collect();
        let id = escape(&group.group_id);
        body.push_str(&format!(
            "<section class=\"group\" id=\"group-{id}\"><h2>{id} <small>{state}</small></h2>\
             <h3>Members</h3>{members}<h3>Offsets</h3>{offsets}</section>",
            state = escape(&group.state),
            members = table(
                &format!("members-{}", group.group_id),
                &["Member", "Instance", "Client", "Host", "Assigned"],
                &members
            ),
            offsets = table(
                &format!("offsets-{}", group.group_id),
                &["Topic", "Partition", "Committed", "End offset", "Lag"],
                &offsets
            ),
        ));
    }
    page("Consumer groups", "/console/groups", &body)
}

/// The plugins page from `GET /plugins` and `GET /authorizer` answers;
/// the p99 cells are filled in by the script from `/metrics`.
pub fn plugins(status: &Value, authorizer: &Value) -> String {
    let list = |key: &str| status[key].as_array().cloned().unwrap_or_default();
    let text = |value: &Value| match value {
        Value::String(s) => escape(s),
        Value::Null => "–".to_string(),
        other => escape(&other.to_string()),
    };
    let grants = |value: &Value| {
        value
            .as_array()
            .map(|grants| {
                grants
                    .iter()
                    .map(|g| escape(g.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let short = |value: &Value| {
        let hash = value.as_str().unwrap_or_default();
        format!(
            "<code title=\"{}\">{}</code>",
            escape(hash),
            escape(hash.get(..12).unwrap_or(hash))
        )
    };
    let mut handlers = list("handlers");
    handlers.sort_by_key(|h| h["api_key"].as_i64().unwrap_or_default());
    let handler_rows: Vec<Vec<String>> = handlers
        .iter()
        .map(|h| {
            let name = escape(h["name"].as_str().unwrap_or_default());
            vec![
                text(&h["api_key"]),
                text(&h["api"]),
                format!("<span class=\"module\">{name}</span>"),
                format!("{}–{}", text(&h["min_version"]), text(&h["max_version"])),
                short(&h["sha256"]),
                grants(&h["grants"]),
                text(&h["calls"]),
                text(&h["errors"]),
                format!("<span data-p99=\"{name}\">–</span>"),
                format!(
                    "<button data-replace=\"{name}\">Replace…</button> \
                     <button class=\"danger\" data-unload=\"{name}\">Unload</button>"
                ),
            ]
        })
        .collect();
    let active = authorizer["active"].as_str();
    let authorizer_rows: Vec<Vec<String>> = list("authorizers")
        .iter()
        .map(|a| {
            let name = a["name"].as_str().unwrap_or_default();
            let button = if active == Some(name) {
                "<b>active</b>".to_string()
            } else {
                format!(
                    "<button data-authorizer=\"{}\">Activate</button>",
                    escape(name)
                )
            };
            vec![
                format!("<span class=\"module\">{}</span>", escape(name)),
                short(&a["sha256"]),
                grants(&a["grants"]),
                text(&a["calls"]),
                text(&a["errors"]),
                button,
            ]
        })
        .collect();
    let refused: Vec<Vec<String>> = list("refused")
        .iter()
        .map(|r| vec![text(&r["file"]), text(&r["reason"])])
        .collect();
    let off = if active.is_none() {
        "(every action is allowed)".to_string()
    } else {
        "<button class=\"danger\" data-authorizer=\"none\">Switch the authorizer off</button>"
            .to_string()
    };
    let body = format!(
        "<div id=\"flash\" role=\"status\"></div>\
         <form id=\"upload\" class=\"panel\"><h3>Upload or swap a module</h3>\
         <label>Name <input id=\"upload-name\" name=\"name\" required pattern=\"[A-Za-z0-9_-]+\" placeholder=\"topic_summary\"></label>\
         <label>Module <input id=\"upload-file\" name=\"file\" type=\"file\" accept=\".wasm\" required></label>\
         <button id=\"upload-submit\" type=\"submit\">Upload</button>\
         <p class=\"hint\">The module is validated, written to the plugin directory and swapped in live; \
         a failed load keeps the old version serving. A module of the same name replaces it.</p></form>\
         <h2>Authorizers</h2><p>Active: <b id=\"authorizer-active\">{active}</b> {off}</p>{authorizers}\
         <h2>Handlers</h2>{handlers}\
         <h2>Refused files</h2>{refused}",
        handlers = table(
            "handlers",
            &[
                "ApiKey", "API", "Module", "Versions", "SHA-256", "Grants", "Calls", "Errors",
                "p99 call (ms)", ""
            ],
            &handler_rows
        ),
        active = escape(active.unwrap_or("none")),
        authorizers = table(
            "authorizers",
            &["Module", "SHA-256", "Grants", "Calls", "Errors", ""],
            &authorizer_rows
        ),
        refused = table("refused", &["File", "Reason"], &refused),
    );
    page("Plugins", "/console/plugins", &body)
}

pub fn not_found(what: &str) -> String {
    page(
        "Not found",
        "",
        &format!(
            "<p>{}</p><p><a href=\"/\">Back to the overview</a></p>",
            escape(what)
        ),
    )
}
