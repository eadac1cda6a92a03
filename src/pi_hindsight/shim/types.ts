/**
 * Wire shapes of docs/rpc.md and the checks that turn an untrusted `result` into them. The checks
 * are strict about what the shim acts on and lenient about what it can default (a missing
 * `notices` list is empty, a missing timeout keeps its default).
 */
import { InvalidResultError } from "./rpc-client.ts";
import type {
	CommandResult as CommandResultWire,
	CommandSpecWire,
	ConfirmRequestWire,
	MemoryMessageWire,
	NoticeWire,
	PrepareParams,
	PrepareResult as PrepareResultWire,
	SessionStateResult,
	TextContentWire,
	TimeoutsWire,
	ToolSpecWire,
	TurnParams,
	TurnResult as TurnResultWire,
} from "./wire.ts";

export type { PrepareParams, TurnParams };

// The shapes come from wire.ts, generated from the sidecar's Python models (docs/rpc.md): a
// change there that this shim does not follow fails `tsc`. The parsed forms below are those
// shapes after the lenient defaults of the checks (a missing list is empty, …).

export type Level = NoticeWire["level"];
export type Notice = NoticeWire;
export type ToolSpec = ToolSpecWire;
export type CommandSpec = CommandSpecWire;
export type Timeouts = TimeoutsWire;

/** The answer to `initialize` and `consent`; `statusLine` `null` clears, `undefined` leaves it. */
export interface SessionState extends Omit<SessionStateResult, "statusLine" | "offReason"> {
	statusLine: string | null | undefined;
}

export interface MemoryMessage extends Omit<MemoryMessageWire, "details"> {
	details: unknown;
}

export interface PrepareResult extends Pick<PrepareResultWire, "outcome" | "notices"> {
	message: MemoryMessage | null;
	statusLine: string | null | undefined;
}

export type TurnResult = TurnResultWire;

export interface ToolCallResult {
	content: TextContentWire[];
	details: unknown;
	isError: boolean;
}

export interface CommandResult extends Pick<Required<CommandResultWire>, "level"> {
	text: string | undefined;
	confirm: ConfirmRequestWire | undefined;
	statusLine: string | null | undefined;
}

/** Used until `initialize` answers (docs/rpc.md). */
export const DEFAULT_TIMEOUTS: Timeouts = {
	prepareMs: 5_000,
	confirmMs: 1_000,
	turnMs: 5_000,
	commandMs: 30_000,
	shutdownMs: 3_000,
	defaultMs: 5_000,
};
export const INITIALIZE_TIMEOUT_MS = 10_000;

// ------------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
	return typeof value === "object" && value !== null && !Array.isArray(value);
}

function bad(what: string, detail: string): never {
	throw new InvalidResultError(`${what}: ${detail}`);
}

function record(value: unknown, what: string): Json {
	return isRecord(value) ? value : bad(what, "expected an object");
}

function string(obj: Json, key: string, what: string): string {
	const value = obj[key];
	return typeof value === "string" ? value : bad(what, `"${key}" must be a string`);
}

function optionalString(obj: Json, key: string, what: string): string | undefined {
	const value = obj[key];
	if (value === undefined || value === null) return undefined;
	return typeof value === "string" ? value : bad(what, `"${key}" must be a string`);
}

/** `statusLine`: absent → leave alone, null → clear, string → set. */
function statusLine(obj: Json, what: string): string | null | undefined {
	const value = obj.statusLine;
	if (value === undefined || value === null) return value;
	return typeof value === "string" ? value : bad(what, `"statusLine" must be a string or null`);
}

function level(value: unknown): Level {
	return value === "warning" || value === "error" ? value : "info";
}

function list<T>(obj: Json, key: string, what: string, item: (value: unknown, what: string) => T): T[] {
	const value = obj[key];
	if (value === undefined || value === null) return [];
	if (!Array.isArray(value)) bad(what, `"${key}" must be a list`);
	return value.map((entry, index) => item(entry, `${what}.${key}[${index}]`));
}

function positive(value: unknown, fallback: number): number {
	return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : fallback;
}

function parseNotice(value: unknown, what: string): Notice {
	const obj = record(value, what);
	return { level: level(obj.level), message: string(obj, "message", what) };
}

function parseTool(value: unknown, what: string): ToolSpec {
	const obj = record(value, what);
	const name = string(obj, "name", what);
	return {
		name,
		label: optionalString(obj, "label", what) ?? name,
		description: string(obj, "description", what),
		parameters: record(obj.parameters, `${what}.parameters`),
		timeoutMs: positive(obj.timeoutMs, DEFAULT_TIMEOUTS.defaultMs),
	};
}

function parseCommand(value: unknown, what: string): CommandSpec {
	const obj = record(value, what);
	return { name: string(obj, "name", what).replace(/^\//, ""), description: optionalString(obj, "description", what) ?? "" };
}

export function parseSessionState(value: unknown, method: string, previous: Timeouts = DEFAULT_TIMEOUTS): SessionState {
	const obj = record(value, method);
	const timeouts = isRecord(obj.timeouts) ? obj.timeouts : {};
	let consent: SessionState["consent"] = null;
	if (isRecord(obj.consent)) {
		consent = { title: string(obj.consent, "title", `${method}.consent`), message: string(obj.consent, "message", `${method}.consent`) };
	}
	return {
		enabled: obj.enabled === true,
		statusLine: statusLine(obj, method),
		notices: list(obj, "notices", method, parseNotice),
		consent,
		tools: list(obj, "tools", method, parseTool),
		commands: list(obj, "commands", method, parseCommand),
		timeouts: {
			prepareMs: positive(timeouts.prepareMs, previous.prepareMs),
			confirmMs: positive(timeouts.confirmMs, previous.confirmMs),
			turnMs: positive(timeouts.turnMs, previous.turnMs),
			commandMs: positive(timeouts.commandMs, previous.commandMs),
			shutdownMs: positive(timeouts.shutdownMs, previous.shutdownMs),
			defaultMs: positive(timeouts.defaultMs, previous.defaultMs),
		},
	};
}

export function parsePrepareResult(value: unknown): PrepareResult {
	const what = "prepareMemory";
	const obj = record(value, what);
	let message: MemoryMessage | null = null;
	if (obj.message !== null && obj.message !== undefined) {
		const m = record(obj.message, `${what}.message`);
		message = {
			customType: string(m, "customType", `${what}.message`),
			content: string(m, "content", `${what}.message`),
			display: m.display === true,
			details: m.details,
		};
	}
	return {
		message,
		outcome: optionalString(obj, "outcome", what) ?? "unknown",
		notices: list(obj, "notices", what, parseNotice),
		statusLine: statusLine(obj, what),
	};
}

export function parseTurnResult(value: unknown): TurnResult {
	const obj = record(value, "turnCompleted");
	return { queued: typeof obj.queued === "number" ? obj.queued : 0, notices: list(obj, "notices", "turnCompleted", parseNotice) };
}

export function parseToolCallResult(value: unknown): ToolCallResult {
	const what = "toolCall";
	const obj = record(value, what);
	const content = list(obj, "content", what, (entry, where) => {
		const item = record(entry, where);
		return { type: "text" as const, text: string(item, "text", where) };
	});
	return { content, details: obj.details, isError: obj.isError === true };
}

export function parseCommandResult(value: unknown, method: string): CommandResult {
	const obj = record(value, method);
	let confirm: CommandResult["confirm"];
	if (isRecord(obj.confirm)) {
		const c = obj.confirm;
		const where = `${method}.confirm`;
		confirm = {
			title: string(c, "title", where),
			message: string(c, "message", where),
			method: string(c, "method", where),
			params: isRecord(c.params) ? c.params : {},
		};
	}
	return { text: optionalString(obj, "text", method), level: level(obj.level), confirm, statusLine: statusLine(obj, method) };
}
