//! The Java classpaths of ZooKeeper's server and of the Curator clients:
//! Debian's jars in `/usr/share/java` (installed by
//! `scripts/install-engines`), or what a variable names instead.

use std::path::{Path, PathBuf};

use super::super::EngineError;

/// Where Debian installs the jars.
const JAVA_DIR: &str = "/usr/share/java";

/// The variable whose classpath replaces the kit's for ZooKeeper's server
/// and its command-line client.
pub const ZOOKEEPER_CLASSPATH_VAR: &str = "REGENT_ZOOKEEPER_CLASSPATH";

/// The variable whose classpath replaces the kit's for Curator clients.
pub const CURATOR_CLASSPATH_VAR: &str = "REGENT_CURATOR_CLASSPATH";

/// ZooKeeper 3.8's server and client, slf4j's API and its simple binding
/// (standard error, INFO and above). `zookeeper.jar`'s manifest names the
/// rest (Netty, Jackson, Jetty, metrics, commons-cli and commons-io) as
/// Debian installed them.
const ZOOKEEPER_JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
];

/// Curator 5.4's recipes, framework and client, ZooKeeper's client, Guava,
/// slf4j's API and its no-op binding (a participant's standard output is
/// its own). `curator-framework.jar`'s manifest adds Jackson's databind and
/// `zookeeper.jar`'s its Netty jars; Curator needs no commons-lang3.
const CURATOR_JARS: &[&str] = &[
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "guava.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
];

/// The classpath the kit runs ZooKeeper with (`java -cp`): Debian's
/// ZooKeeper 3.8 jars with slf4j's simple binding, or the value of
/// `REGENT_ZOOKEEPER_CLASSPATH` when that is set and not empty.
///
/// # Errors
///
/// [`EngineError::JarNotFound`] (naming `scripts/install-engines`) when a
/// jar or directory of the classpath does not exist (entries ending in
/// `*` are not checked).
pub fn zookeeper_classpath() -> Result<String, EngineError> {
    classpath("zookeeper", ZOOKEEPER_CLASSPATH_VAR, ZOOKEEPER_JARS)
}

/// The classpath of a Curator client (`javac -cp`, `java -cp`): Debian's
/// Curator 5.4 recipes, framework and client jars with ZooKeeper's client,
/// Guava and slf4j's no-op binding, enough to compile and run a
/// `LeaderLatch` or `LeaderSelector` participant; or the value of
/// `REGENT_CURATOR_CLASSPATH` when that is set and not empty.
///
/// ```no_run
/// let classpath = regent_testkit::engines::curator_classpath()?;
/// assert!(classpath.contains("curator-recipes.jar"));
/// # Ok::<(), regent_testkit::engines::EngineError>(())
/// ```
///
/// # Errors
///
/// [`EngineError::JarNotFound`] (naming `scripts/install-engines`) when a
/// jar or directory of the classpath does not exist (entries ending in
/// `*` are not checked).
pub fn curator_classpath() -> Result<String, EngineError> {
    classpath("curator", CURATOR_CLASSPATH_VAR, CURATOR_JARS)
}

fn classpath(name: &'static str, var: &'static str, jars: &[&str]) -> Result<String, EngineError> {
    let classpath = match std::env::var(var) {
        Ok(value) if !value.is_empty() => value,
        _ => jars
            .iter()
            .map(|jar| Path::new(JAVA_DIR).join(jar).display().to_string())
            .collect::<Vec<_>>()
            .join(":"),
    };
    check(name, var, &classpath)?;
    Ok(classpath)
}

/// [`EngineError::JarNotFound`] for the first entry of `classpath` that
/// does not exist.
fn check(name: &'static str, var: &'static str, classpath: &str) -> Result<(), EngineError> {
    let missing = classpath
        .split(':')
        .filter(|entry| !entry.is_empty() && !entry.ends_with('*'))
        .map(PathBuf::from)
        .find(|path| !path.exists());
    match missing {
        Some(jar) => Err(EngineError::JarNotFound {
            classpath: name,
            jar,
            var,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_jar_names_the_install_script_and_the_variable() {
        let err = check(
            "zookeeper",
            ZOOKEEPER_CLASSPATH_VAR,
            "/usr/share/java/no-such-regent-test.jar:/tmp/classes/*",
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("no-such-regent-test.jar"), "{message}");
        assert!(message.contains("REGENT_ZOOKEEPER_CLASSPATH"), "{message}");
        assert!(message.contains("scripts/install-engines"), "{message}");
        check("curator", CURATOR_CLASSPATH_VAR, "/tmp:/no/such/dir/*").unwrap();
    }
}
