//! Fuzz target: the first byte picks an agentd RPC, the rest is decoded as that method's
//! request and, when it decodes, checked and converted as its service does. Never a panic;
//! a rejection is INVALID_ARGUMENT with BadRequest details.

#![no_main]

use agentd::api::fuzzing::{METHODS, Outcome, decode_and_convert};
use libfuzzer_sys::fuzz_target;
use tonic::Code;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, request)) = data.split_first() else {
        return;
    };
    let method = METHODS[usize::from(pick) % METHODS.len()];
    match decode_and_convert(method, request) {
        None => panic!("{method} is in METHODS but not dispatched"),
        Some(Outcome::Undecodable(_) | Outcome::Accepted) => {}
        Some(Outcome::Rejected(status)) => {
            assert_eq!(status.code(), Code::InvalidArgument, "{method}: {status:?}");
        }
    }
});
