//go:build tools

// Package tools names the programs this module builds, so that `go mod tidy` keeps their
// requirements (and go.sum lines). The build tag keeps it out of every build: the imports are
// main packages, which cannot really be imported.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
