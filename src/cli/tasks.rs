//! `agentd tasks watch THREAD`: the thread's list as a checklist with progress, redrawn in
//! place on a terminal after every change (each change printed below the last elsewhere).

use std::io::Write;

use super::client::{CliError, Clients};
use super::render::{self, Style, TaskLine};
use crate::pb::WatchRequest;

/// Follows the list until the server ends the stream (or, with `until_done`, until every
/// task is completed).
pub async fn watch(
    clients: &mut Clients,
    thread: String,
    resource: String,
    until_done: bool,
) -> Result<(), CliError> {
    let style = Style::stdout();
    let title = format!("Tasks of {thread}:");
    let mut stream = clients
        .tasks
        .watch(WatchRequest {
            thread_id: thread,
            resource_id: resource,
        })
        .await
        .map_err(|s| clients.error(s))?
        .into_inner();
    let mut drawn = 0;
    loop {
        let update = match stream.message().await {
            Ok(Some(update)) => update,
            Ok(None) => {
                return Err(CliError::Interrupted(
                    "the server ended the watch".to_owned(),
                ));
            }
            Err(status) => return Err(clients.error(status)),
        };
        let tasks: Vec<TaskLine> = update.tasks.iter().map(TaskLine::from).collect();
        let lines = render::checklist(style, &title, &tasks);
        if style.terminal {
            let mut stdout = std::io::stdout().lock();
            if drawn > 0 {
                // Up to the first line of the last drawing, then clear to the end of screen.
                let _ = write!(stdout, "\x1b[{drawn}F\x1b[J");
            }
            // Auto-wrap off while drawing: a line wider than the terminal is cut, not wrapped,
            // so each line is one row and the next redraw goes up exactly `drawn` rows.
            let _ = write!(stdout, "\x1b[?7l");
            for line in &lines {
                let _ = writeln!(stdout, "{line}");
            }
            let _ = write!(stdout, "\x1b[?7h");
            let _ = stdout.flush();
        } else {
            if drawn > 0 {
                render::out("");
            }
            for line in &lines {
                render::out(line);
            }
        }
        drawn = lines.len();
        if until_done && render::all_done(&tasks) {
            return Ok(());
        }
    }
}
