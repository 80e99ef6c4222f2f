//! Integration tests of `tandem-node`: the NRI session against a runtime played by the test.

mod session;
