//go:build tools

// Package tools pins kube-controller-manager and kube-scheduler from the same
// k8s.io/kubernetes v1.36.3 as test/apiserver's kube-apiserver. This module
// starts as a copy of test/apiserver/go.mod (same requires, same replace lines
// for the staging modules) and also keeps etcd v3.6.8 in its graph, so every
// shared dependency resolves to exactly the version the API server fixture
// uses and the Go build cache is shared. It is a separate module because
// test/apiserver's go.sum only covers the packages kube-apiserver and kubectl
// import (kube-controller-manager also needs e.g. github.com/opencontainers/cgroups).
// This file is never compiled.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
