//! A minimal blocking HTTP/1.1 client over `TcpStream`, for the loopback
//! tests and `cargo xtask loadtest`: keep-alive, `Content-Length` and
//! chunked bodies, nothing else; and [`SessionClient`], which restores a
//! session the server lost (a restart, an eviction) by itself.
//!
//! An answer's head is read a bounded line at a time, a body of any kind is
//! read to a bound (1 GiB), and a body's announced length reserves bounded
//! memory before its bytes come: a misbehaving server gets an error, not a
//! client that reads without end or asks for memory it announced and never
//! sent.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An answer.
#[derive(Clone, Debug)]
pub struct ClientResponse {
    /// The status code.
    pub status: u16,
    /// Header names (lower case) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl ClientResponse {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A connection to one server, reopened when the server closed it.
pub struct Client {
    addr: SocketAddr,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    /// A client of `addr`; each read and write waits at most `timeout`.
    pub fn new(addr: SocketAddr, timeout: Duration) -> Client {
        Client {
            addr,
            timeout,
            conn: None,
        }
    }

    fn connect(&self) -> io::Result<BufReader<TcpStream>> {
        let s = TcpStream::connect_timeout(&self.addr, self.timeout)?;
        s.set_read_timeout(Some(self.timeout))?;
        s.set_write_timeout(Some(self.timeout))?;
        s.set_nodelay(true)?;
        Ok(BufReader::new(s))
    }

    /// Sends one request and reads its answer. A request on a kept-alive
    /// connection that the server had closed is retried once on a new one.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<ClientResponse> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(k);
            head.push_str(": ");
            head.push_str(v);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let reused = self.conn.is_some();
        match self.send(&head, body) {
            Ok(r) => Ok(r),
            Err(e)
                if reused
                    && matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::BrokenPipe
                    ) =>
            {
                self.conn = None;
                self.send(&head, body)
            }
            Err(e) => Err(e),
        }
    }

    /// Writes one request (its head, then its body) and reads the answer,
    /// keeping the connection unless the server says it closes it.
    fn send(&mut self, head: &str, body: &[u8]) -> io::Result<ClientResponse> {
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => self.connect()?,
        };
        {
            let s = conn.get_mut();
            s.write_all(head.as_bytes())?;
            s.write_all(body)?;
            s.flush()?;
        }
        let response = read_response(&mut conn)?;
        let close = response
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if !close {
            self.conn = Some(conn);
        }
        Ok(response)
    }
}

/// Reads one response from `r`.
pub fn read_response(r: &mut impl BufRead) -> io::Result<ClientResponse> {
    let mut line = String::new();
    if read_head_line(r, &mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        ));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line: {line:?}"),
            )
        })?;
    let mut headers = Vec::new();
    loop {
        if headers.len() >= MAX_HEADERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("more than {MAX_HEADERS} header lines"),
            ));
        }
        line.clear();
        read_head_line(r, &mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            read_head_line(r, &mut line)?;
            let size = u64::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            body.append(&mut read_body(r, size, MAX_BODY - body.len() as u64)?);
            // The chunk's own line end.
            let mut end = [0u8; 2];
            r.read_exact(&mut end)?;
            if size == 0 {
                break;
            }
        }
    } else if let Some(n) = get("content-length") {
        let n: u64 = n
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))?;
        body = read_body(r, n, MAX_BODY)?;
    } else if status != 204 && status != 304 {
        body = read_to_close(r, MAX_BODY)?;
    }
    Ok(ClientResponse {
        status,
        headers,
        body,
    })
}

/// The longest line of an answer's head (its status line, a header, a
/// chunk's size) a client reads, and the most header lines: an answer
/// beyond either is refused rather than read into memory without end.
const MAX_HEAD_LINE: u64 = 64 << 10;
const MAX_HEADERS: usize = 256;

/// Reads one line of an answer's head into `line` (see [`MAX_HEAD_LINE`]):
/// its length, 0 at the end of the stream.
fn read_head_line(r: &mut impl BufRead, line: &mut String) -> io::Result<usize> {
    let n = r.take(MAX_HEAD_LINE).read_line(line)?;
    if n as u64 == MAX_HEAD_LINE && !line.ends_with('\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a line of the answer's head is longer than {MAX_HEAD_LINE} bytes"),
        ));
    }
    Ok(n)
}

/// The most a body's announced length reserves before its bytes arrive: a
/// longer body grows the buffer as it comes, so that a wrong
/// `Content-Length` cannot make the client ask for memory the answer never
/// fills.
const RESERVE_AT_MOST: u64 = 64 << 20;

/// The longest body a client reads, however it is delimited (a length,
/// chunks, or the end of the connection): far above any answer of the
/// service (the text of a module of a million instructions is some 60 MB).
const MAX_BODY: u64 = 1 << 30;

fn too_long(what: &str, n: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what} {n} bytes, more than the {MAX_BODY} a client reads"),
    )
}

/// Reads a body that ends where the stream does, of at most `max` bytes.
fn read_to_close(r: &mut impl BufRead, max: u64) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    // One byte past the bound tells a body of the bound from a longer one.
    r.take(max.saturating_add(1)).read_to_end(&mut body)?;
    if body.len() as u64 > max {
        return Err(too_long("a body without a length has more than", max));
    }
    Ok(body)
}

/// Reads a body (or a chunk of one) of `n` bytes, into memory that is not
/// zeroed first; more than `max` is refused before any is read.
fn read_body(r: &mut impl BufRead, n: u64, max: u64) -> io::Result<Vec<u8>> {
    if n > max {
        return Err(too_long("the answer announces", n));
    }
    let mut body = Vec::with_capacity(n.min(RESERVE_AT_MOST) as usize);
    r.take(n).read_to_end(&mut body)?;
    if (body.len() as u64) < n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the body ended after {} of {n} bytes", body.len()),
        ));
    }
    Ok(body)
}

/// A session kept by a client that restores it when the server lost it.
///
/// Sessions live in the server's memory: a restart, a rolling deploy or an
/// eviction loses them, and the next request on one gets 404
/// `session_not_found`. A client that keeps what it sent can always put it
/// back: this one keeps the module it loaded and every computation it
/// patched since, and on that 404 loads the module again, re-applies the
/// patches and repeats the request, once. The run after a restore
/// recomputes every computation (its `recomputed_computations` lists them
/// all); its output is the same as it would have been.
pub struct SessionClient {
    client: Client,
    id: String,
    module: String,
    target: Option<String>,
    /// Computations replaced since the load, by name, latest text.
    patches: std::collections::BTreeMap<String, String>,
    restores: usize,
}

impl SessionClient {
    /// A session named `id` holding `module`, for `target` (a built-in
    /// name; the server's default when `None`). Nothing is sent until
    /// [`SessionClient::load`] or the first request.
    pub fn new(client: Client, id: &str, module: &str, target: Option<&str>) -> SessionClient {
        SessionClient {
            client,
            id: id.to_string(),
            module: module.to_string(),
            target: target.map(str::to_string),
            patches: std::collections::BTreeMap::new(),
            restores: 0,
        }
    }

    /// How many times the session was restored after the server lost it.
    pub fn restores(&self) -> usize {
        self.restores
    }

    /// Loads the module (`PUT /v1/modules/{id}`) and forgets the patches.
    pub fn load(&mut self) -> io::Result<ClientResponse> {
        let r = self.put()?;
        if r.status == 200 || r.status == 201 {
            self.patches.clear();
        }
        Ok(r)
    }

    fn put(&mut self) -> io::Result<ClientResponse> {
        let path = match &self.target {
            Some(t) => format!("/v1/modules/{}?target={t}", self.id),
            None => format!("/v1/modules/{}", self.id),
        };
        self.client.request(
            "PUT",
            &path,
            &[("content-type", "text/plain")],
            self.module.as_bytes(),
        )
    }

    fn send_patch(
        &mut self,
        computations: &std::collections::BTreeMap<String, String>,
    ) -> io::Result<ClientResponse> {
        let body = serde_json::json!({ "computations": computations }).to_string();
        let path = format!("/v1/modules/{}", self.id);
        self.client.request(
            "PATCH",
            &path,
            &[("content-type", "application/json")],
            body.as_bytes(),
        )
    }

    /// Loads the module again and re-applies the patches.
    fn restore(&mut self) -> io::Result<()> {
        self.restores += 1;
        let r = self.put()?;
        if r.status != 200 && r.status != 201 {
            return Err(io::Error::other(format!(
                "restoring session {}: PUT answered {}: {}",
                self.id,
                r.status,
                r.text()
            )));
        }
        if !self.patches.is_empty() {
            let patches = self.patches.clone();
            let r = self.send_patch(&patches)?;
            if r.status != 200 {
                return Err(io::Error::other(format!(
                    "restoring session {}: PATCH answered {}: {}",
                    self.id,
                    r.status,
                    r.text()
                )));
            }
        }
        Ok(())
    }

    /// Sends a request on the session; on 404 `session_not_found`, restores
    /// the session and sends it again.
    fn with_restore(
        &mut self,
        send: impl Fn(&mut Self) -> io::Result<ClientResponse>,
    ) -> io::Result<ClientResponse> {
        let r = send(self)?;
        if !is_session_not_found(&r) {
            return Ok(r);
        }
        self.restore()?;
        send(self)
    }

    /// Replaces whole computations (`PATCH /v1/modules/{id}`), each given as
    /// (name, whole new text).
    pub fn patch(&mut self, computations: &[(&str, &str)]) -> io::Result<ClientResponse> {
        let patch: std::collections::BTreeMap<String, String> = computations
            .iter()
            .map(|(n, t)| (n.trim_start_matches('%').to_string(), t.to_string()))
            .collect();
        let r = self.with_restore(|s| s.send_patch(&patch))?;
        if r.status == 200 {
            self.patches.extend(patch);
        }
        Ok(r)
    }

    /// Runs the pipeline on the session (`POST
    /// /v1/modules/{id}/layout-assignment`), with `query` (such as
    /// `expand_relayouts=true`, or empty).
    pub fn run(&mut self, query: &str) -> io::Result<ClientResponse> {
        let path = if query.is_empty() {
            format!("/v1/modules/{}/layout-assignment", self.id)
        } else {
            format!("/v1/modules/{}/layout-assignment?{query}", self.id)
        };
        self.with_restore(|s| s.client.request("POST", &path, &[], b""))
    }
}

impl SessionClient {
    /// Runs the pipeline on the session asking only for what changed since
    /// the run `held` holds (`?response=changes&since=RUN`, with `query`'s
    /// options besides), and patches `held` with the answer: after a 200,
    /// `held.text()` is the whole output module, as a full answer would
    /// have given it. Any other answer leaves `held` as it was.
    pub fn run_changes(
        &mut self,
        query: &str,
        held: &mut HeldOutput,
    ) -> io::Result<ClientResponse> {
        let mut q = String::from("response=changes");
        if let Some(run) = &held.run {
            q.push_str("&since=");
            q.push_str(run);
        }
        if !query.is_empty() {
            q.push('&');
            q.push_str(query);
        }
        let r = self.run(&q)?;
        if r.status == 200 {
            let answer: serde_json::Value = serde_json::from_slice(&r.body)
                .map_err(|e| io::Error::other(format!("a changes answer that is not JSON: {e}")))?;
            held.apply(&answer).map_err(io::Error::other)?;
        }
        Ok(r)
    }
}

/// A session's output module as a client holds it between runs with
/// `response=changes`: the header and each computation's text, patched in
/// place by each answer.
#[derive(Clone, Debug, Default)]
pub struct HeldOutput {
    /// The run whose answer this is (`None` before the first).
    pub run: Option<String>,
    header: String,
    order: Vec<String>,
    texts: std::collections::HashMap<String, String>,
    report: serde_json::Value,
}

impl HeldOutput {
    /// The whole output module.
    pub fn text(&self) -> String {
        let mut text = self.header.clone();
        for name in &self.order {
            text.push_str(self.texts.get(name).map_or("", String::as_str));
        }
        text
    }

    /// The report of the run held, whole: each answer's, with the
    /// sections it names as unchanged (`report_unchanged`) kept from the
    /// answers before.
    pub fn report(&self) -> &serde_json::Value {
        &self.report
    }

    /// Patches this output with a changes answer. An answer against another
    /// run than this one's is refused; one against no run (`since: null`)
    /// lists every computation and replaces everything.
    pub fn apply(&mut self, answer: &serde_json::Value) -> Result<(), String> {
        let field = |name: &str| {
            answer
                .get(name)
                .ok_or_else(|| format!("the changes answer has no `{name}`"))
        };
        let replace_all = match field("since")? {
            serde_json::Value::Null => true,
            since if since.as_str() == self.run.as_deref() => false,
            since => {
                return Err(format!(
                    "the changes answer is against run {since}, not {:?}",
                    self.run
                ));
            }
        };
        let order: Vec<String> = serde_json::from_value(field("computations")?.clone())
            .map_err(|e| format!("`computations`: {e}"))?;
        let changed: std::collections::HashMap<String, String> =
            serde_json::from_value(field("changed")?.clone())
                .map_err(|e| format!("`changed`: {e}"))?;
        let removed: std::collections::HashSet<String> =
            serde_json::from_value(field("removed")?.clone())
                .map_err(|e| format!("`removed`: {e}"))?;
        let header = field("header")?
            .as_str()
            .ok_or("`header` is not a string")?
            .to_string();
        let run = field("run")?
            .as_str()
            .ok_or("`run` is not a string")?
            .to_string();
        let mut report = field("report")?.clone();
        let unchanged: Vec<String> = serde_json::from_value(field("report_unchanged")?.clone())
            .map_err(|e| format!("`report_unchanged`: {e}"))?;
        for section in &unchanged {
            match self.report.get(section).filter(|_| !replace_all) {
                Some(held) => {
                    if let Some(o) = report.as_object_mut() {
                        o.insert(section.clone(), held.clone());
                    }
                }
                None => {
                    return Err(format!(
                        "the answer keeps the report's `{section}`, which this output does not hold"
                    ));
                }
            }
        }
        // Checked before anything changes: a bad answer leaves this as it was.
        let kept = |n: &String| !replace_all && !removed.contains(n) && self.texts.contains_key(n);
        if let Some(missing) = order.iter().find(|n| !changed.contains_key(*n) && !kept(n)) {
            return Err(format!(
                "the answer lists {missing} but gives no text for it"
            ));
        }
        if replace_all {
            self.texts.clear();
        }
        for name in &removed {
            self.texts.remove(name);
        }
        self.texts.extend(changed);
        self.header = header;
        self.order = order;
        self.report = report;
        self.run = Some(run);
        Ok(())
    }
}
/// Whether an answer is 404 `session_not_found`.
fn is_session_not_found(r: &ClientResponse) -> bool {
    r.status == 404
        && serde_json::from_slice::<serde_json::Value>(&r.body).is_ok_and(|v| {
            v.pointer("/error/kind")
                .is_some_and(|k| k == "session_not_found")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(raw: &str) -> io::Result<ClientResponse> {
        read_response(&mut BufReader::new(raw.as_bytes()))
    }

    #[test]
    fn a_body_is_read_to_its_length() {
        let r = answer("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello, and more").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
    }

    #[test]
    fn a_body_shorter_than_its_length_is_an_error() {
        let e = answer("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("5 of 10"), "{e}");
    }

    /// A length no answer fills asks for no memory before the bytes come.
    #[test]
    fn a_huge_announced_length_is_an_error_not_an_abort() {
        let e = answer("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nhello")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let chunked =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nhello";
        assert_eq!(
            answer(chunked).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        // Within the bound, a length the bytes do not fill ends early.
        let e = answer("HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\nhello").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn an_endless_head_is_refused() {
        let long = format!("HTTP/1.1 200 OK\r\nX-Long: {}\r\n\r\n", "a".repeat(70_000));
        assert_eq!(
            answer(&long).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "X-A: b\r\n".repeat(300));
        assert_eq!(
            answer(&many).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let fine = format!(
            "HTTP/1.1 204 No Content\r\n{}\r\n",
            "X-A: b\r\n".repeat(200)
        );
        assert_eq!(answer(&fine).unwrap().headers.len(), 200);
    }

    #[test]
    fn a_body_without_a_length_is_read_to_the_close_within_a_bound() {
        let r = answer("HTTP/1.0 200 OK\r\n\r\nhello").unwrap();
        assert_eq!(r.body, b"hello");
        let mut exact = BufReader::new(&b"0123456789"[..]);
        assert_eq!(read_to_close(&mut exact, 10).unwrap().len(), 10);
        let mut endless = BufReader::new(io::repeat(b'a'));
        let e = read_to_close(&mut endless, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_chunked_body_is_read_whole() {
        let raw = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n";
        let r = answer(raw).unwrap();
        assert_eq!(r.body, b"hello, world");
    }
}
