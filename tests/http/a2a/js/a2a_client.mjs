// The A2A JavaScript SDK's own client (@a2a-js/sdk, JSON-RPC, protocol 1.0) against a repertory agent.
// Usage: node a2a_client.mjs <agent url> <api key> send|stream <text>
// Prints one JSON line per result: {"kind": "task", ...} for send, one line per stream event for stream.
import { randomUUID } from "node:crypto";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const [url, key, mode, text] = process.argv.slice(2);

// The key travels as every request's x-api-key header: the card's fetch and every JSON-RPC call.
const fetchImpl = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("x-api-key", key);
  return fetch(input, { ...init, headers });
};

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  }),
);
// The card's full URL with an empty path: the resolver would put an absolute path at the host's root.
const client = await factory.createFromUrl(`${url}/.well-known/agent-card.json`, "");

const request = {
  tenant: "",
  message: {
    messageId: randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  },
  configuration: undefined,
  metadata: undefined,
};

const texts = (parts) => parts.filter((p) => p.content?.$case === "text").map((p) => p.content.value).join("");
const state = (s) => Object.keys(TaskState).find((k) => TaskState[k] === s) ?? String(s);

function line(event) {
  const { $case, value } = event.payload ?? event;
  if ($case === "task") {
    return {
      kind: "task",
      id: value.id,
      contextId: value.contextId,
      state: state(value.status?.state),
      artifacts: value.artifacts.map((a) => ({ id: a.artifactId, text: texts(a.parts) })),
    };
  }
  if ($case === "statusUpdate") {
    return { kind: "status", taskId: value.taskId, state: state(value.status?.state) };
  }
  if ($case === "artifactUpdate") {
    return {
      kind: "artifact",
      taskId: value.taskId,
      id: value.artifact?.artifactId,
      text: texts(value.artifact?.parts ?? []),
      append: value.append,
      lastChunk: value.lastChunk,
    };
  }
  return { kind: $case };
}

if (mode === "send") {
  const result = await client.sendMessage(request); // a Task or a Message, no payload wrapper
  console.log(JSON.stringify(line({ $case: "status" in result ? "task" : "message", value: result })));
} else {
  for await (const event of client.sendMessageStream(request)) {
    console.log(JSON.stringify(line(event)));
  }
}
