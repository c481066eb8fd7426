//! Loads that take long or never end: they hold up no other model's load, are abandoned at the
//! load time limit with a clear error to every waiter and their reservation freed, and a
//! request that stops waiting is no longer counted.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tests::{report, spec, status, FakeLoader, MIB};
use super::*;

/// A 100 MiB pool over `specs` whose loads may take `load_timeout`.
fn limited_pool(
    specs: Vec<ModelSpec>,
    loader: &Arc<FakeLoader>,
    load_timeout: Duration,
) -> ModelPool {
    let budget = Budget {
        max_memory_bytes: 100 * MIB,
        max_models: None,
        wait_for_idle: Duration::from_secs(2),
        load_timeout,
    };
    ModelPool::new(specs, Arc::clone(loader) as Arc<dyn ModelLoader>, budget).unwrap()
}

/// Waits until `check` holds, or panics after five seconds.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_that_never_ends_holds_up_no_other_model_and_times_out_for_every_waiter() {
    let loader = Arc::new(FakeLoader::default());
    let specs = vec![
        spec("stuck", "30-stuck", false),
        spec("good", "30-good", false),
    ];
    let pool = limited_pool(specs, &loader, Duration::from_millis(600));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.acquire("stuck").await.map(drop) })
        })
        .collect();
    eventually("the stuck load's reservation", || {
        report(&pool, "stuck").memory_bytes == 30 * MIB
    })
    .await;

    // A model never loaded before loads at once beside it.
    let started = Instant::now();
    pool.load("good").await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status(&pool, "stuck"), ModelStatus::Loading);
    assert_eq!(pool.snapshot().used_bytes, 60 * MIB);

    // At the limit every waiter hears why, and the reservation is freed.
    for w in waiters {
        let err = w.await.unwrap().unwrap_err();
        assert!(matches!(err, PoolError::LoadTimedOut { .. }), "{err}");
        assert!(err.to_string().contains("--load-timeout"), "{err}");
    }
    let stuck = report(&pool, "stuck");
    assert_eq!(
        (stuck.status, stuck.memory_bytes, stuck.load_failures),
        (ModelStatus::Unloaded, 0, 1)
    );
    assert!(stuck
        .last_error
        .unwrap()
        .contains("did not load within 0.6 s"));
    assert_eq!(pool.snapshot().used_bytes, 30 * MIB);

    // While the abandoned read still blocks, a new request is refused at once rather than
    // leaving a second thread behind.
    let started = Instant::now();
    let err = pool.acquire("stuck").await.unwrap_err();
    assert!(matches!(err, PoolError::LoadStillRunning { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_millis(100));

    // Once the read ends, its late model is stopped (never handed out) and the next request
    // loads the model afresh.
    loader.stuck.open();
    eventually("the straggler's end", || {
        pool.inner.lock().entries[0]
            .straggler
            .as_ref()
            .is_none_or(|s| s.has_ended())
    })
    .await;
    pool.load("stuck").await.unwrap();
    assert_eq!(loader.loads_of("30-stuck"), 2);
    assert_eq!(status(&pool, "stuck"), ModelStatus::Loaded);
    assert_eq!(pool.snapshot().used_bytes, 60 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_stops_waiting_for_a_load_is_no_longer_counted() {
    let loader = Arc::new(FakeLoader::default());
    let pool = limited_pool(
        vec![spec("slow", "10-stuck", false)],
        &loader,
        Duration::from_secs(60),
    );
    let gone = tokio::time::timeout(Duration::from_millis(200), pool.acquire("slow")).await;
    assert!(gone.is_err(), "the load cannot have finished");
    let waiting = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.acquire("slow").await.map(drop) })
    };
    eventually("one waiter", || report(&pool, "slow").load_waiters == 1).await;
    assert_eq!(status(&pool, "slow"), ModelStatus::Loading);
    // The load goes on for whoever still waits.
    loader.stuck.open();
    waiting.await.unwrap().unwrap();
    let slow = report(&pool, "slow");
    assert_eq!((slow.status, slow.load_waiters), (ModelStatus::Loaded, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_of_different_models_run_side_by_side_within_the_budget() {
    let loader = Arc::new(FakeLoader {
        delay: Duration::from_millis(300),
        ..FakeLoader::default()
    });
    // Four models of 40 MiB under 100 MiB: two fit at once, so at most two load at once, and
    // the later ones unload the earlier ones once those are idle.
    let specs = (0..4)
        .map(|i| spec(&format!("m{i}"), &format!("40-m{i}"), false))
        .collect();
    let pool = limited_pool(specs, &loader, Duration::from_secs(60));
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.load(&format!("m{i}")).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(loader.most_in_flight.load(Ordering::SeqCst), 2);
    let snap = pool.snapshot();
    assert_eq!(snap.loaded_models, 2);
    assert_eq!(snap.used_bytes, 80 * MIB);
}
