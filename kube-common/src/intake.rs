//! Node profilers authenticated by the API server, for every Kubernetes front-end's intake.
//!
//! A profiler presents its pod's projected service-account token (`serviceAccountToken`
//! volume with audience [`DEFAULT_AUDIENCE`], rotated by the kubelet) as its bearer token. The
//! adapter asks the API server about it (a `TokenReview` for that audience): the token must
//! be valid now, belong to one of the profiler service accounts it was started with
//! (`--profiler-service-account NAMESPACE/NAME`), and be bound to a pod on a node — the API
//! server puts the node's name in what it says of the token
//! (`status.user.extra["authentication.kubernetes.io/node-name"]`) for a token bound to a pod
//! scheduled on a node. That node is the caller's scope
//! ([`tandem_adapter_core::intake::Scope::Node`]): its profiler may post profiles of that
//! node's pods and nothing else.
//!
//! Verdicts are cached for a bounded time ([`ACCEPTED_FOR`], [`REFUSED_FOR`]) and number of
//! tokens ([`MAX_CACHED`]), by a SHA-256 of the token (the tokens themselves are not kept), so
//! a profiler's posts cost one review a minute at most, and a flood of one bad token costs one
//! review every few seconds. A token that cannot be a service-account token (not a JWT) is
//! refused without a review.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::Api;
use kube::api::PostParams;
use parking_lot::Mutex;
use sha2::{Digest as _, Sha256};
use tandem_adapter_core::intake::{AuthError, Caller, HeaderMap, IntakeAuth};

/// The audience profilers' tokens are requested for (`--profiler-token-audience`): a token for
/// the API server itself (the default audience) is not one a profiler should hand to anyone.
pub const DEFAULT_AUDIENCE: &str = "tandem-intake";

/// The key of the node name in what the API server says of a token bound to a pod on a node.
pub const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";

/// How long an accepted token is believed without a new review: a pod deleted meanwhile keeps
/// its profiler admitted this long at most.
pub const ACCEPTED_FOR: Duration = Duration::from_secs(30);

/// How long a refused token is refused without a new review.
pub const REFUSED_FOR: Duration = Duration::from_secs(10);

/// Most tokens whose verdict is cached.
pub const MAX_CACHED: usize = 4_096;

/// Longest token reviewed (a service-account token is about a kilobyte).
const MAX_TOKEN_BYTES: usize = 16 << 10;

/// A profiler service account, as `--profiler-service-account NAMESPACE/NAME` names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceAccount {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ServiceAccount {
    /// The user name the API server gives the account's tokens.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

impl std::fmt::Display for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl std::str::FromStr for ServiceAccount {
    type Err = String;

    /// `NAMESPACE/NAME`, each a DNS label or subdomain as Kubernetes names them.
    fn from_str(text: &str) -> Result<Self, String> {
        let (namespace, name) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}` is not NAMESPACE/NAME"))?;
        let valid = |part: &str| {
            !part.is_empty()
                && part.len() <= 253
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        };
        if !valid(namespace) || !valid(name) {
            return Err(format!(
                "`{text}`: the namespace and the name must be Kubernetes names (lower-case \
                 letters, digits, `-` and `.`)"
            ));
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// What the API server says of a token, for a given audience.
pub trait Reviewer: Send + Sync + 'static {
    /// The status of a `TokenReview` of `token` for `audience`.
    fn review<'a>(
        &'a self,
        token: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, kube::Result<TokenReviewStatus>>;
}

impl Reviewer for kube::Client {
    fn review<'a>(
        &'a self,
        token: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, kube::Result<TokenReviewStatus>> {
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token.to_owned()),
                    audiences: Some(vec![audience.to_owned()]),
                },
                ..TokenReview::default()
            };
            let reviewed = Api::<TokenReview>::all(self.clone())
                .create(&PostParams::default(), &review)
                .await?;
            Ok(reviewed.status.unwrap_or_default())
        })
    }
}

/// Node profilers authenticated by `TokenReview` (see the module documentation).
pub struct ProfilerTokens {
    reviewer: Arc<dyn Reviewer>,
    /// User names of the profiler service accounts.
    usernames: BTreeSet<String>,
    audience: String,
    cache: Mutex<HashMap<[u8; 32], Verdict>>,
}

impl std::fmt::Debug for ProfilerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilerTokens")
            .field("usernames", &self.usernames)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// A cached verdict on one token.
#[derive(Debug, Clone)]
struct Verdict {
    answer: Result<Caller, AuthError>,
    until: Instant,
}

impl ProfilerTokens {
    /// Profilers running as one of `accounts`, whose tokens `reviewer` reviews for `audience`.
    pub fn new(
        reviewer: Arc<dyn Reviewer>,
        accounts: &[ServiceAccount],
        audience: impl Into<String>,
    ) -> Self {
        Self {
            reviewer,
            usernames: accounts.iter().map(ServiceAccount::username).collect(),
            audience: audience.into(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cache(&self) -> parking_lot::MutexGuard<'_, HashMap<[u8; 32], Verdict>> {
        self.cache.lock()
    }

    /// Who presents `token`, from the cache or a review.
    async fn caller(&self, token: &str) -> Result<Caller, AuthError> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(verdict) = self.cache().get(&digest).filter(|v| v.until > now) {
            return verdict.answer.clone();
        }
        let answer = match self.reviewer.review(token, &self.audience).await {
            Ok(status) => self.judge(&status),
            Err(error) => {
                // Not cached: the next request asks again.
                return Err(AuthError::Unavailable(format!(
                    "cannot review the profiler's service-account token with the API server \
                     (TokenReview): {error}"
                )));
            }
        };
        let until = now
            + match answer {
                Ok(_) => ACCEPTED_FOR,
                Err(_) => REFUSED_FOR,
            };
        let mut cache = self.cache();
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, v| v.until > now);
            if cache.len() >= MAX_CACHED
                && let Some(soonest) = cache.iter().min_by_key(|(_, v)| v.until).map(|(k, _)| *k)
            {
                cache.remove(&soonest);
            }
        }
        cache.insert(
            digest,
            Verdict {
                answer: answer.clone(),
                until,
            },
        );
        answer
    }

    /// The caller a review's status describes, or why it is refused.
    fn judge(&self, status: &TokenReviewStatus) -> Result<Caller, AuthError> {
        if status.authenticated != Some(true) {
            let why = status.error.as_deref().unwrap_or("not authenticated");
            return Err(AuthError::Unauthenticated(format!(
                "the API server refused the bearer token for audience {}: {why}",
                self.audience
            )));
        }
        if !status
            .audiences
            .as_ref()
            .is_some_and(|a| a.contains(&self.audience))
        {
            return Err(AuthError::Unauthenticated(format!(
                "the bearer token is not for audience {}",
                self.audience
            )));
        }
        let user = status.user.as_ref();
        let username = user.and_then(|u| u.username.as_deref()).unwrap_or_default();
        if !self.usernames.contains(username) {
            return Err(AuthError::Forbidden(format!(
                "{username} is not a profiler service account of this adapter \
                 (--profiler-service-account)"
            )));
        }
        let nodes = user
            .and_then(|u| u.extra.as_ref())
            .and_then(|extra| extra.get(NODE_NAME_EXTRA))
            .map_or(&[][..], Vec::as_slice);
        match nodes {
            [node] if !node.is_empty() => Ok(Caller::node(node)),
            _ => Err(AuthError::Forbidden(format!(
                "the token of {username} is not bound to a pod on a node (no {NODE_NAME_EXTRA}); \
                 mount a projected service-account token in the profiler's pod"
            ))),
        }
    }
}

/// The intake authentication of the profilers running as `accounts` (none: no profiler is
/// admitted but with the operator's token), reviewing their tokens with `client`'s API server.
pub fn profiler_auth(
    client: &kube::Client,
    accounts: &[ServiceAccount],
    audience: &str,
) -> Option<Arc<dyn IntakeAuth>> {
    if accounts.is_empty() {
        return None;
    }
    tracing::info!(
        accounts = %accounts.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        audience,
        "node profilers authenticate with their service-account tokens"
    );
    Some(Arc::new(ProfilerTokens::new(
        Arc::new(client.clone()),
        accounts,
        audience,
    )))
}

/// Whether `token` could be a service-account token: a JWT (three base64url parts) of a
/// bounded size. Anything else is refused without asking the API server.
fn looks_like_jwt(token: &str) -> bool {
    token.len() <= MAX_TOKEN_BYTES
        && token.split('.').count() == 3
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'='))
}

impl IntakeAuth for ProfilerTokens {
    fn authenticate<'a>(
        &'a self,
        headers: &'a HeaderMap,
    ) -> BoxFuture<'a, Result<Caller, AuthError>> {
        Box::pin(async move {
            let token = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .unwrap_or_default();
            if !looks_like_jwt(token) {
                return Err(AuthError::Unauthenticated(
                    "missing or wrong bearer token: the intake's token, or a profiler's \
                     service-account token"
                        .to_owned(),
                ));
            }
            self.caller(token).await
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::api::authentication::v1::UserInfo;

    use super::*;

    /// An API server that knows a few tokens, counting its reviews.
    #[derive(Default)]
    struct Known {
        tokens: BTreeMap<String, TokenReviewStatus>,
        reviews: AtomicUsize,
        down: std::sync::atomic::AtomicBool,
    }

    impl Reviewer for Known {
        fn review<'a>(
            &'a self,
            token: &'a str,
            audience: &'a str,
        ) -> BoxFuture<'a, kube::Result<TokenReviewStatus>> {
            self.reviews.fetch_add(1, Ordering::AcqRel);
            let answer = if self.down.load(Ordering::Acquire) {
                Err(kube::Error::Service("connection refused".into()))
            } else {
                let status = self.tokens.get(token).cloned().filter(|s| {
                    s.audiences
                        .as_ref()
                        .is_some_and(|a| a.iter().any(|a| a.as_str() == audience))
                });
                Ok(status.unwrap_or(TokenReviewStatus {
                    authenticated: Some(false),
                    error: Some("invalid bearer token".into()),
                    ..TokenReviewStatus::default()
                }))
            };
            Box::pin(std::future::ready(answer))
        }
    }

    fn status(username: &str, node: Option<&str>) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated: Some(true),
            audiences: Some(vec![DEFAULT_AUDIENCE.into()]),
            user: Some(UserInfo {
                username: Some(username.into()),
                extra: node.map(|n| BTreeMap::from([(NODE_NAME_EXTRA.into(), vec![n.into()])])),
                ..UserInfo::default()
            }),
            ..TokenReviewStatus::default()
        }
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        headers
    }

    const NODE_A: &str = "aaa.bbb.node-a";
    const NOT_BOUND: &str = "aaa.bbb.unbound";
    const OTHER_ACCOUNT: &str = "aaa.bbb.other";

    fn tokens() -> (Arc<Known>, ProfilerTokens) {
        let known = Arc::new(Known {
            tokens: BTreeMap::from([
                (
                    NODE_A.to_owned(),
                    status(
                        "system:serviceaccount:tandem-system:tandem-profiler",
                        Some("node-a"),
                    ),
                ),
                (
                    NOT_BOUND.to_owned(),
                    status("system:serviceaccount:tandem-system:tandem-profiler", None),
                ),
                (
                    OTHER_ACCOUNT.to_owned(),
                    status("system:serviceaccount:default:default", Some("node-a")),
                ),
            ]),
            ..Known::default()
        });
        let accounts = ["tandem-system/tandem-profiler".parse().unwrap()];
        let auth = ProfilerTokens::new(
            Arc::clone(&known) as Arc<dyn Reviewer>,
            &accounts,
            DEFAULT_AUDIENCE,
        );
        (known, auth)
    }

    #[tokio::test]
    async fn a_profilers_bound_token_is_its_node_and_the_verdict_is_cached() {
        let (known, auth) = tokens();
        let caller = auth.authenticate(&bearer(NODE_A)).await.unwrap();
        assert_eq!(caller, Caller::node("node-a"));
        assert_eq!(auth.authenticate(&bearer(NODE_A)).await.unwrap(), caller);
        assert_eq!(known.reviews.load(Ordering::Acquire), 1, "reviewed once");
    }

    #[tokio::test]
    async fn other_accounts_unbound_tokens_and_forgeries_are_refused_by_name() {
        let (known, auth) = tokens();
        let other = auth.authenticate(&bearer(OTHER_ACCOUNT)).await.unwrap_err();
        assert!(
            matches!(&other, AuthError::Forbidden(m) if m.contains("system:serviceaccount:default:default")),
            "{other:?}"
        );
        let unbound = auth.authenticate(&bearer(NOT_BOUND)).await.unwrap_err();
        assert!(
            matches!(&unbound, AuthError::Forbidden(m) if m.contains(NODE_NAME_EXTRA)),
            "{unbound:?}"
        );
        let forged = auth
            .authenticate(&bearer("aaa.bbb.forged"))
            .await
            .unwrap_err();
        assert!(
            matches!(&forged, AuthError::Unauthenticated(m) if m.contains("invalid bearer token")),
            "{forged:?}"
        );
        // Not a JWT: refused without a review.
        let reviews = known.reviews.load(Ordering::Acquire);
        let junk = auth.authenticate(&bearer("s3cret")).await.unwrap_err();
        assert!(matches!(junk, AuthError::Unauthenticated(_)), "{junk:?}");
        assert!(auth.authenticate(&HeaderMap::new()).await.is_err());
        assert_eq!(known.reviews.load(Ordering::Acquire), reviews);
    }

    #[tokio::test]
    async fn an_unreachable_api_server_is_a_503_and_not_cached() {
        let (known, auth) = tokens();
        known.down.store(true, Ordering::Release);
        let down = auth.authenticate(&bearer(NODE_A)).await.unwrap_err();
        assert!(matches!(down, AuthError::Unavailable(_)), "{down:?}");
        known.down.store(false, Ordering::Release);
        assert_eq!(
            auth.authenticate(&bearer(NODE_A)).await.unwrap(),
            Caller::node("node-a")
        );
    }

    #[tokio::test]
    async fn the_cache_is_bounded() {
        let (_, auth) = tokens();
        for n in 0..MAX_CACHED + 5 {
            let _ = auth.authenticate(&bearer(&format!("aaa.bbb.t{n}"))).await;
        }
        assert!(auth.cache().len() <= MAX_CACHED);
    }

    #[test]
    fn accounts_parse_and_bad_ones_are_named() {
        let account: ServiceAccount = "tandem-system/tandem-profiler".parse().unwrap();
        assert_eq!(
            account.username(),
            "system:serviceaccount:tandem-system:tandem-profiler"
        );
        assert!(
            "tandem-profiler"
                .parse::<ServiceAccount>()
                .unwrap_err()
                .contains("NAMESPACE/NAME")
        );
        assert!("ns/Bad_Name".parse::<ServiceAccount>().is_err());
        assert!("/name".parse::<ServiceAccount>().is_err());
    }
}
