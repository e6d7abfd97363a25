//! SaslHandshake v0's unframed exchange (pre-KIP-152), as Kafka's
//! SaslServerAuthenticator serves it: after a successful v0 handshake the
//! client sends each SASL token as a bare size-prefixed byte string, not
//! in a SaslAuthenticate request, and the server answers each with its
//! token the same way (an empty one for PLAIN) until the mechanism
//! completes. A failed step closes the connection without an answer, as
//! Kafka does for v0 (it has no error response to send). Then ordinary
//! requests follow.
//!
//! The connection loop calls this once the v0 handshake's response is
//! written, so the tokens are read in order with no request in flight.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::network::frame::FrameReader;
use crate::network::memory_pool::MemoryPool;
use crate::security::credentials::CredentialStore;
use crate::security::session::Session;

/// Kafka's `sasl.server.max.receive.size` default: the largest token a
/// client may send before it has authenticated.
const MAX_TOKEN_BYTES: usize = 512 * 1024;

/// How the exchange ended.
pub enum Outcome {
    Authenticated,
    /// The mechanism refused the client; the reason is for the log.
    Failed(String),
    ClientClosed,
    Violation(String),
    WriteFailed(std::io::Error),
}

/// Runs the unframed exchange to its end.
pub async fn exchange<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut W,
    session: &Session,
    credentials: &CredentialStore,
    pool: &Arc<MemoryPool>,
) -> Outcome
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    while session.auth.awaiting_token() {
        let token = match reader.read_token(MAX_TOKEN_BYTES, pool).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Outcome::ClientClosed,
            Err(error) => return Outcome::Violation(format!("unframed SASL token: {error}")),
        };
        let outcome = session.auth.authenticate(&token.bytes, credentials);
        if outcome.error_code != 0 {
            return Outcome::Failed(outcome.error_message.unwrap_or_default());
        }
        let Ok(size) = i32::try_from(outcome.token.len()) else {
            return Outcome::Violation("SASL token too large to send".to_string());
        };
        let mut frame = Vec::with_capacity(4 + outcome.token.len());
        frame.extend_from_slice(&size.to_be_bytes());
        frame.extend_from_slice(&outcome.token);
        let written = match writer.write_all(&frame).await {
            Ok(()) => writer.flush().await,
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            return Outcome::WriteFailed(error);
        }
    }
    Outcome::Authenticated
}
