//! One module per `tandem` command: its clap arguments, its `execute`, and the table it prints
//! (the shape of wasmtime's `src/commands/`). The crate root only parses and dispatches.

pub(crate) mod declare;
pub(crate) mod eval;
pub(crate) mod kb;
pub(crate) mod predict;
pub(crate) mod recommend;
pub(crate) mod simulate;
pub(crate) mod trace;
