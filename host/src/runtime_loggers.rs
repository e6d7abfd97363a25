//! Runtime log levels: Kafka's BROKER_LOGGER config resource (KIP-412,
//! `RuntimeLoggerManager` over `Log4jController`) for the broker's
//! `tracing` output.
//!
//! A logger is a `tracing` target: `root` (every target no other logger
//! covers), the host's modules (`gregor`, `gregor::apis`,
//! `gregor::replica`, `gregor::plugins::manager`, ... as [`HOST_TARGETS`]
//! lists them; plugin log lines are `gregor::plugins::imports::logging`),
//! every target that has reached a log call site since start (dependencies
//! too: `wasmtime::...`), with their ancestors, and every target named in
//! `GREGOR_LOG`. A logger's level covers the targets it prefixes, as
//! `tracing_subscriber::EnvFilter` directives do (the longest prefix with a
//! level wins; otherwise the root's).
//!
//! The initial levels come from `GREGOR_LOG` (else `RUST_LOG`, else
//! `info`). DescribeConfigs lists every logger with its effective level;
//! IncrementalAlterConfigs SETs a logger's level (TRACE, DEBUG, INFO, WARN,
//! ERROR or FATAL, upper case, as Kafka's `LogLevelConfig`; FATAL filters
//! as ERROR) or DELETEs it, so that it follows its ancestors again. The
//! root logger cannot be deleted. Each change rebuilds the filter's
//! directives and reloads it at once; nothing is persisted, so a restart
//! starts from `GREGOR_LOG` again, as Kafka's log4j levels do.
//!
//! `GREGOR_LOG` directives with span or field filters (`target[span]=debug`)
//! are kept as written after the loggers' directives; they are not loggers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{warn, Metadata, Subscriber};
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// Kafka's name for the root logger.
pub const ROOT_LOGGER: &str = "root";

/// Kafka's valid log levels, sorted, as its error messages list them.
pub const VALID_LEVELS: &str = "DEBUG, ERROR, FATAL, INFO, TRACE, WARN";

/// The host's modules that log, as `tracing` targets (the crate root is
/// `gregor`). Listed so that they are loggers before their first line.
pub const HOST_TARGETS: &[&str] = &[
    "gregor",
    "gregor::admin",
    "gregor::apis",
    "gregor::coordinator",
    "gregor::coordinator::consumer",
    "gregor::coordinator::group",
    "gregor::coordinator::offsets",
    "gregor::coordinator::protocol",
    "gregor::coordinator::store",
    "gregor::log::checkpoint",
    "gregor::log::cleaner",
    "gregor::log::index",
    "gregor::log::manager",
    "gregor::log::partition",
    "gregor::log::segment",
    "gregor::metadata::topics",
    "gregor::network::connection",
    "gregor::network::listener",
    "gregor::plugins::authorization",
    "gregor::plugins::authorizer",
    "gregor::plugins::cache",
    "gregor::plugins::imports::logging",
    "gregor::plugins::imports::txn",
    "gregor::plugins::loader",
    "gregor::plugins::manager",
    "gregor::quota",
    "gregor::replica",
    "gregor::runtime_loggers",
    "gregor::security::tokens",
    "gregor::server",
    "gregor::telemetry",
    "gregor::transactions",
];

/// A logger level: Kafka's log4j levels. OFF comes only from `GREGOR_LOG`
/// (`gregor::x=off`): Kafka does not accept it in IncrementalAlterConfigs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    Fatal,
    Off,
}

impl Level {
    /// Kafka's check (`LogLevelConfig.VALID_LOG_LEVELS.contains`): one of
    /// the level names exactly, upper case; OFF is not one.
    pub fn parse_kafka(value: &str) -> Option<Level> {
        match value {
            "TRACE" => Some(Level::Trace),
            "DEBUG" => Some(Level::Debug),
            "INFO" => Some(Level::Info),
            "WARN" => Some(Level::Warn),
            "ERROR" => Some(Level::Error),
            "FATAL" => Some(Level::Fatal),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
            Level::Fatal => "FATAL",
            Level::Off => "OFF",
        }
    }

    /// The `tracing` filter: FATAL is ERROR (tracing has no more severe
    /// level).
    fn filter(self) -> LevelFilter {
        match self {
            Level::Trace => LevelFilter::TRACE,
            Level::Debug => LevelFilter::DEBUG,
            Level::Info => LevelFilter::INFO,
            Level::Warn => LevelFilter::WARN,
            Level::Error | Level::Fatal => LevelFilter::ERROR,
            Level::Off => LevelFilter::OFF,
        }
    }

    fn of_filter(filter: LevelFilter) -> Level {
        match filter {
            LevelFilter::TRACE => Level::Trace,
            LevelFilter::DEBUG => Level::Debug,
            LevelFilter::INFO => Level::Info,
            LevelFilter::WARN => Level::Warn,
            LevelFilter::ERROR => Level::Error,
            _ => Level::Off,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The loggers' levels and the filter directives they make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Levels {
    root: Level,
    /// Loggers with a level of their own.
    own: BTreeMap<String, Level>,
    /// `GREGOR_LOG` directives with span or field filters, as written.
    extra: Vec<String>,
}

impl Levels {
    /// The levels an `EnvFilter` spec sets (the spec must parse, see
    /// [`EnvFilter::try_new`]): a bare level is the root's, `target=level`
    /// and a bare target (TRACE) a logger's; without a bare level the root
    /// is OFF, as the filter enables nothing no directive covers.
    pub fn parse(spec: &str) -> Levels {
        let mut levels = Levels {
            root: Level::Off,
            own: BTreeMap::new(),
            extra: Vec::new(),
        };
        for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            if directive.contains(['[', '{']) {
                levels.extra.push(directive.to_string());
                continue;
            }
            match directive.split_once('=') {
                Some((target, level)) => {
                    let level = level.trim().parse().unwrap_or(LevelFilter::TRACE);
                    levels
                        .own
                        .insert(target.trim().to_string(), Level::of_filter(level));
                }
                None => match directive.parse::<LevelFilter>() {
                    Ok(level) => levels.root = Level::of_filter(level),
                    Err(_) => {
                        levels.own.insert(directive.to_string(), Level::Trace);
                    }
                },
            }
        }
        levels
    }

    /// The `EnvFilter` directives: the root level, each logger's, then the
    /// span and field directives.
    pub fn directives(&self) -> String {
        let mut directives = vec![self.root.filter().to_string()];
        directives.extend(
            self.own
                .iter()
                .map(|(target, level)| format!("{target}={}", level.filter())),
        );
        directives.extend(self.extra.iter().cloned());
        directives.join(",")
    }

    /// A logger's effective level: its own, else that of the longest
    /// logger prefixing it (the filter's rule), else the root's.
    pub fn effective(&self, logger: &str) -> Level {
        if logger == ROOT_LOGGER {
            return self.root;
        }
        self.own
            .iter()
            .filter(|(target, _)| logger.starts_with(target.as_str()))
            .max_by_key(|(target, _)| target.len())
            .map_or(self.root, |(_, level)| *level)
    }

    /// Sets a logger's own level (the root's for `root`).
    pub fn set(&mut self, logger: &str, level: Level) {
        if logger == ROOT_LOGGER {
            self.root = level;
        } else {
            self.own.insert(logger.to_string(), level);
        }
    }

    /// Removes a logger's own level: it follows its ancestors or the root
    /// again. The root keeps its level.
    pub fn unset(&mut self, logger: &str) {
        self.own.remove(logger);
    }

    /// The loggers with a level of their own (not the root).
    fn named(&self) -> impl Iterator<Item = &str> {
        self.own.keys().map(String::as_str)
    }
}

/// A change of one logger: a level, or none to unset it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub logger: String,
    pub level: Option<Level>,
}

/// Whether a target can stand in a filter directive (and so be a logger).
fn usable_target(target: &str) -> bool {
    !target.is_empty()
        && target
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '-' | ':' | '_'))
        && !target
            .contains(|c: char| c.is_whitespace() || matches!(c, ',' | '=' | '[' | ']' | '{' | '}'))
}

/// A target and its ancestors (`a::b::c`: `a`, `a::b`, `a::b::c`).
fn with_ancestors(target: &str) -> impl Iterator<Item = &str> {
    target
        .match_indices("::")
        .map(move |(at, _)| &target[..at])
        .chain(std::iter::once(target))
}

/// Records the target of every call site as it registers.
struct SeenTargets(Arc<Mutex<BTreeSet<&'static str>>>);

impl<S: Subscriber> Layer<S> for SeenTargets {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        // `log` is tracing-log's call site for `log` records, whose real
        // targets the filter sees but call sites do not carry.
        let target = metadata.target();
        if target != "log" && usable_target(target) {
            if let Ok(mut seen) = self.0.lock() {
                seen.insert(target);
            }
        }
        Interest::always()
    }
}

/// The broker's loggers: their levels, the targets seen, and the filter
/// they drive.
pub struct RuntimeLoggers {
    levels: Mutex<Levels>,
    seen: Arc<Mutex<BTreeSet<&'static str>>>,
    handle: reload::Handle<EnvFilter, Registry>,
}

static INSTALLED: OnceLock<RuntimeLoggers> = OnceLock::new();

/// The loggers of this process, once [`init`] has installed them.
pub fn installed() -> Option<&'static RuntimeLoggers> {
    INSTALLED.get()
}

/// The first of `GREGOR_LOG` and `RUST_LOG` that is set and parses, else
/// `info`, with its filter.
fn initial_spec() -> (String, EnvFilter) {
    for var in ["GREGOR_LOG", "RUST_LOG"] {
        if let Ok(spec) = std::env::var(var) {
            if let Ok(filter) = EnvFilter::try_new(&spec) {
                return (spec, filter);
            }
        }
    }
    ("info".to_string(), EnvFilter::new("info"))
}

/// Installs the process's subscriber: the reloadable filter, the stderr
/// formatter and the call-site target recorder.
pub fn init() {
    let (spec, filter) = initial_spec();
    let (filter, handle) = reload::Layer::new(filter);
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(SeenTargets(Arc::clone(&seen)))
        .try_init();
    if let Err(error) = installed {
        eprintln!("gregor: cannot install the log subscriber: {error}");
        return;
    }
    let _ = INSTALLED.set(RuntimeLoggers {
        levels: Mutex::new(Levels::parse(&spec)),
        seen,
        handle,
    });
}

impl RuntimeLoggers {
    fn levels(&self) -> Levels {
        crate::sync::lock(&self.levels).clone()
    }

    /// Every logger but the root, sorted.
    fn names(&self, levels: &Levels) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = BTreeSet::new();
        let seen: Vec<&'static str> = crate::sync::lock(&self.seen).iter().copied().collect();
        for target in HOST_TARGETS.iter().copied().chain(seen) {
            names.extend(with_ancestors(target).map(str::to_string));
        }
        names.extend(levels.named().map(str::to_string));
        names.remove(ROOT_LOGGER);
        names
    }

    /// Every logger with its effective level, the root first.
    pub fn loggers(&self) -> Vec<(String, Level)> {
        let levels = self.levels();
        std::iter::once(ROOT_LOGGER.to_string())
            .chain(self.names(&levels))
            .map(|name| {
                let level = levels.effective(&name);
                (name, level)
            })
            .collect()
    }

    /// Whether `name` is a logger (Kafka's `loggerExists`).
    pub fn exists(&self, name: &str) -> bool {
        name == ROOT_LOGGER || self.names(&self.levels()).contains(name)
    }

    /// Applies the changes in order and reloads the filter; nothing changes
    /// if the new filter cannot be built.
    pub fn apply(&self, changes: &[Change]) -> Result<(), String> {
        let mut guard = crate::sync::lock(&self.levels);
        let mut next = guard.clone();
        for change in changes {
            match change.level {
                Some(level) => next.set(&change.logger, level),
                None => next.unset(&change.logger),
            }
        }
        let directives = next.directives();
        let filter = EnvFilter::try_new(&directives)
            .map_err(|error| format!("invalid log filter {directives:?}: {error}"))?;
        self.handle
            .reload(filter)
            .map_err(|error| format!("cannot reload the log filter: {error}"))?;
        *guard = next;
        drop(guard);
        log::set_max_level(log_level(LevelFilter::current()));
        for change in changes {
            match change.level {
                Some(level) => warn!("Updated the log level of {} to {level}", change.logger),
                None => warn!("Unset the log level of {}", change.logger),
            }
        }
        Ok(())
    }
}

/// The `log` crate's max level for a `tracing` one, so that `log` records
/// no filter wants are skipped cheaply (as `SubscriberInitExt::init` sets
/// it at start).
fn log_level(filter: LevelFilter) -> log::LevelFilter {
    match filter {
        LevelFilter::TRACE => log::LevelFilter::Trace,
        LevelFilter::DEBUG => log::LevelFilter::Debug,
        LevelFilter::INFO => log::LevelFilter::Info,
        LevelFilter::WARN => log::LevelFilter::Warn,
        LevelFilter::ERROR => log::LevelFilter::Error,
        _ => log::LevelFilter::Off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_levels_are_upper_case_and_exclude_off() {
        for (name, level) in [
            ("TRACE", Level::Trace),
            ("DEBUG", Level::Debug),
            ("INFO", Level::Info),
            ("WARN", Level::Warn),
            ("ERROR", Level::Error),
            ("FATAL", Level::Fatal),
        ] {
            assert_eq!(Level::parse_kafka(name), Some(level));
            assert_eq!(level.name(), name);
        }
        for bad in ["debug", "Info", "OFF", "ALL", "", " INFO", "WARNING"] {
            assert_eq!(Level::parse_kafka(bad), None, "{bad:?}");
        }
        assert_eq!(Level::Fatal.filter(), LevelFilter::ERROR);
        assert_eq!(Level::Off.filter(), LevelFilter::OFF);
    }

    #[test]
    fn gregor_log_specs_become_levels() {
        let levels = Levels::parse("info,gregor::replica=debug, wasmtime=WARN,gregor::apis");
        assert_eq!(levels.root, Level::Info);
        assert_eq!(levels.own.get("gregor::replica"), Some(&Level::Debug));
        assert_eq!(levels.own.get("wasmtime"), Some(&Level::Warn));
        assert_eq!(levels.own.get("gregor::apis"), Some(&Level::Trace));
        // No bare level: nothing outside the named targets is enabled.
        assert_eq!(Levels::parse("gregor=debug").root, Level::Off);
        assert_eq!(Levels::parse("").root, Level::Off);
        // Span and field directives are kept, not loggers.
        let spans = Levels::parse("warn,gregor[request]=trace");
        assert_eq!(spans.extra, ["gregor[request]=trace"]);
        assert!(spans.own.is_empty());
    }

    #[test]
    fn directives_rebuild_and_parse() {
        let mut levels = Levels::parse("info,gregor[request]=trace");
        levels.set("gregor::replica", Level::Debug);
        levels.set("gregor::apis", Level::Fatal);
        levels.set(ROOT_LOGGER, Level::Warn);
        let directives = levels.directives();
        assert_eq!(
            directives,
            "warn,gregor::apis=error,gregor::replica=debug,gregor[request]=trace"
        );
        assert!(EnvFilter::try_new(&directives).is_ok(), "{directives}");
        // The directives read back as the same loggers (FATAL filters as
        // ERROR).
        let again = Levels::parse(&directives);
        assert_eq!(again.root, Level::Warn);
        assert_eq!(again.own.get("gregor::replica"), Some(&Level::Debug));
        assert_eq!(again.own.get("gregor::apis"), Some(&Level::Error));
        levels.set("gregor::x", Level::Off);
        assert!(levels.directives().contains("gregor::x=off"));
    }

    #[test]
    fn effective_levels_follow_the_longest_prefix_then_the_root() {
        let mut levels = Levels::parse("info");
        levels.set("gregor", Level::Warn);
        levels.set("gregor::plugins", Level::Debug);
        assert_eq!(levels.effective(ROOT_LOGGER), Level::Info);
        assert_eq!(levels.effective("wasmtime::runtime"), Level::Info);
        assert_eq!(levels.effective("gregor::apis"), Level::Warn);
        assert_eq!(levels.effective("gregor::plugins::manager"), Level::Debug);
        // Deleting a logger's level: it follows its ancestor, then the root.
        levels.unset("gregor::plugins");
        assert_eq!(levels.effective("gregor::plugins::manager"), Level::Warn);
        levels.unset("gregor");
        assert_eq!(levels.effective("gregor::plugins::manager"), Level::Info);
        // The root cannot lose its level.
        levels.unset(ROOT_LOGGER);
        assert_eq!(levels.effective(ROOT_LOGGER), Level::Info);
    }

    #[test]
    fn targets_and_their_ancestors_are_loggers() {
        assert_eq!(
            with_ancestors("gregor::plugins::manager").collect::<Vec<_>>(),
            ["gregor", "gregor::plugins", "gregor::plugins::manager"]
        );
        assert_eq!(with_ancestors("gregor").collect::<Vec<_>>(), ["gregor"]);
        assert!(usable_target("wasmtime_cranelift::compiler"));
        for bad in ["", "a,b", "a=b", "a b", "a[b]", "{a}"] {
            assert!(!usable_target(bad), "{bad:?}");
        }
    }

    #[test]
    fn call_site_targets_are_recorded() {
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let subscriber = tracing_subscriber::registry().with(SeenTargets(Arc::clone(&seen)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "some_crate::module", "a line");
            tracing::info!(target: "a,b", "an unusable target");
        });
        let seen = seen.lock().unwrap();
        assert!(seen.contains("some_crate::module"), "{seen:?}");
        assert!(!seen.contains("a,b"));
    }

    /// Every listed host target is a module of this crate.
    #[test]
    fn host_targets_are_modules() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for target in HOST_TARGETS {
            assert!(usable_target(target));
            let Some(path) = target.strip_prefix("gregor::") else {
                assert_eq!(*target, "gregor");
                continue;
            };
            let path = path.replace("::", "/");
            assert!(
                src.join(format!("{path}.rs")).exists() || src.join(&path).join("mod.rs").exists(),
                "{target}"
            );
        }
    }
}
