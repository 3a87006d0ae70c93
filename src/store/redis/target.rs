//! What `store.url` names on Redis: one node, a Redis Cluster, or a master found through
//! Sentinel. The cluster and Sentinel forms list several hosts in one URL, so they have schemes of
//! their own:
//!
//! | form | example |
//! |------|---------|
//! | one node | `redis://[user:pass@]host:6379/0`, `rediss://…`, `redis+unix:///path` |
//! | cluster | `redis+cluster://[user:pass@]h1:6379,h2:6379,h3:6379` (`rediss+cluster://` for TLS) |
//! | Sentinel | `redis+sentinel://[user:pass@]s1:26379,s2:26379/<master name>[/<db>]` (`rediss+sentinel://`) |
//!
//! A cluster lists any of its nodes (the rest are discovered) and has no database number. The
//! credentials of the cluster and Sentinel forms are those of the data nodes; the Sentinels
//! themselves are reached without credentials, as Debian's `redis-sentinel` is set up.

/// A parsed `store.url` for Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server, by its redis-rs URL.
    Node(String),
    /// A cluster, by the URLs of its seed nodes.
    Cluster(Vec<String>),
    /// A master found through Sentinel.
    Sentinel {
        /// URLs of the Sentinels (`redis://host:port`).
        sentinels: Vec<String>,
        /// The master's name, as in `sentinel monitor <name> …`.
        master: String,
        /// Logical database on the master.
        db: i64,
        /// Whether the master is reached over TLS.
        tls: bool,
        /// `user:pass` for the master, as written (percent-encoded).
        userinfo: Option<String>,
    },
}

impl RedisTarget {
    /// Parses a Redis `store.url`; the error names what is wrong without echoing a password.
    pub fn parse(url: &str) -> Result<Self, String> {
        let url = url.trim();
        if let Some(rest) = strip(url, &["redis+cluster://", "rediss+cluster://"]) {
            let tls = url.starts_with("rediss");
            let (userinfo, hosts, path) = split_authority(rest)?;
            if !path.trim_matches('/').is_empty() {
                return Err(
                    "a redis+cluster:// URL has no path: a cluster has only database 0".into(),
                );
            }
            let scheme = if tls { "rediss" } else { "redis" };
            let nodes = hosts
                .iter()
                .map(|host| node_url(scheme, userinfo, host, ""))
                .collect();
            return Ok(Self::Cluster(nodes));
        }
        if let Some(rest) = strip(url, &["redis+sentinel://", "rediss+sentinel://"]) {
            let (userinfo, hosts, path) = split_authority(rest)?;
            let mut parts = path.trim_matches('/').split('/');
            let master = parts.next().unwrap_or_default();
            if master.is_empty() {
                return Err(
                    "a redis+sentinel:// URL names the master after the hosts: redis+sentinel://host:26379/<master name>"
                        .into(),
                );
            }
            let db = match parts.next() {
                None | Some("") => 0,
                Some(db) => db
                    .parse::<i64>()
                    .ok()
                    .filter(|db| *db >= 0)
                    .ok_or_else(|| format!("database {db:?} is not a number"))?,
            };
            if parts.next().is_some() {
                return Err("a redis+sentinel:// URL's path is /<master name>[/<db>]".into());
            }
            return Ok(Self::Sentinel {
                sentinels: hosts
                    .iter()
                    .map(|host| node_url("redis", None, host, ""))
                    .collect(),
                master: master.to_owned(),
                db,
                tls: url.starts_with("rediss"),
                userinfo: userinfo.map(str::to_owned),
            });
        }
        if strip(url, &["redis://", "rediss://", "redis+unix://", "unix://"]).is_some() {
            return Ok(Self::Node(url.to_owned()));
        }
        Err(
            "a Redis store.url starts with redis://, rediss://, redis+unix://, redis+cluster://, \
             rediss+cluster://, redis+sentinel:// or rediss+sentinel://"
                .into(),
        )
    }

    /// The URL of the master at `host:port`, for the Sentinel form.
    pub(super) fn master_url(&self, host: &str, port: u16) -> Option<String> {
        let Self::Sentinel {
            db, tls, userinfo, ..
        } = self
        else {
            return None;
        };
        let scheme = if *tls { "rediss" } else { "redis" };
        let host = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Some(node_url(
            scheme,
            userinfo.as_deref(),
            &host,
            &format!("/{db}"),
        ))
    }
}

/// The rest of `url` after the first of `schemes` it starts with.
fn strip<'a>(url: &'a str, schemes: &[&str]) -> Option<&'a str> {
    schemes.iter().find_map(|scheme| url.strip_prefix(scheme))
}

/// Splits `[userinfo@]h1:p1,h2:p2[/path]` into its parts; every host needs a port.
fn split_authority(rest: &str) -> Result<(Option<&str>, Vec<&str>, &str), String> {
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) if rest[at..].starts_with('?') => {
            return Err("query parameters are not supported in this URL form".into());
        }
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
    for host in &hosts {
        let port = host.rsplit_once(':').map(|(_, port)| port);
        if port.is_none_or(|p| p.parse::<u16>().is_err()) {
            return Err(format!("every host needs a port (host:port), got {host:?}"));
        }
    }
    Ok((userinfo, hosts, path))
}

/// A one-node URL.
fn node_url(scheme: &str, userinfo: Option<&str>, host: &str, path: &str) -> String {
    match userinfo {
        Some(userinfo) => format!("{scheme}://{userinfo}@{host}{path}"),
        None => format!("{scheme}://{host}{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_node_urls_pass_through() {
        for url in [
            "redis://127.0.0.1:6379/0",
            "rediss://h:1",
            "redis+unix:///tmp/r.sock",
        ] {
            assert_eq!(RedisTarget::parse(url), Ok(RedisTarget::Node(url.into())));
        }
    }

    #[test]
    fn a_cluster_url_lists_its_seed_nodes_with_the_credentials() {
        assert_eq!(
            RedisTarget::parse("redis+cluster://u:p%40w@a:7000, b:7001,c:7002"),
            Ok(RedisTarget::Cluster(vec![
                "redis://u:p%40w@a:7000".into(),
                "redis://u:p%40w@b:7001".into(),
                "redis://u:p%40w@c:7002".into(),
            ]))
        );
        assert_eq!(
            RedisTarget::parse("rediss+cluster://a:7000/"),
            Ok(RedisTarget::Cluster(vec!["rediss://a:7000".into()]))
        );
    }

    #[test]
    fn a_sentinel_url_names_the_master_and_database() {
        let target =
            RedisTarget::parse("redis+sentinel://:secret@s1:26379,s2:26380/mymaster/2").unwrap();
        assert_eq!(
            target,
            RedisTarget::Sentinel {
                sentinels: vec!["redis://s1:26379".into(), "redis://s2:26380".into()],
                master: "mymaster".into(),
                db: 2,
                tls: false,
                userinfo: Some(":secret".into()),
            }
        );
        assert_eq!(
            target.master_url("10.0.0.5", 6379).as_deref(),
            Some("redis://:secret@10.0.0.5:6379/2")
        );
        assert_eq!(
            target.master_url("::1", 6379).as_deref(),
            Some("redis://:secret@[::1]:6379/2")
        );
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        for (url, says) in [
            ("redis+cluster://u:hunter2@a", "needs a port"),
            ("redis+cluster://a:1/3", "database 0"),
            ("redis+cluster://a:1?x=1", "query parameters"),
            ("redis+sentinel://u:hunter2@s:26379", "names the master"),
            ("redis+sentinel://s:26379/m/x", "not a number"),
            ("redis+sentinel://s:26379/m/1/2", "path is"),
            ("memcached://x", "starts with"),
        ] {
            let error = RedisTarget::parse(url).unwrap_err();
            assert!(error.contains(says), "{url}: {error}");
            assert!(!error.contains("hunter2"), "{url}: {error}");
        }
    }
}
