//! What the gateway's test binaries share.

use std::{net::SocketAddr, sync::Arc};

use toolmend_gateway::Gateway;

/// Serves `gateway` on a free 127.0.0.1 port for the rest of the test; its address.
pub async fn serve(gateway: Arc<Gateway>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(toolmend_gateway::serve(
        listener,
        gateway,
        std::future::pending(),
    ));
    addr
}
