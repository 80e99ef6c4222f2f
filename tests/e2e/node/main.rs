//! The node tier: real nodes (containerd with NRI, runc, the kubelet; fake GPUs) with
//! `tandem-node` on each, and pods that really run there, placed by each scheduler path:
//! kube-scheduler with the framework plugin or the extender ([`kube_scheduler`]), and Volcano's
//! vc-scheduler ([`vc_scheduler`]).

mod kube_scheduler;
mod vc_scheduler;

use tandem_e2e::{cluster, extender, plugin, volcano};
