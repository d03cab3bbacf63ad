import { Writable } from 'node:stream';
import { asc, count, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversations, merchants, messages } from '../../src/db/schema.js';
import { createLogger } from '../../src/log.js';
import { loadDemoDataIfEmpty, seedDemoChat } from '../../src/resolvers/demo.js';
import { loadWorkbench } from '../../src/resolvers/workbench.js';
import { factories, privateTestDeps, type TestDeps } from '../support/deps.js';

// This file's database starts empty (the worker's shared one has other files' rows): the demo data is loaded here only.
let deps: TestDeps;
let f: ReturnType<typeof factories>;
beforeAll(async () => {
  deps = await privateTestDeps();
  f = factories(deps);
});
afterAll(async () => {
  await f.cleanup();
  await deps.close();
});

const rows = async (table: typeof merchants | typeof conversations | typeof messages) =>
  (await deps.db.select({ n: count() }).from(table))[0]?.n;

describe('The demo data', () => {
  it('is loaded on an empty database: alice’s two conversations, Lily pinned and read, 王先生 with three unread', async () => {
    const lines: string[] = [];
    const log = createLogger(
      'info',
      new Writable({
        write(chunk, _enc, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    expect(await rows(merchants)).toBe(0);
    await loadDemoDataIfEmpty({ ...deps, log });
    expect(lines.join('')).toContain('demo data loaded');
    const bids = (await deps.db.select({ bid: merchants.bid }).from(merchants)).map((m) => m.bid).sort();
    expect(bids).toEqual(['acme', 'demo']);

    const alice = await f.agentViewer('a_alice');
    const wb = await loadWorkbench(deps, alice, { wsAddress: '' });
    expect(wb.chatting.map((c) => [c.id, c.unreadCount, c.pinnedAt > 0])).toEqual([
      ['v_demo_lily', 0, true],
      ['v_demo_wang', 3, false],
    ]);
    const lily = await deps.db
      .select()
      .from(messages)
      .where(eq(messages.visitorId, 'v_demo_lily'))
      .orderBy(asc(messages.seq));
    expect(lily.filter((m) => m.senderType !== 'system').map((m) => [m.senderType, m.content])).toEqual([
      ['visitor', 'Hi! Is the blue summer dress still available in size M?'],
      ['agent', 'Hello Lily, yes it is, and it ships today.'],
      ['visitor', 'Thanks, that helps!'],
    ]);
  });

  it('is not loaded again on a database with data, and a visitor with a conversation is left alone', async () => {
    const before = {
      merchants: await rows(merchants),
      conversations: await rows(conversations),
      messages: await rows(messages),
    };
    const lines: string[] = [];
    const log = createLogger(
      'info',
      new Writable({
        write(chunk, _enc, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    await loadDemoDataIfEmpty({ ...deps, log });
    await seedDemoChat(deps);
    expect({
      merchants: await rows(merchants),
      conversations: await rows(conversations),
      messages: await rows(messages),
    }).toEqual(before);
    expect(lines).toEqual([]);
  });
});
