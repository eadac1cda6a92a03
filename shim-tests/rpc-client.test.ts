/**
 * The RPC client against a real child process (shim-tests/fixtures/fake-sidecar.mjs): handshake,
 * correlation, framing, timeouts, crashes, spawn failures and the shutdown escalation.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
	encodeMessage,
	LineSplitter,
	RpcAbortError,
	RpcClient,
	type RpcClientOptions,
	RpcResponseError,
	RpcTimeoutError,
	SidecarUnavailableError,
} from "../src/pi_hindsight/shim/rpc-client.ts";

const FAKE_SIDECAR = fileURLToPath(new URL("./fixtures/fake-sidecar.mjs", import.meta.url));

interface Harness {
	client: RpcClient;
	notifications: { method: string; params: unknown }[];
	warnings: string[];
	unavailable: SidecarUnavailableError[];
	/** Messages the fake sidecar received, in order. */
	received: () => { method?: string; id?: number; params?: Record<string, unknown> }[];
}

const tempDirs: string[] = [];
after(() => {
	for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function harness(mode = "normal", overrides: Partial<RpcClientOptions> = {}): Harness {
	const dir = mkdtempSync(join(tmpdir(), "shim-rpc-"));
	tempDirs.push(dir);
	const log = join(dir, "received.jsonl");
	const h: Omit<Harness, "client"> = {
		notifications: [],
		warnings: [],
		unavailable: [],
		received: () => {
			try {
				return readFileSync(log, "utf8")
					.split("\n")
					.filter((line) => line !== "")
					.map((line) => JSON.parse(line) as { method?: string; id?: number; params?: Record<string, unknown> });
			} catch {
				return [];
			}
		},
	};
	const client = new RpcClient({
		command: process.execPath,
		args: [FAKE_SIDECAR],
		env: { ...process.env, FAKE_SIDECAR_MODE: mode, FAKE_SIDECAR_LOG: log },
		onNotification: (method, params) => h.notifications.push({ method, params }),
		onProtocolWarning: (message) => h.warnings.push(message),
		onUnavailable: (error) => h.unavailable.push(error),
		...overrides,
	});
	return { client, ...h };
}

async function waitFor(condition: () => boolean, timeoutMs = 3_000): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	while (!condition()) {
		if (Date.now() > deadline) throw new Error("condition not met in time");
		await new Promise((resolve) => setTimeout(resolve, 10));
	}
}

describe("LineSplitter", () => {
	it("reassembles a multibyte character split across chunks", () => {
		const bytes = Buffer.from('{"a":"☃"}\n');
		const cut = bytes.indexOf(Buffer.from("☃")) + 1;
		const splitter = new LineSplitter();
		assert.deepEqual(splitter.push(bytes.subarray(0, cut)), []);
		assert.deepEqual(splitter.push(bytes.subarray(cut)), ['{"a":"☃"}']);
	});

	it("returns every message of a chunk and keeps the partial tail", () => {
		const splitter = new LineSplitter();
		assert.deepEqual(splitter.push(Buffer.from('{"a":1}\n{"b":2}\n{"c"')), ['{"a":1}', '{"b":2}']);
		assert.deepEqual(splitter.push(Buffer.from(":3}\n")), ['{"c":3}']);
		assert.equal(splitter.takeRest(), undefined);
	});

	it("does not split on U+2028 / U+2029 or CR", () => {
		const splitter = new LineSplitter();
		assert.deepEqual(splitter.push(Buffer.from('{"s":"a\u2028b\u2029c"}\r\n')), ['{"s":"a\u2028b\u2029c"}\r']);
	});

	it("byte-at-a-time delivery still yields the same lines", () => {
		const text = '{"x":"€𝄞☃"}\n{"y":"\u2028"}\n';
		const splitter = new LineSplitter();
		const lines: string[] = [];
		for (const byte of Buffer.from(text)) lines.push(...splitter.push(Buffer.from([byte])));
		assert.deepEqual(lines, ['{"x":"€𝄞☃"}', '{"y":"\u2028"}']);
	});

	it("encodeMessage escapes line separators and ends with one LF", () => {
		const line = encodeMessage({ s: "a\u2028b\nc" });
		assert.equal(line, '{"s":"a\\u2028b\\nc"}\n');
		assert.deepEqual(JSON.parse(line), { s: "a\u2028b\nc" });
	});
});

describe("RpcClient", () => {
	it("waits for ready and reports the sidecar's version", async () => {
		const h = harness();
		const ready = await h.client.start();
		assert.equal(ready.protocolVersion, 1);
		assert.equal(ready.version, "0.1.0-fake");
		assert.equal(h.client.available, true);
		const outcome = await h.client.close("quit", 2_000);
		assert.equal(outcome.answered, true);
		assert.equal(outcome.escalation, "none");
		assert.deepEqual(outcome.result, { flushed: 0, pending: 0 });
		assert.equal(h.unavailable.length, 0, "a requested shutdown is not a failure");
		assert.deepEqual(h.received().at(-1), { jsonrpc: "2.0", id: 1, method: "shutdown", params: { reason: "quit" } });
	});

	it("correlates concurrent requests answered out of order", async () => {
		const h = harness();
		await h.client.start();
		const order: number[] = [];
		const calls = [300, 10, 150, 0].map((delayMs, index) =>
			h.client.request("echo", { index, delayMs, text: "é\u2028" }).then((result) => {
				order.push(index);
				return result;
			}),
		);
		const results = await Promise.all(calls);
		assert.deepEqual(
			results.map((result) => (result as { index: number }).index),
			[0, 1, 2, 3],
		);
		assert.deepEqual(order, [3, 1, 2, 0], "answers arrived out of order");
		assert.equal((results[0] as { text: string }).text, "é\u2028");
		await h.client.close("quit", 2_000);
	});

	it("handles split multibyte characters, U+2028, two messages per chunk and skips a malformed line", async () => {
		const h = harness();
		await h.client.start();
		assert.deepEqual(await h.client.request("framing", {}), { done: true });
		assert.deepEqual(h.notifications, [
			{ method: "notify", params: { level: "info", message: "snow ☃ man" } },
			{ method: "notify", params: { level: "info", message: "line\u2028sep\u2029par" } },
			{ method: "status", params: { text: "one" } },
			{ method: "status", params: { text: "two" } },
		]);
		assert.equal(h.warnings.length, 1);
		assert.match(h.warnings[0] ?? "", /malformed line.*this is not json/);
		assert.equal(h.client.available, true, "a malformed line does not end the session");
		assert.deepEqual(await h.client.request("echo", { after: true }), { after: true });
		await h.client.close("quit", 2_000);
	});

	it("rejects a timed-out call and sends $/cancelRequest", async () => {
		const h = harness();
		await h.client.start();
		const started = Date.now();
		await assert.rejects(h.client.request("hang", {}, { timeoutMs: 150 }), (error: unknown) => {
			assert.ok(error instanceof RpcTimeoutError);
			assert.equal(error.method, "hang");
			return true;
		});
		assert.ok(Date.now() - started < 1_000);
		await waitFor(() => h.received().some((m) => m.method === "$/cancelRequest"));
		const hang = h.received().find((m) => m.method === "hang");
		const cancel = h.received().find((m) => m.method === "$/cancelRequest");
		assert.deepEqual(cancel?.params, { id: hang?.id });
		// The late -32800 answer to the cancelled id is ignored; the client keeps working.
		assert.deepEqual(await h.client.request("echo", { ok: 1 }), { ok: 1 });
		assert.deepEqual(h.warnings, []);
		await h.client.close("quit", 2_000);
	});

	it("cancels at once when the caller aborts", async () => {
		const h = harness();
		await h.client.start();
		const controller = new AbortController();
		const call = h.client.request("hang", {}, { timeoutMs: 5_000, signal: controller.signal });
		setTimeout(() => controller.abort(), 50);
		await assert.rejects(call, RpcAbortError);
		await waitFor(() => h.received().some((m) => m.method === "$/cancelRequest"));
		await h.client.close("quit", 2_000);
	});

	it("turns a JSON-RPC error answer into RpcResponseError", async () => {
		const h = harness();
		await h.client.start();
		await assert.rejects(h.client.request("nope", {}), (error: unknown) => {
			assert.ok(error instanceof RpcResponseError);
			assert.equal(error.code, -32601);
			return true;
		});
		await h.client.close("quit", 2_000);
	});

	it("rejects every pending call at once when the child crashes, with its stderr", async () => {
		const h = harness();
		await h.client.start();
		const started = Date.now();
		const pending = [h.client.request("hang", {}, { timeoutMs: 10_000 }), h.client.request("hang", {}, { timeoutMs: 10_000 })];
		const crash = h.client.request("crash", {}, { timeoutMs: 10_000 });
		const results = await Promise.allSettled([...pending, crash]);
		assert.ok(Date.now() - started < 2_000, "rejected at once, not at the timeout");
		for (const result of results) {
			assert.equal(result.status, "rejected");
			const error = (result as PromiseRejectedResult).reason as unknown;
			assert.ok(error instanceof SidecarUnavailableError);
			assert.match(error.message, /exited \(code 3\)/);
			assert.ok(error.stderrTail.includes("RuntimeError: boom ☃"), `stderr tail: ${error.stderrTail.join(" | ")}`);
		}
		assert.equal(h.unavailable.length, 1, "reported once");
		assert.equal(h.client.available, false);
		await assert.rejects(h.client.request("echo", {}), SidecarUnavailableError);
		h.client.notify("confirmDelivery", {}); // a no-op, no throw
		const outcome = await h.client.close("quit", 500);
		assert.equal(outcome.escalation, "none");
	});

	it("fails cleanly when the interpreter does not exist (ENOENT)", async () => {
		const h = harness("normal", { command: "/nonexistent/python3", args: ["-m", "pi_hindsight", "serve"] });
		await assert.rejects(h.client.start(), (error: unknown) => {
			assert.ok(error instanceof SidecarUnavailableError);
			assert.match(error.message, /ENOENT/);
			return true;
		});
		assert.equal(h.unavailable.length, 1);
		const started = Date.now();
		await h.client.close("quit", 3_000);
		assert.ok(Date.now() - started < 500, "nothing to wait for");
	});

	it("fails when ready never comes, and stops the child", async () => {
		const h = harness("no-ready", { readyTimeoutMs: 200 });
		await assert.rejects(h.client.start(), /no ready message within 200 ms/);
		await h.client.close("quit", 1_000);
	});

	it("fails on a protocol version mismatch", async () => {
		const h = harness("bad-protocol");
		await assert.rejects(h.client.start(), /protocol mismatch: the sidecar speaks version 99/);
		await h.client.close("quit", 1_000);
	});

	it("fails with the stderr tail when the child exits before ready", async () => {
		const h = harness("exit-early");
		await assert.rejects(h.client.start(), (error: unknown) => {
			assert.ok(error instanceof SidecarUnavailableError);
			assert.deepEqual(error.stderrTail, ["fatal: cannot import pi_hindsight"]);
			return true;
		});
	});

	it("escalates to SIGKILL when the child ignores shutdown and SIGTERM", async () => {
		const h = harness("ignore-term");
		await h.client.start();
		const pid = h.client.pid;
		assert.ok(pid !== undefined);
		const started = Date.now();
		const outcome = await h.client.close("quit", 300);
		const elapsed = Date.now() - started;
		assert.equal(outcome.answered, false);
		assert.equal(outcome.escalation, "SIGKILL");
		assert.ok(elapsed >= 1_250 && elapsed < 3_000, `took ${elapsed} ms`);
		assert.throws(() => process.kill(pid, 0), /ESRCH/, "the child is gone");
		assert.ok(h.client.stderrTail.includes("ignoring SIGTERM"));
		assert.equal(h.unavailable.length, 0);
	});
});
