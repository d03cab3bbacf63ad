import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  authorizePrivateChannel,
  type ChannelGrant,
  sameIdentity,
  verifyPrivateSubscription,
  visitorOfChannelCapability,
} from '../../src/resolvers/channel-auth.js';
import { agentChannel, globalChannel } from '../../src/resolvers/events.js';
import { requireVisitor } from '../../src/resolvers/viewer.js';
import { issueVisitorToken, revokeVisitorToken } from '../../src/resolvers/visitor.js';
import { clientIp, codeOf, type Factories, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * docs/realtime.md "Pusher protocol": private- channels are signed by the authorization endpoint with the
 * merchant's app secret and subscribed under the identity the signature was issued to; visitor
 * channels are capabilities read by name while their visitor holds a live token.
 */
let deps: TestDeps;
let make: Factories;
useTestDeps((made) => ({ deps, f: make } = made));

let sockets = 0;
const socketId = () => `${process.pid}.${++sockets}`;
const agentGrant = (sessionId: string): ChannelGrant => ({ kind: 'agent', sessionId });

/** Pusher's signature as its documentation gives it, with the secret the gateway derives. */
function pusherSignature(merchantId: string, socket: string, channel: string) {
  const secret = createHmac('sha256', deps.config.sessionSecret).update(`pusher-app-secret:${merchantId}`).digest();
  return createHmac('sha256', secret).update(`${socket}:${channel}`).digest('hex');
}

async function merchantWithAgent() {
  const merchant = await make.merchant();
  const agent = await make.agent(merchant);
  return { merchant, agent, merchantRow: { id: merchant.merchantId, appkey: merchant.appkey } };
}

describe('authorization endpoint: private- channels', () => {
  it("signs the caller's own channels as <appkey>:<hex HMAC-SHA256 of socket_id:channel_name>", async () => {
    const { merchant, agent } = await merchantWithAgent();
    for (const channel of [`private-${agentChannel(agent.agentId)}`, `private-${globalChannel(merchant.bid)}`]) {
      const socket = socketId();
      const answer = await authorizePrivateChannel(deps, agent, agentGrant(agent.session.id), {
        socketId: socket,
        channelName: channel,
      });
      expect(answer.auth).toBe(`${merchant.appkey}:${pusherSignature(merchant.merchantId, socket, channel)}`);
    }
    const visitor = await make.visitor(merchant);
    const socket = socketId();
    const answer = await authorizePrivateChannel(
      deps,
      visitor,
      { kind: 'visitor', tokenHash: 'b' },
      {
        socketId: socket,
        channelName: `private-${visitor.channel}`,
      },
    );
    expect(answer.auth).toBe(
      `${merchant.appkey}:${pusherSignature(merchant.merchantId, socket, `private-${visitor.channel}`)}`,
    );
  });

  it('refuses a malformed socket_id or channel_name (BAD_USER_INPUT)', async () => {
    const { agent } = await merchantWithAgent();
    const channel = `private-${agentChannel(agent.agentId)}`;
    const grant = agentGrant(agent.session.id);
    const refused = (input: { socketId: unknown; channelName: unknown }) =>
      codeOf(authorizePrivateChannel(deps, agent, grant, input));
    for (const bad of [undefined, 42, '', '1', '1.', '.1', 'a.1', '1.2.3', ' 1.2', '1.2 ', '12345678901234567.1']) {
      expect(await refused({ socketId: bad, channelName: channel }), String(bad)).toBe('BAD_USER_INPUT');
    }
    // At most 16 digits each side is still a socket id.
    expect(await refused({ socketId: '1234567890123456.1234567890123456', channelName: channel })).toBe('no error');
    // Not private-, not a string, or longer than 200 characters.
    for (const bad of [
      agentChannel(agent.agentId),
      7,
      `presence-${agentChannel(agent.agentId)}`,
      `private-${'x'.repeat(193)}`,
    ]) {
      expect(await refused({ socketId: socketId(), channelName: bad }), String(bad)).toBe('BAD_USER_INPUT');
    }
  });

  it('an identity whose merchant is gone gets no signature (FORBIDDEN)', async () => {
    const { agent } = await merchantWithAgent();
    const orphan = { ...agent, merchantId: `gone-${process.pid}` };
    const channelName = `private-${agentChannel(agent.agentId)}`;
    expect(
      await codeOf(authorizePrivateChannel(deps, orphan, agentGrant('s'), { socketId: socketId(), channelName })),
    ).toBe('FORBIDDEN');
  });

  it('a channel of 200 characters is judged by the channel rules, not refused as too long', async () => {
    const { agent } = await merchantWithAgent();
    const name = `private-${'x'.repeat(192)}`;
    expect(name).toHaveLength(200);
    expect(
      await codeOf(authorizePrivateChannel(deps, agent, agentGrant('s'), { socketId: socketId(), channelName: name })),
    ).toBe('FORBIDDEN');
  });

  it("refuses another agent's or merchant's channel, and a ticket agent (FORBIDDEN)", async () => {
    const { merchant, agent } = await merchantWithAgent();
    const other = await merchantWithAgent();
    const ticket = await make.agent(merchant, { level: 'ticket_agent' });
    const grant = agentGrant(agent.session.id);
    for (const name of [agentChannel(other.agent.agentId), globalChannel(other.merchant.bid)]) {
      const channelName = `private-${name}`;
      expect(await codeOf(authorizePrivateChannel(deps, agent, grant, { socketId: socketId(), channelName }))).toBe(
        'FORBIDDEN',
      );
    }
    const own = `private-${agentChannel(ticket.agentId)}`;
    expect(await codeOf(authorizePrivateChannel(deps, ticket, grant, { socketId: socketId(), channelName: own }))).toBe(
      'FORBIDDEN',
    );
  });
});

describe('pusher:subscribe to a private- channel', () => {
  async function signed() {
    const m = await merchantWithAgent();
    const socket = socketId();
    const channel = `private-${agentChannel(m.agent.agentId)}`;
    const grant = agentGrant(m.agent.session.id);
    const { auth } = await authorizePrivateChannel(deps, m.agent, grant, { socketId: socket, channelName: channel });
    return { ...m, socket, channel, grant, auth };
  }

  it('runs under the identity the signature was issued to, taken once', async () => {
    const s = await signed();
    expect(await verifyPrivateSubscription(deps, s.merchantRow, s.socket, s.channel, s.auth)).toEqual(s.grant);
    // The grant is spent: the same signature again is refused.
    expect(await codeOf(verifyPrivateSubscription(deps, s.merchantRow, s.socket, s.channel, s.auth))).toBe('FORBIDDEN');
  });

  it('each socket and channel keeps its own grant: a later authorization does not replace an earlier one', async () => {
    const m = await merchantWithAgent();
    const visitor = await make.visitor(m.merchant);
    const first = {
      socket: socketId(),
      channel: `private-${agentChannel(m.agent.agentId)}`,
      grant: agentGrant('first'),
    };
    const second = {
      socket: socketId(),
      channel: `private-${globalChannel(m.merchant.bid)}`,
      grant: agentGrant('second'),
    };
    const third = {
      socket: first.socket,
      channel: `private-${visitor.channel}`,
      grant: { kind: 'visitor', tokenHash: 'b' } as const,
    };
    const auths = [];
    for (const [viewer, g] of [
      [m.agent, first],
      [m.agent, second],
      [visitor, third],
    ] as const) {
      auths.push(
        (await authorizePrivateChannel(deps, viewer, g.grant, { socketId: g.socket, channelName: g.channel })).auth,
      );
    }
    expect(await verifyPrivateSubscription(deps, m.merchantRow, first.socket, first.channel, auths[0])).toEqual(
      first.grant,
    );
    expect(await verifyPrivateSubscription(deps, m.merchantRow, second.socket, second.channel, auths[1])).toEqual(
      second.grant,
    );
    expect(await verifyPrivateSubscription(deps, m.merchantRow, third.socket, third.channel, auths[2])).toEqual(
      third.grant,
    );
  });

  it("refuses another socket's, another channel's or another merchant's signature, and anything not a string", async () => {
    const s = await signed();
    const other = await merchantWithAgent();
    const refused = (merchant: { id: string; appkey: string }, socket: string, channel: string, auth: unknown) =>
      codeOf(verifyPrivateSubscription(deps, merchant, socket, channel, auth));
    expect(await refused(s.merchantRow, socketId(), s.channel, s.auth)).toBe('FORBIDDEN');
    expect(await refused(s.merchantRow, s.socket, `private-${globalChannel(s.merchant.bid)}`, s.auth)).toBe(
      'FORBIDDEN',
    );
    expect(await refused(other.merchantRow, s.socket, s.channel, s.auth)).toBe('FORBIDDEN');
    // The right signature under another appkey, or cut short, or none at all.
    const signature = s.auth.slice(s.auth.indexOf(':') + 1);
    expect(await refused(s.merchantRow, s.socket, s.channel, `${other.merchant.appkey}:${signature}`)).toBe(
      'FORBIDDEN',
    );
    expect(await refused(s.merchantRow, s.socket, s.channel, `${s.merchant.appkey}:${signature.slice(1)}`)).toBe(
      'FORBIDDEN',
    );
    expect(await refused(s.merchantRow, s.socket, s.channel, signature)).toBe('FORBIDDEN');
    expect(await refused(s.merchantRow, s.socket, s.channel, undefined)).toBe('FORBIDDEN');
    // None of these spent the grant.
    expect(await verifyPrivateSubscription(deps, s.merchantRow, s.socket, s.channel, s.auth)).toEqual(s.grant);
  });

  it('a valid signature without its grant (never issued, or expired) is refused', async () => {
    const { merchant, merchantRow, agent } = await merchantWithAgent();
    const socket = socketId();
    const channel = `private-${agentChannel(agent.agentId)}`;
    const auth = `${merchant.appkey}:${pusherSignature(merchant.merchantId, socket, channel)}`;
    expect(await codeOf(verifyPrivateSubscription(deps, merchantRow, socket, channel, auth))).toBe('FORBIDDEN');
  });
});

describe('visitor channels as capabilities', () => {
  it("a visitor channel of the connection's merchant names its visitor while a token of it is live", async () => {
    const merchant = await make.merchant();
    const visitor = await make.visitor(merchant);
    expect(await visitorOfChannelCapability(deps, merchant.merchantId, visitor.channel)).toEqual(visitor);
    const other = await make.merchant();
    expect(await visitorOfChannelCapability(deps, other.merchantId, visitor.channel)).toBeUndefined();
    expect(await visitorOfChannelCapability(deps, merchant.merchantId, `${visitor.channel}x`)).toBeUndefined();
  });

  it('is no capability once its token is expired or revoked', async () => {
    const merchant = await make.merchant();
    const issued = await issueVisitorToken(deps, { appkey: merchant.appkey, nickname: 'v' }, clientIp());
    const visitor = await requireVisitor(deps, issued.token);
    const expiry = deps.now() + issued.expiresIn * 1000;
    const at = (ms: number) => ({ ...deps, now: () => ms });
    expect(await visitorOfChannelCapability(at(expiry - 5_000), merchant.merchantId, visitor.channel)).toEqual(visitor);
    expect(await visitorOfChannelCapability(at(expiry + 5_000), merchant.merchantId, visitor.channel)).toBeUndefined();
    expect(await revokeVisitorToken(deps, issued.token)).toBe(true);
    expect(await visitorOfChannelCapability(deps, merchant.merchantId, visitor.channel)).toBeUndefined();
  });
});

describe('one identity per socket', () => {
  it('the same Session, or the same bearer token, is the same identity; nothing else is', () => {
    expect(sameIdentity(agentGrant('s1'), agentGrant('s1'))).toBe(true);
    expect(sameIdentity(agentGrant('s1'), agentGrant('s2'))).toBe(false);
    expect(sameIdentity({ kind: 'visitor', tokenHash: 't1' }, { kind: 'visitor', tokenHash: 't1' })).toBe(true);
    expect(sameIdentity({ kind: 'visitor', tokenHash: 't1' }, { kind: 'visitor', tokenHash: 't2' })).toBe(false);
    expect(sameIdentity(agentGrant('t1'), { kind: 'visitor', tokenHash: 't1' })).toBe(false);
    expect(sameIdentity({ kind: 'visitor', tokenHash: 't1' }, agentGrant('t1'))).toBe(false);
  });
});
