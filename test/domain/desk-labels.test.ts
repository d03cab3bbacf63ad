import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { auditLog, labels } from '../../src/db/schema.js';
import { newId } from '../../src/ids.js';
import { listConversations } from '../../src/resolvers/conversations/queries.js';
import {
  conversationLabels,
  createLabel,
  deleteLabel,
  labelConversation,
  labelsOfConversations,
  listLabels,
  MAX_LABELS,
  unlabelConversation,
} from '../../src/resolvers/desk/labels.js';
import { type Factories, refusalOf, type TestDeps, useTestDeps } from '../support/deps.js';

/** Labels (docs/desk.md "Labels"): the merchant's set, on conversations. */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

describe('labels of a merchant', () => {
  it('any agent creates labels; names are unique case-insensitively; another merchant sees none of them', async () => {
    const m = await f.merchant();
    const alice = await f.agent(m);
    const other = await f.agent(await f.merchant());
    const vip = await createLabel(deps, alice, { name: 'VIP', color: '#2563EB' });
    const bug = await createLabel(deps, alice, { name: 'bug' });
    expect(vip).toMatchObject({ name: 'VIP', color: '#2563eb' });
    expect(bug.color).toBe('#64748b');
    expect(await refusalOf(createLabel(deps, alice, { name: 'vip' }))).toBe(
      'BAD_USER_INPUT: a label named vip already exists',
    );
    expect(await refusalOf(createLabel(deps, alice, { name: 'x', color: 'red' }))).toMatch(/^BAD_USER_INPUT: color/);
    expect(await listLabels(deps, alice)).toEqual([bug, vip]);
    expect(await listLabels(deps, other)).toEqual([]);
    await createLabel(deps, other, { name: 'VIP' }); // its own namespace
  });

  it('a merchant keeps at most MAX_LABELS labels (LIMIT_REACHED)', async () => {
    const m = await f.merchant();
    const alice = await f.agent(m);
    await deps.db
      .insert(labels)
      .values(
        Array.from({ length: MAX_LABELS }, (_, i) => ({ id: newId('label'), merchantId: m.merchantId, name: `l${i}` })),
      );
    expect(await refusalOf(createLabel(deps, alice, { name: 'one more' }))).toBe(
      `LIMIT_REACHED: A merchant keeps at most ${MAX_LABELS} labels: delete one first`,
    );
  });

  it('agents label and unlabel a visitor’s conversation, idempotently; deleting a label (admins) takes it off', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const alice = await f.agent(m);
    await f.online(alice);
    const { visitor, conversationId } = await f.conversation(m);
    const vip = await createLabel(deps, alice, { name: 'VIP' });
    const bug = await createLabel(deps, alice, { name: 'bug' });
    await labelConversation(deps, alice, { visitorId: visitor.visitorId, labelId: vip.id });
    const twice = await labelConversation(deps, alice, { visitorId: visitor.visitorId, labelId: vip.id });
    const both = await labelConversation(deps, alice, { visitorId: visitor.visitorId, labelId: bug.id });
    expect(twice).toEqual({ conversationId, visitorId: visitor.visitorId, labels: [vip] });
    expect(both.labels).toEqual([bug, vip]);
    expect((await unlabelConversation(deps, alice, { visitorId: visitor.visitorId, labelId: bug.id })).labels).toEqual([
      vip,
    ]);
    expect(await refusalOf(deleteLabel(deps, alice, { id: vip.id }))).toMatch(/^FORBIDDEN/);
    expect(await deleteLabel(deps, admin, { id: vip.id })).toEqual(vip);
    const audit = await deps.db.select().from(auditLog).where(eq(auditLog.merchantId, m.merchantId));
    expect(audit.map((r) => [r.action, r.actorId, r.targetId, r.before, r.after])).toEqual([
      ['label.deleted', admin.agentId, vip.id, { name: 'VIP', color: vip.color }, null],
    ]);
    expect((await labelsOfConversations(deps, m.merchantId, [conversationId])).get(conversationId)).toEqual([]);
  });

  it('another merchant’s label or visitor does not exist here (NOT_FOUND)', async () => {
    const m = await f.merchant();
    const alice = await f.agent(m);
    const { visitor } = await f.conversation(m);
    const o = await f.merchant();
    const stranger = await f.agent(o);
    const theirs = await createLabel(deps, stranger, { name: 'theirs' });
    const { visitor: theirVisitor } = await f.conversation(o);
    const mine = await createLabel(deps, alice, { name: 'mine' });
    expect(await refusalOf(labelConversation(deps, alice, { visitorId: visitor.visitorId, labelId: theirs.id }))).toBe(
      'NOT_FOUND: No such label',
    );
    expect(
      await refusalOf(labelConversation(deps, alice, { visitorId: theirVisitor.visitorId, labelId: mine.id })),
    ).toBe('NOT_FOUND: No such visitor');
    expect(await refusalOf(deleteLabel(deps, await f.agent(o, { level: 'admin' }), { id: mine.id }))).toBe(
      'NOT_FOUND: No such label',
    );
  });

  it('the conversation list filters by label, whatever the scope; another merchant’s label matches nothing', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const alice = await f.agent(m, { maxConcurrentChats: 5 });
    await f.online(alice);
    const a = await f.conversation(m);
    const b = await f.conversation(m);
    const vip = await createLabel(deps, alice, { name: 'VIP' });
    await labelConversation(deps, alice, { visitorId: b.visitor.visitorId, labelId: vip.id });
    const visitors = async (viewer: typeof alice, input: Parameters<typeof listConversations>[2]) =>
      (await listConversations(deps, viewer, input)).nodes.map((c) => c.visitorId);
    expect((await visitors(alice, { scope: 'mine' })).sort()).toEqual(
      [a.visitor.visitorId, b.visitor.visitorId].sort(),
    );
    expect(await visitors(alice, { scope: 'mine', labelId: vip.id })).toEqual([b.visitor.visitorId]);
    expect(await visitors(admin, { scope: 'all', labelId: vip.id })).toEqual([b.visitor.visitorId]);
    const stranger = await f.agent(await f.merchant());
    const theirs = await createLabel(deps, stranger, { name: 'VIP' });
    expect(await visitors(admin, { scope: 'all', labelId: theirs.id })).toEqual([]);
    expect(await conversationLabels(deps, admin, { visitorId: b.visitor.visitorId })).toEqual({
      conversationId: b.conversationId,
      visitorId: b.visitor.visitorId,
      labels: [vip],
    });
  });
});
