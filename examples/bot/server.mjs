// @ts-check
// An example Parley bot (docs/integration.md "Bots"): a small Node server that receives Parley's
// webhooks, verifies each with the `standardwebhooks` package, answers the visitor through
// POST /bot/message/send, and hands the conversation off to the agents (POST /bot/chat/handoff)
// when the visitor writes "human". No framework, no build step: `node examples/bot/server.mjs`.
//
// Environment:
//   PARLEY_URL       the gateway, e.g. https://chat.example.com
//   PARLEY_BOT_KEY   the bot's API key (`prly_…`, from createBot / POST /agent/bot/create)
//   PARLEY_BOT_ID    the bot's id (from the same answer): the bot answers only its own conversations
//   WEBHOOK_SECRET   the endpoint's signing secret (`whsec_…`, from createWebhookEndpoint)
//   PORT             where to listen (default 8787; 0 picks a free port)
//   HOST             default 127.0.0.1
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const { PARLEY_URL, PARLEY_BOT_KEY, PARLEY_BOT_ID, WEBHOOK_SECRET } = process.env;
if (!PARLEY_URL || !PARLEY_BOT_KEY || !PARLEY_BOT_ID || !WEBHOOK_SECRET) {
  console.error('set PARLEY_URL, PARLEY_BOT_KEY, PARLEY_BOT_ID and WEBHOOK_SECRET');
  process.exit(2);
}
const webhook = new Webhook(WEBHOOK_SECRET);
/** Largest webhook body read (Parley's are a few kilobytes). */
const MAX_BODY = 256 * 1024;

/**
 * Calls a /bot/* endpoint with the bot's key; answers the envelope's `data`. A refusal with code
 * 1206 (HANDED_OFF: a human has the conversation) is expected after a hand-off and answered null.
 * @param {string} path @param {Record<string, string>} body
 */
async function callParley(path, body) {
  const res = await fetch(new URL(path, PARLEY_URL), {
    method: 'POST',
    headers: { authorization: `Bearer ${PARLEY_BOT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const envelope = await res.json();
  if (envelope.code === 0) return envelope.data;
  if (envelope.code === 1206) return null;
  throw new Error(`${path}: ${envelope.code} ${envelope.msg}`);
}

/** What the bot says to a visitor's text (replace with your own logic). @param {string} text */
const answerTo = (text) => `You said “${text.slice(0, 200)}”. I am a bot: write “human” to talk to one of our agents.`;

/**
 * One verified event. Every call is safe to repeat: Parley delivers at least once, and the
 * bot's `client_msg_id` is derived from what it answers, so a redelivery sends nothing twice.
 * @param {{ type: string, data: any }} event
 */
async function handle(event) {
  if (event.type === 'conversation.created' && event.data.bot_id === PARLEY_BOT_ID) {
    await callParley('/bot/message/send', {
      visitor_id: event.data.visitor_id,
      client_msg_id: `greet-${event.data.conversation_id}`,
      type: 'text',
      content: 'Hello! I am the shop’s bot. How can I help?',
    });
    return;
  }
  if (event.type !== 'message.created' || event.data.bot_id !== PARLEY_BOT_ID) return;
  const message = event.data.message;
  if (message.sender_type !== 'visitor' || message.type !== 'text') return;
  if (/^\s*human\s*[.!]?\s*$/i.test(message.content)) {
    const result = await callParley('/bot/chat/handoff', { visitor_id: message.visitor_id });
    console.log(`handed off ${message.conversation_id}: ${result?.handed_off ? 'done' : 'already'}`);
    return;
  }
  await callParley('/bot/message/send', {
    visitor_id: message.visitor_id,
    client_msg_id: `reply-${message.id}`,
    type: 'text',
    content: answerTo(message.content),
  });
}

const server = createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/webhooks') {
    res.writeHead(404).end();
    return;
  }
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY) req.destroy();
    else chunks.push(chunk);
  });
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let event;
    try {
      // Checks the signature (webhook-signature over webhook-id, webhook-timestamp and the body)
      // and that the timestamp is recent: a forged or replayed request is refused here.
      event = webhook.verify(body, {
        'webhook-id': String(req.headers['webhook-id']),
        'webhook-timestamp': String(req.headers['webhook-timestamp']),
        'webhook-signature': String(req.headers['webhook-signature']),
      });
    } catch {
      res.writeHead(401).end();
      return;
    }
    // Answered after the work: a failure answers 500 and Parley delivers the event again (with
    // backoff), which is safe since every step is idempotent.
    handle(/** @type {{ type: string, data: any }} */ (event)).then(
      () => res.writeHead(204).end(),
      (error) => {
        console.error(`event ${req.headers['webhook-id']}: ${error.message}`);
        res.writeHead(500).end();
      },
    );
  });
});

server.listen(Number(process.env.PORT ?? 8787), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address();
  console.log(`example bot listening on port ${typeof address === 'object' && address ? address.port : '?'}`);
});
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => server.close(() => process.exit(0)));
