import { asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { auditLog, cannedResponses } from '../../src/db/schema.js';
import { newId } from '../../src/ids.js';
import {
  createCannedResponse,
  deleteCannedResponse,
  listCannedResponses,
  MAX_CANNED_CONTENT,
  MAX_PERSONAL_CANNED,
  updateCannedResponse,
} from '../../src/resolvers/desk/canned.js';
import { type Factories, refusalOf, type TestDeps, useTestDeps } from '../support/deps.js';

/** Canned responses (docs/desk.md "Canned responses"): owners, search, budgets. */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

describe('canned responses: the merchant’s and each agent’s own', () => {
  it('an agent sees the merchant’s responses and its own, never another agent’s or another merchant’s', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const alice = await f.agent(m);
    const bob = await f.agent(m);
    const other = await f.agent(await f.merchant(), { level: 'admin' });
    const shared = await createCannedResponse(deps, admin, { shortcut: 'hello', content: 'Hello!', scope: 'merchant' });
    const mine = await createCannedResponse(deps, alice, { shortcut: 'bye', content: 'Goodbye from Alice' });
    await createCannedResponse(deps, bob, { shortcut: 'bye', content: 'Goodbye from Bob' });
    await createCannedResponse(deps, other, { shortcut: 'hello', content: 'Another shop', scope: 'merchant' });

    expect(shared).toMatchObject({ scope: 'merchant', agentId: null, shortcut: 'hello', content: 'Hello!' });
    expect(mine).toMatchObject({ scope: 'personal', agentId: alice.agentId });
    expect(await listCannedResponses(deps, alice)).toEqual([mine, shared]);
    expect(await listCannedResponses(deps, alice, { scope: 'merchant' })).toEqual([shared]);
    expect(await listCannedResponses(deps, alice, { scope: 'personal' })).toEqual([mine]);
  });

  it('search matches the start of a shortcut (a leading / ignored) or any part of the content; % and _ are literal', async () => {
    const m = await f.merchant();
    const alice = await f.agent(m);
    const hello = await createCannedResponse(deps, alice, { shortcut: 'hello', content: 'Hi there' });
    const ship = await createCannedResponse(deps, alice, { shortcut: 'ship', content: 'It ships in 100% of cases' });
    const shortcuts = async (search: string) =>
      (await listCannedResponses(deps, alice, { search })).map((c) => c.shortcut);
    expect(await shortcuts('/hel')).toEqual(['hello']);
    expect(await shortcuts('HEL')).toEqual(['hello']);
    expect(await shortcuts('llo')).toEqual([]); // not the start of a shortcut, not in a content
    expect(await shortcuts('THERE')).toEqual(['hello']);
    expect(await shortcuts('100%')).toEqual(['ship']);
    expect(await shortcuts('%')).toEqual(['ship']);
    expect(await shortcuts('_')).toEqual([]);
    expect((await listCannedResponses(deps, alice, { search: '' })).map((c) => c.id)).toEqual([hello.id, ship.id]);
  });

  it('only administrators create, change or delete the merchant’s responses (FORBIDDEN); an agent manages its own', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const alice = await f.agent(m);
    expect(await refusalOf(createCannedResponse(deps, alice, { shortcut: 'x', content: 'x', scope: 'merchant' }))).toBe(
      'FORBIDDEN: Only an admin of the merchant may do this',
    );
    const shared = await createCannedResponse(deps, admin, { shortcut: 'hi', content: 'Hi', scope: 'merchant' });
    expect(await refusalOf(updateCannedResponse(deps, alice, { id: shared.id, content: 'Changed' }))).toMatch(
      /^FORBIDDEN/,
    );
    expect(await refusalOf(deleteCannedResponse(deps, alice, { id: shared.id }))).toMatch(/^FORBIDDEN/);
    const changed = await updateCannedResponse(deps, admin, { id: shared.id, content: 'Hi again' });
    expect(changed).toMatchObject({ id: shared.id, shortcut: 'hi', content: 'Hi again', scope: 'merchant' });

    const own = await createCannedResponse(deps, alice, { shortcut: 'mine', content: 'Mine' });
    expect(await updateCannedResponse(deps, alice, { id: own.id, shortcut: 'mine2' })).toMatchObject({
      shortcut: 'mine2',
      content: 'Mine',
    });
    // Another agent's personal response does not exist for an administrator either.
    expect(await refusalOf(deleteCannedResponse(deps, admin, { id: own.id }))).toBe(
      'NOT_FOUND: No such canned response',
    );
    expect(await deleteCannedResponse(deps, alice, { id: own.id })).toMatchObject({ id: own.id, shortcut: 'mine2' });
    expect(await listCannedResponses(deps, alice)).toEqual([changed]);
  });

  it('a shortcut is unique within its owner, case-insensitively; the same shortcut in two owners is fine', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const alice = await f.agent(m);
    await createCannedResponse(deps, alice, { shortcut: 'Thanks', content: 'a' });
    expect(await refusalOf(createCannedResponse(deps, alice, { shortcut: 'thanks', content: 'b' }))).toBe(
      'BAD_USER_INPUT: shortcut /thanks is already used',
    );
    await createCannedResponse(deps, admin, { shortcut: 'thanks', content: 'c', scope: 'merchant' });
    const other = await createCannedResponse(deps, alice, { shortcut: 'other', content: 'd' });
    expect(await refusalOf(updateCannedResponse(deps, alice, { id: other.id, shortcut: 'THANKS' }))).toBe(
      'BAD_USER_INPUT: shortcut /THANKS is already used',
    );
  });

  it('sizes are capped with clear errors: content, shortcut form, and the number an agent keeps', async () => {
    const m = await f.merchant();
    const alice = await f.agent(m);
    expect(
      await refusalOf(
        createCannedResponse(deps, alice, { shortcut: 'long', content: 'x'.repeat(MAX_CANNED_CONTENT + 1) }),
      ),
    ).toBe(`BAD_USER_INPUT: content must be at most ${MAX_CANNED_CONTENT} characters`);
    expect(await refusalOf(createCannedResponse(deps, alice, { shortcut: 'two words', content: 'x' }))).toBe(
      'BAD_USER_INPUT: shortcut must be 1-32 letters, digits, _ or - (no spaces)',
    );
    expect(await refusalOf(createCannedResponse(deps, alice, { shortcut: 'x', content: '   ' }))).toBe(
      'BAD_USER_INPUT: content is required',
    );
    // Fill the budget directly, then the next one is refused.
    await deps.db.insert(cannedResponses).values(
      Array.from({ length: MAX_PERSONAL_CANNED }, (_, i) => ({
        id: newId('canned'),
        merchantId: m.merchantId,
        agentId: alice.agentId,
        shortcut: `s${i}`,
        content: 'x',
      })),
    );
    expect(await refusalOf(createCannedResponse(deps, alice, { shortcut: 'one-more', content: 'x' }))).toBe(
      `LIMIT_REACHED: An agent keeps at most ${MAX_PERSONAL_CANNED} personal canned responses: delete one first`,
    );
  });

  it('ticket agents have no online reception, so no canned responses (FORBIDDEN)', async () => {
    const m = await f.merchant();
    const ticket = await f.agent(m, { level: 'ticket_agent' });
    expect(await refusalOf(listCannedResponses(deps, ticket))).toMatch(/^FORBIDDEN/);
  });

  it('changes to the merchant’s responses are audited with before → after; an agent’s own are not', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const alice = await f.agent(m);
    const shared = await createCannedResponse(deps, admin, { shortcut: 'hi', content: 'Hi', scope: 'merchant' });
    await updateCannedResponse(deps, admin, { id: shared.id, content: 'Hello' });
    await deleteCannedResponse(deps, admin, { id: shared.id });
    const own = await createCannedResponse(deps, alice, { shortcut: 'mine', content: 'Mine' });
    await deleteCannedResponse(deps, alice, { id: own.id });
    await refusalOf(createCannedResponse(deps, alice, { shortcut: 'no', content: 'no', scope: 'merchant' }));
    const rows = await deps.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.merchantId, m.merchantId))
      .orderBy(asc(auditLog.id));
    expect(rows.map((r) => [r.action, r.actorId, r.targetId, r.before, r.after])).toEqual([
      ['canned_response.created', admin.agentId, shared.id, null, { shortcut: 'hi', content: 'Hi' }],
      [
        'canned_response.updated',
        admin.agentId,
        shared.id,
        { shortcut: 'hi', content: 'Hi' },
        { shortcut: 'hi', content: 'Hello' },
      ],
      ['canned_response.deleted', admin.agentId, shared.id, { shortcut: 'hi', content: 'Hello' }, null],
    ]);
  });
});
