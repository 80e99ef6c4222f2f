//! The host against real components: the engine itself and a deliberately misbehaving guest;
//! and an adapter on the core keeping its scheduler answered whatever the engine does.

mod adapter;
mod engine;
mod forgetting;
mod intake;
mod loading;
mod observations;
mod sandbox;
mod sim;

use std::time::Duration;

use tandem_host::{HostConfig, Runtime};
use tandem_tests::components;

/// The engine component under the default limits.
fn engine_runtime() -> Runtime {
    Runtime::from_file(components::ENGINE.as_ref(), HostConfig::default())
        .expect("the engine component loads")
}

/// The misbehaving guest under tight limits, so the tests are quick.
fn misbehaving_runtime() -> Runtime {
    let config = HostConfig {
        call_deadline: Duration::from_millis(200),
        memory_cap_bytes: 64 << 20,
        ..HostConfig::default()
    };
    Runtime::from_file(components::MISBEHAVING.as_ref(), config)
        .expect("the misbehaving component loads")
}
