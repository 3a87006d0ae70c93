//! Which runs a scorer scores, as the reference decides: `none` scores every run; `ratio`
//! scores a run when its key (the trace id, else the run id) hashes below the rate, so the same
//! run always gets the same answer on every replica.

use sha2::{Digest, Sha256};

use crate::config::Sampling;

/// Whether `sampling` admits the run whose key is `key`.
pub fn admits(sampling: Sampling, key: &str) -> bool {
    match sampling {
        Sampling::None => true,
        Sampling::Ratio { rate } => unit_interval(key) < rate,
    }
}

/// The key's place in [0, 1): the first 6 bytes of its SHA-256, big-endian, over 2^48.
pub fn unit_interval(key: &str) -> f64 {
    let digest = Sha256::digest(key.as_bytes());
    let prefix = digest
        .iter()
        .take(6)
        .fold(0u64, |acc, byte| (acc << 8) | u64::from(*byte));
    prefix as f64 / (1u64 << 48) as f64
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Every decision the reference made for the recorded run ids, at every recorded rate.
    #[test]
    fn decisions_equal_the_reference() {
        let recording: Value =
            serde_json::from_str(include_str!("../../../tests/reference/scorers.json")).unwrap();
        let sampling = &recording["sampling"];
        let rates: Vec<f64> = sampling["rates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_f64().unwrap())
            .collect();
        let decisions = sampling["decisions"].as_array().unwrap();
        assert!(decisions.len() >= 10);
        for decision in decisions {
            let id = decision["id"].as_str().unwrap();
            assert_eq!(
                unit_interval(id),
                decision["unit"].as_f64().unwrap(),
                "{id}"
            );
            for (rate, sampled) in rates.iter().zip(decision["sampled"].as_array().unwrap()) {
                let admitted = admits(Sampling::Ratio { rate: *rate }, id);
                assert_eq!(admitted, sampled.as_bool().unwrap(), "{id} at {rate}");
            }
            assert!(admits(Sampling::None, id));
        }
        for run in recording["agent"]["rateHalf"]["runs"].as_array().unwrap() {
            let id = run["runId"].as_str().unwrap();
            let scored = run["scored"].as_bool().unwrap();
            assert_eq!(admits(Sampling::Ratio { rate: 0.5 }, id), scored, "{id}");
        }
    }
}
