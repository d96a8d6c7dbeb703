//go:build tools

// Package tools pins the JobSet controller that build.sh builds
// (sigs.k8s.io/jobset at v0.12.0, whose main package is the module root; the
// version whose CRD test/apiserver installs). This file is never compiled; it
// only keeps the module graph in go.mod/go.sum.
package tools

import _ "sigs.k8s.io/jobset"
