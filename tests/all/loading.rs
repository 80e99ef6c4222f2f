//! Which files the host accepts as an engine, and what it says about the others.

use tandem_api::WIT_VERSION;
use tandem_host::{Error, HostConfig, Runtime, SUPPORTED_WIT_VERSIONS};
use tandem_tests::components;

fn load_wat(text: &str) -> Result<Runtime, Error> {
    let bytes = wat::parse_str(text).expect("test WAT is valid");
    Runtime::from_bytes(&bytes, HostConfig::default())
}

#[test]
fn the_engine_component_loads_and_reports_its_versions() {
    let runtime = super::engine_runtime();
    assert_eq!(runtime.wit_version(), WIT_VERSION);
    assert!(SUPPORTED_WIT_VERSIONS.contains(&runtime.wit_version()));
    assert_eq!(runtime.engine_version().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn bytes_that_are_not_wasm_are_rejected() {
    let err = Runtime::from_bytes(b"#!/bin/sh\necho hello\n", HostConfig::default()).unwrap_err();
    assert!(matches!(err, Error::NotWasm), "{err}");
}

#[test]
fn a_core_module_is_rejected_with_a_hint() {
    let err = load_wat("(module (func (export \"recommend\")))").unwrap_err();
    assert!(matches!(err, Error::CoreModule), "{err}");
    assert!(err.to_string().contains("cargo xtask component"), "{err}");
}

#[test]
fn another_wit_version_is_rejected_naming_both_versions() {
    let err = load_wat(
        r#"(component (instance $i) (export "tandem:engine/engine@9.9.9" (instance $i)))"#,
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedVersion { found, .. } if found == "9.9.9"),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("tandem:engine@9.9.9") && message.contains(WIT_VERSION),
        "{message}"
    );
}

#[test]
fn components_of_earlier_contracts_are_rejected_naming_the_supported_one() {
    // 0.2.0 added calls (estimate, observe-memory, observe-speed), 0.3.0 fields
    // (estimate.utilization-pct, policy.model-caps), 0.4.0 the cluster view (update-cluster,
    // score-all, explain, choose-gpu), 0.5.0 forget-stalest; an older engine cannot serve
    // this host, and the host says so instead of failing a call later.
    for old in ["0.1.0", "0.2.0", "0.3.0", "0.4.0"] {
        let err = load_wat(&format!(
            r#"(component (instance $i) (export "tandem:engine/engine@{old}" (instance $i)))"#
        ))
        .unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedVersion { found, .. } if found == old),
            "{err}"
        );
        assert!(err.to_string().contains(WIT_VERSION), "{err}");
    }
}

#[test]
fn a_component_of_another_world_is_rejected_listing_its_exports() {
    let err =
        load_wat(r#"(component (instance $i) (export "acme:thing/api@1.0.0" (instance $i)))"#)
            .unwrap_err();
    assert!(matches!(err, Error::NotAnEngine { .. }), "{err}");
    assert!(err.to_string().contains("acme:thing/api@1.0.0"), "{err}");
}

#[test]
fn a_component_importing_wasi_is_rejected() {
    let err = load_wat(
        r#"(component
             (import "wasi:cli/environment@0.2.0" (instance))
             (instance $i)
             (export "tandem:engine/engine@0.5.0" (instance $i)))"#,
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::ForbiddenImport { name } if name == "wasi:cli/environment@0.2.0"),
        "{err}"
    );
}

#[test]
fn a_component_with_the_right_name_but_the_wrong_shape_fails_the_type_check() {
    let err = load_wat(
        r#"(component (instance $i) (export "tandem:engine/engine@0.5.0" (instance $i)))"#,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Wasmtime {
                action: "type-check",
                ..
            }
        ),
        "{err}"
    );
}

/// One constant names the contract: `tandem_api::WIT_VERSION`. Every binding generator reads
/// `wit/current`, which must point at that version's frozen directory, and that directory's
/// package line must carry the same version.
#[test]
fn wit_current_is_the_version_the_api_mirrors() {
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let target = std::fs::read_link(wit.join("current")).expect("wit/current is a link");
    assert_eq!(target, std::path::Path::new(&format!("v{WIT_VERSION}")));
    let text = std::fs::read_to_string(wit.join("current/engine.wit")).unwrap();
    assert!(
        text.contains(&format!("package tandem:engine@{WIT_VERSION};")),
        "wit/current/engine.wit does not declare {WIT_VERSION}"
    );
}

#[test]
fn a_compiled_engine_is_kept_loaded_again_and_compiled_anew_when_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let config = HostConfig {
        compiled_cache: Some(dir.path().join("compiled")),
        ..HostConfig::default()
    };
    let load = || Runtime::from_file(components::ENGINE.as_ref(), config.clone()).unwrap();
    let first = load();
    assert!(!first.compiled_from_cache(), "nothing was compiled before");
    let again = load();
    assert!(
        again.compiled_from_cache(),
        "the second start compiles nothing"
    );
    assert_eq!(again.engine_version().unwrap(), env!("CARGO_PKG_VERSION"));

    // Every kept file overwritten: the start compiles again instead of failing or loading junk.
    let mut damaged = 0;
    for entry in walk(dir.path()) {
        std::fs::write(&entry, b"not a compiled component").unwrap();
        damaged += 1;
    }
    assert!(damaged > 0, "the cache kept no file");
    let recompiled = load();
    assert!(!recompiled.compiled_from_cache());
    assert_eq!(
        recompiled.engine_version().unwrap(),
        env!("CARGO_PKG_VERSION")
    );
}

/// Every file under `dir`, however deep.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
