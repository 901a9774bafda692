//! A throwaway `redis-server` on a free loopback port, killed on drop; one with TLS only
//! (certificates made at test time by the `openssl` command line).
//!
//! Shared by `#[path]` with this crate's bench and with the gateway's and the CLI's tests,
//! which each use a part of it: what one of them leaves unused is not dead.
#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

/// How long a wait for something that must happen may last (a server up, a cluster ok, a
/// command's answer): far longer than it takes on a loaded machine, so reaching it means it
/// will not happen.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// One server.
#[derive(Debug)]
pub struct Redis {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    extra: Vec<String>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Redis {
    /// Starts a server (persistence off), waiting until it answers PING.
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// Starts a server with extra arguments (e.g. cluster mode).
    pub fn start_with(extra: &[&str]) -> Redis {
        for _ in 0..5 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("toolmend-redis-{}-{port}", std::process::id()));
            let _ = std::fs::create_dir_all(&dir);
            let mut r = Redis {
                port,
                child: None,
                dir,
                extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            };
            if r.spawn() {
                return r;
            }
        }
        panic!("could not start redis-server on a free loopback port");
    }

    fn spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-server is not on PATH: install Debian's `redis-server` package \
                 (apt-get install redis-server; scripts/test installs it). These tests \
                 need a real Redis and do not skip."
            ),
            Err(e) => panic!("could not run redis-server: {e}"),
        };
        self.child = Some(child);
        let until = Instant::now() + PATIENCE;
        while Instant::now() < until {
            if self.try_cmd(&["PING"]).is_some_and(|r| r == "PONG") {
                return true;
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(_)) = c.try_wait()
            {
                self.child = None;
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop();
        false
    }

    /// The server's process id (while it runs).
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .expect("a running server")
    }

    /// Freezes the server (SIGSTOP): its connections stay open and nothing answers.
    pub fn freeze(&self) {
        signal(self.pid(), "-STOP");
    }

    /// Thaws a frozen server (SIGCONT).
    pub fn thaw(&self) {
        signal(self.pid(), "-CONT");
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (SIGKILL: no goodbye to the clients).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        let until = Instant::now() + PATIENCE;
        while Instant::now() < until {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not restart on port {}", self.port);
    }

    /// One command on a fresh connection: the reply as text (status, integer or bulk), or
    /// `None` when the server is not there.
    pub fn try_cmd(&self, args: &[&str]) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(PATIENCE)).ok()?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).ok()?;
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        let line = line.trim_end().to_owned();
        match line.as_bytes().first()? {
            b'$' => {
                let n: usize = line[1..].parse().ok()?;
                let mut buf = vec![0; n + 2];
                r.read_exact(&mut buf).ok()?;
                buf.truncate(n);
                String::from_utf8(buf).ok()
            }
            _ => Some(line[1..].to_owned()),
        }
    }

    /// One command; panics when the server does not answer.
    pub fn cmd(&self, args: &[&str]) -> String {
        self.try_cmd(args)
            .unwrap_or_else(|| panic!("redis on {} did not answer {args:?}", self.port))
    }

    /// `calls=` of one command in `INFO commandstats` (0 before its first call).
    pub fn calls_of(&self, command: &str) -> u64 {
        let info = self.cmd(&["INFO", "commandstats"]);
        let tag = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|l| l.strip_prefix(&tag))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill(1)");
    assert!(st.success(), "kill {sig} {pid}");
}

/// Three primaries on loopback, slots spread by `redis-cli --cluster create`, killed on
/// drop.
#[derive(Debug)]
pub struct Cluster {
    pub nodes: Vec<Redis>,
}

impl Cluster {
    /// Starts three `--cluster-enabled` servers and makes a cluster of them (no
    /// replicas), waiting until every node says `cluster_state:ok`.
    pub fn start() -> Cluster {
        let nodes: Vec<Redis> = (0..3)
            .map(|_| {
                Redis::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli (Debian's redis-tools, a dependency of redis-server)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let until = Instant::now() + PATIENCE;
        for n in &nodes {
            while !n
                .try_cmd(&["CLUSTER", "INFO"])
                .is_some_and(|i| i.contains("cluster_state:ok"))
            {
                assert!(Instant::now() < until, "the cluster never became ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Cluster { nodes }
    }

    /// `redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The node that serves `key`'s slot.
    pub fn node_of(&self, key: &str) -> &Redis {
        let slot: u64 = self.nodes[0]
            .cmd(&["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("a slot");
        self.nodes
            .iter()
            .find(|n| {
                // A node serving the slot answers an EXISTS for the key; the others MOVED.
                n.try_cmd(&["EXISTS", key])
                    .is_some_and(|r| !r.starts_with("MOVED"))
            })
            .unwrap_or_else(|| panic!("no node serves slot {slot}"))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        // A frozen server would not die of SIGKILL's wait... it does; thaw anyway so
        // `wait` returns at once.
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A throwaway PKI in a directory, made by the `openssl` command line (P-256 keys, valid
/// two days): a CA, a server certificate it signed for `127.0.0.1` and `localhost`, and a
/// second CA that signed nothing (a client that trusts only it must refuse the server).
#[derive(Debug)]
pub struct Pki {
    /// The CA that signed the server's certificate.
    pub ca: PathBuf,
    /// Another CA, unrelated (its own key and name).
    pub other_ca: PathBuf,
    /// The server's certificate and key.
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "could not run openssl ({e}): install Debian's `openssl` package \
                 (scripts/test installs it); the TLS tests make their certificates with it \
                 and do not skip"
            )
        });
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA named `cn`: `<name>.crt`, `<name>.key` in `dir`.
fn make_ca(dir: &Path, name: &str, cn: &str) {
    let cnf = format!("{name}.cnf");
    std::fs::write(
        dir.join(&cnf),
        format!(
            "[req]\ndistinguished_name = dn\nprompt = no\nx509_extensions = ext\n\
             [dn]\nCN = {cn}\n\
             [ext]\nbasicConstraints = critical,CA:TRUE\n\
             keyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n"
        ),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-config",
            &cnf,
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

impl Pki {
    /// Makes the files in `dir`.
    pub fn make(dir: &Path) -> Pki {
        make_ca(dir, "ca", "toolmend test CA");
        make_ca(dir, "other-ca", "toolmend unrelated CA");
        std::fs::write(
            dir.join("server.ext"),
            "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n\
             extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1,DNS:localhost\n\
             authorityKeyIdentifier = keyid\n",
        )
        .unwrap();
        openssl(
            dir,
            &[
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "server.ext",
                "-out",
                "server.crt",
            ],
        );
        Pki {
            ca: dir.join("ca.crt"),
            other_ca: dir.join("other-ca.crt"),
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        }
    }
}

/// A `redis-server` that speaks TLS only (`--port 0`: no plain port), on a free loopback
/// port, with `requirepass`; clients are not asked for certificates. Killed on drop.
#[derive(Debug)]
pub struct TlsRedis {
    /// The TLS port.
    pub port: u16,
    pub pki: Pki,
    password: String,
    child: Option<Child>,
    dir: PathBuf,
}

impl TlsRedis {
    /// Makes a PKI, then starts the server, waiting until it answers `PING` over TLS
    /// (`redis-cli --tls`, trusting the CA).
    pub fn start(password: &str) -> TlsRedis {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "toolmend-redis-tls-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki::make(&dir);
        let mut r = TlsRedis {
            port: 0,
            pki,
            password: password.to_owned(),
            child: None,
            dir,
        };
        for _ in 0..5 {
            r.port = free_port();
            if r.spawn() {
                return r;
            }
        }
        panic!("could not start redis-server with TLS on a free loopback port");
    }

    fn spawn(&mut self) -> bool {
        let port = self.port.to_string();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port])
            .arg("--tls-cert-file")
            .arg(&self.pki.cert)
            .arg("--tls-key-file")
            .arg(&self.pki.key)
            .arg("--tls-ca-cert-file")
            .arg(&self.pki.ca)
            .args(["--tls-auth-clients", "no"])
            .args(["--requirepass", &self.password])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian's package, built with TLS)");
        self.child = Some(child);
        let until = Instant::now() + PATIENCE;
        while Instant::now() < until {
            if self.try_cli(&["PING"]).is_some_and(|r| r == "PONG") {
                return true;
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(_)) = c.try_wait()
            {
                // Exited: most likely the port was taken meanwhile.
                self.child = None;
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop();
        false
    }

    /// The CA's PEM (what [`toolmend_redis::RedisOptions::tls_ca_pem`] takes).
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(&self.pki.ca).unwrap()
    }

    /// The unrelated CA's PEM.
    pub fn other_ca_pem(&self) -> Vec<u8> {
        std::fs::read(&self.pki.other_ca).unwrap()
    }

    /// `rediss://:<password>@127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("rediss://:{}@127.0.0.1:{}/", self.password, self.port)
    }

    /// One command through `redis-cli --tls` (trusting the CA, with the password): its
    /// output trimmed, or `None` when it fails.
    pub fn try_cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["--tls", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .arg("--cacert")
            .arg(&self.pki.ca)
            .args(["--no-auth-warning", "-a", &self.password])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli (Debian's redis-tools, a dependency of redis-server)");
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (out.status.success() && !text.starts_with("ERR") && !text.is_empty()).then_some(text)
    }

    /// One command over TLS; panics when it fails.
    pub fn cli(&self, args: &[&str]) -> String {
        self.try_cli(args)
            .unwrap_or_else(|| panic!("redis-cli --tls on {} failed: {args:?}", self.port))
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------- the checks a test admits

/// A window check (the session window's rule) of `limit` calls per `ms`.
pub fn window(
    scope: toolmend::guard::store::Scope,
    limit: u64,
    ms: u64,
) -> toolmend::guard::store::Check {
    toolmend::guard::store::Check {
        rule: toolmend::guard::Rule::SessionWindow,
        scope,
        limit,
        window_ms: Some(ms),
        shadow: false,
    }
}

/// A budget check (the thread limit's rule) of `limit` calls.
pub fn budget(scope: toolmend::guard::store::Scope, limit: u64) -> toolmend::guard::store::Check {
    toolmend::guard::store::Check {
        rule: toolmend::guard::Rule::ThreadLimit,
        scope,
        limit,
        window_ms: None,
        shadow: false,
    }
}

/// One call of a message, with its checks.
pub fn call(
    id: &str,
    checks: Vec<toolmend::guard::store::Check>,
) -> toolmend::guard::store::AdmitCall {
    toolmend::guard::store::AdmitCall {
        call_id: id.to_owned(),
        checks,
    }
}
