/**
 * JSON-RPC 2.0 client for the pi-hindsight sidecar, spoken over a child process's stdin/stdout
 * (contract: docs/rpc.md). It spawns the child, waits for its `ready` notification, correlates
 * requests and answers by id, enforces per-call timeouts, cancels with `$/cancelRequest`, and
 * stops the child (shutdown request, then SIGTERM, then SIGKILL). It imports nothing from Pi,
 * so it can be tested on its own.
 *
 * Errors, split by what the caller does with them:
 *
 *   SidecarError                 base; carries `stderrTail`, the child's last stderr lines
 *   ├── SidecarUnavailableError  the sidecar is gone or never came up (spawn failure, exit, no
 *   │                            `ready`, protocol mismatch, closed pipe, shut down): every later
 *   │                            call fails the same way, so the caller switches itself off
 *   ├── RpcTimeoutError          one call exceeded its timeout (`$/cancelRequest` was sent)
 *   ├── RpcAbortError            the caller's AbortSignal fired (`$/cancelRequest` was sent)
 *   ├── RpcResponseError         the sidecar answered with a JSON-RPC error (`code`, `data`)
 *   └── InvalidResultError       the answer did not have the shape the protocol promises
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { StringDecoder } from "node:string_decoder";

export const PROTOCOL_VERSION = 1;
export const DEFAULT_READY_TIMEOUT_MS = 10_000;
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;
/** Time between SIGTERM and SIGKILL when stopping the child. */
export const KILL_GRACE_MS = 1_000;
/** How long to wait for stdout to drain after the child exits before failing pending calls. */
const EXIT_DRAIN_MS = 200;

// ------------------------------------------------------------------------------------------------
// Errors

export class SidecarError extends Error {
	readonly stderrTail: readonly string[];
	constructor(message: string, stderrTail: readonly string[] = []) {
		const tail = stderrTail.slice(-5);
		super(tail.length > 0 ? `${message}\n${tail.map((line) => `  stderr> ${line}`).join("\n")}` : message);
		this.name = new.target.name;
		this.stderrTail = stderrTail;
	}
}
export class SidecarUnavailableError extends SidecarError {}
export class RpcTimeoutError extends SidecarError {
	constructor(
		readonly method: string,
		readonly timeoutMs: number,
		stderrTail: readonly string[],
	) {
		super(`${method} got no answer within ${timeoutMs} ms`, stderrTail);
	}
}
export class RpcAbortError extends SidecarError {
	constructor(readonly method: string) {
		super(`${method} was aborted`);
	}
}
export class RpcResponseError extends SidecarError {
	constructor(
		readonly method: string,
		readonly code: number,
		readonly detail: string,
		readonly data: unknown,
	) {
		super(`${method} failed: ${detail} (code ${code})`);
	}
}
export class InvalidResultError extends SidecarError {}

// ------------------------------------------------------------------------------------------------
// Framing

/**
 * Splits a byte stream into LF-terminated lines. It searches for the 0x0A byte and decodes each
 * complete line afterwards, so a multibyte character split across chunks is reassembled before
 * decoding (0x0A never occurs inside a UTF-8 multibyte sequence), and U+2028 / U+2029 are just
 * characters. A `\r` before the LF is kept (JSON.parse treats it as whitespace).
 */
export class LineSplitter {
	private parts: Buffer[] = [];

	push(chunk: Buffer): string[] {
		const lines: string[] = [];
		let start = 0;
		for (let lf = chunk.indexOf(0x0a); lf !== -1; lf = chunk.indexOf(0x0a, start)) {
			const piece = chunk.subarray(start, lf);
			const bytes = this.parts.length === 0 ? piece : Buffer.concat([...this.parts, piece]);
			this.parts = [];
			lines.push(bytes.toString("utf8"));
			start = lf + 1;
		}
		if (start < chunk.length) this.parts.push(chunk.subarray(start));
		return lines;
	}

	/** Bytes received after the last LF (an unterminated line), if any; clears them. */
	takeRest(): string | undefined {
		if (this.parts.length === 0) return undefined;
		const rest = Buffer.concat(this.parts).toString("utf8");
		this.parts = [];
		return rest;
	}
}

/** Keeps the last `max` lines a stream wrote (decoded incrementally, so UTF-8 survives chunking). */
class LineTail {
	private readonly decoder = new StringDecoder("utf8");
	private readonly lines: string[] = [];
	private partial = "";
	constructor(private readonly max: number) {}

	push(chunk: Buffer): void {
		const text = this.partial + this.decoder.write(chunk);
		const pieces = text.split("\n");
		this.partial = (pieces.pop() ?? "").slice(-2_000);
		for (const piece of pieces) this.add(piece);
	}

	snapshot(): string[] {
		return this.partial.trim() === "" ? [...this.lines] : [...this.lines, this.partial];
	}

	private add(line: string): void {
		const trimmed = line.replace(/\r$/, "");
		if (trimmed.trim() === "") return;
		this.lines.push(trimmed.length > 500 ? `${trimmed.slice(0, 500)}…` : trimmed);
		if (this.lines.length > this.max) this.lines.shift();
	}
}

/** Serialises one message. U+2028/U+2029 are escaped too: legal either way, safer for readers. */
export function encodeMessage(message: object): string {
	return `${JSON.stringify(message).replace(/[\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`)}\n`;
}

// ------------------------------------------------------------------------------------------------
// Client

export interface SpawnSpec {
	command: string;
	args: readonly string[];
	env?: NodeJS.ProcessEnv;
	cwd?: string;
}

export interface RpcClientOptions extends SpawnSpec {
	readyTimeoutMs?: number;
	protocolVersion?: number;
	stderrTailLines?: number;
	/** Sidecar → shim notifications other than `ready`. */
	onNotification?: (method: string, params: unknown) => void;
	/** Something odd that is skipped, not fatal (a malformed line, an error without an id). */
	onProtocolWarning?: (message: string) => void;
	/** Called once when the sidecar becomes unavailable without the caller asking (crash, exit, …). */
	onUnavailable?: (error: SidecarUnavailableError) => void;
}

export interface CallOptions {
	timeoutMs?: number;
	signal?: AbortSignal;
}

export interface ReadyInfo {
	protocolVersion: number;
	version?: string;
	pid?: number;
}

export interface CloseOutcome {
	/** The sidecar answered the `shutdown` request. */
	answered: boolean;
	result?: unknown;
	/** How the child was stopped: it exited by itself, or needed SIGTERM / SIGKILL. */
	escalation: "none" | "SIGTERM" | "SIGKILL";
}

interface PendingCall {
	method: string;
	resolve: (value: unknown) => void;
	reject: (error: SidecarError) => void;
}

type State = "new" | "starting" | "ready" | "closing" | "closed" | "failed";

function isRecord(value: unknown): value is Record<string, unknown> {
	return typeof value === "object" && value !== null && !Array.isArray(value);
}

function preview(text: string): string {
	return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
}

export class RpcClient {
	private child: ChildProcessWithoutNullStreams | undefined;
	private state: State = "new";
	private failure: SidecarUnavailableError | undefined;
	private nextId = 1;
	private readonly pending = new Map<number, PendingCall>();
	private readonly stdout = new LineSplitter();
	private readonly stderr: LineTail;
	private readyWaiter: { resolve: (info: ReadyInfo) => void; reject: (error: SidecarError) => void } | undefined;
	private exited = false;
	private readonly exitWaiters = new Set<() => void>();

	constructor(private readonly options: RpcClientOptions) {
		this.stderr = new LineTail(options.stderrTailLines ?? 20);
	}

	/** True between a successful `start()` and `close()` or a failure. */
	get available(): boolean {
		return this.state === "ready";
	}

	get pid(): number | undefined {
		return this.child?.pid;
	}

	get stderrTail(): string[] {
		return this.stderr.snapshot();
	}

	/** Spawns the child and resolves once it has sent a compatible `ready` notification. */
	start(): Promise<ReadyInfo> {
		if (this.state !== "new") return Promise.reject(new Error("RpcClient.start() may be called once"));
		this.state = "starting";
		const { command, args, env, cwd } = this.options;
		const readyTimeoutMs = this.options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
		const ready = new Promise<ReadyInfo>((resolve, reject) => {
			const timer = setTimeout(() => {
				this.fail(`the sidecar sent no ready message within ${readyTimeoutMs} ms`);
			}, readyTimeoutMs);
			this.readyWaiter = {
				resolve: (info) => {
					clearTimeout(timer);
					resolve(info);
				},
				reject: (error) => {
					clearTimeout(timer);
					reject(error);
				},
			};
		});
		let child: ChildProcessWithoutNullStreams;
		try {
			child = spawn(command, [...args], { stdio: "pipe", env: env ?? process.env, cwd, windowsHide: true });
		} catch (err) {
			this.fail(`cannot start the sidecar (${command}): ${err instanceof Error ? err.message : String(err)}`);
			return ready;
		}
		this.child = child;
		// The child must never keep Pi's event loop alive on its own (`pi -p` has to exit): every
		// wait below holds its own timer, and the sidecar exits when its stdin closes.
		child.unref();
		for (const stream of [child.stdin, child.stdout, child.stderr]) {
			(stream as typeof stream & { unref?: () => void }).unref?.();
		}
		child.on("error", (err) => {
			// A spawn failure (ENOENT, EACCES) leaves no process behind: nothing to wait for or kill.
			if (child.pid === undefined) this.markExited();
			this.fail(`cannot start the sidecar (${command}): ${err.message}`);
		});
		child.stdin.on("error", (err) => this.fail(`the sidecar's stdin failed: ${err.message}`));
		child.stderr.on("data", (chunk: Buffer) => this.stderr.push(chunk));
		child.stdout.on("data", (chunk: Buffer) => {
			for (const line of this.stdout.push(chunk)) this.handleLine(line);
		});
		child.stdout.on("end", () => {
			const rest = this.stdout.takeRest();
			if (rest !== undefined && rest.trim() !== "") this.warn(`unterminated line from the sidecar skipped: ${preview(rest)}`);
			// No answer can come any more. Usually the exit follows at once and names the cause.
			setTimeout(() => this.fail("the sidecar closed its stdout"), EXIT_DRAIN_MS).unref();
		});
		child.on("exit", (code, signal) => {
			this.markExited();
			// Answers written just before exiting may still be in the pipe: let stdout drain first.
			const reason = `the sidecar exited (${signal ?? `code ${code ?? "?"}`})`;
			const timer = setTimeout(() => this.fail(reason), EXIT_DRAIN_MS).unref();
			child.once("close", () => {
				clearTimeout(timer);
				this.fail(reason);
			});
		});
		return ready;
	}

	/** Sends a request and resolves with its `result`. Rejects with a SidecarError subclass. */
	request(method: string, params: unknown, options: CallOptions = {}): Promise<unknown> {
		if (this.state !== "ready") {
			return Promise.reject(this.failure ?? new SidecarUnavailableError(`the sidecar is not running (${this.state})`));
		}
		return this.call(method, params, options);
	}

	/** Sends a notification; a no-op once the sidecar is unavailable. */
	notify(method: string, params: unknown): void {
		if (this.state === "ready" || this.state === "closing") this.write({ jsonrpc: "2.0", method, params });
	}

	/**
	 * Stops the sidecar: `shutdown {reason}`, then waits up to `shutdownMs` for the answer and the
	 * exit, then SIGTERM, then SIGKILL after KILL_GRACE_MS. Always leaves no handle behind.
	 */
	async close(reason: string, shutdownMs: number): Promise<CloseOutcome> {
		const outcome: CloseOutcome = { answered: false, escalation: "none" };
		const child = this.child;
		if (this.state === "closed" || child === undefined) {
			this.state = "closed";
			return outcome;
		}
		if (this.state === "ready") {
			this.state = "closing";
			this.call("shutdown", { reason }, { timeoutMs: shutdownMs }).then(
				(result) => {
					outcome.answered = true;
					outcome.result = result;
				},
				() => undefined, // a late or missing answer is covered by the escalation below
			);
		} else if (this.state === "starting") {
			this.fail("the sidecar was stopped before it was ready", false);
		}
		if (!(await this.waitForExit(shutdownMs))) {
			outcome.escalation = "SIGTERM";
			child.kill("SIGTERM");
			if (!(await this.waitForExit(KILL_GRACE_MS))) {
				outcome.escalation = "SIGKILL";
				child.kill("SIGKILL");
				await this.waitForExit(KILL_GRACE_MS);
			}
		}
		// Let a shutdown answer written just before the exit arrive.
		await new Promise<void>((resolve) => {
			if (child.stdout.readableEnded || child.stdout.destroyed) resolve();
			else {
				const timer = setTimeout(resolve, EXIT_DRAIN_MS);
				child.stdout.once("close", () => {
					clearTimeout(timer);
					resolve();
				});
			}
		});
		if (this.state === "closing") this.state = "closed";
		this.rejectAll(new SidecarUnavailableError("the sidecar was shut down", this.stderrTail));
		this.release();
		return outcome;
	}

	// ----------------------------------------------------------------------------------------------

	private call(method: string, params: unknown, options: CallOptions): Promise<unknown> {
		const { signal } = options;
		const timeoutMs = options.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
		if (signal?.aborted) return Promise.reject(new RpcAbortError(method));
		const id = this.nextId++;
		return new Promise<unknown>((resolve, reject) => {
			const cleanup = (): void => {
				clearTimeout(timer);
				signal?.removeEventListener("abort", onAbort);
			};
			// Timeout and abort both give up on the call at once and tell the sidecar to stop working on it.
			const giveUp = (error: SidecarError): void => {
				if (!this.pending.delete(id)) return;
				cleanup();
				this.notify("$/cancelRequest", { id });
				reject(error);
			};
			const timer = setTimeout(() => giveUp(new RpcTimeoutError(method, timeoutMs, this.stderrTail)), timeoutMs);
			const onAbort = (): void => giveUp(new RpcAbortError(method));
			signal?.addEventListener("abort", onAbort, { once: true });
			this.pending.set(id, {
				method,
				resolve: (value) => {
					cleanup();
					resolve(value);
				},
				reject: (error) => {
					cleanup();
					reject(error);
				},
			});
			this.write({ jsonrpc: "2.0", id, method, params });
		});
	}

	private write(message: object): void {
		const stdin = this.child?.stdin;
		if (stdin === undefined || stdin.destroyed || !stdin.writable) return;
		stdin.write(encodeMessage(message));
	}

	private handleLine(line: string): void {
		if (line.trim() === "") return;
		let message: unknown;
		try {
			message = JSON.parse(line);
		} catch {
			this.warn(`malformed line from the sidecar skipped: ${preview(line)}`);
			return;
		}
		if (!isRecord(message) || message.jsonrpc !== "2.0") {
			this.warn(`non-JSON-RPC line from the sidecar skipped: ${preview(line)}`);
			return;
		}
		const { id, method } = message;
		if (typeof method === "string") {
			if (id !== undefined && id !== null) {
				// The protocol has no sidecar → shim requests; answer so the sidecar does not wait.
				this.write({ jsonrpc: "2.0", id, error: { code: -32601, message: `the shim serves no requests (${method})` } });
			} else if (method === "ready") {
				this.onReady(message.params);
			} else {
				try {
					this.options.onNotification?.(method, message.params);
				} catch (err) {
					this.warn(`handling the ${method} notification failed: ${err instanceof Error ? err.message : String(err)}`);
				}
			}
			return;
		}
		if (typeof id !== "number") {
			const error = isRecord(message.error) ? String(message.error.message) : preview(line);
			this.warn(`the sidecar reported an error without a request id: ${error}`);
			return;
		}
		const call = this.pending.get(id);
		if (call === undefined) return; // an answer to a call that already timed out or was cancelled
		this.pending.delete(id);
		if (isRecord(message.error)) {
			const { code, message: detail, data } = message.error;
			call.reject(new RpcResponseError(call.method, typeof code === "number" ? code : -32603, String(detail), data));
		} else if ("result" in message) {
			call.resolve(message.result);
		} else {
			call.reject(new InvalidResultError(`${call.method}: the answer has neither result nor error`));
		}
	}

	private onReady(params: unknown): void {
		if (this.state !== "starting" || this.readyWaiter === undefined) {
			this.warn("duplicate ready message from the sidecar ignored");
			return;
		}
		const version = isRecord(params) ? params.protocolVersion : undefined;
		const expected = this.options.protocolVersion ?? PROTOCOL_VERSION;
		if (version !== expected) {
			this.fail(`protocol mismatch: the sidecar speaks version ${String(version)}, this shim ${expected}`);
			return;
		}
		this.state = "ready";
		const info: ReadyInfo = { protocolVersion: expected };
		if (isRecord(params) && typeof params.version === "string") info.version = params.version;
		if (isRecord(params) && typeof params.pid === "number") info.pid = params.pid;
		this.readyWaiter.resolve(info);
		this.readyWaiter = undefined;
	}

	/** Marks the sidecar unavailable: rejects everything pending at once and stops the child. */
	private fail(reason: string, report = true): void {
		if (this.state === "failed" || this.state === "closed") return;
		if (this.state === "closing") return; // an exit during close() is expected; close() cleans up
		this.state = "failed";
		const error = new SidecarUnavailableError(reason, this.stderrTail);
		this.failure = error;
		this.readyWaiter?.reject(error);
		this.readyWaiter = undefined;
		this.rejectAll(error);
		this.terminate();
		if (report) this.options.onUnavailable?.(error);
	}

	private rejectAll(error: SidecarError): void {
		const calls = [...this.pending.values()];
		this.pending.clear();
		for (const call of calls) call.reject(error);
	}

	/** SIGTERM now, SIGKILL after the grace period unless it exited; then drop the pipes. */
	private terminate(): void {
		const child = this.child;
		if (child === undefined) return;
		if (!this.exited) {
			child.kill("SIGTERM");
			const timer = setTimeout(() => {
				if (!this.exited) child.kill("SIGKILL");
			}, KILL_GRACE_MS);
			timer.unref();
		}
		this.release();
	}

	private release(): void {
		const child = this.child;
		if (child === undefined) return;
		child.stdin.destroy();
		child.stdout.destroy();
		child.stderr.destroy();
		child.unref();
	}

	private markExited(): void {
		this.exited = true;
		for (const wake of this.exitWaiters) wake();
		this.exitWaiters.clear();
	}

	private waitForExit(timeoutMs: number): Promise<boolean> {
		if (this.exited) return Promise.resolve(true);
		return new Promise<boolean>((resolve) => {
			const wake = (): void => {
				clearTimeout(timer);
				resolve(true);
			};
			const timer = setTimeout(() => {
				this.exitWaiters.delete(wake);
				resolve(false);
			}, timeoutMs);
			this.exitWaiters.add(wake);
		});
	}

	private warn(message: string): void {
		this.options.onProtocolWarning?.(message);
	}
}
