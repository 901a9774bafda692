//! HTTP plumbing, the same for every front: the accept loop ([`listen`]), the upstream
//! client ([`upstream`]), request bodies, ids and panics ([`http`]), the one error type
//! ([`error::GatewayError`], mapped to a status and OpenAI's error body), and the routes
//! that belong to no front (health, readiness, metrics, the model list passed through).
//!
//! Knows no API's request or response body and nothing of the mending: it imports
//! neither `pipeline` nor a front.

pub(crate) mod access;
pub(crate) mod auth;
pub(crate) mod error;
pub(crate) mod headers;
pub(crate) mod http;
pub(crate) mod listen;
pub(crate) mod ready;
pub(crate) mod upstream;

use std::sync::Arc;

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use metrics_exporter_prometheus::PrometheusHandle;

use self::upstream::Upstream;

/// What the front-less routes need.
#[derive(Debug, Clone)]
pub(crate) struct Plumbing {
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) metrics: Option<PrometheusHandle>,
    /// The guard's Redis store and its fail mode, when the guard has one (see [`readyz`]).
    pub(crate) readiness: Option<ready::StoreHealth>,
    /// `/metrics` is served on `access.admin_listen`, not on the main listener.
    pub(crate) admin_elsewhere: bool,
}

/// `GET /v1/models` (passed through), `/healthz`, `/readyz`, `/metrics`.
pub(crate) fn routes(state: Plumbing) -> Router {
    Router::new()
        .route("/v1/models", get(models))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .with_state(Arc::new(state))
}

/// The admin listener's routes (`access.admin_listen`): `/metrics`, `/healthz`, `/readyz`.
pub(crate) fn admin_routes(mut state: Plumbing) -> Router {
    state.admin_elsewhere = false;
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .with_state(Arc::new(state))
}

/// Without a Redis guard store, "ok". With one, its state in JSON
/// (`{"status": "ready" | "degraded" | "not_ready", "guard_store": {…}}`): 200 `ready`
/// while connected; 200 `degraded` while not connected and the guard fails open (the
/// shared limits do nothing meanwhile); 503 `not_ready` while not connected and the guard
/// fails closed: such a gateway would refuse every call, so a load balancer should send
/// its traffic elsewhere. `/healthz` stays "ok" (the process is alive).
async fn readyz(State(s): State<Arc<Plumbing>>) -> Response {
    match &s.readiness {
        Some(health) => {
            let (status, body) = health.report();
            (status, axum::Json(body)).into_response()
        }
        None => "ok".into_response(),
    }
}

async fn render_metrics(State(s): State<Arc<Plumbing>>) -> Response {
    if s.admin_elsewhere {
        return error::GatewayError::NotFound {
            code: "unknown_route",
            message: "GET /metrics is served on the admin listener (access.admin_listen), \
                      not on this one"
                .to_owned(),
        }
        .into_response();
    }
    match &s.metrics {
        Some(h) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            h.render(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "metrics are not installed").into_response(),
    }
}

async fn models(State(s): State<Arc<Plumbing>>, headers: HeaderMap) -> Response {
    match s.upstream.pass_get("/models", &headers).await {
        Ok(f) => f.into_response(),
        Err(e) => e.into_response(),
    }
}
