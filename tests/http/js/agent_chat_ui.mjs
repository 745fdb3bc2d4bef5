// What agent-chat-ui sends, replayed with LangGraph's own JavaScript client (the version its lockfile pins).
//
// agent-chat-ui drives `useStream` from @langchain/langgraph-sdk/react (dist/react/stream.lgp.js in
// 1.8.10) with `fetchStateHistory: true` and an `onCustomEvent` callback; its pages call
// `stream.submit(...)` as src/components/thread/index.tsx (a message) and
// agent-inbox/hooks/use-interrupted-actions.tsx (approve, reject, edit, "Mark as Resolved") do.
// `submit` below is that hook's request, line for line: a thread created with no metadata when
// there is none yet, stream modes = the submit's + the tracked ones ("messages-tuple", "values":
// the page reads `stream.messages`) + the callback ones ("custom"), the thread head's checkpoint
// (without its thread_id) once the history is known, `onDisconnect` "continue" only for resumable
// streams, and the history (limit 10) read again after every run.
//
// Usage: node agent_chat_ui.mjs URL ALICE_KEY BOB_KEY. Prints one JSON summary line; any failed
// expectation throws (exit code 1) with what was seen.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client } from "@langchain/langgraph-sdk";

const [url, aliceKey, bobKey] = process.argv.slice(2);
const alice = new Client({ apiUrl: url, apiKey: aliceKey, callerOptions: { maxRetries: 0 } });
const bob = new Client({ apiUrl: url, apiKey: bobKey, callerOptions: { maxRetries: 0 } });
const summary = {};

const unique = (modes) => [...new Set(modes)];

/** One browser tab of agent-chat-ui on one assistant: its thread id, history and last stream. */
class Tab {
  constructor(client, assistantId) {
    this.client = client;
    this.assistantId = assistantId;
    this.threadId = null;
    this.history = [];
    this.sent = [];
  }

  async submit(values, options = {}) {
    if (!this.threadId) {
      const thread = await this.client.threads.create({ threadId: options.threadId, metadata: options.metadata });
      this.createdMetadata = thread.metadata;
      this.threadId = thread.thread_id;
    }
    const streamMode = unique([...(options.streamMode ?? []), "messages-tuple", "values", "custom"]);
    let checkpoint = options.checkpoint ?? this.history[0]?.checkpoint ?? undefined;
    if (checkpoint != null) {
      checkpoint = { ...checkpoint };
      delete checkpoint.thread_id;
    }
    const streamResumable = options.streamResumable ?? false;
    const payload = {
      input: values,
      command: options.command,
      streamMode,
      streamSubgraphs: options.streamSubgraphs,
      streamResumable,
      onDisconnect: streamResumable ? "continue" : "cancel",
      checkpoint,
    };
    this.sent.push({ input: values, command: options.command, streamMode, checkpoint });
    const parts = [];
    for await (const part of this.client.runs.stream(this.threadId, this.assistantId, payload)) {
      parts.push(part);
    }
    this.history = await this.client.threads.getHistory(this.threadId, { limit: 10 });
    const errors = parts.filter((p) => p.event === "error");
    assert.deepEqual(errors, [], `the stream reported an error: ${JSON.stringify(errors)}`);
    return parts;
  }

  /** index.tsx handleSubmit: a human message with text content blocks, plus made-up tool results. */
  async say(text) {
    const messages = this.values()?.messages ?? [];
    const toolMessages = [];
    messages.forEach((message, i) => {
      if (message.type !== "ai" || !message.tool_calls?.length) return;
      if (messages[i + 1]?.type === "tool") return;
      for (const tc of message.tool_calls) {
        toolMessages.push({
          type: "tool",
          tool_call_id: tc.id ?? "",
          id: `do-not-render-${randomUUID()}`,
          name: tc.name,
          content: "Successfully handled tool call.",
        });
      }
    });
    const human = { id: randomUUID(), type: "human", content: [{ type: "text", text }] };
    return this.submit(
      { messages: [...toolMessages, human] },
      { streamMode: ["values"], streamSubgraphs: true, streamResumable: true },
    );
  }

  /** use-interrupted-actions.tsx resumeRun: `submit({}, {command: {resume: {decisions}}})`. */
  async decide(decision) {
    return this.submit({}, { command: { resume: { decisions: [decision] } } });
  }

  /** use-interrupted-actions.tsx handleResolve ("Mark as Resolved"): `submit({}, {command: {goto: END}})`. */
  async resolve() {
    return this.submit({}, { command: { goto: "__end__" } });
  }

  values() {
    return this.history[0]?.values;
  }

  interrupt() {
    const head = this.history[0];
    return head?.values?.__interrupt__?.[0] ?? head?.tasks?.[0]?.interrupts?.[0];
  }

  lastMessage() {
    return this.values().messages.at(-1);
  }
}

async function status(promise) {
  try {
    await promise;
  } catch (error) {
    return error.status;
  }
  return 200;
}

const streamModes = (tab) => tab.sent.map((s) => s.streamMode);

// -- a message, an interrupt, and every decision the approval card sends -------------------------

{
  const tab = new Tab(alice, "assistant");
  const parts = await tab.say("delete acct_js1");
  assert.deepEqual(tab.createdMetadata, {}, "a thread created with no metadata shows none");
  assert.ok(parts.some((p) => p.event === "messages"), "messages-tuple parts while the model writes");
  assert.deepEqual(parts.filter((p) => p.event === "custom"), [], "no custom graph output from repertory");
  const interrupt = tab.interrupt();
  assert.equal(interrupt.value.action_requests[0].name, "delete_account");
  assert.deepEqual(interrupt.value.review_configs[0].allowed_decisions, ["approve", "edit", "reject"]);

  await tab.decide({ type: "approve" });
  assert.equal(tab.interrupt(), undefined);
  assert.equal(tab.lastMessage().content, "finished: deleted acct_js1 (approved by alice)");
  assert.deepEqual(tab.sent[1].input, {}, "the approval carried input: {} beside its command");
  assert.ok(tab.sent[1].checkpoint?.checkpoint_id, "and the thread head's checkpoint");

  await tab.say("delete acct_js2");
  await tab.decide({ type: "reject", message: "not this one" });
  assert.equal(tab.lastMessage().content, "finished: not this one (error)");

  await tab.say("delete acct_js3");
  await tab.decide({ type: "edit", edited_action: { name: "delete_account", args: { account_id: "acct_js4" } } });
  assert.equal(tab.lastMessage().content, "finished: deleted acct_js4 (approved by alice)");

  await tab.say("delete acct_js5");
  const waiting = tab.interrupt();
  await tab.resolve();
  assert.equal(tab.interrupt(), undefined, "Mark as Resolved ends the waiting run");
  const [call, result] = tab.values().messages.slice(-2);
  assert.equal(call.tool_calls[0].id, waiting.id);
  assert.equal(result.type, "tool");
  assert.equal(result.status, "error");
  assert.equal((await alice.threads.get(tab.threadId)).status, "idle");

  // The user types instead of deciding: the page adds made-up results for the open call.
  await tab.say("delete acct_js6");
  await tab.say("hello instead");
  assert.equal(tab.lastMessage().content, "Hello! How can I help?");
  assert.ok(tab.sent.at(-1).input.messages.length === 2, "a made-up tool result was sent ahead of the message");
  const tools = tab.values().messages.filter((m) => m.type === "tool");
  assert.notEqual(tools.at(-1).content, "Successfully handled tool call.");

  // Reload: the page reads the history of the thread in its URL.
  const reloaded = await alice.threads.getHistory(tab.threadId, { limit: 10 });
  assert.deepEqual(reloaded[0].values, tab.values());
  const sidebar = await alice.threads.search({ metadata: { graph_id: "assistant" }, limit: 100 });
  assert.ok(sidebar.some((t) => t.thread_id === tab.threadId), "the history sidebar lists the thread");
  // The state at an earlier checkpoint (what branching and edit-and-rerun read).
  const older = reloaded[3];
  assert.deepEqual(await alice.threads.getState(tab.threadId, older.checkpoint.checkpoint_id), older);
  assert.deepEqual(await alice.threads.getState(tab.threadId, older.checkpoint), older);
  const below = await alice.threads.getHistory(tab.threadId, { limit: 2, before: older.checkpoint });
  assert.deepEqual(below.map((s) => s.checkpoint), reloaded.slice(4, 6).map((s) => s.checkpoint));

  summary.runs = tab.sent.length;
  summary.streamModes = unique(streamModes(tab).map((m) => m.join(",")));
  summary.threadId = tab.threadId;
}

// -- an assistant that is not the server's first ---------------------------------------------------

{
  const tab = new Tab(alice, "second");
  await tab.say("hi");
  assert.equal(tab.lastMessage().content, "second here");
  const thread = await alice.threads.get(tab.threadId);
  assert.equal(thread.metadata.graph_id, "second");
  assert.equal(thread.metadata.assistant_id, "second");
  const sidebar = await alice.threads.search({ metadata: { graph_id: "second" }, limit: 100 });
  assert.ok(sidebar.some((t) => t.thread_id === tab.threadId));
  await tab.say("again");
  assert.equal(tab.lastMessage().content, "second here");
  summary.second = tab.threadId;
}

// -- tenancy: another owner's key ------------------------------------------------------------------

{
  assert.equal(await status(bob.threads.get(summary.threadId)), 404);
  assert.equal(await status(bob.threads.getHistory(summary.threadId, { limit: 10 })), 404);
  assert.equal(await status(bob.threads.getState(summary.threadId)), 404);
  const streaming = async () => {
    const input = { messages: [{ type: "human", content: [{ type: "text", text: "hello" }] }] };
    for await (const _ of bob.runs.stream(summary.threadId, "assistant", { input })) {
      // nothing: the request itself is refused
    }
  };
  assert.equal(await status(streaming()), 404);
  const bobs = await bob.threads.search({ metadata: { graph_id: "assistant" }, limit: 100 });
  assert.ok(!bobs.some((t) => t.thread_id === summary.threadId), "bob's sidebar does not list alice's thread");
  summary.tenancy = "404";
}

// -- delete: the thread goes, its copy (a fork) stays whole ---------------------------------------

{
  const copy = await alice.threads.copy(summary.threadId);
  const before = await alice.threads.getState(copy.thread_id);
  await alice.threads.delete(summary.threadId);
  assert.equal(await status(alice.threads.get(summary.threadId)), 404);
  const after = await alice.threads.getState(copy.thread_id);
  assert.deepEqual(after.values, before.values);
  await alice.threads.update(copy.thread_id, { metadata: { pinned: true } });
  assert.equal((await alice.threads.get(copy.thread_id)).metadata.pinned, true);
  summary.deleted = summary.threadId;
  summary.copy = copy.thread_id;
}

console.log(JSON.stringify(summary));
