//! Tenant scoping in the handlers: the caller's [`Identity`] (put in the request's extensions
//! by [`super::layer::RpcLayer`]) and the check of a resource id a request names.

use tonic::Status;

use crate::tenant::Identity;

/// The caller of a request; unscoped when nothing identified it (no auth layer in front).
pub(crate) fn identity(extensions: &tonic::Extensions) -> Identity {
    extensions.get::<Identity>().cloned().unwrap_or_default()
}

/// PERMISSION_DENIED naming `field` when `resource_id` is outside the caller's tenant.
pub(crate) fn check_resource(
    identity: &Identity,
    field: &str,
    resource_id: &str,
) -> Result<(), Status> {
    if identity.allows_resource(resource_id) {
        return Ok(());
    }
    let tenant = identity.tenant().unwrap_or_default();
    Err(Status::permission_denied(format!(
        "{field}: resource {resource_id:?} is outside tenant {tenant:?}'s resource prefixes"
    )))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tenant::Tenant;

    #[test]
    fn out_of_scope_resources_are_permission_denied_naming_the_field() {
        let acme = Identity::Tenant(Arc::new(Tenant {
            name: "acme".into(),
            resource_prefixes: vec!["acme/".into()],
        }));
        assert!(check_resource(&acme, "resource_id", "acme/1").is_ok());
        let denied = check_resource(&acme, "memory.resource", "globex/1").unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert!(
            denied.message().starts_with("memory.resource: "),
            "{}",
            denied.message()
        );
        assert!(check_resource(&Identity::Unscoped, "resource_id", "x").is_ok());
        assert_eq!(identity(&tonic::Extensions::new()), Identity::Unscoped);
    }
}
