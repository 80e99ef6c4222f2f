//! Leader election with a `coordination.k8s.io` Lease, so only one replica writes the
//! knowledge base.
//!
//! Every replica serves `filter`, `prioritize` and `bind` from its own engine instance; only
//! the leader accepts observations (profiles, outcomes, finished pods) and writes them to the
//! store. A replica takes the Lease when it is free, expired, or already its own (a restarted
//! container keeps its pod name, so it resumes leading at once); every write of the Lease is
//! conditional on its `resourceVersion`, so two replicas can never both win.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
pub use tandem_adapter_core::Leadership;
use tandem_adapter_core::Shutdown;

/// How long a Lease holds without renewal.
pub const LEASE_SECONDS: i32 = 15;

/// How often the holder renews and the others retry.
pub const RETRY: Duration = Duration::from_secs(3);

/// Runs the election until `shutdown`; calls `on_gain` each time this replica becomes leader
/// (before it acts as one) so it can reload what the previous leader wrote.
pub async fn run<F, Fut>(
    api: Api<Lease>,
    name: String,
    identity: String,
    leadership: Arc<Leadership>,
    mut shutdown: Shutdown,
    on_gain: F,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        let leading = match try_acquire(&api, &name, &identity).await {
            Ok((leading, holder)) => {
                if leading && !leadership.is_leader() {
                    tracing::info!(lease = %name, "became leader; reloading the knowledge base");
                    on_gain().await;
                }
                if leadership.set(leading, holder.clone()) && !leading {
                    tracing::warn!(lease = %name, holder = ?holder, "lost leadership");
                }
                leading
            }
            Err(error) => {
                // Without the API we cannot renew: stop acting as leader before the Lease
                // could expire and another replica take over.
                tracing::warn!(%error, "lease renewal failed");
                if leadership.set(false, None) {
                    tracing::warn!(lease = %name, "stepped down: cannot renew the lease");
                }
                false
            }
        };
        let _ = leading;
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            () = shutdown.wait() => break,
        }
    }
    // Hand over at once on a clean shutdown.
    if leadership.is_leader() {
        if let Err(error) = release(&api, &name, &identity).await {
            tracing::warn!(%error, "could not release the lease");
        }
        leadership.set(false, None);
    }
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// One round: returns whether we hold the Lease now, and who does.
async fn try_acquire(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
) -> Result<(bool, Option<String>), kube::Error> {
    let params = PostParams::default();
    let Some(mut lease) = api.get_opt(name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(identity.to_owned()),
                lease_duration_seconds: Some(LEASE_SECONDS),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&params, &lease).await {
            Ok(_) => Ok((true, Some(identity.to_owned()))),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok((false, None)),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
    let expired = spec
        .renew_time
        .as_ref()
        .is_none_or(|renewed| Timestamp::now().as_second() > renewed.0.as_second() + duration);
    let ours = holder.as_deref() == Some(identity);
    if !(ours || holder.is_none() || expired) {
        return Ok((false, holder));
    }
    if !ours {
        spec.acquire_time = Some(now());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(LEASE_SECONDS);
    spec.renew_time = Some(now());
    // `lease` still carries the resourceVersion we read: the replace is conditional on it.
    match api.replace(name, &params, &lease).await {
        Ok(_) => Ok((true, Some(identity.to_owned()))),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok((false, holder)),
        Err(e) => Err(e),
    }
}

async fn release(api: &Api<Lease>, name: &str, identity: &str) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(name).await? else {
        return Ok(());
    };
    if let Some(spec) = lease.spec.as_mut()
        && spec.holder_identity.as_deref() == Some(identity)
    {
        spec.holder_identity = None;
        api.replace(name, &PostParams::default(), &lease).await?;
    }
    Ok(())
}
