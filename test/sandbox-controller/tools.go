//go:build tools

// Package tools pins the agent-sandbox controller that build.sh builds
// (sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller at v1.0.1, the
// version whose CRDs test/apiserver installs). This file is never compiled; it
// only keeps the module graph in go.mod/go.sum.
package tools

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
