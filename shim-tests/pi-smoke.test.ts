/**
 * The shim inside the real Pi binaries (0.73.1 in node_modules, 1.x in pi1/node_modules: every test
 * runs on each, helpers/pis.ts), with the fake sidecar (fixtures/fake-sidecar.mjs) and a fake
 * OpenAI-compatible model, all offline.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { type FakeModel, type Json, messageText, REPLY_TEXT, startFakeModel, TOOL_PROMPT } from "./helpers/fake-model.ts";
import { PIS, type PiUnderTest } from "./helpers/pis.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SHIM_DIR = join(ROOT, "src", "pi_hindsight", "shim");
const FAKE_SIDECAR = join(ROOT, "shim-tests", "fixtures", "fake-sidecar.mjs");
const SHIM_VERSION = (JSON.parse(readFileSync(join(SHIM_DIR, "package.json"), "utf8")) as { version: string }).version;
const MEMORY = 'Remembered: the user likes "tabs"\nand\tnewlines ☃ \u2028 end';

/** Another extension starting a run with its own message, as subagent or scheduler extensions do. */
const TRIGGER_EXTENSION = `
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
export default function (pi: ExtensionAPI) {
	pi.registerCommand("trigger", { description: "t", handler: async (_args, ctx) => {
		pi.sendMessage({ customType: "other-ext", content: "custom trigger", display: true }, { triggerTurn: true });
		await ctx.waitForIdle(); // print mode would otherwise exit before the run it started
	} });
}
`;

interface Setup {
	pi: PiUnderTest;
	agentDir: string;
	cwd: string;
	sidecarLog: string;
}

// One folder per Pi version for this file, emptied for each test: the shim's files keep their
// paths from test to test, so Pi's TypeScript loader (jiti, whose cache is keyed by the file's
// path) compiles them once per version instead of once per test, about a second of CPU each.
const RUN_DIR = mkdtempSync(join(tmpdir(), "shim-pi-"));
process.on("exit", () => rmSync(RUN_DIR, { recursive: true, force: true }));

function freshBase(pi: PiUnderTest): string {
	const base = join(RUN_DIR, pi.version);
	rmSync(base, { recursive: true, force: true });
	mkdirSync(base);
	return base;
}

/** The shim's files copied into `folder` (a package folder or an extensions/ folder), with its entry folder. */
function copyShim(folder: string, from: string = SHIM_DIR): void {
	mkdirSync(folder, { recursive: true });
	for (const entry of readdirSync(from, { withFileTypes: true })) {
		if (entry.isDirectory()) copyShim(join(folder, entry.name), join(from, entry.name));
		else if (entry.name.endsWith(".ts") || entry.name === "package.json") copyFileSync(join(from, entry.name), join(folder, entry.name));
	}
}

/** A fresh agent dir with the provider config and the extension installed as `pi-hindsight setup` would (the copy form). */
function setUp(pi: PiUnderTest, model: FakeModel, python: string = process.execPath): Setup {
	const base = freshBase(pi);
	const agentDir = join(base, "agent");
	const extDir = join(agentDir, "extensions", "pi-hindsight");
	const cwd = join(base, "project");
	copyShim(extDir);
	mkdirSync(cwd);
	writeFileSync(join(extDir, "sidecar.json"), JSON.stringify({ python, args: [FAKE_SIDECAR] }));
	const provider = {
		baseUrl: `http://127.0.0.1:${model.port}/v1`,
		api: "openai-completions",
		apiKey: "x",
		compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
		models: [{ id: "local-model", contextWindow: 32000, maxTokens: 1024 }],
	};
	writeFileSync(join(agentDir, "models.json"), JSON.stringify({ providers: { local: provider } }));
	writeFileSync(join(agentDir, "settings.json"), JSON.stringify({ defaultProvider: "local", defaultModel: "local-model" }));
	return { pi, agentDir, cwd, sidecarLog: join(base, "sidecar.jsonl") };
}

interface PiRun {
	code: number | null;
	stdout: string;
	stderr: string;
	ms: number;
}

function piEnv(setup: Setup, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
	const env: NodeJS.ProcessEnv = { ...process.env, PI_CODING_AGENT_DIR: setup.agentDir, PI_OFFLINE: "1", FAKE_SIDECAR_LOG: setup.sidecarLog, ...extra };
	delete env.PI_HINDSIGHT_PYTHON;
	delete env.PI_HINDSIGHT_STATE_DIR;
	return setup.pi.env(env);
}

function runPi(setup: Setup, args: string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<PiRun> {
	const started = Date.now();
	const child = spawn(setup.pi.bin, args, { cwd: setup.cwd, env: piEnv(setup, extraEnv), stdio: ["ignore", "pipe", "pipe"] });
	let stdout = "";
	let stderr = "";
	child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
	child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => {
			child.kill("SIGKILL");
			reject(new Error(`pi did not exit within 30 s\nstdout: ${stdout}\nstderr: ${stderr}`));
		}, 30_000);
		child.on("close", (code) => {
			clearTimeout(timer);
			resolve({ code, stdout, stderr, ms: Date.now() - started });
		});
	});
}

type Logged = { event?: string; pid?: number; method?: string; id?: number; params?: Json };

function sidecarLog(setup: Setup): Logged[] {
	if (!existsSync(setup.sidecarLog)) return [];
	return readFileSync(setup.sidecarLog, "utf8")
		.split("\n")
		.filter((line) => line !== "")
		.map((line) => JSON.parse(line) as Logged);
}

function assertGone(pid: number | undefined): void {
	assert.ok(pid !== undefined, "the fake sidecar logged its pid");
	assert.throws(() => process.kill(pid, 0), /ESRCH/, "the sidecar is not left running");
}

for (const pi of PIS) describe(`pi ${pi.version} with the shim`, { timeout: 300_000, skip: pi.missing ?? false }, () => {
	let model: FakeModel;
	before(async () => {
		model = await startFakeModel();
	});
	after(async () => {
		await model.close();
		rmSync(join(RUN_DIR, pi.version), { recursive: true, force: true });
	});

	it("places the memory right after the user message, confirms delivery and exits promptly", async () => {
		const setup = setUp(pi, model);
		const first = model.requests.length;
		const run = await runPi(setup, ["-p", "hello"]);
		assert.equal(run.code, 0, run.stderr);
		assert.equal(run.stdout.trim(), REPLY_TEXT);
		assert.ok(run.ms < 15_000, `pi took ${run.ms} ms`);

		const requests = model.requests.slice(first);
		assert.equal(requests.length, 1);
		const messages = (requests[0]?.messages ?? []) as Json[];
		const userIndex = messages.findIndex((m) => m.role === "user" && messageText(m) === "hello");
		assert.ok(userIndex >= 0, "the user message was sent");
		const next = messages[userIndex + 1];
		assert.equal(next?.role, "user", "the memory message is sent as a user-role message");
		assert.equal(messageText(next), MEMORY, "…right after the user message, verbatim");

		const log = sidecarLog(setup);
		const methods = log.map((m) => m.method ?? m.event);
		assert.deepEqual(methods, ["started", "initialize", "prepareMemory", "memoryAttached", "confirmDelivery", "turnCompleted", "shutdown"]);
		const byMethod = (method: string): Json => log.find((m) => m.method === method)?.params ?? {};
		const init = byMethod("initialize");
		assert.equal(init.protocolVersion, 1);
		assert.equal(init.cwd, setup.cwd);
		assert.equal(init.hasUI, false);
		assert.equal(init.reason, "startup");
		assert.equal(init.piVersion, pi.version);
		assert.equal(init.shimVersion, SHIM_VERSION);
		assert.match(String(init.sessionId), /^[0-9a-f-]{36}$/);
		const prepare = byMethod("prepareMemory");
		assert.equal(prepare.prompt, "hello");
		assert.equal(prepare.sessionId, init.sessionId);
		const confirm = byMethod("confirmDelivery");
		assert.equal(confirm.requestId, prepare.requestId);
		assert.equal(confirm.confirmed, true);
		assert.ok(typeof confirm.payloadBytes === "number" && confirm.payloadBytes > 0);
		assert.deepEqual(byMethod("memoryAttached"), { requestId: prepare.requestId });
		const turn = byMethod("turnCompleted");
		assert.equal(turn.requestId, prepare.requestId);
		if (pi.line === "1.x") {
			// Pi 1.x: the request ends at agent_settled; the shim sends the session entries it added
			// (the sidecar finds the memory entry among them), not agent_end's messages.
			const entries = turn.entries as Json[];
			assert.deepEqual(turn.messages, []);
			const memory = entries.find((e) => e.type === "custom_message" && e.customType === "hindsight-memory");
			assert.match(String(memory?.id), /^[0-9a-f]{8}$/, "the session entry of the memory message");
			assert.ok(entries.some((e) => e.type === "message" && (e.message as Json | undefined)?.role === "assistant"));
		} else {
			assert.match(String(turn.memoryEntryId), /^[0-9a-f]{8}$/, "the session entry of the memory message");
			const turnMessages = turn.messages as Json[];
			assert.ok(turnMessages.some((m) => m.role === "custom" && m.customType === "hindsight-memory"), "agent_end's messages, as Pi gives them");
			assert.ok(turnMessages.some((m) => m.role === "assistant"));
		}
		assert.deepEqual(byMethod("shutdown"), { reason: "quit" });
		assertGone(log[0]?.pid);
	});

	it("registers the sidecar's tools and routes calls to it", async () => {
		const setup = setUp(pi, model);
		const first = model.requests.length;
		const run = await runPi(setup, ["-p", TOOL_PROMPT]);
		assert.equal(run.code, 0, run.stderr);
		const requests = model.requests.slice(first);
		assert.equal(requests.length, 2, "one tool call, then the answer");
		assert.ok(JSON.stringify(requests[0]?.tools).includes('"hindsight_echo"'));
		const toolCall = sidecarLog(setup).find((m) => m.method === "toolCall");
		assert.deepEqual(
			{ name: toolCall?.params?.name, params: toolCall?.params?.params, toolCallId: toolCall?.params?.toolCallId },
			{ name: "hindsight_echo", params: { text: "hi" }, toolCallId: "call_1" },
		);
		const toolResult = ((requests[1]?.messages ?? []) as Json[]).find((m) => m.role === "tool");
		assert.equal(messageText(toolResult), "echo: hi");
		// Only the first provider call of a request is checked.
		assert.equal(sidecarLog(setup).filter((m) => m.method === "confirmDelivery").length, 1);
	});

	it("runs a sidecar command without a model call", async () => {
		const setup = setUp(pi, model);
		const first = model.requests.length;
		const run = await runPi(setup, ["-p", "/hindsight-test some args"]);
		assert.equal(run.code, 0, run.stderr);
		assert.equal(model.requests.length, first, "no model call");
		const command = sidecarLog(setup).find((m) => m.method === "command");
		assert.equal(command?.params?.name, "hindsight-test");
		assert.equal(command?.params?.args, "some args");
		assert.equal(command?.params?.hasUI, false);
		// Pi's print mode routes process.stdout.write to stderr to protect its own output.
		assert.match(run.stdout + run.stderr, /ran \/hindsight-test some args/);
	});

	it("fails open when the interpreter does not exist", async () => {
		const setup = setUp(pi, model, "/nonexistent/bin/python3");
		const first = model.requests.length;
		const run = await runPi(setup, ["-p", "hello"]);
		assert.equal(run.code, 0, run.stderr);
		assert.equal(run.stdout.trim(), REPLY_TEXT);
		assert.ok(run.ms < 15_000, `pi took ${run.ms} ms`);
		const warnings = run.stderr.split("\n").filter((line) => line.startsWith("[hindsight]"));
		assert.equal(warnings.length, 1, `exactly one warning:\n${run.stderr}`);
		assert.match(warnings[0] ?? "", /memory is off.*ENOENT/);
		const messages = (model.requests[first]?.messages ?? []) as Json[];
		assert.ok(!JSON.stringify(messages).includes("Remembered"), "no memory without a sidecar");
	});

	it("fails open with the setup hint when sidecar.json is missing", async () => {
		const setup = setUp(pi, model);
		const extDir = join(setup.agentDir, "extensions", "pi-hindsight");
		writeFileSync(join(extDir, "sidecar.json"), "{}");
		const run = await runPi(setup, ["-p", "hello"]);
		assert.equal(run.code, 0, run.stderr);
		assert.equal(run.stdout.trim(), REPLY_TEXT);
		assert.match(run.stderr, /\[hindsight\] pi-hindsight: run `pi-hindsight setup`/);
	});

	it("fails open when the sidecar never becomes ready (bounded start-up)", async () => {
		const setup = setUp(pi, model);
		const run = await runPi(setup, ["-p", "hello"], { FAKE_SIDECAR_MODE: "no-ready", PI_HINDSIGHT_READY_TIMEOUT_MS: "1500" });
		assert.equal(run.code, 0, run.stderr);
		assert.equal(run.stdout.trim(), REPLY_TEXT);
		assert.match(run.stderr, /no ready message within 1500 ms/);
		assert.ok(run.ms < 10_000, `pi took ${run.ms} ms`);
		assertGone(sidecarLog(setup)[0]?.pid);
	});

	it("goes on without memory when prepareMemory times out, and cancels it", async () => {
		const setup = setUp(pi, model);
		const first = model.requests.length;
		const run = await runPi(setup, ["-p", "hello"], { FAKE_SIDECAR_MODE: "hang-prepare", FAKE_SIDECAR_PREPARE_MS: "300" });
		assert.equal(run.code, 0, run.stderr);
		assert.equal(run.stdout.trim(), REPLY_TEXT);
		assert.match(run.stderr, /\[hindsight\] pi-hindsight: prepareMemory failed, continuing without memory: prepareMemory got no answer within 300 ms/);
		assert.ok(!JSON.stringify(model.requests[first]?.messages).includes("Remembered"));
		const log = sidecarLog(setup);
		const prepare = log.find((m) => m.method === "prepareMemory");
		assert.deepEqual(log.find((m) => m.method === "$/cancelRequest")?.params, { id: prepare?.id });
		// The sidecar is still alive: the turn is still recorded, then it is shut down.
		assert.equal(log.find((m) => m.method === "turnCompleted")?.params?.requestId, prepare?.params?.requestId);
		assert.ok(!log.some((m) => m.method === "confirmDelivery"), "nothing to confirm");
		assert.ok(log.some((m) => m.method === "shutdown"));
	});

	it("shows one warning and stops forwarding when the sidecar crashes mid-session", async () => {
		const setup = setUp(pi, model);
		const run = await runPi(setup, ["-p", "hello", "second prompt"], { FAKE_SIDECAR_MODE: "crash-on-prepare" });
		assert.equal(run.code, 0, run.stderr);
		assert.equal(run.stdout.trim(), `${REPLY_TEXT}`, "print mode prints the last answer");
		const warnings = run.stderr.split("\n").filter((line) => line.startsWith("[hindsight]"));
		assert.equal(warnings.length, 1, `exactly one warning:\n${run.stderr}`);
		assert.match(run.stderr, /the sidecar exited \(code 3\)\n\s+stderr> Traceback[^\n]*\n\s+stderr> RuntimeError: boom ☃/);
		const methods = sidecarLog(setup).map((m) => m.method ?? m.event);
		assert.deepEqual(methods, ["started", "initialize", "prepareMemory"], "nothing is sent after the crash");
	});

	it("loads as a Pi package, with sidecar.json from the state dir", async () => {
		const setup = setUp(pi, model);
		// The package form of `pi-hindsight setup`: a settings.json entry (what `pi install <dir>`
		// writes), the files loaded in place, sidecar.json in <agent dir>/hindsight/.
		rmSync(join(setup.agentDir, "extensions"), { recursive: true });
		const packageDir = join(setup.agentDir, "..", "site-packages", "pi_hindsight", "shim");
		copyShim(packageDir);
		const settings = JSON.parse(readFileSync(join(setup.agentDir, "settings.json"), "utf8")) as Json;
		writeFileSync(join(setup.agentDir, "settings.json"), JSON.stringify({ ...settings, packages: [packageDir] }));
		mkdirSync(join(setup.agentDir, "hindsight"));
		writeFileSync(join(setup.agentDir, "hindsight", "sidecar.json"), JSON.stringify({ python: process.execPath, args: [FAKE_SIDECAR] }));
		const run = await runPi(setup, ["-p", "hello"]);
		assert.equal(run.code, 0, run.stderr);
		assert.equal(run.stdout.trim(), REPLY_TEXT);
		const methods = sidecarLog(setup).map((m) => m.method ?? m.event);
		assert.deepEqual(methods.slice(0, 3), ["started", "initialize", "prepareMemory"]);
	});

	it("stays off with one warning when it is loaded twice (a package and an extensions/ copy)", async () => {
		// Regression: Pi runs both factories for a package and an extensions/ folder holding the same
		// extension; each started its own sidecar, and the second replaced the first's tools.
		const setup = setUp(pi, model);
		const packageDir = join(setup.agentDir, "..", "pkg", "shim");
		copyShim(packageDir);
		const settings = JSON.parse(readFileSync(join(setup.agentDir, "settings.json"), "utf8")) as Json;
		writeFileSync(join(setup.agentDir, "settings.json"), JSON.stringify({ ...settings, packages: [packageDir] }));
		const first = model.requests.length;
		const run = await runPi(setup, ["-p", TOOL_PROMPT]);
		assert.equal(run.code, 0, run.stderr);
		const warnings = run.stderr.split("\n").filter((line) => line.includes("loaded twice"));
		assert.equal(warnings.length, 1, `exactly one warning:\n${run.stderr}`);
		assert.match(warnings[0] ?? "", /this copy stays off\. Run `pi-hindsight setup` to keep one\./);
		const log = sidecarLog(setup);
		assert.equal(log.filter((m) => m.event === "started").length, 1, "one sidecar");
		assert.equal(log.filter((m) => m.method === "prepareMemory").length, 1, "one recall");
		// The serving copy's tool still works (the other one registered nothing over it).
		assert.equal(log.filter((m) => m.method === "toolCall").length, 1);
		const toolResult = ((model.requests[first + 1]?.messages ?? []) as Json[]).find((m) => m.role === "tool");
		assert.equal(messageText(toolResult), "echo: hi");
	});

	it("tells the sidecar a run another extension's message started is not a user request (Pi 1.x)", { skip: pi.line === "1.x" ? false : "Pi 1.x only" }, async () => {
		// Regression: Pi 1.x starts such a run with before_agent_start{messageType: "custom"} and no
		// prompt; the shim sent prepareMemory without one ("prompt: Field required" from the sidecar).
		const setup = setUp(pi, model);
		writeFileSync(join(setup.agentDir, "extensions", "trigger.ts"), TRIGGER_EXTENSION);
		const first = model.requests.length;
		const run = await runPi(setup, ["-p", "/trigger"]);
		assert.equal(run.code, 0, run.stderr);
		assert.equal(model.requests.length, first + 1, "the custom message started one run");
		assert.ok(JSON.stringify(model.requests[first]?.messages).includes("custom trigger"));
		const log = sidecarLog(setup);
		const prepare = log.find((m) => m.method === "prepareMemory")?.params as Json | undefined;
		assert.deepEqual([prepare?.messageType, prepare?.customType, prepare?.prompt], ["custom", "other-ext", ""]);
		assert.ok(log.some((m) => m.method === "turnCompleted"), "the run is still reported");
		assert.doesNotMatch(run.stderr, /\[hindsight\]/);
	});

	it("asks for consent in RPC mode without blocking start-up, then applies the answer", async () => {
		const setup = setUp(pi, model);
		const child = spawn(pi.bin, ["--mode", "rpc"], { cwd: setup.cwd, env: piEnv(setup, { FAKE_SIDECAR_MODE: "consent" }), stdio: ["pipe", "pipe", "pipe"] });
		const events: Json[] = [];
		let buffered = "";
		child.stdout.setEncoding("utf8").on("data", (text: string) => {
			buffered += text;
			let lf: number;
			while ((lf = buffered.indexOf("\n")) !== -1) {
				const line = buffered.slice(0, lf);
				buffered = buffered.slice(lf + 1);
				if (line.trim() !== "") events.push(JSON.parse(line) as Json);
			}
		});
		const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
		const waitFor = async <T>(find: () => T | undefined, what: string): Promise<T> => {
			const deadline = Date.now() + 15_000;
			for (;;) {
				const found = find();
				if (found !== undefined) return found;
				if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(events)}`);
				await new Promise((resolve) => setTimeout(resolve, 20));
			}
		};
		try {
			const ask = await waitFor(() => events.find((e) => e.type === "extension_ui_request" && e.method === "confirm"), "the consent dialog");
			assert.equal(ask.title, "Allow memory?");
			// Pi only reads stdin after session_start returned: answering proves it did not block.
			child.stdin.write(`${JSON.stringify({ type: "extension_ui_response", id: ask.id, confirmed: true })}\n`);
			const consent = await waitFor(() => sidecarLog(setup).find((m) => m.method === "consent"), "the consent call");
			assert.deepEqual(consent.params, { accepted: true });
			await waitFor(
				() => events.find((e) => e.method === "setStatus" && e.statusKey === "hindsight" && e.statusText === "memory: on"),
				"the status from the consent answer",
			);
		} finally {
			child.stdin.end();
		}
		assert.equal(await exited, 0);
		assert.ok(sidecarLog(setup).some((m) => m.method === "shutdown"));
		assertGone(sidecarLog(setup)[0]?.pid);
	});
});
