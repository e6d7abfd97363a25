//! `gregor-bench authz --module FILE.wasm [--iterations N] [--actions K]
//! [--acls M]`: what authorization costs a request, measured inside the
//! host on the path handlers take (`authz.authorize` -> the decision
//! cache -> the authorizer module), without a network. "Cold" clears the
//! decision cache before every request, so each one calls the module;
//! "warm" repeats the same request, so each is answered from the cache.
//! The ACL store holds M bindings (for the ACL authorizer to read). Used
//! for BENCHMARKS.md; never by tests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use gregor::broker::Broker;
use gregor::config::BrokerConfig;
use gregor::plugins::bindings::{Action, Operation, ResourceType};
use gregor::plugins::engine::{build_engine, start_epoch_ticker};
use gregor::plugins::handler::InstanceLimits;
use gregor::plugins::loader::{Loaded, Loader};
use gregor::security::acl_store::{self, AclBinding, PatternType, Permission};
use gregor::security::sasl::ConnectionAuth;
use gregor::security::session::Session;

pub async fn run(args: &[String]) -> Result<()> {
    let mut module = None;
    let mut iterations = 2_000usize;
    let mut action_count = 2usize;
    let mut acl_count = 100usize;
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--module" => module = Some(std::path::PathBuf::from(value)),
            "--iterations" => iterations = value.parse().context("--iterations")?,
            "--actions" => action_count = value.parse().context("--actions")?,
            "--acls" => acl_count = value.parse().context("--acls")?,
            other => bail!("unknown flag {other}"),
        }
    }
    let module = module.context("--module FILE.wasm is required")?;
    let data = std::env::temp_dir().join(format!("gregor-bench-authz-{}", std::process::id()));
    let mut config = BrokerConfig::default();
    config.set_pair(&format!("log.dirs={}", data.display()))?;
    config.set_pair("super.users=User:admin")?;
    let config = Arc::new(config);
    let broker = Arc::new(Broker::open(Arc::clone(&config))?);
    let acls: Vec<AclBinding> = (0..acl_count)
        .map(|i| AclBinding {
            resource_type: acl_store::ResourceType::Topic,
            resource_name: format!("tenant{i}-"),
            pattern_type: PatternType::Prefixed,
            principal: format!("User:tenant{i}"),
            host: "*".to_string(),
            operation: acl_store::Operation::All,
            permission: Permission::Allow,
        })
        .collect();
    // One creation may add at most MAX_RECORDS_PER_USER_OP bindings.
    for chunk in acls.chunks(gregor::metadata::bounds::MAX_RECORDS_PER_USER_OP) {
        broker.services.acls.create(chunk.to_vec())?;
    }

    let limits = InstanceLimits {
        memory_max: config.plugin_memory_max_bytes()?,
        recycle_memory: config.plugin_memory_recycle_bytes()?,
        call_timeout: Duration::from_millis(config.plugin_call_timeout_ms()?),
        max_calls: u64::MAX,
    };
    let engine = build_engine(limits.memory_max)?;
    start_epoch_ticker(engine.clone())?;
    let loader = Loader::new(engine, &config.plugin_cache_dir(), limits)?;
    let authorizer = match loader.load_file(&module, &broker.plugins).await? {
        Loaded::Authorizer(authorizer) => Arc::new(authorizer),
        Loaded::Handler(_) => bail!("{} is a handler, not an authorizer", module.display()),
        Loaded::Interceptor(_) => {
            bail!("{} is an interceptor, not an authorizer", module.display())
        }
    };
    broker.authorization().set_active(Some(authorizer));

    let session = Session {
        connection_id: 0,
        client_host: "127.0.0.1".to_string(),
        listener: "SASL_PLAINTEXT".to_string(),
        security_protocol: "SASL_PLAINTEXT".to_string(),
        auth: ConnectionAuth::fixed("User:alice"),
    };
    // What Produce asks for one topic, then more topics.
    let actions: Vec<Action> = (0..action_count)
        .map(|i| Action {
            operation: if i % 2 == 0 {
                Operation::Write
            } else {
                Operation::Describe
            },
            resource_type: ResourceType::Topic,
            resource_name: format!("alice-orders-{}", i / 2),
        })
        .collect();
    let authorization = broker.authorization();
    let ask = || authorization.authorize(Some(&session), Some("bench"), actions.clone());
    for _ in 0..(iterations / 10).max(10) {
        authorization.clear_cache();
        ask().await;
    }
    let started = Instant::now();
    for _ in 0..iterations {
        authorization.clear_cache();
        std::hint::black_box(ask().await);
    }
    let cold_us = started.elapsed().as_secs_f64() * 1e6 / iterations as f64;
    ask().await;
    let warm_iterations = iterations * 10;
    let started = Instant::now();
    for _ in 0..warm_iterations {
        std::hint::black_box(ask().await);
    }
    let warm_us = started.elapsed().as_secs_f64() * 1e6 / warm_iterations as f64;
    let _ = std::fs::remove_dir_all(&data);
    let name = module
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    println!(
        "{{\"bench\":\"authorization\",\"module\":\"{name}\",\"actions_per_request\":{action_count},\"acls\":{acl_count},\"cold_us\":{cold_us:.2},\"warm_us\":{warm_us:.3}}}"
    );
    Ok(())
}
