//! The per-version families of `/metrics`, in Prometheus text (or
//! OpenMetrics, where a counter family is named without `_total` and the
//! `_sum`/`_count` counters are `unknown`, as 1.0 requires): every
//! loaded handler version (`role="serving"`) and every rollout's new
//! version (`role="canary"` or `"shadow"`), labelled with `version`, the
//! first 12 hex digits of the module's sha256 (as `gregor plugins list`
//! shows it). Rendered at scrape time from the runtime's own counters.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use super::{short, Mode, Rollouts};
use crate::metrics::Exposition;
use crate::plugins::handler::LoadedHandler;

/// Labels of one version.
struct Version<'a> {
    api: &'a str,
    module: &'a str,
    version: &'a str,
    role: &'a str,
}

impl Version<'_> {
    fn labels(&self) -> String {
        format!(
            "api=\"{}\",module=\"{}\",version=\"{}\",role=\"{}\"",
            escape(self.api),
            escape(self.module),
            escape(self.version),
            self.role
        )
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes the families for `handlers` (the serving versions) and the
/// rollouts in progress.
pub fn render(
    handlers: &[std::sync::Arc<LoadedHandler>],
    rollouts: &Rollouts,
    format: Exposition,
) -> String {
    let active = rollouts.active();
    let mut versions: Vec<(Version<'_>, &LoadedHandler)> = handlers
        .iter()
        .map(|handler| {
            let version = Version {
                api: &handler.info().name,
                module: &handler.source().name,
                version: short(&handler.source().content_hash),
                role: "serving",
            };
            (version, handler.as_ref())
        })
        .collect();
    for rollout in &active {
        let candidate = rollout.candidate.as_ref();
        let role = match rollout.mode {
            Mode::Canary(_) => "canary",
            Mode::Shadow => "shadow",
        };
        let version = Version {
            api: &candidate.info().name,
            module: &rollout.module,
            version: short(&candidate.source().content_hash),
            role,
        };
        versions.push((version, candidate));
    }
    let mut out = String::with_capacity(4096);
    let mut family = |name: &str, kind: &str, help: &str, lines: Vec<String>| {
        let (family, kind) = match (format, kind) {
            (Exposition::OpenMetrics, "counter") => match name.strip_suffix("_total") {
                Some(family) => (family, kind),
                None => (name, "unknown"),
            },
            _ => (name, kind),
        };
        let _ = writeln!(out, "# HELP {family} {help}");
        let _ = writeln!(out, "# TYPE {family} {kind}");
        for line in lines {
            let _ = writeln!(out, "{name}{line}");
        }
    };
    let per_version = |value: &dyn Fn(&LoadedHandler) -> u64| {
        versions
            .iter()
            .map(|(version, handler)| format!("{{{}}} {}", version.labels(), value(handler)))
            .collect::<Vec<_>>()
    };
    family(
        "gregor_plugin_version_calls_total",
        "counter",
        "Calls of a module version.",
        per_version(&|h| h.stats.calls.load(Relaxed)),
    );
    family(
        "gregor_plugin_version_traps_total",
        "counter",
        "Calls of a module version that trapped.",
        per_version(&|h| h.stats.traps.load(Relaxed)),
    );
    family(
        "gregor_plugin_version_timeouts_total",
        "counter",
        "Calls of a module version that ran past plugin.call.timeout.ms.",
        per_version(&|h| h.stats.timeouts.load(Relaxed)),
    );
    let mut codes = Vec::new();
    for (version, handler) in &versions {
        for (code, count) in handler.stats.error_code_counts() {
            codes.push(format!(
                "{{{},error_code=\"{code}\"}} {count}",
                version.labels()
            ));
        }
    }
    family(
        "gregor_plugin_version_error_codes_total",
        "counter",
        "Error codes the responses of a module version carried, by code.",
        codes,
    );
    // Latency and the window of both versions of each rollout.
    let mut sums = Vec::new();
    let mut counts = Vec::new();
    let mut p99 = Vec::new();
    for rollout in &active {
        let window = rollout.settings.window();
        let candidate = rollout.candidate.as_ref();
        let roles = [
            (short(&rollout.serving_hash), "serving", &rollout.serving),
            (
                short(&candidate.source().content_hash),
                match rollout.mode {
                    Mode::Canary(_) => "canary",
                    Mode::Shadow => "shadow",
                },
                &rollout.canary,
            ),
        ];
        for (hash, role, stats) in roles {
            let labels = Version {
                api: &candidate.info().name,
                module: &rollout.module,
                version: hash,
                role,
            }
            .labels();
            let totals = stats.totals(window);
            sums.push(format!(
                "{{{labels}}} {}",
                stats.latency_sum().as_secs_f64()
            ));
            counts.push(format!("{{{labels}}} {}", totals.calls));
            p99.push(format!("{{{labels}}} {}", totals.p99_ms / 1000.0));
        }
    }
    family(
        "gregor_plugin_rollout_call_seconds_sum",
        "counter",
        "Time in calls of each version since its rollout began.",
        sums,
    );
    family(
        "gregor_plugin_rollout_call_seconds_count",
        "counter",
        "Calls of each version since its rollout began.",
        counts,
    );
    family(
        "gregor_plugin_rollout_call_p99_seconds",
        "gauge",
        "The 99th percentile call of each version over plugin.canary.window.ms.",
        p99,
    );
    let shadows: Vec<_> = active
        .iter()
        .filter(|rollout| matches!(rollout.mode, Mode::Shadow))
        .collect();
    let shadow_labels = |rollout: &super::Rollout| {
        format!(
            "api=\"{}\",module=\"{}\",version=\"{}\"",
            escape(&rollout.candidate.info().name),
            escape(&rollout.module),
            short(&rollout.candidate.source().content_hash)
        )
    };
    family(
        "gregor_plugin_shadow_compared_total",
        "counter",
        "Responses of a shadow compared with the serving version's.",
        shadows
            .iter()
            .map(|r| {
                format!(
                    "{{{}}} {}",
                    shadow_labels(r),
                    r.shadow.compared.load(Relaxed)
                )
            })
            .collect(),
    );
    family(
        "gregor_plugin_shadow_mismatches_total",
        "counter",
        "Shadow responses with at least one field differing from the serving version's.",
        shadows
            .iter()
            .map(|r| {
                format!(
                    "{{{}}} {}",
                    shadow_labels(r),
                    r.shadow.mismatches.load(Relaxed)
                )
            })
            .collect(),
    );
    let mut fields = Vec::new();
    let mut dropped = Vec::new();
    for rollout in &shadows {
        let labels = shadow_labels(rollout);
        if let Ok(counts) = rollout.shadow.fields.lock() {
            for (field, count) in counts.iter() {
                fields.push(format!("{{{labels},field=\"{}\"}} {count}", escape(field)));
            }
        }
        if let Ok(counts) = rollout.shadow.dropped.lock() {
            for (reason, count) in counts.iter() {
                dropped.push(format!("{{{labels},reason=\"{reason}\"}} {count}"));
            }
        }
    }
    family(
        "gregor_plugin_shadow_differences_total",
        "counter",
        "Differing fields of shadow responses, by field (list indexes dropped).",
        fields,
    );
    family(
        "gregor_plugin_shadow_dropped_total",
        "counter",
        "Requests not mirrored to a shadow or not compared, by reason.",
        dropped,
    );
    let outcomes = rollouts
        .outcomes
        .lock()
        .map(|outcomes| {
            outcomes
                .iter()
                .map(|((outcome, module), count)| {
                    format!(
                        "{{module=\"{}\",outcome=\"{}\"}} {count}",
                        escape(module),
                        outcome.replace(' ', "_")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    family(
        "gregor_plugin_rollouts_ended_total",
        "counter",
        "Rollouts ended, by outcome (promoted, rolled_back, rolled_back_automatically).",
        outcomes,
    );
    out
}
