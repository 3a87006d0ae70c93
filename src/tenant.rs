//! Who a call comes from, as far as data goes: an unscoped caller (no keys configured, or an
//! unscoped key) reaches everything; a tenant reaches the resources under its prefixes and the
//! runs it started. Resolved once per call from the `authorization` header (in memory) and put
//! in the request's extensions by [`crate::api::layer::RpcLayer`].

use std::sync::Arc;

/// The caller of one call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Identity {
    /// Every resource and run (no keys configured, or an unscoped key).
    #[default]
    Unscoped,
    /// One tenant's resources and runs.
    Tenant(Arc<Tenant>),
}

/// A tenant: a name and the resource-id prefixes it may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    /// Unique name, stored on the runs the tenant starts.
    pub name: String,
    /// A resource id is the tenant's when it starts with one of these.
    pub resource_prefixes: Vec<String>,
}

impl Identity {
    /// True when `resource_id` may be read and changed by this caller.
    pub fn allows_resource(&self, resource_id: &str) -> bool {
        match self {
            Self::Unscoped => true,
            Self::Tenant(t) => t
                .resource_prefixes
                .iter()
                .any(|p| resource_id.starts_with(p.as_str())),
        }
    }

    /// The owner recorded on a run this caller starts: the tenant's name, empty when unscoped.
    pub fn run_owner(&self) -> &str {
        match self {
            Self::Unscoped => "",
            Self::Tenant(t) => &t.name,
        }
    }

    /// True when this caller may observe, abort or decide a run recorded with `owner` (see
    /// [`Identity::run_owner`]): unscoped callers reach every run, a tenant only its own.
    pub fn reaches_run(&self, owner: &str) -> bool {
        match self {
            Self::Unscoped => true,
            Self::Tenant(t) => t.name == owner,
        }
    }

    /// The tenant's name, `None` when unscoped.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Self::Unscoped => None,
            Self::Tenant(t) => Some(&t.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acme() -> Identity {
        Identity::Tenant(Arc::new(Tenant {
            name: "acme".into(),
            resource_prefixes: vec!["acme/".into(), "shared-acme-".into()],
        }))
    }

    #[test]
    fn tenants_reach_their_prefixes_only() {
        let acme = acme();
        assert!(acme.allows_resource("acme/user-1"));
        assert!(acme.allows_resource("shared-acme-x"));
        assert!(!acme.allows_resource("acme"));
        assert!(!acme.allows_resource("globex/user-1"));
        assert!(!acme.allows_resource(""));
        assert!(Identity::Unscoped.allows_resource("anything"));
    }

    #[test]
    fn runs_belong_to_the_tenant_that_started_them() {
        let acme = acme();
        assert_eq!(acme.run_owner(), "acme");
        assert!(acme.reaches_run("acme"));
        assert!(!acme.reaches_run("globex"));
        assert!(!acme.reaches_run(""));
        assert_eq!(Identity::Unscoped.run_owner(), "");
        assert!(Identity::Unscoped.reaches_run("acme"));
        assert!(Identity::Unscoped.reaches_run(""));
    }
}
