//! The example runs, as a user runs it, and prints placements.

use std::process::Command;

#[test]
fn the_example_embeds_the_engine_and_prints_a_placement() {
    let output = Command::new(env!("CARGO_BIN_EXE_tandem-example-embedding"))
        .output()
        .expect("the example starts");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(printed.contains("after one measured outcome:"), "{printed}");
    let placements = printed.matches("  placed ").count();
    assert!(placements >= 2, "{printed}");
}
