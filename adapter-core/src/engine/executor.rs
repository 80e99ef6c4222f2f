//! The engine on its own thread, behind a channel.
//!
//! A [`tandem_host::Recommender`] is one wasm store: its calls take `&mut` and may run for
//! milliseconds. Held behind a lock inside async handlers it would block the runtime's workers
//! and no request time limit could fire while it ran. Here it lives on a thread of its own
//! that runs one task at a time from a bounded queue; handlers send a task and `await` its
//! answer under a time limit ([`Engine::call`]), so a slow or looping engine call costs the
//! caller its answer, never a worker. A task whose caller stopped waiting is dropped unrun. A
//! full queue is refused at once ([`CallError::Overloaded`]): a scheduler is better served by a
//! fast fail-open than by a queue that only grows.
//!
//! A scheduling decision that finds the engine idle — nothing queued, nothing running — runs on
//! the caller's worker instead ([`Engine::decide`]): handing it to the thread and being woken
//! with the answer cost two thread switches, which on a busy node were more than half of an
//! extender `filter`'s time (0.43–0.62 ms against 0.19–0.23 ms run in place, on two cores under
//! a burst of pods). It blocks that worker for as long as the engine takes, which each engine
//! call bounds (the sandbox's call deadline), and it cannot be given up at the caller's time
//! limit, so the core runs decisions this way only where that deadline is within the limit
//! (`Core::decide`); a decision that finds the engine busy queues as any other task.
//!
//! A front-end whose decisions come from a thread of its own, blocking (the framework plugin,
//! inside kube-scheduler's scheduling cycle), runs the engine inline instead
//! ([`Engine::inline`]): the state behind a lock, a decision run on the caller's thread (no
//! hand-off to another thread and back, which cost it tens of microseconds per call), and the
//! core's own calls on tokio's blocking threads, under the same time limits and queue bound.

use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::metrics::Metrics;

use super::error::CallError;
use super::state::EngineState;

/// A task for the engine thread.
type Task = Box<dyn FnOnce(&mut EngineState) + Send>;

/// The engine thread's handle: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct Engine {
    runner: Runner,
    queue: usize,
    metrics: Arc<Metrics>,
}

/// Where the engine's tasks run.
#[derive(Clone)]
enum Runner {
    /// On the engine thread, sent through its bounded queue; or, for a decision that finds it
    /// idle, on the caller's thread ([`Engine::decide`]).
    Thread {
        tasks: SyncSender<Task>,
        /// The state, locked by whichever runs a task. The lock does not poison: a task that
        /// panicked left the recommender as the host leaves it after a failed call (rebuilt
        /// from its snapshot at the next one), and refusing every later decision would serve
        /// no one.
        state: Arc<parking_lot::Mutex<EngineState>>,
        /// Tasks sent to the thread and not yet finished: a decision runs in place only when
        /// none is, so it never overtakes a queued task (the start-up chores first of all).
        queued: Arc<std::sync::atomic::AtomicUsize>,
    },
    /// On the caller's thread (or a blocking thread), under the lock; `waiting` counts the
    /// core's calls in flight, bounded as the thread's queue is.
    Inline {
        state: Arc<parking_lot::Mutex<EngineState>>,
        waiting: Arc<std::sync::atomic::AtomicUsize>,
    },
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Starts the engine thread with `state` and a queue of `queue` tasks.
    pub fn start(state: EngineState, queue: usize, metrics: Arc<Metrics>) -> std::io::Result<Self> {
        let (tasks, inbox) = sync_channel::<Task>(queue);
        let state = Arc::new(parking_lot::Mutex::new(state));
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (thread_state, thread_queued) = (Arc::clone(&state), Arc::clone(&queued));
        std::thread::Builder::new()
            .name("tandem-engine".into())
            .spawn(move || {
                // Ends when every handle is dropped.
                while let Ok(task) = inbox.recv() {
                    task(&mut thread_state.lock());
                    thread_queued.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                }
            })?;
        Ok(Self {
            runner: Runner::Thread {
                tasks,
                state,
                queued,
            },
            queue,
            metrics,
        })
    }

    /// The engine inline: its state behind a lock, [`Engine::call_blocking`] run on the
    /// caller's thread, [`Engine::call`] on a blocking thread of the tokio runtime it is
    /// awaited on, one running and at most `queue` more waiting, as on the thread.
    pub fn inline(state: EngineState, queue: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            runner: Runner::Inline {
                state: Arc::new(parking_lot::Mutex::new(state)),
                waiting: Arc::default(),
            },
            queue,
            metrics,
        }
    }

    /// Runs `work` on the engine thread and waits for its answer at most `wait`. `call` names
    /// it in metrics. The task is not run if its caller stopped waiting before its turn.
    pub async fn call<T: Send + 'static>(
        &self,
        call: &'static str,
        wait: Duration,
        work: impl FnOnce(&mut EngineState) -> T + Send + 'static,
    ) -> Result<T, CallError> {
        self.run(call, wait, work, false).await
    }

    /// [`Engine::call`] for a scheduling decision: run on the caller's thread when the engine
    /// is idle (nothing queued, nothing running), queued on the engine thread otherwise. See
    /// the module documentation for what running in place trades.
    pub async fn decide<T: Send + 'static>(
        &self,
        call: &'static str,
        wait: Duration,
        work: impl FnOnce(&mut EngineState) -> T + Send + 'static,
    ) -> Result<T, CallError> {
        self.run(call, wait, work, true).await
    }

    async fn run<T: Send + 'static>(
        &self,
        call: &'static str,
        wait: Duration,
        work: impl FnOnce(&mut EngineState) -> T + Send + 'static,
        in_place_when_idle: bool,
    ) -> Result<T, CallError> {
        let (answer, waiting) = oneshot::channel();
        let metrics = Arc::clone(&self.metrics);
        let task: Task = Box::new(move |state| {
            if answer.is_closed() {
                metrics.engine_abandoned.inc();
                return;
            }
            let started = Instant::now();
            let value = work(state);
            metrics.observe_engine_call(call, started.elapsed().as_secs_f64());
            let _ = answer.send(value);
        });
        match &self.runner {
            Runner::Thread {
                tasks,
                state,
                queued,
            } => {
                use std::sync::atomic::Ordering;
                let idle = in_place_when_idle && queued.load(Ordering::Acquire) == 0;
                match idle.then(|| state.try_lock()).flatten() {
                    Some(mut state) => task(&mut state),
                    None => {
                        queued.fetch_add(1, Ordering::AcqRel);
                        let refused = match tasks.try_send(task) {
                            Ok(()) => None,
                            Err(TrySendError::Full(_)) => {
                                self.metrics.engine_overloaded.inc();
                                Some(CallError::Overloaded(self.queue))
                            }
                            Err(TrySendError::Disconnected(_)) => Some(CallError::Stopped),
                        };
                        if let Some(refused) = refused {
                            queued.fetch_sub(1, Ordering::AcqRel);
                            return Err(refused);
                        }
                    }
                }
            }
            Runner::Inline { state, waiting } => {
                use std::sync::atomic::Ordering;
                // As the thread: one call running, `queue` more waiting.
                if waiting.fetch_add(1, Ordering::AcqRel) > self.queue {
                    waiting.fetch_sub(1, Ordering::AcqRel);
                    self.metrics.engine_overloaded.inc();
                    return Err(CallError::Overloaded(self.queue));
                }
                let (state, waiting) = (Arc::clone(state), Arc::clone(waiting));
                tokio::task::spawn_blocking(move || {
                    task(&mut state.lock());
                    waiting.fetch_sub(1, Ordering::AcqRel);
                });
            }
        }
        match tokio::time::timeout(wait, waiting).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err(CallError::Stopped),
            Err(_) => {
                self.metrics.engine_timeouts.inc();
                Err(CallError::TimedOut(wait))
            }
        }
    }

    /// Queues `work` on the engine thread without waiting for it (start-up chores); dropped
    /// when the queue is full.
    pub fn detach(&self, work: impl FnOnce(&mut EngineState) + Send + 'static) {
        match &self.runner {
            Runner::Thread { tasks, queued, .. } => {
                use std::sync::atomic::Ordering;
                queued.fetch_add(1, Ordering::AcqRel);
                if tasks.try_send(Box::new(work)).is_err() {
                    queued.fetch_sub(1, Ordering::AcqRel);
                }
            }
            Runner::Inline { state, .. } => {
                let state = Arc::clone(state);
                let _ = std::thread::Builder::new()
                    .name("tandem-engine-chore".into())
                    .spawn(move || work(&mut state.lock()));
            }
        }
    }

    /// [`Engine::call`] from a thread that is not a tokio worker (start-up, tests): blocks.
    pub fn call_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut EngineState) -> T + Send + 'static,
    ) -> Result<T, CallError> {
        let (tasks, queued) = match &self.runner {
            Runner::Thread { tasks, queued, .. } => (tasks, queued),
            Runner::Inline { state, .. } => return Ok(work(&mut state.lock())),
        };
        let (answer, waiting) = oneshot::channel();
        let task: Task = Box::new(move |state| {
            let _ = answer.send(work(state));
        });
        queued.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        if tasks.send(task).is_err() {
            queued.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            return Err(CallError::Stopped);
        }
        waiting.blocking_recv().map_err(|_| CallError::Stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::testing::state;

    #[tokio::test]
    async fn a_call_answers_within_its_limit_and_a_full_queue_refuses_at_once() {
        let metrics = Arc::new(Metrics::default());
        let engine = Engine::start(state(), 1, Arc::clone(&metrics)).unwrap();
        limits_hold(engine, metrics).await;
    }

    #[tokio::test]
    async fn inline_the_limits_are_the_same_and_a_blocking_call_runs_on_the_callers_thread() {
        let metrics = Arc::new(Metrics::default());
        let engine = Engine::inline(state(), 1, Arc::clone(&metrics));
        let caller = std::thread::current().id();
        let ran_on = engine
            .call_blocking(|_| std::thread::current().id())
            .unwrap();
        assert_eq!(ran_on, caller);
        limits_hold(engine, metrics).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_decision_runs_in_place_when_the_engine_is_idle_and_queues_when_it_is_busy() {
        let metrics = Arc::new(Metrics::default());
        let engine = Engine::start(state(), 4, Arc::clone(&metrics)).unwrap();
        let here = || std::thread::current().id();
        let caller = here();
        let ran_on = engine
            .decide("test", Duration::from_secs(5), move |_| here())
            .await
            .unwrap();
        assert_eq!(
            ran_on, caller,
            "an idle engine decides on the caller's thread"
        );
        // A plain call still goes to the engine thread.
        let ran_on = engine
            .call("test", Duration::from_secs(5), move |_| here())
            .await
            .unwrap();
        assert_ne!(ran_on, caller);
        // Busy: a decision waits its turn on the engine thread, after the task before it.
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        let busy = engine.clone();
        let first = tokio::spawn(async move {
            busy.call("test", Duration::from_secs(5), move |_| {
                let _ = blocked.recv();
                here()
            })
            .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let waiting = engine.clone();
        let decision = tokio::spawn(async move {
            waiting
                .decide("test", Duration::from_secs(5), move |_| here())
                .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !decision.is_finished(),
            "the decision overtook a running task"
        );
        release.send(()).unwrap();
        let engine_thread = first.await.unwrap().unwrap();
        let decided_on = decision.await.unwrap().unwrap();
        assert_eq!(decided_on, engine_thread);
        assert_ne!(decided_on, caller);
    }

    /// With a queue of one: a call beyond the running one and the waiting one is refused at
    /// once, a waiting call times out, and its task is dropped unrun.
    async fn limits_hold(engine: Engine, metrics: Arc<Metrics>) {
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        // Occupy the thread, then fill the one-task queue.
        let busy = engine.clone();
        let first = tokio::spawn(async move {
            busy.call("test", Duration::from_secs(5), move |_| {
                let _ = blocked.recv();
            })
            .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let waiting = engine.clone();
        let second = tokio::spawn(async move {
            waiting
                .call("test", Duration::from_millis(50), |_| ())
                .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let refused = engine.call("test", Duration::from_secs(1), |_| ()).await;
        assert!(
            matches!(refused, Err(CallError::Overloaded(1))),
            "{refused:?}"
        );
        let timed_out = second.await.unwrap();
        assert!(
            matches!(timed_out, Err(CallError::TimedOut(_))),
            "{timed_out:?}"
        );
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
        // The abandoned task is dropped unrun (and counted) as soon as its turn comes; then the
        // engine answers again.
        let waited = Instant::now();
        while metrics.engine_abandoned.get() == 0 && waited.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let answer = engine
            .call("test", Duration::from_secs(5), |state| {
                state.handles().of("x")
            })
            .await;
        assert_eq!(answer.unwrap(), None);
        assert_eq!(metrics.engine_abandoned.get(), 1);
    }
}
