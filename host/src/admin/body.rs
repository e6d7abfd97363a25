//! Request bodies read as they stream in, never past a limit: a declared
//! `Content-Length` over it is refused before a byte is read, and a
//! chunked body is cut off at the first chunk that crosses it. What is
//! kept is at most the limit (the plugin loader compiles from memory).

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use futures_util::StreamExt;

use super::routes::error_reply;

/// The body, or the error answer: 411 when `length_required` and the
/// request says neither `Content-Length` nor chunked, 413 past `max`,
/// 400 when it breaks off.
pub async fn read_body(
    headers: &HeaderMap,
    body: Body,
    max: usize,
    length_required: bool,
) -> Result<Vec<u8>, Response> {
    let too_large = || {
        error_reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("body too large (the limit is {max} bytes)"),
        )
    };
    let declared = match headers.get(header::CONTENT_LENGTH) {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .ok_or_else(|| error_reply(StatusCode::BAD_REQUEST, "invalid Content-Length"))?,
        ),
        None => None,
    };
    if declared.is_some_and(|length| length > max as u64) {
        return Err(too_large());
    }
    if length_required && declared.is_none() && !headers.contains_key(header::TRANSFER_ENCODING) {
        return Err(error_reply(
            StatusCode::LENGTH_REQUIRED,
            "Content-Length required",
        ));
    }
    let capacity = declared.map_or(0, |length| length as usize);
    let mut bytes = Vec::with_capacity(capacity);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| {
            error_reply(StatusCode::BAD_REQUEST, &format!("truncated body: {error}"))
        })?;
        if bytes.len() + chunk.len() > max {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}
