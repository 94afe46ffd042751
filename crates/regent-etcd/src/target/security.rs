//! The TLS files and credentials of an etcd target: checked against its
//! URL and each other, their files read.

use std::fmt;
use std::path::{Path, PathBuf};

use regent_core::target::{Detail, Mention, OptionValue, Options, Source, TargetError, printable};

use super::url::EtcdUrl;

/// A value and the option it came from (with where that came from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sourced<T> {
    pub(super) value: T,
    pub(super) from: OptionValue,
}

/// A password or a private key: `Debug` shows `***`, so that no `{:?}` of
/// it or of what holds it prints it.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Secret<T>(pub(super) T);

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// An etcd user and its password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Credentials {
    pub(super) user: String,
    pub(super) password: Secret<String>,
}

/// TLS files and credentials for an etcd store, checked against its URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct EtcdSecurity {
    /// The CA to trust (etcds:// only); without it, the system's CA store
    /// (as etcdctl does without `--cacert`).
    pub(super) cacert: Option<Sourced<PathBuf>>,
    /// Client certificate and its key (etcds:// only).
    pub(super) identity: Option<(Sourced<PathBuf>, Sourced<PathBuf>)>,
    pub(super) user: Option<Credentials>,
}

/// PEM contents read from the files an [`EtcdSecurity`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TlsPem {
    /// The CA to trust; `None`: the system's CA store.
    pub(super) ca: Option<Vec<u8>>,
    /// Client certificate and its private key.
    pub(super) identity: Option<(Vec<u8>, Secret<Vec<u8>>)>,
}

#[cfg(feature = "tls")]
impl EtcdSecurity {
    /// Reads the TLS files of an etcds:// store, checking that each holds
    /// what its option takes: a swapped certificate and key fail here,
    /// naming the options, rather than as a TLS error at connection.
    pub(super) fn read_tls(&self) -> Result<TlsPem, TargetError> {
        let identity = match &self.identity {
            Some((cert, key)) => Some((
                read_pem(cert, PemKind::Certificate)?,
                Secret(read_pem(key, PemKind::PrivateKey)?),
            )),
            None => None,
        };
        Ok(TlsPem {
            ca: match &self.cacert {
                Some(ca) => Some(read_pem(ca, PemKind::Certificate)?),
                None => None,
            },
            identity,
        })
    }
}

/// What a PEM file must hold for the option that names it.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PemKind {
    /// `cacert`, `cert`: a `CERTIFICATE` block.
    Certificate,
    /// `key`: a `PRIVATE KEY` block (`RSA PRIVATE KEY`, `EC …` too).
    PrivateKey,
}

#[cfg(feature = "tls")]
impl PemKind {
    /// Whether a block labelled `label` is what this option takes, by the
    /// check the store builder's TLS setters make.
    fn takes(self, label: &crate::store::PemLabel) -> bool {
        match self {
            Self::Certificate => label.is_certificate(),
            Self::PrivateKey => label.is_private_key(),
        }
    }
}

#[cfg(feature = "tls")]
fn read_pem(file: &Sourced<PathBuf>, want: PemKind) -> Result<Vec<u8>, TargetError> {
    let path = &file.value;
    let bytes = std::fs::read(path).map_err(|e| TargetError::unreadable(&file.from, path, e))?;
    let labels = crate::store::pem_labels(&bytes);
    if labels.is_empty() {
        return Err(TargetError::bad_file(
            &file.from,
            path,
            ": not a PEM file (no '-----BEGIN' line)",
        ));
    }
    if labels.iter().any(|l| want.takes(l)) {
        return Ok(bytes);
    }
    let (block, other, is_it) = match want {
        PemKind::Certificate => ("CERTIFICATE", "key", "the key"),
        PemKind::PrivateKey => ("PRIVATE KEY", "cert", "the certificate"),
    };
    let found = labels
        .iter()
        .map(|l| printable(l.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let detail = Detail::new(format!(": holds no {block} block, only {found}"));
    // A block of the other kind: most likely the two files were swapped.
    // The other option is named the way this one was given.
    let detail = if labels
        .iter()
        .any(|l| l.is_certificate() || l.is_private_key())
    {
        detail
            .text(format!(" (is it {is_it}? "))
            .option(other, Mention::LikeTheSubject)
            .text(" takes that)")
    } else {
        detail
    };
    Err(TargetError::bad_file(&file.from, path, detail))
}

/// A path option as given.
fn path(options: &Options, name: &str) -> Option<Sourced<PathBuf>> {
    options.get(name).map(|v| Sourced {
        value: PathBuf::from(&v.value),
        from: v.clone(),
    })
}

/// Checks the TLS files and credentials given in `options` against the
/// store URL.
pub(super) fn security(options: &Options, url: &EtcdUrl) -> Result<EtcdSecurity, TargetError> {
    let cacert = path(options, "cacert");
    let cert = path(options, "cert");
    let key = path(options, "key");

    if !url.tls
        && let Some(s) = [&cacert, &cert, &key].into_iter().flatten().next()
    {
        return Err(TargetError::conflict(
            &s.from,
            &[],
            format!("is set, but the store {url} is plain-text etcd; write etcds://… to speak TLS"),
        ));
    }
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (Some(c), None) => {
            return Err(TargetError::missing(
                &c.from,
                &["key"],
                Detail::new("needs its private key: ").option("key", Mention::EitherWayWithValue),
            ));
        }
        (None, Some(k)) => {
            return Err(TargetError::missing(
                &k.from,
                &["cert"],
                Detail::new("needs its certificate: ").option("cert", Mention::EitherWayWithValue),
            ));
        }
    };

    let user = options.get("user").map(|v| Sourced {
        value: v.value.to_string_lossy().into_owned(),
        from: v.clone(),
    });
    if let Some(u) = user.as_ref().filter(|u| u.value.contains(':')) {
        // Never echo what follows the ':': it is likely a password.
        return Err(TargetError::bad_value(
            &u.from,
            Detail::new(format!(
                "'{}:…' contains ':'; give the password through ",
                printable(u.value.split(':').next().unwrap_or_default())
            ))
            .option("password", Mention::Set)
            .text(" or ")
            .option("password-file", Mention::Set)
            .text(", not after the user name"),
        ));
    }
    let password = password(options)?;
    let user = match (user, password) {
        (None, None) => None,
        (Some(u), Some(p)) => Some(Credentials {
            user: u.value,
            password: p.value,
        }),
        (Some(u), None) => {
            return Err(TargetError::missing(
                &u.from,
                &["password", "password-file"],
                Detail::new(format!("'{}' needs a password: set ", printable(&u.value)))
                    .option("password", Mention::Set)
                    .text(", or pass ")
                    .option("password-file", Mention::EitherWayWithValue),
            ));
        }
        (None, Some(p)) => {
            return Err(TargetError::missing(
                &p.from,
                &["user"],
                Detail::new("is set but no user is: pass ")
                    .option("user", Mention::EitherWayWithValue),
            ));
        }
    };
    Ok(EtcdSecurity {
        cacert,
        identity,
        user,
    })
}

/// The password: `password-file` given by flag (or by a program), else
/// `password`, else `password-file` given by variable. A file's trailing
/// line break is not part of the password.
pub(super) fn password(options: &Options) -> Result<Option<Sourced<Secret<String>>>, TargetError> {
    let file = options.get("password-file");
    let file = match (file, options.get("password")) {
        (Some(f), _) if !matches!(f.source, Source::Env(_)) => Some(f),
        (_, Some(p)) => {
            return Ok(Some(Sourced {
                value: Secret(p.text()?.to_owned()),
                from: p.clone(),
            }));
        }
        (f, None) => f,
    };
    let Some(file) = file else {
        return Ok(None);
    };
    let path = PathBuf::from(&file.value);
    let text = read_password_file(&path).map_err(|e| match e {
        PasswordFile::Unreadable(e) => TargetError::unreadable(file, &path, e),
        PasswordFile::Empty => TargetError::bad_file(file, &path, ": the file is empty"),
        PasswordFile::Lines => {
            TargetError::bad_file(file, &path, ": the password file must hold one line")
        }
    })?;
    Ok(Some(Sourced {
        value: Secret(text),
        from: file.clone(),
    }))
}

/// Why a password file gives no password.
enum PasswordFile {
    Unreadable(std::io::Error),
    Empty,
    Lines,
}

fn read_password_file(path: &Path) -> Result<String, PasswordFile> {
    let text = std::fs::read_to_string(path).map_err(PasswordFile::Unreadable)?;
    let text = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if text.is_empty() {
        return Err(PasswordFile::Empty);
    }
    if text.contains('\n') {
        return Err(PasswordFile::Lines);
    }
    Ok(text.to_owned())
}
