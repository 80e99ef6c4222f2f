//! The Helm chart (`deploy/helm/tandem`), checked the way an operator meets it: `helm lint`
//! and `helm template` of every mode, the rendered objects sent to a real kube-apiserver that
//! authorizes by RBAC, and `helm install` into that cluster followed by a GPU pod.
//!
//! - Every mode (plugin, extender, volcano; the profiler, the node component and the dashboard
//!   on) lints with `--strict` and renders secure by default: the extender's verbs ask for the
//!   scheduler's client certificate, Volcano's for a token, both generated; `openVerbs` is the
//!   only way to open them.
//! - Each mode's profiler presents its pod's projected service-account token (audience
//!   `tandem-intake`) as its intake token and mounts only `id-secret` of the ids Secret, never
//!   the operator's intake token; the scheduler path names the profiler's account, and its
//!   account alone may create `tokenreviews` (none without the profiler).
//! - Each mode's objects pass a server-side dry run (the ServiceMonitor and PrometheusRule
//!   excepted: this apiserver has no Prometheus operator CRDs). Installed for real, each service
//!   account may do what its program needs and is refused what it does not (asked of the
//!   apiserver's RBAC authorizer with SubjectAccessReviews).
//! - `helm install` in plugin mode, then the scheduler's pod runs as the kubelet would run it:
//!   its image's files (`tandem-kube-scheduler`, its libraries, the loader) unpacked into a
//!   root, the Deployment's volumes written at their mount paths from the installed ConfigMap
//!   and Secret, its service account's token (TokenRequest) and the apiserver's CA at
//!   `/var/run/secrets/kubernetes.io/serviceaccount`, chrooted as the image's user with the
//!   container's command and environment. There is no kubelet in this tier (the node tier has
//!   kubelets; its scenarios run the adapters as processes): the test plays its part for that
//!   one pod. The scheduler then places a GPU pod, which carries Tandem's annotation, with no
//!   permission but those the chart granted; its intake takes that pod's profile from the
//!   profiler of the pod's node (a TokenRequest token of the profilers' account bound to a
//!   profiler pod there, as the kubelet would mount it) and refuses it from the other node's.
//! - Every metric the dashboard and the alerts query is one the extender's `/metrics` shows
//!   ([`check_dashboard_queries`], called by the declaring scenario of the kube tier).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde_json::Value;
use tandem_xtask::helm::{self, CHART_DIR, MODES};

use crate::cluster::{Cluster, create_gpu_node, ensure_namespace, spawn_logged};
use crate::extender::{NAMESPACE, annotation};
use tandem_e2e::scenarios::poison;
use tandem_e2e::{cluster, extender, plugin};

/// The release and namespace the tests install into.
const RELEASE: &str = "tandem";
const RELEASE_NAMESPACE: &str = "tandem-system";

/// The value that lets a render without a cluster generate the chart's secrets.
const FRESH_SECRETS: &str = "secrets.renderWithoutCluster=true";

/// Where the chart puts vc-scheduler's configuration (Volcano's namespace).
const VOLCANO_NAMESPACE: &str = "volcano-system";

/// What the admission policy says when it refuses a placement annotation.
const REFUSED: &str = "Tandem's placement annotations are written by Tandem's schedulers only";

/// The profilers' service account, as the scheduler path names it (`NAMESPACE/NAME`).
const PROFILER_ACCOUNT: &str = "tandem-system/tandem-profiler";

/// Where the profiler's projected service-account token is mounted (docs/PROFILER.md).
const PROFILER_TOKEN: &str = "/var/run/secrets/tandem/intake-token";

/// The audience of the profilers' tokens, the adapters' default.
const PROFILER_AUDIENCE: &str = "tandem-intake";

/// What each mode's checks also turn on: every optional part the mode takes. Rendered without
/// a cluster, fresh secrets are asked for (`secrets.renderWithoutCluster`).
fn everything(mode: &str) -> Vec<String> {
    vec![
        format!("mode={mode}"),
        "node.enabled=true".to_owned(),
        "metrics.serviceMonitor.enabled=true".to_owned(),
        "metrics.prometheusRule.enabled=true".to_owned(),
        "profiler.enabled=true".to_owned(),
        FRESH_SECRETS.to_owned(),
    ]
}

/// `helm`, built (or found through `TANDEM_HELM_BIN`) off the runtime's threads.
async fn helm_binary() -> Result<PathBuf> {
    tokio::task::spawn_blocking(helm::helm_from_env)
        .await
        .context("the task building helm panicked")?
}

/// The objects `helm template` renders with `values`, as JSON.
fn render(helm: &Path, values: &[String]) -> Result<Vec<Value>> {
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    let yaml = helm::template(
        helm,
        &tandem_e2e::root(),
        RELEASE,
        RELEASE_NAMESPACE,
        &values,
    )?;
    let documents: Vec<Option<Value>> =
        serde_saphyr::from_multiple(&yaml).context("helm template printed YAML we cannot read")?;
    Ok(documents.into_iter().flatten().collect())
}

fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> Result<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .with_context(|| format!("the chart renders no {kind} {name}"))
}

/// The first container's args (or command) of `workload`.
fn args_of(workload: &Value) -> Vec<String> {
    let container = &workload["spec"]["template"]["spec"]["containers"][0];
    let list = if container["args"].is_array() {
        &container["args"]
    } else {
        &container["command"]
    };
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_chart_lints_and_renders_every_mode_secure_by_default() -> Result<()> {
    let helm = helm_binary().await?;
    let root = tandem_e2e::root();
    for mode in MODES {
        let values = everything(mode);
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        helm::lint(&helm, &root, &values).with_context(|| format!("mode {mode}"))?;
    }
    // A value that cannot work, or a misspelt one, is refused, naming it (values.schema.json).
    for (wrong, named) in [
        ("mode=yarn", "at '/mode'"),
        ("engine.maxJobPerGpu=3", "'maxJobPerGpu' not allowed"),
    ] {
        let refused = helm::template(
            &helm,
            &root,
            RELEASE,
            RELEASE_NAMESPACE,
            &[wrong, FRESH_SECRETS],
        );
        let message = format!(
            "{:#}",
            refused.err().with_context(|| format!("{wrong} rendered"))?
        );
        ensure!(message.contains(named), "{wrong}: {message}");
    }

    // Extender: mutual TLS between the scheduler and the extender, from one generated CA.
    let objects = render(&helm, &everything("extender"))?;
    let adapter = named(&objects, "Deployment", "tandem-kube-adapter")?;
    let args = args_of(adapter);
    for wanted in [
        "--client-ca=/etc/tandem/tls/ca.crt",
        "--tls-cert=/etc/tandem/tls/tls.crt",
    ] {
        ensure!(args.iter().any(|a| a == wanted), "no {wanted} in {args:?}");
    }
    for secret in ["tandem-kube-adapter-tls", "tandem-scheduler-tls"] {
        let data = &named(&objects, "Secret", secret)?["data"];
        for key in ["tls.crt", "tls.key", "ca.crt"] {
            ensure!(
                data[key].as_str().is_some_and(|v| v.len() > 100),
                "{secret} has no {key}"
            );
        }
    }
    let config = named(&objects, "ConfigMap", "tandem-scheduler-config")?["data"]["config.yaml"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ensure!(
        config.contains("urlPrefix: https://tandem-kube-adapter.tandem-system.svc:8888/")
            && config.contains("certFile: /etc/tandem-scheduler/tls/tls.crt"),
        "the scheduler does not call the extender over mutual TLS:\n{config}"
    );
    let ids = &named(&objects, "Secret", "tandem-ids")?["data"];
    for key in ["id-secret", "intake-token"] {
        ensure!(
            ids[key].as_str().is_some_and(|v| v.len() > 40),
            "tandem-ids has no {key}"
        );
    }
    let opened = render(
        &helm,
        &[
            "mode=extender".into(),
            "extender.openVerbs=true".into(),
            FRESH_SECRETS.into(),
        ],
    )?;
    let args = args_of(named(&opened, "Deployment", "tandem-kube-adapter")?);
    ensure!(
        !args.iter().any(|a| a.starts_with("--client-ca")),
        "openVerbs=true still asks for a certificate: {args:?}"
    );

    // Volcano: a token, presented by vc-scheduler as the password of the URL it calls.
    let objects = render(&helm, &everything("volcano"))?;
    let args = args_of(named(&objects, "Deployment", "tandem-volcano-adapter")?);
    ensure!(
        args.iter()
            .any(|a| a == "--scheduler-token-file=/etc/tandem/scheduler/token"),
        "{args:?}"
    );
    let conf = named(&objects, "Secret", "tandem-volcano-adapter-scheduler-conf")?["stringData"]
        ["volcano-scheduler.conf"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ensure!(
        conf.contains("extender.urlPrefix: http://tandem:")
            && conf.contains("@tandem-volcano-adapter.tandem-system.svc:8888"),
        "vc-scheduler's conf carries no token:\n{conf}"
    );

    // Plugin: the engine's values reach the plugin's args.
    let objects = render(
        &helm,
        &[
            "mode=plugin".into(),
            "engine.objective=max-packing".into(),
            "engine.modelCaps.K80=1".into(),
            FRESH_SECRETS.into(),
        ],
    )?;
    let config =
        named(&objects, "ConfigMap", "tandem-plugin-scheduler-config")?["data"]["config.yaml"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
    ensure!(
        config.contains("objective: max-packing")
            && config.contains("{gpuModel: \"K80\", maxJobs: 1}"),
        "{config}"
    );

    // Plugin: the ServiceMonitor scrapes the plugin's /metrics, which Rust serves on the
    // intake's port, through a Service of that port on the scheduler pods.
    let objects = render(&helm, &everything("plugin"))?;
    let service = named(&objects, "Service", "tandem-plugin-scheduler-metrics")?;
    ensure!(
        service["spec"]["selector"]["app.kubernetes.io/name"] == "tandem-plugin-scheduler"
            && service["spec"]["ports"][0]["targetPort"] == "intake",
        "{service}"
    );
    let monitor = named(&objects, "ServiceMonitor", "tandem-plugin-scheduler")?;
    let endpoint = &monitor["spec"]["endpoints"][0];
    ensure!(
        monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
            == service["metadata"]["labels"]["app.kubernetes.io/name"]
            && endpoint["port"] == service["spec"]["ports"][0]["name"]
            && endpoint["path"] == "/metrics"
            && endpoint["scheme"].is_null(),
        "{monitor}"
    );

    for mode in MODES {
        placement_keys_render(&helm, mode).with_context(|| format!("mode {mode}"))?;
        profiler_tokens_render(&helm, mode).with_context(|| format!("mode {mode}"))?;
    }
    secrets_render_only_with_a_cluster_or_when_named(&helm)?;
    Ok(())
}

/// `mode`'s placement key pair as rendered: the private key mounted by the scheduler path alone,
/// which signs with it; the ConfigMap's certificate, mounted by tandem-node with its flags, which
/// verifies those signatures; the admission policy naming the path's account; the extender's
/// ClusterRole without `patch` on pods (it binds, it never patches).
fn placement_keys_render(helm: &Path, mode: &str) -> Result<()> {
    use tandem_kube_common::placement::{Placement, Signer, Verifier};

    let objects = render(helm, &everything(mode))?;
    let secret: Secret =
        serde_json::from_value(named(&objects, "Secret", "tandem-placement-key")?.clone())?;
    let key = secret
        .data
        .unwrap_or_default()
        .remove("placement.key")
        .context("no placement.key")?
        .0;
    let signer = Signer::from_pem(&key).context("the chart's placement key does not load")?;
    let certificate =
        named(&objects, "ConfigMap", "tandem-placement-keys")?["data"]["placement-keys.pem"]
            .as_str()
            .context("no placement-keys.pem")?;
    let verifier = Verifier::from_pem(certificate.as_bytes())
        .context("the chart's certificate does not load as a placement key")?;
    let placement = Placement::decided(&["gpu-a/0".to_owned()], Some(4096))?;
    let signed = signer.signed("uid-1", placement);
    ensure!(
        verifier.verify("uid-1", &signed) == Ok(signer.key_id()),
        "the ConfigMap's certificate does not verify what the Secret's key signs"
    );
    println!(
        "(placement) mode {mode}: key {} generated, its certificate verifies its signatures",
        signer.key_id()
    );

    let writer = match mode {
        "plugin" => "tandem-plugin-scheduler",
        "extender" => "tandem-kube-adapter",
        _ => "tandem-volcano-adapter",
    };
    for workload in objects.iter().filter(|o| {
        matches!(
            o["kind"].as_str(),
            Some("Deployment" | "DaemonSet" | "StatefulSet")
        )
    }) {
        let name = workload["metadata"]["name"].as_str().unwrap_or_default();
        let mounts_key = workload["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["secret"]["secretName"] == "tandem-placement-key");
        ensure!(
            mounts_key == (name == writer),
            "{name} {} the placement key",
            if mounts_key {
                "mounts"
            } else {
                "does not mount"
            }
        );
    }
    let signs = args_of(named(&objects, "Deployment", writer)?)
        .iter()
        .any(|a| a == "--placement-key=/etc/tandem/placement/placement.key");
    let config = objects
        .iter()
        .filter(|o| o["kind"] == "ConfigMap")
        .filter_map(|o| o["data"]["config.yaml"].as_str())
        .any(|c| c.contains("placementKeyFile: /etc/tandem/placement/placement.key"));
    ensure!(
        signs || (mode == "plugin" && config),
        "{writer} is not given its placement key"
    );

    let node = named(&objects, "DaemonSet", "tandem-node")?;
    let args = args_of(node);
    for wanted in [
        "--placement-keys=/etc/tandem/placement/placement-keys.pem",
        "--unsigned=refuse",
        "--all-gpus-namespace=tandem-system",
        "--all-gpus-namespace=gpu-operator",
        "--all-gpus-namespace=nvidia-device-plugin",
    ] {
        ensure!(
            args.iter().any(|a| a == wanted),
            "tandem-node: no {wanted} in {args:?}"
        );
    }
    ensure!(
        node["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["configMap"]["name"] == "tandem-placement-keys"),
        "tandem-node does not mount the placement keys"
    );

    let policy = named(&objects, "ValidatingAdmissionPolicy", "tandem-placements")?;
    ensure!(
        policy["spec"]["failurePolicy"] == "Fail"
            && policy
                .to_string()
                .contains(&format!("system:serviceaccount:tandem-system:{writer}")),
        "the admission policy does not let {writer} alone write placements: {policy}"
    );
    named(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "tandem-placements",
    )?;
    named(
        &objects,
        "ValidatingAdmissionPolicy",
        "tandem-bound-gpu-pods",
    )?;
    if mode == "extender" {
        let role = named(&objects, "ClusterRole", "tandem-kube-adapter")?;
        for rule in role["rules"].as_array().into_iter().flatten() {
            let verbs = rule["verbs"].to_string();
            ensure!(
                !(rule["resources"].to_string().contains("\"pods\"") && verbs.contains("patch")),
                "the extender may patch pods: {rule}"
            );
        }
    }
    if mode == "volcano" {
        let conf = named(&objects, "Secret", "tandem-volcano-adapter-scheduler-conf")?;
        ensure!(
            conf["metadata"]["namespace"] == VOLCANO_NAMESPACE,
            "vc-scheduler's conf is not in its namespace: {}",
            conf["metadata"]
        );
        ensure!(
            !objects
                .iter()
                .any(|o| o["kind"] == "ConfigMap" && o.to_string().contains("extender.urlPrefix")),
            "vc-scheduler's conf, which carries the token, is in a ConfigMap"
        );
        let policy = named(&objects, "NetworkPolicy", "tandem-volcano-adapter")?;
        let from = policy["spec"]["ingress"][0]["from"].to_string();
        ensure!(
            from.contains("volcano-scheduler") && from.contains("tandem-profiler"),
            "the NetworkPolicy does not admit vc-scheduler and the profilers: {from}"
        );
    }
    Ok(())
}

/// The service account of `mode`'s scheduler path, which serves the intake.
fn scheduler_path(mode: &str) -> &'static str {
    match mode {
        "plugin" => "tandem-plugin-scheduler",
        "extender" => "tandem-kube-adapter",
        _ => "tandem-volcano-adapter",
    }
}

/// The profiler accounts and the token audience `mode`'s scheduler path is given: the
/// adapter's `--profiler-service-account` and `--profiler-token-audience`, the plugin's
/// `profilerServiceAccounts` and `profilerTokenAudience` (its args in the scheduler's config).
fn profiler_accounts_of(objects: &[Value], mode: &str) -> Result<(Vec<String>, Option<String>)> {
    if mode != "plugin" {
        let args = args_of(named(objects, "Deployment", scheduler_path(mode))?);
        let after = |flag: &str| -> Vec<String> {
            args.iter()
                .filter_map(|a| a.strip_prefix(flag))
                .map(str::to_owned)
                .collect()
        };
        let audience = after("--profiler-token-audience=").pop();
        return Ok((after("--profiler-service-account="), audience));
    }
    let config =
        named(objects, "ConfigMap", "tandem-plugin-scheduler-config")?["data"]["config.yaml"]
            .as_str()
            .context("the plugin's scheduler has no config.yaml")?;
    let config: Value =
        serde_saphyr::from_str(config).context("the plugin's config.yaml is not YAML")?;
    let args = config["profiles"][0]["pluginConfig"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "Tandem")
        .map(|c| c["args"].clone())
        .context("the plugin's config has no args for Tandem")?;
    let accounts = args["profilerServiceAccounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let audience = args["profilerTokenAudience"].as_str().map(str::to_owned);
    Ok((accounts, audience))
}

/// What `mode`'s profiler DaemonSet presents to the intake: the file its
/// `--intake-token-file` names, and the audience of the projected service-account token
/// mounted there (none: that file is not such a token). Checks first that the profiler runs as
/// its own account and holds `id-secret` alone of the ids Secret, never the operator's
/// `intake-token`.
fn profiler_token_of(objects: &[Value]) -> Result<(String, Option<String>)> {
    let profiler = named(objects, "DaemonSet", "tandem-profiler")?;
    let spec = &profiler["spec"]["template"]["spec"];
    ensure!(
        spec["serviceAccountName"] == "tandem-profiler",
        "the profiler runs as {}, not its own account",
        spec["serviceAccountName"]
    );
    let volumes = spec["volumes"]
        .as_array()
        .context("the profiler has no volumes")?;
    // Every source of a Secret the pod mounts: plain secret volumes and projected ones.
    let mut secrets = Vec::new();
    for volume in volumes {
        if volume["secret"].is_object() {
            secrets.push((&volume["secret"]["secretName"], &volume["secret"]["items"]));
        }
        for source in volume["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if source["secret"].is_object() {
                secrets.push((&source["secret"]["name"], &source["secret"]["items"]));
            }
        }
    }
    for (name, items) in secrets {
        if name != "tandem-ids" {
            continue;
        }
        let keys: Vec<&str> = items
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["key"].as_str())
            .collect();
        ensure!(
            keys == ["id-secret"],
            "the profiler mounts {} of tandem-ids, not id-secret alone",
            if items.is_array() {
                format!("{keys:?}")
            } else {
                "every key (intake-token, the operator's token, included)".to_owned()
            }
        );
    }
    let container = &spec["containers"][0];
    let file = args_of(profiler)
        .iter()
        .find_map(|a| a.strip_prefix("--intake-token-file=").map(str::to_owned))
        .context("the profiler is given no --intake-token-file")?;
    let mut audience = None;
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let Some(dir) = mount["mountPath"].as_str() else {
            continue;
        };
        let Some(volume) = volumes.iter().find(|v| v["name"] == mount["name"]) else {
            continue;
        };
        for source in volume["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let token = &source["serviceAccountToken"];
            let Some(path) = token["path"].as_str() else {
                continue;
            };
            if format!("{}/{path}", dir.trim_end_matches('/')) == file {
                ensure!(
                    mount["readOnly"] == true,
                    "the profiler's token is mounted writable: {mount}"
                );
                ensure!(
                    token["expirationSeconds"]
                        .as_u64()
                        .is_some_and(|s| (600..=86_400).contains(&s)),
                    "the profiler's token lives {} s",
                    token["expirationSeconds"]
                );
                audience = token["audience"].as_str().map(str::to_owned);
            }
        }
    }
    Ok((file, audience))
}

/// `mode` rendered with the profiler: the DaemonSet presents its pod's projected
/// service-account token (audience `tandem-intake`, at [`PROFILER_TOKEN`]) as its
/// `--intake-token-file` and mounts only `id-secret` of the ids Secret; the scheduler path names
/// the profiler's account and that audience, and its account alone is granted `create` on
/// `tokenreviews`. Another audience reaches both sides; without the profiler, no account is
/// named and no TokenReview granted.
fn profiler_tokens_render(helm: &Path, mode: &str) -> Result<()> {
    let writer = scheduler_path(mode);
    let objects = render(helm, &everything(mode))?;
    let (file, audience) = profiler_token_of(&objects)?;
    ensure!(
        audience.as_deref() == Some(PROFILER_AUDIENCE),
        "the profiler presents {file}, which is not its projected token of audience \
         {PROFILER_AUDIENCE} (audience {audience:?})"
    );
    ensure!(
        file == PROFILER_TOKEN,
        "the profiler's token is at {file}, not {PROFILER_TOKEN} (docs/PROFILER.md)"
    );
    let (accounts, path_audience) = profiler_accounts_of(&objects, mode)?;
    ensure!(
        accounts == [PROFILER_ACCOUNT]
            && path_audience.as_deref().unwrap_or(PROFILER_AUDIENCE) == PROFILER_AUDIENCE,
        "{writer} does not admit the profiler's account: accounts {accounts:?}, audience \
         {path_audience:?}"
    );
    // Who is granted TokenReview: the scheduler path's account, through a binding of a role
    // whose rule names tokenreviews.
    let reviewing: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole")
        .filter(|role| {
            role["rules"].as_array().into_iter().flatten().any(|rule| {
                rule["resources"].to_string().contains("tokenreviews")
                    && rule["apiGroups"]
                        .to_string()
                        .contains("authentication.k8s.io")
            })
        })
        .filter_map(|role| role["metadata"]["name"].as_str())
        .collect();
    let granted: BTreeSet<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding")
        .filter(|b| {
            b["roleRef"]["name"]
                .as_str()
                .is_some_and(|r| reviewing.contains(&r))
        })
        .flat_map(|b| b["subjects"].as_array().into_iter().flatten())
        .filter_map(|s| s["name"].as_str())
        .collect();
    ensure!(
        granted == BTreeSet::from([writer]),
        "TokenReview is granted to {granted:?}, not {writer} alone"
    );
    println!(
        "(profiler) mode {mode}: the profiler presents its projected token (audience {}, {file}) \
         and mounts only id-secret of tandem-ids; {writer} names {} and may create tokenreviews",
        PROFILER_AUDIENCE,
        accounts.join(", ")
    );

    // Another audience, on both sides.
    let mut values = everything(mode);
    values.push("profiler.tokenAudience=tandem-intake-b".into());
    let objects = render(helm, &values)?;
    let (_, audience) = profiler_token_of(&objects)?;
    let (_, path_audience) = profiler_accounts_of(&objects, mode)?;
    ensure!(
        audience.as_deref() == Some("tandem-intake-b")
            && path_audience.as_deref() == Some("tandem-intake-b"),
        "profiler.tokenAudience=tandem-intake-b: the profiler's token has audience \
         {audience:?}, {writer} asks for {path_audience:?}"
    );
    println!(
        "(profiler) mode {mode}: profiler.tokenAudience=tandem-intake-b is the profiler's token's \
         audience and the one {writer} reviews for"
    );

    // No profiler: no account named, no TokenReview for anyone.
    let values: Vec<String> = everything(mode)
        .into_iter()
        .filter(|v| !v.starts_with("profiler."))
        .collect();
    let objects = render(helm, &values)?;
    let (accounts, _) = profiler_accounts_of(&objects, mode)?;
    ensure!(
        accounts.is_empty(),
        "without the profiler {writer} still admits {accounts:?}"
    );
    ensure!(
        !objects
            .iter()
            .any(|o| o["kind"] == "ClusterRole" && o.to_string().contains("tokenreviews")),
        "without the profiler a ClusterRole still grants tokenreviews"
    );
    println!(
        "(profiler) mode {mode}: without the profiler, {writer} names no profiler account and no \
         ClusterRole grants tokenreviews"
    );
    Ok(())
}

/// Rendered without a cluster (GitOps), each Secret the chart would generate fails the render,
/// saying how to create it once; named, they render with none generated.
fn secrets_render_only_with_a_cluster_or_when_named(helm: &Path) -> Result<()> {
    let root = tandem_e2e::root();
    for (mode, secret) in [
        ("plugin", "tandem-ids"),
        ("plugin", "tandem-placement-key"),
        ("extender", "tandem-kube-adapter-tls"),
        ("volcano", "tandem-volcano-adapter-scheduler-token"),
    ] {
        // Every other Secret named, so that the render reaches this one.
        let mut values = vec![format!("mode={mode}")];
        let named_all = [
            "ids.existingSecret=mine-ids",
            "placement.existingSecret=mine-placement",
            "placement.publicKeys=-----BEGIN PUBLIC KEY-----",
            "extender.tls.existingSecrets=true",
            "volcano.existingTokenSecret=mine-token",
        ];
        values.extend(
            named_all
                .iter()
                .filter(|v| match secret {
                    "tandem-ids" => !v.starts_with("ids."),
                    "tandem-placement-key" => !v.starts_with("placement."),
                    "tandem-kube-adapter-tls" => !v.starts_with("extender."),
                    _ => !v.starts_with("volcano."),
                })
                .map(|v| (*v).to_owned()),
        );
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let refused = helm::template(helm, &root, RELEASE, RELEASE_NAMESPACE, &values);
        let message = format!(
            "{:#}",
            refused
                .err()
                .with_context(|| format!("mode {mode} rendered {secret} without a cluster"))?
        );
        ensure!(
            message.contains("rendered without cluster access")
                && message.contains(secret)
                && message.contains("Create it once and name it"),
            "{secret}: {message}"
        );
        let said = message
            .lines()
            .find(|line| line.contains("rendered without cluster access"))
            .unwrap_or_default();
        println!("(gitops) {secret}: {said}");
    }
    for mode in MODES {
        let objects = render(
            helm,
            &[
                format!("mode={mode}"),
                "ids.existingSecret=mine-ids".into(),
                "placement.existingSecret=mine-placement".into(),
                "placement.publicKeys=-----BEGIN PUBLIC KEY-----".into(),
                "extender.tls.existingSecrets=true".into(),
                "volcano.existingTokenSecret=mine-token".into(),
            ],
        )?;
        let generated: Vec<&str> = objects
            .iter()
            .filter(|o| o["kind"] == "Secret")
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        ensure!(
            generated.is_empty(),
            "mode {mode}: Secrets generated though named: {generated:?}"
        );
    }
    Ok(())
}

/// Sends `objects` to the apiserver: a server-side dry run, or (`create`) for real. Kinds the
/// apiserver does not serve are returned, not sent.
async fn send(
    client: &kube::Client,
    discovery: &Discovery,
    objects: &[Value],
    create: bool,
) -> Result<Vec<String>> {
    let mut unserved = Vec::new();
    for object in objects {
        let object: DynamicObject = serde_json::from_value(object.clone())?;
        let types = object.types.clone().context("an object without a kind")?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let name = object.metadata.name.clone().unwrap_or_default();
        let Some((resource, capabilities)) = discovery.resolve_gvk(&gvk) else {
            unserved.push(format!("{} {name}", gvk.kind));
            continue;
        };
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object
                    .metadata
                    .namespace
                    .as_deref()
                    .unwrap_or(RELEASE_NAMESPACE),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let params = PostParams {
            dry_run: !create,
            ..PostParams::default()
        };
        api.create(&params, &object)
            .await
            .with_context(|| format!("the apiserver refused {} {name}", gvk.kind))?;
    }
    Ok(unserved)
}

/// Whether the apiserver's RBAC lets service account `account` of the release do `verb` on
/// `resource` (`group/resource` or `resource`, with `/subresource`) in `namespace`.
async fn may(
    client: &kube::Client,
    account: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool> {
    may_account(
        client,
        RELEASE_NAMESPACE,
        account,
        verb,
        resource,
        namespace,
    )
    .await
}

/// [`may`] for service account `account` of namespace `home`.
async fn may_account(
    client: &kube::Client,
    home: &str,
    account: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool> {
    let (group, resource) = resource.split_once(':').unwrap_or(("", resource));
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub.to_owned())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{home}:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{home}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                verb: Some(verb.to_owned()),
                namespace: namespace.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = reviews.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|status| status.allowed))
}

#[tokio::test]
async fn every_mode_passes_a_dry_run_and_its_accounts_get_only_what_they_need() -> Result<()> {
    let helm = helm_binary().await?;
    let cluster = Cluster::start_control_plane_with_rbac().await?;
    let client = cluster.client().await?;
    ensure_namespace(&client, RELEASE_NAMESPACE).await?;
    ensure_namespace(&client, VOLCANO_NAMESPACE).await?;
    let discovery = Discovery::new(client.clone()).run().await?;

    let mut rbac = BTreeMap::new();
    for mode in MODES {
        let objects = render(&helm, &everything(mode))?;
        let unserved = send(&client, &discovery, &objects, false)
            .await
            .with_context(|| format!("mode {mode}"))?;
        let expected: BTreeSet<&str> = [
            "PrometheusRule tandem",
            "ServiceMonitor tandem-kube-adapter",
            "ServiceMonitor tandem-volcano-adapter",
            "ServiceMonitor tandem-plugin-scheduler",
        ]
        .into();
        for kind in &unserved {
            ensure!(
                expected.contains(kind.as_str()),
                "mode {mode}: {kind} is not served"
            );
        }
        // Kept to be created for real: the roles and bindings, which the reviews below ask
        // about (those of the profiler and the node component come with several modes).
        for object in objects {
            if object["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("rbac.authorization.k8s.io/"))
            {
                let key = format!(
                    "{} {} {}",
                    object["kind"], object["metadata"]["namespace"], object["metadata"]["name"]
                );
                rbac.insert(key, object);
            }
        }
    }
    let rbac: Vec<Value> = rbac.into_values().collect();
    send(&client, &discovery, &rbac, true).await?;

    let system = Some(RELEASE_NAMESPACE);
    let elsewhere = Some("default");
    // (account, verb, resource, namespace, allowed)
    #[rustfmt::skip]
    let cases: &[(&str, &str, &str, Option<&str>, bool)] = &[
        // The extender: reads nodes and pods, binds pods (their placement on the Binding),
        // keeps the knowledge base and its Lease at home; it patches no pod.
        ("tandem-kube-adapter", "watch", "pods", None, true),
        ("tandem-kube-adapter", "patch", "pods", elsewhere, false),
        ("tandem-kube-adapter", "update", "pods", elsewhere, false),
        ("tandem-kube-adapter", "create", "pods/binding", elsewhere, true),
        ("tandem-kube-adapter", "update", "configmaps", system, true),
        (
            "tandem-kube-adapter",
            "update",
            "coordination.k8s.io:leases",
            system,
            true,
        ),
        ("tandem-kube-adapter", "get", "secrets", system, false),
        ("tandem-kube-adapter", "update", "configmaps", elsewhere, false),
        ("tandem-kube-adapter", "delete", "pods", elsewhere, false),
        ("tandem-kube-adapter", "create", "pods", elsewhere, false),
        ("tandem-kube-adapter", "patch", "nodes", None, false),
        // The Volcano extender: the same, but vc-scheduler binds.
        ("tandem-volcano-adapter", "patch", "pods", elsewhere, true),
        ("tandem-volcano-adapter", "create", "pods/binding", elsewhere, false),
        ("tandem-volcano-adapter", "list", "secrets", None, false),
        // The plugin's scheduler: a scheduler's roles (system:kube-scheduler, which deletes pods
        // to preempt them), the knowledge base and its Lease at home.
        ("tandem-plugin-scheduler", "create", "pods/binding", elsewhere, true),
        ("tandem-plugin-scheduler", "update", "configmaps", system, true),
        ("tandem-plugin-scheduler", "list", "configmaps", system, true),
        ("tandem-plugin-scheduler", "update", "configmaps", elsewhere, false),
        (
            "tandem-plugin-scheduler",
            "update",
            "coordination.k8s.io:leases",
            system,
            true,
        ),
        ("tandem-plugin-scheduler", "get", "secrets", system, false),
        ("tandem-plugin-scheduler", "patch", "nodes", None, false),
        ("tandem-plugin-scheduler", "create", "pods", elsewhere, false),
        // The extender's scheduler: a scheduler's roles, no knowledge base.
        ("tandem-scheduler", "create", "pods/binding", elsewhere, true),
        ("tandem-scheduler", "update", "coordination.k8s.io:leases", system, true),
        ("tandem-scheduler", "update", "configmaps", system, false),
        // The profiler: reads pods, nothing else.
        ("tandem-profiler", "list", "pods", None, true),
        ("tandem-profiler", "watch", "pods", None, false),
        ("tandem-profiler", "patch", "pods", elsewhere, false),
        ("tandem-profiler", "get", "secrets", system, false),
        ("tandem-profiler", "get", "nodes", None, false),
        // The node component: watches its node's pods (and gets one), nothing else: not the
        // placement key, nor the public keys it is given (mounted, not read through the API).
        ("tandem-node", "get", "pods", elsewhere, true),
        ("tandem-node", "list", "pods", None, true),
        ("tandem-node", "watch", "pods", None, true),
        ("tandem-node", "patch", "pods", elsewhere, false),
        ("tandem-node", "get", "secrets", system, false),
        ("tandem-node", "get", "configmaps", system, false),
        ("tandem-node", "update", "configmaps", system, false),
        ("tandem-profiler", "update", "configmaps", system, false),
        // The profilers' tokens: each scheduler path reviews them (TokenReview, cluster-scoped);
        // no other account of Tandem's may, nor may a profiler mint a token or read a Secret
        // (the operator's intake token among them).
        ("tandem-kube-adapter", "create", "authentication.k8s.io:tokenreviews", None, true),
        ("tandem-volcano-adapter", "create", "authentication.k8s.io:tokenreviews", None, true),
        ("tandem-plugin-scheduler", "create", "authentication.k8s.io:tokenreviews", None, true),
        ("tandem-profiler", "create", "authentication.k8s.io:tokenreviews", None, false),
        ("tandem-node", "create", "authentication.k8s.io:tokenreviews", None, false),
        ("tandem-profiler", "list", "secrets", None, false),
        ("tandem-profiler", "watch", "secrets", system, false),
        ("tandem-profiler", "create", "serviceaccounts/token", system, false),
        ("tandem-profiler", "create", "pods", system, false),
        // No account of Tandem's may change the admission policy that guards placements.
        (
            "tandem-kube-adapter",
            "update",
            "admissionregistration.k8s.io:validatingadmissionpolicies",
            None,
            false,
        ),
        (
            "tandem-plugin-scheduler",
            "delete",
            "admissionregistration.k8s.io:validatingadmissionpolicybindings",
            None,
            false,
        ),
        (
            "tandem-volcano-adapter",
            "update",
            "admissionregistration.k8s.io:validatingadmissionpolicies",
            None,
            false,
        ),
    ];
    let mut wrong = Vec::new();
    for &(account, verb, resource, namespace, allowed) in cases {
        let answer = may(&client, account, verb, resource, namespace).await?;
        if resource.contains("tokenreviews") || account == "tandem-profiler" {
            println!(
                "(rbac) {account} {} {verb} {resource} in {}",
                if answer { "may" } else { "may not" },
                namespace.unwrap_or("every namespace")
            );
        }
        if answer != allowed {
            wrong.push(format!(
                "{account} {} {verb} {resource} in {}",
                if answer { "may" } else { "may not" },
                namespace.unwrap_or("every namespace")
            ));
        }
    }
    // A tenant, admin of its own namespace: it cannot read the placement key, change the public
    // keys, or touch the policy (its own namespace's Secrets it may read).
    tenant_admin(&client, TENANT_NAMESPACE, "tenant").await?;
    let tenant = |verb, resource, namespace| {
        may_account(
            &client,
            TENANT_NAMESPACE,
            "tenant",
            verb,
            resource,
            namespace,
        )
    };
    #[rustfmt::skip]
    let tenant_cases: &[(&str, &str, Option<&str>, bool)] = &[
        ("get", "secrets", Some(TENANT_NAMESPACE), true),
        ("create", "pods", Some(TENANT_NAMESPACE), true),
        ("get", "secrets", system, false),
        ("list", "secrets", None, false),
        ("update", "configmaps", system, false),
        ("patch", "configmaps", system, false),
        ("delete", "admissionregistration.k8s.io:validatingadmissionpolicies", None, false),
        ("update", "admissionregistration.k8s.io:validatingadmissionpolicybindings", None, false),
        // Nor review tokens, nor mint one for the profilers' account.
        ("create", "authentication.k8s.io:tokenreviews", None, false),
        ("create", "serviceaccounts/token", system, false),
    ];
    for &(verb, resource, namespace, allowed) in tenant_cases {
        let answer = tenant(verb, resource, namespace).await?;
        if resource.contains("tokenreviews") || resource.contains("serviceaccounts") {
            println!(
                "(rbac) the tenant {} {verb} {resource} in {}",
                if answer { "may" } else { "may not" },
                namespace.unwrap_or("every namespace")
            );
        }
        if answer != allowed {
            wrong.push(format!(
                "the tenant {} {verb} {resource} in {}",
                if answer { "may" } else { "may not" },
                namespace.unwrap_or("every namespace")
            ));
        }
    }
    ensure!(
        wrong.is_empty(),
        "RBAC is not what the programs need:\n{}",
        wrong.join("\n")
    );
    Ok(())
}

/// The namespace of the tests' tenant.
const TENANT_NAMESPACE: &str = "team-a";

/// Makes service account `account` of `namespace` (created with it) a tenant there: it may do
/// anything to pods, read Secrets and write ConfigMaps of that namespace alone, as a namespace
/// admin may (the apiserver runs no controller to aggregate Kubernetes' own `admin` role).
async fn tenant_admin(client: &kube::Client, namespace: &str, account: &str) -> Result<()> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

    ensure_namespace(client, namespace).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    if accounts.get_opt(account).await?.is_none() {
        let created: ServiceAccount =
            serde_json::from_value(serde_json::json!({ "metadata": { "name": account } }))?;
        accounts.create(&PostParams::default(), &created).await?;
    }
    let name = format!("{account}-tenant");
    let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
    if roles.get_opt(&name).await?.is_none() {
        let role: Role = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "rules": [
                { "apiGroups": [""], "resources": ["pods"], "verbs": ["*"] },
                { "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"] },
                { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"] },
            ],
        }))?;
        roles.create(&PostParams::default(), &role).await?;
    }
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    if bindings.get_opt(&name).await?.is_none() {
        let binding: RoleBinding = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
            "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": namespace }],
        }))?;
        bindings.create(&PostParams::default(), &binding).await?;
    }
    // The API server's RBAC authorizer learns of a new binding from its own watch: wait until
    // it answers for the tenant, or a review asked at once may still see none.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !may_account(
        client,
        namespace,
        account,
        "get",
        "secrets",
        Some(namespace),
    )
    .await?
    {
        ensure!(
            std::time::Instant::now() < deadline,
            "the API server never granted {namespace}/{account} its tenant role"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// A token of service account `account` of `namespace` for the API server, from a
/// TokenRequest (what the kubelet mounts in a pod of that account).
async fn api_token(client: &kube::Client, namespace: &str, account: &str) -> Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    Ok(accounts
        .create_token_request(
            account,
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec!["https://kubernetes.default.svc.cluster.local".into()],
                    expiration_seconds: Some(3600),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            },
        )
        .await?
        .status
        .context("TokenRequest answered no token")?
        .token)
}

/// A client of `cluster` authenticated as service account `account` of `namespace` (its token,
/// from a TokenRequest), as a pod of that account would be.
async fn client_of_account(
    cluster: &Cluster,
    client: &kube::Client,
    namespace: &str,
    account: &str,
) -> Result<kube::Client> {
    let token = api_token(client, namespace, account).await?;
    client_with(cluster, |auth| {
        auth.token = Some(token.into());
    })
    .await
}

/// A client of `cluster` as the tests' user impersonating `user` (in `groups`).
async fn client_impersonating(
    cluster: &Cluster,
    user: &str,
    groups: &[&str],
) -> Result<kube::Client> {
    client_with(cluster, |auth| {
        auth.impersonate = Some(user.to_owned());
        auth.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
    })
    .await
}

/// A client of `cluster` from its kubeconfig, its credentials changed by `change`.
async fn client_with(
    cluster: &Cluster,
    change: impl FnOnce(&mut kube::config::AuthInfo),
) -> Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig_path())?;
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    config.accept_invalid_certs = true;
    change(&mut config.auth_info);
    Ok(kube::Client::try_from(config)?)
}

/// The data of the Secret or ConfigMap a volume names, restricted to its `items`.
async fn volume_files(
    client: &kube::Client,
    volume: &Value,
) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
    let (data, items) = if let Some(source) = volume.get("configMap") {
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
        let map = maps
            .get(source["name"].as_str().unwrap_or_default())
            .await?;
        let data: BTreeMap<String, Vec<u8>> = map
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect();
        (data, &source["items"])
    } else if let Some(source) = volume.get("secret") {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
        let secret = secrets
            .get(source["secretName"].as_str().unwrap_or_default())
            .await?;
        let data: BTreeMap<String, Vec<u8>> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        (data, &source["items"])
    } else if volume.get("emptyDir").is_some() {
        return Ok(None);
    } else {
        bail!("the test cannot mount volume {volume}");
    };
    let Some(items) = items.as_array() else {
        return Ok(Some(data));
    };
    let mut picked = BTreeMap::new();
    for item in items {
        let key = item["key"].as_str().unwrap_or_default();
        let path = item["path"].as_str().unwrap_or(key);
        let value = data
            .get(key)
            .with_context(|| format!("no key {key} in {volume}"))?;
        picked.insert(path.to_owned(), value.clone());
    }
    Ok(Some(picked))
}

/// Lays out what the kubelet would give the first container of `deployment` under `root`: its
/// volumes at their mount paths and the service account's token and CA.
async fn lay_out_pod(
    cluster: &Cluster,
    client: &kube::Client,
    deployment: &Value,
    root: &Path,
) -> Result<()> {
    let spec = &deployment["spec"]["template"]["spec"];
    let container = &spec["containers"][0];
    let volumes = spec["volumes"].as_array().context("no volumes")?;
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let name = mount["name"].as_str().unwrap_or_default();
        let volume = volumes
            .iter()
            .find(|v| v["name"] == name)
            .with_context(|| format!("no volume {name}"))?;
        let dir = root.join(
            mount["mountPath"]
                .as_str()
                .unwrap_or_default()
                .trim_start_matches('/'),
        );
        fs::create_dir_all(&dir)?;
        match volume_files(client, volume).await? {
            Some(files) => {
                for (file, bytes) in files {
                    fs::write(dir.join(file), bytes)?;
                }
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))?;
            }
            // An emptyDir: writable by the container's user.
            None => fs::set_permissions(&dir, fs::Permissions::from_mode(0o777))?,
        }
    }
    let account = spec["serviceAccountName"]
        .as_str()
        .context("no service account")?;
    let token = api_token(client, RELEASE_NAMESPACE, account).await?;
    let secrets = root.join("var/run/secrets/kubernetes.io/serviceaccount");
    fs::create_dir_all(&secrets)?;
    fs::write(secrets.join("token"), token)?;
    fs::copy(cluster.serving_certificates(), secrets.join("ca.crt"))?;
    fs::write(secrets.join("namespace"), RELEASE_NAMESPACE)?;
    for dir in [
        "tmp",
        "var/run",
        "var/run/secrets",
        "var/run/secrets/kubernetes.io",
    ] {
        let dir = root.join(dir);
        fs::create_dir_all(&dir)?;
        let mode = if dir.ends_with("tmp") { 0o1777 } else { 0o755 };
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode))?;
    }
    fs::set_permissions(&secrets, fs::Permissions::from_mode(0o755))?;
    fs::set_permissions(secrets.join("token"), fs::Permissions::from_mode(0o644))?;
    Ok(())
}

#[tokio::test]
async fn helm_install_runs_the_plugin_scheduler_and_it_places_a_gpu_pod() -> Result<()> {
    ensure!(
        Command::new("id")
            .arg("-u")
            .output()?
            .stdout
            .starts_with(b"0"),
        "this scenario chroots the scheduler as its image's user: it needs root"
    );
    let helm = helm_binary().await?;
    let scheduler = plugin::plugin_scheduler().await?;
    let cluster = Cluster::start_control_plane_with_rbac().await?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    for node in ["gpu-a", "gpu-b"] {
        create_gpu_node(&client, node, 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
    }

    // One replica, no election: the scheduler starts scheduling at once.
    let notes = install(
        &helm,
        &cluster,
        &[
            "mode=plugin",
            "replicas=1",
            "leaderElection=false",
            "profiler.enabled=true",
        ],
    )?;
    ensure!(
        notes.contains("spec.schedulerName: tandem-plugin-scheduler"),
        "{notes}"
    );

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    let deployment = serde_json::to_value(deployments.get("tandem-plugin-scheduler").await?)?;
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let root = cluster.dir().join("scheduler-root");
    tandem_xtask::images::unpack_root(&scheduler, "tandem-kube-scheduler", &root)?;
    lay_out_pod(&cluster, &client, &deployment, &root).await?;

    let port = url::port_of(cluster.server_url())?;
    let user = format!(
        "{}:{}",
        container["securityContext"]["runAsUser"], container["securityContext"]["runAsGroup"]
    );
    // The scheduler gets the container's environment only, so no PATH to find chroot with.
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"]
        .into_iter()
        .find(|path| Path::new(path).is_file())
        .context("chroot (Debian's coreutils) is not installed")?;
    let mut run = Command::new(chroot);
    run.arg(format!("--userspec={user}")).arg(&root);
    for part in container["command"].as_array().context("no command")? {
        run.arg(part.as_str().unwrap_or_default());
    }
    run.env_clear()
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", port.to_string());
    for variable in container["env"].as_array().into_iter().flatten() {
        if let Some(value) = variable["value"].as_str() {
            run.env(variable["name"].as_str().unwrap_or_default(), value);
        }
    }
    let mut process = spawn_logged(run, &cluster.dir().join("installed-scheduler.log"))?;

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut pod = extender::job_pod("installed-0", "job-a", None)?;
    pod.spec
        .as_mut()
        .context("a pod has a spec")?
        .scheduler_name = Some("tandem-plugin-scheduler".into());
    pods.create(&PostParams::default(), &pod).await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let node = loop {
        ensure!(
            process.is_running(),
            "the installed scheduler exited:\n{}",
            process.log_tail(40)
        );
        let pod = pods.get("installed-0").await?;
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            let gpu = annotation(&pod).with_context(|| {
                format!("installed-0 was bound to {node} without Tandem's annotation")
            })?;
            ensure!(gpu.starts_with(&format!("{node}/")), "{node} vs {gpu}");
            eprintln!("installed-0: {gpu}");
            break node;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "the installed scheduler bound nothing in 120 s:\n{}",
            process.log_tail(60)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    profilers_post_to_the_installed_intake(&client, &root, &node)
        .await
        .with_context(|| format!("the installed scheduler:\n{}", process.log_tail(40)))?;
    // It ran with the chart's permissions only: the log shows no refusal of its own requests.
    let log = fs::read_to_string(process.log_path())?;
    ensure!(
        !log.contains("is forbidden"),
        "the installed scheduler was refused something:\n{}",
        process.log_tail(60)
    );
    process.terminate(Duration::from_secs(5));
    Ok(())
}

/// The installed intake (the plugin's scheduler, serving on port 8888 of this host) takes a
/// profile of job-a's pod, bound to `node`, from that node's profiler presenting its pod's
/// projected token (what the kubelet would mount from the chart's `serviceAccountToken`
/// volume: a TokenRequest of the profilers' account, audience `tandem-intake`, bound to a
/// profiler pod on `node`), reviewed with the chart's RBAC alone; the profiler of the other
/// node is refused it.
async fn profilers_post_to_the_installed_intake(
    client: &kube::Client,
    root: &Path,
    node: &str,
) -> Result<()> {
    let other = if node == "gpu-a" { "gpu-b" } else { "gpu-a" };
    let keys = tandem_adapter_core::JobKeys::from_file(&root.join("etc/tandem/ids/id-secret"))?;
    let job = keys.key(NAMESPACE, "job-a");
    let body = serde_json::json!({ "profiles": [
        { "job": job, "profile": extender::profile(40.0, 10.0, 3_000) },
    ]});
    let profilers: Api<Pod> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    let http = reqwest::Client::new();
    for (profiler, on, expected) in [("profiler-here", node, 200), ("profiler-there", other, 403)] {
        let pod = profilers
            .create(&PostParams::default(), &poison::pod_on(profiler, on, None)?)
            .await?;
        let token = poison::projected_token(client, &pod).await?;
        // The scheduler's view may learn of the binding a moment after the API server has it:
        // its own node's profiler refused meanwhile is asked again.
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let (status, text) = loop {
            let response = http
                .post("http://127.0.0.1:8888/v1/profiles")
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await
                .context("the installed intake (port 8888) did not answer")?;
            let status = response.status().as_u16();
            let text = response.text().await?;
            let unseen = expected == 200 && status == 403;
            if !unseen || std::time::Instant::now() > deadline {
                break (status, text);
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        println!(
            "(profiler) installed: {on}'s profiler, its projected token, a profile of installed-0 \
             on {node} -> {status} {}",
            text.trim()
        );
        ensure!(
            status == expected,
            "{on}'s profiler posting installed-0's profile was answered {status}, not \
             {expected}: {text}"
        );
        if expected == 403 {
            ensure!(
                text.contains(&format!("job {job} has no pod on node {on}")),
                "{text}"
            );
        }
    }
    Ok(())
}

/// `helm install` of the chart into `cluster` with `values` (it reads the cluster, `lookup`
/// answers); returns the NOTES it printed.
fn install(helm: &Path, cluster: &Cluster, values: &[&str]) -> Result<String> {
    let mut install = Command::new(helm);
    install
        .current_dir(tandem_e2e::root())
        .args([
            "install",
            RELEASE,
            CHART_DIR,
            "--namespace",
            RELEASE_NAMESPACE,
        ])
        .args(["--create-namespace", "--kubeconfig"])
        .arg(cluster.kubeconfig_path());
    for value in values {
        install.args(["--set", value]);
    }
    let installed = install.output()?;
    ensure!(
        installed.status.success(),
        "helm install failed: {}{}",
        String::from_utf8_lossy(&installed.stdout),
        String::from_utf8_lossy(&installed.stderr)
    );
    Ok(String::from_utf8_lossy(&installed.stdout).into_owned())
}

/// The message of an API server's refusal, or why `result` is none.
fn refusal<T>(what: &str, result: kube::Result<T>) -> Result<String> {
    match result {
        Ok(_) => bail!("{what} went through: the API server refused nothing"),
        Err(kube::Error::Api(status)) => Ok(format!("{} {}", status.code, status.message)),
        Err(error) => Err(error).with_context(|| format!("{what} failed, not as a refusal")),
    }
}

#[tokio::test]
async fn once_installed_no_tenant_can_forge_or_change_a_placement() -> Result<()> {
    use tandem_kube_common::placement::{Placement, Signer, Verifier};

    let helm = helm_binary().await?;
    let cluster = Cluster::start_control_plane_with_rbac().await?;
    let client = cluster.client().await?;
    create_gpu_node(&client, "gpu-node-7", 4, "Tesla-V100-SXM2-16GB", 16_384).await?;
    install(
        &helm,
        &cluster,
        &["mode=plugin", "replicas=1", "leaderElection=false"],
    )?;
    tenant_admin(&client, TENANT_NAMESPACE, "tenant").await?;
    let tenant = client_of_account(&cluster, &client, TENANT_NAMESPACE, "tenant").await?;
    let pods: Api<Pod> = Api::namespaced(tenant.clone(), TENANT_NAMESPACE);
    // The policy is compiled and enforced a moment after it is created.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The tenant's forged pod: bound to gpu-node-7 by itself, one GPU requested, all four GPUs
    // named.
    let forged: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "forger", "annotations": {
            "tandem.dev/gpu": "gpu-node-7/0,gpu-node-7/1,gpu-node-7/2,gpu-node-7/3",
            "tandem.dev/gpu-memory-mib": "16384",
        } },
        "spec": {
            "nodeName": "gpu-node-7",
            "containers": [{ "name": "main", "image": "registry.invalid/none",
                "resources": { "limits": { "nvidia.com/gpu": "1" } } }],
        },
    }))?;
    let refused = refusal(
        "the tenant's forged pod",
        pods.create(&PostParams::default(), &forged).await,
    )?;
    println!("(admission) the tenant creating the forged pod: {refused}");
    ensure!(
        refused.contains(REFUSED) && refused.contains("tandem.dev/gpu"),
        "{refused}"
    );

    // Tandem's own account places a pod: the tenant creates it plain, the plugin's scheduler
    // binds it with a placement signed by the installed key, and the pod carries it.
    let mut plain = forged.clone();
    plain.metadata.name = Some("placed".into());
    plain.metadata.annotations = None;
    plain.spec.as_mut().context("a spec")?.node_name = None;
    plain.spec.as_mut().context("a spec")?.scheduler_name = Some("tandem-e2e-placed".into());
    let created = pods.create(&PostParams::default(), &plain).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    let key = secrets
        .get("tandem-placement-key")
        .await?
        .data
        .unwrap_or_default()
        .remove("placement.key")
        .context("the installed Secret has no placement.key")?;
    let signer = Signer::from_pem(&key.0)?;
    let signed = signer.signed(
        &uid,
        Placement::decided(&["gpu-node-7/2".into()], Some(4096))?,
    );
    let scheduler = client_impersonating(
        &cluster,
        "system:serviceaccount:tandem-system:tandem-plugin-scheduler",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:tandem-system",
            "system:authenticated",
        ],
    )
    .await?;
    let binding = |annotations| -> Result<k8s_openapi::api::core::v1::Binding> {
        Ok(serde_json::from_value(serde_json::json!({
            "metadata": { "name": "placed", "uid": uid, "annotations": annotations },
            "target": { "apiVersion": "v1", "kind": "Node", "name": "gpu-node-7" },
        }))?)
    };
    // Another scheduler (kube-scheduler's own identity) may bind, but not with a placement.
    let other: Api<Pod> = Api::namespaced(
        client_impersonating(&cluster, "system:kube-scheduler", &["system:authenticated"]).await?,
        TENANT_NAMESPACE,
    );
    let refused = refusal(
        "kube-scheduler binding with a placement",
        other
            .create_subresource::<_, Value>(
                "binding",
                "placed",
                &PostParams::default(),
                &binding(signed.annotations())?,
            )
            .await,
    )?;
    println!("(admission) another scheduler binding with a placement: {refused}");
    ensure!(refused.contains(REFUSED), "{refused}");
    Api::<Pod>::namespaced(scheduler, TENANT_NAMESPACE)
        .create_subresource::<_, Value>(
            "binding",
            "placed",
            &PostParams::default(),
            &binding(signed.annotations())?,
        )
        .await
        .context("Tandem's scheduler account could not bind with its placement")?;
    let placed = pods.get("placed").await?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    let keys = maps.get("tandem-placement-keys").await?;
    let verifier = Verifier::from_pem(
        keys.data
            .unwrap_or_default()
            .get("placement-keys.pem")
            .context("the installed ConfigMap has no placement-keys.pem")?
            .as_bytes(),
    )?;
    let annotations = placed.metadata.annotations.clone().unwrap_or_default();
    let carried = Placement::read(|key| annotations.get(key).map(String::as_str))?
        .context("the placed pod carries no placement")?;
    ensure!(
        verifier.verify(&uid, &carried) == Ok(signer.key_id()),
        "the placement Tandem's account bound does not verify with the installed public keys"
    );
    println!(
        "(admission) Tandem's scheduler account bound the pod on {}; it verifies with the \
         installed ConfigMap (key {})",
        carried.gpu_list(),
        signer.key_id()
    );

    // The tenant may annotate its running pod, but not change, add or remove the placement.
    let patch = |annotations: Value| {
        Patch::Merge(serde_json::json!({ "metadata": { "annotations": annotations } }))
    };
    pods.patch(
        "placed",
        &PatchParams::default(),
        &patch(serde_json::json!({ "team": "a" })),
    )
    .await
    .context("the tenant could not annotate its own pod")?;
    for (what, annotations) in [
        (
            "claiming every GPU",
            serde_json::json!({ "tandem.dev/gpu": "gpu-node-7/0,gpu-node-7/1,gpu-node-7/2,gpu-node-7/3" }),
        ),
        (
            "raising the reservation",
            serde_json::json!({ "tandem.dev/gpu-memory-mib": "16384" }),
        ),
        (
            "removing the signature",
            serde_json::json!({ "tandem.dev/placement-signature": null }),
        ),
    ] {
        let refused = refusal(
            what,
            pods.patch("placed", &PatchParams::default(), &patch(annotations))
                .await,
        )?;
        println!("(admission) the tenant patching its running pod, {what}: {refused}");
        ensure!(refused.contains(REFUSED), "{what}: {refused}");
    }

    // In a namespace labelled for it, a GPU pod may not name its node at creation.
    let guarded = "team-b";
    tenant_admin(&client, guarded, "tenant").await?;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .patch(
            guarded,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": {
                "tandem.dev/gpu-pods": "scheduled" } } })),
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let guarded_pods: Api<Pod> = Api::namespaced(
        client_of_account(&cluster, &client, guarded, "tenant").await?,
        guarded,
    );
    let mut bound = forged.clone();
    bound.metadata.annotations = None;
    let refused = refusal(
        "a GPU pod naming its node",
        guarded_pods.create(&PostParams::default(), &bound).await,
    )?;
    println!("(admission) in {guarded}, a GPU pod naming its node: {refused}");
    ensure!(refused.contains("may not set spec.nodeName"), "{refused}");
    let mut cpu = bound.clone();
    cpu.spec.as_mut().context("a spec")?.containers[0].resources = None;
    guarded_pods
        .create(&PostParams::default(), &cpu)
        .await
        .context("a pod requesting no GPU could not name its node")?;
    Ok(())
}

/// Reading the apiserver's port out of its URL.
mod url {
    use anyhow::{Context as _, Result};

    pub(super) fn port_of(url: &str) -> Result<u16> {
        url.rsplit_once(':')
            .and_then(|(_, port)| port.trim_end_matches('/').parse().ok())
            .with_context(|| format!("no port in {url}"))
    }
}
