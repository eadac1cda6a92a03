/**
 * The Pi versions the shim is tested on (as tests/plugins/pi_versions.py for the Python suite):
 * Pi 0.73.1 from the root node_modules (the machine's Node) and Pi 1.x from pi1/node_modules, run
 * with the Node 22 of npm's `node` package first on PATH. `PI_BIN` / `PI1_BIN` override them; a
 * missing one makes its tests skip with the reason.
 */
import { accessSync, constants, existsSync, readFileSync, realpathSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PI_PACKAGES = ["@mariozechner/pi-coding-agent", "@earendil-works/pi-coding-agent"];

export interface PiUnderTest {
	/** "0.x" or "1.x" */
	line: string;
	/** The installed version (package.json), or the pinned one when it is missing. */
	version: string;
	bin: string;
	/** Why it cannot run here; undefined when it can. */
	missing: string | undefined;
	/** The environment for the Pi process: its Node first on PATH (Pi 1.x). */
	env(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
}

function executable(path: string): boolean {
	try {
		accessSync(path, constants.X_OK);
		return true;
	} catch {
		return false;
	}
}

function installedVersion(bin: string): string | undefined {
	let folder = dirname(realpathSync(bin));
	for (;;) {
		const manifest = join(folder, "package.json");
		if (existsSync(manifest)) {
			const data = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version?: string };
			return data.name !== undefined && PI_PACKAGES.includes(data.name) ? data.version : undefined;
		}
		const parent = dirname(folder);
		if (parent === folder) return undefined;
		folder = parent;
	}
}

function pinned(manifest: string, name: string, fallback: string): string {
	try {
		const data = JSON.parse(readFileSync(manifest, "utf8")) as Record<string, Record<string, string> | undefined>;
		return data.dependencies?.[name] ?? data.devDependencies?.[name] ?? fallback;
	} catch {
		return fallback;
	}
}

function discover(line: string, envVar: string, defaultBin: string, manifest: string, name: string, nodeDir?: string): PiUnderTest {
	const configured = process.env[envVar];
	const bin = configured !== undefined && configured !== "" ? configured : defaultBin;
	const found = existsSync(bin) && executable(bin);
	const missing = found
		? undefined
		: configured
			? `$${envVar}=${configured} is not an executable file`
			: `no Pi ${line}: set $${envVar} or run \`make install\` (looked for ${bin})`;
	const version = (found ? installedVersion(bin) : undefined) ?? pinned(manifest, name, line);
	const node = nodeDir !== undefined && existsSync(join(nodeDir, "node")) ? nodeDir : undefined;
	return {
		line,
		version,
		bin,
		missing,
		env: (env) => (node === undefined ? { ...env } : { ...env, PATH: [node, env.PATH ?? ""].join(delimiter) }),
	};
}

export const PIS: PiUnderTest[] = [
	discover("0.x", "PI_BIN", join(ROOT, "node_modules", ".bin", "pi"), join(ROOT, "package.json"), PI_PACKAGES[0] ?? ""),
	discover(
		"1.x",
		"PI1_BIN",
		join(ROOT, "pi1", "node_modules", ".bin", "pi"),
		join(ROOT, "pi1", "package.json"),
		PI_PACKAGES[1] ?? "",
		join(ROOT, "pi1", "node_modules", "node", "bin"),
	),
];
