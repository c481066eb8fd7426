//! The health probes and `GET /version`: open to orchestrators and load balancers, no API key,
//! answered during a drain too.
//!
//! - `/health/startup` (Kubernetes' startupProbe): 200 once every `--preload` model is loaded.
//! - `/health/ready` (readinessProbe): 200 while started, not draining and every engine in
//!   memory runs.
//! - `/health/live` (livenessProbe): 200 unless an engine is dead or wedged (it has work but its
//!   loop has not come round for longer than `--liveness-timeout`). A dead engine fails
//!   liveness as well as readiness: the pool would load the model again on its next request,
//!   but a pod that is not ready gets no requests, so only a restart brings it back (vLLM's
//!   `/health` answers 500 for a dead engine for the same reason).
//! - `/health`: as before, 200 while every engine in memory runs (it knows no phases).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::lifecycle::Phase;
use crate::registry::ServedModel;
use crate::AppState;

/// 200 while every engine in memory runs; 503 when one has died (or a fixed list is empty).
pub async fn health(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    state.registry.health()?;
    Ok(Json(json!({"status": "ok"})))
}

/// `GET /health/startup`: 200 `{"status":"started"}` once every `--preload` model is loaded;
/// 503 `{"status":"starting","loading":[ids]}` before.
pub async fn startup(State(state): State<AppState>) -> Response {
    let loading = state.lifecycle.loading();
    if loading.is_empty() {
        answer(StatusCode::OK, json!({"status": "started"}))
    } else {
        let body = json!({"status": "starting", "reason": "starting", "loading": loading});
        answer(StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

/// `GET /health/ready`: 200 `{"status":"ready"}`, or 503 `{"status":"not ready","reason":..}`.
pub async fn ready(State(state): State<AppState>) -> Response {
    let engines = readings(&state.registry.models());
    let verdict = readiness(&state.lifecycle.phase(), &engines)
        // What only the registry knows: a fixed list with no model serves nothing.
        .and_then(|()| state.registry.health().map_err(|e| e.to_string()));
    match verdict {
        Ok(()) => answer(StatusCode::OK, json!({"status": "ready"})),
        Err(reason) => answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "not ready", "reason": reason}),
        ),
    }
}

/// `GET /health/live`: 200 `{"status":"live"}`, or 503 naming the model whose engine is dead
/// or wedged.
pub async fn live(State(state): State<AppState>) -> Response {
    let engines = readings(&state.registry.models());
    match liveness(&engines, state.config.liveness_timeout) {
        Ok(()) => answer(StatusCode::OK, json!({"status": "live"})),
        Err(Unlive { model, reason }) => {
            tracing::warn!(model, reason, "liveness probe failed");
            answer(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "not live", "model": model, "reason": reason}),
            )
        }
    }
}

/// The server's version.
pub async fn version() -> Json<Value> {
    Json(json!({"version": env!("CARGO_PKG_VERSION")}))
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

/// What the probes read of one engine in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineReading {
    /// The model's id.
    pub model: String,
    /// False once its engine thread has exited.
    pub running: bool,
    /// While it has work: how long its loop iteration in progress has run.
    pub iteration_age: Option<Duration>,
}

fn readings(models: &[std::sync::Arc<ServedModel>]) -> Vec<EngineReading> {
    (models.iter())
        .map(|m| EngineReading {
            model: m.id.clone(),
            running: m.engine.is_alive(),
            iteration_age: m.engine.iteration_age(),
        })
        .collect()
}

/// Ready to take traffic: started, not draining, every engine running; else the reason.
pub fn readiness(phase: &Phase, engines: &[EngineReading]) -> Result<(), String> {
    match phase {
        Phase::Draining => return Err("draining".into()),
        Phase::Starting(_) => return Err("starting".into()),
        Phase::Serving => {}
    }
    match engines.iter().find(|e| !e.running) {
        Some(dead) => Err(format!("engine for model {} stopped", dead.model)),
        None => Ok(()),
    }
}

/// Why the process should be restarted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unlive {
    /// The model whose engine is dead or wedged.
    pub model: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Live unless an engine is dead, or has had work while its loop has not come round for
/// longer than `timeout`.
pub fn liveness(engines: &[EngineReading], timeout: Duration) -> Result<(), Unlive> {
    for engine in engines {
        let reason = if !engine.running {
            format!("engine for model {} stopped", engine.model)
        } else {
            match engine.iteration_age {
                Some(age) if age > timeout => format!(
                    "engine for model {} is wedged: it has work and has not finished a step in \
                     {} s (--liveness-timeout {} s)",
                    engine.model,
                    age.as_secs(),
                    timeout.as_secs()
                ),
                _ => continue,
            }
        };
        return Err(Unlive {
            model: engine.model.clone(),
            reason,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(model: &str, running: bool, age_secs: Option<u64>) -> EngineReading {
        EngineReading {
            model: model.into(),
            running,
            iteration_age: age_secs.map(Duration::from_secs),
        }
    }

    #[test]
    fn ready_only_when_serving_with_every_engine_running() {
        let fine = [engine("a", true, None), engine("b", true, Some(1))];
        assert_eq!(readiness(&Phase::Serving, &fine), Ok(()));
        assert_eq!(readiness(&Phase::Serving, &[]), Ok(()));
        let starting = Phase::Starting(vec!["a".into()]);
        assert_eq!(readiness(&starting, &fine), Err("starting".into()));
        assert_eq!(readiness(&Phase::Draining, &fine), Err("draining".into()));
        let dead = [engine("a", true, None), engine("b", false, None)];
        assert_eq!(
            readiness(&Phase::Serving, &dead),
            Err("engine for model b stopped".into())
        );
        assert_eq!(
            readiness(&Phase::Draining, &dead),
            Err("draining".into()),
            "the drain is the reason an orchestrator acts on"
        );
    }

    #[test]
    fn live_unless_an_engine_with_work_is_stuck_past_the_timeout_or_dead() {
        let timeout = Duration::from_secs(300);
        let idle_for_hours = engine("a", true, None);
        let long_step = engine("b", true, Some(299));
        assert_eq!(liveness(&[idle_for_hours, long_step], timeout), Ok(()));
        let wedged = liveness(
            &[engine("a", true, None), engine("b", true, Some(301))],
            timeout,
        )
        .unwrap_err();
        assert_eq!(wedged.model, "b");
        assert!(wedged.reason.contains("wedged"), "{}", wedged.reason);
        let dead = liveness(&[engine("c", false, None)], timeout).unwrap_err();
        assert_eq!(dead.model, "c");
        assert_eq!(dead.reason, "engine for model c stopped");
        assert_eq!(liveness(&[], timeout), Ok(()));
    }
}
