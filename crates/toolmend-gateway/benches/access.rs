//! What the client-key check (`[access]`) costs a request: the same request through the
//! whole router (the way in, the route, its 400 answer to a body that is not JSON, so no
//! upstream is involved) on a gateway without client keys, then with 1 and with 100
//! configured (the key presented is the last one's: every hash is compared anyway). The
//! difference is one SHA-256 of the key and N constant-time 32-byte compares, plus the
//! key headers removed and the client's counter.
//!
//! `cargo bench -p toolmend-gateway --bench access`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{hint::black_box, sync::Arc};

use axum::{body::Body, http::Request};
use criterion::{Criterion, criterion_group, criterion_main};
use toolmend_gateway::{Config, Gateway, sha256_hex};
use tower::ServiceExt as _;

const KEY: &str = "tmk_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn router(clients: usize) -> axum::Router {
    let mut toml = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n".to_owned();
    for i in 0..clients {
        let key = if i + 1 == clients {
            KEY.to_owned()
        } else {
            format!("{KEY}-{i}")
        };
        toml.push_str(&format!(
            "[[access.clients]]\nname = \"c{i}\"\nkey_sha256 = \"{}\"\n",
            sha256_hex(key.as_bytes())
        ));
    }
    let config = Config::from_toml_and_env(&toml, Vec::new()).unwrap();
    Arc::new(Gateway::new(config, None).unwrap()).router()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("access");
    for (name, clients) in [("no client keys", 0), ("1 client", 1), ("100 clients", 100)] {
        let _guard = rt.enter();
        let r = router(clients);
        g.bench_function(name, |b| {
            b.iter(|| {
                let req = Request::post("/v1/chat/completions")
                    .header("authorization", format!("Bearer {KEY}"))
                    .header("content-type", "application/json")
                    .body(Body::from("{"))
                    .unwrap();
                let resp = rt.block_on(r.clone().oneshot(req)).unwrap();
                assert_eq!(resp.status(), 400);
                black_box(resp);
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
