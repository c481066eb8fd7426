use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use super::*;

#[test]
fn encodings_get_what_the_step_target_leaves_and_at_least_half_the_time() {
    let ms = Duration::from_millis;
    assert_eq!(encoder_slice(ms(50), Some(ms(250))), ms(200));
    assert_eq!(encoder_slice(ms(200), Some(ms(250))), ms(200));
    assert_eq!(encoder_slice(ms(600), Some(ms(250))), ms(600));
    assert_eq!(encoder_slice(ms(90), None), ms(90));
}

/// An encoding of units of `unit` each, counted, until `stop`.
fn encoding(
    gate: &Arc<EncodeGate>,
    unit: Duration,
    units: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    let turn = gate.enter();
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            turn.point();
            thread::sleep(unit);
            units.fetch_add(1, Ordering::SeqCst);
        }
    })
}

#[test]
fn a_closed_gate_stops_encodings_at_their_next_point_and_a_share_lets_them_run() {
    let gate = EncodeGate::new();
    let (units, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let worker = encoding(&gate, Duration::from_millis(2), units.clone(), stop.clone());
    assert_eq!(gate.active(), 1);
    // Open: it runs.
    thread::sleep(Duration::from_millis(30));
    assert!(units.load(Ordering::SeqCst) > 0);
    // Closed: no unit starts until the gate opens again.
    gate.close();
    let stopped_at = units.load(Ordering::SeqCst);
    thread::sleep(Duration::from_millis(40));
    assert_eq!(units.load(Ordering::SeqCst), stopped_at, "ran while closed");
    // A share of 40 ms: it runs, and the share is waited out.
    let started = Instant::now();
    gate.share(Duration::from_millis(40));
    assert!(started.elapsed() >= Duration::from_millis(40));
    gate.close();
    let after_share = units.load(Ordering::SeqCst);
    assert!(after_share > stopped_at, "no unit in the share");
    thread::sleep(Duration::from_millis(20));
    assert_eq!(
        units.load(Ordering::SeqCst),
        after_share,
        "ran after the share"
    );
    // Open again (the engine idle): it runs freely.
    gate.open();
    thread::sleep(Duration::from_millis(30));
    assert!(units.load(Ordering::SeqCst) > after_share);
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    // Its turn is dropped with its thread: nothing to wait for.
    assert_eq!(gate.active(), 0);
    gate.close();
    let started = Instant::now();
    gate.share(Duration::from_secs(10));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "shared with nobody"
    );
}

#[test]
fn closing_waits_for_the_unit_in_flight() {
    let gate = EncodeGate::new();
    let turn = gate.enter();
    let finished = Arc::new(AtomicBool::new(false));
    let in_unit = Arc::new(AtomicBool::new(false));
    let worker = {
        let (finished, in_unit) = (finished.clone(), in_unit.clone());
        thread::spawn(move || {
            turn.point();
            in_unit.store(true, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(50));
            finished.store(true, Ordering::SeqCst);
            turn.point();
        })
    };
    while !in_unit.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    let waited = gate.close();
    assert!(
        finished.load(Ordering::SeqCst),
        "closed before the unit ended"
    );
    assert!(waited > Duration::from_millis(10), "waited {waited:?}");
    // A share ends early when the encoding finishes.
    let started = Instant::now();
    gate.share(Duration::from_secs(10));
    assert!(started.elapsed() < Duration::from_secs(5));
    worker.join().unwrap();
    assert_eq!(gate.active(), 0);
}
