//! The one place where errors become gRPC statuses.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::agent::error::RunError;
use crate::error_text::clip;
use crate::store::StoreError;

impl From<RunError> for Status {
    fn from(err: RunError) -> Self {
        match err {
            RunError::NotFound(m) => Status::not_found(m),
            RunError::Invalid(violations) => {
                let mut v = Violations::default();
                for (field, description) in violations {
                    v.add(field, description);
                }
                v.into_status()
            }
            RunError::AlreadyExists(m) => Status::already_exists(m),
            RunError::Exhausted(m) => Status::resource_exhausted(m),
            RunError::FailedPrecondition(m) => Status::failed_precondition(m),
            RunError::Store(e) => e.into(),
            RunError::Internal(m) => Status::internal(m),
        }
    }
}

impl From<StoreError> for Status {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::WrongOwner { .. } => Status::permission_denied(err.to_string()),
            StoreError::Unavailable(_) => Status::unavailable(err.to_string()),
            StoreError::Corrupt(_) => Status::data_loss(err.to_string()),
        }
    }
}

/// Field violations collected while checking a request; empty means valid.
#[derive(Debug, Default)]
pub struct Violations(Vec<(String, String)>);

impl Violations {
    /// Records that `field` is invalid, and why.
    pub fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push((field.into(), description.into()));
    }

    /// `Ok` when nothing was recorded, else `INVALID_ARGUMENT` naming every field.
    pub fn into_result(self) -> Result<(), Status> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.into_status())
        }
    }

    /// `INVALID_ARGUMENT` with a `google.rpc.BadRequest` listing the violations; the message
    /// names them too, for clients that do not decode details. Both are bounded (see
    /// [`MAX_VIOLATION_BYTES`]): a request with hundreds of bad fields gets the first ones and
    /// a count of the rest, and echoed fields and descriptions are clipped.
    pub fn into_status(self) -> Status {
        let total = self.0.len();
        let mut details = ErrorDetails::new();
        let mut message = String::new();
        let (mut listed, mut named, mut size) = (0, 0, 0);
        for (field, description) in &self.0 {
            let field = clip(field, MAX_FIELD_BYTES);
            let description = clip(description, MAX_DESCRIPTION_BYTES);
            size += field.len() + description.len() + VIOLATION_OVERHEAD;
            if listed > 0 && size > MAX_VIOLATION_BYTES {
                break;
            }
            if message.len() < MAX_MESSAGE_LIST_BYTES {
                if !message.is_empty() {
                    message.push_str("; ");
                }
                message.push_str(&format!("{field}: {description}"));
                named += 1;
            }
            details.add_bad_request_violation(field, description);
            listed += 1;
        }
        if named < total {
            message.push_str(&format!(" (and {} more)", total - named));
        }
        if listed < total {
            details.add_bad_request_violation("", format!("{} more not listed", total - listed));
        }
        Status::with_error_details(Code::InvalidArgument, message, details)
    }
}

/// Longest field path kept in a violation.
const MAX_FIELD_BYTES: usize = 128;
/// Longest description kept in a violation.
const MAX_DESCRIPTION_BYTES: usize = 256;
/// Encoded violations are capped near this size, so message, details and headers together
/// stay well under 4 KiB.
pub const MAX_VIOLATION_BYTES: usize = 1200;
/// The message names violations until it is this long.
const MAX_MESSAGE_LIST_BYTES: usize = 512;
/// Protobuf framing of one violation, roughly.
const VIOLATION_OVERHEAD: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn violations_become_bad_request_details() {
        let mut v = Violations::default();
        v.add("tasks.0.status", "Invalid option");
        let status = v.into_result().unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(status.message(), "tasks.0.status: Invalid option");
        let bad = status.get_details_bad_request().unwrap();
        assert_eq!(bad.field_violations[0].field, "tasks.0.status");
    }

    #[test]
    fn many_violations_are_capped_with_a_count() {
        let mut v = Violations::default();
        for i in 0..500 {
            v.add(format!("tasks.{i}.content"), "x".repeat(1000));
        }
        let status = v.into_status();
        let bad = status.get_details_bad_request().unwrap();
        let listed = bad.field_violations.len() - 1;
        assert!((2..20).contains(&listed), "{listed}");
        let last = bad.field_violations.last().unwrap();
        assert_eq!(
            last.description,
            format!("{} more not listed", 500 - listed)
        );
        assert!(status.details().len() < 2048, "{}", status.details().len());
        assert!(status.message().len() < 1024, "{}", status.message());
        assert!(status.message().ends_with(" more)"), "{}", status.message());
        assert!(status.message().starts_with("tasks.0.content: xxx"));
    }

    #[test]
    fn store_errors_map_to_codes() {
        let s: Status = StoreError::WrongOwner {
            thread_id: "t".into(),
        }
        .into();
        assert_eq!(s.code(), Code::PermissionDenied);
        let s: Status = StoreError::Unavailable("down".into()).into();
        assert_eq!(s.code(), Code::Unavailable);
    }
}
