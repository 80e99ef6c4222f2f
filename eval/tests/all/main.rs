//! Tests of `tandem-eval` against the real engine component.

mod component;
