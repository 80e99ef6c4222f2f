//! What a plugin is to the runtime: its name and index, and what it does with the runtime's
//! calls.

use std::fmt;
use std::time::{Duration, Instant};

use super::api;

/// How long the runtime waits for the answer to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When the call was read from the socket.
    pub received: Instant,
    /// The wait the runtime's request states (ttrpc's `timeout_nano`; NRI's request timeout,
    /// 2 s by default), when it states one.
    pub timeout: Option<Duration>,
}

impl Deadline {
    /// The deadline of a call read now that states `timeout_nano` (0: none).
    pub fn from_request(timeout_nano: i64) -> Self {
        Self {
            received: Instant::now(),
            timeout: u64::try_from(timeout_nano)
                .ok()
                .filter(|nanos| *nanos > 0)
                .map(Duration::from_nanos),
        }
    }
}

/// How the plugin introduces itself to the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The plugin's name: what the runtime's logs, events and the default validator's
    /// `required_plugins` call it.
    pub name: String,
    /// Its index (two digits): plugins are called in ascending order of index.
    pub index: String,
}

impl fmt::Display for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.index, self.name)
    }
}

/// What a plugin does with the runtime's calls.
pub trait Handler: Send + Sync + 'static {
    /// The runtime configured the plugin: its name and version.
    fn configured(&self, runtime: &str, version: &str);

    /// Every pod and container the runtime had when the plugin connected.
    fn synchronize(&self, pods: Vec<api::PodSandbox>, containers: Vec<api::Container>);

    /// `container` of `pod` is about to be created: the changes to make to it, or the reason to
    /// refuse it (the runtime then fails its creation with that text), answered before
    /// `deadline` (a late answer is no answer: the runtime drops the plugin).
    fn create_container(
        &self,
        pod: api::PodSandbox,
        container: api::Container,
        deadline: Deadline,
    ) -> impl Future<Output = Result<api::ContainerAdjustment, String>> + Send;
}
