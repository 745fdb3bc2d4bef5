// @ag-ui/client's HttpAgent against repertory's AG-UI route (tests/http/protocols/test_agui_client.py runs it).
// Usage: node agui_client.mjs <server url> <alice's key> <bob's key>. Throws on the first expectation that
// fails; prints a JSON summary on its last line.
import { HttpAgent, buildResumeArray, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";

const [url, alice, bob] = process.argv.slice(2);
const endpoint = `${url}/ag-ui/assistant`;

// A page that reloads reconnects with connectAgent(): this agent's connect() is a GET of the thread's stream.
class ResumingAgent extends HttpAgent {
  lastEventId = undefined;
  connect(input) {
    const headers = { ...this.headers, Accept: "text/event-stream" };
    if (this.lastEventId !== undefined) headers["Last-Event-ID"] = String(this.lastEventId);
    const stream = `${url}/ag-ui/assistant/threads/${encodeURIComponent(input.threadId)}/stream`;
    return transformHttpEventStream(runHttpRequest(() => this.fetch(stream, { method: "GET", headers })));
  }
}

function agent(key = alice, threadId = `agui-js-${randomUUID()}`) {
  return new ResumingAgent({ url: endpoint, headers: { "x-api-key": key }, threadId });
}

function say(a, text) {
  a.addMessage({ id: randomUUID(), role: "user", content: text });
}

async function run(a, params = {}) {
  const seen = [];
  let finished;
  await a.runAgent(params, {
    onEvent: ({ event }) => { seen.push(event.type); },
    onRunFinishedEvent: (p) => { finished = p; },
  });
  return { seen, finished };
}

async function refused(promise) {
  try {
    await promise;
  } catch (error) {
    return error.status ?? String(error.message);
  }
  throw new Error("expected the server to refuse the input");
}

const last = (a, role) => a.messages.filter((m) => m.role === role).at(-1);
const summary = {};
const quiet = console.error;
console.error = () => {}; // HttpAgent logs every refused run; the refusals below are expected

// A chat: streamed text, ending with the stored conversation's ids.
const chat = agent();
say(chat, "hello there");
let r = await run(chat);
assert.ok(r.seen.includes("TEXT_MESSAGE_CONTENT") && r.seen.includes("MESSAGES_SNAPSHOT"));
assert.equal(last(chat, "assistant").content, "Hello! How can I help?");
say(chat, "hello again");
r = await run(chat);
assert.deepEqual(chat.messages.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
summary.chat = chat.messages.length;

// Tool calls with their results, reasoning, steps.
const research = agent();
say(research, "research owls");
r = await run(research);
assert.equal(research.messages.filter((m) => m.role === "tool").length, 2);
assert.ok(r.seen.includes("REASONING_MESSAGE_CONTENT") && r.seen.includes("STEP_FINISHED"));
assert.equal(last(research, "assistant").content, "research done");
summary.tools = research.messages.filter((m) => m.role === "tool").map((m) => m.content);

// An approval approved through resume, then the same resume again: refused.
const account = `acct-${randomUUID().slice(0, 8)}`;
const approve = agent();
say(approve, `delete ${account}`);
r = await run(approve);
assert.equal(r.finished.outcome, "interrupt");
assert.equal(approve.pendingInterrupts.length, 1);
const [interrupt] = approve.pendingInterrupts;
assert.equal(interrupt.reason, "tool_approval");
const yes = buildResumeArray(approve.pendingInterrupts, {
  [interrupt.id]: { status: "resolved", payload: { approved: true } },
});
r = await run(approve, { resume: yes });
assert.equal(r.finished.outcome, "success");
assert.equal(last(approve, "assistant").content, `finished: deleted ${account} (approved by alice)`);
summary.again = await refused(approve.runAgent({ resume: yes }));

// An approval rejected through resume.
const reject = agent();
say(reject, `delete ${account}-no`);
await run(reject);
const no = buildResumeArray(reject.pendingInterrupts, {
  [reject.pendingInterrupts[0].id]: { status: "resolved", payload: { approved: false, reason: "not today" } },
});
await run(reject, { resume: no });
assert.ok(last(reject, "assistant").content.endsWith("(error)"));
summary.rejected = last(reject, "assistant").content;

// A tool the client runs: the run stops on its call, the next input's tool message answers it (its result).
const tools = [{ name: "pick_color", description: "Ask the person at the browser", parameters: { type: "object" } }];
const client = agent();
say(client, "paint door");
r = await run(client, { tools });
assert.equal(r.finished.outcome, "success");
assert.equal(r.finished.pendingToolCallIds.length, 1);
const [callId] = r.finished.pendingToolCallIds;
client.addMessage({ id: randomUUID(), role: "tool", toolCallId: callId, content: "green" });
await run(client, { tools });
assert.equal(last(client, "assistant").content, "painted green");
assert.deepEqual(
  client.messages.filter((m) => m.role === "tool").map((m) => m.content),
  ["green"],
  "the client's answer is the call's one result, under the client's own message",
);
summary.clientTool = last(client, "assistant").content;

// A reload: a new agent on the same thread reconnects and ends holding exactly the stored conversation.
const reload = agent(alice, research.threadId);
await reload.connectAgent();
// The user's message has the thread's id there (the reloaded page never knew the client's); the rest are the same.
const shown = (a) => a.messages.map((m) => [m.role === "user" ? "" : m.id, m.role, m.content ?? ""]);
assert.deepEqual(shown(reload), shown(research));
assert.equal(reload.messages.filter((m) => m.content === "research done").length, 1);
summary.reload = reload.messages.length;

// A bad input (nothing new) and another owner's thread.
const empty = agent();
summary.badInput = await refused(empty.runAgent());
const intruder = agent(bob, chat.threadId);
say(intruder, "hello");
summary.otherOwner = await refused(intruder.runAgent());

console.error = quiet;
console.log(JSON.stringify(summary));
