//go:build tools

// Package tools pins the programs that test/node/build.sh builds from k8s.io/kubernetes v1.36.3,
// the same module version as the API server fixture (test/apiserver/go.mod): the kubelet,
// kube-proxy, and the controller-manager and scheduler the node runs beside its API server.
// This file is never compiled; it only keeps the module in go.mod/go.sum.
// gpu-standin/ (the stand-in device plugin) is the module's other program: it imports
// k8s.io/kubelet and google.golang.org/grpc at the versions this graph already pins.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
