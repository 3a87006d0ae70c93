//! gRPC's length-prefixed message framing (one flag byte, a big-endian u32 length, the
//! message), written for requests and read back from responses.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes before each message: the compressed flag and the length.
const HEADER: usize = 5;

/// `message` as one uncompressed gRPC frame.
pub fn frame(message: &[u8]) -> Result<Bytes, String> {
    let len = u32::try_from(message.len()).map_err(|_| "message over 4 GiB".to_owned())?;
    let mut out = BytesMut::with_capacity(HEADER + message.len());
    out.put_u8(0);
    out.put_u32(len);
    out.put_slice(message);
    Ok(out.freeze())
}

/// Splits a body's data, as it arrives, back into messages.
#[derive(Debug, Default)]
pub struct Deframer {
    buf: BytesMut,
}

impl Deframer {
    /// Adds received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete message, if one has arrived. Compressed messages are an error: the
    /// gateway never asks for compression.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, String> {
        if self.buf.len() < HEADER {
            return Ok(None);
        }
        if self.buf[0] != 0 {
            return Err("compressed gRPC message".to_owned());
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]);
        let len = usize::try_from(len).map_err(|_| "gRPC message too large".to_owned())?;
        if self.buf.len() < HEADER + len {
            return Ok(None);
        }
        self.buf.advance(HEADER);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// Whether no partial message is left (a body that ends mid-message was cut).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_across_arbitrary_splits() {
        let mut wire = Vec::new();
        for message in [&b"alpha"[..], b"", b"a longer third message"] {
            wire.extend_from_slice(&frame(message).unwrap());
        }
        for split in 0..wire.len() {
            let mut deframer = Deframer::default();
            let mut got = Vec::new();
            for part in [&wire[..split], &wire[split..]] {
                deframer.push(part);
                while let Some(message) = deframer.next_message().unwrap() {
                    got.push(message);
                }
            }
            assert_eq!(got, [&b"alpha"[..], b"", b"a longer third message"]);
            assert!(deframer.is_empty());
        }
    }

    #[test]
    fn compressed_and_cut_messages_are_reported() {
        let mut deframer = Deframer::default();
        deframer.push(&[1, 0, 0, 0, 1, 7]);
        assert!(deframer.next_message().is_err());
        let mut cut = Deframer::default();
        cut.push(&frame(b"abc").unwrap()[..6]);
        assert_eq!(cut.next_message().unwrap(), None);
        assert!(!cut.is_empty());
    }
}
