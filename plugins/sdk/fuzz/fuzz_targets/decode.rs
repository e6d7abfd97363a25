//! Every request type a bundled handler decodes, at every version the
//! crate knows: the first byte picks the type, the second the version, the
//! rest is the body. The bounded decode must never abort (libFuzzer also
//! flags any single allocation over its malloc limit), and whatever it
//! accepts must equal the crate's own decoding.

#![no_main]

use std::sync::OnceLock;

use gregor_sdk::bounded::catalog::{apis, Api};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static APIS: OnceLock<Vec<Api>> = OnceLock::new();
    let apis = APIS.get_or_init(apis);
    let [selector, version, body @ ..] = data else {
        return;
    };
    let api = &apis[*selector as usize % apis.len()];
    let span = (api.max_version - api.min_version + 1) as u8;
    let version = api.min_version + i16::from(version % span);
    if let Err(error) = api.check(body, version) {
        panic!("{} v{version}: {error}", api.name);
    }
});
