export { ClusterBase, teamQuota, type ClusterBaseArgs } from "./cluster-base";
