//! Scenarios the extender's tier and the framework plugin's tier both pass, each run against a
//! real kube-scheduler: declared models ([`declaring`]), forged placements ([`placement`]),
//! profiles from the node profiler ([`profiler`]) and poisoned intake ([`poison`]).

pub mod declaring;
pub mod placement;
pub mod poison;
pub mod profiler;
