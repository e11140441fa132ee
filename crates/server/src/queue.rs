//! CPU work on the blocking pool: `max_concurrency` worker slots behind a
//! bounded queue with a wait deadline, and the request deadline that every
//! wait and every job respects.
//!
//! A request that finds every slot taken waits in the queue (first come,
//! first served: tokio's semaphore is fair) rather than being refused, so
//! a busy machine answers late instead of answering 503. It gets 503
//! `overloaded` with `Retry-After` only when `max_queue` requests are
//! already waiting or when it waited `queue_timeout`; and it never waits
//! past its own deadline (`request_timeout`), after which it gets 408.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
// tokio's clock, which tests may pause and advance.
use tokio::time::Instant;

use crate::AppState;
use crate::error::ApiError;
use crate::middleware::panic_message;

tokio::task_local! {
    /// When the request being handled must be answered. The accounting
    /// middleware sets it around every handler, so that the queue and the
    /// jobs it starts know the deadline without every handler passing it.
    static DEADLINE: Instant;
}

/// Runs `f` with `deadline` as the request's deadline.
pub(crate) async fn with_deadline<F: Future>(deadline: Instant, f: F) -> F::Output {
    DEADLINE.scope(deadline, f).await
}

/// The deadline of the request being handled, if any.
pub(crate) fn deadline() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// The worker slots and their queue.
pub(crate) struct Workers {
    slots: Arc<Semaphore>,
    max: usize,
    waiting: AtomicUsize,
    max_queue: usize,
    queue_timeout: Duration,
}

/// Leaves the queue when dropped, even if the waiting request is dropped
/// (it timed out, or its client went away).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why a blocking job did not return.
pub(crate) enum JobError {
    /// It panicked (the message).
    Panic(String),
    /// The runtime is shutting down.
    Cancelled,
}

impl Workers {
    pub(crate) fn new(max: usize, max_queue: usize, queue_timeout: Duration) -> Workers {
        Workers {
            slots: Arc::new(Semaphore::new(max)),
            max,
            waiting: AtomicUsize::new(0),
            max_queue,
            queue_timeout,
        }
    }

    /// Slots in use.
    pub(crate) fn busy(&self) -> usize {
        self.max.saturating_sub(self.slots.available_permits())
    }

    /// Requests waiting for a slot.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// A slot at once, or `None`.
    pub(crate) fn try_acquire(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// A slot, after waiting in the queue if every slot is taken.
    pub(crate) async fn acquire(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        if let Some(permit) = self.try_acquire() {
            return Ok(permit);
        }
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.max_queue {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::overloaded(format!(
                "all {} workers are busy (max_concurrency) and {} requests are already waiting (max_queue); retry later",
                self.max, self.max_queue
            )));
        }
        let _waiting = Waiting(&self.waiting);
        let started = Instant::now();
        let request_deadline = deadline();
        let mut until = started + self.queue_timeout;
        if let Some(d) = request_deadline {
            until = until.min(d);
        }
        match tokio::time::timeout_at(until, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(shutting_down()),
            Err(_) if request_deadline.is_some_and(|d| d <= Instant::now()) => Err(timed_out()),
            Err(_) => Err(ApiError::overloaded(format!(
                "all {} workers stayed busy for {} ms (queue_timeout); retry later",
                self.max,
                self.queue_timeout.as_millis()
            ))),
        }
    }
}

fn shutting_down() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "shutting_down",
        "the service is shutting down",
    )
}

/// The request's deadline passed before its work could start.
fn timed_out() -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "timeout",
        "the request reached its time limit before its work could start",
    )
}

impl AppState {
    /// Runs `work` on the calling task, outside the worker slots and the
    /// queue: for a session run with nothing to redo, which only reads what
    /// the last run made (its cost follows the module's computations, not
    /// its instructions). Handing such a run to the blocking pool and back
    /// cost more than the run: on the transformer, the service's time for a
    /// re-run with no change answered with the changes was 51 to 63 µs
    /// through the pool and 11 to 12 µs here. A panic is caught as the
    /// pool's are.
    pub(crate) fn run_here<T>(&self, work: impl FnOnce() -> T) -> Result<T, JobError> {
        self.metrics().record_lookup();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .map_err(|payload| JobError::Panic(panic_message(payload.as_ref())))
    }

    /// Runs CPU-bound work on the blocking pool in one of the worker
    /// slots, after waiting in the queue if need be. Work whose request
    /// has passed its deadline by the time a slot is free does not start.
    /// Once started, the work keeps its slot until it ends, even if the
    /// request gave up (timed out) before: abandoned work still counts.
    pub(crate) async fn run_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Result<T, JobError>, ApiError> {
        let permit = self.shared.workers.acquire().await?;
        let request_deadline = deadline();
        if request_deadline.is_some_and(|d| d <= Instant::now()) {
            return Err(timed_out());
        }
        let job = tokio::task::spawn_blocking(move || {
            let out = work();
            drop(permit);
            out
        });
        Ok(job.await.map_err(|e| match e.try_into_panic() {
            Ok(payload) => JobError::Panic(panic_message(payload.as_ref())),
            Err(_) => JobError::Cancelled,
        }))
    }
}

/// The answer to a job that did not return.
pub(crate) fn job_error(e: JobError) -> ApiError {
    match e {
        JobError::Panic(m) => {
            tracing::error!(panic = %m, "the pipeline panicked");
            ApiError::internal(format!("internal error (the pipeline panicked: {m})"))
        }
        JobError::Cancelled => shutting_down(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_request_waits_for_a_slot_in_turn() {
        let w = Arc::new(Workers::new(1, 2, Duration::from_secs(10)));
        let held = w.try_acquire().expect("a free slot");
        let (a, b) = (w.clone(), w.clone());
        let first = tokio::spawn(async move { a.acquire().await.map(|_| Instant::now()) });
        tokio::task::yield_now().await;
        let second = tokio::spawn(async move { b.acquire().await.map(|_| Instant::now()) });
        tokio::task::yield_now().await;
        assert_eq!(w.waiting(), 2);
        // A third finds the queue full.
        let e = w.acquire().await.expect_err("the queue is full");
        assert_eq!(
            (e.status, e.kind),
            (StatusCode::SERVICE_UNAVAILABLE, "overloaded")
        );
        assert!(e.message.contains("max_queue"), "{}", e.message);
        assert_eq!(e.retry_after, Some(1));
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(held);
        let first = first
            .await
            .expect("joins")
            .map_err(|e| e.message)
            .expect("got a slot");
        let second = second
            .await
            .expect("joins")
            .map_err(|e| e.message)
            .expect("got a slot");
        // First come, first served: the second got its slot when the
        // first's permit (dropped at once) came back.
        assert!(first <= second);
        assert_eq!(w.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_at_the_queue_timeout_or_the_request_deadline() {
        let w = Workers::new(1, 8, Duration::from_secs(2));
        let _held = w.try_acquire().expect("a free slot");
        let started = Instant::now();
        let e = w.acquire().await.expect_err("the wait expires");
        assert_eq!(
            (e.status, e.kind),
            (StatusCode::SERVICE_UNAVAILABLE, "overloaded")
        );
        assert!(e.message.contains("queue_timeout"), "{}", e.message);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        // A request deadline sooner than the queue timeout ends it sooner.
        let started = Instant::now();
        let e = with_deadline(started + Duration::from_millis(500), w.acquire())
            .await
            .expect_err("the deadline passes");
        assert_eq!((e.status, e.kind), (StatusCode::REQUEST_TIMEOUT, "timeout"));
        assert_eq!(started.elapsed(), Duration::from_millis(500));
        assert_eq!(w.waiting(), 0);
    }

    #[tokio::test]
    async fn with_no_queue_a_busy_service_answers_503_at_once() {
        let w = Workers::new(1, 0, Duration::from_secs(10));
        let _held = w.try_acquire().expect("a free slot");
        let e = w.acquire().await.expect_err("no queue");
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
    }
}
