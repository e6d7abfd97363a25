//! Test certificates, generated at test time with rcgen (no key is
//! checked in): a CA, a server certificate for 127.0.0.1 and `localhost`,
//! and client certificates, as PEM files in a temporary directory.

use std::net::{IpAddr, Ipv4Addr};

/// The PEM files, removed on drop.
pub struct Certificates {
    dir: tempfile::TempDir,
}

impl Certificates {
    /// The CA, the server's `server.pem` (chain and key) and the clients
    /// `tls-client` and `intruder`.
    pub fn generate() -> Certificates {
        Self::generate_with(&["tls-client", "intruder"])
    }

    /// The same with the named clients (`<name>.pem`, `<name>.key`; the
    /// subject is `CN=<name>,O=Gregor Tests`).
    pub fn generate_with(clients: &[&str]) -> Certificates {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            SanType,
        };
        let dir = tempfile::Builder::new()
            .prefix("gregor-certs-")
            .tempdir()
            .expect("certificate dir");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Gregor Test CA");
        let ca = ca_params.self_signed(&ca_key).expect("self-sign the CA");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write ca.pem");

        let server_key = KeyPair::generate().expect("server key");
        let mut server = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        server
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = server
            .signed_by(&server_key, &ca, &ca_key)
            .expect("sign the server certificate");
        // One PEM file with the chain and the key: ssl.keystore.location.
        std::fs::write(
            dir.path().join("server.pem"),
            format!("{}{}", server.pem(), server_key.serialize_pem()),
        )
        .expect("write server.pem");

        for name in clients {
            let key = KeyPair::generate().expect("client key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            // rcgen's default subject has a CN; start from an empty one.
            params.distinguished_name = rcgen::DistinguishedName::new();
            params
                .distinguished_name
                .push(DnType::OrganizationName, "Gregor Tests");
            params.distinguished_name.push(DnType::CommonName, *name);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let certificate = params
                .signed_by(&key, &ca, &ca_key)
                .expect("sign a client certificate");
            std::fs::write(dir.path().join(format!("{name}.pem")), certificate.pem())
                .expect("write a client certificate");
            std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem())
                .expect("write a client key");
        }
        Certificates { dir }
    }

    /// A file of the directory (`ca.pem`, `server.pem`, `<client>.pem`, ...).
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}
