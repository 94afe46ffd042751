//! `etcdctl` pointed at a member or a cluster, and enabling etcd's
//! authentication on a member with it.

use std::collections::hash_map::RandomState;
use std::ffi::OsStr;
use std::hash::{BuildHasher as _, Hasher as _};
use std::process::{Command, Output};

use super::super::EngineError;
use super::super::process::Program;
use super::Etcd;

impl Etcd {
    /// A `Command` for `etcdctl` with `ETCDCTL_API=3` and
    /// `--endpoints=` this member; add the arguments and run or spawn it
    /// (for example `etcdctl elect NAME VALUE`, which holds until SIGINT).
    ///
    /// On a secured member it also carries `--cacert`, `--cert` and `--key`
    /// (the test CA and client certificate) and `--user`
    /// ([`Etcd::credentials`]), and the endpoint is [`Etcd::client_url`].
    pub fn etcdctl_command(&self) -> Command {
        let mut command = self.etcdctl_command_without_credentials();
        if let Some((user, password)) = &self.security.credentials {
            command.arg(format!("--user={user}:{password}"));
        }
        command
    }

    /// Runs `etcdctl ARGS` against this member and returns its output,
    /// successful or not.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_ETCDCTL_BIN`) when there is no etcdctl;
    /// [`EngineError::Spawn`] when it could not be run.
    pub fn try_etcdctl<I, S>(&self, args: I) -> Result<Output, EngineError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_etcdctl(&self.etcdctl, self.etcdctl_command(), args)
    }

    /// Runs `etcdctl ARGS` against this member and returns its output,
    /// successful or not.
    ///
    /// # Panics
    ///
    /// If etcdctl cannot be run, with [`Etcd::try_etcdctl`]'s error (which
    /// names `scripts/install-engines` when etcdctl is missing).
    pub fn etcdctl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.try_etcdctl(args).unwrap_or_else(|err| panic!("{err}"))
    }

    /// As [`Etcd::etcdctl_command`] without `--user`.
    pub(super) fn etcdctl_command_without_credentials(&self) -> Command {
        match &self.security.tls {
            None => etcdctl_command(&self.etcdctl, &self.endpoints()),
            Some((_, files)) => {
                let mut command = etcdctl_command(&self.etcdctl, &[self.client_url()]);
                command
                    .arg(format!("--cacert={}", files.ca_cert().display()))
                    .arg(format!("--cert={}", files.client_cert().display()))
                    .arg(format!("--key={}", files.client_key().display()));
                command
            }
        }
    }

    /// Creates the users and role and runs `auth enable`; from then on the
    /// etcdctl helpers log in as `user`.
    pub(super) fn enable_auth(
        &mut self,
        user: String,
        password: String,
    ) -> Result<(), EngineError> {
        let root_password = if user == "root" {
            password.clone()
        } else {
            random_password()
        };
        // The arguments of each step, and a new user's password, which is
        // kept out of error messages.
        let mut steps: Vec<(Vec<&str>, Option<&str>)> =
            vec![(vec!["user", "add", "root"], Some(&root_password))];
        if user != "root" {
            steps.extend([
                (vec!["user", "add", &user], Some(password.as_str())),
                (vec!["role", "add", AUTH_ROLE], None),
                // Every key from the empty one on: the whole keyspace.
                (
                    vec![
                        "role",
                        "grant-permission",
                        AUTH_ROLE,
                        "readwrite",
                        "--from-key",
                        "",
                    ],
                    None,
                ),
                (vec!["user", "grant-role", &user, AUTH_ROLE], None),
            ]);
        }
        steps.push((vec!["auth", "enable"], None));
        for (args, new_password) in steps {
            let mut command = self.etcdctl_command_without_credentials();
            command.args(&args);
            if let Some(new_password) = new_password {
                command.arg(format!("--new-user-password={new_password}"));
            }
            let output = run_etcdctl(&self.etcdctl, command, None::<&str>)?;
            if !output.status.success() {
                return Err(EngineError::Setup {
                    instance: self.instance(),
                    step: format!("etcdctl {}", args.join(" ")),
                    status: output.status,
                    output: format!(
                        "{}{}",
                        String::from_utf8_lossy(&output.stdout),
                        String::from_utf8_lossy(&output.stderr)
                    ),
                });
            }
        }
        self.security.credentials = Some((user, password));
        Ok(())
    }
}

/// The role the kit grants a user other than `root`: read and write on every
/// key.
const AUTH_ROLE: &str = "regent-readwrite";

/// A password nobody needs to know (for `root` when the test logs in as
/// another user).
fn random_password() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!(
        "{:016x}{:016x}",
        hasher.finish(),
        RandomState::new().build_hasher().finish()
    )
}

pub(super) fn etcdctl_command(etcdctl: &Program, endpoints: &[String]) -> Command {
    let mut command = etcdctl.command("ETCDCTL_");
    command
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", endpoints.join(",")));
    command
}

pub(super) fn run_etcdctl<I, S>(
    etcdctl: &Program,
    mut command: Command,
    args: I,
) -> Result<Output, EngineError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    command
        .args(args)
        .output()
        .map_err(|source| etcdctl.spawn_error(source))
}
