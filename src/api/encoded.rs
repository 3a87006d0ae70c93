//! A chunk already encoded, as the chunk-streaming services send it: the run encodes each chunk
//! once, for its log, and the stream writes those bytes instead of encoding the chunk again
//! (`build.rs` generates these services' servers with this type in place of `pb::Chunk`; the
//! bytes on the wire are the same, and clients decode them as `pb::Chunk`).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::DecodeError;
use prost::encoding::{self, DecodeContext, WireType, check_wire_type, encode_key, encode_varint};

/// The encoding of one `agentd.v1.Chunk`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedChunk(pub Bytes);

impl prost::Message for EncodedChunk {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        // A message's encoding is its fields one after another: the bytes are already that.
        buf.put_slice(&self.0);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        // Decoding keeps each field as it came, so that decoding and encoding again gives the
        // same bytes (only tests decode this type: servers send it).
        let mut field = BytesMut::new();
        encode_key(tag, wire_type, &mut field);
        match wire_type {
            WireType::Varint => {
                let mut value = 0u64;
                encoding::uint64::merge(wire_type, &mut value, buf, ctx)?;
                encode_varint(value, &mut field);
            }
            WireType::SixtyFourBit => {
                let mut value = 0u64;
                encoding::fixed64::merge(wire_type, &mut value, buf, ctx)?;
                field.put_u64_le(value);
            }
            WireType::ThirtyTwoBit => {
                let mut value = 0u32;
                encoding::fixed32::merge(wire_type, &mut value, buf, ctx)?;
                field.put_u32_le(value);
            }
            WireType::LengthDelimited => {
                let mut value = Bytes::new();
                encoding::bytes::merge(wire_type, &mut value, buf, ctx)?;
                encode_varint(value.len() as u64, &mut field);
                field.put(value);
            }
            // No field of a chunk is a group: refused as the wrong wire type.
            WireType::StartGroup | WireType::EndGroup => {
                return check_wire_type(WireType::LengthDelimited, wire_type);
            }
        }
        let mut all = BytesMut::from(std::mem::take(&mut self.0));
        all.put(field);
        self.0 = all.freeze();
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::pb;

    fn chunk() -> pb::Chunk {
        pb::Chunk {
            run_id: "run-1".into(),
            sequence: 7,
            payload: Some(pb::chunk::Payload::TextDelta(pb::TextDeltaChunk {
                id: "t".into(),
                text: "héllo".into(),
            })),
            ..Default::default()
        }
    }

    #[test]
    fn sends_exactly_the_bytes_of_the_chunk() {
        let bytes = Bytes::from(chunk().encode_to_vec());
        let encoded = EncodedChunk(bytes.clone());
        assert_eq!(encoded.encoded_len(), bytes.len());
        assert_eq!(encoded.encode_to_vec(), bytes.to_vec());
        assert_eq!(
            pb::Chunk::decode(encoded.encode_to_vec().as_slice()),
            Ok(chunk())
        );
        // As a field of another message (a length-delimited record), too.
        let framed = encoded.encode_length_delimited_to_vec();
        assert_eq!(
            pb::Chunk::decode_length_delimited(framed.as_slice()),
            Ok(chunk())
        );
    }

    #[test]
    fn decoding_keeps_every_field_as_it_came() {
        let bytes = chunk().encode_to_vec();
        let decoded = EncodedChunk::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(decoded.0.to_vec(), bytes);
        // Every wire type a chunk's fields use is kept too.
        let mut fields = Vec::new();
        encode_key(1, WireType::Varint, &mut fields);
        encode_varint(300, &mut fields);
        encode_key(2, WireType::SixtyFourBit, &mut fields);
        fields.extend_from_slice(&1.5f64.to_le_bytes());
        encode_key(3, WireType::ThirtyTwoBit, &mut fields);
        fields.extend_from_slice(&2.5f32.to_le_bytes());
        encode_key(4, WireType::LengthDelimited, &mut fields);
        encode_varint(2, &mut fields);
        fields.extend_from_slice(b"ok");
        let decoded = EncodedChunk::decode(fields.as_slice()).expect("decodes");
        assert_eq!(decoded.0.to_vec(), fields);
        assert!(EncodedChunk::decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
