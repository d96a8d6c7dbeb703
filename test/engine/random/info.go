// Package shim bridges the upstream Terraform random provider (a
// terraform-plugin-framework provider) to Pulumi with the plugin-framework
// bridge of pulumi-terraform-bridge. It is the test fixture's own glue: it
// produces the package "random" with the tokens and property names that the
// npm SDK @pulumi/random uses (random:index/randomPassword:RandomPassword,
// length, special, result as a secret, ...).
package shim

import (
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfbridge"
	sdkbridge "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge/tokens"

	"github.com/terraform-providers/terraform-provider-random/internal/provider"
)

// Provider returns the bridge's ProviderInfo for version, with the bridge
// metadata that tfgen wrote (bridgeMetadata may be nil when running tfgen).
func Provider(version string, bridgeMetadata []byte) sdkbridge.ProviderInfo {
	prov := sdkbridge.ProviderInfo{
		P:            tfbridge.ShimProvider(provider.New()),
		Name:         "random",
		Version:      version,
		DisplayName:  "random",
		Description:  "A Pulumi package to safely use randomness in Pulumi programs.",
		Keywords:     []string{"pulumi", "random"},
		License:      "Apache-2.0",
		Homepage:     "https://pulumi.io",
		Repository:   "https://github.com/pulumi/pulumi-random",
		Publisher:    "Pulumi",
		GitHubOrg:    "hashicorp",
		MetadataInfo: sdkbridge.NewProviderMetadata(bridgeMetadata),
	}
	// Every Terraform type name keeps its "random_" prefix in the Pulumi name
	// and lives in the index module: random_password ->
	// random:index/randomPassword:RandomPassword, random_uuid4 ->
	// random:index/randomUuid4:RandomUuid4. Property names are the bridge's
	// default camelCase of the Terraform attributes (min_lower -> minLower);
	// attributes marked sensitive upstream (result, bcrypt_hash, ...) become
	// secrets.
	prov.MustComputeTokens(tokens.SingleModule("", "index", tokens.MakeStandard("random")))
	return prov
}
