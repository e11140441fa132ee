//! The global allocator of every Tessera binary (the CLI and server,
//! `cargo xtask`, benchmarks and examples), and the one setting it needs.
//!
//! mimalloc rather than glibc's malloc: the pipeline allocates and frees
//! many short-lived buffers, and glibc returns large ones to the kernel, so
//! every run paid again for zeroed pages.
//!
//! mimalloc itself hands freed pages back to the kernel ("purges" them) 10
//! ms after they fall free. A pipeline run on a large module takes longer
//! than that, so in a warm process (the HTTP service, a benchmark) each run
//! found the previous run's memory purged and paid for zeroed pages again.
//! Over 40 warm runs of the largest corpus module: 92,575 page faults with
//! the default, 1,607 with a one-second delay; over 60 runs with the
//! pipeline on a thread pool, about 3,500 with one second and 214 with ten
//! seconds, as many as with no purging at all. Ten seconds still returns
//! an idle service's memory.
//!
//! Use: `#[global_allocator] static ALLOCATOR: allocator::Allocator =
//! allocator::Allocator;` and call [`configure`] first thing in `main`.

/// The allocator to install with `#[global_allocator]`.
pub use mimalloc::MiMalloc as Allocator;

/// How long freed memory stays with the process before mimalloc returns
/// it to the kernel, in milliseconds.
pub const PURGE_DELAY_MS: i64 = 10_000;

// `mi_option_purge_delay` is option 15 in both mimalloc v2 and v3;
// libmimalloc-sys does not name it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Applies the settings above. Idempotent. Call it at the start of `main`,
/// before any thread is spawned. An explicit `MIMALLOC_PURGE_DELAY`
/// in the environment wins, so the setting can still be measured against.
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` takes an option number and a value and
    // writes one slot of mimalloc's option table. It is documented as not
    // thread safe, which is why it is called at the start of `main`,
    // before any thread is spawned.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS as _);
    }
}

/// The purge delay mimalloc is using now, in milliseconds.
pub fn purge_delay_ms() -> i64 {
    // SAFETY: as in `configure`; reading an option has no side effect.
    #[allow(unsafe_code)]
    let value = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
    value as i64
}

#[cfg(test)]
mod tests {
    #[test]
    fn configure_sets_the_purge_delay() {
        super::configure();
        let expected = match std::env::var("MIMALLOC_PURGE_DELAY") {
            Ok(v) => v.parse::<i64>().unwrap_or(super::PURGE_DELAY_MS),
            Err(_) => super::PURGE_DELAY_MS,
        };
        assert_eq!(super::purge_delay_ms(), expected);
    }
}
