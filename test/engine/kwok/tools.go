//go:build tools

// Package tools pins kwok (sigs.k8s.io/kwok/cmd/kwok at v0.8.0), which
// test/engine/build.sh builds. kwok's go.mod has no replace lines, so this
// wrapper builds exactly what `go install sigs.k8s.io/kwok/cmd/kwok@v0.8.0`
// builds, with go.sum checked in. This file is never compiled.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
