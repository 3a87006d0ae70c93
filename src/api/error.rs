//! The one place where errors become gRPC statuses.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::agent::error::RunError;
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
    /// names them too, for clients that do not decode details.
    pub fn into_status(self) -> Status {
        let message = self
            .0
            .iter()
            .map(|(field, description)| format!("{field}: {description}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut details = ErrorDetails::new();
        for (field, description) in self.0 {
            details.add_bad_request_violation(field, description);
        }
        Status::with_error_details(Code::InvalidArgument, message, details)
    }
}

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
