//! A TCP link between an operator under test and an API server, which a test can cut: the
//! outage of that server as its clients see it (open connections closed, new ones closed as
//! soon as they are accepted), without stopping the server the other tests and the harness
//! use. The link forwards bytes and knows nothing of TLS, so the server's certificate (for
//! 127.0.0.1) still verifies.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A cuttable link to one API server.
pub struct Link {
    local: SocketAddr,
    up: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Link {
    /// A link to `upstream` (`host:port`), listening on a free port of 127.0.0.1.
    pub async fn to(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("binding a local port for the link to {upstream}: {e}"));
        let local = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the link's local address: {e}"));
        let (up, _) = watch::channel(true);
        let state = up.clone();
        let upstream = upstream.to_owned();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !*state.borrow() {
                    // Cut: the connection ends at once, as with a server that is not there.
                    drop(inbound);
                    continue;
                }
                let mut down = state.subscribe();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = down.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Self { local, up, task }
    }

    /// The link to the server of `url` (an `https://host:port` API server address).
    pub async fn to_server(url: &http::Uri) -> Self {
        let authority = url
            .authority()
            .unwrap_or_else(|| panic!("the API server address {url} has no host and port"));
        Self::to(authority.as_str()).await
    }

    /// The address clients use instead of the server's.
    pub fn url(&self) -> http::Uri {
        format!("https://{}", self.local)
            .parse()
            .unwrap_or_else(|e| panic!("the link's address: {e}"))
    }

    /// Cuts the link: every open connection is closed, and every new one too, until
    /// [`Link::restore`].
    pub fn cut(&self) {
        self.up.send_replace(false);
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.up.send_replace(true);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.up.send_replace(false);
        self.task.abort();
    }
}
