//go:build tools

// Package tools pins the programs that test/apiserver/build.sh builds:
// kube-apiserver and kubectl from k8s.io/kubernetes v1.36.3 and etcd v3.6.8
// (the etcd version that k8s.io/kubernetes v1.36.3 itself requires).
// This file is never compiled; it only keeps the modules in go.mod/go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
