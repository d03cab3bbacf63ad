import { beforeAll, describe, expect, it } from 'vitest';
import {
  type EventData,
  type EventName,
  eventCatalog,
  eventNames,
  isReservedEventName,
  toWire,
  webhookEventNames,
} from '../../src/resolvers/event-catalog.js';
import {
  agentChannel,
  globalChannel,
  publish,
  publishAgentState,
  publishQuietly,
  publishSessionEnded,
  sessionFingerprint,
} from '../../src/resolvers/events.js';
import { HISTORY_GAP, SUBSCRIBED } from '../../src/stores/bus.js';
import { eventually, metricValue, recordEvents, type TestDeps, testDeps } from '../support/deps.js';

/**
 * docs/realtime.md "Events the gateway publishes": every event declared once, its payload published in the
 * documented snake_case wire shape, mapped from the domain's camelCase by the catalog.
 */
let deps: TestDeps;
beforeAll(async () => {
  deps = await testDeps();
});

const attachment = {
  attachmentId: 'a1',
  kind: 'image' as const,
  mime: 'image/png',
  size: 12,
  name: 'p.png',
  url: '/u',
  thumbnailUrl: null,
};
const attachmentWire = {
  attachment_id: 'a1',
  kind: 'image',
  mime: 'image/png',
  size: 12,
  name: 'p.png',
  url: '/u',
  thumbnail_url: null,
};
const message = {
  id: 'm1',
  conversationId: 'c1',
  visitorId: 'v1',
  seq: 3,
  senderType: 'agent' as const,
  senderId: 'ag1',
  clientMsgId: 'k1',
  type: 'image' as const,
  content: 'hi',
  attachment,
  meta: { x: 1 },
  createdAt: 1700000000000,
  recalled: false,
};
const messageWire = {
  id: 'm1',
  conversation_id: 'c1',
  visitor_id: 'v1',
  seq: 3,
  sender_type: 'agent',
  sender_id: 'ag1',
  client_msg_id: 'k1',
  type: 'image',
  content: 'hi',
  attachment: attachmentWire,
  meta: { x: 1 },
  created_at: 1700000000000,
  recalled: false,
};
const ref = { conversationId: 'c1', visitorId: 'v1', state: 'active' as const };
const refWire = { conversation_id: 'c1', visitor_id: 'v1', state: 'active' };
const alice = { agentId: 'ag1', nickname: 'Alice', avatar: '/a.png' };
const aliceWire = { agent_id: 'ag1', nickname: 'Alice', avatar: '/a.png' };

/** One domain payload of every event and the wire payload docs/realtime.md documents for it. */
const examples: { [N in EventName]: [EventData<N>, unknown] } = {
  'agent.login': [
    { agentId: 'ag1', nickname: 'Alice' },
    { agent_id: 'ag1', nickname: 'Alice' },
  ],
  'agent.logout': [{ agentId: 'ag1' }, { agent_id: 'ag1' }],
  'agent.state': [
    { agentId: 'ag1', state: 'busy', reason: 'manual' },
    { agent_id: 'ag1', state: 'busy', reason: 'manual' },
  ],
  'agent.level_changed': [
    { agentId: 'ag1', level: 'agent' },
    { agent_id: 'ag1', level: 'agent' },
  ],
  'session.ended': [
    { reason: 'logout', sessions: ['f1'] },
    { reason: 'logout', sessions: ['f1'] },
  ],
  'visitor.online': [
    { uid: 'v1', nickname: 'Bob' },
    { uid: 'v1', nickname: 'Bob' },
  ],
  'message.created': [
    { message, botId: 'bot_1' },
    { message: messageWire, bot_id: 'bot_1' },
  ],
  'message.read': [
    { conversationId: 'c1', visitorId: 'v1', readerType: 'visitor', readerId: 'v1', seq: 4 },
    { conversation_id: 'c1', visitor_id: 'v1', reader_type: 'visitor', reader_id: 'v1', seq: 4 },
  ],
  typing: [
    { conversationId: 'c1', visitorId: 'v1', senderType: 'agent', senderId: 'ag1', typing: true },
    { conversation_id: 'c1', visitor_id: 'v1', sender_type: 'agent', sender_id: 'ag1', typing: true },
  ],
  'conversation.queued': [
    { ...ref, state: 'queued', groupId: 'g1', queuePosition: 2 },
    { ...refWire, state: 'queued', group_id: 'g1', queue_position: 2 },
  ],
  'conversation.queue_position': [
    { ...ref, state: 'queued', groupId: null, queuePosition: 3 },
    { ...refWire, state: 'queued', group_id: null, queue_position: 3 },
  ],
  'conversation.assigned': [
    { ...ref, agent: alice, by: 'claim' },
    { ...refWire, agent: aliceWire, by: 'claim' },
  ],
  'conversation.transferred': [
    { ...ref, fromAgentId: 'ag0', to: alice, groupId: null },
    { ...refWire, from_agent_id: 'ag0', to: aliceWire, group_id: null },
  ],
  'conversation.requeued': [
    { ...ref, state: 'queued', fromAgentId: 'ag0', groupId: 'g1', reason: 'agent_offline' },
    { ...refWire, state: 'queued', from_agent_id: 'ag0', group_id: 'g1', reason: 'agent_offline' },
  ],
  'conversation.closed': [
    { ...ref, state: 'closed', agentId: 'ag1', closedBy: 'idle' },
    { ...refWire, state: 'closed', agent_id: 'ag1', closed_by: 'idle' },
  ],
  'conversation.rating_invited': [
    { conversationId: 'c1', rating: true, resolved: false },
    { conversation_id: 'c1', rating: true, resolved: false },
  ],
  'note.created': [
    {
      note: {
        id: 'note_1',
        conversationId: 'c1',
        visitorId: 'v1',
        agentId: 'ag1',
        agentNickname: 'Alice',
        afterSeq: 2,
        content: 'VIP: ships free',
        createdAt: 1700000000000,
      },
    },
    {
      note: {
        id: 'note_1',
        conversation_id: 'c1',
        visitor_id: 'v1',
        agent_id: 'ag1',
        agent_nickname: 'Alice',
        after_seq: 2,
        content: 'VIP: ships free',
        created_at: 1700000000000,
      },
    },
  ],
  'conversation.message_left': [
    { ...ref, state: 'queued', groupId: null, reason: 'closed', nextOpenAt: 1800000000, notice: 'Closed.' },
    { ...refWire, state: 'queued', group_id: null, reason: 'closed', next_open_at: 1800000000, notice: 'Closed.' },
  ],
  'business_hours.changed': [
    { groupId: null, open: false, nextOpenAt: 1800000000, timezone: 'Europe/Paris' },
    { group_id: null, open: false, next_open_at: 1800000000, timezone: 'Europe/Paris' },
  ],
  'conversation.created': [
    { ...ref, state: 'queued', groupId: null },
    { ...refWire, state: 'queued', group_id: null, bot_id: null },
  ],
  'conversation.handed_off': [
    { ...ref, state: 'queued', botId: 'bot_1', groupId: 'g1', reason: 'timeout' },
    { ...refWire, state: 'queued', bot_id: 'bot_1', group_id: 'g1', reason: 'timeout' },
  ],
  'conversation.rated': [
    { ...ref, state: 'closed', score: 5, resolved: true, comment: null },
    { ...refWire, state: 'closed', score: 5, resolved: true, comment: null },
  ],
  'visitor.created': [
    { visitorId: 'v1', nickname: 'Bob', externalUserId: null },
    { visitor_id: 'v1', nickname: 'Bob', external_user_id: null },
  ],
  'webhook.test': [{ endpointId: 'e1' }, { endpoint_id: 'e1' }],
  'merchant.config_changed': [{ merchantId: 'mc1' }, { merchant_id: 'mc1' }],
  'visitor_token.revoked': [{ tokenHash: 'h1' }, { token_hash: 'h1' }],
  subscribed: [{}, {}],
  'history.gap': [{ since: '1-0' }, { since: '1-0' }],
};

describe('the event catalog', () => {
  it('maps every event from the domain’s camelCase to its documented wire payload, which its schema accepts', () => {
    expect(Object.keys(examples).sort()).toEqual([...eventNames].sort());
    for (const name of eventNames) {
      const [domain, wire] = examples[name];
      expect(toWire(name, domain as never), name).toEqual(wire);
      expect(eventCatalog[name].payload.safeParse(wire).success, name).toBe(true);
    }
  });

  it('a wire payload with a field its declaration does not name is refused (strict shapes)', () => {
    for (const name of eventNames) {
      const [, wire] = examples[name];
      expect(eventCatalog[name].payload.safeParse({ ...(wire as object), extra: 1 }).success, name).toBe(false);
    }
    const nested = { message: { ...messageWire, attachment: { ...attachmentWire, extra: 1 } } };
    expect(eventCatalog['message.created'].payload.safeParse(nested).success).toBe(false);
    const agent = { ...refWire, agent: { ...aliceWire, extra: 1 }, by: 'claim' };
    expect(eventCatalog['conversation.assigned'].payload.safeParse(agent).success).toBe(false);
  });

  it('the wire shapes accept every documented value of their enumerations and nothing else', () => {
    const accepts = (name: EventName, wire: unknown) => eventCatalog[name].payload.safeParse(wire).success;
    const enums: [EventName, (value: string) => unknown, string[]][] = [
      [
        'message.created',
        (kind) => ({ message: { ...messageWire, attachment: { ...attachmentWire, kind } }, bot_id: null }),
        ['image', 'file', 'video', 'voice'],
      ],
      [
        'message.created',
        (sender_type) => ({ message: { ...messageWire, sender_type }, bot_id: null }),
        ['visitor', 'agent', 'system', 'bot'],
      ],
      [
        'message.created',
        (type) => ({ message: { ...messageWire, type }, bot_id: null }),
        ['text', 'image', 'file', 'voice', 'video', 'system'],
      ],
      [
        'message.read',
        (reader_type) => ({ ...(examples['message.read'][1] as object), reader_type }),
        ['visitor', 'agent'],
      ],
      ['typing', (sender_type) => ({ ...(examples.typing[1] as object), sender_type }), ['visitor', 'agent']],
      [
        'conversation.closed',
        (state) => ({ ...(examples['conversation.closed'][1] as object), state }),
        ['queued', 'active', 'closed'],
      ],
      [
        'conversation.assigned',
        (by) => ({ ...(examples['conversation.assigned'][1] as object), by }),
        ['routing', 'claim'],
      ],
      [
        'conversation.closed',
        (closed_by) => ({ ...(examples['conversation.closed'][1] as object), closed_by }),
        ['visitor', 'agent', 'idle'],
      ],
    ];
    for (const [name, payload, values] of enums) {
      for (const value of values) expect(accepts(name, payload(value)), `${name} ${value}`).toBe(true);
      expect(accepts(name, payload('')), `${name} ''`).toBe(false);
    }
    // A stored message's seq starts at 1; sizes and times are integers; no attachment, no meta and a null client_msg_id are fine.
    expect(accepts('message.created', { message: { ...messageWire, seq: 0 } })).toBe(false);
    expect(accepts('message.created', { message: { ...messageWire, seq: 1.5 } })).toBe(false);
    expect(accepts('message.created', { message: { ...messageWire, created_at: 1.5 } })).toBe(false);
    expect(
      accepts('message.created', { message: { ...messageWire, attachment: { ...attachmentWire, size: 1.5 } } }),
    ).toBe(false);
    expect(
      accepts('message.created', {
        message: { ...messageWire, attachment: null, meta: null, client_msg_id: null },
        bot_id: null,
      }),
    ).toBe(true);
    expect(accepts('message.read', { ...(examples['message.read'][1] as object), seq: 1.5 })).toBe(false);
    expect(
      accepts('conversation.queued', { ...(examples['conversation.queued'][1] as object), queue_position: 1.5 }),
    ).toBe(false);
  });

  it('every event reaches a documented audience; the instances’ own events reach no client; the bus’s own are marked so', () => {
    const internal = ['merchant.config_changed', 'visitor_token.revoked'];
    for (const name of eventNames) {
      const { audiences, origin } = eventCatalog[name] as { audiences: readonly string[]; origin?: string };
      expect(audiences.length, name).toBeGreaterThan(0);
      for (const audience of audiences)
        expect(['global', 'agent', 'visitor', 'admin', 'internal', 'webhook'], name).toContain(audience);
      expect(audiences.includes('internal'), name).toBe(internal.includes(name));
      if (internal.includes(name)) expect(audiences, name).toEqual(['internal']);
      expect(origin === 'bus', name).toBe(name === SUBSCRIBED || name === HISTORY_GAP);
    }
  });

  it('webhook endpoints may ask for exactly the documented webhook events, each with a payload version', () => {
    expect([...webhookEventNames].sort()).toEqual([
      'conversation.assigned',
      'conversation.closed',
      'conversation.created',
      'conversation.handed_off',
      'conversation.message_left',
      'conversation.rated',
      'conversation.transferred',
      'message.created',
      'visitor.created',
      'webhook.test',
    ]);
    for (const name of webhookEventNames) expect((eventCatalog[name] as { webhook?: number }).webhook, name).toBe(1);
  });

  it('the gateway’s names are reserved exactly (the namespaces are the channel rules’ business)', () => {
    for (const name of eventNames) expect(isReservedEventName(name), name).toBe(true);
    for (const name of ['agent.other', 'toString', 'constructor', ''])
      expect(isReservedEventName(name), name).toBe(false);
  });
});

describe('publishing', () => {
  it('publish sends the wire payload on the channel', async () => {
    const channel = globalChannel(`ev${Date.now()}a`);
    const recorder = recordEvents(deps, [channel]);
    await recorder.ready;
    await publish(deps, channel, 'agent.login', { agentId: 'ag1', nickname: 'Alice' });
    await publishAgentState(deps, channel.slice('global-'.length), 'ag2', 'away', 'manual');
    await eventually(() => recorder.events.length === 2, 'two events');
    expect(recorder.events.map((e) => [e.event, e.data])).toEqual([
      ['agent.login', { agent_id: 'ag1', nickname: 'Alice' }],
      ['agent.state', { agent_id: 'ag2', state: 'away', reason: 'manual' }],
    ]);
    recorder.stop();
  });

  it('session.ended names the ended Sessions by fingerprint on the agent channel, never by ID', async () => {
    const agentId = `ag${Date.now()}`;
    const recorder = recordEvents(deps, [agentChannel(agentId)]);
    await recorder.ready;
    await publishSessionEnded(deps, agentId, ['sid-a', 'sid-b'], 'password_reset');
    await eventually(() => recorder.events.length === 1, 'session.ended');
    expect(recorder.events[0]).toMatchObject({
      event: 'session.ended',
      data: { reason: 'password_reset', sessions: [sessionFingerprint('sid-a'), sessionFingerprint('sid-b')] },
    });
    // 16 characters of base64url(SHA-256(ID)), as docs/realtime.md documents.
    expect(sessionFingerprint('sid-a')).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(sessionFingerprint('sid-a')).not.toBe(sessionFingerprint('sid-b'));
    recorder.stop();
  });

  it('publish fails when the bus does; publishQuietly counts the drop and goes on', async () => {
    const down = {
      ...deps,
      bus: {
        ...deps.bus,
        publish: () => Promise.reject(new Error('connect ECONNREFUSED')),
      },
    };
    await expect(publish(down, 'global-x', 'agent.logout', { agentId: 'ag1' })).rejects.toThrow('ECONNREFUSED');
    const before = await metricValue(deps, 'parley_events_dropped_total', { reason: 'publish_failed' });
    await expect(publishQuietly(down, 'global-x', 'agent.logout', { agentId: 'ag1' })).resolves.toBeUndefined();
    expect(await metricValue(deps, 'parley_events_dropped_total', { reason: 'publish_failed' })).toBe(before + 1);
  });
});
