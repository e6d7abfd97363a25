//! Running a shadow: once the serving version has answered a request (the
//! answer is on its way to the client), the shadow handles a copy of it in
//! a task of its own, so it never delays the client; at most
//! `plugin.shadow.max.in.flight` run at once and a request arriving past
//! that is not mirrored (dropped, counted). Its instances run with their
//! writes dry (`imports::dry_run`), its answer goes nowhere but into the
//! comparison, and a call that parks (a long-poll Fetch) is dropped.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tracing::warn;

use super::compare::{differences, Difference};
use super::{sample, short, Rollout};
use crate::plugins::bindings::RequestContext;
use crate::plugins::deferred::Deferral;
use crate::plugins::handler::CallOutcome;
use crate::plugins::imports::record_set::{Answered, ResponseBody};
use crate::plugins::PluginHost;
use crate::security::session::Session;

/// Releases a shadow's in-flight slot however its task ends.
struct Slot(Arc<Rollout>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.shadow.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Mirrors a request the serving version answered with `serving_body` to
/// the shadow of `rollout`, comparing the answers.
pub fn mirror(
    host: &PluginHost,
    rollout: Arc<Rollout>,
    session: &Arc<Session>,
    ctx: &RequestContext,
    body: &Bytes,
    request_size: usize,
    serving_body: ResponseBody,
) {
    let stats = &rollout.shadow;
    let limit = rollout.settings.shadow_max_in_flight;
    if stats.in_flight.fetch_add(1, Ordering::Relaxed) >= limit {
        stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        stats.drop_one("busy");
        return;
    }
    let slot = Slot(Arc::clone(&rollout));
    let host = host.clone();
    let session = Arc::clone(session);
    let ctx = ctx.clone();
    let body = body.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let candidate = Arc::clone(&rollout.candidate);
        let (result, report) = candidate
            .call(
                &host,
                &session,
                ctx.clone(),
                &body,
                request_size,
                Deferral::default(),
            )
            .await;
        if matches!(result, Ok(CallOutcome::Parked(_))) {
            rollout.shadow.drop_one("parked");
            return;
        }
        rollout
            .canary
            .push(sample(&result, &report), rollout.settings.window());
        let shadow_body = match result {
            Ok(CallOutcome::Done(Answered::Respond(shadow_body))) => Some(shadow_body),
            Ok(CallOutcome::Done(_)) => None,
            Ok(CallOutcome::Parked(_)) => return,
            Err(error) => {
                rollout.shadow.drop_one("failed");
                warn!(
                    module = %rollout.module,
                    version = short(&candidate.source().content_hash),
                    correlation_id = ctx.correlation_id,
                    "shadow call failed: {error}"
                );
                return;
            }
        };
        // Compared whole: the records both reference read in.
        let serving_body = serving_body.to_vec();
        let shadow_body = shadow_body.map(|body| body.to_vec()).transpose();
        let (serving_body, shadow_body) = match (serving_body, shadow_body) {
            (Ok(serving), Ok(shadow)) => (serving, shadow),
            (Err(error), _) | (_, Err(error)) => {
                rollout.shadow.drop_one("unreadable");
                warn!(
                    module = %rollout.module,
                    correlation_id = ctx.correlation_id,
                    "cannot read the records of a shadowed response: {error}"
                );
                return;
            }
        };
        let found = match &shadow_body {
            Some(shadow_body) => differences(
                ctx.api_key,
                ctx.api_version,
                &serving_body,
                shadow_body,
                &rollout.settings.shadow_ignore_fields,
            ),
            None => vec![Difference {
                field: "<outcome>".to_string(),
                serving: Some("response".to_string()),
                shadow: Some("no response".to_string()),
            }],
        };
        record(&rollout, &ctx, &found);
    });
}

/// Counts a comparison and logs the first differing response, then every
/// `plugin.shadow.log.every`-th.
fn record(rollout: &Rollout, ctx: &RequestContext, found: &[Difference]) {
    let stats = &rollout.shadow;
    stats.compared.fetch_add(1, Ordering::Relaxed);
    if found.is_empty() {
        return;
    }
    let mismatch = stats.mismatches.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut fields) = stats.fields.lock() {
        for difference in found {
            *fields.entry(difference.family()).or_default() += 1;
        }
    }
    let shown = |value: &Option<String>| value.clone().unwrap_or_else(|| "absent".to_string());
    let summary = found
        .iter()
        .take(8)
        .map(|d| {
            format!(
                "{}: serving {} / shadow {}",
                d.field,
                shown(&d.serving),
                shown(&d.shadow)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    if let Ok(mut last) = stats.last.lock() {
        *last = Some(summary.clone());
    }
    if mismatch.is_multiple_of(rollout.settings.shadow_log_every) {
        warn!(
            module = %rollout.module,
            version = short(&rollout.candidate.source().content_hash),
            api_key = ctx.api_key,
            api_version = ctx.api_version,
            correlation_id = ctx.correlation_id,
            differences = found.len(),
            "shadow response differs: {summary}"
        );
    }
}
