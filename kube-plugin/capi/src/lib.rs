//! A C ABI over Tandem's core and the kube front-end's decisions, for the kube-scheduler
//! framework plugin (`kube-plugin/scheduler`, Go, linked with this crate's static
//! library through cgo).
//!
//! The Go side holds the scheduler's side only: it hands over the objects its informers see
//! (Node and Pod as their API JSON) and the scheduler's connection to the API server, and asks
//! the questions of the scheduling cycle. Everything decided — keyed identities, the cluster
//! view, the OOM guard, the sharing cap, the reasons, the scores, the GPU choice — is decided
//! here, by the same code as the HTTP extender ([`tandem_kube_common::decide`]), on the same
//! core ([`served`]): the engine thread, the knowledge base in ConfigMaps under a Lease, the
//! profile intake, learning from finished pods.
//!
//! # The contract
//! - A plugin is an opaque [`TandemPlugin`] from [`tandem_plugin_new`], freed by
//!   [`tandem_plugin_free`]. Its functions may be called from any thread; calls on one plugin
//!   are serialized by a lock inside it.
//! - Bytes go in as `(pointer, length)`; nothing passed in is kept after the call returns.
//! - Every function returns a [`TandemStatus`] and, where it says so, fills a [`TandemBuf`]:
//!   the answer (JSON) on [`TANDEM_OK`], a message for a person otherwise. A filled buffer is
//!   Rust's memory and must be given back with [`tandem_buf_free`].
//! - Nothing unwinds into the caller: a Rust panic is caught at the edge of every function and
//!   returned as [`TANDEM_ERROR`] with its message, and a trap or deadline inside the engine
//!   component is an ordinary engine error (the host rebuilds the instance from its last
//!   snapshot, so the next call is served).
//!
//! What the plugin counts is served by Rust alone, at `/metrics` on the intake's address, in
//! the families every adapter serves ([`tandem_adapter_core::metrics::Metrics`]): the C ABI
//! carries decisions, not metrics.

pub mod config;
mod error;
pub mod plugin;
pub mod prepared;
pub mod served;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use parking_lot::Mutex;

pub use config::{Config, Connection, Settings};
pub use error::Error;
pub use plugin::Plugin;
pub use prepared::{Prepared, Reservation, Reserved};
use served::Served;

/// What a call returned: [`TANDEM_OK`], [`TANDEM_REFUSED`], [`TANDEM_ERROR`] or
/// [`TANDEM_UNSEEN`].
pub type TandemStatus = i32;

/// The call succeeded; its buffer, if any, holds the answer.
pub const TANDEM_OK: TandemStatus = 0;
/// The pod cannot go where asked (Reserve); the buffer holds the reason. Not a failure.
pub const TANDEM_REFUSED: TandemStatus = 1;
/// The call failed (bad input, the engine failed, a panic); the buffer holds why.
pub const TANDEM_ERROR: TandemStatus = 2;
/// The plugin has not seen that version of the object (PreFilter without the pod); send it.
pub const TANDEM_UNSEEN: TandemStatus = 3;

/// Bytes allocated by this library and handed to the caller, who frees them with
/// [`tandem_buf_free`]. An empty buffer has a null `ptr`.
#[repr(C)]
#[derive(Debug)]
pub struct TandemBuf {
    /// The first byte, or null.
    pub ptr: *mut u8,
    /// How many bytes.
    pub len: usize,
}

impl TandemBuf {
    fn empty() -> Self {
        Self {
            ptr: std::ptr::null_mut(),
            len: 0,
        }
    }

    fn from_vec(bytes: Vec<u8>) -> Self {
        if bytes.is_empty() {
            return Self::empty();
        }
        let boxed = bytes.into_boxed_slice();
        let len = boxed.len();
        Self {
            ptr: Box::into_raw(boxed).cast::<u8>(),
            len,
        }
    }
}

/// A plugin: the cluster view and the scheduling cycle's pod, behind a lock, over the core
/// (engine thread, knowledge base, intake and its `/metrics`).
#[derive(Debug)]
pub struct TandemPlugin {
    plugin: Arc<Mutex<Plugin>>,
    /// The core (whose metrics are outside the lock: a scrape of the intake's `/metrics` does
    /// not wait for a scheduling cycle) and the tasks beside the scheduling cycle; dropped last.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "held for its drop, which stops the core's tasks")
    )]
    served: Served,
}

impl TandemPlugin {
    /// Starts the core and the plugin over it from the arguments (JSON) and the scheduler's
    /// connection (JSON; empty for none).
    fn start(args: &[u8], connection: &[u8]) -> Result<(Self, Settings), Error> {
        let config = Config::parse(args)?;
        let placements = Arc::new(config.placements()?);
        let connection = Connection::parse(connection)?;
        let served = Served::start(&config, connection)?;
        let settings = config.settings();
        let plugin = Plugin::new(
            &config,
            Arc::clone(served.core()),
            &served.handle(),
            placements,
        );
        served.spawn(&config, plugin.app());
        let plugin = Arc::new(Mutex::new(plugin));
        Ok((Self { plugin, served }, settings))
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Plugin> {
        // A panic while the lock was held left the plugin in some state; every later call
        // checks its input and the view is rebuilt from events, so carrying on beats refusing
        // every pod from now on.
        self.plugin.lock()
    }
}

/// What an exported function's body returns: a status and the buffer's contents.
type Outcome = (TandemStatus, Vec<u8>);

fn ok_json<T: serde::Serialize>(value: &T) -> Outcome {
    match serde_json::to_vec(value) {
        Ok(json) => (TANDEM_OK, json),
        Err(e) => (
            TANDEM_ERROR,
            format!("cannot encode the answer: {e}").into_bytes(),
        ),
    }
}

/// The error and its causes on one line ([`tandem_telemetry::report`]).
fn failed(error: &Error) -> Outcome {
    (TANDEM_ERROR, tandem_telemetry::report(error).into_bytes())
}

/// Runs `body`, turning a panic into [`TANDEM_ERROR`], and writes its buffer to `out` (when
/// not null).
fn guarded(out: *mut TandemBuf, body: impl FnOnce() -> Outcome) -> TandemStatus {
    let (status, bytes) = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        (
            TANDEM_ERROR,
            format!("Tandem plugin bug (panicked): {what}").into_bytes(),
        )
    });
    if !out.is_null() {
        // SAFETY: the caller passes either null (checked above) or a pointer to a TandemBuf it
        // owns for the duration of the call, as every function's `# Safety` section requires.
        unsafe { out.write(TandemBuf::from_vec(bytes)) };
    }
    status
}

/// The bytes at `(ptr, len)`, or an empty slice for a null pointer.
///
/// # Safety
/// `ptr` is null or points to `len` readable bytes that stay valid and unchanged for `'a`.
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: non-null and, by this function's contract, `len` readable bytes valid for 'a.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// The text at `(ptr, len)`.
///
/// # Safety
/// As [`bytes`].
unsafe fn text<'a>(what: &str, ptr: *const u8, len: usize) -> Result<&'a str, Outcome> {
    // SAFETY: forwarded contract.
    let raw = unsafe { bytes(ptr, len) };
    std::str::from_utf8(raw).map_err(|_| {
        (
            TANDEM_ERROR,
            format!("the {what} is not UTF-8").into_bytes(),
        )
    })
}

/// The plugin behind `plugin`, or the error for a null handle.
///
/// # Safety
/// `plugin` is null or a handle from [`tandem_plugin_new`] not yet freed.
unsafe fn handle<'a>(plugin: *const TandemPlugin) -> Result<&'a TandemPlugin, Outcome> {
    // SAFETY: by contract, non-null handles point to a live TandemPlugin.
    unsafe { plugin.as_ref() }
        .ok_or_else(|| (TANDEM_ERROR, b"no Tandem plugin (null handle)".to_vec()))
}

/// Frees a buffer this library filled. A buffer with a null `ptr` is ignored.
///
/// # Safety
/// `buf` was filled by this library and is freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_buf_free(buf: TandemBuf) {
    if buf.ptr.is_null() {
        return;
    }
    // SAFETY: a non-null buffer was made by `TandemBuf::from_vec` from a boxed slice of
    // exactly `len` bytes, and is freed once.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf.ptr, buf.len)) });
}

/// Starts a plugin from its arguments (the profile's `pluginConfig` args as JSON; empty means
/// all defaults) and the scheduler's connection to the API server ([`Connection`] as JSON:
/// the knowledge base and its Lease are kept with it; empty keeps nothing). On [`TANDEM_OK`],
/// `*plugin` is the new handle and `out` holds the [`Settings`] the Go side needs (JSON);
/// otherwise `out` says why, naming the field at fault.
///
/// # Safety
/// `args` points to `args_len` readable bytes (or is null), `connection` to `connection_len`
/// (or is null); `plugin` and `out` are valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_new(
    args: *const u8,
    args_len: usize,
    connection: *const u8,
    connection_len: usize,
    plugin: *mut *mut TandemPlugin,
    out: *mut TandemBuf,
) -> TandemStatus {
    guarded(out, || {
        // SAFETY: the caller's contract.
        let (args, connection) =
            unsafe { (bytes(args, args_len), bytes(connection, connection_len)) };
        if plugin.is_null() {
            return (TANDEM_ERROR, b"no place for the plugin handle".to_vec());
        }
        // Rust's logs go to the scheduler's standard error beside klog's (`RUST_LOG` filters).
        tandem_telemetry::init("info");
        match TandemPlugin::start(args, connection) {
            Ok((state, settings)) => {
                let handle = Box::into_raw(Box::new(state));
                // SAFETY: non-null (checked) and valid for writes by the caller's contract.
                unsafe { plugin.write(handle) };
                ok_json(&settings)
            }
            Err(e) => failed(&e),
        }
    })
}

/// Frees a plugin and everything it holds. A null handle is ignored.
///
/// # Safety
/// `plugin` came from [`tandem_plugin_new`], is freed once, and no call on it is running or
/// will run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_free(plugin: *mut TandemPlugin) {
    if plugin.is_null() {
        return;
    }
    // A panic while dropping (wasmtime's teardown) must not unwind into Go either.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: made by Box::into_raw in tandem_plugin_new, freed once, unused from now on.
        drop(unsafe { Box::from_raw(plugin) });
    }));
}

/// Runs `body` on the plugin behind `plugin` under its lock.
///
/// # Safety
/// As [`handle`], and `out` as [`guarded`].
unsafe fn with_plugin(
    plugin: *const TandemPlugin,
    out: *mut TandemBuf,
    body: impl FnOnce(&mut Plugin) -> Outcome,
) -> TandemStatus {
    guarded(out, || {
        // SAFETY: the caller's contract.
        match unsafe { handle(plugin) } {
            Ok(plugin) => body(&mut plugin.lock()),
            Err(outcome) => outcome,
        }
    })
}

fn done(result: Result<(), Error>) -> Outcome {
    match result {
        Ok(()) => (TANDEM_OK, Vec::new()),
        Err(e) => failed(&e),
    }
}

/// A node was added or changed: `node` is the Node object as JSON.
///
/// # Safety
/// `plugin` is a live handle; `node` points to `node_len` readable bytes; `out` is null or
/// valid for writes (it receives the error message).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_set_node(
    plugin: *const TandemPlugin,
    node: *const u8,
    node_len: usize,
    out: *mut TandemBuf,
) -> TandemStatus {
    // SAFETY: the caller's contract, forwarded.
    unsafe { with_plugin(plugin, out, |p| done(p.set_node(bytes(node, node_len)))) }
}

/// Node `name` (UTF-8) was deleted.
///
/// # Safety
/// As [`tandem_plugin_set_node`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_delete_node(
    plugin: *const TandemPlugin,
    name: *const u8,
    name_len: usize,
    out: *mut TandemBuf,
) -> TandemStatus {
    // SAFETY: the caller's contract, forwarded.
    unsafe {
        with_plugin(plugin, out, |p| match text("node name", name, name_len) {
            Ok(name) => {
                p.delete_node(name);
                (TANDEM_OK, Vec::new())
            }
            Err(outcome) => outcome,
        })
    }
}

/// A pod was added or changed: `pod` is the Pod object as JSON.
///
/// # Safety
/// As [`tandem_plugin_set_node`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_set_pod(
    plugin: *const TandemPlugin,
    pod: *const u8,
    pod_len: usize,
    out: *mut TandemBuf,
) -> TandemStatus {
    // SAFETY: the caller's contract, forwarded.
    unsafe { with_plugin(plugin, out, |p| done(p.set_pod(bytes(pod, pod_len)))) }
}

/// The pod with UID `uid` (UTF-8) was deleted.
///
/// # Safety
/// As [`tandem_plugin_set_node`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_delete_pod(
    plugin: *const TandemPlugin,
    uid: *const u8,
    uid_len: usize,
    out: *mut TandemBuf,
) -> TandemStatus {
    // SAFETY: the caller's contract, forwarded.
    unsafe {
        with_plugin(plugin, out, |p| match text("pod UID", uid, uid_len) {
            Ok(uid) => {
                p.delete_pod(uid);
                (TANDEM_OK, Vec::new())
            }
            Err(outcome) => outcome,
        })
    }
}

/// PreFilter: judges the pod (its JSON) on every node; `out` receives [`Prepared`] in its
/// binary form ([`Prepared::encode`]), the node table's names included unless
/// `known_generation` is the table's generation (the caller holds them from an earlier answer;
/// 0 holds none).
///
/// # Safety
/// As [`tandem_plugin_set_node`]; `out` must not be null.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_prefilter(
    plugin: *const TandemPlugin,
    pod: *const u8,
    pod_len: usize,
    known_generation: u64,
    out: *mut TandemBuf,
) -> TandemStatus {
    // SAFETY: the caller's contract, forwarded.
    unsafe {
        with_plugin(plugin, out, |p| match p.prefilter(bytes(pod, pod_len)) {
            Ok(prepared) => (TANDEM_OK, prepared.encode(known_generation)),
            Err(e) => failed(&e),
        })
    }
}

/// PreFilter without the pod: judges the pod with UID `uid` at `resource_version` from what
/// its events told the plugin. [`TANDEM_OK`] and `out` as [`tandem_plugin_prefilter`]'s, or
/// [`TANDEM_UNSEEN`] (nothing in `out`) when the plugin has not seen that version of the pod
/// yet: then call [`tandem_plugin_prefilter`] with it.
///
/// # Safety
/// As [`tandem_plugin_reserve`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_prefilter_known(
    plugin: *const TandemPlugin,
    uid: *const u8,
    uid_len: usize,
    resource_version: *const u8,
    resource_version_len: usize,
    known_generation: u64,
    out: *mut TandemBuf,
) -> TandemStatus {
    // SAFETY: the caller's contract, forwarded.
    unsafe {
        with_plugin(plugin, out, |p| {
            let (uid, version) = match (
                text("pod UID", uid, uid_len),
                text("resourceVersion", resource_version, resource_version_len),
            ) {
                (Ok(uid), Ok(version)) => (uid, version),
                (Err(outcome), _) | (_, Err(outcome)) => return outcome,
            };
            match p.prefilter_known(uid, version) {
                Ok(Some(prepared)) => (TANDEM_OK, prepared.encode(known_generation)),
                Ok(None) => (TANDEM_UNSEEN, Vec::new()),
                Err(e) => failed(&e),
            }
        })
    }
}

/// Reserve: chooses the GPUs of the pod PreFilter judged last (UID `uid`) on `node`. On
/// [`TANDEM_OK`] `out` holds [`Reserved`] as JSON; on [`TANDEM_REFUSED`] why the node cannot
/// take it.
///
/// # Safety
/// As [`tandem_plugin_set_node`]; `out` must not be null.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_reserve(
    plugin: *const TandemPlugin,
    uid: *const u8,
    uid_len: usize,
    node: *const u8,
    node_len: usize,
    out: *mut TandemBuf,
) -> TandemStatus {
    // SAFETY: the caller's contract, forwarded.
    unsafe {
        with_plugin(plugin, out, |p| {
            let (uid, node) = match (text("pod UID", uid, uid_len), text("node", node, node_len)) {
                (Ok(uid), Ok(node)) => (uid, node),
                (Err(outcome), _) | (_, Err(outcome)) => return outcome,
            };
            match p.reserve(uid, node) {
                Ok(Reservation::Reserved(reserved)) => ok_json(&reserved),
                Ok(Reservation::Rejected(reason)) => (TANDEM_REFUSED, reason.into_bytes()),
                Err(e) => failed(&e),
            }
        })
    }
}

/// Unreserve: undoes Reserve's choice for the pod with UID `uid`.
///
/// # Safety
/// As [`tandem_plugin_set_node`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tandem_plugin_unreserve(
    plugin: *const TandemPlugin,
    uid: *const u8,
    uid_len: usize,
    out: *mut TandemBuf,
) -> TandemStatus {
    // SAFETY: the caller's contract, forwarded.
    unsafe {
        with_plugin(plugin, out, |p| match text("pod UID", uid, uid_len) {
            Ok(uid) => done(p.unreserve(uid)),
            Err(outcome) => outcome,
        })
    }
}

#[cfg(test)]
mod header;
#[cfg(test)]
mod tests;
