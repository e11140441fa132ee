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
//! seconds, as many as with no purging at all.
//!
//! How long to keep freed memory depends on how long the process lives
//! ([`Lifetime`]):
//! - A service keeps it for ten seconds, which still returns an idle
//!   service's memory: `tessera serve` held 410 MB after a stateless run of
//!   a 1e5-instruction module and 54 MB twelve seconds later.
//! - A process that runs its jobs and exits keeps it until it exits: the
//!   kernel takes it back then, and until then a purge only makes the
//!   process fault in again memory it goes on to use. That happens once a
//!   run is longer than the delay. A cold `tessera run-pass --no-verify`
//!   of the 1e6-instruction `many_copies` module faulted 1,665 to 6,053
//!   times over five runs with ten seconds (wall 9.6 to 14.3 s) and 1,666
//!   to 1,691 times over five runs keeping its memory (9.4 to 10.8 s),
//!   with the same peak resident set. In a process that runs the
//!   pipeline again and again on such a module (the scaling benchmark),
//!   each run found the last one's memory purged: see
//!   `docs/performance.md`, "Scaling by module shape". Runs shorter than
//!   the delay (every corpus module, the 1e5 modules) do not change.
//!
//! Use: `#[global_allocator] static ALLOCATOR: allocator::Allocator =
//! allocator::Allocator;` and call [`configure`] early in `main`, before
//! any thread is spawned.

/// The allocator to install with `#[global_allocator]`.
pub use mimalloc::MiMalloc as Allocator;

/// How long the process lives, which decides how long freed memory stays
/// with it before mimalloc returns it to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// It runs its jobs and exits: a command, `cargo xtask`, an example, a
    /// benchmark of the stateless pipeline. Freed memory is kept until
    /// exit, since the process would only fault it in again.
    Batch,
    /// It stays up between jobs: `tessera serve`, and the benchmarks and
    /// load test that stand for it. Freed memory goes back after
    /// [`SERVICE_PURGE_DELAY_MS`], so an idle service gives back what its
    /// largest request took.
    Service,
}

impl Lifetime {
    /// mimalloc's purge delay for this lifetime, in milliseconds (-1:
    /// never purge).
    pub fn purge_delay_ms(self) -> i64 {
        match self {
            Lifetime::Batch => -1,
            Lifetime::Service => SERVICE_PURGE_DELAY_MS,
        }
    }
}

/// How long a service keeps freed memory before mimalloc returns it to the
/// kernel, in milliseconds.
pub const SERVICE_PURGE_DELAY_MS: i64 = 10_000;

// `mi_option_purge_delay` is option 15 in both mimalloc v2 and v3;
// libmimalloc-sys does not name it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Applies the settings above for a process of `lifetime`. Call it early
/// in `main`, before any thread is spawned. An explicit
/// `MIMALLOC_PURGE_DELAY` in the environment wins, so the setting can still
/// be measured against.
pub fn configure(lifetime: Lifetime) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` takes an option number and a value and
    // writes one slot of mimalloc's option table. It is documented as not
    // thread safe, which is why it is called at the start of `main`,
    // before any thread is spawned.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, lifetime.purge_delay_ms() as _);
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
    use super::Lifetime;

    // One test, so that nothing else in this process sets the option
    // meanwhile (`configure` is not thread safe).
    #[test]
    fn each_lifetime_sets_its_purge_delay() {
        let from_env = std::env::var("MIMALLOC_PURGE_DELAY")
            .ok()
            .and_then(|v| v.parse::<i64>().ok());
        for (lifetime, delay) in [
            (Lifetime::Batch, -1),
            (Lifetime::Service, 10_000),
            (Lifetime::Batch, -1),
        ] {
            super::configure(lifetime);
            assert_eq!(
                super::purge_delay_ms(),
                from_env.unwrap_or(delay),
                "{lifetime:?}"
            );
        }
    }
}
