/**
 * A stand-in OpenAI-compatible chat-completions server for running the real Pi offline. It always
 * streams (Pi sends `stream: true`), records every request body, and answers with text, or, when
 * the last user message asks for it and the `hindsight_echo` tool is offered, with one tool call.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type Json = Record<string, unknown>;

export interface FakeModel {
	port: number;
	requests: Json[];
	close(): Promise<void>;
}

export const REPLY_TEXT = "Hello from the fake model.";
export const TOOL_PROMPT = "please call the echo tool";

/** The text of one provider message, whether its content is a string or a list of parts. */
export function messageText(message: unknown): string {
	if (typeof message !== "object" || message === null || !("content" in message)) return "";
	const content = message.content;
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.map((part: unknown) => (typeof part === "object" && part !== null && "text" in part && typeof part.text === "string" ? part.text : ""))
		.join("");
}

function messagesOf(body: Json): Json[] {
	return Array.isArray(body.messages) ? (body.messages as Json[]) : [];
}

function offersTool(body: Json, name: string): boolean {
	return Array.isArray(body.tools) && JSON.stringify(body.tools).includes(`"${name}"`);
}

function chunk(delta: Json, finishReason: string | null = null): string {
	const body = { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 0, model: "local-model", choices: [{ index: 0, delta, finish_reason: finishReason }] };
	return `data: ${JSON.stringify(body)}\n\n`;
}

function respond(body: Json, res: ServerResponse): void {
	res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
	const messages = messagesOf(body);
	const last = messages.at(-1);
	const wantsTool = messages.some((m) => m.role === "user" && messageText(m).includes(TOOL_PROMPT));
	if (wantsTool && last?.role !== "tool" && offersTool(body, "hindsight_echo")) {
		res.write(
			chunk({
				role: "assistant",
				tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "hindsight_echo", arguments: '{"text":"hi"}' } }],
			}),
		);
		res.write(chunk({}, "tool_calls"));
	} else {
		res.write(chunk({ role: "assistant", content: REPLY_TEXT.slice(0, 6) }));
		res.write(chunk({ content: REPLY_TEXT.slice(6) }));
		res.write(chunk({}, "stop"));
	}
	const usage = { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 0, model: "local-model", choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } };
	res.write(`data: ${JSON.stringify(usage)}\n\n`);
	res.end("data: [DONE]\n\n");
}

export async function startFakeModel(): Promise<FakeModel> {
	const requests: Json[] = [];
	const server = createServer((req: IncomingMessage, res: ServerResponse) => {
		const parts: Buffer[] = [];
		req.on("data", (part: Buffer) => parts.push(part));
		req.on("end", () => {
			if (req.method !== "POST" || !(req.url ?? "").endsWith("/chat/completions")) {
				res.writeHead(404).end();
				return;
			}
			const body = JSON.parse(Buffer.concat(parts).toString("utf8")) as Json;
			requests.push(body);
			respond(body, res);
		});
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	const { port } = server.address() as AddressInfo;
	return {
		port,
		requests,
		close: () =>
			new Promise<void>((resolve) => {
				server.closeAllConnections();
				server.close(() => resolve());
			}),
	};
}
