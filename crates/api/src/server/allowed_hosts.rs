//! `--allowed-hosts`: the names this server answers to, a guard against DNS rebinding.
//!
//! A web page cannot read a server of another origin, but DNS rebinding makes the server its
//! own: the page's name (`evil.example`) is made to resolve to 127.0.0.1, and from then on the
//! browser sends the page's requests to the local server, and lets the page read the answers,
//! with `Host: evil.example`. So the `Host` (and an HTTP/2 `:authority`) is checked on every
//! request, before anything else runs. Accepted, always:
//! - `localhost` and names under `.localhost` (browsers resolve them to loopback themselves,
//!   RFC 6761), and any IP address: an address is not a name DNS can rebind (a page at
//!   `http://127.0.0.1:8000` is this server's own page);
//! - a request with neither (HTTP/1.0): no browser sends one.
//!
//! Beyond those, by [`AllowedHosts`]: the names of `--allowed-hosts` (`.example.com` also
//! matches every name under it), any name with `*`, and by default (no flag) any name when the
//! server is bound to an address that is not loopback. Such a server is reached under names it
//! cannot know (Service and Ingress names, load balancers) and is open to its network directly;
//! keys protect it (`--api-key`, `--admin-key`). Bound to loopback, only the names above. The
//! probes keep working either way: kubelet and Prometheus address a pod by its IP.
//!
//! A refused request is a 403 with an OpenAI error body (code `host_not_allowed`) naming the
//! flag that would accept it.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{from_fn_with_state, Next};
use axum::response::Response;
use axum::Router;

use crate::error::ApiError;

/// Which `Host` names the server accepts besides the local ones (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AllowedHosts {
    /// By the bound address: bound to loopback, the local names only; otherwise any name.
    #[default]
    ByAddress,
    /// Any name (`--allowed-hosts '*'`).
    Any,
    /// The local names and these (`--allowed-hosts a,b`, lowercase, without a port; a leading
    /// dot matches the name and every name under it).
    Names(Vec<String>),
}

impl AllowedHosts {
    /// The policy of `--allowed-hosts` values: none is the default, `*` among them any name.
    pub fn from_flag(values: &[String]) -> Result<Self, String> {
        let mut names = Vec::new();
        for value in values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
            if value == "*" {
                return Ok(AllowedHosts::Any);
            }
            let (dot, rest) = match value.strip_prefix('.') {
                Some(rest) => (".", rest),
                None => ("", value),
            };
            match parse_host(rest) {
                Some(Host::Name(name)) => names.push(format!("{dot}{name}")),
                // Addresses are always accepted; listing one changes nothing.
                Some(Host::Ip(_)) => {}
                None => return Err(format!("--allowed-hosts: '{value}' is not a host name")),
            }
        }
        Ok(if values.iter().all(|v| v.trim().is_empty()) {
            AllowedHosts::ByAddress
        } else {
            AllowedHosts::Names(names)
        })
    }

    /// The names accepted beyond the local ones on a server bound to `bound`; `None`: any.
    fn extra_names(&self, bound: IpAddr) -> Option<Vec<String>> {
        match self {
            AllowedHosts::ByAddress if bound.is_loopback() => Some(Vec::new()),
            AllowedHosts::ByAddress | AllowedHosts::Any => None,
            AllowedHosts::Names(names) => Some(names.clone()),
        }
    }

    /// In words, for the startup log.
    pub fn describe(&self, bound: IpAddr) -> String {
        match self.extra_names(bound) {
            None => "any Host".to_string(),
            Some(names) if names.is_empty() => {
                "Host: localhost and IP addresses only (loopback bind; --allowed-hosts widens)"
                    .to_string()
            }
            Some(names) => format!("Host: localhost, IP addresses and {}", names.join(", ")),
        }
    }

    /// `app` behind the `Host` check for a server bound to `bound`.
    pub fn guard(&self, app: Router, bound: IpAddr) -> Router {
        match self.extra_names(bound) {
            None => app,
            Some(names) => app.layer(from_fn_with_state(Arc::new(names), check_host)),
        }
    }
}

/// Refuses a request whose `Host` or `:authority` names a host not allowed.
async fn check_host(State(names): State<Arc<Vec<String>>>, req: Request, next: Next) -> Response {
    let host = req.headers().get(header::HOST).map(|h| h.to_str());
    let authority = req.uri().authority().map(|a| a.as_str());
    for named in [host, authority.map(Ok)].into_iter().flatten() {
        let text = named.ok();
        let allowed = text
            .and_then(parse_host)
            .is_some_and(|host| is_allowed(&host, &names));
        if !allowed {
            let shown = text.unwrap_or("(not text)");
            let name = shown
                .rsplit_once(':')
                .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
                .map_or(shown, |(name, _)| name);
            let err = ApiError::Forbidden {
                message: format!(
                    "the Host '{shown}' is not allowed: this server answers to localhost, IP \
                     addresses{} only, a guard against DNS rebinding; to accept this name, \
                     start it with --allowed-hosts {name}",
                    if names.is_empty() {
                        String::new()
                    } else {
                        format!(" and {}", names.join(", "))
                    }
                ),
                code: "host_not_allowed",
            };
            tracing::debug!(host = shown, "refused a request for a host not allowed");
            return crate::cross_origin::error_response(req.uri().path(), err);
        }
    }
    next.run(req).await
}

/// What a `Host` names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    /// Lowercase, without a trailing dot.
    Name(String),
}

/// The host of a `Host` value (`name`, `name:port`, `1.2.3.4:port`, `[::1]:port`); `None`
/// when it is no valid host.
fn parse_host(authority: &str) -> Option<Host> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let port_ok = after.is_empty() || is_port(after.strip_prefix(':')?);
        return port_ok.then_some(Host::Ip(IpAddr::V6(ip.parse::<Ipv6Addr>().ok()?)));
    }
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if is_port(port) => host,
        Some(_) => return None,
        None => authority,
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(Host::Ip(ip));
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    valid.then_some(Host::Name(name))
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

/// Addresses, `localhost` and its subdomains always; else a listed name, or a name under a
/// listed `.domain`.
fn is_allowed(host: &Host, names: &[String]) -> bool {
    let name = match host {
        Host::Ip(_) => return true,
        Host::Name(name) => name,
    };
    name == "localhost"
        || name.ends_with(".localhost")
        || names.iter().any(|allowed| match allowed.strip_prefix('.') {
            Some(domain) => {
                name == domain
                    || name
                        .strip_suffix(domain)
                        .is_some_and(|sub| sub.ends_with('.'))
            }
            None => name == allowed,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn allowed(host: &str, names: &[&str]) -> bool {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        parse_host(host).is_some_and(|h| is_allowed(&h, &names))
    }

    #[test]
    fn local_names_and_addresses_are_always_allowed_with_any_port() {
        for host in [
            "localhost",
            "localhost:8000",
            "LOCALHOST.:8000",
            "app.localhost:3000",
            "127.0.0.1",
            "127.0.0.1:8000",
            "[::1]",
            "[::1]:8000",
            "10.1.2.3:8000",
            "[fe80::1]:80",
        ] {
            assert!(allowed(host, &[]), "{host}");
        }
    }

    #[test]
    fn other_names_are_refused_unless_listed() {
        for host in [
            "evil.example",
            "evil.example:8000",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "",
            "local host",
            "[::1",
            "[::1]x",
            "localhost:port",
            "a@localhost",
        ] {
            assert!(!allowed(host, &[]), "{host:?}");
        }
        assert!(allowed("api.example:443", &["api.example"]));
        assert!(!allowed("x.api.example", &["api.example"]));
        assert!(allowed("x.api.example", &[".api.example"]));
        assert!(allowed("api.example", &[".api.example"]));
        assert!(!allowed("evilapi.example", &[".api.example"]));
    }

    #[test]
    fn the_flag_lists_names_or_a_wildcard() {
        assert_eq!(AllowedHosts::from_flag(&[]), Ok(AllowedHosts::ByAddress));
        assert_eq!(
            AllowedHosts::from_flag(&["a.example".into(), "*".into()]),
            Ok(AllowedHosts::Any)
        );
        assert_eq!(
            AllowedHosts::from_flag(&["A.Example:8000".into(), ".b.example".into()]),
            Ok(AllowedHosts::Names(vec![
                "a.example".into(),
                ".b.example".into()
            ]))
        );
        assert!(AllowedHosts::from_flag(&["not a host".into()]).is_err());
    }

    #[test]
    fn the_default_guards_loopback_binds_only() {
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let everywhere = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let default = AllowedHosts::ByAddress;
        assert_eq!(default.extra_names(loopback), Some(vec![]));
        assert_eq!(
            default.extra_names(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            Some(vec![])
        );
        assert_eq!(default.extra_names(everywhere), None);
        let listed = AllowedHosts::Names(vec!["a.example".into()]);
        assert_eq!(
            listed.extra_names(everywhere),
            Some(vec!["a.example".into()])
        );
        assert_eq!(AllowedHosts::Any.extra_names(loopback), None);
    }
}
