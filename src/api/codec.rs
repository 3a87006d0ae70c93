//! The codec of agentd's generated services and clients: prost, with a small first encode
//! buffer. tonic's default (8 KiB) is allocated per call and kept for a stream's whole life, a
//! large part of what an idle `Generate`, `Observe` or `Watch` stream costs; the buffer still
//! grows to whatever a message needs.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// The first capacity of a call's encode buffer: most chunks and replies fit.
const ENCODE_BUFFER: usize = 1024;

/// How much a stream encodes before it yields to the runtime (tonic's default).
const YIELD_THRESHOLD: usize = 32 * 1024;

/// [`ProstCodec`] with a [`ENCODE_BUFFER`]-byte first encode buffer (`build.rs` names it).
#[derive(Debug, Clone)]
pub struct LeanCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::new(ENCODE_BUFFER, YIELD_THRESHOLD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(BufferSettings::default())
    }
}
