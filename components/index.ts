/** The component library: use these from your own Pulumi program. */
export * from "./config";
export * from "./platform";
export { ENV_CATALOG, CATALOG_NAMES, type CatalogEntry, type CatalogName } from "./env/catalog";
