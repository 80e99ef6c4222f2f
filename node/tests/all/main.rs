//! Integration tests of `tandem-node`: the NRI session against a runtime played by the test,
//! and the pods' specs against an API server played by the test.

mod pods;
mod session;
