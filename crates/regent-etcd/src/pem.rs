//! The labels of PEM blocks (`-----BEGIN CERTIFICATE-----`): what the
//! builder's TLS setters check their PEM texts by, and what the target
//! reads a TLS file's blocks with to say which file holds the wrong ones.
//! Only with the `tls` feature.

/// The label of a PEM block: `CERTIFICATE` for a block that begins with
/// `-----BEGIN CERTIFICATE-----`. [`pem_labels`] finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PemLabel(String);

impl PemLabel {
    /// The label as the file writes it (control characters included).
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the block is what a certificate setter takes: `CERTIFICATE`.
    pub(crate) fn is_certificate(&self) -> bool {
        self.0 == "CERTIFICATE"
    }

    /// Whether the block is what a private key setter takes: `PRIVATE KEY`,
    /// `RSA PRIVATE KEY`, `EC PRIVATE KEY`.
    pub(crate) fn is_private_key(&self) -> bool {
        self.0.ends_with("PRIVATE KEY")
    }
}

/// The labels of the `-----BEGIN LABEL-----` lines of the PEM text `pem`,
/// each once, in order: what the TLS setters check their PEM texts by, so
/// that a caller can say which file holds the wrong blocks before handing
/// them over.
pub(crate) fn pem_labels(pem: &[u8]) -> Vec<PemLabel> {
    let mut labels = Vec::<PemLabel>::new();
    for line in String::from_utf8_lossy(pem).lines() {
        if let Some(label) = line
            .trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
            && !labels.iter().any(|l| l.0 == label)
        {
            labels.push(PemLabel(label.to_owned()));
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_labels_are_the_begin_lines_each_once_in_order() {
        let pem = b"junk\r\n-----BEGIN CERTIFICATE-----\r\nAA==\r\n-----END CERTIFICATE-----\r\n\
                    -----BEGIN RSA PRIVATE KEY-----\nAA==\n-----END RSA PRIVATE KEY-----\n\
                      -----BEGIN CERTIFICATE-----  \nAA==\n-----END CERTIFICATE-----\n";
        let labels = pem_labels(pem);
        let names: Vec<&str> = labels.iter().map(PemLabel::as_str).collect();
        assert_eq!(names, ["CERTIFICATE", "RSA PRIVATE KEY"]);
        assert!(labels[0].is_certificate() && !labels[0].is_private_key());
        assert!(labels[1].is_private_key() && !labels[1].is_certificate());
        let request = pem_labels(b"-----BEGIN CERTIFICATE REQUEST-----\n");
        assert!(!request[0].is_certificate() && !request[0].is_private_key());
        assert!(pem_labels(b"not PEM").is_empty());
        assert!(pem_labels(b"-----BEGIN CERTIFICATE-----AA==").is_empty());
    }
}
