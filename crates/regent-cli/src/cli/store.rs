//! Where the election lives: `--store`, `--election`, and the store
//! options generated from each store's option table.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Arg, ArgMatches, Args, FromArgMatches};
use regent_core::target::{OptionKind, StoreKind, StoreOption};

/// Where the election lives.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    #[arg(long, value_name = "URL", help = store_help())]
    pub(crate) store: Option<String>,
    /// Election name: 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit.
    #[arg(long, value_name = "NAME")]
    pub(crate) election: String,
    #[command(flatten)]
    pub(crate) options: StoreFlags,
}

/// `--store`'s help: the URL forms of every store in this build.
pub(crate) fn store_help() -> String {
    format!(
        "Store URL: {} (default: sqlite:$XDG_STATE_HOME/regent/elections.db, else \
         ~/.local/state/regent/elections.db)",
        regent::url::supported_forms()
    )
}

/// The options of every store this build includes, as flags generated from
/// the stores' option tables: `--KIND-NAME` under the help heading `KIND
/// store`, each falling back to its variable `REGENT_KIND_NAME` (read when
/// the store is resolved, not by clap: a variable of another store than the
/// URL's is ignored, a flag of another store is an error). Secrets have no
/// flag.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoreFlags {
    /// `(flag name without dashes, value)` for every flag given.
    pub(crate) given: Vec<(String, OsString)>,
}

impl StoreFlags {
    /// The flags as arguments again, for a child `regent run`.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        self.given
            .iter()
            .flat_map(|(flag, value)| [format!("--{flag}").into(), value.clone()])
            .collect()
    }
}

/// Every store option that has a flag, with its kind.
fn flag_options() -> impl Iterator<Item = (&'static StoreKind, &'static StoreOption)> {
    regent::url::store_kinds()
        .iter()
        .flat_map(|kind| kind.options.iter().map(move |o| (*kind, o)))
        .filter(|(_, o)| o.has_flag())
}

impl FromArgMatches for StoreFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Self::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for (kind, option) in flag_options() {
            let name = option.flag_name(kind);
            if let Some(value) = matches.get_one::<OsString>(&name) {
                self.given.retain(|(f, _)| *f != name);
                self.given.push((name, value.clone()));
            }
        }
        Ok(())
    }
}

impl Args for StoreFlags {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        for (kind, option) in flag_options() {
            let name = option.flag_name(kind);
            let hint = match option.kind {
                OptionKind::Path => clap::ValueHint::FilePath,
                _ => clap::ValueHint::Other,
            };
            cmd = cmd.arg(
                Arg::new(name.clone())
                    .long(name)
                    .value_name(option.value_name)
                    .value_parser(clap::value_parser!(OsString))
                    .value_hint(hint)
                    .help(format!("{} [env: {}]", option.help, option.env_name(kind)))
                    .help_heading(format!("{} store", kind.name)),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The default store: `$XDG_STATE_HOME/regent/elections.db`, else
/// `$HOME/.local/state/regent/elections.db`, else
/// `/tmp/regent-UID/elections.db`.
pub(crate) fn default_store_path() -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        });
    match base {
        Some(b) => b.join("regent").join("elections.db"),
        None => std::env::temp_dir()
            .join(format!("regent-{}", rustix::process::getuid().as_raw()))
            .join("elections.db"),
    }
}
