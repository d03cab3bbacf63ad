import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agentGroups, agents, merchants } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { createAgent, issueOperatorVisitorToken, setMerchantSetting } from '../../src/resolvers/admin.js';
import { type Factories, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * The operator functions' edges by value (src/resolvers/admin.ts), beside test/domain/admin.test.ts:
 * an agent of a merchant without a default group, the whole-number rule of the numeric settings at
 * its 12-digit bound, the Default group's id, and the rate-limit subject of operator-issued tokens.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const merchantRow = async (id: string) => (await deps.db.select().from(merchants).where(eq(merchants.id, id)))[0];

describe('createMerchant', () => {
  it('its Default group has an id of the group kind', async () => {
    const m = await f.merchant();
    const groups = await deps.db.select().from(agentGroups).where(eq(agentGroups.merchantId, m.merchantId));
    expect(groups.map((g) => ({ id: g.id, name: g.name, isDefault: g.isDefault }))).toEqual([
      { id: expect.stringMatching(/^g_[0-9a-f]+$/), name: 'Default', isDefault: true },
    ]);
  });
});

describe('createAgent', () => {
  it('in a merchant without a default group and without a group named, the agent has no group', async () => {
    const m = await f.merchant();
    await deps.db.update(agentGroups).set({ isDefault: false }).where(eq(agentGroups.merchantId, m.merchantId));
    const created = await createAgent(deps, {
      bid: m.bid,
      username: `nogroup-${m.merchantId}`,
      password: 'password-1',
    });
    expect(created).toEqual({
      agentId: expect.stringMatching(/^a_/),
      username: `nogroup-${m.merchantId}`,
      bid: m.bid,
      level: 'agent',
    });
    const [row] = await deps.db.select().from(agents).where(eq(agents.id, created.agentId));
    expect(row).toMatchObject({
      merchantId: m.merchantId,
      groupId: null,
      nickname: `nogroup-${m.merchantId}`,
      level: 'agent',
    });
  });
});

describe('setMerchantSetting: whole numbers of at most 12 digits', () => {
  it('12 digits are a whole number (leading zeros too); 13 are not', async () => {
    const m = await f.merchant();
    const set = (key: 'max_concurrent_chats' | 'image_max_bytes', value: string) =>
      setMerchantSetting(deps, { bid: m.bid, key, value });
    expect(await set('max_concurrent_chats', '000000000007')).toMatchObject({ key: 'max_concurrent_chats', value: 7 });
    expect((await merchantRow(m.merchantId))?.maxConcurrentChats).toBe(7);
    await expect(set('image_max_bytes', '999999999999')).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      message: 'image_max_bytes must be between 0 and 4294967296',
    });
    await expect(set('max_concurrent_chats', '0000000000007')).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      message: 'max_concurrent_chats must be a whole number',
    });
    expect((await merchantRow(m.merchantId))?.maxConcurrentChats).toBe(7);
  });
});

describe('issueOperatorVisitorToken', () => {
  it('counts against the visitor-token limit under the subject "operator", not a client address', async () => {
    const m = await f.merchant();
    const charged: string[] = [];
    const counting = Object.assign(
      (limit: { name: string }) => {
        const limiter = deps.rateLimiter(limit as never);
        return {
          ...limiter,
          consume: (subject: string, ...rest: [never, never?]) => {
            charged.push(`${limit.name} ${subject}`);
            return limiter.consume(subject, ...rest);
          },
        };
      },
      { consumeInOrder: deps.rateLimiter.consumeInOrder.bind(deps.rateLimiter) },
    ) as unknown as Deps['rateLimiter'];
    const issued = await issueOperatorVisitorToken({ ...deps, rateLimiter: counting }, { appkey: m.appkey });
    expect(issued.token).toEqual(expect.any(String));
    expect(charged).toEqual(['visitor-token-ip operator']);
  });
});
