//! Where a campaign's lines go: its progress and its table (the output),
//! and its warnings. `regent torture` prints them on stdout and stderr; a
//! program driving a campaign may keep them or silence them.

use std::fmt;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// Where a campaign writes as it goes: its output (the start, each fault
/// as it is injected, the table at the end, where the report went) and
/// its warnings (a candidate that would not stop, a store that could not
/// be restarted). A line that cannot be written is lost, never a panic.
///
/// Cheap to clone: clones write to the same place.
#[derive(Clone, Default)]
pub struct Console {
    sink: Arc<Sink>,
}

#[derive(Default)]
enum Sink {
    /// Output on stdout, warnings on stderr.
    #[default]
    Stdio,
    /// Nothing is written.
    Silent,
    /// Two writers of the caller's.
    Writers {
        output: Mutex<Box<dyn Write + Send>>,
        warnings: Mutex<Box<dyn Write + Send>>,
    },
}

impl Console {
    /// Output on stdout, warnings on stderr, as `regent torture` prints
    /// them (the default).
    pub fn stdio() -> Self {
        Self::default()
    }

    /// Writes nothing: the [`Outcome`](crate::Outcome) holds the report.
    pub fn silent() -> Self {
        Self {
            sink: Arc::new(Sink::Silent),
        }
    }

    /// Output to `output`, warnings to `warnings`, a line at a time.
    pub fn new(output: impl Write + Send + 'static, warnings: impl Write + Send + 'static) -> Self {
        Self {
            sink: Arc::new(Sink::Writers {
                output: Mutex::new(Box::new(output)),
                warnings: Mutex::new(Box::new(warnings)),
            }),
        }
    }

    /// Writes one line of output.
    pub(crate) fn say(&self, line: fmt::Arguments<'_>) {
        match &*self.sink {
            Sink::Stdio => {
                let _ = writeln!(std::io::stdout(), "{line}");
            }
            Sink::Silent => {}
            Sink::Writers { output, .. } => {
                let _ = writeln!(
                    output.lock().unwrap_or_else(PoisonError::into_inner),
                    "{line}"
                );
            }
        }
    }

    /// Writes one line of warning.
    pub(crate) fn warn(&self, line: fmt::Arguments<'_>) {
        match &*self.sink {
            Sink::Stdio => {
                let _ = writeln!(std::io::stderr(), "{line}");
            }
            Sink::Silent => {}
            Sink::Writers { warnings, .. } => {
                let _ = writeln!(
                    warnings.lock().unwrap_or_else(PoisonError::into_inner),
                    "{line}"
                );
            }
        }
    }
}

impl fmt::Debug for Console {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match &*self.sink {
            Sink::Stdio => "Console::stdio",
            Sink::Silent => "Console::silent",
            Sink::Writers { .. } => "Console::new",
        })
    }
}

/// A line of output on a [`Console`]: `say!(console, "…", args)`.
macro_rules! say {
    ($console:expr) => {
        $console.say(format_args!(""))
    };
    ($console:expr, $($arg:tt)*) => {
        $console.say(format_args!($($arg)*))
    };
}

/// A line of warning on a [`Console`]: `warn_user!(console, "…", args)`.
macro_rules! warn_user {
    ($console:expr, $($arg:tt)*) => {
        $console.warn(format_args!($($arg)*))
    };
}
