//go:build tools

// Package tools pins the program that test/node/build.sh builds: kubelet from
// k8s.io/kubernetes v1.36.3, the same module version as the API server fixture
// (test/apiserver/go.mod). This file is never compiled; it only keeps the module in go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
