//! `agentd.v1.ScoreService` and a request's `scorers`: scores listed by run, thread or agent
//! (a page at a time, only the caller's tenant's), and the wire's scorer entries converted
//! and checked, each problem naming its field.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use tonic::{Request, Response, Status};

use super::check_id;
use super::error::Violations;
use super::scope::{check_resource, identity};
use super::threads::{page_size, required_id};
use crate::agent::scorers::ScoreRecord;
use crate::agent::scorers::record::{agent_list, run_list, thread_list};
use crate::agent::scorers::scorer::RequestedScorer;
use crate::agent::wire::score;
use crate::config::{Limits, Sampling};
use crate::json::from_proto_struct;
use crate::pb;
use crate::store::Store;

/// Page size: (default, most).
const SCORE_PAGE: (usize, usize) = (20, 100);

/// Converts a request's `scorers` (checked fully once the agent is known).
pub(crate) fn requested(
    v: &mut Violations,
    scorers: &pb::Scorers,
    limits: &Limits,
) -> Vec<RequestedScorer> {
    scorers
        .scorers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let at = format!("scorers.scorers.{i}");
            check_id(v, &format!("{at}.key"), &s.key, limits);
            let sampling = s.sampling.as_ref().map(|sampling| match sampling.r#type() {
                pb::SamplingType::Ratio => Sampling::Ratio {
                    rate: sampling.rate,
                },
                pb::SamplingType::None | pb::SamplingType::Unspecified => Sampling::None,
            });
            RequestedScorer {
                key: s.key.clone(),
                scorer: s.scorer.clone(),
                options: s
                    .options
                    .as_ref()
                    .map(from_proto_struct)
                    .unwrap_or_default(),
                sampling,
            }
        })
        .collect()
}

/// The ScoreService implementation.
pub struct ScoreApi {
    store: Arc<dyn Store>,
    limits: Limits,
}

impl ScoreApi {
    /// A ScoreService over `store`.
    pub fn new(store: Arc<dyn Store>, limits: Limits) -> Self {
        Self { store, limits }
    }
}

#[tonic::async_trait]
impl pb::score_service_server::ScoreService for ScoreApi {
    async fn list_scores(
        &self,
        request: Request<pb::ListScoresRequest>,
    ) -> Result<Response<pb::ListScoresResponse>, Status> {
        let caller = identity(request.extensions());
        let r = request.into_inner();
        let ListScores { list, size, from } = list_scores_request(&r, &self.limits)?;
        if let Some(pb::list_scores_request::Target::Thread(t)) = &r.target {
            check_resource(&caller, "thread.resource_id", &t.resource_id)?;
        }
        let records = self.store.read_scores(&list, from, size).await?;
        let read = records.len();
        let tenant = caller.tenant();
        let scores = records
            .iter()
            .filter_map(|bytes| match serde_json::from_slice::<ScoreRecord>(bytes) {
                Ok(record) => Some(record),
                Err(e) => {
                    tracing::warn!(%list, error = %e, "skipping an unreadable score record");
                    None
                }
            })
            // Another tenant's runs' scores are not this caller's to see (an agent's list
            // holds every tenant's).
            .filter(|record| tenant.is_none_or(|t| record.tenant == t))
            .map(|record| score(&record))
            .collect();
        let next_page_token = if read == size {
            page_token(&list, from + read as u64)
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListScoresResponse {
            scores,
            next_page_token,
        }))
    }
}

/// What a ListScores request reads: a score list, a page size and where the page starts.
pub(crate) struct ListScores {
    list: String,
    size: usize,
    from: u64,
}

/// Checks a ListScores request, every problem naming its field.
pub(crate) fn list_scores_request(
    r: &pb::ListScoresRequest,
    limits: &Limits,
) -> Result<ListScores, Status> {
    let mut v = Violations::default();
    let list = match &r.target {
        Some(pb::list_scores_request::Target::RunId(run)) => {
            required_id(&mut v, "run_id", run, limits);
            run_list(run)
        }
        Some(pb::list_scores_request::Target::AgentId(agent)) => {
            required_id(&mut v, "agent_id", agent, limits);
            agent_list(agent)
        }
        Some(pb::list_scores_request::Target::Thread(t)) => {
            required_id(&mut v, "thread.thread_id", &t.thread_id, limits);
            required_id(&mut v, "thread.resource_id", &t.resource_id, limits);
            thread_list(&t.resource_id, &t.thread_id)
        }
        None => {
            v.add("target", "set run_id, thread or agent_id");
            String::new()
        }
    };
    let size = page_size(&mut v, "page_size", r.page_size, SCORE_PAGE);
    let from = match page_position(&list, &r.page_token) {
        Ok(from) => from,
        Err(why) => {
            v.add("page_token", why);
            0
        }
    };
    v.into_result()?;
    Ok(ListScores { list, size, from })
}

/// The token of the page of `list` starting at `position`: the position and a tag of the
/// list, so that a token only continues the listing it came from.
fn page_token(list: &str, position: u64) -> String {
    format!("{position}.{}", list_tag(list))
}

/// The position a page token continues from (0 without one).
fn page_position(list: &str, token: &str) -> Result<u64, String> {
    if token.is_empty() {
        return Ok(0);
    }
    let (position, tag) = token
        .split_once('.')
        .ok_or_else(|| "is not a token ListScores gave".to_owned())?;
    if tag != list_tag(list) {
        return Err("continues another listing (a different run, thread or agent)".into());
    }
    position
        .parse()
        .map_err(|_| "is not a token ListScores gave".into())
}

fn list_tag(list: &str) -> String {
    hex::encode(&Sha256::digest(list.as_bytes())[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_continue_only_their_own_listing() {
        let token = page_token(&run_list("r1"), 40);
        assert_eq!(page_position(&run_list("r1"), &token), Ok(40));
        assert!(page_position(&run_list("r2"), &token).is_err());
        assert!(page_position(&run_list("r1"), "garbage").is_err());
        assert!(page_position(&run_list("r1"), "x.y").is_err());
        assert_eq!(page_position(&run_list("r1"), ""), Ok(0));
    }
}
