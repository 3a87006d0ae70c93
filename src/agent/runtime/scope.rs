//! Runs belong to the tenant that started them: its idempotency keys live in their own
//! namespace, and Observe, Abort and the decisions of another tenant's run answer NOT_FOUND,
//! exactly as for a run that does not exist (its existence is not revealed).

use super::{Runtime, decode_record};
use crate::agent::error::RunError;
use crate::tenant::Identity;

/// The store key of an idempotency key: unscoped keys keep their historical key; a tenant's
/// get a prefix no unscoped key can produce (`idempotency@` vs `idempotency:`).
pub(super) fn idempotency_key(tenant: &str, key: &str) -> String {
    if tenant.is_empty() {
        format!("idempotency:{key}")
    } else {
        format!("idempotency@{tenant}:{key}")
    }
}

/// A run id that another tenant's run uses is taken: ALREADY_EXISTS, as for any used id.
pub(super) fn check_same_tenant(tenant: &str, owner: &str, run_id: &str) -> Result<(), RunError> {
    if tenant.is_empty() || tenant == owner {
        Ok(())
    } else {
        Err(RunError::AlreadyExists(format!(
            "run_id {run_id:?} is already used"
        )))
    }
}

fn unknown(run_id: &str) -> RunError {
    RunError::NotFound(format!("run {run_id:?} is unknown or expired"))
}

impl Runtime {
    /// NOT_FOUND (the text of an unknown run) unless `identity` may reach the run; unscoped
    /// callers reach every run without a store read.
    pub async fn authorize_run(&self, identity: &Identity, run_id: &str) -> Result<(), RunError> {
        if *identity == Identity::Unscoped {
            return Ok(());
        }
        match self.deps.store.get_run(run_id).await? {
            Some(doc) if identity.reaches_run(&decode_record(&doc)?.tenant) => Ok(()),
            _ => Err(unknown(run_id)),
        }
    }

    /// [`check_same_tenant`] for a run whose record is read here.
    pub(super) async fn check_run_tenant(
        &self,
        tenant: &str,
        run_id: &str,
    ) -> Result<(), RunError> {
        if tenant.is_empty() {
            return Ok(());
        }
        match self.deps.store.get_run(run_id).await? {
            Some(doc) => check_same_tenant(tenant, &decode_record(&doc)?.tenant, run_id),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_are_namespaced_by_tenant() {
        assert_eq!(idempotency_key("", "k"), "idempotency:k");
        assert_eq!(idempotency_key("acme", "k"), "idempotency@acme:k");
        assert_ne!(idempotency_key("acme", "k"), idempotency_key("globex", "k"));
        // An unscoped key cannot spell a tenant's store key.
        assert_ne!(idempotency_key("", "@acme:k"), idempotency_key("acme", "k"));
    }

    #[test]
    fn another_tenants_run_id_is_taken() {
        assert!(check_same_tenant("", "acme", "r").is_ok());
        assert!(check_same_tenant("acme", "acme", "r").is_ok());
        let taken = check_same_tenant("globex", "acme", "r").unwrap_err();
        assert!(matches!(taken, RunError::AlreadyExists(_)));
    }
}
