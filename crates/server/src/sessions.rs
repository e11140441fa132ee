//! Sessions: named incremental databases, bounded in number and in the
//! memory they hold, evicted least recently used first.
//!
//! A session is charged what its database holds, estimated from its module
//! text and its number of computations: the text alone understates it by
//! several times once it is checked or run (its parses until the first
//! run; then every computation's signatures, rewrites and printed text,
//! and a record per query per computation). The factors below were fitted on the
//! resident set of `tessera serve` per session
//! (`crates/cli/tests/serve_memory.rs` checks that the estimate stays
//! within a factor of two of it, on two modules of different shapes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use target::TargetSpec;

/// One session: an incremental database with a module loaded.
pub struct Session {
    /// The database.
    pub db: db::Database,
    /// The target of the last load or run.
    pub target: Arc<TargetSpec>,
    /// The file name errors cite.
    pub file_name: String,
    /// The module's name.
    pub module_name: String,
    /// The computations in module order.
    pub computations: Vec<CompInfo>,
    /// The module text as loaded, adjusted by every replacement, in bytes.
    pub bytes: usize,
    /// What its last successful run answered, for `response=changes`.
    pub last_answer: Option<crate::changes::LastAnswer>,
}

/// A session's cost before any module: the database and its tables.
const BASE_BYTES: usize = 64 << 10;
/// Memory per byte of module text, and per computation. A session is
/// charged from its creation the larger of its two states: from its check
/// until its first run it holds its parses (on the transformer, 7.8x its
/// text resident); after a run it drops them (and its assignments, see
/// `db::Database::release_intermediates`) and holds its texts, the
/// per-computation steps' small values, its reports and salsa's record of
/// what each of those read (3.8x on the transformer, by `dhat` 3.91x).
///
/// Much of that is a record per query per computation, whatever the
/// computation's size, so a session is charged per computation too. Fitted
/// on two resident sets of `tessera serve` per session, at the larger of
/// the two states (`crates/cli/tests/serve_memory.rs`, which checks that
/// the charge stays within a factor of two of them): the 1.2 MB
/// transformer, 455 computations, 9.0 MiB once checked and 4.4 MiB once
/// run; a generated module of 0.87 MB in 3,333 computations of six
/// instructions, 20.0 MiB and 19.6 MiB (2026-11-29, 8e8483a). The record
/// of the last answer (`response=changes`: a name and a hash per
/// computation) is not charged on its own.
const PER_TEXT_BYTE: usize = 6;
/// See [`PER_TEXT_BYTE`].
const PER_COMPUTATION: usize = 5 << 10;

/// The memory a session holds, estimated from its module text and its
/// number of computations.
pub fn estimated_bytes(text_bytes: usize, computations: usize) -> usize {
    BASE_BYTES
        .saturating_add(text_bytes.saturating_mul(PER_TEXT_BYTE))
        .saturating_add(computations.saturating_mul(PER_COMPUTATION))
}

impl Session {
    /// The memory this session is charged: its module, and what earlier
    /// modules left behind in its database (see [`db::LeftBehind`]).
    pub fn held_bytes(&self) -> usize {
        self.charge_for(self.bytes)
    }

    /// The memory this session would be charged with a module text of
    /// `text_bytes` bytes and the same computations.
    pub fn charge_for(&self, text_bytes: usize) -> usize {
        let left = self.db.left_behind();
        estimated_bytes(
            text_bytes.saturating_add(left.text_bytes),
            self.computations.len().saturating_add(left.computations),
        )
    }
}

/// What a session knows of one computation.
pub struct CompInfo {
    /// Its name, without `%`.
    pub name: String,
    /// The byte length of its current text.
    pub bytes: usize,
    /// Whether it is the entry computation.
    pub entry: bool,
}

/// A shared, lockable session. The lock is a tokio mutex: a request waits
/// for it without holding a thread, and moves the guard to the blocking
/// pool for the pipeline run.
pub type SessionHandle = Arc<tokio::sync::Mutex<Option<Session>>>;

struct Entry {
    session: SessionHandle,
    last_used: u64,
    bytes: usize,
}

#[derive(Default)]
struct Table {
    entries: HashMap<String, Entry>,
    tick: u64,
    bytes: usize,
}

/// The session table.
pub struct Sessions {
    table: Mutex<Table>,
    max_sessions: usize,
    max_bytes: usize,
}

impl Sessions {
    /// An empty table with these limits.
    pub fn new(max_sessions: usize, max_bytes: usize) -> Sessions {
        Sessions {
            table: Mutex::default(),
            max_sessions,
            max_bytes,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The byte cap of all sessions together.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Sessions alive.
    pub fn len(&self) -> usize {
        self.table().entries.len()
    }

    /// Sessions alive and the bytes they hold.
    pub fn usage(&self) -> (usize, usize) {
        let t = self.table();
        (t.entries.len(), t.bytes)
    }

    /// The session named `id`, marked as just used.
    pub fn get(&self, id: &str) -> Option<SessionHandle> {
        let mut t = self.table();
        t.tick += 1;
        let tick = t.tick;
        let e = t.entries.get_mut(id)?;
        e.last_used = tick;
        Some(e.session.clone())
    }

    /// Records `session` under `id` with `bytes`, replacing whatever was
    /// there, and evicts the least recently used other sessions until the
    /// limits hold. Returns how many were evicted.
    pub fn commit(&self, id: &str, session: &SessionHandle, bytes: usize) -> usize {
        let mut t = self.table();
        t.tick += 1;
        let tick = t.tick;
        let old = t.entries.insert(
            id.to_string(),
            Entry {
                session: session.clone(),
                last_used: tick,
                bytes,
            },
        );
        t.bytes = t.bytes - old.map_or(0, |e| e.bytes) + bytes;
        let mut evicted = 0;
        while t.entries.len() > self.max_sessions || t.bytes > self.max_bytes {
            let victim = t
                .entries
                .iter()
                .filter(|(k, _)| k.as_str() != id)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            let Some(victim) = victim else { break };
            if let Some(e) = t.entries.remove(&victim) {
                t.bytes -= e.bytes;
                evicted += 1;
                tracing::info!(session = %victim, bytes = e.bytes, "session evicted");
            }
        }
        evicted
    }

    /// Charges the session named `id` `bytes` now, if it is still
    /// `session`, and evicts the least recently used others until the
    /// limits hold. Returns how many were evicted.
    pub fn recharge(&self, id: &str, session: &SessionHandle, bytes: usize) -> usize {
        let still_there = self
            .table()
            .entries
            .get(id)
            .is_some_and(|e| Arc::ptr_eq(&e.session, session));
        if still_there {
            self.commit(id, session, bytes)
        } else {
            0
        }
    }

    /// Removes the session named `id`; false if there was none.
    pub fn remove(&self, id: &str) -> bool {
        let mut t = self.table();
        match t.entries.remove(id) {
            Some(e) => {
                t.bytes -= e.bytes;
                true
            }
            None => false,
        }
    }

    /// Removes the session named `id` if it is still `session`.
    pub fn remove_if_same(&self, id: &str, session: &SessionHandle) {
        let mut t = self.table();
        if t.entries
            .get(id)
            .is_some_and(|e| Arc::ptr_eq(&e.session, session))
            && let Some(e) = t.entries.remove(id)
        {
            t.bytes -= e.bytes;
        }
    }
}

/// A session id is 1 to 128 characters from `[A-Za-z0-9._-]`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> SessionHandle {
        Arc::new(tokio::sync::Mutex::new(None))
    }

    #[test]
    fn least_recently_used_is_evicted_by_count() {
        let s = Sessions::new(2, 1000);
        let (a, b, c) = (handle(), handle(), handle());
        assert_eq!(s.commit("a", &a, 10), 0);
        assert_eq!(s.commit("b", &b, 10), 0);
        assert!(s.get("a").is_some());
        assert_eq!(s.commit("c", &c, 10), 1);
        assert!(s.get("b").is_none());
        assert!(s.get("a").is_some());
        assert_eq!(s.usage(), (2, 20));
    }

    #[test]
    fn bytes_cap_evicts_until_it_fits() {
        let s = Sessions::new(10, 100);
        for id in ["a", "b", "c"] {
            s.commit(id, &handle(), 40);
        }
        // 120 > 100: "a" went when "c" came.
        assert_eq!(s.usage(), (2, 80));
        assert!(s.get("a").is_none());
        // Growing "b" to 90 evicts "c" (the only other one).
        assert_eq!(s.commit("b", &handle(), 90), 1);
        assert_eq!(s.usage(), (1, 90));
    }

    #[test]
    fn ids_are_checked() {
        assert!(valid_id("run-1.a_b"));
        assert!(!valid_id(""));
        assert!(!valid_id("a/b"));
        assert!(!valid_id(&"x".repeat(129)));
    }
}
