import { createHash } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { publishEvent } from '../../src/resolvers/channels.js';
import type { EventBus } from '../../src/stores/bus.js';
import { GraphqlWsConnection } from '../../src/subscriptions/ws-connection.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import {
  type ChannelSubscription,
  type CloseInfo,
  closeAllSockets,
  connectSocket,
  eventually,
  rawSocket,
  type TestSocket,
} from '../support/ws.js';

/**
 * A graphql-ws socket's life through a real gateway, each outcome by value: a subscription that
 * falls behind while catching up ends its socket (1013 and its reason), a failure while handling
 * a client message closes 4500, a logout and a level change reach the socket's subscriptions, an
 * `authorization` that is not a string is refused, the socket's context resolves its own visitor,
 * and an answer due on a socket the client already closed goes nowhere without an error.
 */

/** The close reason of a slow consumer over graphql-ws (src/subscriptions/ws-connection.ts). */
const SLOW_REASON = 'Slow consumer: reconnect and resume with since';
/** Live events a subscription may hold while it catches up (src/stores/bus.ts, DEFAULT_MAX_QUEUED_EVENTS). */
const MAX_QUEUED = 500;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterEach(async () => {
  vi.restoreAllMocks();
  await closeAllSockets();
});
afterAll(() => t?.stop());

/** A new visitor of demo-appkey: its token, uid and the channel its bootstrap gives it. */
async function visitor() {
  const { token, uid } = await visitorToken(t.url);
  const { body } = await new HttpClient(t.url).json<{ visitor: { channel: string } }>('/visitor/data/get', {
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
  });
  return { token, uid, channel: body.data.visitor.channel };
}

const visitorSocket = (token: string) =>
  connectSocket(t.wsUrl, { appkey: 'demo-appkey', authorization: `Bearer ${token}` });
const agentSocket = (token: string) => connectSocket(t.wsUrl, { appkey: 'demo-appkey', token });

/** The close of a socket the test expects to close, or a failure naming `what` when it stays open. */
function closeOf(socket: TestSocket, what: string, timeoutMs = 10_000): Promise<CloseInfo> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the socket stayed open: ${what}`)), timeoutMs);
  });
  return Promise.race([socket.closed, late]).finally(() => clearTimeout(timer));
}

/** How `connection_init` was refused: the close, or a failure naming `what` once the socket is acknowledged. */
function refusalOf(socket: TestSocket, what: string): Promise<CloseInfo> {
  const accepted = socket.acked.then(
    () => Promise.reject(new Error(`the socket was accepted: ${what}`)),
    () => new Promise<never>(() => {}),
  );
  return Promise.race([closeOf(socket, what), accepted]);
}

/** How a subscription ended, or a failure naming `what` when it carries on. */
function endOf(sub: ChannelSubscription, what: string, timeoutMs = 10_000) {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the subscription carried on: ${what}`)), timeoutMs);
  });
  return Promise.race([sub.ended, late]).finally(() => clearTimeout(timer));
}

/** One operation over the client's socket, answered whole (data and errors). */
function operate(socket: TestSocket, query: string) {
  return new Promise<{ data?: unknown; errors?: unknown }>((resolve, reject) => {
    let answer: { data?: unknown; errors?: unknown } = {};
    socket.client.subscribe(
      { query },
      {
        next: (result) => {
          answer = result as typeof answer;
        },
        error: reject,
        complete: () => resolve(answer),
      },
    );
  });
}

/**
 * Holds the catch-up of new subscriptions to `channel` (their replay read) until released, and
 * counts the live events the channel's feed has walked to its subscriptions meanwhile.
 */
function holdCatchUp(channel: string) {
  const bus = t.app.deps.bus;
  const original = bus.subscribe;
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let walked = 0;
  let live = false;
  const subscribe: EventBus['subscribe'] = (name, opts) => {
    const events = original(name, opts);
    if (name !== channel) return events;
    if (opts?.replayOnly) {
      return (async function* () {
        await released;
        yield* events;
      })();
    }
    return (async function* () {
      for await (const event of events) {
        yield event;
        // Past the yield: the fan-out has walked this event and asks for the next.
        if (event.event === 'subscribed') live = true;
        else walked++;
      }
    })();
  };
  bus.subscribe = subscribe;
  return {
    /** Whether the channel's feed listens: an event published before would not reach it. */
    live: () => live,
    walked: () => walked,
    release,
    restore() {
      release();
      bus.subscribe = original;
    },
  };
}

describe('a slow consumer over graphql-ws', () => {
  it('a subscription holds 500 live events while it catches up; the 501st ends its socket with 1013 and the slow-consumer reason', async () => {
    // At the limit: the socket stays and the subscription goes live once its catch-up is done.
    const patient = await visitor();
    const kept = visitorSocket(patient.token);
    await kept.acked;
    let keptClosed: CloseInfo | undefined;
    void kept.closed.then((c) => {
      keptClosed = c;
    });
    const held = holdCatchUp(patient.channel);
    try {
      const sub = kept.channel(patient.channel);
      await eventually(held.live, 'the channel followed on this instance');
      for (let i = 0; i < MAX_QUEUED; i++) {
        await publishEvent(t.app.deps, { channel: patient.channel, event: 'bulk', data: { i } });
      }
      await eventually(() => held.walked() === MAX_QUEUED, `${MAX_QUEUED} events walked while catching up`);
      held.release();
      await eventually(() => sub.cursor || keptClosed, 'the subscription live after its catch-up');
      expect(keptClosed).toBeUndefined();
      await publishEvent(t.app.deps, { channel: patient.channel, event: 'after', data: {} });
      await sub.waitFor('after');
      expect(keptClosed).toBeUndefined();
    } finally {
      held.restore();
    }

    // One more than the limit: the socket is ended, and says why.
    const slow = await visitor();
    const ended = visitorSocket(slow.token);
    await ended.acked;
    const overflow = holdCatchUp(slow.channel);
    try {
      const sub = ended.channel(slow.channel);
      await eventually(overflow.live, 'the channel followed on this instance');
      for (let i = 0; i <= MAX_QUEUED; i++) {
        await publishEvent(t.app.deps, { channel: slow.channel, event: 'bulk', data: { i } });
      }
      expect(await closeOf(ended, 'past the catch-up queue')).toEqual({ code: 1013, reason: SLOW_REASON });
      expect(await sub.ended).toBe('closed');
      expect(sub.events).toEqual([]);
    } finally {
      overflow.restore();
    }
  });
});

describe('a failure while handling a client message closes the socket with 4500', () => {
  it('connection_init failing past the identity checks (the presence record): 4500 with the error, logged as an error', async () => {
    const alice = await agentSession(t.url, 'alice');
    vi.spyOn(t.app.deps.realtime.presence, 'connected').mockRejectedValueOnce(new Error('presence store down'));
    const socket = agentSocket(alice.token);
    expect(await refusalOf(socket, 'a failed connection_init')).toEqual({ code: 4500, reason: 'presence store down' });
    expect(t.logs.filter((l) => l.msg === 'graphql-ws message handling failed')).toContainEqual(
      expect.objectContaining({ level: 50, err: 'presence store down' }),
    );
    // Not the identity's fault: the next socket of the same Session is accepted.
    await agentSocket(alice.token).acked;
  });

  it('a reason that fits a close frame (123 bytes) is kept; a longer one, or any in production, is "Internal server error"', async () => {
    const alice = await agentSession(t.url, 'alice');
    const closeAfter = async (message: string) => {
      vi.spyOn(t.app.deps.realtime.presence, 'connected').mockRejectedValueOnce(new Error(message));
      return refusalOf(agentSocket(alice.token), `connection_init failing with ${message}`);
    };
    const fits = 'f'.repeat(123);
    expect(await closeAfter(fits)).toEqual({ code: 4500, reason: fits });
    // 62 characters of two bytes each: 124 bytes.
    expect(await closeAfter('é'.repeat(62))).toEqual({ code: 4500, reason: 'Internal server error' });

    // The adapter reads the environment when it answers: the running gateway's configuration
    // switched to production for one socket (a second gateway would cost a start).
    expect(t.app.deps.config).toBe(t.config);
    const env = t.config.env;
    t.config.env = 'production';
    try {
      expect(await closeAfter('presence store down')).toEqual({ code: 4500, reason: 'Internal server error' });
    } finally {
      t.config.env = env;
    }
  });
});

describe('the Session behind an agent socket ends (logout)', () => {
  it('both agent channels get session.ended (logout, the Session fingerprint) as their last event, then the socket closes 4401', async () => {
    const alice = await agentSession(t.url, 'alice');
    const socket = agentSocket(alice.token);
    const own = socket.channel('agent-a_alice');
    const global = socket.channel('global-demo');
    await eventually(() => own.cursor && global.cursor, 'both subscriptions live');

    const { body } = await alice.client.json('/agent/logout', { method: 'POST' });
    expect(body.code).toBe(0);

    expect(await closeOf(socket, 'after logout')).toEqual({ code: 4401, reason: 'Session ended: log in again' });
    expect(await own.ended).toBe('complete');
    expect(await global.ended).toBe('complete');
    const fingerprint = createHash('sha256').update(alice.token).digest('base64url').slice(0, 16);
    const ended = own.events.at(-1);
    expect(ended).toEqual({
      id: `agent-a_alice:${ended?.position}`,
      position: expect.any(String),
      channel: 'agent-a_alice',
      event: 'session.ended',
      data: { reason: 'logout', sessions: [fingerprint] },
      at: expect.any(String),
    });
    // On global-demo the same event, under that channel's name and id.
    expect(global.events.at(-1)).toEqual({
      ...ended,
      id: `global-demo:${ended?.position}`,
      channel: 'global-demo',
    });
    expect(global.events.filter((e) => e.event === 'session.ended')).toHaveLength(1);
  });
});

describe("an agent's level changes while its socket is subscribed", () => {
  const setLevel = async (admin: HttpClient, level: string) => {
    const { body } = await admin.graphql(
      `mutation { updateAgent(input: {agentId: "a_alice", level: ${level}}) { level } }`,
    );
    expect(body).toEqual({ data: { updateAgent: { level } } });
  };
  const NO_RECEPTION = {
    message: 'Online reception is not available to ticket agents; use the ticket entry',
    extensions: { code: 'FORBIDDEN' },
  };

  it('demoted to ticket_agent: every channel of its socket ends FORBIDDEN, the socket stays and judges new subscribes by the new level', async () => {
    const ada = await agentSession(t.url, 'ada');
    const alice = await agentSession(t.url, 'alice');
    const socket = agentSocket(alice.token);
    const own = socket.channel('agent-a_alice');
    const global = socket.channel('global-demo');
    // Another agent's socket on the same channel is not concerned.
    const adaSocket = agentSocket(ada.token);
    const adaGlobal = adaSocket.channel('global-demo');
    await eventually(() => own.cursor && global.cursor && adaGlobal.cursor, 'the subscriptions live');

    try {
      await setLevel(ada.client, 'ticket_agent');
      for (const sub of [own, global]) {
        expect(await endOf(sub, 'a channel a ticket agent may not hold')).toBe('complete');
        expect(sub.errors).toEqual([NO_RECEPTION]);
      }
      await publishEvent(t.app.deps, { channel: 'global-demo', event: 'after.demotion', data: {} });
      await adaGlobal.waitFor('after.demotion');
      expect(global.names()).not.toContain('after.demotion');
      // The socket and its Session stay: an operation still answers, a new subscribe is refused.
      expect(await operate(socket, '{ __typename }')).toEqual({ data: { __typename: 'Query' } });
      const again = socket.channel('global-demo');
      expect(await endOf(again, 'a subscribe after the demotion')).toBe('complete');
      // Refused by the subscribe resolver this time: the error names its field.
      expect(again.errors).toEqual([{ ...NO_RECEPTION, path: ['channel'] }]);
      expect(again.events).toEqual([]);

      // Back to agent: the same socket may subscribe again.
      await setLevel(ada.client, 'agent');
      await eventually(async () => {
        const retry = socket.channel('global-demo');
        await eventually(() => retry.cursor || retry.errors, 'an answer to the subscribe');
        return retry.cursor !== undefined;
      }, 'a subscribe allowed again after the promotion');
    } finally {
      const { body } = await ada.client.graphql(
        'mutation { updateAgent(input: {agentId: "a_alice", level: agent}) { level } }',
      );
      expect(body.errors).toBeUndefined();
    }
  });
});

describe('connection_init: authorization must be a string', () => {
  const REFUSED = { code: 4403, reason: 'authorization must be "Bearer <visitor token>"' };

  it.each([
    ['an array holding a valid Bearer token', (token: string) => [`Bearer ${token}`]],
    ['a nested array', (token: string) => [[`Bearer ${token}`]]],
    ['a number', () => 1234567890],
    ['an object', (token: string) => ({ bearer: token })],
    ['null', () => null],
  ])('%s is refused with 4403 and is not taken as a visitor', async (_name, authorization) => {
    const me = await visitor();
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', authorization: authorization(me.token) });
    expect(await refusalOf(socket, 'authorization not a string')).toEqual(REFUSED);
  });

  it('the same token as a string is accepted (the control)', async () => {
    const me = await visitor();
    await visitorSocket(me.token).acked;
  });
});

describe("the socket's operation context", () => {
  const BOOTSTRAP = '{ visitorBootstrap { visitor { uid channel } setting { wsAddress } } }';

  it('on a visitor socket, a visitor operation answers with that visitor, as over HTTP', async () => {
    const me = await visitor();
    const socket = visitorSocket(me.token);
    await socket.acked;
    const overHttp = await new HttpClient(t.url).graphql(BOOTSTRAP, undefined, { authorization: `Bearer ${me.token}` });
    const overSocket = await operate(socket, BOOTSTRAP);
    expect(overSocket).toEqual({
      data: {
        visitorBootstrap: {
          visitor: { uid: me.uid, channel: me.channel },
          setting: { wsAddress: expect.any(String) },
        },
      },
    });
    expect(overSocket).toEqual(overHttp.body);
  });

  it('on an agent socket, a visitor operation is refused as the domain refuses a missing visitor token', async () => {
    const alice = await agentSession(t.url, 'alice');
    const socket = agentSocket(alice.token);
    await socket.acked;
    let tokenLookups = 0;
    const stop = t.app.deps.database.onQuery((sql) => {
      if (/"visitor_tokens"/.test(sql)) tokenLookups++;
    });
    const answer = await operate(socket, '{ visitorBootstrap { visitor { uid } } }').finally(stop);
    // An agent socket carries no visitor token: refused before any token is looked up.
    expect(tokenLookups).toBe(0);
    expect(answer).toEqual({
      data: null,
      errors: [
        {
          message: 'Visitor token missing, invalid or expired: get a new visitor token',
          path: ['visitorBootstrap'],
          extensions: { code: 'UNAUTHENTICATED' },
        },
      ],
    });
  });
});

describe('an answer due on a socket the client has closed', () => {
  it('is dropped without an error: a ping and a query followed at once by the close', async () => {
    const me = await visitor();
    const raw = rawSocket(t.wsUrl);
    const acked = new Promise<void>((resolve) => {
      raw.ws.on('message', (data) => {
        if (JSON.parse(String(data)).type === 'connection_ack') resolve();
      });
    });
    await raw.opened;
    raw.ws.send(
      JSON.stringify({
        type: 'connection_init',
        payload: { appkey: 'demo-appkey', authorization: `Bearer ${me.token}` },
      }),
    );
    await acked;
    const logged = t.logs.length;
    // What graphql-ws hands the socket, the socket's state then, and how each send settled.
    const send = GraphqlWsConnection.prototype.send;
    const sent: { data: string; state: number; outcome: Promise<void> }[] = [];
    vi.spyOn(GraphqlWsConnection.prototype, 'send').mockImplementation(function (this: GraphqlWsConnection, data) {
      const outcome = send.call(this, data);
      sent.push({ data, state: this.socket.readyState, outcome });
      return outcome;
    });
    // One write: the server reads the ping, the query and the close frame together, so the pong
    // and the query's answer are sent after the socket began closing.
    raw.ws.send(JSON.stringify({ type: 'ping' }));
    raw.ws.send(JSON.stringify({ id: 'q', type: 'subscribe', payload: { query: '{ __typename }' } }));
    raw.ws.close(1000, 'bye');
    expect(await raw.closed).toEqual({ code: 1000, reason: 'bye' });
    await eventually(() => sent.length >= 2, 'the pong and the answer handed to the socket');
    const settled = (outcomes: { outcome: Promise<void> }[]) => Promise.allSettled(outcomes.map((s) => s.outcome));
    const fulfilled = { status: 'fulfilled', value: undefined };
    expect(await settled(sent)).toEqual(sent.map(() => fulfilled));
    await eventually(() => sent.length === 3, "the answer's complete handed to the socket");
    expect(sent.map((s) => JSON.parse(s.data))).toEqual([
      { type: 'pong' },
      { id: 'q', type: 'next', payload: { data: { __typename: 'Query' } } },
      { id: 'q', type: 'complete' },
    ]);
    expect(sent.map((s) => s.state !== raw.ws.OPEN)).toEqual([true, true, true]);
    expect(await settled(sent)).toEqual([fulfilled, fulfilled, fulfilled]);
    expect(t.logs.slice(logged).filter((l) => l.msg === 'graphql-ws message handling failed')).toEqual([]);
  });
});
