// The agent-rl-infra policy pack (see README.md): advisory everywhere by default; prod runs it
// with --policy-pack-config policy/config.prod.json, which makes every policy mandatory.
import { PolicyPack } from "@pulumi/policy";
import { PACK_ENFORCEMENT, policies } from "./policies";

new PolicyPack("agent-rl-infra", { enforcementLevel: PACK_ENFORCEMENT, policies });
