// The `ai` package's own client against repertory's AI SDK routes, under node.
//
// DefaultChatTransport sends what useChat sends and parses every chunk with the package's
// uiMessageChunkSchema (a chunk that does not fit throws); readUIMessageStream builds the UIMessage
// exactly as useChat does. Usage: node aisdk_stream.mjs URL KEY OTHER_KEY. Throws on the first
// expectation that fails; prints one JSON line of results for the Python side to compare with the
// store.
import assert from 'node:assert/strict';
import {
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
} from 'ai';

const [url, key, otherKey] = process.argv.slice(2);
const chatApi = agent => `${url}/ai-sdk/${agent}/chat`;
const transport = (agent, k = key) =>
  new DefaultChatTransport({ api: chatApi(agent), headers: { 'x-api-key': k } });
const newId = () => `chat-${Math.random().toString(36).slice(2, 12)}`;
const user = text => ({ id: `u-${Math.random().toString(36).slice(2)}`, role: 'user', parts: [{ type: 'text', text }] });

async function read(stream, message) {
  let last;
  for await (const m of readUIMessageStream({ stream, message, terminateOnError: true })) last = m;
  return structuredClone(last);
}

async function turn(agent, chatId, messages, message) {
  const stream = await transport(agent).sendMessages({
    chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
  });
  return read(stream, message);
}

const textOf = m => m.parts.filter(p => p.type === 'text').map(p => p.text).join('');
const run = m => m.parts.find(p => p.type === 'data-repertory-run');
const tool = (m, name) => m.parts.find(p => p.type === `tool-${name}`);
const out = {};

// -- the raw wire: header, every chunk valid, [DONE] at the end ----------------------------------
{
  const chatId = newId();
  const res = await fetch(chatApi('chat'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ id: chatId, messages: [user('hello there')], trigger: 'submit-message' }),
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const [raw, forParse] = res.body.tee();
  const types = [];
  for await (const r of parseJsonEventStream({ stream: forParse, schema: uiMessageChunkSchema })) {
    assert.ok(r.success, `a chunk the ai package refuses: ${JSON.stringify(r.rawValue)}`);
    types.push(r.value.type);
  }
  const text = await new Response(raw).text();
  assert.ok(text.endsWith('data: [DONE]\n\n'));
  assert.equal(types[0], 'start');
  assert.equal(types.at(-1), 'finish');
  out.wire = types;
}

// -- chat ----------------------------------------------------------------------------------------
{
  const chatId = newId();
  const first = user('hello there');
  const m = await turn('chat', chatId, [first]);
  assert.equal(m.role, 'assistant');
  assert.equal(textOf(m), 'Hello there, friend.');
  assert.equal(run(m).data.status, 'done');
  assert.equal(m.id, run(m).data.runId); // the message is the turn's run
  const second = await turn('chat', chatId, [first, m, user('research otters')]);
  assert.equal(tool(second, 'lookup').state, 'output-available');
  assert.equal(tool(second, 'lookup').output, 'facts about otters');
  assert.equal(second.parts.find(p => p.type === 'reasoning').text, 'a lookup first');
  assert.equal(textOf(second), 'research done: facts about otters');
  assert.equal(second.parts.filter(p => p.type === 'step-start').length, 2);
  out.chat = { chatId, replies: [textOf(m), textOf(second)] };
}

// -- approvals: approve once (a second answer is refused), reject with a reason --------------------
async function approval(account, approved, reason) {
  const chatId = newId();
  const ask = user(`delete ${account}`);
  const asked = await turn('chat', chatId, [ask]);
  const part = tool(asked, 'delete_account');
  assert.equal(part.state, 'approval-requested');
  assert.equal(run(asked).data.status, 'suspended');
  // What addToolApprovalResponse leaves in the message, sent back whole as useChat does.
  const answered = structuredClone(asked);
  const p = tool(answered, 'delete_account');
  p.state = 'approval-responded';
  p.approval = { ...p.approval, approved, ...(reason ? { reason } : {}) };
  const done = await turn('chat', chatId, [ask, answered], structuredClone(answered));
  assert.equal(done.id, asked.id);
  let again;
  try {
    await transport('chat').sendMessages({ chatId, messages: [ask, answered], trigger: 'submit-message' });
  } catch (e) {
    again = { status: e.statusCode, body: e.responseBody };
  }
  assert.equal(again?.status, 409, 'a second answer to one approval must be refused');
  return { chatId, done, again };
}
{
  const yes = await approval('a1', true);
  assert.equal(tool(yes.done, 'delete_account').state, 'output-available');
  assert.equal(tool(yes.done, 'delete_account').output, 'deleted a1');
  assert.equal(textOf(yes.done), 'finished: deleted a1');
  const decided = yes.done.parts.find(p => p.type === 'data-repertory-approval');
  assert.equal(decided.data.decision, 'approved');
  const no = await approval('a2', false, 'not this one');
  assert.equal(tool(no.done, 'delete_account').state, 'output-denied');
  assert.equal(textOf(no.done), 'finished: not this one (refused)');
  out.approvals = { approved: yes.chatId, rejected: no.chatId, refused: yes.again.body };
}

// -- a suspend() answered with the call's output, as addToolOutput leaves it ---------------------
{
  const chatId = newId();
  const ask = user('ask me');
  const asked = await turn('chat', chatId, [ask]);
  assert.equal(tool(asked, 'ask_human').state, 'input-available');
  const waiting = asked.parts.find(p => p.type === 'data-repertory-suspended');
  assert.equal(waiting.data.payload.question, 'which color?');
  const answered = structuredClone(asked);
  Object.assign(tool(answered, 'ask_human'), { state: 'output-available', output: 'blue' });
  const done = await turn('chat', chatId, [ask, answered], structuredClone(answered));
  assert.equal(textOf(done), 'you said blue');
  out.suspended = { chatId, text: textOf(done) };
}

// -- resume: drop the POST mid-reply, reconnect, get the whole reply; 204 once it is over ----------
async function resumed(agent) {
  const chatId = newId();
  const abort = new AbortController();
  const stream = await transport(agent).sendMessages({
    chatId, messages: [user('slow 30')], trigger: 'submit-message', abortSignal: abort.signal,
  });
  const reader = stream.getReader();
  let deltas = 0;
  while (deltas < 3) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the reply ended before the client dropped it');
    if (value.type === 'text-delta') deltas += 1;
  }
  abort.abort();
  await reader.cancel().catch(() => {});
  const again = await transport(agent).reconnectToStream({ chatId });
  assert.ok(again, 'a running turn must be resumable');
  const [counted, built] = again.tee();
  let replayedDeltas = 0;
  for await (const chunk of counted) if (chunk.type === 'text-delta') replayedDeltas += 1;
  const m = await read(built);
  assert.equal(run(m).data.status, 'done');
  assert.match(textOf(m), /^\[[0-9a-f]{6}\] w0 w1 .* w29$/);
  assert.equal(await transport(agent).reconnectToStream({ chatId }), null); // nothing runs: 204
  return { chatId, text: textOf(m), messageId: m.id, replayedDeltas };
}
out.resume = await resumed('chat');
out.resumeLive = await resumed('live');

// -- 204 for a chat nobody has, and for another owner's ------------------------------------------
assert.equal(await transport('chat').reconnectToStream({ chatId: newId() }), null);
assert.equal(await transport('chat', otherKey).reconnectToStream({ chatId: out.chat.chatId }), null);

// -- stop: the explicit route cancels the running turn; the stream says abort --------------------
{
  const chatId = newId();
  const stream = await transport('chat').sendMessages({
    chatId, messages: [user('slow 400')], trigger: 'submit-message',
  });
  const reader = stream.getReader();
  const seen = [];
  let stopped;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    seen.push(value.type);
    if (value.type === 'text-delta' && stopped === undefined) {
      const res = await fetch(`${chatApi('chat')}/${chatId}/stop`, { method: 'POST', headers: { 'x-api-key': key } });
      stopped = await res.json();
    }
  }
  assert.equal(stopped.stopped.length, 1);
  assert.equal(seen.at(-1), 'abort');
  out.stop = { chatId, seen: seen.filter(t => t !== 'text-delta') };
}

// -- tenancy and bad input -----------------------------------------------------------------------
{
  const theirs = await fetch(`${chatApi('chat')}/${out.chat.chatId}/messages`, { headers: { 'x-api-key': otherKey } });
  assert.equal(theirs.status, 404);
  const stop = await fetch(`${chatApi('chat')}/${out.chat.chatId}/stop`, { method: 'POST', headers: { 'x-api-key': otherKey } });
  assert.equal(stop.status, 404);
  let taken;
  try {
    await transport('chat', otherKey).sendMessages({ chatId: out.chat.chatId, messages: [user('hello')], trigger: 'submit-message' });
  } catch (e) {
    taken = e.statusCode;
  }
  assert.equal(taken, 422);
  const bad = await fetch(chatApi('chat'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ id: newId(), trigger: 'submit-message' }),
  });
  assert.equal(bad.status, 422);
  out.badInput = (await bad.json()).detail;
  const file = await fetch(chatApi('chat'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ id: newId(), messages: [{ id: 'f', role: 'user', parts: [{ type: 'file', url: 'x', mediaType: 'image/png' }] }] }),
  });
  assert.equal(file.status, 422);
  out.fileInput = (await file.json()).detail;
  const anonymous = await fetch(`${chatApi('chat')}/${out.chat.chatId}/stream`);
  assert.equal(anonymous.status, 401);
}

console.log(JSON.stringify(out));
