// Command pulumi-resource-kubernetes is the Pulumi Kubernetes provider built
// from the Go module github.com/pulumi/pulumi-kubernetes/provider/v4.
//
// The provider's own cmd/pulumi-resource-kubernetes cannot be built from the
// module zip: it embeds schema-embed.json and terraform-mapping-embed.json,
// which its `go generate` step writes and which are not in the zip. This main
// does the same thing as the upstream one. test/engine/build.sh copies this
// module to a temp dir and writes the two embedded files there first, from the
// schema.json and terraform-mapping.json that ARE in the module zip (the full,
// real provider schema, with "version" set to the version being built, exactly
// what upstream's generate.go does). The files are never committed.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	// version.Version is set with -ldflags -X (the version the npm SDK
	// @pulumi/kubernetes asks the engine for).
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
