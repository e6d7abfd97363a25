//! Passthrough: an interceptor that hands every request and response on
//! unchanged, without decoding them. What it costs is the fixed price of
//! one interceptor in a chain (an instance from the pool, the bodies
//! copied into the guest and back, two calls per request), measured by
//! `make bench-interceptors` (BENCHMARKS.md, "Interceptors"). It wraps
//! every standard ApiKey, so `plugin.interceptors.<api>=passthrough` works
//! for any of them; it needs no grants.

use gregor_intercept::Interceptor;

struct Passthrough;

/// The standard ApiKeys, 0 to 75.
const ALL: [i16; 76] = {
    let mut keys = [0i16; 76];
    let mut key = 0;
    while key < keys.len() {
        keys[key] = key as i16;
        key += 1;
    }
    keys
};

/// Both hooks keep the trait's defaults: pass everything on as it came.
impl Interceptor for Passthrough {
    const NAME: &'static str = "passthrough";
    const API_KEYS: &'static [i16] = &ALL;
}

gregor_intercept::export_interceptor!(Passthrough);
