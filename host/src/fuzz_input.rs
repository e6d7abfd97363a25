//! Seeded mutation fuzzing of the host's parsers of client bytes (the
//! tests are `network::fuzz`: framing and the request header; and
//! `log::fuzz`: record batches and decompression). Each parser must
//! return an error, never panic or allocate from a declared size, on any
//! input.
//!
//! The host is a binary crate (no library for a cargo-fuzz target to link),
//! so these run as its unit tests: a few thousand inputs per parser in
//! `make test`; `make fuzz` runs them with `GREGOR_FUZZ_ITERATIONS` (e.g. a
//! million) for a longer search.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const SEED: u64 = 0x686f_7374;

fn iterations(default: usize) -> usize {
    std::env::var("GREGOR_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Bit flips, truncation, huge lengths (INT32 and varint), small counts
/// and random tails, one to three at a time.
pub fn mutate(rng: &mut SmallRng, base: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    for _ in 0..rng.random_range(1..4) {
        let at = if out.is_empty() {
            0
        } else {
            rng.random_range(0..out.len())
        };
        match rng.random_range(0..7) {
            0 if !out.is_empty() => out[at] ^= 1 << rng.random_range(0..8),
            1 => out.truncate(at),
            2 => splice(&mut out, at, &[0x7f, 0xff, 0xff, rng.random()]),
            3 => splice(&mut out, at, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
            4 => splice(&mut out, at, &[0, 0, 0, rng.random_range(1..4)]),
            5 => {
                let tail: Vec<u8> = (0..rng.random_range(1..32)).map(|_| rng.random()).collect();
                out.extend_from_slice(&tail);
            }
            _ => out.insert(at.min(out.len()), rng.random()),
        }
    }
    out
}

fn splice(out: &mut Vec<u8>, at: usize, with: &[u8]) {
    let at = at.min(out.len());
    let end = (at + with.len()).min(out.len());
    out.splice(at..end, with.iter().copied());
}

/// Runs `check` on `iterations` mutations of the seeds (inputs that pass
/// the check whole are kept as further seeds).
pub fn run(
    name: &str,
    seeds: Vec<Vec<u8>>,
    default_iterations: usize,
    mut check: impl FnMut(&[u8]) -> bool,
) {
    let mut rng = SmallRng::seed_from_u64(SEED ^ name.len() as u64);
    let mut corpus = seeds;
    let mut accepted = 0usize;
    let total = iterations(default_iterations);
    for _ in 0..total {
        let base = &corpus[rng.random_range(0..corpus.len())];
        let input = mutate(&mut rng, base);
        if check(&input) {
            accepted += 1;
            if corpus.len() < 64 {
                corpus.push(input);
            }
        }
    }
    eprintln!("{name}: {total} inputs, {accepted} accepted, no panic");
}
