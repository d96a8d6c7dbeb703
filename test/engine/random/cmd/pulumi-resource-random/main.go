// Command pulumi-resource-random is the bridged random provider plugin.
//
// schema-embed.json and bridge-metadata.json are written by
// test/engine/build.sh into a temp copy of this module before it is built
// (pulumi-tfgen-random's output, with the schema's "version" set); they are
// never committed.
package main

import (
	"context"
	_ "embed"

	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfbridge"

	"github.com/terraform-providers/terraform-provider-random/shim"
)

var version = "0.0.0-dev" // set with -ldflags -X main.version=...

//go:embed schema-embed.json
var schema []byte

//go:embed bridge-metadata.json
var bridgeMetadata []byte

func main() {
	ctx := context.Background()
	tfbridge.Main(ctx, "random", shim.Provider(version, bridgeMetadata),
		tfbridge.ProviderMetadata{PackageSchema: schema})
}
