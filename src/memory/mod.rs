//! Memory beyond a run's history: working memory, and the thread operations ThreadService
//! offers (listing, paging, deleting).

pub mod threads;
pub mod working;
