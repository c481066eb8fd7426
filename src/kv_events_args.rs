//! `sluice serve`'s KV event flags (`--kv-events` and friends): publish the prefix cache's
//! changes in vLLM's format for a prefix-aware router.

use std::sync::Arc;

use sluice_kv_events::{Encoding, KvEventsOptions, ZmqKvEvents};

/// `--kv-events-encoding` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EncodingArg {
    /// Each event a tagged array (vLLM up to 0.23; every consumer decodes it).
    Array,
    /// Each event a tagged map (vLLM since its PR 42892).
    Map,
}

/// KV event flags.
#[derive(Debug, Clone, clap::Args)]
pub struct KvEventsArgs {
    /// Publish KV cache events (blocks stored in and removed from the prefix cache, in memory
    /// and on the disk tier) in vLLM's format on a ZMQ PUB socket bound here, e.g.
    /// `tcp://*:5557`. Topics are `kv@<pod>@<model>`; the events carry prompts' token ids.
    #[arg(long, value_name = "ENDPOINT")]
    pub kv_events: Option<String>,
    /// Answer replay requests ("the batches from sequence N") on a ZMQ ROUTER bound here, e.g.
    /// `tcp://*:5558`, so a subscriber that missed batches can fetch them.
    #[arg(long, value_name = "ENDPOINT", requires = "kv_events")]
    pub kv_events_replay: Option<String>,
    /// The pod name in KV event topics (default: the host name). llm-d's precise prefix-cache
    /// scorer looks pods up by `<pod IP>:<port>`: give it that.
    #[arg(long, value_name = "NAME", requires = "kv_events")]
    pub kv_events_pod: Option<String>,
    /// How events are laid out in a batch.
    #[arg(long, value_enum, default_value_t = EncodingArg::Array, requires = "kv_events")]
    pub kv_events_encoding: EncodingArg,
}

impl KvEventsArgs {
    /// Binds the sockets and starts publishing, when `--kv-events` is given.
    pub fn start(&self) -> anyhow::Result<Option<Arc<ZmqKvEvents>>> {
        let Some(endpoint) = &self.kv_events else {
            return Ok(None);
        };
        let pod = match &self.kv_events_pod {
            Some(pod) => pod.clone(),
            None => host_name(),
        };
        anyhow::ensure!(
            !pod.is_empty() && !pod.contains('@'),
            "--kv-events-pod must be non-empty and must not contain '@' (topics are kv@<pod>@<model>)"
        );
        let mut options = KvEventsOptions::new(endpoint, pod);
        options.replay_endpoint = self.kv_events_replay.clone();
        options.encoding = match self.kv_events_encoding {
            EncodingArg::Array => Encoding::Array,
            EncodingArg::Map => Encoding::Map,
        };
        Ok(Some(ZmqKvEvents::start(&options)?))
    }
}

/// This machine's host name (a pod's name in Kubernetes).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}
