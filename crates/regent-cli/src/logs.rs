//! Logs to stderr, as text for people or as JSON lines for collectors
//! (`--log-format`).
//!
//! In JSON every line is one object: `timestamp` (RFC 3339, UTC), `level`,
//! `target`, `message`, then the fields of the spans the line was logged in
//! (outermost first) and the event's own, all at the top level, so that a
//! collector can select the lines of a term by `election`, `holder` and
//! `token` without knowing which span carried them. A field named like one
//! of the first four keys is written as `field.NAME`. The lines of
//! `warn_user!` are objects of level `WARN` and target `regent` there,
//! shown whatever `REGENT_LOG` says, as they are in text.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{EnvFilter, FilterExt as _, filter_fn};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

/// How regent writes its logs (and its warnings) to stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for people: tracing's text format, and warnings as plain lines.
    #[default]
    Text,
    /// One JSON object per line, fields at the top level.
    Json,
}

/// The target of `warn_user!` lines in JSON.
const USER_TARGET: &str = "regent";

/// The span `regent run` enters around each term (`run::supervise`).
const TERM_SPAN: &str = "term";

/// The keys every JSON line starts with; fields do not replace them.
const RESERVED: [&str; 4] = ["timestamp", "level", "target", "message"];

/// Whether `warn_user!` writes JSON. Set once, before anything is logged.
static JSON: AtomicBool = AtomicBool::new(false);

/// Makes `warn_user!` write `format`, without installing a subscriber: for
/// the processes that log nothing else (the shim), and before
/// [`init_logs_as`].
pub(crate) fn set_format(format: LogFormat) {
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
}

/// Whether regent logs JSON lines (`--log-format json`).
pub(crate) fn is_json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Logs to stderr as regent does, in `format`: see [`crate::init_logs`],
/// which is this with [`LogFormat::Text`]. Call it once, first.
pub fn init_logs_as(format: LogFormat) {
    set_format(format);
    let filter = EnvFilter::try_from_env("REGENT_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            // Colour only for a person at a terminal: escape codes would
            // litter log files and the journal.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            // A log line that cannot be written (stderr a closed pipe) is
            // lost, not a panic: regent must still stop CMD and release
            // the lease.
            .log_internal_errors(false)
            .init(),
        LogFormat::Json => {
            // The term span is recorded at every level, for its fields to
            // be on the lines of the term whatever REGENT_LOG enables (a
            // span alone writes nothing); warnings to the user are shown
            // whatever it says, as in text.
            let filter = filter
                .or(filter_fn(|m| m.is_span() && m.name() == TERM_SPAN))
                .or(filter_fn(|m| m.is_event() && m.target() == USER_TARGET));
            let layer = tracing_subscriber::fmt::layer()
                .fmt_fields(JsonFields::new())
                .event_format(JsonLines)
                .with_writer(std::io::stderr)
                .with_ansi(false)
                // As in text: a line that cannot be written is lost.
                .log_internal_errors(false)
                .with_filter(filter);
            tracing_subscriber::registry().with(layer).init();
        }
    }
}

/// The line of `warn_user!`: plain text as ever, or in JSON a `WARN`
/// object that carries the fields of the current spans (those of the term
/// among them). Never panics: with a closed stderr regent must still stop
/// the command and release the lease.
pub(crate) fn user_line(text: fmt::Arguments<'_>) {
    use std::io::Write as _;
    if !JSON.load(Ordering::Relaxed) {
        let _ = writeln!(std::io::stderr(), "{text}");
    } else if tracing::dispatcher::has_been_set() {
        tracing::warn!(target: USER_TARGET, "{text}");
    } else {
        // No subscriber in this process (the shim): no spans either.
        let mut line = String::new();
        let message = text.to_string();
        if write_line(&mut line, Level::WARN, USER_TARGET, &message, &[]).is_ok() {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

/// Writes one JSON object and a newline: the reserved keys, then `fields`
/// in order.
fn write_line(
    out: &mut impl fmt::Write,
    level: Level,
    target: &str,
    message: &str,
    fields: &[(String, Value)],
) -> fmt::Result {
    // `Value`'s `Display` is compact JSON, strings escaped.
    write!(
        out,
        "{{\"timestamp\":\"{:.6}\",\"level\":\"{}\",\"target\":{},\"message\":{}",
        jiff::Timestamp::now(),
        level.as_str(),
        Value::from(target),
        Value::from(message),
    )?;
    for (key, value) in fields {
        write!(out, ",{}:{value}", Value::from(key.as_str()))?;
    }
    out.write_str("}\n")
}

/// The event format of `--log-format json`: see the module docs.
struct JsonLines;

impl<S> FormatEvent<S, JsonFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        for span in ctx.event_scope().into_iter().flat_map(|s| s.from_root()) {
            let extensions = span.extensions();
            // `JsonFields` keeps a span's fields as the text of an object.
            let Some(recorded) = extensions.get::<FormattedFields<JsonFields>>() else {
                continue;
            };
            if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&recorded.fields) {
                for (key, value) in map {
                    fields.put(&key, value);
                }
            }
        }
        event.record(&mut fields);
        let meta = event.metadata();
        write_line(
            &mut writer,
            *meta.level(),
            meta.target(),
            fields.message.as_deref().unwrap_or(""),
            &fields.list,
        )
    }
}

/// An event's fields as JSON values, in order; a later field of the same
/// name (the event's, over its span's) replaces the earlier one in place.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    list: Vec<(String, Value)>,
}

impl Fields {
    fn put(&mut self, name: &str, value: Value) {
        if name == "message" {
            self.message = Some(match value {
                Value::String(s) => s,
                other => other.to_string(),
            });
            return;
        }
        let key = if RESERVED.contains(&name) {
            format!("field.{name}")
        } else {
            name.to_owned()
        };
        match self.list.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.list.push((key, value)),
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field.name(), Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field.name(), Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field.name(), Value::String(value.to_string()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field.name(), Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field.name(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field.name(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and infinities are no JSON numbers: `Value::from` makes them
        // null; their text says more.
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| Value::String(value.to_string()), Value::Number);
        self.put(field.name(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> serde_json::Map<String, Value> {
        match serde_json::from_str(line) {
            Ok(Value::Object(m)) => m,
            other => panic!("not a JSON object: {line:?} ({other:?})"),
        }
    }

    #[test]
    fn a_line_is_one_object_with_the_reserved_keys_first() {
        let mut line = String::new();
        let fields = [
            ("election".to_owned(), Value::from("jobs")),
            ("token".to_owned(), Value::from(7u64)),
        ];
        write_line(
            &mut line,
            Level::INFO,
            "regent_core",
            "say \"hi\"\n",
            &fields,
        )
        .unwrap();
        assert!(line.starts_with("{\"timestamp\":\""), "{line}");
        assert!(
            line.ends_with("}\n") && line.matches('\n').count() == 1,
            "{line}"
        );
        let m = parse(&line);
        assert_eq!(m["level"], "INFO");
        assert_eq!(m["target"], "regent_core");
        assert_eq!(m["message"], "say \"hi\"\n");
        assert_eq!(m["election"], "jobs");
        assert_eq!(m["token"], 7);
        let ts = m["timestamp"].as_str().unwrap();
        assert!(ts.parse::<jiff::Timestamp>().is_ok(), "{ts}");
    }

    #[test]
    fn fields_do_not_replace_reserved_keys_and_later_ones_win() {
        let mut f = Fields::default();
        f.put("token", Value::from(1u64));
        f.put("level", Value::from("mine"));
        f.put("message", Value::from("text"));
        f.put("token", Value::from(2u64));
        assert_eq!(f.message.as_deref(), Some("text"));
        assert_eq!(
            f.list,
            [
                ("token".to_owned(), Value::from(2u64)),
                ("field.level".to_owned(), Value::from("mine")),
            ]
        );
    }
}
