/**
 * Config fixtures shared by the tests. The images no default can stand for (the trainer's, which
 * holds the user's script, and the agent-sandbox pool's) are required by the config; tests that
 * are not about them parse through `parseWithTestImages`, which fills them in where absent.
 */
import {
    ConfigError,
    deepMerge,
    DOCKER_BLACKBOX_REFUSED,
    HOSTED_BLACKBOX_REFUSED,
    parsePlatformConfig,
    platformSchema,
    RECIPES,
    resolveDefaults,
    validatePlatform,
    type PlatformConfig,
    type RecipeName,
} from "../../components/config";
import { RECIPE_PLAN_REGISTRY, RECIPE_PLAN_TASK_IMAGES } from "../../scripts/lib/plan";

/** Placeholder images the tests use (never pulled). */
export const TEST_IMAGES = {
    trainer: "registry.test/agent-rl/trainer:test",
    sandbox: "registry.test/agent-rl/opencode-sandbox:test",
} as const;

/**
 * Placeholder Harbor task images (never pulled): a Harbor recipe's tasks are the stack's (harbor.taskImages); the
 * recipe plan's own (scripts/lib/plan.ts recipePlatform), so a parsed recipe and a planned one name the same pools.
 */
export const TEST_TASK_IMAGES = RECIPE_PLAN_TASK_IMAGES.map((t) => `${RECIPE_PLAN_REGISTRY}/${t}:plan`);

/** `raw` with images.trainer and sandboxes.image filled in where it sets none, and a Harbor recipe's task images. */
export function withTestImages(raw: unknown): unknown {
    // A raw config's recipe may be anything (the fuzz tests): only a known recipe's name is looked up.
    const recipe: unknown = (raw as { recipe?: unknown } | null)?.recipe;
    const harbor =
        typeof recipe === "string" && Object.hasOwn(RECIPES, recipe) && (RECIPES as Record<string, { harbor?: unknown }>)[recipe].harbor !== undefined;
    const tasks = harbor ? { harbor: { taskImages: TEST_TASK_IMAGES.map((image) => ({ image })) } } : {};
    return deepMerge({ images: { trainer: TEST_IMAGES.trainer }, sandboxes: { image: TEST_IMAGES.sandbox }, ...tasks }, raw);
}

/** parsePlatformConfig of `raw` with the test images filled in. */
export function parseWithTestImages(raw: unknown, stack: string): PlatformConfig {
    return parsePlatformConfig(withTestImages(raw), stack);
}

/** The problems of the ConfigError `f` throws, or [] when it returns; any other error is rethrown. */
export function configProblems(f: () => unknown): string[] {
    try {
        f();
        return [];
    } catch (e) {
        if (e instanceof ConfigError) return [...e.problems];
        throw e;
    }
}

/**
 * Hosted (hf) sandboxes on Docker, with the ingress settings they once needed. The config refuses hf for the black box
 * (HOSTED_BLACKBOX_REFUSED), as it refuses the docker sandbox pool (DOCKER_BLACKBOX_REFUSED), and nothing of either is
 * rendered: no stack runs a black box on Docker. Only for the tests that check those refusals, and for parseHostedConfig.
 */
export const HOSTED_SANDBOXES_ON_DOCKER = {
    sandboxes: { provider: "hf" },
    ingress: {
        exposure: "loadbalancer",
        host: "vllm.example.com",
        tls: { mode: "files", certFile: "/etc/tls/cert.pem", keyFile: "/etc/tls/key.pem", publiclyTrusted: true },
    },
} as const;

/**
 * A black-box config on hosted (hf) sandboxes, which the config refuses (HOSTED_BLACKBOX_REFUSED): images filled in,
 * recipe applied, schema-parsed and defaulted, every other check applied. The Platform refuses it as well
 * (resolvePlatform: refusedProviderProblems) and the provider renders nothing, so it builds no stack: only for the tests
 * of the refusal itself (the provider table, the Platform's refusal, the secret keys such a stack would read).
 */
export function parseHostedConfig(raw: unknown, stack: string): PlatformConfig {
    return parseRefusedConfig(
        raw,
        stack,
        HOSTED_BLACKBOX_REFUSED,
        (c) => c.sandboxes.provider === "hf" && c.training.layout === "blackbox",
        "parseHostedConfig: not a hosted black-box config",
    );
}

/** Recipe applied, schema-parsed and defaulted, every check applied but the one `refusal` (the config must be `isRefused`'s kind). */
function parseRefusedConfig(raw: unknown, stack: string, refusal: string, isRefused: (c: PlatformConfig) => boolean, notRefused: string): PlatformConfig {
    const withImages = withTestImages(raw) as Record<string, unknown>;
    const { description: _description, ...preset } = RECIPES[withImages.recipe as RecipeName];
    const config = resolveDefaults(platformSchema.parse(deepMerge(preset, withImages)), stack);
    if (!isRefused(config)) throw new Error(notRefused);
    const others = validatePlatform(config).filter((p) => p !== refusal);
    if (others.length > 0) throw new ConfigError(others);
    return config;
}

/**
 * A Docker black-box config on the docker sandbox pool, which the config refuses (DOCKER_BLACKBOX_REFUSED): recipe
 * applied, schema-parsed and defaulted, every other check applied. The Platform refuses it as well and the provider renders
 * nothing. Only for the refusal tests, and for the component-level tests of the Docker code a program may still call
 * alone (VllmIngress's Docker renderer, TrainingNode's Docker black box): never to resolve a Platform.
 */
export function parseDockerPoolConfig(raw: Record<string, unknown>, stack: string): PlatformConfig {
    return parseRefusedConfig(
        raw,
        stack,
        DOCKER_BLACKBOX_REFUSED,
        (c) => c.target.kind === "docker" && c.sandboxes.provider === "docker",
        "parseDockerPoolConfig: not a docker-pool config",
    );
}
