// A chat page built the way the AI SDK's docs build one: useChat with DefaultChatTransport and
// resume: true. Bundled by esbuild at test time (tests/http/protocols/test_aisdk_usechat.py) from
// the lockfile's packages. The query string names the chat route (?api=), the key and the chat id.
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';

const params = new URLSearchParams(location.search);
const api = params.get('api');
const key = params.get('key');
const chatId = params.get('chat');
const headers = { 'x-api-key': key };

function Part({ part, answer }) {
  if (part.type === 'text') return <p className="text">{part.text}</p>;
  if (part.type === 'reasoning') return <p className="reasoning">{part.text}</p>;
  if (!part.type.startsWith('tool-')) return null;
  return (
    <div className="tool" data-state={part.state}>
      <span>{part.type.slice(5)}: {part.state}</span>
      {part.state === 'approval-requested' && (
        <>
          <button onClick={() => answer({ id: part.approval.id, approved: true })}>Approve</button>
          <button onClick={() => answer({ id: part.approval.id, approved: false, reason: 'not from the page' })}>
            Reject
          </button>
        </>
      )}
      {part.state === 'output-available' && <span className="output">{JSON.stringify(part.output)}</span>}
    </div>
  );
}

function Chat({ initial }) {
  const { messages, sendMessage, status, addToolApprovalResponse, stop } = useChat({
    id: chatId,
    messages: initial,
    resume: true,
    transport: new DefaultChatTransport({ api, headers }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState('');
  return (
    <main>
      <div id="status" data-status={status}>{status}</div>
      <ol id="messages">
        {messages.map(m => (
          <li key={m.id} className="message" data-role={m.role} data-id={m.id}>
            {m.parts.map((p, i) => <Part key={i} part={p} answer={addToolApprovalResponse} />)}
          </li>
        ))}
      </ol>
      <form
        onSubmit={e => {
          e.preventDefault();
          sendMessage({ text: input });
          setInput('');
        }}
      >
        <input aria-label="Message" value={input} onChange={e => setInput(e.target.value)} />
        <button type="submit">Send</button>
      </form>
      <button
        onClick={() => {
          stop();
          fetch(`${api}/${chatId}/stop`, { method: 'POST', headers });
        }}
      >
        Stop
      </button>
    </main>
  );
}

function App() {
  const [initial, setInitial] = useState(null);
  useEffect(() => {
    fetch(`${api}/${chatId}/messages`, { headers })
      .then(r => (r.ok ? r.json() : []))
      .then(setInitial, () => setInitial([]));
  }, []);
  return initial === null ? <p>loading</p> : <Chat initial={initial} />;
}

createRoot(document.getElementById('root')).render(<App />);
