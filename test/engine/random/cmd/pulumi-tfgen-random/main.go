// Command pulumi-tfgen-random generates the Pulumi schema (schema.json) and
// the bridge metadata (bridge-metadata.json) for the bridged random provider:
//
//	RANDOM_UPSTREAM_DIR=<module dir of the Terraform provider> \
//	  pulumi-tfgen-random schema --skip-examples --out DIR
//
// RANDOM_UPSTREAM_DIR (optional) is where tfgen reads the upstream docs/ for
// descriptions; without it tfgen would run `go mod download` for
// github.com/hashicorp/terraform-provider-random in a ./provider directory.
package main

import (
	"os"

	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfgen"

	"github.com/terraform-providers/terraform-provider-random/shim"
)

var version = "0.0.0-dev" // set with -ldflags -X main.version=...

func main() {
	info := shim.Provider(version, nil)
	info.UpstreamRepoPath = os.Getenv("RANDOM_UPSTREAM_DIR")
	tfgen.Main("random", info)
}
