//! One blocking connection of the command line's Kafka client to one
//! broker: TCP, TLS when asked, ApiVersions first (so each request goes at
//! the highest version both sides speak, and the tool works against Kafka
//! as well as Gregor), then a SASL login when configured (SaslHandshake v1,
//! SaslAuthenticate until the mechanism is done, as Kafka's clients do).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::{ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request, StrBytes};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls_pki_types::pem::PemObject;

use crate::kafka_wire::{decode_response, encode_request};
use crate::security::sasl_client::{SaslClient, SaslCredentials};

/// How long connecting and each answer may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer accepted (a fetch is asked for less).
const MAX_RESPONSE: usize = 256 << 20;

/// How to reach and log in to brokers.
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// TLS, trusting the PEM certificates of this file (None: no TLS).
    pub tls_ca: Option<std::path::PathBuf>,
    pub sasl: Option<SaslCredentials>,
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

pub struct Connection {
    address: String,
    stream: Box<dyn Stream>,
    /// What the broker serves: (api key, min, max).
    versions: Vec<(i16, i16, i16)>,
    correlation_id: i32,
}

impl Connection {
    pub fn open(address: &str, security: &Security) -> Result<Connection> {
        let tcp = connect(address)?;
        let stream: Box<dyn Stream> = match &security.tls_ca {
            None => Box::new(tcp),
            Some(ca) => Box::new(tls(address, tcp, ca)?),
        };
        let mut connection = Connection {
            address: address.to_string(),
            stream,
            versions: Vec::new(),
            correlation_id: 0,
        };
        connection.negotiate()?;
        if let Some(login) = &security.sasl {
            connection.login(login.clone())?;
        }
        Ok(connection)
    }

    /// The highest version of `R` both sides speak.
    pub fn version_of<R: Request + Message>(&self) -> Result<i16> {
        let (_, min, max) = self
            .versions
            .iter()
            .find(|(key, _, _)| *key == R::KEY)
            .copied()
            .ok_or_else(|| anyhow!("{} does not serve API key {}", self.address, R::KEY))?;
        let version = max.min(R::VERSIONS.max);
        if version < min.max(R::VERSIONS.min) {
            bail!(
                "{} serves API key {} at versions {min}-{max}, this tool {}-{}",
                self.address,
                R::KEY,
                R::VERSIONS.min,
                R::VERSIONS.max
            );
        }
        Ok(version)
    }

    /// Sends `request` at the negotiated version, at most `cap` (the
    /// version whose fields the caller fills in); the answer.
    pub fn send<R>(&mut self, request: &R, cap: i16) -> Result<R::Response>
    where
        R: Request + Message + Encodable + HeaderVersion,
        R::Response: Decodable + HeaderVersion,
    {
        let version = self.version_of::<R>()?.min(cap);
        self.send_at(request, version)
    }

    /// Sends `request` at `version`; the answer.
    pub fn send_at<R>(&mut self, request: &R, version: i16) -> Result<R::Response>
    where
        R: Request + Encodable + HeaderVersion,
        R::Response: Decodable + HeaderVersion,
    {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let frame = encode_request(request, version, correlation_id, "gregor-cli")
            .map_err(|e| anyhow!(e))?;
        let address = &self.address;
        self.stream
            .write_all(&frame)
            .and_then(|()| self.stream.flush())
            .with_context(|| format!("sending to {address}"))?;
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .with_context(|| format!("reading from {address} (it closed the connection?)"))?;
        let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(usize::MAX);
        if size > MAX_RESPONSE {
            bail!("{address} sent a {size}-byte response");
        }
        let mut body = vec![0u8; size];
        self.stream
            .read_exact(&mut body)
            .with_context(|| format!("reading from {address}"))?;
        decode_response::<R>(Bytes::from(body), version, correlation_id)
            .map_err(|e| anyhow!("{address}: {e}"))
    }

    /// Sends `request` without waiting for an answer (Produce with acks
    /// 0, which the broker does not answer).
    pub fn send_no_answer<R>(&mut self, request: &R, cap: i16) -> Result<()>
    where
        R: Request + Message + Encodable + HeaderVersion,
    {
        let version = self.version_of::<R>()?.min(cap);
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let frame = encode_request(request, version, self.correlation_id, "gregor-cli")
            .map_err(|e| anyhow!(e))?;
        self.stream
            .write_all(&frame)
            .and_then(|()| self.stream.flush())
            .with_context(|| format!("sending to {}", self.address))
    }

    /// ApiVersions v3, or v0 when the broker is older (it answers
    /// UNSUPPORTED_VERSION with its own range, as KIP-511 says).
    fn negotiate(&mut self) -> Result<()> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("gregor-cli"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut answer = self.send_at(&request, 3)?;
        if answer.error_code == 35 {
            answer = self.send_at(&request, 0)?;
        }
        if answer.error_code != 0 {
            bail!(
                "{} refused ApiVersions: {}",
                self.address,
                super::error_name(answer.error_code)
            );
        }
        self.versions = answer
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        Ok(())
    }

    fn login(&mut self, login: SaslCredentials) -> Result<()> {
        let mut client = SaslClient::new(login);
        let mechanism = StrBytes::from_string(client.mechanism().to_string());
        let answer = self.send_at(
            &SaslHandshakeRequest::default().with_mechanism(mechanism),
            1,
        )?;
        if answer.error_code != 0 {
            let enabled: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            bail!(
                "{} refused SASL mechanism {} ({}; it enables {enabled:?})",
                self.address,
                client.mechanism(),
                super::error_name(answer.error_code)
            );
        }
        let mut server = Bytes::new();
        while let Some(token) = client.step(&server).map_err(|e| anyhow!(e))? {
            let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
            let answer = self.send_at(&request, 2)?;
            if answer.error_code != 0 {
                bail!(
                    "{} refused the login: {} {}",
                    self.address,
                    super::error_name(answer.error_code),
                    answer.error_message.as_deref().unwrap_or_default()
                );
            }
            server = answer.auth_bytes;
        }
        Ok(())
    }
}

fn connect(address: &str) -> Result<TcpStream> {
    use std::net::ToSocketAddrs;
    let mut last = None;
    for socket in address
        .to_socket_addrs()
        .with_context(|| format!("resolving {address}"))?
    {
        match TcpStream::connect_timeout(&socket, TIMEOUT) {
            Ok(stream) => {
                stream.set_read_timeout(Some(TIMEOUT))?;
                stream.set_write_timeout(Some(TIMEOUT))?;
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => anyhow!("connecting to {address}: {e}"),
        None => anyhow!("{address} resolves to no address"),
    })
}

/// A TLS session over `tcp`, trusting the certificates in `ca` (PEM).
fn tls(
    address: &str,
    tcp: TcpStream,
    ca: &std::path::Path,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in
        CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {}", ca.display()))?
    {
        roots
            .add(certificate.with_context(|| format!("parsing {}", ca.display()))?)
            .with_context(|| format!("trusting a certificate of {}", ca.display()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let name = ServerName::try_from(host).with_context(|| format!("server name of {address}"))?;
    let session = rustls::ClientConnection::new(Arc::new(config), name)
        .with_context(|| format!("TLS towards {address}"))?;
    Ok(rustls::StreamOwned::new(session, tcp))
}
