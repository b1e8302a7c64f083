//! A minimal HTTP/1.1 client over one keep-alive TCP connection: enough
//! for S3's PutObject and GetObject against a server on this machine
//! (bodies by Content-Length or chunked; no TLS, no redirects).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Headers a response may carry before we refuse it.
const MAX_HEADERS: usize = 64;

/// One connection to `host` (an `address:port`).
pub struct Connection {
    host: String,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// A response: its status and body.
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The body, whole.
    pub body: Vec<u8>,
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl Connection {
    /// Connects to `host`; every read and write gives up after `timeout`.
    pub fn connect(host: &str, timeout: Duration) -> io::Result<Connection> {
        let stream = TcpStream::connect(host)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let writer = stream.try_clone()?;
        Ok(Connection { host: host.to_string(), reader: BufReader::with_capacity(64 * 1024, stream), writer })
    }

    /// The `Host` header's value.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Sends `method path` with `headers` (name, value) and `body`, and
    /// reads the whole response.
    pub fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> io::Result<Response> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n", self.host, body.len());
        for (name, value) in headers {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        self.writer.write_all(head.as_bytes())?;
        self.writer.write_all(body)?;
        self.read_response(method == "HEAD")
    }

    fn read_response(&mut self, head_only: bool) -> io::Result<Response> {
        let mut raw = Vec::with_capacity(1024);
        // The head ends at the first empty line.
        loop {
            let before = raw.len();
            if self.reader.read_until(b'\n', &mut raw)? == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the connection"));
            }
            if raw.len() > 64 * 1024 {
                return Err(invalid("response head over 64 KiB"));
            }
            if &raw[before..] == b"\r\n" || &raw[before..] == b"\n" {
                break;
            }
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&raw) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err(invalid("incomplete response head")),
            Err(e) => return Err(invalid(format!("bad response head: {e}"))),
        }
        let status = response.code.ok_or_else(|| invalid("response without a status"))?;
        let mut length = None;
        let mut chunked = false;
        for header in response.headers.iter() {
            if header.name.eq_ignore_ascii_case("content-length") {
                let text = std::str::from_utf8(header.value).map_err(|_| invalid("content-length not text"))?;
                length = Some(text.trim().parse::<usize>().map_err(|_| invalid("content-length not a number"))?);
            } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = header.value.eq_ignore_ascii_case(b"chunked");
            }
        }
        let body = if head_only || status == 204 || status == 304 {
            Vec::new()
        } else if chunked {
            self.read_chunked()?
        } else if let Some(length) = length {
            let mut body = vec![0; length];
            self.reader.read_exact(&mut body)?;
            body
        } else {
            return Err(invalid("response body without a length (the connection could not be kept)"));
        };
        Ok(Response { status, body })
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let size_text = line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    line.clear();
                    if self.reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + size, 0);
            self.reader.read_exact(&mut body[start..])?;
            line.clear();
            self.reader.read_line(&mut line)?;
        }
    }
}
