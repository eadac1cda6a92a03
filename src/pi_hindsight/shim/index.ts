/**
 * pi-hindsight: the extension Pi loads. A pipe, no memory logic: it starts the Python sidecar,
 * maps Pi events to the calls of docs/rpc.md, registers the tools and commands the sidecar
 * declares, and shows what the sidecar asks for. Any sidecar failure leaves Pi working without
 * memory and is shown once (docs/shim.md).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { ExtensionAPI, ExtensionCommandContext, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { getAgentDir, VERSION as PI_VERSION } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";
import { PROTOCOL_VERSION, RpcAbortError, RpcClient, type SpawnSpec, SidecarUnavailableError } from "./rpc-client.ts";
import {
	type CommandSpec,
	DEFAULT_TIMEOUTS,
	INITIALIZE_TIMEOUT_MS,
	type Level,
	type Notice,
	parseCommandResult,
	parsePrepareResult,
	parseSessionState,
	parseToolCallResult,
	parseTurnResult,
	type PrepareParams,
	type SessionState,
	type Timeouts,
	type ToolSpec,
	type TurnParams,
} from "./types.ts";

/** This shim's version (= package.json "version"), sent in `initialize`: which files Pi loaded. */
export const SHIM_VERSION = "0.1.0";
const STATUS_KEY = "hindsight";
/** The customType of the hidden memory message (engine/memory_block.py CUSTOM_TYPE). */
const MEMORY_CUSTOM_TYPE = "hindsight-memory";
const DEFAULT_ARGS = ["-m", "pi_hindsight", "serve"];
const SETUP_HINT = "pi-hindsight: run `pi-hindsight setup`";

/** `PI_HINDSIGHT_READY_TIMEOUT_MS` overrides the 10 s wait for `ready` (slow disks, tests). */
function readyTimeoutMs(env: NodeJS.ProcessEnv = process.env): number | undefined {
	const value = Number(env.PI_HINDSIGHT_READY_TIMEOUT_MS);
	return Number.isFinite(value) && value > 0 ? value : undefined;
}
/** Follow-up confirmations a single command may chain (guards against a sidecar loop). */
const MAX_COMMAND_STEPS = 4;

/**
 * The `sidecar.json` files to look for, first found wins: beside this file (a hand-made or older
 * install; `import.meta.url` is the path Pi loaded: the symlink path on Pi 0.73.1, the real path on
 * Pi 1.x), then in the state dir, where `pi-hindsight setup` writes it so that an upgrade of the
 * Python package (which replaces the files Pi loads in place) keeps it.
 */
export function sidecarCandidates(env: NodeJS.ProcessEnv = process.env, agentDir: string = getAgentDir()): URL[] {
	const candidates = [new URL("./sidecar.json", import.meta.url)];
	const stateDir = env.PI_HINDSIGHT_STATE_DIR;
	if (stateDir !== undefined && stateDir !== "") candidates.push(pathToFileURL(join(stateDir, "sidecar.json")));
	candidates.push(pathToFileURL(join(agentDir, "hindsight", "sidecar.json")));
	return candidates;
}

/** Where the sidecar comes from: `PI_HINDSIGHT_PYTHON`, else the first `sidecar.json` found. */
export function findSidecar(
	env: NodeJS.ProcessEnv = process.env,
	candidates: URL[] = sidecarCandidates(env),
): { spec: SpawnSpec } | { problem: string } {
	const python = env.PI_HINDSIGHT_PYTHON;
	if (python !== undefined && python !== "") return { spec: { command: python, args: DEFAULT_ARGS } };
	let text: string | undefined;
	let sidecarJson = candidates[0] ?? new URL("./sidecar.json", import.meta.url);
	for (const candidate of candidates) {
		try {
			text = readFileSync(candidate, "utf8");
			sidecarJson = candidate;
			break;
		} catch {
			// try the next one
		}
	}
	if (text === undefined) {
		const looked = candidates.map((url) => fileURLToPath(url)).join(", ");
		return { problem: `${SETUP_HINT} (no interpreter configured: no sidecar.json in ${looked})` };
	}
	try {
		const config: unknown = JSON.parse(text);
		if (typeof config === "object" && config !== null && "python" in config && typeof config.python === "string") {
			const args = "args" in config ? config.args : undefined;
			const valid = Array.isArray(args) && args.every((arg): arg is string => typeof arg === "string");
			return { spec: { command: config.python, args: valid ? args : DEFAULT_ARGS } };
		}
	} catch {
		// reported below
	}
	return { problem: `${SETUP_HINT} (${fileURLToPath(sidecarJson)} has no "python" entry)` };
}

/**
 * One shim per Pi session. Pi does not deduplicate a package and an `extensions/` folder holding
 * the same extension: both factories run, which would start two sidecars and let the second
 * replace the first's tools. The first instance to start claims the session on `globalThis`
 * (shared by every copy in the process); a second stays off with one warning naming both files.
 */
const CLAIMS = Symbol.for("pi-hindsight.shim.sessions");
type Claim = { owner: object; where: string };

function sessionClaims(): Map<string, Claim> {
	const holder = globalThis as { [CLAIMS]?: Map<string, Claim> };
	holder[CLAIMS] ??= new Map();
	return holder[CLAIMS];
}

/**
 * Pi 1.x's mutable system prompt sections (`event.systemPromptOptions.sections`,
 * set again on every run or Pi drops them); undefined where Pi has none (0.73.1).
 */
function promptSections(event: unknown): Record<string, string> | undefined {
	const options = (event as { systemPromptOptions?: { sections?: unknown } }).systemPromptOptions;
	const sections = options?.sections;
	return typeof sections === "object" && sections !== null ? (sections as Record<string, string>) : undefined;
}

function describe(error: unknown): string {
	return error instanceof Error ? error.message : String(error);
}

/** The request in flight: its id, the memory to look for in the first provider payload, and
 * (Pi 1.x) the session leaf it started from — the entries after it are the request's. */
interface OpenRequest {
	requestId: string;
	needle: string | undefined;
	anchor: string | null | undefined;
}

/** What started a run: the user's prompt, or (Pi 1.x) another extension's custom message. */
interface RunStart {
	messageType: "user" | "custom";
	prompt: string;
	customType?: string;
}

/** `before_agent_start` of either version: Pi 1.x's is a union on `messageType`. */
function startOf(event: unknown): RunStart {
	const e = typeof event === "object" && event !== null ? (event as Record<string, unknown>) : {};
	if (e.messageType === "custom") {
		const message = typeof e.message === "object" && e.message !== null ? (e.message as Record<string, unknown>) : {};
		return { messageType: "custom", prompt: "", customType: typeof message.customType === "string" ? message.customType : undefined };
	}
	return { messageType: "user", prompt: typeof e.prompt === "string" ? e.prompt : "" };
}

/** Pi 1.x and later settle runs (`agent_settled`); 0.73.1 ends them at `agent_end`. */
export function settlesRuns(version: string): boolean {
	const major = Number.parseInt(version.split(".")[0] ?? "0", 10);
	return Number.isFinite(major) && major >= 1;
}

function isAborted(event: unknown): boolean {
	return typeof event === "object" && event !== null && (event as { aborted?: unknown }).aborted === true;
}

/** Subscribes to an event only newer Pi versions have (their types are not the ones compiled against). */
function onLaterEvent(pi: ExtensionAPI, name: string, handler: (event: unknown, ctx: ExtensionContext) => Promise<void>): void {
	(pi.on as unknown as (event: string, handler: (event: unknown, ctx: ExtensionContext) => Promise<void>) => void)(name, handler);
}

function leafId(ctx: ExtensionContext): string | null {
	try {
		return ctx.sessionManager.getLeafId();
	} catch {
		return null;
	}
}

/** The entries on the current branch after `anchor` (all of them when the anchor is not on it). */
function entriesSince(ctx: ExtensionContext, anchor: string | null | undefined): Record<string, unknown>[] {
	let branch: unknown[];
	try {
		branch = ctx.sessionManager.getBranch();
	} catch {
		return [];
	}
	const start = anchor === null || anchor === undefined ? 0 : branch.findIndex((entry) => (entry as { id?: unknown }).id === anchor) + 1;
	return branch.slice(start).filter((entry): entry is Record<string, unknown> => typeof entry === "object" && entry !== null);
}

/** One instance per extension instance: Pi runs the factory again after reload or a session switch. */
class HindsightShim {
	private client: RpcClient | undefined;
	/** Why memory is off for this instance; set once, after which every event is a no-op. */
	private off: string | undefined;
	/** The latest context, used for notifications the sidecar sends on its own. */
	private ctx: ExtensionContext | undefined;
	private timeouts: Timeouts = DEFAULT_TIMEOUTS;
	private tools = new Map<string, ToolSpec>();
	private commands = new Map<string, CommandSpec>();
	private readonly registeredTools = new Set<string>();
	/** The request in flight (see OpenRequest). */
	private turn: OpenRequest | undefined;
	/** Pi 1.x: `agent_end` is not final (retries, compaction retries, continuations); the request
	 * ends at `agent_settled`, and its messages are the session entries after `anchor`. */
	private readonly settles = settlesRuns(PI_VERSION);
	/** Aborted at session_shutdown: ends a consent dialog still open. */
	private readonly lifetime = new AbortController();
	/** Per-call failures already shown; cleared when that call succeeds again. */
	private readonly shown = new Set<string>();
	private protocolWarningShown = false;
	/** The session this instance claimed (see sessionClaims), released at session_shutdown. */
	private claimed: string | undefined;
	/** The last framing the sidecar gave (kept when a call fails: a stable prefix). */
	private framing: { section: string; text: string } | null = null;

	constructor(private readonly pi: ExtensionAPI) {}

	register(): void {
		const { pi } = this;
		pi.on("session_start", async (event, ctx) => this.start(event.reason, ctx));
		pi.on("before_agent_start", async (event, ctx) => this.prepare(startOf(event), ctx, promptSections(event)));
		pi.on("before_provider_request", (event) => this.confirmDelivery(event.payload));
		pi.on("message_end", (event) => this.noteAttached(event.message));
		pi.on("agent_end", async (event, ctx) => {
			if (!this.settles) await this.finish(ctx, event.messages);
		});
		if (this.settles) {
			onLaterEvent(pi, "agent_settled", async (event, ctx) => this.finish(ctx, undefined, isAborted(event)));
		}
		pi.on("session_compact", (_event, ctx) => {
			this.usable()?.notify("compaction", this.sessionParams(ctx));
		});
		pi.on("session_shutdown", async (event, ctx) => {
			// A run that never settled (it failed to start) is still one request: finish it first.
			if (this.turn !== undefined && this.settles) await this.finish(ctx);
			this.lifetime.abort();
			if (this.claimed !== undefined && sessionClaims().get(this.claimed)?.owner === this) sessionClaims().delete(this.claimed);
			await this.client?.close(event.reason, this.timeouts.shutdownMs);
		});
	}

	// -- start-up -----------------------------------------------------------------------------------

	/**
	 * Pi awaits this before the first prompt, so it is bounded: ready (10 s) + initialize (10 s).
	 * It is awaited rather than run in the background because the tools and commands must exist
	 * before the first prompt (`pi -p "/hindsight …"` would otherwise go to the model as text).
	 * The consent question is not awaited: see askConsent.
	 */
	private async start(reason: string, ctx: ExtensionContext): Promise<void> {
		this.ctx = ctx;
		if (this.client !== undefined || this.off !== undefined) return;
		if (!this.claim(ctx)) return;
		const found = findSidecar();
		if ("problem" in found) {
			this.disable(found.problem, ctx);
			return;
		}
		const client = new RpcClient({
			...found.spec,
			readyTimeoutMs: readyTimeoutMs(),
			onNotification: (method, params) => this.onNotification(method, params),
			onProtocolWarning: (message) => this.protocolWarning(message),
			onUnavailable: (error) => this.disable(error.message),
		});
		this.client = client;
		try {
			await client.start();
			const result = await client.request(
				"initialize",
				{
					protocolVersion: PROTOCOL_VERSION,
					...this.sessionParams(ctx),
					hasUI: ctx.hasUI,
					reason,
					piVersion: PI_VERSION,
					shimVersion: SHIM_VERSION,
				},
				{ timeoutMs: INITIALIZE_TIMEOUT_MS },
			);
			const state = parseSessionState(result, "initialize");
			this.apply(state, ctx);
			if (state.consent !== null && ctx.hasUI) void this.askConsent(state.consent, ctx);
		} catch (error) {
			this.disable(describe(error), ctx);
			void client.close("error", 0); // a sidecar that cannot initialize is of no use: stop it
		}
	}

	/** Claims the session for this instance; false (with one warning) if another copy holds it. */
	private claim(ctx: ExtensionContext): boolean {
		const key = ctx.sessionManager.getSessionId();
		const where = fileURLToPath(import.meta.url);
		const holder = sessionClaims().get(key);
		if (holder !== undefined && holder.owner !== this) {
			this.off = "another copy of the extension serves this session";
			this.show(
				"warning",
				`pi-hindsight: the extension is loaded twice (${holder.where} and ${where}); this copy stays off. ` +
					"Run `pi-hindsight setup` to keep one.",
				ctx,
			);
			return false;
		}
		sessionClaims().set(key, { owner: this, where });
		this.claimed = key;
		return true;
	}

	/**
	 * Asks the consent question without blocking session_start: in RPC mode Pi reads the client's
	 * dialog answers only after session_start has returned (awaiting here would deadlock), and in
	 * the TUI the resumed conversation is rendered only afterwards. A prompt sent before the answer
	 * runs with the state the sidecar returned from initialize (no consent yet).
	 */
	private async askConsent(consent: { title: string; message: string }, ctx: ExtensionContext): Promise<void> {
		try {
			const accepted = await ctx.ui.confirm(consent.title, consent.message, { signal: this.lifetime.signal });
			const client = this.usable();
			if (this.lifetime.signal.aborted || client === undefined) return;
			const result = await client.request("consent", { accepted }, { timeoutMs: this.timeouts.defaultMs });
			this.apply(parseSessionState(result, "consent", this.timeouts), ctx);
		} catch (error) {
			if (!this.lifetime.signal.aborted) this.callFailed("consent", error, ctx);
		}
	}

	/** Applies an `initialize` / `consent` answer: timeouts, notices, status, tools, commands. */
	private apply(state: SessionState, ctx: ExtensionContext): void {
		this.timeouts = state.timeouts;
		this.showNotices(state.notices, ctx);
		this.setStatus(state.statusLine, ctx);
		this.registerTools(state.tools);
		this.commands = new Map(state.commands.map((spec) => [spec.name, spec]));
		for (const spec of state.commands) {
			// Re-registering replaces the entry (a changed description); Pi cannot unregister, so a
			// command the sidecar dropped stays and answers "not available".
			this.pi.registerCommand(spec.name, {
				description: spec.description,
				handler: async (args, commandCtx) => this.runCommand(spec.name, args, commandCtx),
			});
		}
	}

	private registerTools(specs: ToolSpec[]): void {
		const previous = this.tools;
		this.tools = new Map(specs.map((spec) => [spec.name, spec]));
		for (const spec of specs) {
			this.pi.registerTool({
				name: spec.name,
				label: spec.label,
				description: spec.description,
				// Pi 0.73.1 validates arguments by compiling `parameters` as JSON Schema (typebox 1.x),
				// so the sidecar's schema is passed through as is; Type.Unsafe only types it.
				parameters: Type.Unsafe<Record<string, unknown>>(spec.parameters),
				execute: async (toolCallId, params, signal, _onUpdate, ctx) => this.runTool(spec.name, toolCallId, params, signal, ctx),
			});
		}
		// Pi activates a newly registered tool by itself but cannot unregister one: a tool the
		// sidecar stopped offering is deactivated, and reactivated if it comes back.
		const active = new Set(this.pi.getActiveTools());
		let changed = false;
		for (const name of previous.keys()) {
			if (!this.tools.has(name)) changed = active.delete(name) || changed;
		}
		for (const name of this.tools.keys()) {
			if (!previous.has(name) && this.registeredTools.has(name) && !active.has(name)) {
				active.add(name);
				changed = true;
			}
			this.registeredTools.add(name);
		}
		if (changed) this.pi.setActiveTools([...active]);
	}

	// -- one user request ---------------------------------------------------------------------------

	/**
	 * A request starts at `before_agent_start`. Pi 1.x retries, compaction retries, settle
	 * continuations, steers and follow-ups do not fire it: they belong to the request in flight.
	 * A run another extension started (Pi 1.x `messageType: "custom"`) has no prompt; the sidecar
	 * records it as such and gives it no automatic recall.
	 */
	private async prepare(start: RunStart, ctx: ExtensionContext, sections?: Record<string, string>) {
		try {
			return await this.prepareMessage(start, ctx, sections !== undefined);
		} finally {
			// The framing as a system prompt section, on every run (Pi 1.x).
			if (sections !== undefined && this.framing !== null) sections[this.framing.section] = this.framing.text;
		}
	}

	private async prepareMessage(start: RunStart, ctx: ExtensionContext, canSetSystemSection: boolean) {
		this.ctx = ctx;
		if (this.turn !== undefined && this.settles) await this.finish(ctx); // it never settled
		const requestId = randomUUID();
		const turn: OpenRequest = { requestId, needle: undefined, anchor: this.settles ? leafId(ctx) : undefined };
		this.turn = turn;
		const client = this.usable();
		if (client === undefined) return undefined;
		try {
			const params: PrepareParams = { requestId, ...this.sessionParams(ctx), prompt: start.prompt, messageType: start.messageType, canSetSystemSection };
			if (start.customType !== undefined) params.customType = start.customType;
			const result = parsePrepareResult(
				await client.request(
					"prepareMemory",
					params,
					// ctx.signal is undefined during before_agent_start (0.73.1 and 1.x: the run starts
					// afterwards); it is passed anyway so an abort cancels at once if Pi ever sets it.
					{ timeoutMs: this.timeouts.prepareMs, signal: ctx.signal },
				),
			);
			this.shown.delete("prepareMemory");
			this.framing = result.framing; // null: memory is off, no section
			this.showNotices(result.notices, ctx);
			this.setStatus(result.statusLine, ctx);
			const message = result.message;
			if (message === null) return undefined;
			// The memory text as it appears inside a JSON-encoded provider payload.
			turn.needle = JSON.stringify(message.content).slice(1, -1);
			const { customType, content, display, details } = message;
			return { message: { customType, content, display, details } };
		} catch (error) {
			if (!(error instanceof RpcAbortError)) this.callFailed("prepareMemory", error, ctx);
			return undefined;
		}
	}

	/** Runs on every provider call, so it does nothing unless the first call of a request is due. */
	private confirmDelivery(payload: unknown): undefined {
		const turn = this.turn;
		if (turn?.needle === undefined) return undefined;
		const needle = turn.needle;
		turn.needle = undefined;
		let confirmed = false;
		let payloadBytes = 0;
		try {
			const json = JSON.stringify(payload);
			confirmed = json.includes(needle);
			payloadBytes = Buffer.byteLength(json);
		} catch {
			// an unserialisable payload cannot be confirmed
		}
		this.usable()?.notify("confirmDelivery", { requestId: turn.requestId, confirmed, payloadBytes });
		return undefined; // never modify the payload
	}

	/**
	 * Pi emits our hidden message as a `custom` message when it adds it to the agent's context:
	 * that is "attached" (prepared memory can fail to attach, e.g. when prepareMemory timed out).
	 */
	private noteAttached(message: unknown): undefined {
		const turn = this.turn;
		if (turn === undefined || typeof message !== "object" || message === null) return undefined;
		const m = message as { role?: unknown; customType?: unknown; details?: unknown };
		if (m.role !== "custom" || m.customType !== MEMORY_CUSTOM_TYPE) return undefined;
		const details = typeof m.details === "object" && m.details !== null ? (m.details as Record<string, unknown>) : {};
		if (details.requestId !== turn.requestId) return undefined;
		this.usable()?.notify("memoryAttached", { requestId: turn.requestId });
		return undefined;
	}

	/** The session entry Pi persisted for this request's memory message (found at agent_end). */
	private memoryEntryId(requestId: string, ctx: ExtensionContext): string | null {
		try {
			const entries = ctx.sessionManager.getEntries();
			for (let index = entries.length - 1, seen = 0; index >= 0 && seen < 200; index--, seen++) {
				const entry = entries[index] as { type?: unknown; id?: unknown; customType?: unknown; details?: unknown };
				if (entry.type !== "custom_message" || entry.customType !== MEMORY_CUSTOM_TYPE) continue;
				const details = entry.details as { requestId?: unknown } | undefined;
				if (details?.requestId === requestId && typeof entry.id === "string") return entry.id;
			}
		} catch {
			// no entries to search (e.g. a stale context)
		}
		return null;
	}

	/**
	 * The request is over: Pi 0.73.1 at `agent_end` (its messages), Pi 1.x at `agent_settled`
	 * (the session entries added since the request started; the sidecar picks its messages).
	 */
	private async finish(ctx: ExtensionContext, messages?: readonly object[], aborted = false): Promise<void> {
		const turn = this.turn;
		this.turn = undefined;
		const requestId = turn?.requestId ?? randomUUID();
		const client = this.usable();
		if (client === undefined) return;
		if (turn?.needle !== undefined) {
			// Memory was prepared but no provider request went out (aborted before it): not sent.
			client.notify("confirmDelivery", { requestId, confirmed: false, payloadBytes: null });
		}
		const params: TurnParams = { requestId, ...this.sessionParams(ctx), messages: (messages ?? []) as Record<string, unknown>[], aborted };
		if (messages === undefined) params.entries = entriesSince(ctx, turn?.anchor);
		else params.memoryEntryId = this.memoryEntryId(requestId, ctx);
		try {
			const result = parseTurnResult(await client.request("turnCompleted", params, { timeoutMs: this.timeouts.turnMs }));
			this.shown.delete("turnCompleted");
			this.showNotices(result.notices, ctx);
		} catch (error) {
			this.callFailed("turnCompleted", error, ctx);
		}
	}

	// -- tools and commands -------------------------------------------------------------------------

	private async runTool(name: string, toolCallId: string, params: unknown, signal: AbortSignal | undefined, ctx: ExtensionContext) {
		const client = this.usable();
		if (client === undefined) throw new Error(`Hindsight memory is unavailable: ${this.off ?? "the sidecar is not running"}`);
		const spec = this.tools.get(name);
		if (spec === undefined) throw new Error(`${name} is not available in this session`);
		let raw: unknown;
		try {
			raw = await client.request(
				"toolCall",
				{ toolCallId, name, params, sessionId: ctx.sessionManager.getSessionId(), cwd: ctx.cwd },
				{ timeoutMs: spec.timeoutMs, signal },
			);
		} catch (error) {
			if (error instanceof RpcAbortError) {
				const abort = new Error("Operation aborted");
				abort.name = "AbortError";
				throw abort;
			}
			throw new Error(`${name} failed: ${describe(error)}`);
		}
		const result = parseToolCallResult(raw);
		if (result.isError) throw new Error(result.content.map((part) => part.text).join("\n") || `${name} failed`);
		return { content: result.content, details: result.details };
	}

	private async runCommand(name: string, args: string, ctx: ExtensionCommandContext): Promise<void> {
		const client = this.usable();
		if (client === undefined || !this.commands.has(name)) {
			this.show("warning", `/${name} is not available: ${this.off ?? "the sidecar does not offer it now"}`, ctx);
			return;
		}
		let method = "command";
		let params: Record<string, unknown> = { name, args, hasUI: ctx.hasUI, cwd: ctx.cwd, sessionId: ctx.sessionManager.getSessionId() };
		for (let step = 0; step < MAX_COMMAND_STEPS; step++) {
			let raw: unknown;
			try {
				raw = await client.request(method, params, { timeoutMs: this.timeouts.commandMs });
			} catch (error) {
				this.show("warning", `/${name} failed: ${describe(error)}`, ctx);
				return;
			}
			try {
				// A confirmation may lead to `consent`, whose answer is a session state: apply it too.
				if (typeof raw === "object" && raw !== null && "tools" in raw) this.apply(parseSessionState(raw, method, this.timeouts), ctx);
				const result = parseCommandResult(raw, method);
				this.setStatus(result.statusLine, ctx);
				if (result.text !== undefined) this.output(result.text, result.level, ctx);
				if (result.confirm === undefined) return;
				// Without a UI, confirm() answers false at once (Pi's print and JSON modes).
				const accepted = await ctx.ui.confirm(result.confirm.title, result.confirm.message);
				method = result.confirm.method;
				params = { ...result.confirm.params, accepted };
			} catch (error) {
				this.show("warning", `/${name} failed: ${describe(error)}`, ctx);
				return;
			}
		}
	}

	// -- sidecar → shim -----------------------------------------------------------------------------

	private onNotification(method: string, params: unknown): void {
		const ctx = this.ctx;
		if (ctx === undefined || this.lifetime.signal.aborted) return;
		const p = typeof params === "object" && params !== null ? (params as Record<string, unknown>) : {};
		if (method === "notify" && typeof p.message === "string") {
			this.show(p.level === "warning" || p.level === "error" ? p.level : "info", p.message, ctx);
		} else if (method === "status" && (typeof p.text === "string" || p.text === null)) {
			this.setStatus(p.text, ctx);
		} else {
			this.protocolWarning(`unknown notification from the sidecar ignored: ${method}`);
		}
	}

	// -- failure and display ------------------------------------------------------------------------

	/** The client, if memory is on; every event handler is a no-op otherwise. */
	private usable(): RpcClient | undefined {
		return this.off === undefined && this.client?.available === true ? this.client : undefined;
	}

	/** Turns memory off for this instance, with exactly one warning. */
	private disable(reason: string, ctx: ExtensionContext | undefined = this.ctx): void {
		if (this.off !== undefined) return;
		this.off = reason;
		if (this.lifetime.signal.aborted) return;
		const message = reason.startsWith(SETUP_HINT) ? reason : `pi-hindsight: memory is off for this session: ${reason}`;
		this.show("warning", message, ctx);
		this.setStatus("memory: off", ctx);
	}

	/** A failed call: Pi goes on without its result. Shown once until the call succeeds again. */
	private callFailed(method: string, error: unknown, ctx: ExtensionContext): void {
		if (error instanceof SidecarUnavailableError) {
			this.disable(error.message, ctx);
			return;
		}
		if (this.shown.has(method)) return;
		this.shown.add(method);
		this.show("warning", `pi-hindsight: ${method} failed, continuing without memory: ${describe(error)}`, ctx);
	}

	/** Malformed output is skipped; it is reported on stderr without a UI, once as a notice with one. */
	private protocolWarning(message: string): void {
		const ctx = this.ctx;
		if (ctx?.hasUI === true) {
			if (this.protocolWarningShown || this.lifetime.signal.aborted) return;
			this.protocolWarningShown = true;
		}
		this.show("warning", `pi-hindsight: ${message}`, ctx);
	}

	private showNotices(notices: Notice[], ctx: ExtensionContext): void {
		for (const notice of notices) this.show(notice.level, notice.message, ctx);
	}

	/** A notice: the UI when there is one, else one line on stderr (continuations indented). */
	private show(level: Level, message: string, ctx: ExtensionContext | undefined): void {
		try {
			if (ctx?.hasUI === true) {
				ctx.ui.notify(message, level);
				return;
			}
		} catch {
			// a stale context after shutdown: fall through to stderr
		}
		process.stderr.write(`[hindsight] ${message.replace(/\n/g, "\n    ")}\n`);
	}

	/**
	 * Command output: a notification with a UI, else stdout. Pi's print and JSON modes redirect
	 * `process.stdout.write` to stderr to protect their own output, so there it lands on stderr.
	 */
	private output(text: string, level: Level, ctx: ExtensionContext): void {
		if (ctx.hasUI) ctx.ui.notify(text, level);
		else process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
	}

	private setStatus(text: string | null | undefined, ctx: ExtensionContext | undefined): void {
		if (text === undefined || ctx === undefined) return;
		try {
			ctx.ui.setStatus(STATUS_KEY, text ?? undefined);
		} catch {
			// a stale context after shutdown
		}
	}

	private sessionParams(ctx: ExtensionContext): { cwd: string; sessionId: string; sessionFile: string | null } {
		const sm = ctx.sessionManager;
		return { cwd: ctx.cwd, sessionId: sm.getSessionId(), sessionFile: sm.getSessionFile() ?? null };
	}
}

export default function hindsight(pi: ExtensionAPI): void {
	new HindsightShim(pi).register();
}
