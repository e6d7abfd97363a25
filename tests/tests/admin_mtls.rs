//! The admin endpoint over HTTPS with client certificates
//! (`admin.tls=true`, `admin.auth=tls`): the listeners' TLS settings
//! (`ssl.keystore.location`, `ssl.truststore.location`,
//! `ssl.client.auth`), the certificate's subject as the principal
//! (`User:CN=...,O=...` as on an SSL listener), and `super.users` named
//! by it. Driven with curl, a client independent of the broker's TLS
//! stack.

use std::process::Command;

use gregor_tests::certs::Certificates;
use gregor_tests::{free_port, Broker};

const ADMIN_PRINCIPAL: &str = "User:CN=admin-client,O=Gregor Tests";

/// `curl` over HTTPS trusting the test CA, with the client certificate
/// `client` if given: the HTTP status (0 when there was no HTTP answer,
/// as after a refused handshake) and the body.
fn curl(
    certs: &Certificates,
    admin: &str,
    client: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String) {
    let mut command = Command::new("curl");
    command
        .args(["--silent", "--show-error", "--max-time", "30"])
        .args(["--cacert", &certs.path("ca.pem")])
        .args(["--request", method])
        .args(["--write-out", "\n%{http_code}"]);
    if let Some(name) = client {
        command
            .args(["--cert", &certs.path(&format!("{name}.pem"))])
            .args(["--key", &certs.path(&format!("{name}.key"))]);
    }
    if let Some(body) = body {
        command.args(["--data-binary", body]);
    }
    let output = command
        .arg(format!("https://{admin}{path}"))
        .output()
        .expect("run curl (installed by .ci/deps.sh)");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

/// A client certificate to reach `/health` with, if any was made.
fn certs_client(certs: &Certificates) -> Option<&'static str> {
    std::path::Path::new(&certs.path("admin-client.pem"))
        .is_file()
        .then_some("admin-client")
}

/// A broker whose admin endpoint speaks HTTPS and takes certificates as
/// identities; `client_auth` is `ssl.client.auth`.
fn broker(certs: &Certificates, client_auth: &str) -> (Broker, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let keystore = certs.path("server.pem");
    let truststore = certs.path("ca.pem");
    let broker = Broker::start_with(&[
        ("admin.listener", admin.as_str()),
        ("admin.tls", "true"),
        ("admin.auth", "tls"),
        ("ssl.keystore.location", keystore.as_str()),
        ("ssl.truststore.location", truststore.as_str()),
        ("ssl.client.auth", client_auth),
        ("super.users", ADMIN_PRINCIPAL),
    ]);
    // The harness waits for the Kafka listener; the admin one may follow.
    let name = certs_client(certs);
    gregor_tests::wait_for(
        "the admin endpoint",
        std::time::Duration::from_secs(30),
        || (curl(certs, &admin, name, "GET", "/health", None).0 == 200).then_some(()),
    );
    (broker, admin)
}

#[test]
fn client_certificates_identify_admin_requests() {
    let certs = Certificates::generate_with(&["admin-client", "reader"]);
    let (broker, admin) = broker(&certs, "required");

    // The super user's certificate may change things.
    let (status, body) = curl(
        &certs,
        &admin,
        Some("admin-client"),
        "PUT",
        "/authorizer",
        Some("none"),
    );
    assert_eq!(status, 200, "{body}\n{}", broker.log_tail(20));
    assert!(body.contains("no authorizer active"), "{body}");

    // Another certificate of the same CA may read, not change.
    let (status, body) = curl(&certs, &admin, Some("reader"), "GET", "/plugins", None);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"handlers\""), "{body}");
    let (status, body) = curl(
        &certs,
        &admin,
        Some("reader"),
        "PUT",
        "/authorizer",
        Some("none"),
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("User:CN=reader,O=Gregor Tests is not a super user"),
        "{body}"
    );
    assert!(
        broker
            .log_tail(50)
            .contains("principal=User:CN=reader,O=Gregor Tests"),
        "the refusal is logged with the certificate's principal"
    );

    // Without a certificate there is no connection at all (required).
    let (status, _) = curl(&certs, &admin, None, "GET", "/plugins", None);
    assert_eq!(status, 0, "no HTTP answer without a client certificate");
    // Plain HTTP gets no answer either.
    let plain = Command::new("curl")
        .args([
            "--silent",
            "--max-time",
            "10",
            "--write-out",
            "%{http_code}",
        ])
        .arg(format!("http://{admin}/health"))
        .output()
        .expect("run curl");
    assert_eq!(String::from_utf8_lossy(&plain.stdout).trim(), "000");
}

#[test]
fn a_requested_certificate_is_optional_but_then_there_is_no_identity() {
    let certs = Certificates::generate_with(&["admin-client"]);
    let (_broker, admin) = broker(&certs, "requested");
    let (status, body) = curl(&certs, &admin, None, "GET", "/health", None);
    assert_eq!((status, body.trim()), (200, "ok"));
    let (status, body) = curl(&certs, &admin, None, "GET", "/plugins", None);
    assert_eq!(status, 401, "{body}");
    let (status, body) = curl(
        &certs,
        &admin,
        Some("admin-client"),
        "GET",
        "/authorizer",
        None,
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn tls_identities_need_client_certificates() {
    let certs = Certificates::generate_with(&[]);
    let admin = format!("127.0.0.1:{}", free_port());
    let keystore = certs.path("server.pem");
    let output = Command::new(gregor_tests::gregor_bin())
        .args(["serve", "--set", "listeners=PLAINTEXT://127.0.0.1:0"])
        .args(["--set", &format!("admin.listener={admin}")])
        .args(["--set", "admin.tls=true", "--set", "admin.auth=tls"])
        .args(["--set", &format!("ssl.keystore.location={keystore}")])
        .args(["--set", "log.dirs=/nonexistent/never-created"])
        .output()
        .expect("run gregor serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("admin.auth=tls needs client certificates"),
        "{stderr}"
    );
}
