//! URLs and values as messages may quote them: secrets hidden, control
//! characters escaped.

/// `url` as a message may quote it: whatever lies between `://` (or the
/// start) and the last `@` becomes `***`, so does the value of a query
/// parameter whose name speaks of a secret (`sig`, `token`, `key`,
/// `secret`, `pass…`: a SAS URL pasted where no store takes one), and
/// control characters are escaped.
///
/// The last `@` of the whole URL rather than of the authority: a password
/// may hold `/`, `?` or `#`, which would end the authority early and leave
/// the rest of the password in the message. Hiding part of a path that
/// holds `@` costs only detail.
pub fn redacted(url: &str) -> String {
    let url = match url.rfind('@') {
        Some(at) => {
            let keep = url.find("://").filter(|&i| i < at).map_or(0, |i| i + 3);
            format!("{}***{}", &url[..keep], &url[at..])
        }
        None => url.to_owned(),
    };
    printable(&secret_query_values_hidden(&url))
}

/// The URL with the values of secret-looking query parameters as `***`.
fn secret_query_values_hidden(url: &str) -> String {
    let Some(q) = url.find('?') else {
        return url.to_owned();
    };
    let (head, query) = url.split_at(q + 1);
    let (query, fragment) = match query.find('#') {
        Some(h) => query.split_at(h),
        None => (query, ""),
    };
    let secret = |name: &str| {
        let name = name.to_ascii_lowercase();
        ["sig", "token", "key", "secret", "pass", "auth"]
            .iter()
            .any(|w| name.contains(w))
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((name, _)) if secret(name) => format!("{name}=***"),
            _ => p.to_owned(),
        })
        .collect();
    format!("{head}{}{fragment}", params.join("&"))
}

/// `s` with control characters escaped, so that a message cannot move the
/// cursor or hide part of itself.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A port: ASCII digits only (`u16::from_str` would take a leading `+`),
/// from 1 to 65535.
pub fn port_number(p: &str) -> Option<u16> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse().ok().filter(|&n| n > 0)
}
