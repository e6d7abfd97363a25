//! Interceptor chains: which interceptor modules wrap which ApiKey, in
//! what order (`plugin.interceptors.<api>=first,second`), and running a
//! chain around a handler call.
//!
//! Before the handler, each interceptor in configured order sees the
//! request (as the previous one left it) and passes it on or answers it;
//! after the handler, those that passed it on see the response in reverse
//! order, so the first configured is outermost. A chain fails closed: a
//! configured interceptor that is not loaded, that does not say it wraps
//! the ApiKey, or whose call traps or times out fails the request as a
//! failed handler does (`apis.rs`), because a missing validator or tenant
//! filter must never let a request through unfiltered.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use bytes::Bytes;

use crate::config::BrokerConfig;
use crate::plugins::bindings::interceptor::exports::gregor::broker::interceptor::Verdict;
use crate::plugins::bindings::RequestContext;
use crate::plugins::grants::STANDARD;
use crate::plugins::interceptor::LoadedInterceptor;
use crate::plugins::PluginHost;
use crate::security::session::Session;

/// The config prefix: `plugin.interceptors.<api>`, where `<api>` is the
/// standard module name of the ApiKey (`produce`, `metadata`,
/// `find_coordinator`, ...) or its number.
pub const CONFIG_PREFIX: &str = "plugin.interceptors.";

/// The configured chains: ApiKey -> interceptor module names, in order.
#[derive(Debug, Clone, Default)]
pub struct Chains(BTreeMap<i16, Vec<Arc<str>>>);

impl Chains {
    /// Reads every `plugin.interceptors.<api>` of the config.
    pub fn from_config(config: &BrokerConfig) -> Result<Self> {
        let mut chains = BTreeMap::new();
        for (name, value) in config.with_prefix(CONFIG_PREFIX) {
            let api = &name[CONFIG_PREFIX.len()..];
            let key = api_key(api)
                .ok_or_else(|| anyhow::anyhow!("{name}: {api:?} names no ApiKey (use the API's module name, e.g. produce, or its number)"))?;
            let modules = parse(value).map_err(|error| anyhow::anyhow!("{name}: {error}"))?;
            if !modules.is_empty() {
                chains.insert(key, modules);
            }
        }
        Ok(Self(chains))
    }

    /// The interceptor names wrapping `api_key`, outermost first.
    pub fn get(&self, api_key: i16) -> Option<&[Arc<str>]> {
        self.0.get(&api_key).map(Vec::as_slice)
    }

    /// Every chain, for the admin API.
    pub fn iter(&self) -> impl Iterator<Item = (i16, &[Arc<str>])> {
        self.0.iter().map(|(key, names)| (*key, names.as_slice()))
    }
}

/// The ApiKey an `<api>` config suffix names.
fn api_key(api: &str) -> Option<i16> {
    if let Ok(key) = api.parse::<i16>() {
        return (key >= 0).then_some(key);
    }
    STANDARD
        .iter()
        .find(|row| row.module == api)
        .map(|row| row.api_key)
}

/// A comma-separated list of module names (letters, digits, `_`, `-`),
/// each at most once.
fn parse(value: &str) -> Result<Vec<Arc<str>>> {
    let mut names: Vec<Arc<str>> = Vec::new();
    for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            bail!("{name:?} is not a module name");
        }
        if names.iter().any(|known| known.as_ref() == name) {
            bail!("{name} is listed twice");
        }
        names.push(Arc::from(name));
    }
    Ok(names)
}

/// What the chain made of a request before its handler.
pub struct Before {
    /// The request body for the handler.
    pub body: Bytes,
    /// Set when an interceptor answered the request itself.
    pub reply: Option<Vec<u8>>,
    /// Set when an interceptor closed the connection.
    pub close: bool,
    /// The interceptors that passed the request on, outermost first:
    /// they see the response.
    pub passed: Vec<Arc<LoadedInterceptor>>,
    /// The body each of them was given.
    pub seen: Vec<Bytes>,
}

/// Runs `chain`'s request hooks over `body` (a non-empty chain). An
/// error says why the request must fail.
pub async fn before(
    host: &PluginHost,
    chain: Vec<Arc<LoadedInterceptor>>,
    session: &Arc<Session>,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Before, String> {
    let mut before = Before {
        body,
        reply: None,
        close: false,
        passed: Vec::with_capacity(chain.len()),
        seen: Vec::with_capacity(chain.len()),
    };
    for interceptor in chain {
        let started = Instant::now();
        let verdict = interceptor
            .on_request(host, session, ctx, &before.body)
            .await;
        record(host, &interceptor, started);
        match verdict.map_err(|error| failed(&interceptor, "on-request", error))? {
            Verdict::Continue(body) => {
                let given = std::mem::replace(&mut before.body, Bytes::from(body));
                before.seen.push(given);
                before.passed.push(interceptor);
            }
            Verdict::Reply(body) => {
                before.reply = Some(body);
                break;
            }
            Verdict::CloseConnection => {
                before.close = true;
                break;
            }
        }
    }
    Ok(before)
}

/// Runs the response hooks of those that passed the request on, innermost
/// first, each with the request body it was given (`seen`, in the same
/// order as `passed`).
pub async fn after(
    host: &PluginHost,
    passed: &[Arc<LoadedInterceptor>],
    seen: &[Bytes],
    session: &Arc<Session>,
    ctx: &RequestContext,
    mut body: Vec<u8>,
) -> Result<Vec<u8>, String> {
    for (interceptor, request) in passed.iter().zip(seen).rev() {
        let started = Instant::now();
        let answer = interceptor
            .on_response(host, session, ctx, request, &body)
            .await;
        record(host, interceptor, started);
        body = answer
            .map_err(|error| failed(interceptor, "on-response", error))?
            .map_err(|refusal| {
                format!(
                    "interceptor {} on-response failed: {refusal}",
                    interceptor.source().name
                )
            })?;
    }
    Ok(body)
}

fn record(host: &PluginHost, interceptor: &LoadedInterceptor, started: Instant) {
    let peak = usize::try_from(interceptor.stats.meter.peak_memory()).unwrap_or(usize::MAX);
    host.services.metrics.record_plugin_call(
        &interceptor.source().name,
        started.elapsed(),
        None,
        peak,
    );
}

fn failed(
    interceptor: &LoadedInterceptor,
    hook: &str,
    error: crate::plugins::handler::CallError,
) -> String {
    format!("interceptor {} {hook} {error}", interceptor.source().name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_an_api_by_module_name_or_number() {
        assert_eq!(api_key("produce"), Some(0));
        assert_eq!(api_key("find_coordinator"), Some(10));
        assert_eq!(api_key("3"), Some(3));
        assert_eq!(api_key("-1"), None);
        assert_eq!(api_key("Produce"), None);
    }

    #[test]
    fn a_chain_is_distinct_module_names_in_order() {
        let names = parse(" tenant_filter, json_validator ,").expect("a chain");
        let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        assert_eq!(names, ["tenant_filter", "json_validator"]);
        assert!(parse("a,a").is_err());
        assert!(parse("a b").is_err());
    }
}
