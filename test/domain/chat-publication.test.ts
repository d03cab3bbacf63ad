import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { eventOutbox } from '../../src/db/schema.js';
import { agentChannel } from '../../src/resolvers/events.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { enqueueEvent, visitorKey } from '../../src/resolvers/outbox/enqueue.js';
import { drainOutbox, publishOutbox } from '../../src/resolvers/outbox/publish.js';
import { OUTBOX_LEASE_MS } from '../../src/resolvers/outbox/rounds.js';
import type { ChannelEvent } from '../../src/stores/bus.js';
import {
  eventually,
  type Factories,
  recordEvents,
  secondInstance,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

/**
 * Publication per conversation (docs/chat.md "Publication"): no cluster-wide turn. A conversation
 * whose publication is stalled holds up no other; each conversation's events leave in `seq`
 * order, once, whichever instance committed them.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const chat = () => f.assignedChat();

const seqs = (events: ChannelEvent[]) => events.map((e) => (e.data as { message: { seq: number } }).message.seq);

describe('Publication per conversation', () => {
  it("a conversation whose publication hangs does not delay another's: its send returns and its event arrives", async () => {
    const stuck = await chat();
    const free = await chat();
    const feed = recordEvents(deps, [stuck.visitor.channel, free.visitor.channel]);
    await feed.ready;
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered = () => {};
    const hanging = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const publish = deps.bus.publish;
    const stalled = {
      ...deps,
      bus: {
        ...deps.bus,
        publish: async (...args: Parameters<typeof publish>) => {
          if (args[0] === stuck.visitor.channel) {
            entered();
            await gate;
          }
          return publish.apply(deps.bus, args);
        },
      },
    } as TestDeps;
    try {
      const first = sendMessage(stalled, stuck.visitor, { clientMsgId: 's1', content: 'stuck' });
      await hanging;
      const sent = await sendMessage(stalled, free.visitor, { clientMsgId: 'f1', content: 'free' });
      await eventually(() => feed.of('message.created', free.visitor.channel).length === 1, 'the free event');
      expect(seqs(feed.of('message.created', free.visitor.channel))).toEqual([sent.message.seq]);
      expect(feed.of('message.created', stuck.visitor.channel)).toEqual([]);
      release();
      await first;
      await eventually(() => feed.of('message.created', stuck.visitor.channel).length === 1, 'the stuck event');
    } finally {
      release();
      feed.stop();
    }
  });

  // Two instances need a database both can open: PostgreSQL (PGlite is one process).
  it.runIf(process.env.DATABASE_URL)(
    'concurrent sends on two instances: every event of a conversation once, in seq order, on each of its channels',
    async () => {
      const other = await secondInstance();
      if (!other) throw new Error('a second instance needs DATABASE_URL');
      try {
        const chats = [await chat(), await chat(), await chat()];
        const channels = chats.flatMap((c) => [c.visitor.channel, agentChannel(c.agent.agentId)]);
        const feed = recordEvents(deps, channels);
        await feed.ready;
        const PER_SIDE = 15;
        await Promise.all(
          chats.flatMap(({ agent, visitor }) => [
            (async () => {
              for (let i = 0; i < PER_SIDE; i++)
                await sendMessage(deps, visitor, { clientMsgId: `v${i}`, content: `visitor ${i}` });
            })(),
            (async () => {
              for (let i = 0; i < PER_SIDE; i++)
                await sendMessage(other, agent, {
                  visitorId: visitor.visitorId,
                  clientMsgId: `a${i}`,
                  content: `agent ${i}`,
                });
            })(),
          ]),
        );
        const expected = 2 * PER_SIDE;
        for (const channel of channels)
          await eventually(
            () => feed.of('message.created', channel).length >= expected,
            `${expected} events on ${channel}`,
          );
        await new Promise((resolve) => setTimeout(resolve, 100)); // nothing more comes
        for (const channel of channels) {
          const got = seqs(feed.of('message.created', channel));
          // The conversation's first seq is its "joined" system message (assigned before the feed).
          expect(got).toEqual(Array.from({ length: expected }, (_, i) => i + 2));
        }
        feed.stop();
      } finally {
        await other.close();
      }
    },
  );
});

/**
 * Owned publication (src/resolvers/outbox/claimed.ts): a send that finds nothing of its key pending
 * claims its rows and publishes them itself after its commit, with no round; every other
 * publisher leaves the key while the claim stands.
 */
describe('Owned publication of a send', () => {
  const keyRows = (visitorId: string) =>
    deps.db
      .select()
      .from(eventOutbox)
      .where(eq(eventOutbox.orderKey, visitorKey(visitorId)))
      .orderBy(eventOutbox.id);

  /** `on` whose bus holds every publish on `channel` until `release()`; `entered` once one waits. */
  function stall(on: TestDeps, channel: string) {
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered = () => {};
    const waiting = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const publish = on.bus.publish;
    const bus = {
      ...on.bus,
      publish: async (...args: Parameters<typeof publish>) => {
        if (args[0] === channel) {
          entered();
          await gate;
        }
        return publish.apply(on.bus, args);
      },
    };
    return { deps: { ...on, bus } as TestDeps, release, entered: waiting };
  }

  it('a visitor send is two statements and one delete after its commit: no duplicate lookup first, no publication round', async () => {
    const { agent, visitor } = await chat();
    const feed = recordEvents(deps, [visitor.channel, agentChannel(agent.agentId)]);
    await feed.ready;
    await sendMessage(deps, visitor, { clientMsgId: 'warm', content: 'warm' });
    const statements: string[] = [];
    const stop = deps.database.onQuery((text) => void statements.push(text));
    let sent: Awaited<ReturnType<typeof sendMessage>>;
    try {
      sent = await sendMessage(deps, visitor, { clientMsgId: 'counted', content: 'counted' });
    } finally {
      stop();
    }
    // The lock and bump of the conversation; the message with its outbox rows; their delete once published.
    expect(statements.filter((t) => !/^\s*(begin|commit)/i.test(t))).toHaveLength(3);
    expect(statements.some((t) => /pg_try_advisory_xact_lock/.test(t))).toBe(false);
    await eventually(
      () => feed.of('message.created', agentChannel(agent.agentId)).length === 2,
      "both events at the agent's channel",
    );
    expect(seqs(feed.of('message.created', visitor.channel)).at(-1)).toBe(sent.message.seq);
    expect(await keyRows(visitor.visitorId)).toEqual([]);
    feed.stop();
  });

  it('a send finding an earlier row of its key pending claims nothing: the earlier event leaves first, then its own', async () => {
    const { visitor } = await chat();
    const feed = recordEvents(deps, [visitor.channel]);
    await feed.ready;
    // An event of the conversation committed and not yet published (its writer failed to publish).
    await deps.db.transaction((tx) =>
      enqueueEvent(tx, visitorKey(visitor.visitorId), visitor.channel, 'message.read', {
        conversationId: 'c',
        visitorId: visitor.visitorId,
        readerType: 'agent',
        readerId: 'a',
        seq: 1,
      }),
    );
    const sent = await sendMessage(deps, visitor, { clientMsgId: 'after', content: 'after the receipt' });
    await eventually(() => feed.events.length >= 2, 'both events');
    expect(feed.events.map((e) => e.event)).toEqual(['message.read', 'message.created']);
    expect(seqs(feed.of('message.created'))).toEqual([sent.message.seq]);
    expect(await keyRows(visitor.visitorId)).toEqual([]);
    feed.stop();
  });

  // The owner is another instance (on one instance, a key's publications queue behind each other).
  it.runIf(process.env.DATABASE_URL)(
    'a stalled owner holds its key no longer than the claim: rounds elsewhere leave the rows until then, the drain publishes them after it, and the owner sends nothing more when it wakes',
    async () => {
      const other = await secondInstance();
      if (!other) throw new Error('a second instance needs DATABASE_URL');
      const { visitor } = await chat();
      const feed = recordEvents(deps, [visitor.channel]);
      await feed.ready;
      const stalled = stall(other, visitor.channel);
      try {
        const hung = sendMessage(stalled.deps, visitor, { clientMsgId: 'stuck', content: 'stuck' });
        await stalled.entered; // committed and claimed on the other instance; its publication hangs
        const rows = await keyRows(visitor.visitorId);
        expect(rows.length).toBeGreaterThan(0);
        expect(rows.every((r) => r.claimedUntil !== null)).toBe(true);
        // While the claim stands, a round of the key and the drain leave it.
        // (The drain's count is not this key's alone: on PostgreSQL other files publish meanwhile.)
        await publishOutbox(deps, visitorKey(visitor.visitorId), { waitMs: 50 });
        await drainOutbox(deps, 0);
        expect(await keyRows(visitor.visitorId)).toHaveLength(rows.length);
        expect(feed.of('message.created')).toEqual([]);
        // Past the claim, the drain publishes them.
        await new Promise((resolve) => setTimeout(resolve, OUTBOX_LEASE_MS + 100));
        await eventually(async () => {
          await drainOutbox(deps, 0);
          return (await keyRows(visitor.visitorId)).length === 0;
        }, 'the rows drained');
        await eventually(() => feed.of('message.created').length === 1, 'the event, from the drain');
        stalled.release();
        const answer = await hung;
        expect(answer.duplicate).toBe(false);
        await new Promise((resolve) => setTimeout(resolve, 200));
        // The owner's late publish was refused (past its claim): the event arrived once.
        expect(seqs(feed.of('message.created'))).toEqual([answer.message.seq]);
      } finally {
        stalled.release();
        feed.stop();
        await other.close();
      }
    },
  );

  it('a failed owned publication releases the claim: the next round publishes the rows, in order before a later send', async () => {
    const { visitor } = await chat();
    const feed = recordEvents(deps, [visitor.channel]);
    await feed.ready;
    const failing = {
      ...deps,
      bus: {
        ...deps.bus,
        publish: async () => {
          throw new Error('Connection is closed');
        },
      },
    } as TestDeps;
    const first = await sendMessage(failing, visitor, { clientMsgId: 'lost', content: 'first' });
    const left = await keyRows(visitor.visitorId);
    expect(left.length).toBeGreaterThan(0);
    expect(left.every((r) => r.claimedUntil === null)).toBe(true);
    const second = await sendMessage(deps, visitor, { clientMsgId: 'next', content: 'second' });
    await eventually(() => feed.of('message.created').length >= 2, 'both events');
    expect(seqs(feed.of('message.created'))).toEqual([first.message.seq, second.message.seq]);
    expect(await keyRows(visitor.visitorId)).toEqual([]);
    const [{ n } = { n: -1 }] = await deps.db
      .select({ n: sql<number>`count(*)::int` })
      .from(eventOutbox)
      .where(eq(eventOutbox.orderKey, visitorKey(visitor.visitorId)));
    expect(Number(n)).toBe(0);
    feed.stop();
  });
});
