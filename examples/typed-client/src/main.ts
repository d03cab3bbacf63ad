import { fileURLToPath } from 'node:url';
import {
  AgentWorkbenchDocument,
  ChannelDocument,
  type ChannelSubscription,
  IssueVisitorTokenDocument,
  LoginDocument,
  VisitorBootstrapDocument,
} from './generated/graphql.js';
import { connect, request, subscribe } from './graphql-client.js';

/**
 * The example frontend flow, typed end to end by the generated documents:
 *  visitor — issueVisitorToken → visitorBootstrap → subscribe to its own channel over graphql-ws;
 *  agent   — login captcha → login → agentWorkbench → subscribe to `agent-{agentId}`;
 * then an event published through POST /internal/events arrives on both subscriptions.
 */
export interface ExampleOptions {
  /** The gateway, e.g. http://localhost:3000. */
  base: string;
  appkey: string;
  username: string;
  password: string;
  /**
   * The login captcha answer. A person reads it from the image; this unattended example only
   * works against a server started with CAPTCHA_TEST_ANSWER (tests and CI).
   */
  captcha: string;
  /** INTERNAL_API_TOKEN of the server, to publish the test event. */
  internalToken: string;
  log?: (line: string) => void;
}

export interface ExampleSummary {
  visitor: { uid: string; channel: string; imageMaxBytes: number };
  agent: { agentId: string; bid: string; conversations: number };
  received: { visitor: ChannelSubscription['channel']; agent: ChannelSubscription['channel'] };
}

export async function runExample(options: ExampleOptions): Promise<ExampleSummary> {
  const log = options.log ?? (() => {});
  const { base } = options;

  // Visitor: a token, the bootstrap, and its own channel (used exactly as returned).
  const { issueVisitorToken } = await request(base, IssueVisitorTokenDocument, {
    appkey: options.appkey,
    nickname: 'Typed Example',
  });
  const bearer = { authorization: `Bearer ${issueVisitorToken.token}` };
  const { visitorBootstrap } = await request(base, VisitorBootstrapDocument, {}, { headers: bearer });
  const { visitor, setting } = visitorBootstrap;
  log(
    `visitor ${visitor.uid} (${visitor.nickname}) on ${visitor.channel}; images up to ${setting.uploadLimits.imageMaxBytes} bytes`,
  );

  // Agent: the captcha fetch starts the Session (cookie) the login mutation must carry.
  const captchaResponse = await fetch(new URL('/agent/login/logincaptcha', base));
  await captchaResponse.arrayBuffer();
  const cookie = captchaResponse.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
  const { login } = await request(
    base,
    LoginDocument,
    { username: options.username, password: options.password, captcha: options.captcha },
    { cookie },
  );
  const agentHeaders = { token: login.token };
  const { agentWorkbench } = await request(base, AgentWorkbenchDocument, {}, { headers: agentHeaders });
  const { agent } = agentWorkbench;
  log(
    `agent ${agent.nickname} (${agent.agentId}, ${agent.level}) of ${agentWorkbench.setting.bid}: ${agentWorkbench.chatting.length} conversations`,
  );

  // Real-time: both identities on the ws_address their bootstrap gave, each on its own channel.
  const visitorSocket = connect(setting.wsAddress, { appkey: setting.appkey, ...bearer });
  const agentSocket = connect(agentWorkbench.setting.wsAddress, {
    appkey: agentWorkbench.setting.appkey,
    token: login.token,
  });
  try {
    const firstEvent = (events: AsyncGenerator<ChannelSubscription>, name: string) =>
      (async () => {
        for await (const { channel } of events) if (channel.event === name) return channel;
        throw new Error(`subscription ended before ${name}`);
      })();
    const name = `example.ping.${Date.now()}`;
    const visitorEvent = firstEvent(subscribe(visitorSocket, ChannelDocument, { name: visitor.channel }), name);
    const agentEvent = firstEvent(subscribe(agentSocket, ChannelDocument, { name: `agent-${agent.agentId}` }), name);

    // A subscription is live a moment after it is sent: publish until both have seen the event.
    let done = false;
    const both = Promise.all([visitorEvent, agentEvent]).finally(() => {
      done = true;
    });
    const deadline = Date.now() + 15_000;
    while (!done) {
      if (Date.now() > deadline) throw new Error('the published event did not arrive within 15 s');
      for (const channel of [visitor.channel, `agent-${agent.agentId}`]) {
        await publish(base, options.internalToken, channel, name, { from: 'typed example' });
      }
      await Promise.race([both, new Promise((r) => setTimeout(r, 300))]);
    }
    const [fromVisitor, fromAgent] = await both;
    log(`received ${fromVisitor.event} on ${fromVisitor.channel} and on ${fromAgent.channel}`);
    return {
      visitor: { uid: visitor.uid, channel: visitor.channel, imageMaxBytes: setting.uploadLimits.imageMaxBytes },
      agent: { agentId: agent.agentId, bid: agentWorkbench.setting.bid, conversations: agentWorkbench.chatting.length },
      received: { visitor: fromVisitor, agent: fromAgent },
    };
  } finally {
    await Promise.all([visitorSocket.dispose(), agentSocket.dispose()]);
  }
}

async function publish(base: string, token: string, channel: string, event: string, data: unknown) {
  const res = await fetch(new URL('/internal/events', base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ channel, event, data }),
  });
  if (res.status !== 202) throw new Error(`publish answered HTTP ${res.status}: ${await res.text()}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const env = process.env;
  try {
    const summary = await runExample({
      base: env.PARLEY_URL ?? 'http://localhost:3000',
      appkey: env.PARLEY_APPKEY ?? 'demo-appkey',
      username: env.PARLEY_USERNAME ?? 'alice',
      password: env.PARLEY_PASSWORD ?? 'alice-password',
      captcha: env.PARLEY_CAPTCHA ?? '',
      internalToken: env.INTERNAL_API_TOKEN ?? '',
      log: (line) => console.log(line),
    });
    console.log(JSON.stringify(summary));
  } catch (error) {
    console.error(`example failed: ${(error as Error).message}`);
    process.exitCode = 1;
  }
}
