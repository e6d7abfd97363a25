//! Checks every handler's tests share: its responses, and the error
//! response `failed` builds, encode for every version it serves
//! ([`crate::served_versions_test!`] writes that test for a crate).

use crate::fake::context;
use crate::handler::{encode_response, Handler};
use crate::response::KafkaResponse;

/// Kafka's UNKNOWN_SERVER_ERROR, what the host answers a trapped handler with.
const UNKNOWN_SERVER_ERROR: i16 = -1;

/// Asserts, for every version `H` serves (not refused before decoding;
/// old ones rewritten, see [`crate::legacy`]), that each of `responses` encodes
/// and that `H::failed` for the empty request and for each of `requests`
/// encodes; for the given requests the failure must also carry the error.
pub fn assert_encodes_for_served_versions<H>(requests: &[H::Request], responses: &[H::Response])
where
    H: Handler,
    H::Request: Default,
{
    for version in H::MIN_VERSION..=H::MAX_VERSION {
        let ctx = context::<H>(version);
        if H::before_decode(&ctx).is_some() {
            // Advertised, not served (Produce v0-2): nothing is encoded.
            continue;
        }
        for (i, response) in responses.iter().enumerate() {
            if encode_response::<H>(&ctx, response).is_none() {
                panic!("response {i} does not encode for v{version}");
            }
        }
        let empty = H::failed(&ctx, &H::Request::default(), UNKNOWN_SERVER_ERROR);
        if encode_response::<H>(&ctx, &empty).is_none() {
            panic!("the error response to an empty request does not encode for v{version}");
        }
        for (i, request) in requests.iter().enumerate() {
            let failed = H::failed(&ctx, request, UNKNOWN_SERVER_ERROR);
            if encode_response::<H>(&ctx, &failed).is_none() {
                panic!("the error response to request {i} does not encode for v{version}");
            }
            assert!(
                failed.error_codes().contains(&UNKNOWN_SERVER_ERROR),
                "the error response to request {i} does not carry the error (v{version})"
            );
        }
    }
}
