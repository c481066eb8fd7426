use std::time::Duration;

use sluice_engine::block_manager::{BlockHash, KvEvent};
use sluice_engine::kv_events::{KvEventPublisher, KvEventStats, KvEventStream, Medium};
use sluice_model::KvSpan;
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, SubSocket, ZmqMessage};

use super::*;

fn stored(key: u64) -> KvEvent {
    KvEvent::Stored {
        group: 0,
        block_hashes: vec![BlockHash(key)],
        parent: None,
        token_ids: vec![1, 2],
        block_size: 2,
    }
}

fn options() -> KvEventsOptions {
    let mut o = KvEventsOptions::new("tcp://127.0.0.1:0", "pod-a");
    o.replay_endpoint = Some("tcp://127.0.0.1:0".into());
    o
}

#[test]
fn bad_and_taken_endpoints_are_clear_errors() {
    for (endpoint, why) in [
        ("ipc:///tmp/x", "only tcp://"),
        ("tcp://127.0.0.1", "expected tcp://HOST:PORT"),
        ("tcp://127.0.0.1:99999", "port is not a number"),
    ] {
        let err = ZmqKvEvents::start(&KvEventsOptions::new(endpoint, "p")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("--kv-events") && text.contains(why), "{text}");
    }
    let first = ZmqKvEvents::start(&options()).unwrap();
    let taken = format!("tcp://127.0.0.1:{}", first.local_addr().port());
    let err = ZmqKvEvents::start(&KvEventsOptions::new(&taken, "p")).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&taken) && text.contains("cannot bind"),
        "{text}"
    );
    let mut replay_taken = KvEventsOptions::new("tcp://127.0.0.1:0", "p");
    replay_taken.replay_endpoint = Some(taken.clone());
    let text = ZmqKvEvents::start(&replay_taken).unwrap_err().to_string();
    assert!(text.starts_with("--kv-events-replay"), "{text}");
}

#[test]
fn a_full_queue_drops_and_counts_without_blocking() {
    let (tx, _rx) = tokio::sync::mpsc::channel(1);
    let stream = publisher::TopicStream {
        topic: Arc::new(Topic::new("kv@p@m".into(), &[KvSpan::Full])),
        queue: tx,
    };
    assert!(stream.publish(Medium::Memory, vec![stored(1), stored(2)]));
    assert!(!stream.publish(Medium::Memory, vec![stored(3)]));
    assert!(!stream.publish(Medium::Disk, vec![stored(4)]));
    assert_eq!(
        stream.stats(),
        KvEventStats {
            events: 2,
            dropped: 2
        }
    );
}

/// Three frames per message, sequence numbers per topic from 0, the replay socket answering
/// from a sequence number and ending with -1.
#[test]
fn subscribers_receive_batches_and_replay_fills_gaps() {
    let events = ZmqKvEvents::start(&options()).unwrap();
    let a = events.stream("model-a", &[KvSpan::Full]);
    let b = events.stream("model-b", &[KvSpan::Full, KvSpan::Window(8)]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut sub = SubSocket::new();
        sub.connect(&format!("tcp://{}", events.local_addr()))
            .await
            .unwrap();
        sub.subscribe("kv@pod-a@model-a").await.unwrap();
        // A subscription reaches the publisher asynchronously: publish until one arrives.
        let first = loop {
            a.publish(Medium::Memory, vec![stored(0)]);
            let got = tokio::time::timeout(Duration::from_millis(100), sub.recv()).await;
            if let Ok(message) = got {
                break message.unwrap();
            }
        };
        let frames = first.into_vec();
        assert_eq!(frames.len(), 3);
        assert_eq!(&frames[0][..], b"kv@pod-a@model-a");
        let mut last = u64::from_be_bytes(frames[1][..].try_into().unwrap());
        b.publish(Medium::Memory, vec![stored(1)]);
        a.publish(Medium::Disk, vec![KvEvent::AllCleared]);
        let next = tokio::time::timeout(Duration::from_secs(5), sub.recv())
            .await
            .expect("a message")
            .unwrap()
            .into_vec();
        let seq = u64::from_be_bytes(next[1][..].try_into().unwrap());
        assert_eq!(seq, last + 1, "model-b's batch has its own sequence");
        last = seq;

        let mut dealer = DealerSocket::new();
        let replay = events.replay_addr().unwrap();
        dealer.connect(&format!("tcp://{replay}")).await.unwrap();
        let mut request = ZmqMessage::from(bytes::Bytes::new());
        request.push_back(bytes::Bytes::copy_from_slice(&0u64.to_be_bytes()));
        dealer.send(request).await.unwrap();
        let mut seqs = Vec::new();
        loop {
            let reply = tokio::time::timeout(Duration::from_secs(5), dealer.recv())
                .await
                .expect("a reply")
                .unwrap()
                .into_vec();
            assert_eq!(reply.len(), 3, "empty delimiter, sequence, payload");
            assert!(reply[0].is_empty());
            let seq = i64::from_be_bytes(reply[1][..].try_into().unwrap());
            seqs.push(seq);
            if seq == -1 {
                assert!(reply[2].is_empty());
                break;
            }
        }
        assert_eq!(*seqs.last().unwrap(), -1);
        assert_eq!(seqs[seqs.len() - 2], last as i64);
        let expected: Vec<i64> = (0..=last as i64).chain([-1]).collect();
        assert_eq!(seqs, expected, "every batch of model-a from 0");
    });
    events.flush(Duration::from_secs(1));
}
