//! Where working memory lives: a document of the thread (thread scope) or of the resource.

use bytes::Bytes;

use super::working::{DOC_KIND, Scope};
use crate::store::{Cas, Store, StoreResult, ThreadKey, Versioned};

/// Reads the working memory of `key`'s thread or resource (a thread's ownership is checked
/// for thread scope).
pub async fn read(
    store: &dyn Store,
    key: &ThreadKey,
    scope: Scope,
) -> StoreResult<Option<Versioned>> {
    match scope {
        Scope::Thread => store.get_doc(key, DOC_KIND).await,
        Scope::Resource => store.get_resource_doc(&key.resource_id, DOC_KIND).await,
    }
}

/// Writes it if its stored version is `expected` (0 = absent); thread scope creates the thread.
pub async fn cas(
    store: &dyn Store,
    key: &ThreadKey,
    scope: Scope,
    expected: u64,
    value: Bytes,
) -> StoreResult<Cas> {
    match scope {
        Scope::Thread => store.cas_doc(key, DOC_KIND, expected, value).await,
        Scope::Resource => {
            store
                .cas_resource_doc(&key.resource_id, DOC_KIND, expected, value)
                .await
        }
    }
}
