import { and, asc, eq, isNotNull, ne, sql } from 'drizzle-orm';
import { z } from 'zod';
import { agentGroups, agents, conversations, merchants, visitors } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import { chargeContactDetails } from '../budgets/chat.js';
import { openConversation } from '../chat-rows.js';
import { auditedAgent, recordAudit } from '../desk/audit.js';
import { globalChannel } from '../events.js';
import { parseInput, text } from '../inputs.js';
import { webhookOutboxRow } from '../integration/webhooks/events.js';
import { enqueueRows, outboxRows, visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { type AgentViewer, requireAdmin, requireOnlineReception, TICKET_AGENT, type VisitorViewer } from '../viewer.js';
import { businessHoursAt } from './business-hours.js';
import { calendarsOf } from './calendars.js';

/**
 * Messages left: when nobody can answer (out of business hours, or no agent of the group online)
 * a visitor still writes, and nothing is refused. Its conversation is stored as a message left:
 * it stays open (queued) with its messages and attachments, the visitor is told plainly what
 * happens next (the assign answer and the event carry the notice), the merchant is notified
 * (`conversation.message_left` on `global-{bid}` and to its webhook endpoints), and agents find it in `messagesLeft`, oldest
 * first, to take it (claim) and answer; routing gives it to the first agent of its group that
 * comes online while the group is open. The idle close leaves it be while it waits.
 */

export type LeftReason = 'closed' | 'no_agent';
/** The contact details a merchant may ask for. */
export const CONTACT_FIELDS = ['name', 'email', 'phone'] as const;
export type ContactField = (typeof CONTACT_FIELDS)[number];

/** What the visitor is told when its conversation becomes a message left. */
export interface MessageLeftNotice {
  reason: LeftReason;
  /** The plain sentence shown to the visitor. */
  notice: string;
  /** Unix seconds of the next opening (reason `closed`), else null. */
  nextOpenAt: number | null;
  /** The contact details the merchant asks for. */
  contactFields: ContactField[];
}

export function noticeFor(reason: LeftReason, nextOpenAt: number | null, timezone: string): string {
  const when =
    reason === 'closed'
      ? nextOpenAt
        ? `We are closed right now; we open again on ${new Date(nextOpenAt * 1000).toLocaleString('en-GB', { timeZone: timezone, dateStyle: 'medium', timeStyle: 'short' })} (${timezone}).`
        : 'We are closed right now.'
      : 'No agent is online right now.';
  return `${when} Your message is kept and nothing is lost: an agent will answer it here as soon as possible. Come back to this page to read the answer.`;
}

/**
 * Why nobody can answer a new conversation of `groupId` now (out of hours first), or null when
 * someone can. Evaluated from the calendar and the agents' presence at each call.
 */
export async function nobodyToAnswer(
  deps: Deps,
  merchantId: string,
  groupId: string | null,
): Promise<{ reason: LeftReason; nextOpenAt: number | null; timezone: string } | null> {
  const cals = await calendarsOf(deps.db, merchantId, groupId);
  const hours = businessHoursAt(cals.group ?? cals.merchant, deps.now());
  if (!hours.open) return { reason: 'closed', nextOpenAt: hours.nextOpenAt, timezone: hours.timezone };
  const [candidates, [defaultGroup]] = await Promise.all([
    deps.db
      .select({ id: agents.id, groupId: agents.groupId })
      .from(agents)
      .where(and(eq(agents.merchantId, merchantId), eq(agents.disabled, false), ne(agents.level, TICKET_AGENT))),
    deps.db
      .select({ id: agentGroups.id })
      .from(agentGroups)
      .where(and(eq(agentGroups.merchantId, merchantId), eq(agentGroups.isDefault, true))),
  ]);
  const inGroup = candidates.filter((a) => (a.groupId ?? defaultGroup?.id ?? null) === groupId);
  for (const a of inGroup) if ((await deps.presence.stateOf(a.id)) === 'online') return null;
  return { reason: 'no_agent', nextOpenAt: null, timezone: hours.timezone };
}

/**
 * Makes a queued conversation a message left (once): the system message that tells the visitor,
 * and `conversation.message_left` to the merchant and the visitor. Returns the notice, or
 * undefined when it was no longer queued or already one.
 */
export async function leaveMessage(
  deps: Deps,
  merchantId: string,
  visitorId: string,
  why: { reason: LeftReason; nextOpenAt: number | null; timezone: string },
): Promise<MessageLeftNotice | undefined> {
  const now = deps.now();
  const notice = noticeFor(why.reason, why.nextOpenAt, why.timezone);
  const done = await deps.db.transaction(async (tx) => {
    const ctx = await openConversation(tx, merchantId, visitorId, { lock: true });
    if (!ctx || ctx.conversation.state !== 'queued' || ctx.conversation.leftAt) return false;
    const [updated] = await tx
      .update(conversations)
      .set({ leftAt: new Date(now), leftReason: why.reason })
      .where(eq(conversations.id, ctx.conversation.id))
      .returning();
    if (!updated) return false;
    const data = {
      conversationId: updated.id,
      visitorId,
      state: 'queued' as const,
      groupId: updated.groupId,
      reason: why.reason,
      nextOpenAt: why.nextOpenAt,
      notice,
    };
    const key = visitorKey(ctx.conversation.visitorId);
    await enqueueRows(tx, [
      ...outboxRows(key, [globalChannel(ctx.bid), ctx.visitorChannel], 'conversation.message_left', data),
      // The merchant's systems are told too (docs/integration.md "Webhooks").
      webhookOutboxRow(key, merchantId, updated.id, 'conversation.message_left', data, now),
    ]);
    return true;
  });
  if (!done) return undefined;
  await publishOutbox(deps, visitorKey(visitorId));
  return {
    reason: why.reason,
    notice,
    nextOpenAt: why.nextOpenAt,
    contactFields: await contactFieldsOf(deps, merchantId),
  };
}

/** The notice of a conversation that is a message left (its reason), for answers after the first. */
export async function noticeOf(
  deps: Deps,
  merchantId: string,
  c: { leftReason: string | null; groupId: string | null },
): Promise<MessageLeftNotice | null> {
  if (!c.leftReason) return null;
  const reason = c.leftReason as LeftReason;
  const cals = await calendarsOf(deps.db, merchantId, c.groupId);
  const hours = businessHoursAt(cals.group ?? cals.merchant, deps.now());
  return {
    reason,
    notice: noticeFor(reason, hours.nextOpenAt, hours.timezone),
    nextOpenAt: hours.nextOpenAt,
    contactFields: await contactFieldsOf(deps, merchantId),
  };
}

async function contactFieldsOf(deps: Deps, merchantId: string): Promise<ContactField[]> {
  const [m] = await deps.db
    .select({ fields: merchants.contactFields })
    .from(merchants)
    .where(eq(merchants.id, merchantId));
  return (m?.fields ?? []).filter((f): f is ContactField => (CONTACT_FIELDS as readonly string[]).includes(f));
}

// ---- the agents' list ----------------------------------------------------------------------

export const messagesLeftInput = z.object({
  first: z.number().int().min(1).max(100).default(20),
  after: text(200).optional(),
});

export interface MessageLeftView {
  conversationId: string;
  visitorId: string;
  visitorName: string;
  groupId: string | null;
  reason: LeftReason;
  /** Unix milliseconds. */
  leftAt: number;
  contact: Record<string, string>;
  lastSeq: number;
  /** The last message's summary (as a `chatting` entry's items). */
  items: unknown[];
}

const cursorOf = (v: MessageLeftView) =>
  Buffer.from(JSON.stringify([new Date(v.leftAt).toISOString(), v.conversationId])).toString('base64url');
function readCursor(cursor: string): [string, string] {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString());
    if (Array.isArray(v) && typeof v[0] === 'string' && typeof v[1] === 'string' && !Number.isNaN(Date.parse(v[0])))
      return [v[0], v[1]];
  } catch {
    // fall through
  }
  throw badInput('after is not a cursor of this list');
}

/** The merchant's messages left still waiting for an agent, oldest first; `after` is the previous page's `endCursor`. */
export async function listMessagesLeft(deps: Deps, viewer: AgentViewer, raw: z.input<typeof messagesLeftInput> = {}) {
  requireOnlineReception(viewer);
  const input = parseInput(messagesLeftInput, raw);
  const after = input.after ? readCursor(input.after) : undefined;
  const rows = await deps.db
    .select({ c: conversations, visitorName: visitors.nickname })
    .from(conversations)
    .innerJoin(visitors, and(eq(visitors.id, conversations.visitorId), eq(visitors.merchantId, viewer.merchantId)))
    .where(
      and(
        eq(conversations.merchantId, viewer.merchantId),
        eq(conversations.state, 'queued'),
        isNotNull(conversations.leftAt),
        after
          ? sql`(${conversations.leftAt}, ${conversations.id}) > (${after[0]}::timestamptz, ${after[1]})`
          : undefined,
      ),
    )
    .orderBy(asc(conversations.leftAt), asc(conversations.id))
    .limit(input.first + 1);
  const nodes: MessageLeftView[] = rows.slice(0, input.first).map(({ c, visitorName }) => ({
    conversationId: c.id,
    visitorId: c.visitorId,
    visitorName,
    groupId: c.groupId,
    reason: (c.leftReason ?? 'no_agent') as LeftReason,
    leftAt: c.leftAt?.getTime() ?? 0,
    contact: c.contact ?? {},
    lastSeq: c.lastSeq,
    items: c.items,
  }));
  const last = nodes.at(-1);
  return { nodes, hasNextPage: rows.length > input.first, endCursor: last ? cursorOf(last) : null };
}

// ---- contact details -----------------------------------------------------------------------

export const contactInput = z.object({
  name: text(100).optional(),
  email: z.string().max(254).email('must be an e-mail address').optional(),
  phone: z
    .string()
    .max(32)
    .regex(/^\+?[0-9 ().-]{4,31}$/, 'must be a phone number')
    .optional(),
});

/** The visitor leaves the contact details the merchant asks for, on its open conversation. */
export async function leaveContactDetails(
  deps: Deps,
  viewer: VisitorViewer,
  raw: z.input<typeof contactInput>,
): Promise<Record<string, string>> {
  const input = parseInput(contactInput, raw);
  // Anyone can get a visitor token: each call is a locked write, so it has a budget (budgets/chat.ts).
  await chargeContactDetails(deps, viewer);
  const asked = await contactFieldsOf(deps, viewer.merchantId);
  const given = Object.fromEntries(
    Object.entries(input).filter(([k, v]) => v !== undefined && asked.includes(k as ContactField)),
  ) as Record<string, string>;
  return deps.db.transaction(async (tx) => {
    const ctx = await openConversation(tx, viewer.merchantId, viewer.visitorId, { lock: true });
    if (!ctx) throw new DomainError('CONVERSATION_CLOSED', 'Write a message first');
    const contact = { ...(ctx.conversation.contact ?? {}), ...given };
    await tx.update(conversations).set({ contact }).where(eq(conversations.id, ctx.conversation.id));
    return contact;
  });
}

export const contactFieldsInput = z.object({ fields: z.array(z.enum(CONTACT_FIELDS)).max(3) });

/** Which contact details visitors leaving a message are asked for; admins only, audited. */
export async function updateContactFields(
  deps: Deps,
  viewer: AgentViewer,
  raw: z.input<typeof contactFieldsInput>,
): Promise<ContactField[]> {
  requireAdmin(viewer);
  const fields = [...new Set(parseInput(contactFieldsInput, raw).fields)];
  await deps.db.transaction(async (tx) => {
    const [before] = await tx
      .select({ fields: merchants.contactFields })
      .from(merchants)
      .where(eq(merchants.id, viewer.merchantId))
      .for('update');
    await tx
      .update(merchants)
      .set({ contactFields: fields, settingsVersion: sql`${merchants.settingsVersion} + 1` })
      .where(eq(merchants.id, viewer.merchantId));
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'contact_fields.updated',
      target: { type: 'merchant', id: viewer.merchantId },
      before: { contactFields: before?.fields ?? [] },
      after: { contactFields: fields },
    });
  });
  await deps.configCache.announceChanged(viewer.merchantId);
  return fields;
}
