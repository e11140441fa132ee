//! Dropping large values off the caller's path, on threads of their own,
//! a bounded number at once.
//!
//! Freeing what a run made is work the answer does not wait for: dropping
//! the database of a stateless run of 16,667 computations took 29 ms, and
//! releasing a session run's parses 30 ms. Both go through [`Freeing`], so
//! that how many threads free at once, and what waits for them, is decided
//! in one place.

use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Threads dropping values handed over to them, at most `max` at once. A
/// value handed over beyond them waits for the oldest to finish, so that a
/// caller that lets go faster than the frees finish holds a bounded number
/// of threads, and of values waiting to be freed.
pub(crate) struct Freeing {
    /// The threads' name.
    name: &'static str,
    /// The most threads at once (at least one).
    max: usize,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Freeing {
    /// Threads named `name`, at most `max` (at least one) at once.
    pub(crate) const fn new(name: &'static str, max: usize) -> Freeing {
        Freeing {
            name,
            max: if max == 0 { 1 } else { max },
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Drops `value`, which holds `instructions` instructions' worth of
    /// memory: on a thread of its own when there are enough of them to
    /// pay for one (see [`hlo::Split::Release`]), else here.
    pub(crate) fn drop_later<T: Send + 'static>(&self, value: T, instructions: usize) {
        if hlo::Parallelism::splits(hlo::Split::Release, instructions).is_none() {
            drop(value);
            return;
        }
        let mut threads = self.threads();
        threads.retain(|t| !t.is_finished());
        while threads.len() >= self.max {
            // A panic while freeing leaves nothing to wait for.
            let _ = threads.remove(0).join();
        }
        // A thread the OS refuses drops its closure, and so the value,
        // here.
        if let Ok(thread) = std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || drop(value))
        {
            threads.push(thread);
        }
    }

    /// Waits until every value handed over so far is dropped.
    pub(crate) fn settle(&self) {
        let threads = std::mem::take(&mut *self.threads());
        for thread in threads {
            // A panic while freeing leaves nothing to wait for.
            let _ = thread.join();
        }
    }

    /// The threads, also after a panic elsewhere while they were locked:
    /// the list stays valid whatever panicked.
    fn threads(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Counts the drops running at once, and the most there ever were.
    #[derive(Default)]
    struct Overlap {
        now: AtomicUsize,
        most: AtomicUsize,
        done: AtomicUsize,
    }

    /// A value whose drop takes a while and is counted in an [`Overlap`].
    struct Slow(Arc<Overlap>);

    impl Drop for Slow {
        fn drop(&mut self) {
            let now = self.0.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.0.most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            self.0.now.fetch_sub(1, Ordering::SeqCst);
            self.0.done.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Enough instructions for a thread of their own under any policy
    /// that splits at all.
    const LARGE: usize = 1 << 20;

    #[test]
    fn at_most_max_values_are_freed_at_once() {
        let _policy = hlo::Parallelism::Always.enter();
        let overlap = Arc::new(Overlap::default());
        let freeing = Freeing::new("test-freeing", 2);
        for _ in 0..8 {
            freeing.drop_later(Slow(Arc::clone(&overlap)), LARGE);
            assert!(freeing.threads().len() <= 2);
        }
        freeing.settle();
        assert_eq!(overlap.done.load(Ordering::SeqCst), 8);
        assert!(freeing.threads().is_empty());
        let most = overlap.most.load(Ordering::SeqCst);
        assert!(most <= 2, "{most} values were freed at once");
        // They did go to threads: the caller went on while two were freed.
        assert_eq!(most, 2, "the frees never overlapped");
    }

    #[test]
    fn small_values_are_freed_here() {
        let _policy = hlo::Parallelism::Sequential.enter();
        let overlap = Arc::new(Overlap::default());
        let freeing = Freeing::new("test-freeing", 2);
        freeing.drop_later(Slow(Arc::clone(&overlap)), LARGE);
        // Dropped before `drop_later` returned, with no thread.
        assert_eq!(overlap.done.load(Ordering::SeqCst), 1);
        assert!(freeing.threads().is_empty());
    }
}
