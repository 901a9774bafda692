//! The HTTP client of MCP servers over streamable HTTP, as rmcp sees it: our reqwest
//! client ([`crate::http::mcp_client`]), with every error it gives rmcp stripped of its
//! URL. rmcp prints its transport's errors in its own log lines (`worker quit with
//! fatal: …` at ERROR, `sse stream error: …`), and reqwest's errors print the URL, query
//! and userinfo included (`?key=…`, where hosted MCP servers put API keys); with the URL
//! taken out of the error, no line of rmcp's can carry it.

use std::{collections::HashMap, sync::Arc};

use futures::StreamExt;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::{
    model::ClientJsonRpcMessage,
    transport::{
        common::client_side_sse::BoxedSseResponse,
        streamable_http_client::{
            SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
            StreamableHttpResponseLimits,
        },
    },
};

/// [`reqwest::Client`] whose errors carry no URL (see the module).
#[derive(Clone)]
pub(crate) struct UrlFreeClient(pub(crate) reqwest::Client);

type HttpError = StreamableHttpError<reqwest::Error>;

/// The error without a URL: reqwest's own (`without_url`), at the top or inside an SSE
/// error.
fn strip(e: HttpError) -> HttpError {
    match e {
        StreamableHttpError::Client(e) => StreamableHttpError::Client(e.without_url()),
        StreamableHttpError::Sse(e) => StreamableHttpError::Sse(strip_sse(e)),
        other => other,
    }
}

fn strip_sse(e: SseError) -> SseError {
    match e {
        SseError::Body(inner) => match inner.downcast::<reqwest::Error>() {
            Ok(r) => SseError::Body(Box::new(r.without_url())),
            Err(other) => SseError::Body(other),
        },
        other => other,
    }
}

fn strip_stream(stream: BoxedSseResponse) -> BoxedSseResponse {
    stream.map(|item| item.map_err(strip_sse)).boxed()
}

fn strip_post(r: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
    match r {
        StreamableHttpPostResponse::Sse(stream, session) => {
            StreamableHttpPostResponse::Sse(strip_stream(stream), session)
        }
        other => other,
    }
}

impl StreamableHttpClient for UrlFreeClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.0
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await
            .map(strip_post)
            .map_err(strip)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map(strip_post)
            .map_err(strip)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
            .map(strip_post)
            .map_err(strip)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
            .map_err(strip)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, HttpError> {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
            .map(strip_stream)
            .map_err(strip)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, HttpError> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map(strip_stream)
            .map_err(strip)
    }
}
