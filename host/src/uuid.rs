//! Kafka UUIDs (topic ids, client instance ids) as the host holds them:
//! one `u128`, its high half first, the way Kafka's `Uuid` keeps
//! `mostSignificantBits` and `leastSignificantBits`. The WIT contract
//! carries the two halves; responses and logs show the text form.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// The id made of Kafka's two halves.
pub fn from_halves(high: u64, low: u64) -> u128 {
    (u128::from(high) << 64) | u128::from(low)
}

/// Kafka's two halves of `id`: (most, least significant).
pub fn halves(id: u128) -> (u64, u64) {
    ((id >> 64) as u64, id as u64)
}

/// Kafka's UUID text form: URL-safe base64 of the 16 bytes.
pub fn to_text(id: u128) -> String {
    URL_SAFE_NO_PAD.encode(id.to_be_bytes())
}

/// Sixteen random bytes for a new id. Should the system's source fail,
/// the clock stands in: callers need uniqueness, not secrecy, and check
/// the ids they keep.
pub fn random_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(2);
        bytes = nanos.to_be_bytes();
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_and_text_are_kafkas() {
        let id = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128;
        assert_eq!(halves(id), (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210));
        assert_eq!(
            from_halves(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210),
            id
        );
        assert_eq!(to_text(0), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_ne!(random_bytes(), random_bytes());
    }
}
