import { describe, expect, it } from 'vitest';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { agentChannel } from '../../src/resolvers/events.js';
import { sendMessage } from '../../src/resolvers/messages.js';
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

async function chat(on: TestDeps = deps) {
  const m = await f.merchant();
  const agent = await f.agent(m);
  await f.online(agent);
  const visitor = await f.visitor(m);
  const assigned = await assignAgent(on, visitor);
  expect(assigned.state).toBe('active');
  return { m, agent, visitor };
}

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
