//! The admin endpoint's authentication and authorization (`admin.auth`):
//! HTTP basic against the broker's SCRAM users, a bearer token from a
//! file, super users only for changes, public or authenticated reads,
//! refusals logged, and a secured broker refusing to start with an open
//! endpoint unless `admin.auth=none` says so. Driven over raw HTTP (what
//! the endpoint answers, status by status) and through the `gregor` CLI
//! (its credential options and exit codes).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use gregor_tests::{free_port, gregor_bin, plugin_dir, private_plugin_dir, workspace_root, Broker};
use serde_json::Value;

const USERS: &str = "admin:admin-secret,alice:alice-secret";

/// One HTTP/1.1 exchange on a fresh connection: status, head, body.
fn http(admin: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("transfer-encoding"))
    {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    exchange(admin, &[head.as_bytes(), body].concat())
}

fn exchange(admin: &str, request: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(admin).expect("connect to the admin endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    // The endpoint may answer (413) and close before the body is all sent.
    let _ = stream.write_all(request);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response: {text:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// The `gregor` CLI with `args` and extra environment: success, exit
/// code, stdout and stderr together.
fn gregor(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut command = Command::new(gregor_bin());
    command.args(args);
    for name in [
        "GREGOR_ADMIN",
        "GREGOR_ADMIN_USER",
        "GREGOR_ADMIN_PASSWORD",
        "GREGOR_ADMIN_TOKEN",
        "GREGOR_ADMIN_TOKEN_FILE",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    let output = command.output().expect("run gregor");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

fn example(name: &str) -> String {
    let dir = std::env::var_os("GREGOR_EXAMPLE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("build/examples"));
    let path = dir.join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} not built (make build)", path.display());
    path.display().to_string()
}

/// A broker with a SASL listener, the ACL authorizer, `User:admin` as
/// super user and the admin endpoint on basic authentication.
fn basic_broker(extra: &[(&str, &str)]) -> (Broker, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut settings = vec![
        ("sasl.bootstrap.users", USERS),
        ("authorizer", "authorizer_acl"),
        ("super.users", "User:admin"),
        ("admin.listener", admin.as_str()),
        ("admin.auth", "basic"),
    ];
    settings.extend_from_slice(extra);
    let broker = Broker::start_with_listeners(&["SASL_PLAINTEXT"], &settings);
    (broker, admin)
}

fn active_authorizer(admin: &str) -> Value {
    let answer = http(
        admin,
        "GET",
        "/authorizer",
        &[("Authorization", &basic("admin", "admin-secret"))],
        b"",
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["active"].clone()
}

/// `PUT /authorizer` (switching the authorizer off) without credentials
/// is 401 with a Basic challenge, with wrong ones 401, as a user who is
/// not a super user 403 — each logged with the principal and route, and
/// none changing anything — and as the super user it switches.
#[test]
fn put_authorizer_needs_a_super_user() {
    let (broker, admin) = basic_broker(&[]);
    let off = |headers: &[(&str, &str)]| http(&admin, "PUT", "/authorizer", headers, b"none");

    let anonymous = off(&[]);
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert!(
        anonymous
            .head
            .to_ascii_lowercase()
            .contains("www-authenticate: basic realm="),
        "{anonymous:?}"
    );
    assert_eq!(anonymous.json()["error"], "authentication required");

    let wrong = off(&[("Authorization", &basic("admin", "not-the-password"))]);
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let unknown = off(&[("Authorization", &basic("mallory", "admin-secret"))]);
    assert_eq!(unknown.status, 401, "{unknown:?}");
    let bearer = off(&[("Authorization", "Bearer some-token")]);
    assert_eq!(bearer.status, 401, "token auth is off: {bearer:?}");

    let alice = off(&[("Authorization", &basic("alice", "alice-secret"))]);
    assert_eq!(alice.status, 403, "{alice:?}");
    assert!(
        alice.json()["error"]
            .as_str()
            .unwrap_or_default()
            .contains("User:alice"),
        "{alice:?}"
    );
    assert_eq!(
        active_authorizer(&admin),
        "authorizer_acl",
        "nothing changed"
    );

    let log = broker.log_tail(400);
    let refused: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("admin request refused"))
        .collect();
    assert!(
        refused.iter().any(|line| line.contains("User:alice")
            && line.contains("/authorizer")
            && line.contains("403")),
        "{log}"
    );
    assert!(
        refused.iter().any(|line| line.contains("User:ANONYMOUS")
            && line.contains("PUT")
            && line.contains("401")),
        "{log}"
    );
    assert!(!log.contains("not-the-password"), "a password was logged");

    let switched = off(&[("Authorization", &basic("admin", "admin-secret"))]);
    assert_eq!(switched.status, 200, "{switched:?}");
    assert_eq!(active_authorizer(&admin), Value::Null);
}

/// Reads: authenticated by default (any valid user, not only super
/// users), `/health` always open; users and plugins changes are for super
/// users only; the CLI passes credentials from options or the
/// environment and exits 3 when refused.
#[test]
fn reads_and_changes_with_basic_credentials_and_the_cli() {
    let plugins = private_plugin_dir("gregor-admin-auth-");
    let plugin_path = plugins.path().display().to_string();
    let (_broker, admin) = basic_broker(&[("plugin.dir", plugin_path.as_str())]);

    assert_eq!(http(&admin, "GET", "/health", &[], b"").status, 200);
    assert_eq!(http(&admin, "GET", "/plugins", &[], b"").status, 401);
    assert_eq!(http(&admin, "GET", "/metrics", &[], b"").status, 401);
    let alice = basic("alice", "alice-secret");
    let listed = http(&admin, "GET", "/users", &[("Authorization", &alice)], b"");
    assert_eq!(listed.status, 200, "{listed:?}");
    assert_eq!(listed.json()["users"].as_array().map(Vec::len), Some(2));
    let scraped = http(&admin, "GET", "/metrics", &[("Authorization", &alice)], b"");
    assert_eq!(scraped.status, 200, "{scraped:?}");
    let add_bob = br#"{"password": "bob-secret"}"#;
    let refused = http(
        &admin,
        "PUT",
        "/users/bob",
        &[("Authorization", &alice)],
        add_bob,
    );
    assert_eq!(refused.status, 403, "{refused:?}");
    let refused = http(
        &admin,
        "DELETE",
        "/plugins/produce",
        &[("Authorization", &alice)],
        b"",
    );
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(plugins.path().join("produce.wasm").is_file());

    // The CLI: no credentials, then alice, then admin (option and env).
    let chaos = example("chaos");
    let load = ["plugins", "load", chaos.as_str(), "--admin", admin.as_str()];
    let (code, text) = gregor(&load, &[]);
    assert_eq!(code, 3, "{text}");
    assert!(
        text.contains("authentication required") && text.contains("401"),
        "{text}"
    );
    let (code, text) = gregor(
        &[&load[..], &["--user", "alice:alice-secret"]].concat(),
        &[],
    );
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("403"), "{text}");
    let (code, text) = gregor(
        &[
            &load[..],
            &["--user", "admin", "--admin-password", "admin-secret"],
        ]
        .concat(),
        &[],
    );
    assert_eq!(code, 0, "{text}");
    assert!(plugins.path().join("chaos.wasm").is_file());
    let env = [
        ("GREGOR_ADMIN", admin.as_str()),
        ("GREGOR_ADMIN_USER", "admin"),
        ("GREGOR_ADMIN_PASSWORD", "admin-secret"),
    ];
    let (code, text) = gregor(&["users", "add", "bob", "--password", "bob-secret"], &env);
    assert_eq!(code, 0, "{text}");
    let (code, text) = gregor(&["users", "list", "--output", "json"], &env);
    assert_eq!(code, 0, "{text}");
    let users: Value = serde_json::from_str(text.trim()).expect("users list --output json");
    assert_eq!(users["users"].as_array().map(Vec::len), Some(3), "{users}");
    let (code, text) = gregor(&["plugins", "list"], &env);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.lines()
            .next()
            .unwrap_or_default()
            .starts_with("HANDLER"),
        "{text}"
    );
    assert!(
        text.lines().any(|line| line.starts_with("chaos ")),
        "{text}"
    );
    // bob is a user now, not a super user.
    let (code, text) = gregor(
        &[
            "authorizer",
            "use",
            "none",
            "--admin",
            &admin,
            "--user",
            "bob:bob-secret",
        ],
        &[],
    );
    assert_eq!(code, 3, "{text}");
    let (code, text) = gregor(
        &[
            "authorizer",
            "show",
            "--admin",
            &admin,
            "--user",
            "bob:bob-secret",
        ],
        &[],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("active: authorizer_acl"), "{text}");
}

/// `admin.auth=token`: the bearer token in `admin.auth.token.file`, read
/// at each check (a rotated file takes effect at once); public reads with
/// `admin.auth.read=public`; uploads streamed (chunked) and bounded by
/// `admin.upload.max.bytes`.
#[test]
fn bearer_token_from_a_file_and_streamed_uploads() {
    let plugins = private_plugin_dir("gregor-admin-token-");
    let plugin_path = plugins.path().display().to_string();
    let secrets = tempfile::tempdir().expect("token dir");
    let token_file = secrets.path().join("admin.token");
    std::fs::write(&token_file, "first-token\n").expect("write the token");
    let token_path = token_file.display().to_string();
    let chaos = std::fs::read(example("chaos")).expect("read chaos.wasm");
    let limit = (chaos.len() + 1024).to_string();
    let admin = format!("127.0.0.1:{}", free_port());
    let _broker = Broker::start_with(&[
        ("plugin.dir", plugin_path.as_str()),
        ("admin.listener", admin.as_str()),
        ("admin.auth", "token"),
        ("admin.auth.token.file", token_path.as_str()),
        ("admin.auth.read", "public"),
        ("super.users", "User:admin"),
        ("admin.upload.max.bytes", limit.as_str()),
    ]);

    let listed = http(&admin, "GET", "/plugins", &[], b"");
    assert_eq!(listed.status, 200, "public reads: {listed:?}");
    let unload = |headers: &[(&str, &str)]| http(&admin, "DELETE", "/plugins/chaos", headers, b"");
    let anonymous = unload(&[]);
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert!(
        anonymous
            .head
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{anonymous:?}"
    );
    assert_eq!(
        unload(&[("Authorization", "Bearer wrong-token")]).status,
        401
    );
    // Wrong credentials are refused even where none are needed.
    let wrong_read = http(
        &admin,
        "GET",
        "/plugins",
        &[("Authorization", "Bearer wrong")],
        b"",
    );
    assert_eq!(wrong_read.status, 401, "{wrong_read:?}");

    // A chunked upload of a real module, in pieces.
    let mut request = format!(
        "PUT /plugins/chaos HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\
         Authorization: Bearer first-token\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for piece in chaos.chunks(64 * 1024) {
        request.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        request.extend_from_slice(piece);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    let uploaded = exchange(&admin, &request);
    assert_eq!(uploaded.status, 200, "{uploaded:?}");
    assert!(plugins.path().join("chaos.wasm").is_file());

    // Over the limit: declared, refused before the body; chunked, cut off.
    let big = vec![0u8; chaos.len() + 2048];
    let declared = exchange(
        &admin,
        format!(
            "PUT /plugins/big HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\
             Authorization: Bearer first-token\r\nContent-Length: {}\r\n\r\n",
            big.len()
        )
        .as_bytes(),
    );
    assert_eq!(
        declared.status, 413,
        "answered without the body: {declared:?}"
    );
    let mut chunked = format!(
        "PUT /plugins/big HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\
         Authorization: Bearer first-token\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for piece in big.chunks(4096) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(exchange(&admin, &chunked).status, 413);
    assert!(!plugins.path().join("big.wasm").exists());
    // Errors keep their JSON shape.
    let unknown = http(&admin, "GET", "/nowhere", &[], b"");
    assert_eq!(
        (unknown.status, unknown.json()["error"].clone()),
        (404, "no such endpoint".into())
    );
    let method = http(
        &admin,
        "POST",
        "/health",
        &[("Authorization", "Bearer first-token")],
        b"",
    );
    assert_eq!(method.status, 405, "{method:?}");

    // Rotation: the old token stops working at once, the new one works;
    // the CLI reads it from a file.
    std::fs::write(&token_file, "second-token").expect("rotate the token");
    assert_eq!(
        unload(&[("Authorization", "Bearer first-token")]).status,
        401
    );
    let (code, text) = gregor(
        &[
            "plugins",
            "unload",
            "chaos",
            "--admin",
            &admin,
            "--token-file",
            &token_path,
        ],
        &[],
    );
    assert_eq!(code, 0, "{text}");
    assert!(!plugins.path().join("chaos.wasm").exists());
    let (code, text) = gregor(
        &["plugins", "unload", "chaos", "--admin", &admin],
        &[("GREGOR_ADMIN_TOKEN", "first-token")],
    );
    assert_eq!(code, 3, "{text}");
}

/// Runs `gregor serve` expected to refuse its config: exit code and output.
fn refused_start(settings: &[(&str, &str)]) -> (i32, String) {
    let data = tempfile::tempdir().expect("data dir");
    let listeners = format!(
        "PLAINTEXT://127.0.0.1:{},SASL_PLAINTEXT://127.0.0.1:{}",
        free_port(),
        free_port()
    );
    let admin = format!("127.0.0.1:{}", free_port());
    let own = [
        ("listeners", listeners.as_str()),
        ("log.dirs", &data.path().display().to_string()),
        ("plugin.dir", &plugin_dir().display().to_string()),
        ("admin.listener", admin.as_str()),
    ]
    .map(|(k, v)| format!("{k}={v}"));
    let mut args = vec!["serve".to_string()];
    for pair in own
        .iter()
        .cloned()
        .chain(settings.iter().map(|(k, v)| format!("{k}={v}")))
    {
        args.push("--set".into());
        args.push(pair);
    }
    let mut child = Command::new(gregor_bin())
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn gregor serve");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("gregor serve {args:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !Path::new(&data.path().join("security")).exists(),
        "refused before opening storage"
    );
    (output.status.code().unwrap_or(-1), text)
}

/// With a SASL listener or an authorizer, an endpoint without
/// `admin.auth` is refused at start, naming the setting; bad values too;
/// `admin.auth=none` starts it open.
#[test]
fn an_open_endpoint_on_a_secured_broker_is_refused_at_start() {
    let (code, text) = refused_start(&[]);
    assert_ne!(code, 0);
    assert!(
        text.contains("listener SASL_PLAINTEXT uses SASL") && text.contains("admin.auth=none"),
        "{text}"
    );
    let plaintext_only = [("listeners", "PLAINTEXT://127.0.0.1:1")];
    let (code, text) = refused_start(&[plaintext_only[0], ("authorizer", "authorizer_acl")]);
    assert_ne!(code, 0);
    assert!(text.contains("an authorizer is configured"), "{text}");
    let (code, text) = refused_start(&[("admin.auth", "kerberos")]);
    assert_ne!(code, 0);
    assert!(text.contains("unknown mode \"kerberos\""), "{text}");
    let (code, text) = refused_start(&[("admin.auth", "token")]);
    assert_ne!(code, 0);
    assert!(text.contains("admin.auth.token.file"), "{text}");

    // Explicitly open: serves without credentials, as before.
    let admin = format!("127.0.0.1:{}", free_port());
    let _broker = Broker::start_with_listeners(
        &["SASL_PLAINTEXT"],
        &[
            ("sasl.bootstrap.users", USERS),
            ("authorizer", "authorizer_acl"),
            ("admin.listener", admin.as_str()),
            ("admin.auth", "none"),
        ],
    );
    let (code, text) = gregor(&["authorizer", "use", "none", "--admin", &admin], &[]);
    assert_eq!(code, 0, "{text}");
    let (code, text) = gregor(
        &["authorizer", "show", "--admin", &admin, "-o", "json"],
        &[],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("\"active\":null"), "{text}");
}
