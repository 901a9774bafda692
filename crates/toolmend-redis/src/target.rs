//! Where the store connects: one Redis or a cluster, read from the URL; the address as
//! it may be logged; the connection of either kind behind one type.

use redis::{
    Cmd, Pipeline, RedisFuture, Value,
    aio::{ConnectionLike, ConnectionManager},
    cluster_async::ClusterConnection,
};

use crate::ConfigError;

/// What the URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `redis://` or `rediss://`: one Redis (a primary).
    Single(String),
    /// `redis+cluster://h1:p1,h2:p2` or `rediss+cluster://…`: the seed nodes, each as a
    /// URL of its own (the userinfo and query apply to every node).
    Cluster(Vec<String>),
}

impl Target {
    /// Parses `url`; says what to write when it is not one of the forms.
    pub(crate) fn parse(url: &str) -> Result<Target, ConfigError> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(ConfigError::Url(format!(
                "{}: no scheme; write redis://host:6379/0, rediss://host:6380/0 (TLS) or \
                 redis+cluster://host1:7000,host2:7001",
                redact(url)
            )));
        };
        let lower = scheme.to_ascii_lowercase();
        // Said now: the redis crate's own error would come only from the background
        // connect, as "not connected yet" on every decision.
        if !cfg!(feature = "tls") && matches!(lower.as_str(), "rediss" | "rediss+cluster") {
            return Err(ConfigError::NoTls(redact(url)));
        }
        let base = match lower.as_str() {
            "redis" | "rediss" | "redis+unix" | "unix" => {
                return Ok(Target::Single(url.to_owned()));
            }
            "redis+cluster" => "redis",
            "rediss+cluster" => "rediss",
            other => {
                return Err(ConfigError::Url(format!(
                    "{}: unknown scheme {other:?}; write redis://, rediss:// (TLS), \
                     redis+cluster:// or rediss+cluster:// (a Redis Cluster, seed nodes \
                     separated by commas)",
                    redact(url)
                )));
            }
        };
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let (authority, path) = match rest.split_once('/') {
            Some((a, p)) => (a, p),
            None => (rest, ""),
        };
        if !path.is_empty() && path != "0" {
            return Err(ConfigError::Url(format!(
                "{}: a Redis Cluster has only database 0; drop /{path}",
                redact(url)
            )));
        }
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let nodes: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| {
                let mut n = format!("{base}://");
                if let Some(u) = userinfo {
                    n.push_str(u);
                    n.push('@');
                }
                n.push_str(h);
                n.push('/');
                if let Some(q) = query {
                    n.push('?');
                    n.push_str(q);
                }
                n
            })
            .collect();
        if nodes.is_empty() {
            return Err(ConfigError::Url(format!(
                "{}: no node; write {scheme}://host1:7000,host2:7001",
                redact(url)
            )));
        }
        for n in &nodes {
            redis::parse_redis_url(n).ok_or_else(|| {
                ConfigError::Url(format!("{}: a node does not parse", redact(url)))
            })?;
        }
        Ok(Target::Cluster(nodes))
    }
}

/// `url` as it may be logged: the scheme, hosts, ports and database; never the userinfo
/// (a password), the query or the fragment. The core's one redaction,
/// [`toolmend::redact::url`], under the name this crate has exported.
pub fn redact(url: &str) -> String {
    toolmend::redact::url(url)
}

/// A connection to one Redis (reconnecting on its own) or to a cluster (routing each
/// command by its first key, following the slots' moves).
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_logged_address_has_no_secret() {
        assert_eq!(
            redact("redis://user:s3cret@10.0.0.5:6379/2?password=x#f"),
            "redis://10.0.0.5:6379/2"
        );
        assert_eq!(
            redact("rediss+cluster://:pw@h1:7000,h2:7001/?protocol=resp3"),
            "rediss+cluster://h1:7000,h2:7001/"
        );
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn a_cluster_url_names_every_seed_node_with_its_credentials() {
        assert_eq!(
            Target::parse("redis+cluster://:pw@h1:7000, h2:7001/").unwrap(),
            Target::Cluster(vec![
                "redis://:pw@h1:7000/".to_owned(),
                "redis://:pw@h2:7001/".to_owned()
            ])
        );
        // A build without `tls` refuses rediss (the `no_tls` test below).
        if cfg!(feature = "tls") {
            assert_eq!(
                Target::parse("rediss+cluster://h1:7000").unwrap(),
                Target::Cluster(vec!["rediss://h1:7000/".to_owned()])
            );
            assert_eq!(
                Target::parse("rediss://h:6380/1").unwrap(),
                Target::Single("rediss://h:6380/1".to_owned())
            );
        }
        let e = Target::parse("redis+cluster://h1:7000/3").unwrap_err();
        assert!(e.to_string().contains("only database 0"), "{e}");
        let e = Target::parse("http://u:pw@h:1").unwrap_err();
        assert!(e.to_string().contains("unknown scheme"), "{e}");
        assert!(!e.to_string().contains("pw"), "{e}");
    }
}

/// Built without `tls` (`cargo test -p toolmend-redis --no-default-features --lib`).
#[cfg(all(test, not(feature = "tls")))]
mod no_tls {
    use crate::{ConfigError, RedisOptions, redis_guard_store};

    #[test]
    fn a_rediss_store_is_refused_when_it_is_made() {
        for (url, shown) in [
            ("rediss://:pw@h:6380/1", "rediss://h:6380/1"),
            (
                "REDISS+cluster://:pw@h1:7000,h2:7001",
                "REDISS+cluster://h1:7000,h2:7001",
            ),
        ] {
            // Outside a runtime on purpose: the URL is refused before a runtime is asked for.
            let err = redis_guard_store(url, RedisOptions::default()).err();
            assert_eq!(err, Some(ConfigError::NoTls(shown.to_owned())), "{url}");
            let text = err.map(|e| e.to_string()).unwrap_or_default();
            assert!(text.contains("this build has no TLS"), "{text}");
            assert!(text.contains("`tls` feature"), "{text}");
            assert!(!text.contains("pw"), "{text}");
        }
        // Plain redis:// is checked further (here: no runtime to connect in).
        assert_eq!(
            redis_guard_store("redis://h:6379/0", RedisOptions::default()).err(),
            Some(ConfigError::NoRuntime)
        );
    }
}
