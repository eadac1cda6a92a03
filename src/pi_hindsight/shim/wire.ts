/**
 * The shim <-> sidecar wire shapes, generated from src/pi_hindsight/hosts/pi/wire.py
 * by scripts/gen_wire.py. Do not edit: change the Python models and regenerate.
 */
export interface InitializeParams {
	protocolVersion: number;
	cwd: string;
	sessionId: string;
	sessionFile?: string | null;
	hasUI?: boolean;
	reason?: string;
	piVersion?: string | null;
}

export interface CommandSpecWire {
	name: string;
	description: string;
}

export interface ConsentQuestionWire {
	title: string;
	message: string;
}

export interface NoticeWire {
	level: "info" | "warning" | "error";
	message: string;
}

export interface TimeoutsWire {
	prepareMs: number;
	confirmMs: number;
	turnMs: number;
	commandMs: number;
	shutdownMs: number;
	defaultMs: number;
}

export interface ToolSpecWire {
	name: string;
	label: string;
	description: string;
	parameters: Record<string, unknown>;
	timeoutMs: number;
}

/** The answer to `initialize` and `consent`. */
export interface SessionStateResult {
	enabled: boolean;
	statusLine: string | null;
	notices: NoticeWire[];
	consent: ConsentQuestionWire | null;
	offReason: string | null;
	tools: ToolSpecWire[];
	commands: CommandSpecWire[];
	timeouts: TimeoutsWire;
}

export interface ConsentParams {
	accepted: boolean;
}

/** A run about to start (Pi's `before_agent_start`). Pi 1.x tells user prompts (`user`) from runs another extension's message started (`custom`: no prompt, its `customType`). */
export interface PrepareParams {
	cwd?: string | null;
	sessionId: string;
	sessionFile?: string | null;
	requestId: string;
	prompt?: string;
	messageType?: "user" | "custom";
	customType?: string | null;
}

export interface MemoryMessageWire {
	customType: string;
	content: string;
	display: boolean;
	details: Record<string, unknown>;
}

export interface PrepareResult {
	message: MemoryMessageWire | null;
	outcome: string;
	reason: string | null;
	recallMs: number | null;
	notices: NoticeWire[];
	statusLine: string | null;
}

export interface ConfirmParams {
	requestId: string;
	confirmed: boolean;
	payloadBytes?: number | null;
}

export interface AttachedParams {
	requestId: string;
}

/** A finished request: Pi 0.73.1 sends `agent_end`'s `messages`; Pi 1.x, where `agent_end` is not final, sends the session `entries` the request added (after the leaf it started from, at `agent_settled`), and the sidecar picks its messages (hosts/pi/messages.py). */
export interface TurnParams {
	cwd?: string | null;
	sessionId: string;
	sessionFile?: string | null;
	requestId: string;
	messages?: Record<string, unknown>[];
	entries?: Record<string, unknown>[] | null;
	aborted?: boolean;
	memoryEntryId?: string | null;
}

export interface TurnResult {
	queued: number;
	notices: NoticeWire[];
}

export interface CompactionParams {
	cwd?: string | null;
	sessionId?: string | null;
	sessionFile?: string | null;
}

export interface ToolCallParams {
	cwd?: string | null;
	sessionId?: string | null;
	sessionFile?: string | null;
	name: string;
	params?: Record<string, unknown>;
	toolCallId?: string | null;
}

export interface TextContentWire {
	type: "text";
	text: string;
}

export interface ToolCallResult {
	content: TextContentWire[];
	details: Record<string, unknown>;
	isError: boolean;
}

export interface CommandParams {
	cwd?: string | null;
	sessionId?: string | null;
	sessionFile?: string | null;
	name: string;
	args?: string;
	hasUI?: boolean;
	accepted?: boolean | null;
}

/** A command asks the user first: the shim shows the dialog, then calls `method` with `params` plus `accepted`. */
export interface ConfirmRequestWire {
	title: string;
	message: string;
	method: string;
	params: Record<string, unknown>;
}

/** A command's answer. Absent keys mean "nothing": no text to show, no question, and the status line left as it is (a `null` status line would clear it). */
export interface CommandResult {
	text?: string | null;
	level?: "info" | "warning" | "error";
	confirm?: ConfirmRequestWire | null;
	statusLine?: string | null;
}

export interface ShutdownParams {
	reason?: string;
}

export interface ShutdownResult {
	flushed: number;
	pending: number;
}

export interface ReadyParams {
	protocolVersion: number;
	version: string;
	pid: number;
}

export interface NotifyParams {
	level: "info" | "warning" | "error";
	message: string;
}

export interface StatusLineParams {
	text: string | null;
}

/** Shim → sidecar calls (a `void` result: a notification). */
export interface Methods {
	initialize: { params: InitializeParams; result: SessionStateResult };
	consent: { params: ConsentParams; result: SessionStateResult };
	prepareMemory: { params: PrepareParams; result: PrepareResult };
	confirmDelivery: { params: ConfirmParams; result: void };
	memoryAttached: { params: AttachedParams; result: void };
	turnCompleted: { params: TurnParams; result: TurnResult };
	compaction: { params: CompactionParams; result: void };
	toolCall: { params: ToolCallParams; result: ToolCallResult };
	command: { params: CommandParams; result: CommandResult };
	shutdown: { params: ShutdownParams; result: ShutdownResult };
}

/** Sidecar → shim notifications. */
export interface Notifications {
	ready: ReadyParams;
	notify: NotifyParams;
	status: StatusLineParams;
}
