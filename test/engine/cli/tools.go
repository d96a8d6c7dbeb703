//go:build tools

// Package tools pins the Pulumi CLI that test/engine/build.sh builds
// (github.com/pulumi/pulumi/pkg/v3/cmd/pulumi at v3.274.1). This file is never
// compiled; it only keeps the module graph in go.mod/go.sum.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
