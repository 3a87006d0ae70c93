//! A lenient, incremental Server-Sent Events parser.
//!
//! Bytes arrive in arbitrary pieces (a line, a UTF-8 character or a CRLF pair may be split
//! across network reads), so the parser buffers until a line is complete. It follows the
//! WHATWG event-stream rules where they matter for chat completions: `\n`, `\r\n` and `\r`
//! line ends, `:` comments, multi-line `data`, an optional space after the colon, and an event
//! dispatched on a blank line. It also dispatches a trailing event that lacks the final blank
//! line, since some servers close the stream right after the last `data:` line.

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the server sent one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental SSE parser: feed it bytes, get complete events.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, incomplete line.
    line: Vec<u8>,
    /// A `\r` ended the previous line, so a leading `\n` in the next piece belongs to it.
    after_cr: bool,
    /// Data lines of the event being built.
    data: Option<String>,
    /// Event name of the event being built.
    event: Option<String>,
}

impl SseParser {
    /// An empty parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed the next bytes; complete events are appended to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        let mut rest = bytes;
        if self.after_cr {
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
            // Only the first byte after a `\r` can complete a CRLF pair.
            if !bytes.is_empty() {
                self.after_cr = false;
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..pos]);
            let is_cr = rest[pos] == b'\r';
            rest = &rest[pos + 1..];
            if is_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out);
        }
        self.line.extend_from_slice(rest);
    }

    /// End of input: dispatch what is left, even without the final blank line.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out);
        }
        self.dispatch(out);
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // comment / keep-alive
        }
        // Lossy: a provider's stray invalid byte should not kill the whole response.
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            "event" => self.event = Some(value.to_owned()),
            // `id` and `retry` only matter for EventSource reconnection, which we never do.
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if let Some(data) = self.data.take() {
            out.push(SseEvent { event, data });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_pieces(pieces: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for piece in pieces {
            parser.feed(piece, &mut out);
        }
        parser.finish(&mut out);
        out
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn parses_basic_events_and_done() {
        let events = parse_pieces(&[b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n"]);
        assert_eq!(data(&events), ["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
    }

    #[test]
    fn handles_crlf_and_lone_cr() {
        let events = parse_pieces(&[b"data: one\r\n\r\ndata: two\r\rdata: three\n\n"]);
        assert_eq!(data(&events), ["one", "two", "three"]);
    }

    #[test]
    fn crlf_split_across_pieces_is_one_line_end() {
        // If the `\n` of a split CRLF were taken as a second line end it would dispatch early.
        let events = parse_pieces(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(data(&events), ["a\nb"]);
    }

    #[test]
    fn ignores_comments_and_unknown_fields() {
        let events = parse_pieces(&[b": keep-alive\nid: 7\nretry: 100\nfoo\ndata: x\n\n: bye\n\n"]);
        assert_eq!(data(&events), ["x"]);
    }

    #[test]
    fn joins_multi_line_data() {
        let events = parse_pieces(&[b"data: {\"a\":\ndata: 1}\n\n"]);
        assert_eq!(data(&events), ["{\"a\":\n1}"]);
    }

    #[test]
    fn space_after_colon_is_optional_and_only_one_is_stripped() {
        let events = parse_pieces(&[b"data:x\n\ndata:  y\n\ndata\n\n"]);
        assert_eq!(data(&events), ["x", " y", ""]);
    }

    #[test]
    fn keeps_event_name() {
        let events = parse_pieces(&[b"event: error\ndata: {}\n\n"]);
        assert_eq!(events[0].event.as_deref(), Some("error"));
        assert_eq!(events[0].data, "{}");
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        let events = parse_pieces(&[b"\n\n\nevent: ping\n\n"]);
        assert!(events.is_empty());
    }

    #[test]
    fn byte_by_byte_feeding_handles_split_utf8() {
        let input = "data: héllo 🌍\r\n\r\ndata: [DONE]\r\n\r\n".as_bytes();
        let pieces: Vec<&[u8]> = input.chunks(1).collect();
        let events = parse_pieces(&pieces);
        assert_eq!(data(&events), ["héllo 🌍", "[DONE]"]);
    }

    #[test]
    fn dispatches_trailing_event_without_blank_line() {
        let events = parse_pieces(&[b"data: first\n\ndata: last"]);
        assert_eq!(data(&events), ["first", "last"]);
    }
}
