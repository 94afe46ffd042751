use std::path::Path;

use super::*;

fn parse_nothing(
    url: &str,
    _: &Options,
    _: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    Err(TargetError::url(&KIND, url, "takes nothing"))
}

static KIND: StoreKind = StoreKind {
    name: "ex",
    schemes: &["ex", "exs"],
    advises: &["http"],
    forms: "ex://HOST",
    short_forms: "ex://…",
    default_call_timeout: Duration::from_secs(1),
    options: &[
        StoreOption {
            name: "ca-cert",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "A CA.",
        },
        StoreOption {
            name: "password",
            kind: OptionKind::Secret,
            value_name: "PASSWORD",
            help: "A password.",
        },
    ],
    examples: &[],
    parse: parse_nothing,
};

#[test]
fn names_follow_one_convention() {
    let ca = KIND.option("ca-cert").unwrap();
    assert_eq!(ca.flag_name(&KIND), "ex-ca-cert");
    assert_eq!(ca.env_name(&KIND), "REGENT_EX_CA_CERT");
    assert!(ca.has_flag());
    assert!(!KIND.option("password").unwrap().has_flag());
    assert_eq!(KIND.secret_env_names(), ["REGENT_EX_PASSWORD"]);
    assert!(KIND.takes("EXS") && !KIND.takes("http") && KIND.answers("HTTP"));
}

#[test]
fn flags_win_over_variables_and_secrets_have_no_flag() {
    let flag = |n: &str| (n == "ex-ca-cert" || n == "ex-password").then(|| OsString::from("f"));
    let env = |v: &str| match v {
        "REGENT_EX_CA_CERT" => Some(OsString::from("e")),
        "REGENT_EX_PASSWORD" => Some(OsString::from("pw")),
        _ => None,
    };
    let o = KIND.resolve(flag, env);
    let ca = o.get("ca-cert").unwrap();
    assert_eq!(ca.value, "f");
    assert_eq!(ca.source.to_string(), "--ex-ca-cert");
    assert_eq!((ca.store.name, ca.option), ("ex", "ca-cert"));
    let pw = o.get("password").unwrap();
    assert_eq!(
        (pw.value.to_str(), pw.source.is_flag()),
        (Some("pw"), false)
    );
    assert_eq!(pw.source.to_string(), "REGENT_EX_PASSWORD");
    assert!(!format!("{o:?}").contains("pw\""), "{o:?}");
    // Empty variables are unset.
    let o = KIND.resolve(|_| None, |_| Some(OsString::new()));
    assert!(o.is_empty());
}

#[test]
fn programs_set_options_by_name() {
    let mut o = Options::new();
    o.set(&KIND, "ca-cert", "/ca.pem").unwrap();
    assert_eq!(
        o.get("ca-cert").unwrap().source.to_string(),
        "option 'ca-cert'"
    );
    let e = o.set(&KIND, "nope", "x").unwrap_err();
    assert!(
        matches!(&e, TargetError::UnknownOption { store: Some(s), option } if s.name == "ex" && option == "nope"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "ex stores have no option 'nope'; they take: ca-cert, password"
    );
}

#[test]
fn redaction_and_ports() {
    assert_eq!(redacted("etcd://h:1/ns"), "etcd://h:1/ns");
    assert_eq!(redacted("etcd://u:p@h/a@b"), "etcd://***@b");
    assert_eq!(redacted("x:u:p@h"), "***@h");
    // A SAS URL pasted as a store: its signature stays out of messages.
    assert_eq!(
        redacted("azblob://leases?sv=2024&sig=abc%2B&se=1#f"),
        "azblob://leases?sv=2024&sig=***&se=1#f"
    );
    assert_eq!(
        redacted("consul://h:8500?dc=east&token=t"),
        "consul://h:8500?dc=east&token=***"
    );
    assert_eq!(printable("a\tb"), "a\\tb");
    assert_eq!(port_number("02379"), Some(2379));
    for bad in ["", "+80", "-1", "0", "65536", "٣"] {
        assert_eq!(port_number(bad), None, "{bad}");
    }
}

fn value(option: &'static str, source: Source) -> OptionValue {
    OptionValue {
        value: OsString::from("s3cret"),
        source,
        store: &KIND,
        option,
    }
}

/// The library's wording names options by name, never as flags or
/// variables of regent, and never quotes a value.
#[test]
fn the_library_names_options_not_flags_or_variables() {
    let by_flag = value("ca-cert", Source::Flag("--ex-ca-cert".into()));
    let by_var = value("password", Source::Env("REGENT_EX_PASSWORD".into()));
    let foreign = value("ca-cert", Source::Env("EX_CA".into()));
    let errors = [
        TargetError::url(&KIND, "ex://u:s3cret@h", ": unexpected '@'"),
        TargetError::bad_value(&by_flag, "is not valid UTF-8"),
        TargetError::bad_file(&by_flag, Path::new("/ca"), ": not a PEM file"),
        TargetError::conflict(
            &by_flag,
            &[&by_var],
            Detail::new("and ")
                .given(by_var.given())
                .text(" both set it; keep one"),
        ),
        TargetError::missing(
            &by_flag,
            &["password"],
            Detail::new("needs a password: set ").option("password", Mention::Set),
        ),
        TargetError::unreadable(
            &by_flag,
            Path::new("/gone"),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        ),
        TargetError::bad_value(&foreign, "is not valid UTF-8"),
    ];
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "ex URL 'ex://***@h': unexpected '@'",
            "ex option `ca-cert` is not valid UTF-8",
            "ex option `ca-cert` /ca: not a PEM file",
            "ex option `ca-cert` and option `password` both set it; keep one",
            "ex option `ca-cert` needs a password: set option `password`",
            "ex option `ca-cert`: cannot read /gone: entity not found",
            "ex option `ca-cert` (EX_CA) is not valid UTF-8",
        ]
    );
    for (e, s) in errors.iter().zip(&shown) {
        assert!(
            !s.contains("--") && !s.contains("REGENT_") && !s.contains("s3cret"),
            "{s}"
        );
        assert_eq!(e.store().map(|k| k.name), Some("ex"), "{s}");
    }
    assert_eq!(errors[4].options(), ["ca-cert", "password"]);
    assert!(std::error::Error::source(&errors[5]).is_some());
}

#[test]
fn a_detail_after_punctuation_follows_directly() {
    assert_eq!(Detail::new(": x").joiner(), "");
    assert_eq!(Detail::new("; x").joiner(), "");
    assert_eq!(Detail::new("is x").joiner(), " ");
    assert_eq!(Detail::default().option("a", Mention::Set).joiner(), " ");
    // Empty words add no piece.
    assert!(Detail::new("").pieces().is_empty());
}
