//! The engine component's bindings (`engine/component/src/bindings.rs`) are generated from
//! `wit/current` ahead of time,
//! by wit-bindgen's generator with the options of its `generate!` macro, and checked in: the
//! guest is built by a second compiler (docs/DEVELOPING.md, "The wasm32 toolchain"), which
//! would otherwise build the macro and its WIT and wasm parsers once more for itself on every
//! fresh machine. This test generates them again and fails if the file differs.

use std::path::Path;

use wit_bindgen_core::wit_parser::Resolve;
use wit_bindgen_core::{Files, WorldGenerator as _};
use wit_bindgen_rust::Opts;

/// Where the bindings are checked in, from this crate's root.
const BINDINGS: &str = "../engine/component/src/bindings.rs";
/// The WIT package, from this crate's root, and the world the component implements.
const WIT: &str = "../wit/current";
const WORLD: &str = "plugin";

/// What wit-bindgen generates for the world: the code its `generate!` macro expands to,
/// formatted (`prettyplease`, with `#[rustfmt::skip]` on every module it emits).
fn generate() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_path(root.join(WIT))
        .expect("wit/current parses");
    let world = resolve
        .select_world(&[package], Some(WORLD))
        .expect("the plugin world exists");
    let mut files = Files::default();
    Opts {
        format: true,
        ..Opts::default()
    }
    .build()
    .generate(&mut resolve, world, &mut files)
    .expect("wit-bindgen generates the world");
    let (_, source) = files.iter().next().expect("one file generated");
    let source = std::str::from_utf8(source).expect("generated Rust is UTF-8");
    format!(
        "// The world `{WORLD}` of wit/current. Regenerate with\n\
         // TANDEM_BLESS=1 cargo test -p tandem-xtask --test bindings\n\
         {source}"
    )
}

#[test]
fn the_checked_in_bindings_are_what_wit_bindgen_generates_from_the_wit() {
    let generated = generate();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(BINDINGS);
    if std::env::var_os("TANDEM_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("writes the bindings");
    }
    let checked_in = std::fs::read_to_string(&path).expect("reads the bindings");
    assert!(
        checked_in == generated,
        "{BINDINGS} is stale (wit/current or wit-bindgen changed); regenerate it with \
         TANDEM_BLESS=1 cargo test -p tandem-xtask --test bindings"
    );
}
