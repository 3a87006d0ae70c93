//! A client-streaming call over one HTTP/1.1 exchange, as any HTTP client that streams its
//! request body makes it: NDJSON lines go out as chunks while the response streams in.
//! (curl can do it with `-T .`, but its non-blocking stdin gives up on a pipe that is briefly
//! empty, so the test speaks HTTP/1.1 itself.)

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// One open exchange.
pub struct Duplex {
    reader: BufReader<OwnedReadHalf>,
    writer: Option<OwnedWriteHalf>,
    /// The response status, once its head is read.
    pub status: Option<u16>,
    chunked: bool,
    remaining: Option<usize>,
    body: Vec<u8>,
    ended: bool,
}

impl Duplex {
    /// POSTs to `path` on `addr` with a chunked NDJSON body.
    pub async fn start(addr: std::net::SocketAddr, path: &str) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (read, mut write) = stream.into_split();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        write.write_all(head.as_bytes()).await.expect("send head");
        Self {
            reader: BufReader::new(read),
            writer: Some(write),
            status: None,
            chunked: false,
            remaining: None,
            body: Vec::new(),
            ended: false,
        }
    }

    /// Sends one line (one request message).
    pub async fn send_raw(&mut self, text: &str) {
        let writer = self.writer.as_mut().expect("request still open");
        let chunk = format!("{:x}\r\n{text}\r\n", text.len());
        writer
            .write_all(chunk.as_bytes())
            .await
            .expect("send chunk");
    }

    /// Sends `message` as one NDJSON line.
    pub async fn send(&mut self, message: &Value) {
        self.send_raw(&format!("{message}\n")).await;
    }

    /// Ends the request body.
    pub async fn close_input(&mut self) {
        if let Some(mut writer) = self.writer.take() {
            writer.write_all(b"0\r\n\r\n").await.expect("end the body");
        }
    }

    /// The next line of the response body, parsed; `None` at its end.
    pub async fn next(&mut self) -> Option<Value> {
        if self.status.is_none() {
            self.read_head().await;
        }
        loop {
            if let Some(at) = self.body.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.body.drain(..=at).collect();
                let text = String::from_utf8(line).expect("UTF-8 body");
                if text.trim().is_empty() {
                    continue;
                }
                return Some(
                    serde_json::from_str(&text)
                        .unwrap_or_else(|e| panic!("bad line ({e}): {text}")),
                );
            }
            if self.ended {
                let rest = std::mem::take(&mut self.body);
                let text = String::from_utf8(rest).expect("UTF-8 body");
                return (!text.trim().is_empty())
                    .then(|| serde_json::from_str(&text).expect("JSON"));
            }
            self.read_body().await;
        }
    }

    async fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).await.expect("read");
        line
    }

    async fn read_head(&mut self) {
        let status_line = self.read_line().await;
        self.status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok());
        loop {
            let line = self.read_line().await;
            let line = line.trim();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                match name.trim().to_ascii_lowercase().as_str() {
                    "transfer-encoding" => self.chunked = value.trim() == "chunked",
                    "content-length" => self.remaining = value.trim().parse().ok(),
                    _ => {}
                }
            }
        }
    }

    async fn read_body(&mut self) {
        if !self.chunked {
            let mut data = vec![0; self.remaining.unwrap_or(0)];
            self.reader.read_exact(&mut data).await.expect("read body");
            self.body.extend(data);
            self.ended = true;
            return;
        }
        let size = self.read_line().await;
        let size = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if size == 0 {
            self.read_line().await;
            self.ended = true;
            return;
        }
        let mut data = vec![0; size + 2];
        self.reader.read_exact(&mut data).await.expect("read chunk");
        data.truncate(size);
        self.body.extend(data);
    }
}
