import { eq } from 'drizzle-orm';
import { describe, expect, it, vi } from 'vitest';
import { agents } from '../../src/db/schema.js';
import {
  authorizeChannel,
  endsSession,
  eventFate,
  isGatewayEventName,
  publishEvent,
  requireOwnAppkey,
  revalidateAgentSession,
} from '../../src/resolvers/channels.js';
import { eventNames } from '../../src/resolvers/event-catalog.js';
import { agentChannel, globalChannel, SESSION_ENDED, sessionFingerprint } from '../../src/resolvers/events.js';
import {
  CONNECTION_TTL_MS,
  HEARTBEAT_MS,
  readAgentState,
  settleExpiredPresence,
} from '../../src/resolvers/presence.js';
import { createRealtimeService } from '../../src/resolvers/realtime.js';
import type { ChannelEvent } from '../../src/stores/bus.js';
import {
  codeOf,
  eventually,
  type Factories,
  recordEvents,
  type TestDeps,
  testSession,
  useTestDeps,
} from '../support/deps.js';

/** docs/realtime.md: who may listen where, the appkey of a connection, Session ends, the internal publish API. */
let deps: TestDeps;
let make: Factories;
useTestDeps((made) => ({ deps, f: make } = made), { ownPresence: true });

const refusal = (work: () => void) => codeOf(Promise.resolve().then(work));

describe('channel rules', () => {
  it('a visitor listens to its own generated channel only', async () => {
    const merchant = await make.merchant();
    const visitor = await make.visitor(merchant);
    const other = await make.visitor(merchant);
    expect(await refusal(() => authorizeChannel(visitor, visitor.channel))).toBe('no error');
    for (const name of [other.channel, globalChannel(merchant.bid), `${visitor.channel} `]) {
      expect(await refusal(() => authorizeChannel(visitor, name)), name).toBe('FORBIDDEN');
    }
  });

  it('a refused channel name is echoed at most 100 characters long', async () => {
    const merchant = await make.merchant();
    const visitor = await make.visitor(merchant);
    const long = `x${'y'.repeat(1000)}`;
    const error = await Promise.resolve()
      .then(() => authorizeChannel(visitor, long))
      .catch((e: Error) => e);
    expect((error as Error).message).toBe(`Not allowed to subscribe to channel "x${'y'.repeat(99)}"`);
  });

  it("an agent listens to agent-{its id} and global-{its merchant's bid} only; a ticket agent to none", async () => {
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    const colleague = await make.agent(merchant);
    const otherMerchant = await make.merchant();
    const visitor = await make.visitor(merchant);
    for (const name of [agentChannel(agent.agentId), globalChannel(merchant.bid)]) {
      expect(await refusal(() => authorizeChannel(agent, name)), name).toBe('no error');
    }
    for (const name of [agentChannel(colleague.agentId), globalChannel(otherMerchant.bid), visitor.channel]) {
      expect(await refusal(() => authorizeChannel(agent, name)), name).toBe('FORBIDDEN');
    }
    const ticket = await make.agent(merchant, { level: 'ticket_agent' });
    expect(await refusal(() => authorizeChannel(ticket, agentChannel(ticket.agentId)))).toBe('FORBIDDEN');
  });

  it("a connection's appkey must be its identity's merchant's", async () => {
    const merchant = await make.merchant();
    const other = await make.merchant();
    const agent = await make.agent(merchant);
    const visitor = await make.visitor(merchant);
    for (const viewer of [agent, visitor]) {
      expect(await codeOf(requireOwnAppkey(deps, viewer, merchant.appkey))).toBe('no error');
      expect(await codeOf(requireOwnAppkey(deps, viewer, other.appkey))).toBe('FORBIDDEN');
      expect(await codeOf(requireOwnAppkey(deps, viewer, ''))).toBe('FORBIDDEN');
    }
  });
});

describe('Session end', () => {
  const ended = (data: unknown, event = SESSION_ENDED): ChannelEvent => ({
    id: '1-0',
    channel: 'agent-x',
    event,
    data,
    at: new Date().toISOString(),
  });

  it('a session.ended event ends the Sessions it names by fingerprint, no other', async () => {
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    const mine = sessionFingerprint(agent.session.id);
    expect(endsSession(ended({ reason: 'logout', sessions: ['other', mine] }), agent)).toBe(true);
    expect(endsSession(ended({ reason: 'logout', sessions: ['other'] }), agent)).toBe(false);
    expect(endsSession(ended({ reason: 'logout' }), agent)).toBe(false);
    expect(endsSession(ended({ sessions: [mine] }, 'agent.logout'), agent)).toBe(false);
    // The fingerprint, never the Session ID itself, is what the event carries.
    expect(endsSession(ended({ sessions: [agent.session.id] }), agent)).toBe(false);
  });

  it("an agent's own channel delivers its Session's end as the last event and skips other Sessions' ends", async () => {
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    const visitor = await make.visitor(merchant);
    const own = agentChannel(agent.agentId);
    const mine = ended({ reason: 'logout', sessions: [sessionFingerprint(agent.session.id)] });
    const other = ended({ reason: 'logout', sessions: ['someone-else'] });
    expect(eventFate(agent, own, mine)).toBe('last');
    expect(eventFate(agent, own, other)).toBe('skip');
    expect(eventFate(agent, own, ended({}, 'agent.login'))).toBe('deliver');
    // Elsewhere the end is watched beside the channel (SessionEndWatches); a visitor's channel just delivers.
    expect(eventFate(agent, globalChannel(merchant.bid), mine)).toBe('deliver');
    expect(eventFate(visitor, visitor.channel, mine)).toBe('deliver');
  });

  it("the instance's real-time service runs the presence heartbeat once started, and stops it and every Session-end wait", async () => {
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    const swept = { ...deps, now: () => Date.now() + CONNECTION_TTL_MS + 1_000 };
    // Only the heartbeat's interval is faked: the work it starts runs for real.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const service = createRealtimeService(deps);
    try {
      service.start();
      const wait = service.sessionEnds.watch(agent, new AbortController().signal);
      expect(await service.presence.connected(agent)).toBeDefined();
      // The store drops the connection as expired; the heartbeat brings it back.
      await settleExpiredPresence(swept);
      expect(await readAgentState(deps, agent.agent)).toBe('offline');
      vi.advanceTimersByTime(HEARTBEAT_MS);
      await eventually(async () => (await readAgentState(deps, agent.agent)) === 'online', 'the heartbeat');
      await service.stop();
      expect(await wait).toBeUndefined();
      // Stopped: no heartbeat any more.
      await settleExpiredPresence(swept);
      vi.advanceTimersByTime(HEARTBEAT_MS);
      expect(vi.getTimerCount()).toBe(0);
      expect(await readAgentState(deps, agent.agent)).toBe('offline');
    } finally {
      vi.useRealTimers();
    }
  });

  it('re-checking a live Session keeps the connection', async () => {
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    const ids = { agentId: agent.agentId, sessionId: agent.session.id };
    expect(await revalidateAgentSession(deps, agent.session, ids)).toBe(true);
  });

  it('a Session that expired silently ends its connections everywhere: session.ended, reason expired', async () => {
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    const recorder = recordEvents(deps, [agentChannel(agent.agentId)]);
    await recorder.ready;
    const gone = testSession({}); // the session store dropped its state
    expect(await revalidateAgentSession(deps, gone, { agentId: agent.agentId, sessionId: 'sid-1' })).toBe(false);
    expect(await revalidateAgentSession(deps, undefined, { agentId: agent.agentId, sessionId: 'sid-2' })).toBe(false);
    await eventually(() => recorder.of(SESSION_ENDED).length === 2, 'two session.ended');
    expect(recorder.of(SESSION_ENDED).map((e) => e.data)).toEqual([
      { reason: 'expired', sessions: [sessionFingerprint('sid-1')] },
      { reason: 'expired', sessions: [sessionFingerprint('sid-2')] },
    ]);
    recorder.stop();
  });

  it('a disabled agent ends with reason disabled, published once (not again as expired)', async () => {
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    const recorder = recordEvents(deps, [agentChannel(agent.agentId)]);
    await recorder.ready;
    await deps.db.update(agents).set({ disabled: true }).where(eq(agents.id, agent.agentId));
    const ids = { agentId: agent.agentId, sessionId: agent.session.id };
    expect(await revalidateAgentSession(deps, agent.session, ids)).toBe(false);
    await deps.bus.publish(agentChannel(agent.agentId), 'test.marker', {});
    await eventually(() => recorder.of('test.marker').length === 1, 'the marker after it');
    expect(recorder.of(SESSION_ENDED).map((e) => (e.data as { reason: string }).reason)).toEqual(['disabled']);
    recorder.stop();
  });

  it('a store outage while re-checking keeps the connection (retry later)', async () => {
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    const down = new Proxy(deps.db, {
      get: (target, key) =>
        key === 'select'
          ? () => {
              throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
            }
          : Reflect.get(target, key),
    });
    const ids = { agentId: agent.agentId, sessionId: agent.session.id };
    expect(await revalidateAgentSession({ ...deps, db: down }, agent.session, ids)).toBe(true);
  });
});

describe('POST /internal/events: the gateway keeps its own event names', () => {
  it("refuses every catalogued name and every name in one of their namespaces or Pusher's, in any case", () => {
    for (const name of eventNames) {
      expect(isGatewayEventName(name), name).toBe(true);
      expect(isGatewayEventName(name.toUpperCase()), name).toBe(true);
    }
    for (const name of [
      'agent.anything',
      'Agent.New',
      'message.deleted',
      'conversation.x',
      'session.started',
      'visitor.left',
      'history.rewritten',
      'merchant.x',
      'visitor_token.x',
      'pusher:subscribe',
      'PUSHER:ping',
      'pusher_internal:member_added',
    ]) {
      expect(isGatewayEventName(name), name).toBe(true);
    }
  });

  it("lets other services' names through, even ones that merely start like the gateway's", () => {
    for (const name of ['order.paid', 'agent', 'agents.sync', 'typing2', 'subscribed.x', 'pusher', 'my.agent.x']) {
      expect(isGatewayEventName(name), name).toBe(false);
    }
  });

  it('publishes an allowed event as given, and nothing for a reserved one', async () => {
    const merchant = await make.merchant();
    const channel = globalChannel(merchant.bid);
    const recorder = recordEvents(deps, [channel]);
    await recorder.ready;
    expect(await codeOf(publishEvent(deps, { channel, event: 'agent.login', data: { forged: true } }))).toBe(
      'BAD_USER_INPUT',
    );
    const published = await publishEvent(deps, { channel, event: 'order.paid', data: { order_id: 7 } });
    expect(published).toMatchObject({ channel, event: 'order.paid', data: { order_id: 7 } });
    await eventually(() => recorder.events.length >= 1, 'the published event');
    expect(recorder.events.map((e) => [e.event, e.data])).toEqual([['order.paid', { order_id: 7 }]]);
    recorder.stop();
  });
});
