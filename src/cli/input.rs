//! Lines typed by the user. Plain line reading (no line editor): it works the same on a
//! terminal, a pipe and a pseudo-terminal driven by a test.

use std::io::{BufRead, IsTerminal, Write};

use tokio::sync::mpsc;

/// Lines of stdin, read on a thread of their own so a stream can be followed meanwhile.
pub struct Input {
    lines: mpsc::UnboundedReceiver<std::io::Result<String>>,
    /// Piped input is not echoed by a terminal: echo it, so the transcript reads as typed.
    echo: bool,
}

impl Input {
    /// Starts reading stdin.
    pub fn stdin() -> Self {
        let (tx, lines) = mpsc::unbounded_channel();
        // A plain thread, not spawn_blocking: a read blocked on the terminal must not keep the
        // runtime from shutting down when the command ends.
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let failed = line.is_err();
                if tx.send(line).is_err() || failed {
                    break;
                }
            }
        });
        Self {
            lines,
            echo: !std::io::stdin().is_terminal(),
        }
    }

    /// Shows `prompt` and waits for the next line (without its line end); `None` at end of
    /// input (Ctrl-D).
    pub async fn line(&mut self, prompt: &str) -> std::io::Result<Option<String>> {
        {
            let mut stdout = std::io::stdout().lock();
            let _ = write!(stdout, "{prompt}");
            let _ = stdout.flush();
        }
        match self.lines.recv().await {
            Some(Ok(line)) => {
                let line = line.trim_end_matches('\r').to_owned();
                if self.echo {
                    super::render::out(&line);
                }
                Ok(Some(line))
            }
            Some(Err(e)) => Err(e),
            None => Ok(None),
        }
    }
}
