//! The pool's state machine, accounting and eviction, with a loader that starts engines over the
//! fake executor: no weights, no files.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex as StdMutex};
use std::time::Duration;

use super::*;
use crate::engine::{Engine, EngineConfig};
use crate::executor::fake::HistoryExecutor;
use crate::testkit::word_tokenizer;

pub(super) const MIB: usize = 1 << 20;

/// Loads "models" named by their directory: `<bytes in MiB>-<name>`; a directory whose name
/// contains `corrupt` fails to load, one whose name contains `stuck` blocks until `stuck` opens
/// (as a read of a named pipe nobody writes to would, for good).
#[derive(Default)]
pub(super) struct FakeLoader {
    pub(super) loads: StdMutex<HashMap<PathBuf, usize>>,
    pub(super) delay: Duration,
    pub(super) in_flight: AtomicUsize,
    pub(super) most_in_flight: AtomicUsize,
    pub(super) stuck: Gate,
}

/// A gate that `stuck` loads wait behind until it opens.
#[derive(Default)]
pub(super) struct Gate {
    open: StdMutex<bool>,
    opened: Condvar,
}

impl Gate {
    pub(super) fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
}

impl FakeLoader {
    pub(super) fn loads_of(&self, dir: &str) -> usize {
        self.loads
            .lock()
            .unwrap()
            .get(Path::new(dir))
            .copied()
            .unwrap_or(0)
    }

    fn bytes(dir: &Path) -> usize {
        let name = dir.to_string_lossy();
        name.split('-').next().unwrap().parse::<usize>().unwrap() * MIB
    }
}

impl ModelLoader for FakeLoader {
    fn context_length(&self, _dir: &Path) -> Result<usize, ModelLoadError> {
        Ok(64)
    }

    fn estimate_bytes(&self, dir: &Path) -> Result<usize, ModelLoadError> {
        Ok(Self::bytes(dir))
    }

    fn load(&self, dir: &Path) -> Result<LoadedModel, ModelLoadError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        if dir.to_string_lossy().contains("stuck") {
            self.stuck.wait();
        }
        *self
            .loads
            .lock()
            .unwrap()
            .entry(dir.to_path_buf())
            .or_default() += 1;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if dir.to_string_lossy().contains("corrupt") {
            return Err(ModelLoadError::Other(format!(
                "{}/model.safetensors is truncated",
                dir.display()
            )));
        }
        let engine = Engine::start(
            Box::new(HistoryExecutor::new(32, 4, 16)),
            word_tokenizer(32),
            EngineConfig {
                max_model_len: 64,
                ..EngineConfig::default()
            },
        );
        Ok(LoadedModel {
            engine,
            tokenizer: word_tokenizer(32),
            max_model_len: 64,
            memory_bytes: Self::bytes(dir),
            pooling: None,
            images: None,
        })
    }
}

pub(super) fn spec(id: &str, dir: &str, pinned: bool) -> ModelSpec {
    ModelSpec {
        id: id.to_string(),
        dir: PathBuf::from(dir),
        pinned,
    }
}

pub(super) fn pool(
    specs: Vec<ModelSpec>,
    max_memory_mib: usize,
    loader: Arc<FakeLoader>,
) -> ModelPool {
    let budget = Budget {
        max_memory_bytes: max_memory_mib * MIB,
        max_models: None,
        wait_for_idle: Duration::from_millis(200),
        load_timeout: Duration::from_secs(60),
    };
    ModelPool::new(specs, loader, budget).unwrap()
}

pub(super) fn status(pool: &ModelPool, id: &str) -> ModelStatus {
    report(pool, id).status
}

pub(super) fn report(pool: &ModelPool, id: &str) -> ModelReport {
    pool.snapshot()
        .models
        .into_iter()
        .find(|m| m.id == id)
        .unwrap()
}

/// Three 40 MiB models `a`, `b`, `c` under a 100 MiB budget: any two fit, not three.
fn three_models(pinned_a: bool) -> (ModelPool, Arc<FakeLoader>) {
    let loader = Arc::new(FakeLoader::default());
    let specs = vec![
        spec("a", "40-a", pinned_a),
        spec("b", "40-b", false),
        spec("c", "40-c", false),
    ];
    (pool(specs, 100, Arc::clone(&loader)), loader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_are_available_without_being_loaded() {
    let (pool, loader) = three_models(false);
    let snap = pool.snapshot();
    assert_eq!(snap.loaded_models, 0);
    assert_eq!(snap.used_bytes, 0);
    assert!(snap
        .models
        .iter()
        .all(|m| m.status == ModelStatus::Unloaded));
    assert_eq!(pool.ids(), ["a", "b", "c"]);
    assert_eq!(pool.max_model_len("b").unwrap(), 64);
    assert_eq!(loader.loads_of("40-a"), 0);
    assert!(matches!(
        pool.acquire("zzz").await,
        Err(PoolError::UnknownModel(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_share_one_load() {
    let loader = Arc::new(FakeLoader {
        delay: Duration::from_millis(150),
        ..FakeLoader::default()
    });
    let pool = pool(vec![spec("a", "10-a", false)], 100, Arc::clone(&loader));
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.acquire("a").await.map(|l| l.model().max_model_len) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(status(&pool, "a"), ModelStatus::Loading);
    for w in waiters {
        assert_eq!(w.await.unwrap().unwrap(), 64);
    }
    assert_eq!(loader.loads_of("10-a"), 1);
    let a = report(&pool, "a");
    assert_eq!(
        (a.status, a.loads, a.memory_bytes),
        (ModelStatus::Loaded, 1, 10 * MIB)
    );
    assert!(a.last_used.is_some() && a.loaded_at.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_reaches_every_waiter_and_the_model_stays_unloaded() {
    let loader = Arc::new(FakeLoader {
        delay: Duration::from_millis(100),
        ..FakeLoader::default()
    });
    let specs = vec![
        spec("bad", "10-corrupt", false),
        spec("good", "10-good", false),
    ];
    let pool = pool(specs, 100, Arc::clone(&loader));
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.acquire("bad").await.map(drop) })
        })
        .collect();
    for w in waiters {
        let err = w.await.unwrap().unwrap_err();
        assert!(matches!(err, PoolError::LoadFailed { .. }), "{err}");
        assert!(
            err.to_string().contains("model.safetensors is truncated"),
            "{err}"
        );
    }
    assert_eq!(loader.loads_of("10-corrupt"), 1);
    let bad = report(&pool, "bad");
    assert_eq!(
        (bad.status, bad.load_failures, bad.memory_bytes),
        (ModelStatus::Unloaded, 1, 0)
    );
    assert!(bad.last_error.unwrap().contains("truncated"));
    pool.load("good").await.unwrap();
    assert_eq!(pool.snapshot().used_bytes, 10 * MIB);
    assert!(
        pool.load("bad").await.is_err(),
        "the next request tries again"
    );
    assert_eq!(loader.loads_of("10-corrupt"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_recently_used_idle_model_is_unloaded_to_make_room() {
    let (pool, loader) = three_models(false);
    pool.load("a").await.unwrap();
    pool.load("b").await.unwrap();
    drop(pool.acquire("a").await.unwrap()); // a is now more recent than b
    pool.load("c").await.unwrap();
    assert_eq!(status(&pool, "a"), ModelStatus::Loaded);
    assert_eq!(status(&pool, "b"), ModelStatus::Unloaded);
    assert_eq!(status(&pool, "c"), ModelStatus::Loaded);
    assert_eq!(report(&pool, "b").unloads, 1);
    assert_eq!(pool.snapshot().used_bytes, 80 * MIB);
    pool.load("b").await.unwrap();
    assert_eq!(
        status(&pool, "a"),
        ModelStatus::Unloaded,
        "a was older than c"
    );
    assert_eq!(loader.loads_of("40-b"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_model_is_never_unloaded() {
    let (pool, _) = three_models(true);
    pool.load("a").await.unwrap();
    for _ in 0..3 {
        pool.load("b").await.unwrap();
        pool.load("c").await.unwrap();
    }
    assert_eq!(status(&pool, "a"), ModelStatus::Loaded);
    assert_eq!(report(&pool, "a").unloads, 0);
    let err = pool.unload("a").await.unwrap_err();
    assert!(matches!(err, PoolError::Pinned(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinning_at_run_time_keeps_a_model_until_it_is_unpinned() {
    let (pool, _) = three_models(false);
    pool.load("a").await.unwrap();
    pool.set_pinned("a", true).unwrap();
    assert!(report(&pool, "a").pinned);
    // Neither room for newer models nor an admin unload takes it out.
    for _ in 0..2 {
        pool.load("b").await.unwrap();
        pool.load("c").await.unwrap();
    }
    assert_eq!(status(&pool, "a"), ModelStatus::Loaded);
    let err = pool.unload("a").await.unwrap_err();
    assert!(matches!(err, PoolError::Pinned(_)), "{err}");
    assert!(err.to_string().contains("unpin"), "{err}");
    pool.set_pinned("a", false).unwrap();
    assert!(!report(&pool, "a").pinned);
    pool.unload("a").await.unwrap();
    assert_eq!(status(&pool, "a"), ModelStatus::Unloaded);
    // Pinning an unloaded model does not load it; unknown ids are an error.
    pool.set_pinned("a", true).unwrap();
    assert_eq!(status(&pool, "a"), ModelStatus::Unloaded);
    assert!(matches!(
        pool.set_pinned("nope", true),
        Err(PoolError::UnknownModel(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_in_use_is_never_unloaded_and_no_room_is_a_clear_error() {
    let (pool, _) = three_models(false);
    let a = pool.acquire("a").await.unwrap();
    let b = pool.acquire("b").await.unwrap();
    let err = pool.acquire("c").await.unwrap_err();
    assert!(matches!(err, PoolError::NoRoom { .. }), "{err}");
    assert!(err.to_string().contains("--max-memory"), "{err}");
    assert_eq!(status(&pool, "c"), ModelStatus::Unloaded);
    assert_eq!(pool.snapshot().used_bytes, 80 * MIB);
    drop(b);
    pool.load("c").await.unwrap();
    assert_eq!(status(&pool, "b"), ModelStatus::Unloaded);
    assert_eq!(status(&pool, "a"), ModelStatus::Loaded);
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_blocked_by_a_busy_model_waits_for_it_to_go_idle() {
    let (pool, _) = three_models(false);
    let a = pool.acquire("a").await.unwrap();
    let b = pool.acquire("b").await.unwrap();
    let load_c = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.load("c").await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(status(&pool, "c"), ModelStatus::Loading);
    drop(b);
    load_c.await.unwrap().unwrap();
    assert_eq!(status(&pool, "b"), ModelStatus::Unloaded);
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_unload_refuses_busy_models_and_frees_idle_ones() {
    let (pool, _) = three_models(false);
    let lease = pool.acquire("a").await.unwrap();
    let err = pool.unload("a").await.unwrap_err();
    assert!(matches!(err, PoolError::Busy { requests: 1, .. }), "{err}");
    let engine = lease.model().engine.clone();
    drop(lease);
    pool.unload("a").await.unwrap();
    assert!(!engine.is_alive(), "the engine thread has exited");
    let snap = pool.snapshot();
    assert_eq!((snap.used_bytes, snap.loaded_models), (0, 0));
    assert_eq!(report(&pool, "a").unloads, 1);
    pool.unload("a").await.unwrap();
    assert_eq!(
        report(&pool, "a").unloads,
        1,
        "unloading an unloaded model is a no-op"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_count_limit_evicts_even_with_memory_to_spare() {
    let loader = Arc::new(FakeLoader::default());
    let specs = vec![spec("a", "1-a", false), spec("b", "1-b", false)];
    let budget = Budget {
        max_memory_bytes: 100 * MIB,
        max_models: Some(1),
        wait_for_idle: Duration::ZERO,
        load_timeout: Duration::from_secs(60),
    };
    let pool = ModelPool::new(specs, loader, budget).unwrap();
    pool.load("a").await.unwrap();
    pool.load("b").await.unwrap();
    assert_eq!(status(&pool, "a"), ModelStatus::Unloaded);
    assert_eq!(pool.snapshot().loaded_models, 1);
}

#[test]
fn duplicate_ids_are_refused() {
    let err = ModelPool::new(
        vec![spec("a", "1-a", false), spec("a", "1-b", false)],
        Arc::new(FakeLoader::default()),
        Budget {
            max_memory_bytes: MIB,
            max_models: None,
            wait_for_idle: Duration::ZERO,
            load_timeout: Duration::from_secs(60),
        },
    )
    .unwrap_err();
    assert!(matches!(err, RegisterError::DuplicateId(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_shutdown_requests_are_refused_and_engines_stop() {
    let (pool, _) = three_models(false);
    pool.load("a").await.unwrap();
    let engines = pool.shutdown();
    assert_eq!(engines.len(), 1);
    assert!(matches!(
        pool.acquire("a").await,
        Err(PoolError::ShuttingDown)
    ));
}
