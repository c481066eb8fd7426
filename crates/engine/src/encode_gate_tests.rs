use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use super::*;

/// An encoding of units of 1 ms each, counted, until `stop`.
fn encoding(
    turn: EncoderTurn,
    units: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            turn.point();
            thread::sleep(Duration::from_millis(1));
            units.fetch_add(1, Ordering::SeqCst);
        }
    })
}

/// Whether `units` grows within 50 ms.
fn grows(units: &AtomicUsize) -> bool {
    let before = units.load(Ordering::SeqCst);
    thread::sleep(Duration::from_millis(50));
    units.load(Ordering::SeqCst) > before
}

#[test]
fn beside_steps_only_the_oldest_encoding_runs_and_all_run_when_the_engine_is_idle() {
    let gate = EncodeGate::new();
    let stop = Arc::new(AtomicBool::new(false));
    let counters: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::default()).collect();
    let workers: Vec<_> = (counters.iter())
        .map(|units| encoding(gate.enter(), Arc::clone(units), Arc::clone(&stop)))
        .collect();
    assert_eq!(gate.active(), 3);
    // No step to run: every encoding runs.
    assert!(counters.iter().all(|units| grows(units)));
    // Steps to run: the oldest goes on, the others wait at their next point.
    gate.set_busy(true);
    thread::sleep(Duration::from_millis(10));
    assert!(grows(&counters[0]));
    assert!(!grows(&counters[1]) && !grows(&counters[2]));
    assert!(gate.pauses() >= 2);
    // Idle again: all run.
    gate.set_busy(false);
    assert!(counters.iter().all(|units| grows(units)));
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }
    assert_eq!(gate.active(), 0);
}

#[test]
fn the_next_oldest_runs_when_the_one_beside_the_steps_finishes() {
    let gate = EncodeGate::new();
    gate.set_busy(true);
    let first = gate.enter();
    let (units, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let second = encoding(gate.enter(), Arc::clone(&units), Arc::clone(&stop));
    first.point();
    assert!(!grows(&units), "ran beside the steps and an older encoding");
    drop(first);
    assert!(grows(&units));
    stop.store(true, Ordering::Relaxed);
    second.join().unwrap();
}
