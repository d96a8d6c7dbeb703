//go:build tools

// Package tools pins the program that test/node/build.sh builds: kubelet from
// k8s.io/kubernetes v1.36.3, the same module version as the API server fixture
// (test/apiserver/go.mod). This file is never compiled; it only keeps the module in go.mod/go.sum.
// gpu-standin/ (the stand-in device plugin) is the module's other program: it imports
// k8s.io/kubelet and google.golang.org/grpc at the versions this graph already pins.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
