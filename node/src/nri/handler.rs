//! What a plugin is to the runtime: its name and index, and what it does with the runtime's
//! calls.

use std::fmt;

use super::api;

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
    /// refuse it (the runtime then fails its creation with that text).
    fn create_container(
        &self,
        pod: api::PodSandbox,
        container: api::Container,
    ) -> impl Future<Output = Result<api::ContainerAdjustment, String>> + Send;
}
