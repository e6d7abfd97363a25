//! TLS for SSL and SASL_SSL listeners, with rustls (ring provider).
//!
//! The server's certificate chain and key come from PEM files (see
//! `security::settings`), read once when the listener is bound, so a bad
//! file fails the start rather than every handshake. With
//! `ssl.client.auth=required` a client must present a certificate that
//! chains to the truststore; with `requested` it may. The principal of an
//! SSL connection is then `User:` and the certificate's subject as an
//! RFC 2253 distinguished name (`User:CN=client,O=Example,C=US`), which
//! is what Kafka's default principal builder produces; without a client
//! certificate it is `User:ANONYMOUS`. On SASL_SSL the SASL exchange
//! decides the principal, as in Kafka.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::security::settings::{ClientAuth, TlsSettings};

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds a listener's TLS acceptor from its settings.
pub fn acceptor(settings: &TlsSettings) -> Result<TlsAcceptor> {
    let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&settings.certificates)
            .with_context(|| format!("reading {}", settings.certificates.display()))?
            .collect::<Result<_, _>>()
            .with_context(|| {
                format!(
                    "parsing certificates in {}",
                    settings.certificates.display()
                )
            })?;
    if certificates.is_empty() {
        anyhow::bail!("no certificate in {}", settings.certificates.display());
    }
    let key = PrivateKeyDer::from_pem_file(&settings.key)
        .with_context(|| format!("reading the private key in {}", settings.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match (settings.client_auth, &settings.truststore) {
        (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (client_auth, Some(truststore)) => {
            let mut roots = RootCertStore::empty();
            for certificate in CertificateDer::pem_file_iter(truststore)
                .with_context(|| format!("reading {}", truststore.display()))?
            {
                let certificate =
                    certificate.with_context(|| format!("parsing {}", truststore.display()))?;
                roots
                    .add(certificate)
                    .with_context(|| format!("adding a CA of {}", truststore.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if client_auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().context("client verifier")?)
        }
    };
    let config = builder
        .with_single_cert(certificates, key)
        .context("the certificate does not match the key")?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Runs the server side of the handshake; returns the stream and the
/// client certificate's principal, if the client presented one.
pub async fn accept(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
) -> Result<(TlsStream<TcpStream>, Option<String>)> {
    let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
        .await
        .context("TLS handshake timed out")?
        .context("TLS handshake failed")?;
    let principal = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|certificate| subject_principal(certificate.as_ref()));
    Ok((stream, principal))
}

/// `User:` + the certificate subject as an RFC 2253 name.
fn subject_principal(der: &[u8]) -> Option<String> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(format!("User:{}", rfc2253(certificate.subject())))
}

/// RFC 2253: the RDNs in reverse order, `,`-separated, multi-valued RDNs
/// joined by `+`, the keywords Java's X500Principal knows, other types as
/// dotted OIDs, and special characters escaped.
fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|attribute| {
                    let oid = attribute.attr_type().to_id_string();
                    let key = match oid.as_str() {
                        "2.5.4.3" => "CN",
                        "2.5.4.6" => "C",
                        "2.5.4.7" => "L",
                        "2.5.4.8" => "ST",
                        "2.5.4.9" => "STREET",
                        "2.5.4.10" => "O",
                        "2.5.4.11" => "OU",
                        "0.9.2342.19200300.100.1.25" => "DC",
                        "0.9.2342.19200300.100.1.1" => "UID",
                        other => other,
                    }
                    .to_string();
                    let value = attribute.as_str().unwrap_or_default();
                    format!("{key}={}", escape(value))
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_rfc2253() {
        assert_eq!(escape("a,b"), "a\\,b");
        assert_eq!(escape("#x "), "\\#x\\ ");
        assert_eq!(escape("plain"), "plain");
    }
}
