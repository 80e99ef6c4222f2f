//! Integration tests of `tandem-node`: the NRI session against a runtime played by the test,
//! the pods' specs against an API server played by the test, and the binary's refusals to
//! start.

mod cli;
mod pods;
mod session;
