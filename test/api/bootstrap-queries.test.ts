import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversations, visitors } from '../../src/db/schema.js';
import { agentSession } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { statementsOf } from './bootstrap.fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.stop());

describe('Agent workbench: data access', () => {
  it('is served with a fixed number of SQL statements: 50 conversations cost what 2 do (no N+1)', async () => {
    const alice = await agentSession(t.url, 'alice');
    const load = () => alice.client.json('/agent/data/get');
    // Warm: the merchant's configuration comes from the instance's cache (docs/operations.md "Configuration cache").
    await load();
    const withTwo = await statementsOf(t.app.deps.database, load);
    expect(Object.keys((await load()).body.data.chatting)).toHaveLength(2);

    const now = Math.floor(Date.now() / 1000);
    const extra = Array.from({ length: 48 }, (_, i) => `v_bulk_${String(i).padStart(2, '0')}`);
    await t.app.deps.db
      .insert(visitors)
      .values(extra.map((id) => ({ id, merchantId: 'm_demo', nickname: id, channel: `visitor-${id}` })));
    await t.app.deps.db.insert(conversations).values(
      extra.map((id, i) => ({
        id: `c_${id}`,
        merchantId: 'm_demo',
        agentId: 'a_alice',
        visitorId: id,
        timestamp: now - i,
        state: 'active' as const,
        items: [{ type: 'text', content: `message ${i}` }],
      })),
    );

    const withFifty = await statementsOf(t.app.deps.database, load);
    expect(Object.keys((await load()).body.data.chatting)).toHaveLength(50);
    expect(withFifty).toHaveLength(withTwo.length);
    // The agent, then its conversations with their visitors (merchant, groups and attribute definitions are cached).
    expect(withTwo.length).toBeGreaterThanOrEqual(2); // the counter sees them
    expect(withTwo.length).toBeLessThanOrEqual(5);
  });
});
