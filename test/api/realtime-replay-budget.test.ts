import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { visitorChannel, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { type ChannelSubscription, closeAllSockets, connectSocket, eventually } from '../support/ws.js';

/**
 * History replays (issue 27; docs/security.md "resource exhaustion over sockets"): a subscription
 * with `since` replays the channel's kept history, so a subscribe/complete loop made the instance
 * read it again and again, bounded only by the per-socket subscribe rate. Replays are counted per
 * identity and per client address when a subscription asks for one, before any history is read.
 */
const PER_IDENTITY = 3;
const PER_ADDRESS = 5;

let t: TestApp;
/** History reads the fan-out asked the bus for (a replay after `since`). */
let replays = 0;
beforeAll(async () => {
  t = await startTestApp({
    env: {
      TRUST_PROXY: 'on',
      WS_HISTORY_REPLAYS_PER_MINUTE: String(PER_IDENTITY),
      WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE: String(PER_ADDRESS),
    },
  });
  const bus = t.app.deps.bus;
  const subscribe = bus.subscribe.bind(bus);
  bus.subscribe = (channel, opts) => {
    if (opts?.since) replays++;
    return subscribe(channel, opts);
  };
});
afterEach(() => closeAllSockets());
afterAll(() => t?.stop());

/** A fresh visitor's graphql-ws socket from `address`, acknowledged, with its channel and a resume position. */
async function visitorFrom(address: string) {
  const { token } = await visitorToken(t.url);
  const channel = await visitorChannel(t.url, token);
  const socket = connectSocket(
    t.wsUrl,
    { appkey: 'demo-appkey', authorization: `Bearer ${token}` },
    { headers: { 'x-forwarded-for': address } },
  );
  await socket.acked;
  const first = socket.channel(channel);
  const since = await eventually(() => first.cursor, 'the subscribed position');
  first.unsubscribe();
  /** Subscribes with `since` and, once the replay was read, completes (the loop of the finding). */
  const resume = async () => {
    const before = replays;
    const sub = socket.channel(channel, since);
    // A refused subscription ends at once with its error and no event (as the resolver's refusals do).
    const outcome = await Promise.race([
      sub.ended.then((how) => (sub.errors ? ('refused' as const) : how)),
      eventually(() => replays > before, 'the replay read').then(() => 'replayed' as const),
    ]);
    sub.unsubscribe();
    return { outcome, sub };
  };
  return { socket, channel, since, resume };
}

function expectRefused(sub: ChannelSubscription, variable: string) {
  expect(sub.errors?.[0]).toMatchObject({ extensions: { code: 'RATE_LIMITED' } });
  expect(sub.errors?.[0]?.message).toContain(variable);
}

describe('history replays have a budget (issue 27)', () => {
  it('a subscribe/complete loop with since: WS_HISTORY_REPLAYS_PER_MINUTE per identity, then RATE_LIMITED with no history read', async () => {
    const me = await visitorFrom('10.27.0.1');
    for (let i = 0; i < PER_IDENTITY; i++) expect((await me.resume()).outcome).toBe('replayed');
    const before = replays;
    const refused = await me.resume();
    expect(refused.outcome).toBe('refused');
    expect(refused.sub.events).toEqual([]);
    expectRefused(refused.sub, 'WS_HISTORY_REPLAYS_PER_MINUTE');
    expect(replays).toBe(before);
    // Only replays are budgeted: the socket stays, and a subscription without since still goes live.
    const live = me.socket.channel(me.channel);
    await eventually(() => live.cursor, 'a subscription without since');
  });

  it('identities of one address share WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE (visitor tokens are free); another address unaffected', async () => {
    const address = '10.27.0.2';
    const first = await visitorFrom(address);
    for (let i = 0; i < PER_IDENTITY; i++) expect((await first.resume()).outcome).toBe('replayed');
    const second = await visitorFrom(address);
    for (let i = PER_IDENTITY; i < PER_ADDRESS; i++) expect((await second.resume()).outcome).toBe('replayed');
    const before = replays;
    const refused = await second.resume();
    expect(refused.outcome).toBe('refused');
    expect(refused.sub.events).toEqual([]);
    expectRefused(refused.sub, 'WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE');
    expect(replays).toBe(before);
    const elsewhere = await visitorFrom('10.27.0.3');
    expect((await elsewhere.resume()).outcome).toBe('replayed');
  });

  it('the defaults are twice the subscription caps: resuming every subscription the caps allow never reaches them', () => {
    const config = loadConfig({ NODE_ENV: 'test' });
    expect(config.historyReplays).toEqual({ perIdentityPerMinute: 200, perAddressPerMinute: 2000 });
    expect(config.historyReplays.perIdentityPerMinute).toBe(2 * config.realtimeLimits.subscriptionsPerIdentity);
    expect(config.historyReplays.perAddressPerMinute).toBe(2 * config.realtimeLimits.subscriptionsPerAddress);
  });
});
