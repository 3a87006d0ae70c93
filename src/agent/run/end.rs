//! How a run that has a record (a runtime's run) writes its end: its last messages and the
//! record's end in one store call ([`crate::store::Store::end_run`]), so that `finish` waits
//! for one write, not two. Where something must happen between the two, the messages are
//! saved alone and the caller records the end afterwards, as for a run without a record.

use super::Runner;
use crate::agent::emit::Emitter;
use crate::agent::error::RunFailure;
use crate::agent::result::RunEnd;

impl Runner {
    /// Saves the messages not saved yet and writes the run's end (`RunEnd::Suspended`: with
    /// its state, until decisions come) in one store call. `Err`: nothing was written.
    ///
    /// Saves alone, leaving the end to the caller, when the run has no record, when semantic
    /// recall stores the messages' embeddings by the positions the save gives, or when a
    /// title event goes into the log before `finish`.
    pub(super) async fn save_and_end(
        &mut self,
        em: &Emitter,
        end: RunEnd,
    ) -> Result<(), RunFailure> {
        let title_event = self.state.title_pending
            && self
                .state
                .request
                .memory
                .as_ref()
                .is_some_and(|m| m.emit_title_event);
        let together = self
            .checkpoint
            .clone()
            .filter(|_| !title_event && self.recall_setup().is_none());
        let Some(checkpoint) = together else {
            return self.save().await;
        };
        let unsaved = self.unsaved()?;
        let before = (self.state.saved, self.state.thread_existed);
        // A suspended run's stored state must count them as saved.
        if let Some((_, count)) = &unsaved {
            self.mark_saved(*count);
        }
        let suspended = (end == RunEnd::Suspended).then_some(&self.state);
        let messages = unsaved.map(|(append, _)| append);
        // Nothing is emitted between here and `finish`, which is the next chunk.
        match checkpoint
            .end(messages, end, suspended, em.sequence() + 1)
            .await
        {
            Ok(()) => {
                self.ended = true;
                Ok(())
            }
            Err(e) => {
                (self.state.saved, self.state.thread_existed) = before;
                Err(e.into())
            }
        }
    }
}
