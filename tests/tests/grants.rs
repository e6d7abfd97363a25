//! Least privilege (PLUGINS.md, "Grants"): a handler module loads only when
//! its grants cover every host function it imports; the refusal names what
//! is missing; grants come from the standard table, the start-up config or
//! the dynamic broker config (AlterConfigs), and a revoked grant takes
//! effect at the module's next load, hot reload included.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gregor_tests::kafka::{self, Isolation};
use gregor_tests::wire::{request_frame, Conn, Reader};
use gregor_tests::{run_python, wait_for, Broker};
use serde_json::Value;

const TOPIC_SUMMARY_KEY: i16 = 1000;
const PROVISION_KEY: i16 = 1001;

fn example(name: &str) -> PathBuf {
    gregor_tests::example_module(name)
}

/// A broker on a private copy of the standard modules, with an admin
/// listener: the directory, the broker, the admin address.
fn start_private(settings: &[(&str, &str)]) -> (tempfile::TempDir, Broker, String) {
    let plugins = gregor_tests::private_plugin_dir("gregor-grants-");
    let plugin_path = plugins.path().display().to_string();
    let mut all = vec![("plugin.dir", plugin_path.as_str())];
    all.extend_from_slice(settings);
    let (broker, admin) = gregor_tests::start_with_admin(&all);
    (plugins, broker, admin)
}

fn cli(admin: &str, args: &[&str]) -> (bool, String) {
    gregor_tests::gregor_cli(&[&["plugins"], args].concat(), admin)
}

fn plugin_list(admin: &str) -> Value {
    let (ok, text) = cli(admin, &["list", "--output", "json"]);
    assert!(ok, "gregor plugins list failed: {text}");
    let json = text.lines().next().unwrap_or_default();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("plugins list is not JSON ({e}): {text}"))
}

fn entry(list: &Value, kind: &str, name: &str) -> Option<Value> {
    list[kind]
        .as_array()?
        .iter()
        .find(|module| module["name"] == name)
        .cloned()
}

fn names(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn served(broker: &Broker, key: i16) -> bool {
    Conn::connect(broker.addr())
        .api_versions(1)
        .apis
        .iter()
        .any(|api| api.api_key == key)
}

/// The dynamic broker config through a real AdminClient.
fn admin_script(broker: &Broker, args: &[&str]) -> String {
    let bootstrap = broker.bootstrap();
    let mut all = vec!["--bootstrap", bootstrap.as_str()];
    all.extend_from_slice(args);
    run_python("grants_admin.py", &all).0
}

fn string(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as i16).to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// One ProvisionReader call: (acl error, append error, base offset).
fn provision(broker: &Broker, topic: &str, principal: &str) -> (i16, i16, i64) {
    let mut body = Vec::new();
    string(&mut body, topic);
    string(&mut body, principal);
    let mut conn = Conn::connect(broker.addr());
    let payload = conn.round_trip(&request_frame(PROVISION_KEY, 0, 7, false, &body), 7);
    let mut reader = Reader::new(&payload[4..]);
    assert_eq!(reader.i32(), 0, "throttle time");
    (reader.i16(), reader.i16(), reader.i64())
}

/// Puts a module in place as the docs ask (write aside, rename), with a
/// custom section naming `n` so each version is a different file.
fn install_variant(module: &Path, dir: &Path, name: &str, n: u8) {
    let mut bytes = std::fs::read(module).expect("read the module");
    let section_name = b"gregor-grants-test";
    bytes.extend_from_slice(&[0, section_name.len() as u8 + 2, section_name.len() as u8]);
    bytes.extend_from_slice(section_name);
    bytes.push(n);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, &bytes).expect("write the module");
    std::fs::rename(&tmp, dir.join(format!("{name}.wasm"))).expect("rename it into place");
}

fn refusal(list: &Value, file_suffix: &str) -> Option<String> {
    list["refused"].as_array()?.iter().find_map(|refused| {
        refused["file"]
            .as_str()
            .is_some_and(|file| file.ends_with(file_suffix))
            .then(|| refused["reason"].as_str().unwrap_or_default().to_string())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_writing_records_and_acls_loads_only_once_granted_both() {
    let (_plugins, broker, admin) = start_private(&[]);

    // Every standard module loaded with its standard grants, and the list
    // shows them: ListGroups has groups.read and authz, nothing of log.
    let list = plugin_list(&admin);
    assert_eq!(list["refused"], serde_json::json!([]), "{list}");
    let list_groups = entry(&list, "handlers", "list_groups").expect("list_groups listed");
    assert_eq!(list_groups["grants"]["origin"], "standard", "{list_groups}");
    assert_eq!(
        names(&list_groups["grants"]["granted"]),
        ["authz", "groups.read"]
    );
    let used = names(&list_groups["grants"]["used"]);
    assert!(
        // log.records (the record-set methods) is every module's baseline.
        used.contains(&"groups.read".to_string())
            && !used
                .iter()
                .any(|u| u.starts_with("log.") && u != "log.records"),
        "{used:?}"
    );
    let produce = entry(&list, "handlers", "produce").expect("produce listed");
    assert!(names(&produce["grants"]["granted"]).contains(&"log.append".to_string()));
    let authorizer = entry(&list, "authorizers", "authorizer_acl").expect("authorizer listed");
    assert_eq!(
        authorizer["grants"]["origin"], "authorizer-world",
        "{authorizer}"
    );

    // Nothing granted: refused, naming each missing grant, and not served.
    let module = example("provision_reader").display().to_string();
    let (ok, text) = cli(&admin, &["load", &module]);
    assert!(!ok, "an ungranted writer loaded: {text}");
    assert!(
        text.contains(
            "module provision_reader is not granted acl-admin.write, authz, log.append ("
        ) && text.contains("acl-admin.create-acls")
            && text.contains("log.append"),
        "{text}"
    );
    assert!(!served(&broker, PROVISION_KEY));

    // Records but not ACLs: refused, naming only the ACL grant.
    admin_script(&broker, &["grant", "provision_reader", "authz,log.append"]);
    let (ok, text) = cli(&admin, &["load", &module]);
    assert!(!ok, "a writer without acl-admin.write loaded: {text}");
    assert!(
        text.contains("is not granted acl-admin.write (") && !text.contains("not granted authz"),
        "{text}"
    );

    // Both: loads, and does what it is for.
    admin_script(
        &broker,
        &[
            "grant",
            "provision_reader",
            "authz,log.append,acl-admin.write",
        ],
    );
    let (ok, text) = cli(&admin, &["load", &module]);
    assert!(ok, "a granted writer was refused: {text}");
    let listed = entry(&plugin_list(&admin), "handlers", "provision_reader").expect("listed");
    assert_eq!(listed["grants"]["origin"], "dynamic-broker", "{listed}");
    assert_eq!(
        names(&listed["grants"]["granted"]),
        ["acl-admin.write", "authz", "log.append"]
    );
    kafka::create_topic(&broker, "provisioned", 1).await;
    assert_eq!(provision(&broker, "provisioned", "User:alice"), (0, 0, 0));
    let values = kafka::read_values(
        &broker,
        "provisioned",
        1,
        Isolation::ReadUncommitted,
        1,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(values[&0], ["READ granted to User:alice"]);
    let acls = admin_script(&broker, &["acls", "provisioned"]);
    let acls: Value = serde_json::from_str(acls.trim()).expect("acls JSON");
    assert_eq!(
        acls,
        serde_json::json!([{"principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}])
    );

    // Revoking ACL writes changes nothing until the module's next load...
    admin_script(&broker, &["revoke", "provision_reader", "acl-admin.write"]);
    assert_eq!(provision(&broker, "provisioned", "User:bob"), (0, 0, 1));
    // ... which is refused and takes the loaded version out of service.
    let (ok, text) = cli(&admin, &["load", &module]);
    assert!(!ok, "a reload without acl-admin.write was accepted: {text}");
    assert!(
        text.contains("is not granted acl-admin.write (")
            && text.contains(
                "the loaded version is unloaded: it is no longer granted acl-admin.write"
            ),
        "{text}"
    );
    assert!(!served(&broker, PROVISION_KEY));
    assert!(entry(&plugin_list(&admin), "handlers", "provision_reader").is_none());

    // A module named as a standard one gets that ApiKey's grants only to
    // serve that ApiKey: chaos (log.read) under ListOffsets' name is refused.
    let chaos = example("chaos").display().to_string();
    let (ok, text) = cli(&admin, &["load", &chaos, "--name", "list_offsets"]);
    assert!(!ok, "chaos loaded as list_offsets: {text}");
    assert!(
        text.contains("has the standard grants of ApiKey 2 but describes ApiKey 1099"),
        "{text}"
    );
    assert!(served(&broker, 2), "ListOffsets still served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_the_examples_grant_takes_effect_at_its_next_hot_reload() {
    // The harness grants topic_summary what it uses in the start-up config.
    let (plugins, broker, admin) = start_private(&[]);
    let module = example("topic_summary");
    install_variant(&module, plugins.path(), "topic_summary", 1);
    wait_for("topic_summary to load", Duration::from_secs(30), || {
        served(&broker, TOPIC_SUMMARY_KEY).then_some(())
    });
    let listed = entry(&plugin_list(&admin), "handlers", "topic_summary").expect("listed");
    assert_eq!(listed["grants"]["origin"], "config", "{listed}");
    assert_eq!(
        names(&listed["grants"]["used"]),
        ["authz", "log.read", "logging", "metadata.read"]
    );

    // A dynamic value wins over the start-up one; without log.read the
    // running version keeps serving until the file changes.
    admin_script(&broker, &["grant", "topic_summary", "authz,metadata.read"]);
    assert!(served(&broker, TOPIC_SUMMARY_KEY));
    install_variant(&module, plugins.path(), "topic_summary", 2);
    let reason = wait_for("the reload to be refused", Duration::from_secs(30), || {
        refusal(&plugin_list(&admin), "topic_summary.wasm")
    });
    assert!(
        reason.contains(
            "module topic_summary is not granted log.read (log.read for log.list-offset)"
        ) && reason.contains("dynamic config of this broker"),
        "{reason}"
    );
    wait_for(
        "ApiKey 1000 to leave ApiVersions",
        Duration::from_secs(30),
        || (!served(&broker, TOPIC_SUMMARY_KEY)).then_some(()),
    );

    // Granting it again: the next reload serves again.
    admin_script(
        &broker,
        &["grant", "topic_summary", "authz,log.read,metadata.read"],
    );
    install_variant(&module, plugins.path(), "topic_summary", 3);
    wait_for(
        "topic_summary to load again",
        Duration::from_secs(30),
        || served(&broker, TOPIC_SUMMARY_KEY).then_some(()),
    );
    assert!(refusal(&plugin_list(&admin), "topic_summary.wasm").is_none());
}

#[test]
fn an_example_with_no_grants_is_refused_at_start_and_bad_grants_stop_the_broker() {
    let plugins = gregor_tests::plugin_dir_with_examples(&["topic_summary"]);
    let plugin_path = plugins.path().display().to_string();
    let (broker, admin) = gregor_tests::start_with_admin(&[
        ("plugin.dir", plugin_path.as_str()),
        ("plugin.grants.topic_summary", ""),
    ]);
    let reason = refusal(&plugin_list(&admin), "topic_summary.wasm").expect("refused at start");
    assert!(
        reason.contains("module topic_summary is not granted authz, log.read, metadata.read (")
            && reason.contains("plugin.grants.topic_summary=authz,log.read,metadata.read"),
        "{reason}"
    );
    assert!(!served(&broker, TOPIC_SUMMARY_KEY));
    drop(broker);

    // Refused before anything starts (no port is bound), so it exits.
    let data = tempfile::tempdir().expect("data dir");
    let mut child = std::process::Command::new(gregor_tests::gregor_bin())
        .args([
            "serve",
            "--set",
            "plugin.grants.topic_summary=log.read,log.write",
        ])
        .args(["--set", &format!("log.dirs={}", data.path().display())])
        .args([
            "--set",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--set",
            "admin.listener=",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run gregor");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = child.try_wait().expect("poll gregor") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("gregor started with an unknown grant");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!exited.success(), "started with an unknown grant");
    let output = child.wait_with_output().expect("its output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("plugin.grants.topic_summary: unknown plugin grant \"log.write\""),
        "{text}"
    );
}
